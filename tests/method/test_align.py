"""Step 6: LOI/TOI placement (align.py)."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from fingrav_native._core import CHANNELS, SAMPLE_DTYPE
from fingrav_native.method import _align as align
from fingrav_native.method import assign_logs_to_executions, place_logs, select_executions_of_interest
from fingrav_native.records import EXECUTION_DTYPE, LOI_DTYPE, make_executions

PROPS = settings(max_examples=100, deadline=None, database=None)


class AffineMap:
    """Stand-in clock map: host = offset + scale * ticks, a constant error bound."""

    def __init__(self, offset: float = 0.0, scale: float = 1.0, bound: float = 0.0) -> None:
        self.offset, self.scale, self.bound = offset, scale, bound

    def to_host(self, ticks):
        return self.offset + self.scale * np.asarray(ticks, dtype=np.float64)

    def error_bound_at(self, host_ns):
        return np.full(np.shape(host_ns), self.bound, dtype=np.float64)


def make_samples(host_ns, window_ns=0, *, offset=0.0, scale=1.0, total=None):
    """Samples whose source_ts maps to ``host_ns`` through AffineMap(offset, scale)."""
    host_ns = np.asarray(host_ns, dtype=np.float64)
    s = np.zeros(host_ns.size, dtype=SAMPLE_DTYPE)
    s["source_ts"] = np.round((host_ns - offset) / scale).astype(np.int64)
    s["window_ns"] = window_ns
    s["seq"] = np.arange(host_ns.size) + 100
    s["host_ns"] = host_ns.astype(np.int64) + 500
    s["total"] = np.arange(host_ns.size) * 10.0 + 100 if total is None else total
    s["compute"] = s["total"] * 0.5
    s["io"] = 1.0
    s["memory"] = 2.0
    return s


def two_runs():
    """Two runs of three 10 us executions, with start errors 20 and 40 ns.

    run 0: [0, 10k], [20k, 30k], [40k, 50k]
    run 1: [1000k, 1010k], [1020k, 1030k], [1040k, 1050k]   (kernel 7)
    """
    starts = np.array([0, 20e3, 40e3, 1000e3, 1020e3, 1040e3])
    return make_executions(
        [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2], [5, 5, 5, 7, 7, 7],
        starts, starts + 10e3, start_err_ns=np.array([20.0] * 3 + [40.0] * 3), end_err_ns=5.0,
    )


# ---------------------------------------------------------------- by hand


def test_instantaneous_logs_by_hand():
    ex = two_runs()
    # ticks are 10 ns, host = 1_000 + 10 * ticks, bound 50 ns
    m = AffineMap(offset=1_000.0, scale=10.0, bound=50.0)
    host = [5_000, 25_000, 35_000, 1_022_500, 1_029_000, 2_000_000]
    s = make_samples(host, offset=1_000.0, scale=10.0)
    lois = place_logs(s, ex, m, execution_of_interest=1)
    assert lois.dtype == LOI_DTYPE
    # 25 000 is 5 us into run 0's execution 1; 1 022 500 and 1 029 000 are
    # 2.5 and 9 us into run 1's execution 1. 5 000 is in execution 0 (not of
    # interest), 35 000 in a gap, 2 000 000 after everything.
    assert lois["run"].tolist() == [0, 1, 1]
    assert lois["execution"].tolist() == [1, 1, 1]
    assert lois["kernel_id"].tolist() == [5, 7, 7]
    assert lois["seq"].tolist() == [101, 103, 104]
    assert lois["host_ns"].tolist() == [25_000.0, 1_022_500.0, 1_029_000.0]
    assert lois["toi_ns"].tolist() == [5_000.0, 2_500.0, 9_000.0]
    assert lois["toi_frac"].tolist() == [0.5, 0.25, 0.9]
    assert lois["duration_ns"].tolist() == [10_000.0] * 3
    # clock bound 50 + start error (20 in run 0, 40 in run 1); no window
    assert lois["uncert_ns"].tolist() == [70.0, 90.0, 90.0]
    assert lois["overlap"].tolist() == [1.0] * 3
    assert lois["window_ns"].tolist() == [0.0] * 3
    assert lois["total"].tolist() == [110.0, 130.0, 140.0]
    assert lois["compute"].tolist() == [55.0, 65.0, 70.0]


def test_all_executions_when_none():
    ex = two_runs()
    s = make_samples([5_000, 25_000, 35_000, 1_045_000])
    lois = place_logs(s, ex, AffineMap())
    assert list(zip(lois["run"].tolist(), lois["execution"].tolist())) == [(0, 0), (0, 1), (1, 2)]
    assert lois["toi_ns"].tolist() == [5_000.0, 5_000.0, 5_000.0]


def test_closed_boundaries_for_instantaneous_logs():
    ex = two_runs()
    # exactly at the start, exactly at the end, 1 ns before the start
    s = make_samples([20_000, 30_000, 19_999])
    lois = place_logs(s, ex, AffineMap(), execution_of_interest=1)
    assert lois["toi_ns"].tolist() == [0.0, 10_000.0]
    assert lois["toi_frac"].tolist() == [0.0, 1.0]


def test_windowed_log_inside_uses_window_centre():
    ex = two_runs()
    # window [22 000, 26 000] inside run 0's execution 1 [20 000, 30 000]
    s = make_samples([26_000], window_ns=4_000)
    lois = place_logs(s, ex, AffineMap(bound=10.0), execution_of_interest=1)
    assert lois["toi_ns"].tolist() == [4_000.0]  # centre 24 000 - 20 000
    assert lois["overlap"].tolist() == [1.0]
    assert lois["window_ns"].tolist() == [4_000.0]
    assert lois["host_ns"].tolist() == [26_000.0]  # the window end, as recorded
    assert lois["uncert_ns"].tolist() == [10.0 + 20.0 + 2_000.0]


def test_windowed_log_straddling_start_is_attributed_to_its_inside_part():
    ex = two_runs()
    # window [18 000, 22 000]: half before the execution [20 000, 30 000]
    s = make_samples([22_000], window_ns=4_000)
    lois = place_logs(s, ex, AffineMap(), execution_of_interest=1)
    assert lois["overlap"].tolist() == [0.5]
    assert lois["toi_ns"].tolist() == [1_000.0]  # centre of [20 000, 22 000]
    assert lois["uncert_ns"].tolist() == [20.0 + 1_000.0]  # half the inside part


def test_window_covering_the_whole_execution():
    ex = two_runs()
    # window [15 000, 35 000] covers execution 1 [20 000, 30 000] entirely
    s = make_samples([35_000], window_ns=20_000)
    lois = place_logs(s, ex, AffineMap(), execution_of_interest=1)
    assert lois["overlap"].tolist() == [0.5]
    assert lois["toi_ns"].tolist() == [5_000.0]
    assert lois["uncert_ns"].tolist() == [20.0 + 5_000.0]


def test_window_over_two_executions_gives_one_loi_each():
    ex = two_runs()
    # window [5 000, 25 000]: 5 us of execution 0, 5 us of execution 1
    s = make_samples([25_000], window_ns=20_000)
    lois = place_logs(s, ex, AffineMap())
    assert lois["execution"].tolist() == [0, 1]
    assert lois["overlap"].tolist() == [0.25, 0.25]
    assert lois["toi_ns"].tolist() == [7_500.0, 2_500.0]
    assert lois["seq"].tolist() == [100, 100]


def test_window_touching_an_execution_does_not_overlap_it():
    ex = two_runs()
    # window ending exactly at a start, window beginning exactly at an end
    s = make_samples([20_000, 34_000], window_ns=4_000)
    with pytest.raises(ValueError, match="no log overlaps"):
        place_logs(s, ex, AffineMap(), execution_of_interest=1)


def test_min_overlap_filters_partial_windows():
    ex = two_runs()
    s = make_samples([22_000, 26_000], window_ns=4_000)  # overlaps 0.5 and 1
    lois = place_logs(s, ex, AffineMap(), execution_of_interest=1, min_overlap=0.75)
    assert lois["overlap"].tolist() == [1.0]
    with pytest.raises(ValueError, match="min_overlap"):
        place_logs(s[:1], ex, AffineMap(), execution_of_interest=1, min_overlap=0.75)


def test_filters_runs_kernel_and_negative_index():
    ex = two_runs()
    s = make_samples([45_000, 1_005_000, 1_045_000])
    lois = place_logs(s, ex, AffineMap(), execution_of_interest=-1)  # last of each run
    assert list(zip(lois["run"].tolist(), lois["execution"].tolist())) == [(0, 2), (1, 2)]
    lois = place_logs(s, ex, AffineMap(), runs=[1])
    assert lois["run"].tolist() == [1, 1]
    lois = place_logs(s, ex, AffineMap(), kernel_id=5)
    assert lois["run"].tolist() == [0]


def test_negative_index_counts_from_each_runs_own_end():
    ex = make_executions([0, 0, 1, 1, 1], [0, 1, 0, 1, 2], [0] * 5, [0, 10, 100, 110, 120], [5, 15, 105, 115, 125])
    assert select_executions_of_interest(ex, execution_of_interest=-1).tolist() == [False, True, False, False, True]
    assert select_executions_of_interest(ex, execution_of_interest=-3).tolist() == [False, False, True, False, False]
    assert select_executions_of_interest(ex, execution_of_interest=2).tolist() == [False, False, False, False, True]


def test_output_sorted_by_run_execution_time():
    ex = two_runs()
    s = make_samples([1_045_000, 25_000, 1_002_000, 21_000, 1_001_000])
    lois = place_logs(s, ex, AffineMap())
    assert list(zip(lois["run"].tolist(), lois["execution"].tolist(), lois["host_ns"].tolist())) == [
        (0, 1, 21_000.0), (0, 1, 25_000.0), (1, 0, 1_001_000.0), (1, 0, 1_002_000.0), (1, 2, 1_045_000.0)
    ]


def test_user_arrays_with_only_some_fields():
    ex = two_runs()
    s = np.zeros(2, dtype=[("source_ts", "<i8"), ("total", "<f8")])
    s["source_ts"] = [25_000, 26_000]
    s["total"] = [300.0, 310.0]
    lois = place_logs(s, ex, AffineMap())
    assert lois["seq"].tolist() == [0, 1]  # positions stand in for seq
    assert lois["total"].tolist() == [300.0, 310.0]
    assert all(np.isnan(lois[c]).all() for c in CHANNELS[1:])
    assert lois["window_ns"].tolist() == [0.0, 0.0]


def test_skewed_map_places_by_host_time():
    ex = two_runs()
    # 20 ppm of skew over 1 s of ticks: the map, not the raw ticks, decides.
    m = AffineMap(offset=-5_000.0, scale=1.00002)
    host = np.array([25_000.0, 1_025_000.0])
    s = make_samples(host, offset=-5_000.0, scale=1.00002)
    lois = place_logs(s, ex, m, execution_of_interest=1)
    np.testing.assert_allclose(lois["toi_ns"], [5_000.0, 5_000.0], atol=1.0)


# ---------------------------------------------------------------- errors


def test_empty_samples():
    with pytest.raises(ValueError, match="samples.*empty"):
        place_logs(np.zeros(0, dtype=SAMPLE_DTYPE), two_runs(), AffineMap())


def test_samples_without_source_ts():
    with pytest.raises(ValueError, match="samples.*source_ts"):
        place_logs(np.zeros(2, dtype=[("total", "<f4")]), two_runs(), AffineMap())
    with pytest.raises(ValueError, match="samples"):
        place_logs(np.zeros(2), two_runs(), AffineMap())  # type: ignore[arg-type]


def test_empty_executions():
    with pytest.raises(ValueError, match="executions.*empty"):
        place_logs(make_samples([1.0]), np.zeros(0, dtype=EXECUTION_DTYPE), AffineMap())


def test_overlapping_executions():
    ex = two_runs()
    ex["start_ns"][1] = 5_000.0  # execution 1 of run 0 starts inside execution 0
    with pytest.raises(ValueError, match="executions.*overlap"):
        place_logs(make_samples([25_000]), ex, AffineMap())


def test_execution_ending_before_it_starts():
    ex = two_runs()
    ex["end_ns"][2] = ex["start_ns"][2] - 1
    with pytest.raises(ValueError, match="executions.*not after its start"):
        place_logs(make_samples([25_000]), ex, AffineMap())


def test_no_overlap_names_both_time_ranges():
    ex = two_runs()
    s = make_samples([5_000_000, 6_000_000])
    with pytest.raises(ValueError, match="no log overlaps") as info:
        place_logs(s, ex, AffineMap())
    msg = str(info.value)
    assert "[5000000, 6000000] ns" in msg  # the logs on host time
    assert "[0, 1050000] ns" in msg  # the executions of interest
    assert "6 execution(s)" in msg and "2 run(s)" in msg
    # Its own type, so the orchestrator tells a shortfall from bad input.
    assert isinstance(info.value, align.NoLogsInExecutionsError)


def test_empty_runs_selection():
    with pytest.raises(ValueError, match="runs.*empty"):
        place_logs(make_samples([25_000]), two_runs(), AffineMap(), runs=[])
    with pytest.raises(ValueError, match="runs"):
        place_logs(make_samples([25_000]), two_runs(), AffineMap(), runs=[42])


def test_filters_that_select_nothing():
    with pytest.raises(ValueError, match="execution_of_interest"):
        place_logs(make_samples([25_000]), two_runs(), AffineMap(), execution_of_interest=3)
    with pytest.raises(ValueError, match="execution_of_interest"):
        place_logs(make_samples([25_000]), two_runs(), AffineMap(), execution_of_interest=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kernel_id"):
        place_logs(make_samples([25_000]), two_runs(), AffineMap(), kernel_id=99)


def test_bad_logger_maps():
    s, ex = make_samples([25_000]), two_runs()
    with pytest.raises(ValueError, match=r"logger_map: must be a clock map \(with to_host\(\)\); got a object"):  # was a TypeError
        place_logs(s, ex, object())

    class Broken(AffineMap):
        def to_host(self, ticks):
            return np.full(3, np.nan)

    with pytest.raises(ValueError, match="logger_map.*shape"):
        place_logs(s, ex, Broken())

    class NaNMap(AffineMap):
        def to_host(self, ticks):
            return np.full(np.shape(ticks), np.nan)

    with pytest.raises(ValueError, match="logger_map.*non-finite"):
        place_logs(s, ex, NaNMap())

    class Negative(AffineMap):
        def error_bound_at(self, host_ns):
            return -np.ones(np.shape(host_ns))

    with pytest.raises(ValueError, match="logger_map.*negative"):
        place_logs(s, ex, Negative())


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, "half"])
def test_bad_min_overlap(bad):
    with pytest.raises(ValueError, match="min_overlap"):
        place_logs(make_samples([25_000]), two_runs(), AffineMap(), min_overlap=bad)


# ---------------------------------------------------------------- assign_logs_to_executions


def test_assign_by_hand():
    ex = two_runs()
    a = assign_logs_to_executions([-1, 0, 5_000, 10_000, 15_000, 20_000, 1_049_999, 1_050_001], ex)
    assert a.run.tolist() == [-1, 0, 0, 0, -1, 0, 1, -1]
    assert a.execution.tolist() == [-1, 0, 0, 0, -1, 1, 2, -1]
    assert a.row.tolist() == [-1, 0, 0, 0, -1, 1, 5, -1]
    assert a.assigned.tolist() == [False, True, True, True, False, True, True, False]


def test_assign_shared_boundary_goes_to_later_execution():
    ex = make_executions([0, 0], [0, 1], [0, 0], [0.0, 10.0], [10.0, 20.0])
    assert assign_logs_to_executions([10.0], ex).execution.tolist() == [1]


def test_assign_rejects_runs_overlapping_in_time():
    with pytest.raises(ValueError, match="executions overlap across runs 0 and 1"):
        make_executions([0, 1], [0, 0], [0, 0], [0.0, 5.0], [10.0, 20.0])
    ex = np.zeros(2, dtype=EXECUTION_DTYPE)
    ex["run"], ex["start_ns"], ex["end_ns"] = [0, 1], [0, 5], [10, 20]
    with pytest.raises(ValueError, match="executions overlap across runs"):
        assign_logs_to_executions([1.0], ex)


def test_assign_rejects_bad_times():
    with pytest.raises(ValueError, match="samples_host_ns"):
        assign_logs_to_executions([1.0, math.nan], two_runs())
    with pytest.raises(ValueError, match="samples_host_ns"):
        assign_logs_to_executions([[1.0]], two_runs())


# ---------------------------------------------------------------- properties


@st.composite
def scenario(draw):
    """Random runs of non-overlapping executions and random logs (integers,
    so boundaries are hit exactly and often)."""
    n_runs = draw(st.integers(1, 4))
    runs, idx, starts, ends = [], [], [], []
    t = 0
    for r in range(n_runs):
        t += draw(st.integers(0, 30))
        for k in range(draw(st.integers(1, 5))):
            t += draw(st.integers(0, 5))
            d = draw(st.integers(1, 20))
            runs.append(r), idx.append(k), starts.append(t), ends.append(t + d)
            t += d
    ex = make_executions(runs, idx, [0] * len(runs), starts, ends, start_err_ns=1.0)
    n_logs = draw(st.integers(1, 30))
    host = draw(st.lists(st.integers(-5, t + 25), min_size=n_logs, max_size=n_logs))
    win = draw(st.lists(st.sampled_from([0, 0, 1, 3, 8, 30]), min_size=n_logs, max_size=n_logs))
    eoi = draw(st.sampled_from([None, 0, 1, -1]))
    return ex, np.array(host), np.array(win), eoi


def brute_force_pairs(ex, host, win, eoi):
    mask = select_executions_of_interest(ex, execution_of_interest=eoi)
    pairs = set()
    for i, (t, w) in enumerate(zip(host, win)):
        for e in ex[mask]:
            s_, e_ = e["start_ns"], e["end_ns"]
            hit = (s_ < t and e_ > t - w) if w > 0 else (s_ <= t <= e_)
            if hit:
                pairs.add((i, int(e["run"]), int(e["index"])))
    return pairs


@PROPS
@given(scenario())
def test_place_logs_matches_brute_force(case):
    ex, host, win, eoi = case
    try:
        mask = select_executions_of_interest(ex, execution_of_interest=eoi)
    except ValueError:
        return  # index not present in any run
    s = make_samples(host, window_ns=win)
    expected = brute_force_pairs(ex, host, win, eoi)
    event("no overlap" if not expected else "some LOIs")
    if not expected:
        with pytest.raises(ValueError, match="no log overlaps"):
            place_logs(s, ex, AffineMap(bound=2.0), execution_of_interest=eoi)
        return
    lois = place_logs(s, ex, AffineMap(bound=2.0), execution_of_interest=eoi)
    got = {(int(q) - 100, int(r), int(k)) for q, r, k in zip(lois["seq"], lois["run"], lois["execution"])}
    assert got == expected and len(lois) == len(expected)
    assert np.all(lois["toi_ns"] >= 0) and np.all(lois["toi_ns"] <= lois["duration_ns"])
    assert np.all((lois["overlap"] > 0) & (lois["overlap"] <= 1))
    # the budget: bound + start error + half the attributed span
    assert np.all(lois["uncert_ns"] >= 3.0)
    assert np.all(lois["uncert_ns"] <= 3.0 + lois["window_ns"] / 2 + 1e-9)
    assert mask.any()


@PROPS
@given(scenario())
def test_assign_matches_brute_force(case):
    ex, host, _, _ = case
    a = assign_logs_to_executions(host, ex)
    for i, t in enumerate(host):
        inside = [j for j, e in enumerate(ex) if e["start_ns"] <= t <= e["end_ns"]]
        if not inside:
            assert a.row[i] == -1 and a.run[i] == -1 and a.execution[i] == -1
        else:
            assert a.row[i] == max(inside, key=lambda j: ex["start_ns"][j])
            assert (a.run[i], a.execution[i]) == (ex["run"][a.row[i]], ex["index"][a.row[i]])


# ---------------------------------------------------------------- on the simulator


def test_on_simulated_runs():
    """The simulator's logs and executions go through unchanged, placed with
    the simulator's true logger-clock map."""
    from fingrav_native.sim import _device as sim

    gpu = sim.SimGPU(seed=3)
    rng = np.random.default_rng(3)
    results = []
    for _ in range(40):
        results.append(gpu.run("cb-4k-gemm", executions=4))
        # Idle gaps that are not whole logger periods, so logs land at
        # different times of interest from run to run.
        gpu.idle(20_000_000 + int(rng.integers(0, 1_000_000)))
    raw = np.concatenate([r.executions for r in results])
    ex = make_executions(raw["run"], raw["index"], raw["kernel_id"], raw["start_ns"], raw["end_ns"])
    samples = gpu.samples()

    class TrueMap:
        def to_host(self, ticks):
            return gpu.host_at_logger_ticks(ticks)

        def error_bound_at(self, host_ns):
            return np.zeros(np.shape(host_ns))

    lois = place_logs(samples, ex, TrueMap(), execution_of_interest=3)
    assert len(lois) > 5
    assert set(lois["execution"].tolist()) == {3}
    assert np.all((lois["toi_frac"] >= 0) & (lois["toi_frac"] <= 1))
    # Placed with the true map, each LOI's value is the truth at its time.
    truth = gpu.truth_power(np.round(lois["host_ns"]).astype(np.int64))[:, 0]
    np.testing.assert_allclose(lois["total"], truth, rtol=2e-3)


def test_doctests():
    assert doctest.testmod(align).failed == 0
