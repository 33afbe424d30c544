"""The attribution engine's bounded solve: penalised normal equations with power columns bounded below.

``argmin x'Mx - 2b'x`` subject to ``x >= lower`` for every channel on one
Cholesky factorisation: the unconstrained solution where it keeps the
bounds (the problem is convex, so it is then the bounded one); else the
columns on their bounds found by Lawson and Hanson's active set on the
normal equations (*Solving Least Squares Problems*, 1974, ch. 23), the
free ones solved on the factor, and :func:`scipy.optimize.lsq_linear`
(bounded-variable least squares) where that does not settle. Kept apart
from the model choice (:mod:`fingrav_native.method._engine`) because it is
a numerical kernel with its own invariants: the same operations for one
channel as for many, so the same rounding.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.linalg
from scipy import optimize

#: LAPACK's Cholesky factorisation and solve for float64, as :func:`scipy.linalg.cho_factor` and
#: :func:`scipy.linalg.cho_solve` call them (upper factor), without their per-call checks: the
#: cross-validation runs thousands of them on systems built here, finite by construction.
POTRF = scipy.linalg.lapack.dpotrf
POTRS = scipy.linalg.lapack.dpotrs


def solve(G: np.ndarray, b: np.ndarray, M: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """``argmin x'Mx - 2b'x`` subject to ``x >= lower`` (``M = G + penalties``).

    The unconstrained solution where it keeps the bounds (then it is the
    bounded one: the problem is convex); else the bounded minimum of
    ``|L'x - L^-1 b|^2`` with ``M = L L'``, the same objective up to a
    constant (:func:`_bounded`).

    Parameters
    ----------
    G : numpy.ndarray
        The logs' normal matrix (kept for the signature; ``M`` holds it).
    b : numpy.ndarray
        The right-hand side ``A'y``.
    M : numpy.ndarray
        The penalised normal matrix, positive definite.
    lower : numpy.ndarray
        Each column's lower bound (``-inf``: none).

    Returns
    -------
    numpy.ndarray
    """
    return solve_channels(np.asarray(b, dtype=np.float64)[:, None], M, lower)[:, 0]


class _Subproblems:
    """One system's factorisations on sets of free columns, kept for all of its channels.

    Each step of the active set factors the free columns' block of ``M``
    (:func:`_on_free`), and each channel's free columns are solved on a QR of
    ``L'`` (:func:`_bounded`). Channels of one system often settle on the same
    free columns (their curves at the bound over the same stretches), and a
    factorisation of the same block is the same to the bit: made once, it
    serves each of them.
    """

    def __init__(self, M: np.ndarray, L: np.ndarray) -> None:
        self.M = M
        self.L = L
        self.A = L.T
        self._chol: dict[bytes, Optional[np.ndarray]] = {}
        self._qr: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def chol(self, free: np.ndarray, f: np.ndarray) -> Optional[np.ndarray]:
        """The upper Cholesky factor of ``M``'s block on the free columns ``f`` (None: not positive definite)."""
        key = free.tobytes()
        if key not in self._chol:
            # The free rows, then their columns: two plain takes, several times faster than np.ix_'s
            # broadcast index for the same copy.
            c, info = POTRF(self.M[f][:, f], lower=0, overwrite_a=1, clean=0)
            self._chol[key] = c if info == 0 else None
        return self._chol[key]

    def qr(self, free: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The reduced QR factorisation of ``L'``'s free columns ``f``."""
        key = free.tobytes()
        if key not in self._qr:
            Q, R = np.linalg.qr(self.A[:, f])
            self._qr[key] = (Q, R)
        return self._qr[key]


def _bounded(b: np.ndarray, lower: np.ndarray, x_free: np.ndarray, sub: _Subproblems) -> np.ndarray:
    """``argmin x'Mx - 2b'x`` subject to ``x >= lower``, where the unconstrained ``x_free`` leaves the bounds.

    The same least-squares problem bounded-variable least squares solves
    (:func:`scipy.optimize.lsq_linear`, ``method="bvls"``, on ``|L'x - L^-1 b|``
    with ``M = L L'``, both in ``sub``), with the columns on their bounds found first on the
    normal equations (:func:`_free_columns`: a Cholesky solve per step, not a
    singular value decomposition), then the free columns solved once on
    ``L'`` (QR: the normal equations square the condition number, and a
    small smoothing leaves a valley flat enough to show it). The problem is
    strictly convex, so its minimum is unique; where that solution fails the
    bounds or the optimality conditions, bounded-variable least squares runs.
    """
    n = len(b)
    rhs = scipy.linalg.solve_triangular(sub.L, b, lower=True)
    A = sub.A
    found = _free_columns(sub, b, lower, x_free)
    free = np.zeros(n, dtype=bool) if found is None else found
    # A column the normal equations' rounding left on its bound while the gradient on L' pulls it off
    # (beyond bounded-variable least squares' own tolerance, 1e-10) is freed, and the free ones solved again.
    for _ in range(n if found is not None else 0):
        x = np.where(free, 0.0, lower)
        f = np.flatnonzero(free)
        if len(f):
            Q, R = sub.qr(free, f)
            x[f] = scipy.linalg.solve_triangular(R, Q.T @ (rhs - A[:, ~free] @ lower[~free]))
        if not np.all(x >= lower - 1e-9 * max(float(np.max(np.abs(x))), 1.0)):
            break
        g = np.where(free, 0.0, A.T @ (A @ x - rhs))
        if np.all(g >= -1e-10):
            return np.asarray(np.maximum(x, lower))
        free[int(np.argmin(g))] = True
    res = optimize.lsq_linear(A, rhs, bounds=(lower, np.full(n, np.inf)), method="bvls")
    return np.asarray(res.x)


def _free_columns(sub: _Subproblems, b: np.ndarray, lower: np.ndarray, x_free: np.ndarray) -> Optional[np.ndarray]:
    """The columns off their bounds at ``argmin x'Mx - 2b'x, x >= lower`` (None: the search did not settle).

    Lawson and Hanson's active set (*Solving Least Squares Problems*, 1974,
    ch. 23; unbounded columns always free) on the normal equations ``sub.M``, started
    from the unconstrained ``x_free`` cut to the bounds, its columns within
    them free.
    """
    M = sub.M
    n = len(b)
    bounded = np.isfinite(lower)
    free = ~bounded | (x_free > lower)
    # A feasible start (every iterate is): the unconstrained solution cut to the bounds.
    x = np.maximum(x_free, lower)
    tol = 1e-12 * max(float(np.max(np.abs(b))), float(np.max(np.abs(np.diag(M)))) * float(np.max(np.abs(x_free))),
                      1e-300)
    for _ in range(3 * n + 10):
        # The minimum over the free columns, the others on their bounds; stepped back to the first bound
        # it crosses (keeping every iterate feasible) until it crosses none.
        for _ in range(n + 1):
            s_ = _on_free(sub, b, lower, free)
            if s_ is None:
                return None
            cross = free & bounded & (s_ <= lower)
            if not cross.any():
                x = s_
                break
            with np.errstate(divide="ignore", invalid="ignore"):
                alpha = np.where(cross, (x - lower) / (x - s_), np.inf)
            k = int(np.argmin(alpha))
            x = x + float(np.clip(alpha[k], 0.0, 1.0)) * (s_ - x)
            free &= ~(bounded & (x <= lower))
            free[k] = False
            x = np.where(free | ~bounded, x, lower)
        else:
            return None
        w = b - M @ x
        enter = ~free & (w > tol)
        if not enter.any():
            return np.asarray(free, dtype=bool)
        free[int(np.argmax(np.where(enter, w, -np.inf)))] = True
    return None


def _on_free(sub: _Subproblems, b: np.ndarray, lower: np.ndarray, free: np.ndarray) -> Optional[np.ndarray]:
    """The minimum of ``x'Mx - 2b'x`` over the free columns, every other column at its bound (None: singular)."""
    x = np.where(free, 0.0, lower)
    f = np.flatnonzero(free)
    if len(f):
        rhs = b[f] - sub.M[f][:, ~free] @ lower[~free]
        c = sub.chol(free, f)
        if c is None:
            return None
        xf, info = POTRS(c, rhs, lower=0)
        if info != 0:
            return None
        x[f] = xf
    return x


def solve_channels(B: np.ndarray, M: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """:func:`solve` for every channel (``B``: unknowns x channels) on one factorisation of ``M``.

    The bounded solver runs only for a channel whose unconstrained solution leaves the bounds. Each
    channel is its own right-hand side: the same operations as :func:`solve`, so the same rounding (a
    system at a small smoothing is ill-conditioned enough to show a different order of operations).
    """
    cf = scipy.linalg.cho_factor(M, lower=True)
    sub: Optional[_Subproblems] = None
    X = np.empty(B.shape)
    for c in range(B.shape[1]):
        x = scipy.linalg.cho_solve(cf, B[:, c])
        tol = 1e-9 * max(float(np.max(np.abs(x))), 1.0)
        if np.all(x >= lower - tol):
            X[:, c] = np.maximum(x, lower)
            continue
        if sub is None:
            sub = _Subproblems(M, np.tril(cf[0]))
        X[:, c] = _bounded(B[:, c], lower, x, sub)
    return np.asarray(X)
