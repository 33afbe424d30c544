"""The simulated device in real time, end to end through a live Sampler.

A ``SimGPU(realtime=True)`` runs GEMMs on the main thread while a
``fingrav_native.Sampler`` polls ``gpu.power_source(depth)`` faster than the
1 ms logger. What the sampler drains must be exactly the device's logs:
consecutive ``source_seq``, the same values, timestamps and windows as
``gpu.logs()`` for the same seq, never seen before they were published.

Nothing here asserts timing. The one thing a loaded machine may do is stall
the sampler thread for longer than ``depth`` logger periods; then logs are
legitimately lost, and the checks require that the loss is exactly such a
stall, reported (``source_missed``, ``FLAG_SOURCE_GAP``), and nothing else.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from fingrav_native.native import CHANNELS, FLAG_SOURCE_GAP, Sampler
from fingrav_native.sim import _device as sim

# Only ends a hang; the workloads below take tens of milliseconds.
HANG_TIMEOUT_S = 20.0


def run_sampled(gpu: sim.SimGPU, *, depth: int, period_ns: int, logs_wanted: int) -> tuple[np.ndarray, Sampler]:
    """GEMM sequences on this thread, a sampler on the device's logger, until
    `logs_wanted` logs were produced after the sampler started; returns what it drained."""
    sampler = Sampler(gpu.power_source(depth=depth), period_ns=period_ns)
    chunks = []
    deadline = time.monotonic() + HANG_TIMEOUT_S
    with sampler:
        n0 = len(gpu.logs())
        while len(gpu.logs()) < n0 + logs_wanted:
            assert time.monotonic() < deadline, "the real-time device stopped producing logs"
            gpu.sequence([("cb-4k-gemm", 10), ("mb-2k-gemv", 20)])
            gpu.idle(1e6)
            if sampler.available:
                chunks.append(sampler.drain())
    if sampler.available:
        chunks.append(sampler.drain())
    assert chunks, "the sampler drained nothing"
    return np.concatenate(chunks), sampler


def check_against_logs(samples: np.ndarray, sampler: Sampler, gpu: sim.SimGPU, depth: int) -> None:
    logs = gpu.logs()
    stats = sampler.stats()
    assert stats.drops == 0
    assert stats.read_errors == 0
    assert stats.samples == len(samples)
    assert np.array_equal(samples["seq"], np.arange(len(samples), dtype=np.uint64)), "ring overrun or reorder"

    # Every sample is one of the device's logs, bit for bit.
    lseq = logs["seq"].astype(np.int64)
    assert np.array_equal(lseq, np.arange(lseq[0], lseq[0] + len(lseq))), "gpu.logs() seq not contiguous"
    sseq = samples["source_seq"].astype(np.int64)
    assert sseq[0] >= lseq[0] and sseq[-1] <= lseq[-1]
    log = logs[sseq - lseq[0]]
    assert np.array_equal(log["seq"].astype(np.int64), sseq)
    for c in CHANNELS:
        np.testing.assert_array_equal(samples[c], log[c], err_msg=f"channel {c}")
    np.testing.assert_array_equal(samples["source_ts"], log["logger_ticks"])
    np.testing.assert_array_equal(samples["window_ns"], log["window_ns"])
    # The timestamp is the logger clock at the true sampling instant.
    np.testing.assert_array_equal(samples["source_ts"], gpu.logger_ticks_at(log["sample_ns"]))

    # Seen only after publication, within a poll's bracket.
    assert (samples["host_ns"] >= log["publish_ns"]).all(), "a log was seen before its publish_ns"
    assert (samples["host_poll_begin_ns"] <= samples["host_ns"]).all()
    assert (np.diff(samples["host_ns"]) >= 0).all()

    # Consecutive source_seq; a gap only where the sampler stalled for more
    # than `depth` logger periods: the poll after it returned a full `depth`
    # of readings (the newest), the first flagged, and the missed logs were
    # published after the poll before the stall began.
    d = np.diff(sseq)
    assert (d >= 1).all()
    gaps = np.nonzero(d > 1)[0]
    flagged = np.nonzero((samples["flags"] & FLAG_SOURCE_GAP) != 0)[0]
    np.testing.assert_array_equal(flagged, gaps + 1)
    assert stats.source_missed == int((d[gaps] - 1).sum())
    for i in gaps:
        after = samples["host_ns"] == samples["host_ns"][i + 1]
        assert int(after.sum()) == depth, f"gap {sseq[i]}->{sseq[i + 1]} without a full-depth poll after it"
        assert logs["publish_ns"][sseq[i] + 1 - lseq[0]] > samples["host_poll_begin_ns"][i], (
            f"log {sseq[i] + 1} was published before a poll that did not return it"
        )

    # Complete: every log published between the first sample and the last
    # poll was seen (or lost in such a stall).
    window = (lseq >= sseq[0]) & (logs["publish_ns"] <= samples["host_ns"][-1])
    assert int(window.sum()) == len(sseq) + stats.source_missed
    assert np.isin(sseq, lseq[window]).all()


@pytest.mark.parametrize("depth", [2, 64])
def test_live_sampler_sees_the_device_logs(depth: int) -> None:
    gpu = sim.SimGPU(seed=11, realtime=True)
    src = gpu.power_source(depth=depth)
    assert src.info.has_sequence
    assert src.info.native_period_ns == 1_000_000
    assert src.info.clock_domain == "sim-device"
    del src
    samples, sampler = run_sampled(gpu, depth=depth, period_ns=250_000, logs_wanted=30)
    check_against_logs(samples, sampler, gpu, depth)
    # The workload really ran while sampled: GEMM power is well above idle.
    assert samples["total"].max() > 1.3 * samples["total"].min()


def test_live_sampler_averaged_logger_in_its_own_clock() -> None:
    gpu = sim.SimGPU(seed=12, realtime=True, logger_window_ns=1e6, logger_own_clock=1)
    info = gpu.power_source(depth=8).info
    assert info.clock_domain == "sim-logger"
    assert info.window_ns == 1_000_000
    assert info.tick_ns == gpu.params["logger_tick_ns"]
    samples, sampler = run_sampled(gpu, depth=8, period_ns=200_000, logs_wanted=20)
    check_against_logs(samples, sampler, gpu, 8)
    assert (samples["window_ns"] > 0).all()
    assert (samples["window_ns"] <= 1_000_000).all()


def test_sequence_results_while_sampled() -> None:
    gpu = sim.SimGPU(seed=13, realtime=True)
    with Sampler(gpu.power_source(depth=4), period_ns=500_000):
        res = gpu.sequence([("mb-2k-gemv", 5), ("cb-2k-gemm", 3)])
    ex = res.executions
    assert list(ex["index"]) == list(range(8))
    assert (ex["run"] == res.run).all()
    assert (ex["start_ns"] >= res.host_begin_ns).all()
    assert (np.diff(ex["start_ns"]) > 0).all() and (ex["end_ns"] > ex["start_ns"]).all()
    assert (ex["end_ns"] <= res.host_end_ns).all()
    assert ex["host_sync_ns"][-1] <= res.host_end_ns
    assert len(res.samples) == 0  # in real time a Sampler does the observing


def test_power_source_needs_a_realtime_device_and_a_valid_depth() -> None:
    with pytest.raises(ValueError, match="realtime"):
        sim.SimGPU(seed=1).power_source()
    gpu = sim.SimGPU(seed=1, realtime=True)
    for bad in (0, 129):
        with pytest.raises(ValueError, match="depth"):
            gpu.power_source(depth=bad)


def test_logger_keeps_its_period_after_clear_records() -> None:
    # Virtual time: deterministic and instant; the same code runs in real time.
    gpu = sim.SimGPU(seed=1)
    gpu.idle(1e9)  # 1000 logs
    gpu.clear_records()
    gpu.idle(20e6)
    silent = gpu.now() - int(gpu.logs()["sample_ns"][-1])
    assert silent < 1.5 * gpu.params["logger_period_ns"], f"no log for the last {silent / 1e6:.1f} ms"
