"""The host clock: CLOCK_MONOTONIC_RAW nanoseconds and its measured cost."""

from __future__ import annotations

import time

import numpy as np
import pytest

from fingrav_native.native import HostClockInfo, host_time_ns, measure_host_clock


def test_host_time_is_monotonic():
    reads = np.array([host_time_ns() for _ in range(20_000)], dtype=np.int64)
    assert np.all(np.diff(reads) >= 0)
    assert reads[-1] > reads[0]


@pytest.mark.skipif(not hasattr(time, "CLOCK_MONOTONIC_RAW"), reason="CLOCK_MONOTONIC_RAW is Linux/macOS only")
def test_host_time_is_clock_monotonic_raw():
    # Bracketed by Python's own reads of the same clock, many times over.
    for _ in range(1_000):
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        now = host_time_ns()
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        assert before <= now <= after


def test_measure_host_clock_fields_are_sane():
    info = measure_host_clock(reads=20_000)
    assert isinstance(info, HostClockInfo)
    assert info.resolution_ns >= 1
    assert info.read_cost_ns > 0
    # The smallest gap between back-to-back reads is at most the mean gap, and
    # the smallest non-zero step is at least that smallest gap.
    assert 0 <= info.min_read_cost_ns <= info.read_cost_ns
    assert info.observed_step_ns >= max(info.min_read_cost_ns, 1)
    assert info.read_cost_ns < 1e6, "a host clock read should not take a millisecond on average"
    text = repr(info)
    assert text.startswith("HostClockInfo(read_cost_ns=") and "observed_step_ns=" in text


def test_measure_host_clock_minimum_reads():
    info = measure_host_clock(2)
    assert info.read_cost_ns >= 0 and info.min_read_cost_ns >= 0


@pytest.mark.parametrize("reads", [1, 0, -3])
def test_measure_host_clock_needs_two_reads(reads):
    with pytest.raises(ValueError, match=rf"reads={reads}\b"):
        measure_host_clock(reads=reads)
