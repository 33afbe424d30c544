"""The simulated device's interfaces: truth, clocks, logger modes, determinism, errors."""

from __future__ import annotations

import numpy as np
import pytest

import fingrav_native as fn
from fingrav_native.sim import _device as sim


def test_same_seed_same_campaign_and_different_seed_differs() -> None:
    def campaign(seed: int) -> tuple[np.ndarray, np.ndarray]:
        gpu = sim.SimGPU(seed=seed)
        for _ in range(5):
            gpu.idle(10_000_000)
            gpu.run("cb-4k-gemm", 6)
        return gpu.executions(), gpu.logs()

    e1, l1 = campaign(7)
    e2, l2 = campaign(7)
    e3, _ = campaign(8)
    assert np.array_equal(e1, e2) and np.array_equal(l1, l2)
    assert not np.array_equal(e1["end_ns"], e3["end_ns"])


def test_instantaneous_logs_equal_the_truth_at_their_sampling_instant() -> None:
    gpu = sim.SimGPU(seed=1)
    gpu.run("cb-4k-gemm", 40)
    logs = gpu.logs()
    truth = gpu.truth_power(logs["sample_ns"])
    for i, ch in enumerate(("total", "compute", "io", "memory")):
        np.testing.assert_allclose(logs[ch], truth[:, i], rtol=1e-4)
    assert np.all(logs["window_ns"] == 0)
    assert np.all(logs["publish_ns"] > logs["sample_ns"])


def test_windowed_logs_average_the_truth_over_their_window() -> None:
    gpu = sim.SimGPU(seed=2, logger_window_ns=500_000)
    gpu.run("cb-4k-gemm", 40)
    logs = gpu.logs()[2:]
    for log in logs[:20]:
        t = np.arange(log["sample_ns"] - log["window_ns"], log["sample_ns"], 500, dtype=np.int64)
        assert abs(gpu.truth_power(t)[:, 0].mean() - log["total"]) / log["total"] < 0.003
    assert np.all(logs["window_ns"] == 500_000)


def test_execution_energy_matches_the_integrated_truth() -> None:
    gpu = sim.SimGPU(seed=3)
    ex = gpu.run("cb-2k-gemm", 12).executions
    for e in ex[[0, 5, 11]]:
        t = np.arange(e["start_ns"], e["end_ns"], 100, dtype=np.int64)
        energy = gpu.truth_power(t)[:, 0].sum() * 100e-9
        assert abs(energy - e["energy_j"]) / e["energy_j"] < 0.005
        assert e["mean_total_w"] == pytest.approx(e["energy_j"] / ((e["end_ns"] - e["start_ns"]) * 1e-9))


def test_true_clock_maps_are_exact_inverses_with_the_configured_skew() -> None:
    gpu = sim.SimGPU(seed=4, device_skew_ppm=20.0, device_wander_ppm=0.0)
    t = np.array([1_000_000_000_000, 1_001_000_000_000], dtype=np.int64)
    ticks = gpu.device_ticks_at(t)
    tick_ns = gpu.params["device_tick_ns"]
    skew = (ticks[1] - ticks[0]) * tick_ns / 1e9 - 1
    assert skew * 1e6 == pytest.approx(20.0, abs=0.02)
    back = gpu.host_at_device_ticks(ticks.astype(float))
    assert np.all(np.abs(back - t) <= tick_ns)  # the counter floors to a tick


def test_bracketed_reads_contain_the_true_sampling_instant() -> None:
    gpu = sim.SimGPU(seed=5, read_outlier_prob=0.05)
    r = gpu.read_clocks(2000)
    hb, ticks, ha = r[:, 0], r[:, 1], r[:, 2]
    assert np.all(ha > hb)
    t = gpu.host_at_device_ticks(ticks.astype(float))
    tick_ns = gpu.params["device_tick_ns"]
    assert np.all(t >= hb - tick_ns) and np.all(t <= ha)
    rtt = ha - hb
    assert rtt.min() >= gpu.params["read_rtt_ns"]
    assert np.percentile(rtt, 99.9) > 10 * np.median(rtt) or rtt.max() > 20_000  # outliers exist


def test_logger_with_its_own_clock_stamps_logs_in_that_clock() -> None:
    gpu = sim.SimGPU(seed=6, logger_own_clock=1)
    gpu.run("mb-8k-gemv", 50)
    logs = gpu.logs()
    host = gpu.host_at_logger_ticks(logs["logger_ticks"].astype(float))
    assert np.all(np.abs(host - logs["sample_ns"]) <= gpu.params["logger_tick_ns"])
    # ...and not in the device clock.
    assert not np.allclose(logs["logger_ticks"], gpu.device_ticks_at(logs["sample_ns"]))


def test_observed_samples_come_after_publication_in_sample_format() -> None:
    gpu = sim.SimGPU(seed=7)
    gpu.run("cb-4k-gemm", 30)
    s, logs = gpu.samples(), gpu.logs()
    assert s.dtype == fn.SAMPLE_DTYPE
    assert len(s) > 0 and np.all(np.diff(s["source_seq"].astype(np.int64)) == 1)
    pub = logs["publish_ns"][s["source_seq"].astype(np.int64)]
    assert np.all(s["host_poll_begin_ns"] >= pub)
    assert np.all(s["host_ns"] - s["host_poll_begin_ns"] == int(gpu.params["poll_read_ns"]))


def test_user_defined_kernel_follows_its_activity_shape() -> None:
    gpu = sim.SimGPU(seed=8)
    kid = gpu.add_kernel(
        "two-phase", duration_ns=400_000, freq_sensitivity=0.5,
        shape=[(0.5, 1.0, 0.1, 0.1), (1.0, 0.1, 0.8, 0.8)], exec_cv=0.0, outlier_prob=0.0,
    )
    assert gpu.kernel_id("two-phase") == kid
    e = gpu.run("two-phase", 4).executions[-1]
    mid = (e["start_ns"] + e["end_ns"]) // 2
    first = gpu.truth_power(np.linspace(e["start_ns"] + 50_000, mid - 20_000, 20).astype(np.int64))
    second = gpu.truth_power(np.linspace(mid + 50_000, e["end_ns"] - 20_000, 20).astype(np.int64))
    assert first[:, 1].mean() > second[:, 1].mean() + 100  # compute
    assert second[:, 2].mean() > first[:, 2].mean() + 50   # io


def test_truth_is_nan_outside_the_recorded_trace() -> None:
    gpu = sim.SimGPU(seed=9)
    gpu.idle(1_000_000)
    assert np.all(np.isnan(gpu.truth_power([gpu.now() + 10_000_000])))


@pytest.mark.parametrize(
    "params,name",
    [({"cap_w": -1}, "cap_w"), ({"logger_window_ns": 5e9}, "logger_window_ns"),
     ({"read_asymmetry": 1.5}, "read_asymmetry"), ({"device_skew_ppm": 5000}, "device_skew_ppm"),
     ({"no_such_knob": 1}, "no_such_knob"), ({"f_park": 0.1}, "f_park")],
)
def test_invalid_parameters_name_the_parameter(params: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        sim.SimGPU(**params)


def test_invalid_kernels_and_runs_name_the_argument() -> None:
    gpu = sim.SimGPU()
    with pytest.raises(ValueError, match="unknown kernel 'cb-16k-gemm'.*cb-8k-gemm"):
        gpu.run("cb-16k-gemm", 3)
    with pytest.raises(ValueError, match="duration_ns"):
        gpu.add_kernel("neg", duration_ns=-5)
    with pytest.raises(ValueError, match=r"shape\[1\]"):
        gpu.add_kernel("bad-shape", duration_ns=1e5, shape=[(0.6, 1, 0, 0), (0.5, 1, 0, 0)])
    with pytest.raises(ValueError, match="count"):
        gpu.run("cb-4k-gemm", 0)
    with pytest.raises(ValueError, match="seed"):
        sim.SimGPU(seed=-1)
    with pytest.raises(ValueError, match="kernel=99"):
        gpu.kernel_id(99)
    with pytest.raises(ValueError, match="step_ns"):
        gpu.truth_trace(0, 10, 0)
    with pytest.raises(ValueError, match="already exists"):
        gpu.add_kernel("cb-4k-gemm", duration_ns=1e5)


def test_virtual_device_refuses_live_sampling_and_realtime_refuses_advance() -> None:
    with pytest.raises(ValueError, match="real time"):
        sim.SimGPU().power_source()
    live = sim.SimGPU(realtime=True)
    with pytest.raises(RuntimeError, match="virtual time"):
        live.device.advance(10)


def test_parameters_and_presets_are_documented() -> None:
    params = sim.parameters()
    assert len({p.name for p in params}) == len(params) > 40
    assert all(p.doc for p in params)
    names = {k["name"] for k in sim.kernel_presets()}
    assert {"cb-8k-gemm", "cb-4k-gemm", "cb-2k-gemm", "mb-8k-gemv", "mb-4k-gemv", "mb-2k-gemv",
            "allgather-64k", "allgather-128k", "allreduce-64k", "allreduce-128k",
            "allgather-512m", "allgather-1g", "allreduce-512m", "allreduce-1g"} <= names
    for k in sim.kernel_presets():
        assert 20_000 <= k["duration_ns"] <= 5_000_000  # the paper's range: tens of us to a few ms


def test_steady_state_index_on_hand_made_curves() -> None:
    flat_then = np.r_[np.linspace(100, 150, 20), np.full(30, 150.0)]
    assert sim.steady_state_index(flat_then, tolerance=0.01) == 19
    assert sim.steady_state_index(np.full(20, 5.0)) == 3
    with pytest.raises(ValueError, match="tolerance"):
        sim.steady_state_index(flat_then, tolerance=0)
    with pytest.raises(ValueError, match="power"):
        sim.steady_state_index([1.0, 2.0])
