"""The joint fit's memory: bounded by what the windows resolve, and a clear error past its budget.

A real trace holds hundreds of signatures of kernels far shorter than a 1 ms window; a column per signature for
every step of the gaps after it put thousands of unknowns into every block's normal matrix (hta/sampled_rank-0:
60 blocks x 2,929 x 2,929 columns, 3.8 GiB for one of seven candidate models), and a user saw numpy's
_ArrayMemoryError. The timelines here are closed form: each kernel class draws its own constant power, the gaps
a constant level, and each log is the exact 1 ms mean of that power (with 0.5 W of noise).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import fingrav_native
from fingrav_native.method import _engine, _engine_design, fit_timeline
from fingrav_native.sensors import SensorModel

AVG_1MS = SensorModel("avg-1ms", "window", period_ns=1e6, window_ns=1e6)
GAP_W = 100.0


def _timeline(n_cls: int, n_exec: int, seed: int = 3) -> tuple[np.ndarray, ...]:
    """Short kernels of ``n_cls`` classes (20-60 us, 200-500 W each) with launch gaps and the odd longer gap,
    the gaps at ``GAP_W``; exact 1 ms window means every 1 ms. Returns stamps, logs, starts, ends, classes, power."""
    rng = np.random.default_rng(seed)
    power = rng.uniform(200.0, 500.0, n_cls)
    dur = rng.uniform(20_000.0, 60_000.0, n_cls)
    cls = rng.integers(0, n_cls, n_exec)
    gaps = np.where(rng.random(n_exec) < 0.9, 3_000.0, rng.uniform(20_000.0, 300_000.0, n_exec))
    starts = np.concatenate([[0.0], np.cumsum(dur[cls] + gaps)[:-1]])
    ends = starts + dur[cls]
    # The power is constant between kernel edges: its integral is exact at every edge, linear between them.
    edges = np.column_stack([starts, ends]).ravel()
    level = np.column_stack([power[cls], np.full(n_exec, GAP_W)]).ravel()[:-1]
    cum = np.concatenate([[0.0], np.cumsum(level * np.diff(edges))])
    stamps = np.arange(1e6, ends[-1], 1e6)
    logs = (np.interp(stamps, edges, cum) - np.interp(stamps - 1e6, edges, cum)) / 1e6
    logs += rng.normal(0.0, 0.5, len(stamps))
    return stamps, logs, starts, ends, cls, power * dur * 1e-9


def test_unbounded_memory_joint_fit_columns_follow_what_the_windows_resolve() -> None:
    # 80 classes of 20-60 us kernels under 1 ms windows: few window edges fall in any one class's gaps, so the
    # gaps after them share one level per step. A column for each class's every step made the fit's normal
    # matrices 7 models x ~40 blocks x 567^2 (a 1.2 GiB peak); by what the windows resolve they are ~90 columns.
    stamps, logs, s, e, c, _ = _timeline(80, 8_000)
    tracemalloc.start()
    try:
        fit = fit_timeline(AVG_1MS, stamps, {"total": logs}, s, e, c, [4] * 80, bootstrap=4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2 ** 20, f"{peak / 2 ** 20:.0f} MiB"
    # The gaps after the classes whose own gaps few windows end in report the shared level: the truth, 100 W.
    gap = fit.gap_w["total"][:, 1:4]
    assert np.nanmedian(gap) == pytest.approx(GAP_W, abs=5.0)


def test_silently_wrong_merged_blocks_keep_the_fit_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # A budget that holds the normal matrices of fewer blocks than the record has: neighbouring blocks merged
    # (the whole record's sums unchanged, so the energies too), and the fit says why its bootstrap has fewer.
    stamps, logs, s, e, c, truth = _timeline(3, 10_000)
    seen: list[tuple[list[int], int]] = []
    within = _engine.blocks_within_memory

    def spy(unknowns: list[int], blocks: np.ndarray, n_blocks: int, n_folds: int) -> tuple[np.ndarray, int, str]:
        seen.append((list(unknowns), n_blocks))
        return within(unknowns, blocks, n_blocks, n_folds)

    monkeypatch.setattr(_engine, "blocks_within_memory", spy)
    full = fit_timeline(AVG_1MS, stamps, {"total": logs}, s, e, c, [1] * 3, bootstrap=10)
    unknowns, n_blocks = seen[0]
    assert n_blocks >= 2 * _engine_design.MIN_BLOCKS
    monkeypatch.setattr(_engine_design, "MEMORY_BYTES", _engine_design.normal_equations_bytes(unknowns, n_blocks // 2))
    small = fit_timeline(AVG_1MS, stamps, {"total": logs}, s, e, c, [1] * 3, bootstrap=10)
    assert any(f"blocks of logs merged into {n_blocks // 2} " in w for w in small.warnings), small.warnings
    assert not any("merged" in w for w in full.warnings)
    np.testing.assert_allclose(small.energy_j["total"], full.energy_j["total"], rtol=1e-6)
    np.testing.assert_allclose(small.energy_j["total"], truth, rtol=0.05)


def test_unclear_fit_past_its_memory_budget_names_the_classes_and_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    # Past the budget even over the fewest blocks: a MemoryError (a FingravError) that names the classes, their
    # columns and the memory needed, never numpy's _ArrayMemoryError.
    stamps, logs, s, e, c, _ = _timeline(3, 10_000)
    monkeypatch.setattr(_engine_design, "MEMORY_BYTES", 1_000)
    with pytest.raises(MemoryError, match=r"classes: 3 kernel classes \(signatures\) x their columns .*"
                                          r"unknowns \(columns\).*need [0-9.]+ [MG]iB, more than the [0-9.]+ [MG]iB budget") as info:
        fit_timeline(AVG_1MS, stamps, {"total": logs}, s, e, c, [1] * 3, bootstrap=10)
    assert isinstance(info.value, fingrav_native.FingravError)
