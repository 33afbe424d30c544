"""SSE/SSP: the binary search on executions per run (paper Section IV-B step 3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fingrav_native.method import SSE_INDEX, PowerMeasurement, find_ssp_executions


def curve(ssp: int, low: float = 80.0, high: float = 100.0, noise: float = 0.0):
    calls: list[int] = []

    def measure(n: int) -> PowerMeasurement:
        calls.append(n)
        level = high if n >= ssp else low + (high - low) * n / ssp * 0.8
        return PowerMeasurement(level, noise, 30)

    return measure, calls


def test_hand_worked_search_doubles_then_bisects() -> None:
    measure, calls = curve(ssp=10)
    res = find_ssp_executions(measure, tolerance=0.01, sigmas=0, confirm=False)
    assert res.executions == 10 and res.converged
    assert res.steady_power_w == 100.0
    # 4 -> 8 -> 16 -> 32 (16 == 32: steady by 16), then bisect 8..16: 12, 10, 9.
    assert calls == [4, 8, 16, 32, 12, 10, 9]
    assert [(s.executions, s.phase, s.steady) for s in res.trace] == [
        (4, "start", False), (8, "double", False), (16, "double", False), (32, "double", True),
        (12, "bisect", True), (10, "bisect", True), (9, "bisect", False)]
    # With confirmation (the default) one more doubling, 64, must agree.
    measure, calls = curve(ssp=10)
    assert find_ssp_executions(measure, tolerance=0.01, sigmas=0).executions == 10
    assert calls == [4, 8, 16, 32, 64, 12, 10, 9]


def test_a_plateau_before_the_rise_needs_confirmation() -> None:
    def measure(n: int) -> PowerMeasurement:
        return PowerMeasurement(80.0 if n < 12 else 100.0, 0.0, 30)

    # P(4) == P(8): one doubling is fooled; the second (P(16)) exposes the rise.
    assert find_ssp_executions(measure, confirm=False).executions == 4
    assert find_ssp_executions(measure).executions == 12


def test_already_steady_at_the_start_returns_the_sse_count() -> None:
    measure, calls = curve(ssp=1)
    res = find_ssp_executions(measure)
    assert res.executions == 4 and calls == [4, 8, 16]
    assert SSE_INDEX == 3


def test_not_converging_within_the_cap_is_reported() -> None:
    res = find_ssp_executions(lambda n: PowerMeasurement(float(n), 0.0, 10), max_executions=64)
    # The largest count probed is returned, flagged as not converged.
    assert not res.converged and res.executions == 64


def test_noise_within_the_standard_error_is_not_a_change() -> None:
    # 1% wobble, tolerance 0.5%, but standard errors of 2 W: counts as steady.
    wobble = {4: 99.0, 8: 100.0}
    res = find_ssp_executions(lambda n: PowerMeasurement(wobble.get(n, 100.0), 2.0, 5), tolerance=0.005)
    assert res.executions == 4


@settings(max_examples=60, deadline=None)
@given(ssp=st.integers(1, 300), start=st.sampled_from([2, 4, 8]))
def test_finds_the_exact_threshold_of_any_strictly_rising_curve(ssp: int, start: int) -> None:
    # Power rises strictly until the SSP execution, then stays. (A flat
    # plateau before a later rise would fool any doubling search, the
    # paper's included: that is why the tolerance must be tight.)
    calls: list[int] = []

    def measure(n: int) -> PowerMeasurement:
        calls.append(n)
        return PowerMeasurement(100.0 - max(0, ssp - n), 0.0, 30)

    res = find_ssp_executions(measure, start=start, tolerance=1e-9, sigmas=0, max_executions=4096)
    assert res.executions == max(ssp, start)
    # Logarithmic cost.
    assert len(set(calls)) <= 2 * int(np.log2(4096)) + 2


@pytest.mark.parametrize(
    "kwargs,name",
    [({"start": 0}, "start"), ({"tolerance": 0.0}, "tolerance"), ({"tolerance": 1.5}, "tolerance"),
     ({"max_executions": 5}, "max_executions"), ({"sigmas": -1}, "sigmas")],
)
def test_bad_arguments_are_named(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        find_ssp_executions(lambda n: PowerMeasurement(1.0, 0.0, 1), **kwargs)


def test_a_measure_that_returns_garbage_is_named() -> None:
    with pytest.raises(ValueError, match=r"measure\(4\)"):
        find_ssp_executions(lambda n: float("nan"))  # type: ignore[arg-type, return-value]
