"""An averaging sensor's logs checked against the trace's kernels for a clock mismatch (insitu._align_windows).

The simulator's training loop logged through 1 ms and 5 ms boxcars and a 1 ms first-order filter, with
the logs' stamps moved by a known clock mismatch (0, 1, 5 and 50 ms: a trace from another host, an NTP
step, a wrong baseTimeNanoseconds). Left unchecked for averaging sensors, every one of these tables
would print without a word, the worst kernel 100 % to 742 % off (bench/insitu_window_offset_bench.py --energies). Exact logs must not warn (pytest turns any warning into an error).
"""

from __future__ import annotations

import numpy as np
import pytest

from fingrav_native import profile_trace, sensor_preset
from fingrav_native.insitu import ClockMismatchWarning, measure_window_offset
from fingrav_native.insitu._align import WINDOW_SLACK_NS, mismatch_slack_ns
from fingrav_native.sensors import SensorModel
from fingrav_native.sim import Identity, logged_loop
from sim_captures import shared_loop

AVG_1MS = sensor_preset("amd-1ms-average")
AVG_5MS = SensorModel("avg-5ms", "window", period_ns=1e6, window_ns=5e6)
FILTER_1MS = SensorModel("filter-1ms", "window", period_ns=1e6, shape="first_order", tau_ns=1e6)


def _measured(loop, sensor: SensorModel, late_ns: float):
    """The windowed offset of the loop's logs stamped ``late_ns`` late (the trace's clock is the truth)."""
    ex = loop.trace.executions
    t = loop.samples["source_ts"].astype(np.float64) - loop.trace.origin_ns + late_ns
    w = np.where(loop.samples["window_ns"] > 0, loop.samples["window_ns"], sensor.window_ns).astype(np.float64)
    return measure_window_offset(t, loop.samples["total"].astype(np.float64), w, sensor,
                                 ex["start_ns"].astype(np.float64), ex["end_ns"].astype(np.float64), ex["kernel_id"])


@pytest.mark.parametrize("sensor", [AVG_1MS, AVG_5MS, FILTER_1MS], ids=["1ms", "5ms", "filter"])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_offset_through_windows_is_found_within_the_slack(sensor: SensorModel, seed: int) -> None:
    # Each mismatch comes back to within the measurement's slack (the exact logs' own bias, -14 to -25 us,
    # is the busy share's blindness to the power's shape and relaxation), its interval inside the slack too.
    loop = shared_loop(sensor, seed, 512)
    for late_ns in (0.0, 1e6, 5e6, 50e6):
        al, why = _measured(loop, sensor, late_ns)
        assert not why and al is not None and al.explained and not al.at_edge
        # A window's slack is 5 % of it, at least 50 us; a filter's response is as wide as a 2 tau window.
        width = {AVG_1MS: 1e6, AVG_5MS: 5e6, FILTER_1MS: 2e6}[sensor]
        slack = mismatch_slack_ns(al)
        assert al.window_ns == pytest.approx(width, rel=1e-3) and slack == max(WINDOW_SLACK_NS, 0.05 * width)
        assert abs(al.offset_ns + late_ns) < 0.6 * WINDOW_SLACK_NS, (late_ns, al)
        assert al.low_ns > -late_ns - slack and al.high_ns < -late_ns + slack
        assert al.zero_rejected or late_ns == 0


@pytest.mark.parametrize("sensor", [AVG_1MS, AVG_5MS], ids=["1ms", "5ms"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_logs_of_an_averaging_sensor_are_not_a_mismatch(sensor: SensorModel, seed: int) -> None:
    # Exact clocks: the offset is measured and reported, never applied, and nothing is warned.
    loop = shared_loop(sensor, seed, 512)
    tp = profile_trace(loop.trace, loop.samples, Identity(), sensor=sensor, attribution="instant")
    assert tp.alignment is not None and tp.alignment.window_ns > 0 and not tp.alignment_applied
    assert not any("clock mismatch" in w or "offset unchecked" in w for w in tp.warnings)
    assert "reported, not applied" in str(tp)


@pytest.mark.parametrize("sensor", [AVG_1MS, AVG_5MS], ids=["1ms", "5ms"])
@pytest.mark.parametrize("late_ns", [1_000_000, 5_000_000, 50_000_000])
def test_a_clock_mismatch_under_an_averaging_sensor_is_warned(sensor: SensorModel, late_ns: int) -> None:
    # "a clock mismatch beyond the map's bound never yields an unwarned table", for averaging
    # sensors too (the measurement was skipped for them: an exit-0 table, energies 100-550 % off).
    loop = shared_loop(sensor, 3, 512)
    late = loop.samples.copy()
    late["source_ts"] += late_ns
    with pytest.warns(ClockMismatchWarning, match="measured through their .* ms responses") as got:
        tp = profile_trace(loop.trace, late, Identity(), sensor=sensor, attribution="instant")
    assert f"{-late_ns / 1e3:+.1f}"[:-4] in str(got[0].message)  # the offset, to the millisecond
    assert not tp.alignment_applied
    assert any(w.startswith("clock mismatch: ") for w in tp.warnings)
    assert "warning: clock mismatch" in str(tp)


def test_the_default_joint_fit_warns_a_mismatch_and_keeps_the_map() -> None:
    # The default path (the joint timeline fit): warned, and the logs stay where the map puts them.
    loop = logged_loop(AVG_1MS, seed=4, iterations=512)
    late = loop.samples.copy()
    late["source_ts"] += 1_000_000
    with pytest.warns(ClockMismatchWarning, match=r"the power logs sit -10\d\d\.\d us"):
        tp = profile_trace(loop.trace, late, Identity(), sensor=AVG_1MS)
    assert tp.profiles[0].deconvolution is not None and not tp.alignment_applied
    assert np.array_equal(tp.logs["t_ns"] - 500_000, late["source_ts"] - 1_000_000 - loop.trace.origin_ns + 0.0)


def test_logs_that_do_not_follow_the_kernels_are_warned_through_windows() -> None:
    # 1 ms windows see very different mixes of kernels and gaps, so logs that ignore them are not of this run.
    loop = logged_loop(AVG_1MS, seed=5, iterations=512)
    flat = loop.samples.copy()
    flat["total"] = 300.0 + np.random.default_rng(4).normal(0.0, 2.0, len(flat))
    with pytest.warns(ClockMismatchWarning, match="kernels explain no more of the power logs' scatter than chance"):
        profile_trace(loop.trace, flat, Identity(), sensor=AVG_1MS, attribution="instant")


@pytest.mark.parametrize("sensor, why", [
    (sensor_preset("part-time-100ms"), "logs whose response stays inside the kernels' span"),  # 15 logs in all
    (SensorModel("avg-200ms", "window", period_ns=5e6, window_ns=200e6),
     "every response covers the kernels in about the same mix"),
], ids=["part-time", "200ms"])
def test_logs_that_cannot_place_themselves_are_noted_unchecked(sensor: SensorModel, why: str) -> None:
    # A 25 ms window every 100 ms over 1.5 s, or 200 ms averages of a 1.5 ms loop: no shift could show, and the
    # table says its clock map went unchecked (not a warning: nothing is known to be wrong).
    loop = logged_loop(sensor, seed=6, iterations=1024)
    al, got = _measured(loop, sensor, 0.0)
    assert why in got
    tp = profile_trace(loop.trace, loop.samples, Identity(), sensor=sensor, attribution="instant")
    assert any(w.startswith("offset unchecked: ") and why in w for w in tp.warnings)


def _window_call() -> dict[str, object]:
    """A valid call: 1 ms window averages of a loop of 1,400 kernels (sim.draw_schedule)."""
    from fingrav_native.sim import draw_schedule

    rng = np.random.default_rng(0)
    starts, ends, sig, _, _, _, end = draw_schedule(rng, 200, duration_jitter=0.005, pause_ns=300_000.0,
                                                    pause_jitter=0.1, warmup=0.04, warmup_iterations=10,
                                                    lead_ns=2e6, gap_range_ns=(2_000.0, 8_000.0))
    t = np.arange(0.0, end, 1e6) + 3e5
    return {"t_ns": t, "power_w": rng.normal(200.0, 2.0, len(t)), "windows_ns": np.full(len(t), 1e6),
            "sensor": AVG_1MS, "starts_ns": starts, "ends_ns": ends, "kernel_ids": sig}


@pytest.mark.parametrize("arg, value, named", [
    ("kernel_ids", "negative", "kernel_ids"),  # was read as signatures -3..1
    ("t_ns", None, "t_ns"),  # was "0 logs ...": no logs, said as if the logs were too few
    ("sensor", sensor_preset("instant-1ms"), "sensor"),  # was a window offset of logs of an instant
    ("sensor", "amd-1ms-average", "sensor"),  # was an AttributeError
    ("ends_ns", "before starts", "starts_ns, ends_ns"),  # was an offset of kernels ending before they start
    ("starts_ns", "one at 1e300", "starts_ns, ends_ns"),  # was an IndexError
    ("power_w", "negative", "power_w"),  # was an offset of negative power
    ("step_ns", 0.5, "search_ns="),  # a grid of millions of shifts, run for minutes
])
def test_unclear_wrong_input_to_measure_window_offset_is_refused_by_name(arg: str, value: object,
                                                                         named: str) -> None:
    call = _window_call()
    made = {"negative": lambda: -np.asarray(call[arg]) if arg == "power_w" else np.asarray(call[arg]) - 3,
            "before starts": lambda: np.asarray(call["starts_ns"]) - 1.0,
            "one at 1e300": lambda: np.r_[np.asarray(call[arg])[:-1], 1e300]}
    call[arg] = made[value]() if isinstance(value, str) and value in made else value
    with pytest.raises(ValueError, match=rf"^{named}"):
        measure_window_offset(**call)
