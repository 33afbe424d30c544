"""A capture fits each clock map once: every analysis of it reads the same fit.

A long capture's brackets take seconds to fit (a bracket burst every second
for hours, each checked for a realtime step); the logger map, the energy
counter's map and the alignment each ask for the map, and a fit per call paid
that again and again. What changes the fit (other brackets, another clock,
another threshold) fits anew; the fit's warnings are given with every map.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.clocks import ClockStepWarning
from fingrav_native.files import PowerCapture, _capture

M0 = 21_156_703_160_344          # a CLOCK_MONOTONIC_RAW time
E0 = 1_795_448_360_714_669_054   # the Unix-epoch time then


def _brackets(seconds: float, step_at: int | None = None, step_ns: int = 0) -> np.ndarray:
    """Bursts of (mono before, realtime, mono after), realtime 50 ppm fast, stepping by ``step_ns`` at ``step_at``."""
    rows = []
    for b in range(int(seconds / 0.5) + 1):
        for i in range(8):
            mb = M0 + int(b * 0.5e9) + i * 150
            read = mb + 40
            e = E0 + ((read - M0) * 1_000_050) // 1_000_000 + (step_ns if step_at is not None and read >= step_at else 0)
            rows.append((mb, e, mb + 80))
    return np.array(rows, dtype=np.int64)


def _capture_of(brackets: np.ndarray) -> PowerCapture:
    n = 200
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["host_ns"] = M0 + np.arange(n) * 10_000_000
    s["source_ts"] = s["host_ns"]
    s["seq"] = s["source_seq"] = np.arange(n)
    s["total"] = 300.0
    return PowerCapture(samples=s, epoch_brackets=brackets,
                        source={"name": "test", "clock_domain": "host-monotonic-raw", "tick_ns": 1.0,
                                "native_period_ns": 10_000_000, "window_ns": 0, "channels": ["total"]},
                        sensor=None, period_ns=10_000_000, stats={}, meta={"device": "test"})


@pytest.fixture
def fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The brackets each epoch-map fit of a capture was given (their count)."""
    given: list[int] = []
    fit = _capture.fit_epoch_map

    def counted(brackets: np.ndarray, **kw: object) -> object:
        given.append(len(brackets))
        return fit(brackets, **kw)

    monkeypatch.setattr(_capture, "fit_epoch_map", counted)
    return given


def test_slow_every_map_of_a_capture_reads_one_fit(fits: list[int]) -> None:
    cap = _capture_of(_brackets(2.0))
    first = cap.clock_map()
    for _ in range(5):
        assert cap.clock_map() is first
        assert cap.epoch_map() is first
        cap.logger_map()
    assert len(fits) == 1
    # What changes the fit fits anew: another threshold, other brackets (a capture made by replace()).
    cap.clock_map(step_threshold_ns=50_000.0)
    other = dataclasses.replace(cap, epoch_brackets=_brackets(3.0))
    assert other.clock_map() is not first
    assert fits == [len(cap.epoch_brackets)] * 2 + [len(other.epoch_brackets)]
    # Equal captures stay equal whatever each has fitted.
    assert dataclasses.replace(cap) == cap


def test_silently_lost_a_kept_fit_still_warns_of_the_clock_step(fits: list[int]) -> None:
    cap = _capture_of(_brackets(5.0, step_at=M0 + 2_250_000_000, step_ns=3_000_000))
    for _ in range(2):
        with pytest.warns(ClockStepWarning, match="stepped"):
            cap.logger_map()
    assert len(fits) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _capture_of(_brackets(2.0)).clock_map()  # no step, no warning
