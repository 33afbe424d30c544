"""A Recording is the log input of every analysis: stitch_logs, profile_trace and characterize_logs.

Each takes a Recording where it takes arrays, and gives the same result from it as from the arrays it holds,
to the bit; a Recording that lacks what the analysis needs is refused, naming the argument and what is
missing. The cases are closed-form records (a constant power, a boxcar sensor under a known square-wave load)
and the simulator's training loop, whose truth is not the code's own model.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

import fingrav_native as fg
from fingrav_native.clocks import fit_clock_map
from fingrav_native.files import PowerCapture
from fingrav_native.native import SAMPLE_DTYPE
from fingrav_native.records import Recording, make_executions
from fingrav_native.sensors import sensor_preset

RUNS, DURATION_NS, GAP_NS, OFFSET_NS = 60, 100_000, 10_000_000, 123_456_789


def _constant_record(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logs of a constant 300 W on a clock OFFSET_NS ahead of the host, one per run, and bracketed reads of it."""
    rng = np.random.default_rng(seed)
    starts = np.arange(RUNS, dtype=np.int64) * GAP_NS
    ex = make_executions(np.arange(RUNS), np.zeros(RUNS, int), np.zeros(RUNS, int), starts, starts + DURATION_NS)
    logs = np.zeros(RUNS, dtype=SAMPLE_DTYPE)
    host = starts + rng.integers(0, DURATION_NS, RUNS)
    logs["host_ns"] = host
    logs["source_ts"] = host + OFFSET_NS
    logs["seq"] = np.arange(RUNS)
    logs["total"] = 300.0 + rng.normal(0.0, 1.0, RUNS)
    for ch in ("compute", "io", "memory"):
        logs[ch] = np.nan
    t = np.arange(0, RUNS * GAP_NS, GAP_NS // 4, dtype=np.int64)
    brackets = np.column_stack([t, t + 500 + OFFSET_NS, t + 1000])  # the logger's clock read between host reads
    return logs, ex, brackets


def _recording(logs: np.ndarray, ex: np.ndarray | None, brackets: np.ndarray, **kw: object) -> Recording:
    return Recording(samples=logs, executions=ex, clocks={"logger": brackets},
                     source={"clock_domain": "logger", "tick_ns": 1.0}, **kw)  # type: ignore[arg-type]


def test_silently_wrong_stitch_logs_gives_the_same_profile_from_a_recording_as_from_its_arrays() -> None:
    logs, ex, brackets = _constant_record()
    sensor = sensor_preset("instant-1ms")
    lmap = fit_clock_map(brackets, tick_ns=1.0)
    want = fg.stitch_logs(logs, ex, lmap, execution_of_interest=0, sensor=sensor)
    # The Recording's brackets of its logs' clock are fitted into the map, its sensor taken.
    got = fg.stitch_logs(_recording(logs, ex, brackets, sensor=sensor), execution_of_interest=0)
    assert got.lois.tobytes() == want.lois.tobytes()
    for a, b in zip(got.stitched.channels, want.stitched.channels):
        assert a.mean.tobytes() == b.mean.tobytes() and a.fit_y.tobytes() == b.fit_y.tobytes()
    assert got.energy == want.energy
    # Closed form: a constant 300 W, every log placed inside its execution (the clock's offset removed).
    assert len(got.lois) == RUNS and abs(np.mean(got.lois["total"]) - 300.0) < 1.0
    # A map given explicitly is used over the brackets, to the bit too.
    explicit = fg.stitch_logs(_recording(logs, ex, brackets, sensor=sensor), logger_map=lmap,
                              execution_of_interest=0)
    assert explicit.lois.tobytes() == want.lois.tobytes()


@pytest.mark.parametrize(("change", "message"), [
    ({"executions": None}, r"^samples: the Recording holds no executions, which stitch_logs needs"),
    ({"executions": None, "markers": np.zeros(3, [("begin_ticks", "<i8"), ("end_ticks", "<i8")])},
     r"^samples: the Recording holds raw markers \(device ticks\) but no executions on the host clock"),
    ({"clocks": {}}, r"^logger_map: required: the Recording holds no bracketed reads of its logs' clock"),
])
def test_unclear_stitch_logs_refuses_a_recording_without_what_it_needs(change: dict, message: str) -> None:
    logs, ex, brackets = _constant_record()
    rec = _recording(logs, ex, brackets)
    with pytest.raises(ValueError, match=message):
        fg.stitch_logs(dataclasses.replace(rec, **change), execution_of_interest=0)


def test_unclear_stitch_logs_refuses_executions_given_twice_and_arrays_without_their_map() -> None:
    logs, ex, brackets = _constant_record()
    with pytest.raises(ValueError, match=r"^executions: the Recording given as samples holds its executions"):
        fg.stitch_logs(_recording(logs, ex, brackets), ex, execution_of_interest=0)
    with pytest.raises(ValueError, match=r"^executions: required with an array of samples"):
        fg.stitch_logs(logs, logger_map=fit_clock_map(brackets, tick_ns=1.0), execution_of_interest=0)
    with pytest.raises(ValueError, match=r"^logger_map: required with an array of samples"):
        fg.stitch_logs(logs, ex, execution_of_interest=0)


# ------------------------------------------------------------------ characterize_logs

PERIOD_NS, WINDOW_NS = 100e6, 25e6


def _square_wave_record(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A 25 ms boxcar sensor updating every 100 ms under a square-wave load of random lengths (from its definition)."""
    rng = np.random.default_rng(seed)
    edges = np.cumsum(rng.uniform(30e6, 130e6, 2 * 120)) + 200e6
    load = edges.reshape(-1, 2)
    updates = rng.uniform(0, PERIOD_NS) + np.arange(0.0, load[-1, 1] + 300e6, PERIOD_NS)
    on = np.zeros(len(updates))
    for s, e in load:
        on += np.clip(np.minimum(updates, e) - np.maximum(updates - WINDOW_NS, s), 0.0, None)
    logs = np.zeros(len(updates), dtype=SAMPLE_DTYPE)
    logs["host_ns"] = np.rint(updates).astype(np.int64)
    logs["source_ts"] = logs["host_ns"]
    logs["total"] = 100.0 + 200.0 * on / WINDOW_NS + rng.normal(0.0, 1.0, len(updates))
    starts, ends = np.rint(load[:, 0]).astype(np.int64), np.rint(load[:, 1]).astype(np.int64)
    n = len(load)
    return logs, make_executions(np.arange(n), np.zeros(n, int), np.zeros(n, int), starts, ends)


@pytest.mark.slow
def test_silently_wrong_characterize_logs_gives_the_same_sensor_from_a_recording_as_from_its_arrays() -> None:
    logs, ex = _square_wave_record()
    want = fg.characterize_logs(logs["host_ns"], logs["total"], np.column_stack([ex["start_ns"], ex["end_ns"]]),
                                split_check=False)
    got = fg.characterize_logs(Recording(samples=logs, executions=ex), split_check=False)
    assert got.sensor == want.sensor and got.step == want.step and got.period == want.period
    # Closed form: the boxcar's window and the update period come back.
    assert got.step is not None and got.step.shape == "boxcar"
    assert abs(got.step.window_ns - WINDOW_NS) <= max(3 * got.step.window_err_ns, 1e6)
    assert got.period.period_ns == pytest.approx(PERIOD_NS, rel=1e-3)


def test_unclear_characterize_logs_refuses_a_recording_without_what_it_needs() -> None:
    logs, ex = _square_wave_record()
    with pytest.raises(ValueError, match=r"^t_ns: the Recording holds no executions, which characterize_logs "
                                         r"\(the intervals the load was on\) needs"):
        fg.characterize_logs(Recording(samples=logs))
    no_host = np.zeros(len(logs), dtype=[("source_ts", "<i8"), ("total", "<f4")])
    with pytest.raises(ValueError, match=r"^t_ns: the Recording's logs have no host_ns field"):
        fg.characterize_logs(Recording(samples=no_host, executions=ex))
    with pytest.raises(ValueError, match=r"^power_w: the Recording given as t_ns holds it"):
        fg.characterize_logs(Recording(samples=logs, executions=ex), logs["total"])
    with pytest.raises(ValueError, match=r"^load: required with an array of times"):
        fg.characterize_logs(logs["host_ns"], logs["total"])


# ------------------------------------------------------------------ profile_trace and the capture


def test_data_loss_a_capture_is_a_recording_and_back_exactly() -> None:
    logs, _, brackets = _constant_record()
    cap = PowerCapture(samples=logs, epoch_brackets=brackets,
                       source={"name": "s", "clock_domain": "host-monotonic-raw", "tick_ns": 1.0,
                               "native_period_ns": 1_000_000, "window_ns": 0, "channels": ["total"]},
                       sensor=sensor_preset("instant-1ms"), period_ns=1_000_000, stats={"drops": 0},
                       meta={"device": "x"}, clock_brackets={"CLOCK_BOOTTIME": brackets + 7})
    rec = cap.to_recording()
    assert isinstance(rec, Recording) and set(rec.clocks) == {"CLOCK_REALTIME", "CLOCK_BOOTTIME"}
    back = PowerCapture.from_recording(rec)
    for name in ("samples", "epoch_brackets"):
        assert getattr(back, name).tobytes() == getattr(cap, name).tobytes(), name
    assert back.clock_brackets["CLOCK_BOOTTIME"].tobytes() == cap.clock_brackets["CLOCK_BOOTTIME"].tobytes()
    assert (back.source, back.sensor, back.period_ns, back.stats, back.meta) == (
        cap.source, cap.sensor, cap.period_ns, cap.stats, cap.meta)
    assert not hasattr(Recording, "from_capture")  # the capture converts itself: records/ is below files/


@pytest.mark.parametrize(("rec", "message"), [
    (Recording(samples=np.zeros(3, SAMPLE_DTYPE), clocks={"CLOCK_BOOTTIME": np.zeros((4, 3), np.int64)}),
     r"^samples: the Recording holds no CLOCK_REALTIME brackets \(clocks held: CLOCK_BOOTTIME\)"),
    (Recording(samples=np.zeros(3, SAMPLE_DTYPE), clocks={"CLOCK_REALTIME": np.zeros((4, 3), np.int64)}),
     r"^samples: the Recording's provenance has no 'period_ns'"),
    (Recording(samples=np.zeros(3, SAMPLE_DTYPE), executions=np.zeros(2, [("start_ns", "<i8")])),
     r"^samples: the Recording holds executions, which a power capture does not"),
])
def test_unclear_profile_trace_refuses_a_recording_without_what_it_needs(rec: Recording, message: str) -> None:
    with pytest.raises(ValueError, match=message):  # refused before the trace is read
        fg.profile_trace("no-such-trace.json", rec)


@pytest.mark.slow
def test_silently_wrong_profile_trace_gives_the_same_table_from_a_recording_as_from_its_capture(tmp_path) -> None:
    from fingrav_native.app import simulate_training_loop
    from sim_captures import host_stamped_capture

    loop = simulate_training_loop(100, seed=6, pause_every=0, logger_own_clock=0.0)
    trace = loop.write_trace(os.fspath(tmp_path / "t.json.gz"))
    cap = host_stamped_capture(loop)
    want = fg.profile_trace(trace, cap, min_executions=20)
    got = fg.profile_trace(trace, cap.to_recording(), min_executions=20)
    assert got.kernels.tobytes() == want.kernels.tobytes() and got.logs.tobytes() == want.logs.tobytes()
    # Beside a map, its logs and sensor are taken as arrays would be.
    lmap = cap.logger_map()
    arrays = fg.profile_trace(trace, cap.samples, lmap, sensor=cap.sensor, min_executions=20)
    mapped = fg.profile_trace(trace, cap.to_recording(), lmap, min_executions=20)
    assert mapped.kernels.tobytes() == arrays.kernels.tobytes()
    # Against the simulator's truth, each kernel's energy.
    for row, ep in zip(got.kernels, got.profiles):
        assert row["energy_j"] == pytest.approx(loop.truth_energy_j(ep.golden.run_ids), rel=0.06)
