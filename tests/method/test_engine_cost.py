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

from fingrav_native.method import _engine


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
    monkeypatch.setattr(_engine.optimize, "lsq_linear", lambda *a, **k: calls.append(1) or real(*a, **k))
    x = _engine.solve(G, b, M, lower)
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
