"""Step 5: golden runs by execution-time binning (golden.py)."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fingrav_native.method import _golden as golden
from fingrav_native.method import select_golden_runs

PROPS = settings(max_examples=150, deadline=None, database=None)

# Durations with many near-ties (integers) or free floats.
durations = st.one_of(
    st.lists(st.integers(min_value=50, max_value=150).map(float), min_size=1, max_size=40),
    st.lists(st.floats(min_value=1.0, max_value=1e6, allow_nan=False), min_size=1, max_size=40),
)
margins = st.sampled_from([0.01, 0.02, 0.05, 0.1, 0.25, 0.5])


def brute_force_best(d: list[float], margin: float) -> int:
    """The most durations in any window [lo, lo * (1 + margin)], O(n^2)."""
    return max(sum(1 for x in d if lo <= x <= lo * (1 + margin)) for lo in d)


# ---------------------------------------------------------------- by hand


def test_one_outlier_is_rejected():
    sel = select_golden_runs([100, 101, 102, 150, 103], 0.05, runs=[7, 8, 9, 10, 11])
    assert (sel.low_ns, sel.high_ns) == (100.0, 105.0)
    assert sel.mask.tolist() == [True, True, True, False, True]
    assert sel.run_ids.tolist() == [7, 8, 9, 11]
    assert (sel.count, sel.total, sel.rejected, sel.tied_windows) == (4, 5, 1, 1)
    assert sel.fraction == pytest.approx(0.8)


def test_tie_goes_to_window_nearest_the_median():
    # margin 0.5: [2, 3] holds 2 and 3; [3, 4.5] holds 3 and 4. Median 3;
    # centres 2.5 (0.5 away) and 3.75 (0.75 away): the first wins.
    sel = select_golden_runs([4.0, 2.0, 3.0], 0.5)
    assert (sel.low_ns, sel.high_ns, sel.count, sel.tied_windows) == (2.0, 3.0, 2, 2)
    assert sel.mask.tolist() == [False, True, True]


def test_tie_nearer_the_upper_cluster():
    # Two clusters of 2 within 5%; the fifth duration pulls the median up.
    sel = select_golden_runs([100, 104, 300, 305, 1000], 0.05)
    # [100, 105] holds 2, [300, 315] holds 2; median 300: centre 307.5 is
    # 7.5 away, 102.5 is 197.5 away.
    assert (sel.low_ns, sel.count, sel.tied_windows) == (300.0, 2, 2)
    assert sel.mask.tolist() == [False, False, True, True, False]


def test_upper_edge_is_inclusive():
    sel = select_golden_runs([64.0, 80.0, 81.0], 0.25)  # 64 * 1.25 = 80 exactly
    assert sel.count == 2 and sel.mask.tolist() == [True, True, False]
    assert sel.high_ns == 80.0


def test_single_and_identical_durations():
    sel = select_golden_runs([42.0], 0.05)
    assert (sel.count, sel.low_ns, sel.high_ns) == (1, 42.0, 42.0 * 1.05)
    sel = select_golden_runs([7.0] * 5, 0.02, runs=np.arange(5))
    assert sel.count == 5 and sel.run_ids.tolist() == [0, 1, 2, 3, 4]


def test_result_arrays_are_read_only():
    sel = select_golden_runs([1.0, 2.0], 0.5, runs=[3, 4])
    with pytest.raises(ValueError):
        sel.mask[0] = False
    with pytest.raises(ValueError):
        sel.run_ids[0] = 9


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("margin", [0.0, 1.0, -0.05, 1.5, math.nan, math.inf, "5%", None])
def test_margin_outside_open_unit_interval(margin):
    with pytest.raises(ValueError, match="margin"):
        select_golden_runs([100.0, 101.0], margin)


def test_empty_runs():
    with pytest.raises(ValueError, match="durations_ns.*empty"):
        select_golden_runs([], 0.05)


@pytest.mark.parametrize("bad", [[100.0, math.nan], [100.0, math.inf], [100.0, 0.0], [-1.0], [[1.0, 2.0]], ["a", "b"]])
def test_bad_durations(bad):
    with pytest.raises(ValueError, match="durations_ns"):
        select_golden_runs(bad, 0.05)


def test_runs_length_mismatch():
    with pytest.raises(ValueError, match="runs"):
        select_golden_runs([1.0, 2.0, 3.0], 0.05, runs=[0, 1])


# ---------------------------------------------------------------- properties


@PROPS
@given(d=durations, margin=margins)
def test_golden_window_holds_the_most(d, margin):
    sel = select_golden_runs(d, margin)
    assert sel.count == brute_force_best(d, margin)
    # No other window of that relative width holds more: also probe
    # windows starting between durations.
    for lo in np.linspace(min(d) * 0.9, max(d), 25):
        assert sel.count >= sum(1 for x in d if lo <= x <= lo * (1 + margin))


@PROPS
@given(d=durations, margin=margins)
def test_members_are_within_margin_of_each_other(d, margin):
    sel = select_golden_runs(d, margin)
    arr = np.asarray(d)
    members = arr[sel.mask]
    assert members.size == sel.count == int(sel.mask.sum())
    assert members.min() == sel.low_ns
    assert members.max() <= sel.low_ns * (1 + margin)
    # Everything inside the bounds is a member (nothing silently dropped).
    assert np.array_equal(sel.mask, (arr >= sel.low_ns) & (arr <= sel.high_ns))


@PROPS
@given(d=durations, margin=margins, seed=st.integers(0, 2**32 - 1))
def test_permutation_invariance(d, margin, seed):
    arr = np.asarray(d)
    perm = np.random.default_rng(seed).permutation(arr.size)
    a = select_golden_runs(arr, margin, runs=np.arange(arr.size))
    b = select_golden_runs(arr[perm], margin, runs=perm)
    assert (a.low_ns, a.high_ns, a.count, a.tied_windows) == (b.low_ns, b.high_ns, b.count, b.tied_windows)
    assert np.array_equal(a.mask[perm], b.mask)
    assert sorted(a.run_ids.tolist()) == sorted(b.run_ids.tolist())


@PROPS
@given(d=durations, margin=margins, k=st.integers(-20, 20))
def test_scaling_durations_scales_the_bin(d, margin, k):
    # Powers of two scale exactly in floating point, so membership is exact.
    c = 2.0**k
    a = select_golden_runs(d, margin)
    b = select_golden_runs(np.asarray(d) * c, margin)
    assert b.low_ns == a.low_ns * c and b.high_ns == a.high_ns * c
    assert np.array_equal(a.mask, b.mask)


def test_large_input_is_fast():
    rng = np.random.default_rng(0)
    d = rng.normal(100_000, 3_000, size=200_000)
    sel = select_golden_runs(np.abs(d) + 1, 0.02)
    # About the central 2 kns of a 3 kns-sd normal: ~25% of the mass.
    assert 0.2 < sel.fraction < 0.3


def test_doctests():
    assert doctest.testmod(golden).failed == 0
