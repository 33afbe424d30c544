"""The one attribution engine: windowed logs over a tiled host timeline, solved within what they can tell.

Every averaging sensor's log is a linear functional of the power over what
its response covers (:meth:`~fingrav_native.sensors.SensorModel.interval_weights`:
a boxcar window, a first-order response, with delay, gain and offset). The
campaign path (:func:`~fingrav_native.method.deconvolve`, one kernel's
runs) and the in-situ path (:func:`~fingrav_native.method.fit_timeline`,
an application's mixed timeline) differ only in how they cut the timeline
into *tiles* and which unknown (a *column*) each tile draws: a bin of an
execution's curve, a level, a gap's power by time since the last kernel
ended, the idle baseline. Everything after that is here, shared:

1. **Design** (:mod:`fingrav_native.method._engine_design`). Each log's row:
   the weight of every tile its response covers (sparse); a log that reaches an excluded tile (a warm-up, a concurrent
   kernel, an outlier run) is left out and counted.
2. **Normal equations per block** of runs or iterations (memory bounded by
   the unknowns, not the logs); the blocks are the units of cross-validation
   and of the bootstrap.
3. **Model and smoothing choice by cross-validation over blocks**
   (:mod:`fingrav_native.method._engine_cv`; K-fold,
   the folds interleaved along the record): each candidate model (the gaps'
   own level or the end of the execution before them; warm-up curves; a slow
   drift or none) at each smoothing, scored by the squared error it predicts
   for the blocks it did not see. A criterion that survives model misfit,
   unlike GCV, which treats patterned residuals as noise to fit (Arlot and
   Celisse, Statistics Surveys 2010; Golub, Heath and Wahba 1979 for GCV).
4. **Bounded solve** (:mod:`fingrav_native.method._engine_solve`). Power columns are bounded below (0 W, or a stated
   floor), only when the unconstrained solution leaves the bounds: the
   columns on their bounds found by an active set on the penalised normal
   equations (Lawson and Hanson 1974), the others solved on their Cholesky
   factor (an exact reduction of the least-squares problem), with
   :func:`scipy.optimize.lsq_linear` (bounded-variable least squares) where
   that does not settle.
5. **Bootstrap over blocks** that repeats the model and smoothing choice in
   every resample (a reduced grid around each model's choice), so the
   percentile intervals carry that uncertainty too (Efron and Tibshirani
   1993, ch. 8 for blocks of dependent data). The resamples' per-fold normal
   equations are weighted sums of the per-block ones, formed for a batch of
   resamples in one product per fold.
6. **Identifiability.** For every reported energy, the share of its
   precision that comes from the logs rather than from the prior; below a
   tenth the energy is not determined by the logs, and the quantities it is
   confounded with are named (the data-only covariance).
7. **Model check** (:mod:`fingrav_native.method._engine_check`): residuals
   grouped by where each window's edges fall, their correlation along the
   record, and the timing and window-length misfits, each naming the
   assumption it tests.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import scipy.linalg
from scipy import sparse

from fingrav_native._threads import numeric_threads
from fingrav_native.method._engine_cv import FoldStats, Scratch, Twins, Variant, cv_fold_scores
from fingrav_native.method._engine_design import (
    MAX_BLOCKS,
    Design,
    Rows,
    blocks_within_memory,
    design_rows,
    effective_width,
    full_map,
    response_span,
    time_blocks,
)
from fingrav_native.method._engine_solution import Solution
from fingrav_native.method._engine_solve import solve_channels
from fingrav_native.sensors._model import SensorModel

_log = logging.getLogger(__name__)


#: The smoothing grid, relative to the data's scale over the penalty's.
LAMBDAS = np.logspace(-7.0, 3.0, 21)

#: A drift variant's columns are held at zero by this ridge (relative to the data's scale): "no drift".
_NO_DRIFT = 1e6

#: An energy is determined by the logs when they supply at least this share of its precision.
IDENTIFIABLE_SHARE = 0.1


@dataclass
class _Stats:
    """One design's normal equations per block: ``G`` (blocks, P, P), ``B`` (blocks, P, channels), ``yy``, counts."""

    G: np.ndarray
    B: np.ndarray
    yy: np.ndarray
    n: np.ndarray
    reach: np.ndarray  # logs whose response reaches each column


def _block_stats(A: sparse.csr_matrix, y: np.ndarray, blocks: np.ndarray, n_blocks: int) -> _Stats:
    """Normal equations of each block of logs."""
    P = A.shape[1]
    C = y.shape[1]
    G = np.zeros((n_blocks, P, P))
    B = np.zeros((n_blocks, P, C))
    yy = np.zeros((n_blocks, C))
    n = np.bincount(blocks, minlength=n_blocks)
    order = np.argsort(blocks, kind="stable")
    cuts = np.searchsorted(blocks[order], np.arange(n_blocks + 1))
    # The rows in block order once, each block's rows then a slice. Dense per block: a log's response reaches
    # most of a design's columns (over half of them through a window long against the kernels), where a sparse
    # product pays its bookkeeping on every entry; a dense product is one BLAS call, and one block's rows at a
    # time keep the dense copy a block's size, not the record's.
    A_sorted, y_sorted = A[order], y[order]
    for k in range(n_blocks):
        lo, hi = int(cuts[k]), int(cuts[k + 1])
        if hi == lo:
            continue
        Ak, yk = A_sorted[lo:hi].toarray(), y_sorted[lo:hi]
        np.matmul(Ak.T, Ak, out=G[k])
        B[k] = Ak.T @ yk
        yy[k] = np.sum(yk ** 2, axis=0)
    reach = np.diff(A.tocsc().indptr)
    return _Stats(G, B, yy, n, reach)


def _without(F: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """A difference prior (rows summing to zero) with the columns no log reaches taken out of its chains.

    Such a column is pinned at zero; left in a chain it would pull its
    reached neighbours towards zero.
    """
    if not gone.any():
        return F
    out = F.copy()
    out[gone, :] = 0.0
    out[:, gone] = 0.0
    out[np.diag_indices(len(out))] -= out.sum(axis=1)
    return out


def _variants(designs: Sequence[Design], rows: Sequence[Rows], stats: Sequence[_Stats]) -> list[Variant]:
    """Each design's penalties at the data's scale, twice where it has a drift (with it, and held at zero)."""
    out = []
    for i, (d, r, st) in enumerate(zip(designs, rows, stats)):
        Gt = st.G.sum(axis=0)
        P = Gt.shape[0]
        # The scale of the model's own columns (a drift's columns must not change the priors' weight).
        scale = max(float(np.trace(Gt[:d.n_col, :d.n_col])) / d.n_col, 1e-300)
        # Both in the column order LAPACK factors, as every system cross-validation forms from them is
        # (:func:`cv_fold_scores`): adding arrays of one layout runs along memory, of two it strides across it.
        R = np.zeros((P, P), order="F")
        R[:d.n_col, :d.n_col] = d.smooth
        R *= scale / max(float(np.trace(R)) / d.n_col, 1e-300) if R.any() else 0.0
        F = np.zeros((P, P), order="F")
        F[:d.n_col, :d.n_col] = scale * _without(d.fixed, st.reach[:d.n_col] == 0)
        F[np.diag_indices(P)] += 1e-9 * scale + np.where(st.reach == 0, scale, 0.0)
        lower = np.concatenate([d.lower, np.full(P - d.n_col, -np.inf)])
        out.append(Variant(i, P > d.n_col, d.name + (", with a slow drift" if P > d.n_col else ""), R, F, lower))
        if P > d.n_col:
            F0 = F.copy(order="F")
            F0[np.arange(d.n_col, P), np.arange(d.n_col, P)] += _NO_DRIFT * scale
            out.append(Variant(i, False, d.name, R, F0, lower, d.n_col, _NO_DRIFT * scale))
    return out


#: Memory for the bootstrap's batched normal equations (resamples x folds x unknowns^2 per design).
_BATCH_BYTES = 96 * 2 ** 20


def _fold_weights(weights: np.ndarray, folds: np.ndarray, n_folds: int) -> np.ndarray:
    """``(folds, blocks)``: each fold's weight on every block (the folds partition the blocks)."""
    return np.where(folds[None, :] == np.arange(n_folds)[:, None], weights[None, :], 0.0)


def _fold_stats(st: _Stats, weights: np.ndarray, folds: np.ndarray, n_folds: int, ch: int = 0) -> FoldStats:
    """Every fold's normal equations in one product."""
    W = _fold_weights(weights, folds, n_folds)
    return FoldStats(np.tensordot(W, st.G, axes=1), W @ st.B[:, :, ch], W @ st.yy[:, ch], np.any(W, axis=1))


def _smoothing_span(d: Design, r: Rows, v: Variant, st: _Stats, fold_scores: np.ndarray, lam: float,
                    x: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per map, how far its values move over the smoothings cross-validation cannot tell from the choice.

    Where the logs say little about a curve's shape (a window much longer
    than the executions), the cross-validated error is flat over a decade or
    more of smoothing while an energy still depends on it through how the
    shape splits partly covered executions: a smoothing bias no resample of
    the same choice shows. The smoothings within one standard error of the
    chosen one (the difference of their fold scores, ``(folds, LAMBDAS)``
    from the choice itself, paired by fold: the one-standard-error rule of
    Hastie, Tibshirani and Friedman, ESL 7.10) are solved too; each map's
    lowest and highest offset from the chosen value widen its interval
    (:meth:`Solution.interval`).
    """
    maps = {k: full_map(d, r, k) for k in d.maps}
    lo = {k: np.zeros((m.shape[0], x.shape[1])) for k, m in maps.items()}
    hi = {k: z.copy() for k, z in lo.items()}
    n_folds = fold_scores.shape[0]
    if n_folds < 3:
        return {k: (lo[k], hi[k]) for k in maps}
    j = int(np.argmin(np.abs(np.log(LAMBDAS) - math.log(max(lam, 1e-300)))))
    with np.errstate(invalid="ignore"):
        diff = fold_scores - fold_scores[:, [j]]
    ok = np.all(np.isfinite(diff), axis=0)
    diff = np.where(ok, diff, 0.0)
    se = np.sqrt(n_folds) * np.std(diff, axis=0, ddof=1)
    G = st.G.sum(axis=0)
    for i in np.flatnonzero(ok & (diff.sum(axis=0) <= se)):
        if i == j:
            continue
        M = G + float(LAMBDAS[i]) * v.R + v.F
        try:
            xi = solve_channels(_summed_B(st), M, v.lower)
        except (np.linalg.LinAlgError, ValueError):
            continue
        for k, m in maps.items():
            off = m @ (xi - x)
            lo[k] = np.minimum(lo[k], off)
            hi[k] = np.maximum(hi[k], off)
    return {k: (lo[k], hi[k]) for k in maps}


def _gcv_scores(v: Variant, st: _Stats, lams: np.ndarray, ch: int = 0) -> np.ndarray:
    """Generalised cross-validation (the fallback with fewer than three blocks; Craven and Wahba 1979)."""
    G = st.G.sum(axis=0)
    b = st.B[:, :, ch].sum(axis=0)
    yy = float(st.yy[:, ch].sum())
    n = float(st.n.sum())
    out = np.full(len(lams), math.inf)
    for i, lam in enumerate(lams):
        try:
            cf = scipy.linalg.cho_factor(G + lam * v.R + v.F)
        except (np.linalg.LinAlgError, ValueError):
            continue
        x = scipy.linalg.cho_solve(cf, b)
        edf = float(np.trace(scipy.linalg.cho_solve(cf, G)))
        rss = max(yy - 2.0 * float(x @ b) + float(x @ G @ x), 0.0)
        out[i] = n * rss / max(n - edf, 1.0) ** 2
    return out


def _summed_B(st: _Stats) -> np.ndarray:
    """The whole record's right-hand sides ``(unknowns, channels)``, each channel summed over the blocks."""
    return np.stack([st.B[:, :, c].sum(axis=0) for c in range(st.B.shape[2])], axis=1)


@dataclass(frozen=True)
class _Choice:
    variant: int
    lam: float
    score: float


def _pick(lams: Sequence[np.ndarray], scores: Sequence[np.ndarray]) -> _Choice:
    """The first variant and smoothing with the least score (``scores[variant]`` over ``lams[variant]``)."""
    best = _Choice(0, float(lams[0][0]), math.inf)
    for i, sc in enumerate(scores):
        j = int(np.argmin(sc))
        if sc[j] < best.score:
            best = _Choice(i, float(lams[i][j]), float(sc[j]))
    return best


def _choose(variants: Sequence[Variant], stats: Sequence[_Stats], fold_stats: Callable[[int], FoldStats],
            n_folds: int, grids: Sequence[np.ndarray],
            fixed_lam: Optional[float]) -> tuple[_Choice, np.ndarray, list[Optional[np.ndarray]]]:
    """The variant and smoothing with the least cross-validated error (GCV with too few blocks).

    ``fold_stats(design)`` gives a design's per-fold normal equations under
    the blocks' weights. Also every variant's scores over its grid, and
    (cross-validation only) its per-fold scores, which
    :func:`_smoothing_span` reads.
    """
    lams = [np.array([fixed_lam]) if fixed_lam is not None else g for g in grids]
    table = np.full((len(variants), max(len(g) for g in grids)), math.inf)
    per_fold: list[Optional[np.ndarray]] = []
    twins = Twins(variants, range(len(variants)))
    scratch = Scratch()
    for i, v in enumerate(variants):
        fs = cv_fold_scores(v, fold_stats(v.design), [lam * v.R for lam in lams[i]], shared=twins.before(i),
                             lams=lams[i], scratch=scratch)[0] if n_folds >= 2 else None
        per_fold.append(fs)
        sc = fs.sum(axis=0) if fs is not None else _gcv_scores(v, stats[v.design], lams[i])
        table[i, :len(sc)] = sc
    return _pick(lams, [row[:len(g)] for row, g in zip(table, lams)]), table, per_fold


def _identifiability(G: np.ndarray, M: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, list[list[int]]]:
    """Per energy row: the share of its precision from the logs, and the groups of rows the logs confound.

    The posterior variance ``h'M^-1h`` against the data-only variance
    ``h'G^+h`` (infinite where ``h`` leaves ``G``'s range): their ratio is
    the share of the precision the logs supply. Rows not determined are
    grouped by the data-only correlation of their estimates (|r| > 0.9, or
    both outside the range): every window covers them in the same mix.
    """
    if H.shape[0] == 0:
        return np.zeros(0), []
    d = np.sqrt(np.maximum(np.diag(G), 1e-300))
    Gs = G / d[:, None] / d[None, :]
    ev, U = np.linalg.eigh(Gs)
    keep = ev > 1e-9 * max(float(ev.max()), 1e-300)
    Hs = H / d[None, :]
    null = Hs @ U[:, ~keep]
    in_range = np.sum(null ** 2, axis=1) <= 1e-8 * np.maximum(np.sum(Hs ** 2, axis=1), 1e-300)
    proj = Hs @ U[:, keep]
    cov_data = (proj / ev[keep][None, :]) @ proj.T
    post = np.einsum("ij,ij->i", H, np.linalg.solve(M, H.T).T)
    var_data = np.where(in_range, np.diag(cov_data), np.inf)
    # Only a finite, positive data-only variance gives a ratio: outside G's range the logs supply no
    # precision (share 0, even where the prior's own variance is unbounded too); a zero variance is exact.
    finite = np.isfinite(var_data) & (var_data > 0)
    share = np.where(np.isinf(var_data), 0.0, 1.0)
    np.divide(post, var_data, out=share, where=finite)
    bad = np.flatnonzero(share < IDENTIFIABLE_SHARE)
    groups: list[list[int]] = []
    seen: set[int] = set()
    for i in bad:
        if i in seen:
            continue
        grp = [int(i)]
        for j in bad:
            if j == i or j in seen:
                continue
            both_out = not in_range[i] and not in_range[j]
            c = cov_data[i, j] / math.sqrt(max(cov_data[i, i] * cov_data[j, j], 1e-300))
            if both_out or abs(c) > 0.9:
                grp.append(int(j))
        seen.update(grp)
        groups.append(grp)
    return np.clip(share, 0.0, 1.0), groups


def _grids(choice_lams: Sequence[float], span: int = 2) -> list[np.ndarray]:
    """Per variant, the smoothing grid around its own choice (the bootstrap's reduced search)."""
    out = []
    for lam in choice_lams:
        j = int(np.argmin(np.abs(np.log(LAMBDAS) - math.log(max(lam, 1e-300)))))
        out.append(LAMBDAS[max(0, j - span):j + span + 1:span])
    return out


def _boot_choice(variants: Sequence[Variant], fold_stats: Callable[[int], FoldStats],
                 lam_R: Sequence[Sequence[np.ndarray]], lams: Sequence[np.ndarray], first: int,
                 starts: Sequence[int], scratch: Optional[Scratch] = None) -> _Choice:
    """:func:`_pick` over every variant's cross-validated error, without solving what cannot be the least.

    The variants are scored starting with ``first`` (the whole record's
    choice, the likeliest least), each from its smoothing ``starts[variant]``
    (its own choice on the whole record), each smoothing dropped once its
    partial error exceeds the least total so far (:func:`cv_fold_scores`),
    the folds taken largest error first under the least total so far (a
    fold hard for one model is hard for its neighbours, so a losing one
    passes the bound in fewer folds). Ties go where :func:`_pick` puts them:
    the lowest variant, then the lowest smoothing. ``scratch``: where the
    systems are formed (:class:`Scratch`), kept across resamples.
    """
    best: tuple[float, int, int] = (math.inf, 0, 0)
    order = [first] + [i for i in range(len(variants)) if i != first]
    twins = Twins(variants, order)
    fold_order: list[int] = []
    for i in order:
        fs, alive = cv_fold_scores(variants[i], fold_stats(variants[i].design), lam_R[i], best[0], twins.before(i),
                                    lams[i], starts[i], fold_order, scratch)
        sc = np.where(alive, fs.sum(axis=0), math.inf)
        j = int(np.argmin(sc))
        if (float(sc[j]), i, j) < best:
            best = (float(sc[j]), i, j)
            fold_order = [int(f) for f in np.argsort(-fs[:, j], kind="stable")]
    if best[0] == math.inf:
        return _Choice(0, float(lams[0][0]), math.inf)
    return _Choice(best[1], float(lams[best[1]][best[2]]), best[0])


def _as_slice(idx: np.ndarray) -> slice | np.ndarray:
    """Sorted indices as the slice that picks them where they are evenly spaced; else the indices themselves."""
    if len(idx) == 0:
        return idx
    step = int(idx[1] - idx[0]) if len(idx) > 1 else 1
    if step > 0 and np.array_equal(idx, idx[0] + step * np.arange(len(idx))):
        return slice(int(idx[0]), int(idx[-1]) + 1, step)
    return idx


def _boot_fold_stats(stats: Sequence[_Stats], wts: np.ndarray, folds: np.ndarray, n_folds: int,
                     buffers: Optional[Sequence[np.ndarray]] = None
                     ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per design, every resample's (rows of ``wts``) per-fold ``G``, ``b`` of channel 0, ``yy`` and presence.

    The resamples' per-fold normal equations are weighted sums of the same
    per-block ones: one matrix product per fold (over its own blocks) for a
    batch of resamples, instead of one pass over the blocks per resample and
    variant. ``G`` is written into ``buffers`` where given (per design,
    ``(folds, at least resamples, P, P)``; by default fresh ones) and returned
    as a ``(resamples, folds, P, P)`` view of them: a batch's matrices are tens
    of megabytes, which a fresh array gets from the system a page at a time, a
    fault at each first write (twice the products' own time), where the
    previous batch's memory is already mapped.
    """
    k, n_blocks = wts.shape
    if buffers is None:
        buffers = [np.empty((n_folds, k) + st.G.shape[1:]) for st in stats]
    present = np.stack([wts[:, folds == f].any(axis=1) for f in range(n_folds)], axis=1)
    fold_blocks = [np.flatnonzero(folds == f) for f in range(n_folds)]
    fold_views = [_as_slice(blk) for blk in fold_blocks]
    out = []
    for st, buf in zip(stats, buffers):
        P = st.G.shape[1]
        G = buf[:, :k]
        B = np.empty((k, n_folds, P))
        yy = np.empty((k, n_folds))
        for f, blk in enumerate(fold_blocks):
            # A fold's normal matrices as a strided view where its blocks are evenly spaced (the folds deal the
            # blocks out in turn), not a copy per batch: the product packs the same rows in the same order, so
            # the sums are the same to the bit (the vectors below are copied: a strided one is summed otherwise).
            # Written straight into the fold's contiguous slab of the buffer (no product to copy over).
            np.matmul(wts[:, blk], st.G[fold_views[f]].reshape(-1, P * P), out=G[f].reshape(k, P * P))
            B[:, f] = wts[:, blk] @ st.B[blk, :, 0]
            yy[:, f] = wts[:, blk] @ st.yy[blk, 0]
        out.append((G.transpose(1, 0, 2, 3), B, yy, present))
    return out


def _bootstrap(designs: Sequence[Design], variants: Sequence[Variant], stats: Sequence[_Stats],
               rows: Sequence[Rows], folds: np.ndarray, n_folds: int, lam_by_variant: Sequence[float],
               fixed_lam: Optional[float], n_boot: int, seed: int, first: int = 0) -> dict[str, np.ndarray]:
    """Maps re-estimated on blocks resampled with replacement, choosing model and smoothing again each time.

    Every resample's choice is made first (:func:`_boot_choice`, starting
    with ``first``, the whole record's choice; the per-fold normal equations
    of a batch of resamples in one product), then each resample is solved at
    its choice.
    """
    n_blocks = len(stats[0].n)
    C = stats[0].B.shape[2]
    keys = list(designs[0].maps)
    # Sized as the whole record's choice reports its maps: a resample that chooses a design with other rows
    # for a map (warm-up curves add levels) leaves that map's draw out, never the others'.
    chosen = designs[variants[first].design]
    draws = {k: np.full((n_boot, chosen.maps[k].shape[0], C), np.nan) for k in keys}
    rng = np.random.default_rng(seed)
    wts = np.stack([rng.multinomial(n_blocks, np.full(n_blocks, 1.0 / n_blocks))
                    for _ in range(n_boot)]).astype(np.float64)
    grids = _grids(lam_by_variant)
    lams = [np.array([fixed_lam]) if fixed_lam is not None else g for g in grids]
    if n_folds >= 2:
        lam_R = [[lam * v.R for lam in g] for v, g in zip(variants, lams)]
        # Each variant's search starts at its own choice on the whole record.
        starts = [int(np.argmin(np.abs(np.log(g) - math.log(max(lam, 1e-300)))))
                  for g, lam in zip(lams, lam_by_variant)]
        per = 8 * n_folds * sum(st.G.shape[1] * (st.G.shape[1] + 1) for st in stats)
        chunk = int(np.clip(_BATCH_BYTES // per, 1, n_boot))
        choices = []
        buffers = [np.empty((n_folds, chunk) + st.G.shape[1:]) for st in stats]
        scratch = Scratch()
        for start in range(0, n_boot, chunk):
            batch = _boot_fold_stats(stats, wts[start:start + chunk], folds, n_folds, buffers)
            for j in range(len(batch[0][0])):
                def fold_stats(design: int, j: int = j) -> FoldStats:
                    G, b, yy, present = batch[design]
                    return FoldStats(G[j], b[j], yy[j], present[j])
                choices.append(_boot_choice(variants, fold_stats, lam_R, lams, first, starts, scratch))
    else:
        # GCV scores the whole record whatever the weights: one choice for every resample.
        choices = [_choose(variants, stats, _no_folds, n_folds, grids, fixed_lam)[0]] * n_boot
    failed = 0
    other: dict[str, int] = {}
    for dsg, (d, r, st) in enumerate(zip(designs, rows, stats)):
        idx = [i for i, ch in enumerate(choices) if variants[ch.variant].design == dsg]
        if not idx:
            continue
        maps = {k: full_map(d, r, k) for k in keys}
        for i in idx:
            ch = choices[i]
            v = variants[ch.variant]
            # The resample's normal equations summed as the choice on the whole record sums them (one
            # product each, not a batched one): rounding amplified by a small smoothing stays the same.
            G = np.tensordot(wts[i], st.G, axes=1)
            B = np.stack([np.tensordot(wts[i], st.B[:, :, c], axes=1) for c in range(C)], axis=1)
            try:
                x = solve_channels(B, G + ch.lam * v.R + v.F, v.lower)
            except (np.linalg.LinAlgError, ValueError):
                failed += 1
                continue
            for k in keys:
                if maps[k].shape[0] == draws[k].shape[1]:
                    draws[k][i] = maps[k] @ x
                else:
                    other[k] = other.get(k, 0) + 1
    if failed or other:
        _log.debug("attribution bootstrap: %d of %d resamples failed and are left out; resamples whose design "
                   "has other rows, left out of that map only: %s", failed, n_boot, other)
    return draws


def _no_folds(design: int) -> FoldStats:
    """The fold statistics of a choice made by GCV, which reads none."""
    raise AssertionError("GCV reads no folds")


@numeric_threads()
def attribute(designs: Sequence[Design], sensor: SensorModel, t: np.ndarray, w: np.ndarray, y: np.ndarray,
              block_of: Optional[np.ndarray] = None, *, lam: Optional[float] = None, bootstrap: int = 100,
              seed: int = 0, n_folds: int = 5) -> Solution:
    """Solve for every candidate design, keep the one cross-validation prefers, and bootstrap what it reports.

    Parameters
    ----------
    designs : sequence of Design
        The candidate models (all with the same map keys and row counts).
    sensor : SensorModel
        The response; ``y`` must already have the gain and offset undone.
    t, w : numpy.ndarray
        Logs' stamps on the tiles' timeline and their windows (ns).
    y : numpy.ndarray
        ``(logs, channels)`` calibrated values; NaN rows are left out.
    block_of : numpy.ndarray, optional
        Per log, its block (a run, an iteration); default: blocks of
        consecutive logs spanning ten responses (:func:`time_blocks`).
    lam : float, optional
        A fixed smoothing instead of the cross-validated one.
    bootstrap : int
        Resamples of the blocks (0: no intervals).
    seed : int
    n_folds : int
        Cross-validation folds over blocks (GCV when fewer than 3 blocks).

    Returns
    -------
    Solution

    Raises
    ------
    ValueError
        When no log's response lies within the tiles, or fewer logs than
        columns they reach.
    FitTooLargeError
        When the normal matrices would exceed :data:`~fingrav_native.method._engine_design.MEMORY_BYTES` even over
        ``MIN_BLOCKS`` blocks (a ``MemoryError``).
    """
    # Thousands of solves of a few hundred unknowns: one BLAS thread (the package's policy, _threads.py;
    # a 6 s loop record on 2 cores took 106 s with BLAS's default threads, 14 s with one).
    return _attribute(designs, sensor, t, w, y, block_of, lam=lam, bootstrap=bootstrap, seed=seed, n_folds=n_folds)


def _attribute(designs: Sequence[Design], sensor: SensorModel, t: np.ndarray, w: np.ndarray, y: np.ndarray,
               block_of: Optional[np.ndarray], *, lam: Optional[float], bootstrap: int, seed: int,
               n_folds: int) -> Solution:
    """:func:`attribute`'s work (under the thread policy its caller entered)."""
    ok = np.isfinite(t) & np.all(np.isfinite(y), axis=1)
    rows = [design_rows(d, sensor, t, w, ok) for d in designs]
    # Every candidate is scored on the same logs and folds: those all of them can use.
    common = np.zeros(len(t), dtype=bool)
    common[rows[0].used] = True
    for r in rows[1:]:
        mask = np.zeros(len(t), dtype=bool)
        mask[r.used] = True
        common &= mask
    if any(len(r.used) != int(common.sum()) for r in rows):
        rows = [design_rows(d, sensor, t, w, common) for d in designs]
    if any(len(r.used) == 0 for r in rows):
        raise ValueError("samples: no log's response lies within the executions' timeline and its gaps")
    blocks_all = (time_blocks(*response_span(sensor, t, w), width_ns=effective_width(sensor, w)) if block_of is None
                  else np.unique(np.asarray(block_of), return_inverse=True)[1].ravel())
    # Blocks renumbered over the logs used; neighbours merged down to MAX_BLOCKS.
    blocks = np.unique(blocks_all[rows[0].used], return_inverse=True)[1].ravel()
    n_blocks = int(blocks.max()) + 1
    if n_blocks > MAX_BLOCKS:
        blocks = blocks * MAX_BLOCKS // n_blocks
        n_blocks = MAX_BLOCKS
    blocks, n_blocks, memory_note = blocks_within_memory([r.A.shape[1] for r in rows], blocks, n_blocks, n_folds)
    stats = [_block_stats(r.A, y[r.used], blocks, n_blocks) for r in rows]
    # Fewer logs than unknowns is allowed: the priors carry what the logs leave open, and the
    # identifiability check says which energies rest on them.
    if len(rows[0].used) < 3:
        raise ValueError(f"samples: {len(rows[0].used)} usable logs; at least 3 are needed")
    variants = _variants(designs, rows, stats)
    folds_n = min(n_folds, n_blocks) if n_blocks >= 3 else 0
    folds = np.arange(n_blocks) % max(folds_n, 1)
    ones = np.ones(n_blocks)
    fold_stats = {i: _fold_stats(st, ones, folds, max(folds_n, 1)) for i, st in enumerate(stats)} if folds_n >= 2 else {}
    choice, table, per_fold = _choose(variants, stats, fold_stats.__getitem__, folds_n, [LAMBDAS] * len(variants), lam)
    lams = [float((LAMBDAS if lam is None else np.array([lam]))[int(np.argmin(row[:len(LAMBDAS)]))])
            if np.isfinite(row).any() else float(LAMBDAS[0]) for row in table]
    v = variants[choice.variant]
    d, st, r = designs[v.design], stats[v.design], rows[v.design]
    G = st.G.sum(axis=0)
    M = G + choice.lam * v.R + v.F
    x = solve_channels(_summed_B(st), M, v.lower)
    values = {k: full_map(d, r, k) @ x for k in d.maps}
    n_boot = bootstrap if n_blocks >= 3 else 0
    draws = _bootstrap(designs, variants, stats, rows, folds, folds_n, lams, lam, n_boot, seed,
                       choice.variant) if n_boot else \
        {k: np.zeros((0,) + values[k].shape) for k in d.maps}
    fs = per_fold[choice.variant]
    span = _smoothing_span(d, r, v, st, fs, choice.lam, x) if lam is None and fs is not None else {}
    H = full_map(d, r, d.energies)
    # Without a drift its columns are held at zero: they are no unknowns the energies could trade with
    # (counted, a 6 s load would be "confounded" with a drift that the chosen model does not have).
    keep = slice(None) if v.drift else slice(0, d.n_col)
    share, groups = _identifiability(G[keep, keep], M[keep, keep], H[:, keep])
    resid = y[r.used] - r.A @ x
    return Solution(
        design=v.design, model=v.name, lam=choice.lam,
        cv_scores={vv.name: float(np.min(row)) for vv, row in zip(variants, table)}, x=x, values=values,
        draws=draws, rows=r, G=G, M=M, residual=np.asarray(resid), info_share=share, confounded=groups,
        n_blocks=n_blocks, n_folds=folds_n, n_boot=n_boot, blocks=blocks, lower=v.lower, smoothing_span=span,
        memory_note=memory_note)
