"""SharedSimTruth.score: the table's energy against the truth of the same quantity, the golden executions' mean.

The table's energy per execution is FinGraV's energy of the execution of interest over the golden runs
(paper Section IV-B, steps 5-8): scored against every execution of a kernel whose durations spread over
several bins, an exact estimate reads several percent off.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from fingrav_native.insitu import KernelTrace
from fingrav_native.sim._shared import SharedSimTruth


def _case():
    # One kernel, six executions: four of 100 us at 10 mJ (the golden bin), two throttled of 150 us at 12 mJ.
    n = 6
    start = np.arange(n, dtype=np.int64) * 1_000_000
    dur = np.array([100, 150, 100, 100, 150, 100], dtype=np.int64) * 1000
    energy = np.array([10, 12, 10, 10, 12, 10], dtype=np.float64) * 1e-3
    ex = np.zeros(n, dtype=[("kernel", "S16"), ("start_ns", np.int64), ("end_ns", np.int64), ("energy_j", np.float64)])
    ex["kernel"], ex["start_ns"], ex["end_ns"], ex["energy_j"] = b"gemm", start, start + dur, energy
    truth = SharedSimTruth(ex, np.zeros(0), np.zeros(0), {})
    # The trace on another clock (a constant offset), its rows in another order than the truth's.
    order = np.array([3, 0, 5, 1, 4, 2])
    kt = KernelTrace.from_rows(start[order] + 7_000_000_000, (start + dur)[order] + 7_000_000_000,
                               ["gemm"] * n, [(1, 1, 1)] * n, [(1, 1, 1)] * n, clock="CLOCK_BOOTTIME", source="test")
    golden_rows = np.flatnonzero(kt.executions["end_ns"] - kt.executions["start_ns"] == 100_000)
    kernels = np.zeros(1, dtype=[("name", "U16"), ("energy_j", np.float64), ("energy_half_width_j", np.float64)])
    kernels[0] = ("gemm", 10.2e-3, 0.1e-3)
    profile = types.SimpleNamespace(kernels=kernels, trace=kt, profiles=(
        types.SimpleNamespace(golden=types.SimpleNamespace(run_ids=kt.executions["run"][golden_rows])),))
    return truth, profile


def test_silently_wrong_score_is_against_the_golden_executions_not_every_execution() -> None:
    truth, profile = _case()
    row = truth.score(profile)[0]
    assert row["golden"] == 4 and row["executions"] == 6
    assert row["truth_golden_j"] == pytest.approx(10e-3)
    assert row["truth_all_j"] == pytest.approx(64e-3 / 6)
    assert row["error"] == pytest.approx(0.02)
    assert row["error_all"] == pytest.approx(10.2 / (64 / 6) - 1)
    assert not row["covered"]  # 0.2 mJ off, 0.1 mJ half-width


def test_unclear_score_of_another_runs_profile_is_refused_by_name() -> None:
    truth, profile = _case()
    short = SharedSimTruth(truth.executions[:5], truth.kernels, truth.energy, {})
    with pytest.raises(ValueError, match="profile: its trace holds 6 executions of 'gemm', the truth 5"):
        short.score(profile)
    with pytest.raises(ValueError, match="profile=.*TraceProfile"):
        truth.score(object())
