"""Step 1: the paper's Table I (guidance.py)."""

from __future__ import annotations

import dataclasses
import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fingrav_native.method import TABLE_I, Guidance, lookup_guidance, target_loi_count
from fingrav_native.method import _guidance as guidance

US = 1_000.0
MS = 1_000_000.0


@pytest.mark.parametrize(
    ("exec_ns", "label", "runs", "interval_ns", "margin"),
    [
        (25 * US, "25-50us", 400, 5 * US, 0.05),
        (40 * US, "25-50us", 400, 5 * US, 0.05),
        (49_999.0, "25-50us", 400, 5 * US, 0.05),
        (50 * US, "50-200us", 200, 10 * US, 0.05),  # a boundary belongs to the row above
        (120 * US, "50-200us", 200, 10 * US, 0.05),
        (200 * US, "200us-1ms", 200, 10 * US, 0.02),
        (999_999.0, "200us-1ms", 200, 10 * US, 0.02),
        (1 * MS, ">1ms", 200, 10 * US, 0.02),
        (5 * MS, ">1ms", 200, 10 * US, 0.02),
    ],
)
def test_table_i_rows(exec_ns, label, runs, interval_ns, margin):
    g = lookup_guidance(exec_ns)
    assert g.row.label == label
    assert (g.runs, g.loi_interval_ns, g.margin) == (runs, interval_ns, margin)
    assert g.exec_time_ns == exec_ns
    assert not g.extrapolated and g.note == ""


def test_loi_density_per_us():
    assert lookup_guidance(30 * US).loi_per_us == pytest.approx(0.2)  # 1 per 5 us
    assert lookup_guidance(300 * US).loi_per_us == pytest.approx(0.1)  # 1 per 10 us


def test_table_rows_are_contiguous_and_ordered():
    for a, b in zip(TABLE_I, TABLE_I[1:]):
        assert a.high_ns == b.low_ns
    assert TABLE_I[0].low_ns == 25 * US and math.isinf(TABLE_I[-1].high_ns)


def test_below_25us_is_extrapolated_and_says_what():
    g = lookup_guidance(10 * US)
    assert g.extrapolated
    assert g.row is TABLE_I[0]
    assert (g.runs, g.loi_interval_ns, g.margin) == (400, 5 * US, 0.05)
    # The note names the range it extrapolates and what the density yields.
    assert "25-50 us" in g.note and "extrapolated" in g.note
    assert "only 2 LOI" in g.note


def test_timings_use_their_median():
    # median of 30, 60, 61 us is 60 us: the 50-200 us row, not 25-50 us.
    g = lookup_guidance([30 * US, 60 * US, 61 * US])
    assert g.exec_time_ns == 60 * US
    assert g.row.label == "50-200us"


def test_guidance_is_frozen():
    g = lookup_guidance(100 * US)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.runs = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("exec_ns", "expected"),
    [
        (40 * US, 8),  # 40 / 5
        (25 * US, 5),
        (120 * US, 12),  # 120 / 10, exactly, no rounding up to 13
        (125 * US, 13),  # 12.5 rounds up: the density must be met everywhere
        (2 * MS, 200),
        (3 * US, 1),  # extrapolated: at least one
    ],
)
def test_target_loi_count_by_hand(exec_ns, expected):
    assert target_loi_count(lookup_guidance(exec_ns), exec_ns) == expected


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1.0, max_value=1e10, allow_nan=False))
def test_target_meets_density(exec_ns):
    g = lookup_guidance(exec_ns)
    n = target_loi_count(g, exec_ns)
    assert n >= 1
    assert n * g.loi_interval_ns >= exec_ns * (1 - 1e-9)
    assert (n - 1) * g.loi_interval_ns < exec_ns


@pytest.mark.parametrize("bad", [0, -5.0, math.nan, math.inf, -math.inf, [], "abc", [[1.0, 2.0]], [1.0, 0.0], 1 + 2j])
def test_lookup_rejects_bad_exec_time(bad):
    with pytest.raises(ValueError, match="exec_time_ns"):
        lookup_guidance(bad)


def test_target_loi_count_rejects_bad_input():
    g = lookup_guidance(100 * US)
    with pytest.raises(ValueError, match="guidance"):
        target_loi_count({"runs": 200}, 100 * US)  # type: ignore[arg-type]
    for bad in (0.0, -1.0, math.nan, math.inf, None):
        with pytest.raises(ValueError, match="exec_time_ns"):
            target_loi_count(g, bad)  # type: ignore[arg-type]


def test_guidance_accepts_numpy_scalars():
    g = lookup_guidance(np.float32(75_000))
    assert isinstance(g, Guidance) and g.row.label == "50-200us"


def test_doctests():
    assert doctest.testmod(guidance).failed == 0
