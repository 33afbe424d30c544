"""The launch record clocks against CLOCK_MONOTONIC_RAW: bracket width and offset stability.

Closed-form checks on synthetic brackets whose offset, skew, widths and steps are chosen, then the
same figures on the native capture's own reads.
"""

from __future__ import annotations

import numpy as np
import pytest

from fingrav_native import _core
from fingrav_native.clocks import record_clock_error


def _brackets(n: int, *, offset: int, skew_ppm: float, widths: np.ndarray, step_ns: int = 1_000_000) -> np.ndarray:
    before = 5_000_000_000 + step_ns * np.arange(n, dtype=np.int64)
    after = before + widths
    mid = before + widths // 2
    clock = mid + offset + np.round(skew_ppm * 1e-6 * (mid - mid[0])).astype(np.int64)
    return np.stack([before, clock, after], axis=1)


def test_silently_wrong_record_clock_figures_match_closed_form():
    n = 101
    widths = 2 * (50 + (np.arange(n, dtype=np.int64) % 7) * 10)  # even: midpoints exact
    # CLOCK_REALTIME-sized values: 1.7e18 ns is past 2**53, so any float before the subtraction would round.
    offset = 1_700_000_000_123_456_789
    e = record_clock_error(_brackets(n, offset=offset, skew_ppm=5.0, widths=widths), "CLOCK_REALTIME")
    assert e.clock == "CLOCK_REALTIME" and e.reads == n
    assert e.span_ns == 100 * 1_000_000
    assert (e.width_min_ns, e.width_p50_ns, e.width_max_ns) == (100.0, float(np.median(widths)), 220.0)
    # 5 ppm over 100 ms is 500 ns of drift: the offset's spread, and the fitted skew; no residual.
    assert e.offset_spread_ns == pytest.approx(500.0, abs=1.0)
    assert e.skew_ppm == pytest.approx(5.0, abs=1e-3)
    assert e.residual_ns < 1.0
    assert e.offset_ns == pytest.approx(offset + 250.0, abs=1.0)  # the median read is the middle one


def test_silently_wrong_a_wall_clock_step_shows_in_the_spread_not_refused():
    b = _brackets(40, offset=10_000, skew_ppm=0.0, widths=np.full(40, 80, np.int64))
    b[20:, 1] -= 3_000_000  # CLOCK_REALTIME set back 3 ms mid-run
    e = record_clock_error(b, "CLOCK_REALTIME")
    assert e.offset_spread_ns == 3_000_000
    assert e.residual_ns > 1_000_000  # no line explains a step
    assert "spread 3000000 ns" in e.format()


def test_unclear_record_clock_error_names_bad_brackets():
    with pytest.raises(ValueError, match="brackets: expected shape"):
        record_clock_error(np.zeros((0, 3), np.int64), "CLOCK_BOOTTIME")
    with pytest.raises(ValueError, match="raw_after < raw_before"):
        record_clock_error(np.array([[10, 5, 9]]), "CLOCK_BOOTTIME")
    with pytest.raises(ValueError, match="clock="):
        record_clock_error(np.array([[10, 5, 11]]), "")


def test_silently_wrong_native_record_clock_brackets_are_the_clocks():
    import time

    for name, clock_id in (("CLOCK_BOOTTIME", time.CLOCK_BOOTTIME), ("CLOCK_REALTIME", time.CLOCK_REALTIME)):
        t0 = time.clock_gettime_ns(clock_id)
        b = _core.launch_clock_brackets(name, 64)
        t1 = time.clock_gettime_ns(clock_id)
        assert b.shape == (64, 3) and b.dtype == np.int64
        assert (b[:, 2] >= b[:, 0]).all() and t0 <= b[0, 1] and b[-1, 1] <= t1
        e = record_clock_error(b, name)
        assert e.width_min_ns < 1e6  # two clock reads apart, not a sleep
    with pytest.raises(ValueError, match="clock='CLOCK_MONOTONIC'"):
        _core.launch_clock_brackets("CLOCK_MONOTONIC", 4)
    with pytest.raises(ValueError, match="n=0"):
        _core.launch_clock_brackets("CLOCK_BOOTTIME", 0)
