"""The regression behind the logs' offset: each log's power on the kernels around its shifted time.

:func:`~fingrav_native.insitu.align_logs_to_trace` scores a shift by the
residual of this regression: the kernels are put in groups (the signatures
with the most busy time their own, the rest pooled: :func:`kernel_groups`),
each group's executions cut in quarters, seen through a first-order lag
(:class:`RegressionDesign`: one-hot rows without a lag, running log-sum-exp
totals with one, and the normal equations neighbouring shifts share), and
the residual sums of squares come from the normal equations through a
pseudo-inverse by eigenvalues (:func:`least_squares_rss`,
:func:`normal_rss`). The search over shifts and lags, the interval and the
report are :mod:`fingrav_native.insitu._align`'s; the window sensors'
offset (:mod:`fingrav_native.insitu._align_windows`) reuses the residuals.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import numpy as np


def kernel_groups(starts: np.ndarray, ends: np.ndarray, kid: np.ndarray, budget: int,
            max_signatures: int) -> tuple[np.ndarray, int, int]:
    """Each kernel's regression group, the number of groups and how many signatures were pooled.

    The signatures with the most busy time keep their own group while the
    columns (four per group and one level) fit in ``budget``; the rest share
    the last group.
    """
    if len(kid) and int(kid.max()) <= 4 * len(kid):
        # Signature ids are small integers: a table of the ids present is np.unique's answer without its sort.
        present = np.bincount(kid) > 0
        sigs = np.flatnonzero(present)
        inv = (np.cumsum(present) - 1)[kid]
    else:
        sigs, inv = np.unique(kid, return_inverse=True)
    if len(sigs) <= max_signatures and 4 * len(sigs) + 1 <= budget:
        return inv.astype(np.int64), len(sigs), 0
    keep = max(min(max_signatures, (budget - 1) // 4 - 1), 0)
    busy = np.bincount(inv, weights=ends - starts, minlength=len(sigs))
    rank = np.empty(len(sigs), dtype=np.int64)
    rank[np.argsort(-busy, kind="stable")] = np.arange(len(sigs))
    return np.minimum(rank[inv], keep), keep + 1, len(sigs) - keep


class Located(NamedTuple):
    """Where each log (sorted times) falls among the kernels, for every lag at one shift."""

    t: np.ndarray  # the logs' times, relative to the first kernel
    j: np.ndarray  # the last kernel started by then (-1: none yet)
    u: np.ndarray  # time since that kernel started
    d: np.ndarray  # its duration
    col: np.ndarray  # its first column (4 x its group)
    prev: np.ndarray  # per group, its last kernel before that one, as a row of the running totals


class Segments(NamedTuple):
    """Each log's stretches of a run's shifts in one phase (``RegressionDesign.phase``): the shift each begins at, its log,
    the shift it ends at (exclusive), where the log lies at its beginning, and its phase."""

    k0: np.ndarray
    i: np.ndarray
    end: np.ndarray
    at: Located
    phase: np.ndarray


class RegressionDesign:
    """The regression of a log's power on the kernels around it: quarters of each group's executions.

    Column ``4 g + q`` is quarter ``q`` of group ``g``'s executions, the last
    column the level between kernels (the intercept).
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray, group: np.ndarray, n_groups: int) -> None:
        self.ref = float(starts[0])  # times relative to the first kernel keep exp's arguments small
        self.s = starts - self.ref
        self.d = ends - starts
        self.group, self.n_groups = group, n_groups
        self.p = 4 * n_groups + 1
        self.members = [np.flatnonzero(group == g) for g in range(n_groups)]
        # Per kernel and group, the row in the running totals (the groups stacked after a row of -inf) of the
        # group's last kernel before it; 0 (the -inf row) where there is none.
        first_row = 1 + np.concatenate([[0], np.cumsum([len(m) for m in self.members])[:-1]])
        seen = np.cumsum(group[:, None] == np.arange(n_groups)[None, :], axis=0, dtype=np.int64)
        seen -= group[:, None] == np.arange(n_groups)[None, :]
        self.before = np.where(seen > 0, seen - 1 + first_row[None, :], 0)
        # The same after a row of zeros (a log before every kernel: no last kernel in any group), indexed by the
        # kernel's number plus one, and each kernel's first column: :meth:`locate` gathers them once per log.
        self._before_or_none = np.concatenate([np.zeros((1, n_groups), dtype=self.before.dtype), self.before])
        self._col = 4 * group
        self._totals: dict[float, tuple[np.ndarray, np.ndarray]] = {}
        # What a set of shifts' lagged fits share whatever the logs' power (their regressors, Gram matrices and
        # eigendecompositions), kept where the same logs are fitted again with other power (the offset measured
        # a second time with a communication level taken off): keyed by the logs' times, the shifts and the lag.
        self.keep_fits = False
        self._fits: dict[tuple[Any, ...], Any] = {}
        self._current_at: Optional[tuple[Located, tuple[np.ndarray, np.ndarray, np.ndarray]]] = None

    def _kept_fit(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """``make()``, once per key while fits are kept (:attr:`keep_fits`)."""
        if not self.keep_fits:
            return make()
        if key not in self._fits:
            self._fits[key] = make()
        return self._fits[key]

    def locate(self, t: np.ndarray) -> Located:
        """Where the logs at times ``t`` (sorted) fall."""
        tr = t - self.ref
        j = np.searchsorted(self.s, tr, side="right") - 1
        jj = np.maximum(j, 0)
        return Located(tr, j, tr - self.s[jj], self.d[jj], self._col[jj], self._before_or_none[j + 1])

    def anova(self, at: Located, y: np.ndarray, blocks: int) -> np.ndarray:
        """Residual sums of squares without a lag, one per block of ``len(y)`` logs (one shift each): each log in
        its quarter or between kernels, a one-way analysis of variance."""
        inside = (at.j >= 0) & (at.u < at.d)
        q = np.clip((4.0 * at.u / np.where(at.d > 0, at.d, 1.0)).astype(np.int64), 0, 3)
        col = np.where(inside, at.col + q, self.p - 1) + self.p * np.repeat(np.arange(blocks), len(y))
        cnt = np.bincount(col, minlength=blocks * self.p).reshape(blocks, self.p)
        tot = np.bincount(col, weights=np.tile(y, blocks), minlength=blocks * self.p).reshape(blocks, self.p)
        explained = np.sum(tot * tot / np.maximum(cnt, 1), axis=1)
        return np.asarray(float(y @ y) - explained)

    def _running(self, tau: float) -> tuple[np.ndarray, np.ndarray]:
        """Per group (stacked, after an empty row), per kernel in order: the log of the summed
        ``exp(b / tau) - exp(a / tau)`` of its group's kernels so far over their last quarter ``[a, b)``
        (log-sum-exp: no overflow, no cut-off), and each quarter's total over the last quarter's.
        """
        if tau not in self._totals:
            q = self.d[:, None] / 4.0
            b = self.s[:, None] + q * np.arange(1, 5)[None, :]
            with np.errstate(divide="ignore"):
                v = b / tau + np.log(-np.expm1(-q / tau))  # -inf for a kernel of no duration: adds nothing
            tot = np.concatenate([np.full((1, 4), -np.inf)]
                                 + [np.logaddexp.accumulate(v[m], axis=0) for m in self.members])
            # A later quarter ends later, so its total is the largest: the shares are in [0, 1].
            with np.errstate(invalid="ignore"):
                share = np.nan_to_num(np.exp(tot - tot[:, 3:]), nan=0.0)
            self._totals[tau] = (tot[:, 3], share)
        return self._totals[tau]

    def lagged(self, at: Located, y: np.ndarray, tau: float, blocks: int,
               key: Optional[tuple[Any, ...]] = None) -> np.ndarray:
        """Residual sums of squares, one per block of ``len(y)`` logs, of each quarter's indicator through a lag
        (``key``: the logs' times and shifts, under which the power-free part is kept, :attr:`keep_fits`)."""
        def make() -> tuple[np.ndarray, _Factors]:
            X = self.rows(at, tau).reshape(blocks, len(y), self.p)
            return X, _factors(X)

        X, f = make() if key is None else self._kept_fit((*key, tau), make)
        return least_squares_rss(X, y, f)

    def rows(self, at: Located, tau: float) -> np.ndarray:
        """The regressors of the logs at ``at``: each quarter's indicator convolved with ``exp(-u / tau) / tau``.

        Power follows activity through a first-order lag (the simulator's
        ``tau_power_ns``; a board's regulators and sensor path), so a lag is
        fitted as a lag and not taken for a clock offset. At time ``t`` a
        finished quarter ``[a, b)`` adds ``exp((b - t) / tau) - exp((a - t) / tau)``;
        the kernels before the current one are finished (they do not overlap).
        """
        n = len(at.t)
        X = np.empty((n, self.p))
        X[:, -1] = 1.0
        last, share = self._running(tau)
        # One exp per group (its last quarters' total), the other quarters by their shares. Arguments are floored
        # at -600 and the regressors below 1e-100 zeroed: they add nothing, and exp's underflow and subnormal
        # products (squares below 2e-308 in the normal equations) are slow arithmetic.
        past = np.exp(np.maximum(np.take(last, at.prev) - (at.t / tau)[:, None], -600.0))
        X[:, :-1] = (np.take(share, at.prev, axis=0) * past[:, :, None]).reshape(n, -1)
        # The current kernel: its quarters begun by the log's time, finished or not.
        at_flat, begun, quarter = self._current(at)
        since = np.minimum(begun / tau, 600.0)
        done = np.maximum(since - quarter / tau, 0.0)
        part = np.where(since > 0, np.exp(-done) - np.exp(-np.maximum(since, 0.0)), 0.0)  # masked: no overflow
        X.reshape(-1)[at_flat] += part
        np.putmask(X, X < 1e-100, 0.0)
        return X

    def _current(self, at: Located) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What :meth:`rows` takes of the current kernel whatever the lag, for the logs at ``at`` that have one:
        its quarters' flat indices into the rows, the time since each quarter began, and a quarter's length.

        Kept for the last ``at`` (every lag of one set of shifts is fitted in turn on the same one).
        """
        if self._current_at is None or self._current_at[0] is not at:
            mine = np.flatnonzero(at.j >= 0)
            # Flat indices into X (one index array, not two broadcast ones: the same sums, half the time).
            flat = (mine * self.p + at.col[mine])[:, None] + np.arange(4)[None, :]
            u, d = at.u[mine, None], at.d[mine, None]
            self._current_at = (at, (flat, u - 0.25 * d * np.arange(4)[None, :], 0.25 * d))
        return self._current_at[1]

    def phase(self, at: Located) -> np.ndarray:
        """Per log, which stretch of the lagged regressors' formula it is in: the kernel and its quarter in
        progress (4 once it has ended), -1 before the first kernel.

        Within one phase a shift ``delta`` multiplies every lagged regressor by ``exp(-delta / tau)`` but the
        quarter in progress's ``1``: all of them decay from finished activity, and that quarter's is
        ``1 - exp(-since / tau)``.
        """
        rel = at.u[:, None] - 0.25 * at.d[:, None] * np.arange(4)[None, :]
        going = (rel > 0) & (rel - 0.25 * at.d[:, None] <= 0)
        q = np.where(going.any(axis=1), np.argmax(going, axis=1), 4)
        return np.where(at.j >= 0, 5 * at.j + q, -1)

    def segments(self, at: Located, m: int, n: int) -> Segments:
        """Each log's stretches of shifts in one phase, from the ``n`` logs located at ``m`` shifts (shift-major)."""
        ph = self.phase(at).reshape(m, n)
        begins = np.ones((m, n), dtype=bool)
        begins[1:] = ph[1:] != ph[:-1]
        k0, i = np.nonzero(begins)  # shift-major: each shift's beginning segments together
        # Where each segment ends: the next beginning of its log (m where none).
        order = np.lexsort((k0, i))
        nxt = np.full(len(k0), m)
        same = i[order][1:] == i[order][:-1]
        nxt[order[:-1][same]] = k0[order][1:][same]
        return Segments(k0, i, nxt, Located(*(f[k0 * n + i] for f in at)), ph[k0, i])

    def lagged_run(self, segs: Segments, y: np.ndarray, ds: np.ndarray, tau: float,
                   key: Optional[tuple[Any, ...]] = None) -> np.ndarray:
        """Residual sums of squares of the lagged fit at each shift of ``ds`` (sorted, a few steps apart).

        ``segs``: the logs' phases over the shifts (:meth:`segments`). Within one
        phase (:meth:`phase`) a log's regressors are ``a V + E`` at every shift, ``a = exp(-(delta - delta_0) /
        tau)``, ``E`` the indicators of its quarter in progress and of the level, ``V`` the rest divided by
        ``a``: its part of the normal equations is ``a^2 V'V + a (V'E + E'V) + E'E``. Each log's stretch in
        one phase (a segment) is built once, added where it begins and taken off where it ends, and the sums
        are accumulated over the shifts: the run costs the logs plus their crossings of a boundary, not the
        logs times the shifts. ``key``: the logs' times and shifts, under which the power-free part (``V``,
        ``E``, the Gram matrices and their eigendecompositions) is kept (:attr:`keep_fits`).
        """
        run = (self._run_design(segs, ds, tau) if key is None
               else self._kept_fit((*key, tau), lambda: self._run_design(segs, ds, tau)))
        V, E, a, moves, f = run
        yi = y[segs.i]
        p, m = self.p, len(ds)
        sy = np.zeros((m + 1, 2, p))
        for sign, pieces in moves:
            for s_, rows in pieces:
                Vk, Ek, yk = V[rows], E[rows], yi[rows]
                sy[s_] += sign * np.stack([Vk.T @ yk, Ek.T @ yk])
        accy = np.cumsum(sy[:m], axis=0)
        xy = a[:, None] * accy[:, 0] + accy[:, 1]
        return normal_rss(None, xy, float(y @ y), f)

    def _run_design(self, segs: Segments, ds: np.ndarray, tau: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[float, list[tuple[int, np.ndarray]]]],
                               _Factors]:
        """What :meth:`lagged_run` computes whatever the logs' power: ``V``, ``E``, the shifts' ``a``, where each
        segment is added and taken off, and the eigendecompositions of the shifts' Gram matrices."""
        k0, i, nxt, sub, phs = segs
        m = len(ds)
        d0 = float(ds[m // 2])
        a = np.exp(-(ds - d0) / tau)
        R = self.rows(sub, tau)
        E = np.zeros_like(R)
        E[:, -1] = 1.0
        going = (phs >= 0) & (phs % 5 < 4)
        E[np.flatnonzero(going), sub.col[going] + phs[going] % 5] = 1.0
        V = (R - E) / a[k0][:, None]
        p = self.p
        step = np.zeros((m + 1, 3, p, p))
        moves: list[tuple[float, list[tuple[int, np.ndarray]]]] = []
        for k, sign in ((k0, 1.0), (nxt, -1.0)):
            order_k = np.argsort(k, kind="stable")
            bounds = np.searchsorted(k[order_k], np.arange(m + 1), side="left")
            pieces: list[tuple[int, np.ndarray]] = []
            for s_ in range(m):
                rows = order_k[bounds[s_]:bounds[s_ + 1]]
                if not len(rows):
                    continue
                pieces.append((s_, rows))
                Vk, Ek = V[rows], E[rows]
                VE = Vk.T @ Ek
                step[s_] += sign * np.stack([Vk.T @ Vk, VE + VE.T, Ek.T @ Ek])
            moves.append((sign, pieces))
        acc = np.cumsum(step[:m], axis=0)
        gram = (a * a)[:, None, None] * acc[:, 0] + a[:, None, None] * acc[:, 1] + acc[:, 2]
        return V, E, a, moves, _normal_factors(gram)


class _Factors(NamedTuple):
    """The power-free part of a batch of least-squares fits: the columns' norms and the scaled Gram matrices'
    eigendecompositions, with the eigenvalues kept (the rank cut)."""

    norm: np.ndarray
    w: np.ndarray
    U: np.ndarray
    keep: np.ndarray


def _factors(X: np.ndarray) -> _Factors:
    """:func:`least_squares_rss`'s factorisation of ``X`` (blocks x rows x columns), which ``y`` does not enter."""
    Xt = X.transpose(0, 2, 1)
    return _normal_factors(Xt @ X, clip=False)


def _normal_factors(gram: np.ndarray, clip: bool = True) -> _Factors:
    """Columns scaled to unit norm, the eigendecomposition, and the eigenvalues above ``1e-10`` of the largest
    (``clip``: a diagonal that rounding left below zero read as zero; a Gram matrix of the rows has none)."""
    diag = np.diagonal(gram, axis1=1, axis2=2)
    norm = np.sqrt(np.maximum(diag, 0.0) if clip else diag)
    norm = np.where(norm > 0, norm, 1.0)  # a column of zeros stays zero: its eigenvalue is cut below
    w, U = np.linalg.eigh(gram / (norm[:, :, None] * norm[:, None, :]))
    return _Factors(norm, w, U, w > 1e-10 * w[:, -1:])


def least_squares_rss(X: np.ndarray, y: np.ndarray, factors: Optional[_Factors] = None) -> np.ndarray:
    """Residual sums of squares of ``y`` on each ``X[b]`` through the normal equations (columns x columns).

    Columns scaled to unit norm, then a pseudo-inverse by eigenvalues: a
    column no log sees, or two a lag makes alike, drops out as in a
    least-squares solver's rank cut. ``factors``: :func:`_factors` of ``X``, where already made.
    """
    Xt = X.transpose(0, 2, 1)
    norm, w, U, keep = factors if factors is not None else _factors(X)
    c = np.einsum("bji,bj->bi", U, (Xt @ y) / norm)
    c = np.where(keep, c / np.where(keep, w, 1.0), 0.0)
    coef = np.einsum("bij,bj->bi", U, c) / norm
    r = y[None, :] - np.einsum("bnp,bp->bn", X, coef)
    return np.asarray(np.einsum("bn,bn->b", r, r))


def normal_rss(gram: Optional[np.ndarray], xy: np.ndarray, yy: float, factors: Optional[_Factors] = None
               ) -> np.ndarray:
    """Residual sums of squares from the normal equations alone: ``y'y - z' G^+ z`` per block.

    ``gram`` is ``X'X`` (blocks x columns x columns; None where ``factors``, :func:`_normal_factors` of it, are
    given), ``xy`` is ``X'y``, ``yy`` is ``y'y``. The same pseudo-inverse as :func:`least_squares_rss`
    (columns scaled to unit norm, eigenvalues below ``1e-10`` of the largest cut), without the pass over the
    rows that the residuals would take.
    """
    if factors is None:
        if gram is None:
            raise ValueError("normal_rss: give gram or its factors")
        factors = _normal_factors(gram)
    norm, w, U, keep = factors
    proj = np.einsum("bji,bj->bi", U, xy / norm)
    explained = np.sum(np.where(keep, proj * proj / np.where(keep, w, 1.0), 0.0), axis=1)
    return np.asarray(np.maximum(yy - explained, 0.0))
