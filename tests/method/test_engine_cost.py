"""The attribution engine's cost: bounded solves without a singular value decomposition per step, same answer.

The engine's bounded solve (power columns at or above 0 W) runs in every
bootstrap resample; bounded-variable least squares (a least-squares solve by
SVD per step) made it the largest cost of an averaging sensor's campaign.
The answer is the unique minimum of a strictly convex problem, checked here
against its optimality (KKT) conditions and against BVLS itself.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from fingrav_native.method import _engine, _engine_solve


def _problem(seed: int, cond: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A penalised least-squares problem whose unconstrained minimum leaves its bounds."""
    rng = np.random.default_rng(seed)
    n, p = 300, 40
    U, _ = np.linalg.qr(rng.standard_normal((n, p)))
    V, _ = np.linalg.qr(rng.standard_normal((p, p)))
    A = U @ np.diag(np.geomspace(1.0, 1.0 / np.sqrt(cond), p)) @ V.T
    truth = np.abs(rng.standard_normal(p)) * (rng.random(p) < 0.6)  # many columns on the bound
    y = A @ truth + 0.05 * rng.standard_normal(n)
    G = A.T @ A
    lower = np.where(np.arange(p) < p - 4, 0.0, -np.inf)  # the last columns free (a drift)
    return G, A.T @ y, G + 1e-9 * np.trace(G) / p * np.eye(p), lower


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cond", [1e2, 1e8])
def test_cost_bounded_solve_meets_its_optimality_conditions_without_bvls(seed: int, cond: float,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    G, b, M, lower = _problem(seed, cond)
    calls = []
    real = optimize.lsq_linear
    monkeypatch.setattr(_engine_solve.optimize, "lsq_linear", lambda *a, **k: calls.append(1) or real(*a, **k))
    x = _engine_solve.solve(G, b, M, lower)
    assert not calls, "the bounded solve fell back to bounded-variable least squares"
    # KKT of min x'Mx - 2b'x, x >= lower: feasible; gradient zero on the free columns, pushing into the bound
    # on the others. For a strictly convex problem these hold at the one minimum and nowhere else.
    g = M @ x - b
    scale = np.abs(b).max()
    on = x <= lower
    assert np.all(x >= lower)
    assert on.any() and np.all(g[on] >= -1e-9 * scale)
    assert np.abs(g[~on]).max() <= 1e-7 * scale
    # The same point bounded-variable least squares finds on the Cholesky factor (the engine's former solver).
    L = np.linalg.cholesky(M)
    ref = real(L.T, np.linalg.solve(L, b), bounds=(lower, np.inf), method="bvls").x
    assert np.abs(x - ref).max() <= 1e-6 * np.abs(ref).max()


@pytest.mark.parametrize("folds", [np.arange(23) % 5, np.array([0, 0, 1, 2, 1, 0, 2, 2, 1, 0, 1])],
                         ids=["dealt-in-turn", "uneven"])
def test_cost_resampled_fold_sums_are_each_folds_own_blocks_exactly(folds: np.ndarray) -> None:
    # The bootstrap's per-fold normal equations, read through strided views where a fold's blocks are evenly
    # spaced, are the weighted sums over that fold's blocks alone: equal to the bit to the sums taken over a copy
    # of those blocks (the choice on every resample depends on them), and refused blocks of other folds add nothing.
    rng = np.random.default_rng(4)
    n_blocks, P, n_folds = len(folds), 6, int(folds.max()) + 1
    X = rng.standard_normal((n_blocks, 9, P))
    G = np.einsum("kip,kiq->kpq", X, X)
    B = rng.standard_normal((n_blocks, P, 2))
    st = _engine._Stats(G, B, rng.random((n_blocks, 2)), np.full(n_blocks, 9), np.full(P, 9))
    wts = rng.multinomial(n_blocks, np.full(n_blocks, 1.0 / n_blocks), size=7).astype(np.float64)
    ((Gf, Bf, yyf, present),) = _engine._boot_fold_stats([st], wts, folds, n_folds)
    for f in range(n_folds):
        blk = np.flatnonzero(folds == f)
        assert np.array_equal(Gf[:, f], (wts[:, blk] @ G[blk].reshape(len(blk), -1)).reshape(-1, P, P))
        assert np.array_equal(Bf[:, f], wts[:, blk] @ B[blk, :, 0])
        assert np.array_equal(yyf[:, f], wts[:, blk] @ st.yy[blk, 0])
        assert np.array_equal(present[:, f], wts[:, blk].any(axis=1))
        np.testing.assert_allclose(Gf[:, f], np.einsum("rk,kpq->rpq", wts[:, blk], G[blk]), rtol=1e-12)
