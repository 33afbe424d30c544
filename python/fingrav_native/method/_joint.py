"""Windowed logs over a timeline of many kernels: every kernel's curve and the gaps' power, fitted jointly.

:func:`~fingrav_native.method.deconvolve` recovers one kernel's
curve from runs that hold only that kernel (a controlled campaign). In a
running application a 1 ms window covers several kernels of different
signatures and the gaps between them, so a log is a mixture: attributing it
to one kernel is tens of percent off. Here each log is what the sensor
model says it is, a linear functional of the power over the timeline
(Yang et al., SC'24; equivalent-time sampling), and the timeline is tiled
into unknowns:

* each kernel class (a signature) draws one curve over execution progress,
  ``bins`` steps of power, shared by its executions;
* the gaps between kernels draw a power that depends on the kernel before
  them and the time since it ended (the device's power falls back towards
  idle from that kernel's level), in steps of :data:`GAP_EDGES_NS`; a
  launch gap (shorter than the first step) draws the power of the end of
  the kernel before it.

The least-squares fit carries a second-difference penalty on each curve
(chosen by generalised cross-validation; Craven and Wahba 1979); the
intervals are cluster-robust (Liang and Zeger 1986) over runs of logs whose
windows overlap, because a sliding average's errors are correlated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import numpy.typing as npt
from scipy import sparse, stats

from fingrav_native.sensors._model import SensorModel

#: Gap power steps by time since the last kernel ended (ns): launch gaps, host gaps, pauses.
GAP_EDGES_NS = (0.0, 10_000.0, 40_000.0, 150_000.0, 500_000.0, 2_000_000.0, math.inf)


@dataclass(frozen=True)
class TimelineFit:
    """Every kernel class's curve and the gaps' power, from windowed logs over a mixed timeline.

    Attributes
    ----------
    bins : numpy.ndarray
        Curve bins per class.
    curves, sd : dict of str to list of numpy.ndarray
        Per channel, per class: power per bin (W) and its standard error.
    energy_j, energy_half_width_j : dict of str to numpy.ndarray
        Per channel, per class: energy per execution (curve x the class's
        duration) and the half-width of its interval at ``confidence``.
    gap_w : dict of str to numpy.ndarray
        Per channel, ``(classes + 1, steps)``: the power in gaps longer than
        a launch gap after a kernel of each class (the last row: after an
        excluded one), per step of :data:`GAP_EDGES_NS` (NaN where no log saw
        such a gap).
    durations_ns : numpy.ndarray
        The duration each class's energy is taken over.
    n_logs : int
        Logs used.
    dropped_logs : int
        Logs left out: their response reaches outside the timeline or an
        excluded span (warm-up, concurrent kernels).
    logs_per_bin : list of numpy.ndarray
        Per class, the logs whose response reaches each bin.
    edge_logs : numpy.ndarray
        Per class, logs with a window edge inside one of its executions
        (where a curve's shape comes from).
    lam : float
        The smoothing chosen (relative to the data's scale).
    residual_w : dict of str to float
        RMS residual per channel.
    confidence : float
    """

    bins: np.ndarray
    curves: dict[str, list[np.ndarray]]
    sd: dict[str, list[np.ndarray]]
    energy_j: dict[str, np.ndarray]
    energy_half_width_j: dict[str, np.ndarray]
    gap_w: dict[str, np.ndarray]
    durations_ns: np.ndarray
    n_logs: int
    dropped_logs: int
    logs_per_bin: list[np.ndarray]
    edge_logs: np.ndarray
    lam: float
    residual_w: dict[str, float]
    confidence: float


def _tiles(starts: np.ndarray, ends: np.ndarray, cls: np.ndarray, offsets: np.ndarray, bins: np.ndarray,
           gap_col0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The timeline as sorted, non-overlapping tiles (start, end, column; -1 = excluded).

    Executions tile into their class's curve bins (``cls``: -1 excluded); gaps into the steps of
    the class of the execution before them.
    """
    n = len(starts)
    n_cls = len(bins)
    K = np.where(cls >= 0, bins[np.maximum(cls, 0)], 1)  # per execution
    reps = np.repeat(np.arange(n), K)
    k = np.arange(int(K.sum())) - np.repeat(np.cumsum(K) - K, K)
    d = (ends - starts)[reps]
    a = starts[reps] + d * k / K[reps]
    b = starts[reps] + d * (k + 1) / K[reps]
    col = np.where(cls[reps] >= 0, offsets[np.maximum(cls[reps], 0)] + k, -1)
    # Gaps between consecutive executions, stepped by time since the last one ended.
    g0, g1 = ends[:-1], starts[1:]
    ok = g1 > g0
    edges = np.asarray(GAP_EDGES_NS)
    ga, gb, gc = [], [], []
    # A launch gap (shorter than the first step) draws the power of the end of the execution before
    # it: the power follows activity with a lag of microseconds, and a separate unknown there is
    # collinear with the kernels around it (it took 1.5 kW in a fit of a simulated loop).
    before = np.where(cls[:-1] >= 0, offsets[np.maximum(cls[:-1], 0)] + K[:-1] - 1, -1)
    launch = (g1 - g0) < edges[1]
    ga.append(g0[ok & launch])
    gb.append(g1[ok & launch])
    gc.append(before[ok & launch])
    # Longer gaps: the power falls back from the level of the kernel before (a set of steps per class).
    prev = np.where(cls[:-1] >= 0, cls[:-1], n_cls)
    for m in range(len(edges) - 1):
        lo = g0 + edges[m]
        hi = np.minimum(g1, g0 + edges[m + 1])
        sel = ok & ~launch & (hi > lo)
        ga.append(lo[sel])
        gb.append(hi[sel])
        gc.append(gap_col0 + prev[sel] * (len(edges) - 1) + m)
    a = np.concatenate([a, *ga])
    b = np.concatenate([b, *gb])
    col = np.concatenate([col, *gc])
    order = np.argsort(a, kind="stable")
    return a[order], b[order], col[order]


def _check_timeline(t_ns: npt.ArrayLike, starts_ns: npt.ArrayLike, ends_ns: npt.ArrayLike, classes: npt.ArrayLike,
                    bins: Sequence[int], confidence: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The logs' stamps, the executions (start, end, class) and the bins per class, as arrays, checked."""
    t = np.asarray(t_ns, dtype=np.float64)
    s = np.asarray(starts_ns, dtype=np.float64)
    e = np.asarray(ends_ns, dtype=np.float64)
    cls = np.asarray(classes, dtype=np.int64)
    K = np.asarray(bins, dtype=np.int64)
    if t.ndim != 1:
        raise ValueError("t_ns: must be 1-D")
    if not (s.shape == e.shape == cls.shape) or s.ndim != 1 or len(s) < 2:
        raise ValueError("starts_ns, ends_ns, classes: must be 1-D of one length >= 2")
    if np.any(np.diff(s) < 0) or np.any(e < s) or np.any(s[1:] < e[:-1] - 1.0):
        raise ValueError("starts_ns, ends_ns: executions must be in start order and not overlap")
    if K.ndim != 1 or len(K) == 0 or np.any(K < 1):
        raise ValueError(f"bins={list(bins)!r}: one count >= 1 per class")
    if np.any(cls >= len(K)) or np.any(cls < -1):
        raise ValueError(f"classes: must be -1 or in [0, {len(K)})")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r}: must be in (0, 1)")
    return t, s, e, cls, K


def _calibrated(sensor: SensorModel, values: dict[str, npt.ArrayLike], t: np.ndarray) -> dict[str, np.ndarray]:
    """Each channel's logs with the sensor's calibration undone, so the unknowns are true watts."""
    ys = {}
    for ch, v in values.items():
        y = np.asarray(v, dtype=np.float64)
        if y.shape != t.shape:
            raise ValueError(f"values[{ch!r}]: {y.shape} values for {t.shape[0]} logs")
        ys[ch] = (y - sensor.offset_w) / sensor.gain
    if "total" not in ys:
        raise ValueError("values: a 'total' channel is needed (the smoothing is chosen on it)")
    return ys


def _response_matrix(sensor: SensorModel, t: np.ndarray, w: np.ndarray,
                     tiles: tuple[np.ndarray, np.ndarray, np.ndarray], n_col: int
                     ) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """The weight of each usable log on each tile's column (sparse), the usable logs, and every log's response.

    A log is usable when its response ``[lo, hi]`` lies inside the timeline
    and reaches no excluded tile; the tiles it reaches are a contiguous run
    of the sorted tiles.
    """
    a, b, col = tiles
    hi = t - sensor.delay_ns
    lo = hi - np.asarray(sensor.memory_ns(w), dtype=np.float64)
    inside = (lo >= a[0]) & (hi <= b[-1])
    j0 = np.searchsorted(b, lo, side="right")
    j1 = np.searchsorted(a, hi, side="left")
    cnt = np.where(inside, np.maximum(j1 - j0, 0), 0)
    rows = np.repeat(np.arange(len(t)), cnt)
    tile = np.repeat(j0, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    wt = sensor.interval_weights(t[rows], a[tile], b[tile], window_ns=w[rows])
    bad = np.zeros(len(t), dtype=bool)
    bad[rows[(col[tile] < 0) & (wt > 0)]] = True
    use = inside & ~bad & (cnt > 0)
    keep = use[rows] & (wt > 0)
    rows, tile, wt = rows[keep], tile[keep], wt[keep]
    idx = np.flatnonzero(use)
    new_row = np.full(len(t), -1)
    new_row[idx] = np.arange(len(idx))
    A = sparse.csr_matrix((wt, (new_row[rows], col[tile])), shape=(len(idx), n_col))
    return A, idx, lo, hi


def _with_drift(A: sparse.csr_matrix, lo: np.ndarray, hi: np.ndarray,
                drift_ns: float) -> tuple[sparse.csr_matrix, np.ndarray]:
    """``A`` with the columns of a slow drift shared by everything, and the drift's mean over the logs per column.

    The package heating over seconds (and leakage with it): piecewise
    linear in time, centred over the logs so the curves are the average
    level. ``A`` unchanged with ``drift_ns`` 0 or logs spanning under three knots.
    """
    if not drift_ns > 0:
        return A, np.zeros(0)
    mid = 0.5 * (lo + hi)
    nk = int(min(max(2, math.ceil((mid.max() - mid.min()) / drift_ns) + 1), 200))
    if nk < 3:
        return A, np.zeros(0)
    # Hat functions, two per log (sparse); the first is dropped because the hats sum to one,
    # like the curves and gaps do: the drift is zero at the first knot, and its mean over the
    # logs is added back to every level below (an exact reparametrisation).
    n = len(mid)
    step = (mid.max() - mid.min()) / (nk - 1)
    u = (mid - mid.min()) / step
    j = np.minimum(np.floor(u).astype(np.int64), nk - 2)
    f = u - j
    r_ = np.concatenate([np.arange(n), np.arange(n)])
    c_ = np.concatenate([j, j + 1])
    v_ = np.concatenate([1.0 - f, f])
    keep_h = c_ > 0
    B = sparse.csr_matrix((v_[keep_h], (r_[keep_h], c_[keep_h] - 1)), shape=(n, nk - 1))
    drift_mean = np.asarray(B.mean(axis=0)).ravel()
    return sparse.hstack([A, B], format="csr"), drift_mean


def _edge_logs(s: np.ndarray, e: np.ndarray, cls: np.ndarray, lo: np.ndarray, n_cls: int) -> np.ndarray:
    """Per class, the logs whose window edge falls inside one of its executions: the shape's information."""
    edge_ex = np.searchsorted(s, lo, side="right") - 1
    in_ex = (edge_ex >= 0) & (lo < e[np.clip(edge_ex, 0, None)])
    edge_cls = cls[np.clip(edge_ex, 0, None)][in_ex]
    return np.bincount(edge_cls[edge_cls >= 0], minlength=n_cls)


def _curve_penalty(K: np.ndarray, offsets: np.ndarray, n_col: int) -> np.ndarray:
    """Second differences of each class's curve (classes of fewer than 3 bins: none)."""
    P = np.zeros((n_col, n_col))
    for c in range(len(K)):
        if K[c] >= 3:
            D = np.diff(np.eye(int(K[c])), 2, axis=0)
            o = int(offsets[c])
            P[o:o + K[c], o:o + K[c]] += D.T @ D
    return P


def _continuity(n_cls: int, gap_col0: int, n_steps: int, n_col: int) -> np.ndarray:
    """First differences along each class's gap steps: the power after a kernel relaxes, it does not jump.

    Without it, the first step after a kernel is nearly collinear with the
    kernel and took 2.5 kW on a simulated loop. (Tying it to the kernel's
    last bin as well biased an exact piecewise-constant timeline by 2.5 %:
    a kernel's end can be a step.)
    """
    Pc = np.zeros((n_col, n_col))
    for c in range(n_cls + 1):
        chain = [gap_col0 + c * n_steps + m for m in range(n_steps)]
        for u, v in zip(chain[:-1], chain[1:]):
            Pc[u, u] += 1.0
            Pc[v, v] += 1.0
            Pc[u, v] -= 1.0
            Pc[v, u] -= 1.0
    return Pc


def _ridge(G: np.ndarray, Pc: np.ndarray, reach: np.ndarray, continuity: float) -> np.ndarray:
    """The fixed part of the regulariser: a tiny ridge, the gaps' continuity, and a pin on columns no log reaches."""
    n_col = len(G)
    scale = np.trace(G) / n_col
    ridge = 1e-9 * scale * np.eye(n_col) + continuity * scale * Pc
    ridge[np.diag_indices(n_col)] += np.where(reach == 0, scale, 0.0)
    return np.asarray(ridge)


def _smoothing(A: sparse.csr_matrix, G: np.ndarray, P: np.ndarray, ridge: np.ndarray, aty: np.ndarray,
               y: np.ndarray) -> tuple[float, float]:
    """The curves' smoothing, chosen by GCV on the total channel: absolute, and relative to the data's scale."""
    n, n_col = A.shape
    scale = np.trace(G) / n_col
    best = (math.inf, 0.0)
    if not P.any():
        return 0.0, best[1]
    p_scale = scale / max(np.trace(P) / n_col, 1e-300)
    for lam in np.logspace(-6, 1, 15):
        M = G + lam * p_scale * P + ridge
        x = np.linalg.solve(M, aty)
        rss = float(np.sum((A @ x - y) ** 2))
        edf = float(np.trace(np.linalg.solve(M, G)))
        gcv = n * rss / max(n - edf, 1.0) ** 2
        if gcv < best[0]:
            best = (gcv, lam)
    return best[1] * p_scale, best[1]


def _clusters(lo: np.ndarray, hi: np.ndarray, cluster_windows: float) -> tuple[sparse.csr_matrix, int]:
    """Blocks of consecutive logs spanning at least ``cluster_windows`` responses, as a (clusters x logs) sum.

    A sliding average's errors are shared by overlapping windows, and a
    kernel's departures from its shared curve (a slow run, a thermal swing)
    by every log over them: an interval that treats logs as independent
    was 3x too narrow on a simulated loop.
    """
    n = len(lo)
    mid_u = 0.5 * (lo + hi)
    span = max(float(np.median(hi - lo)), float(np.median(np.diff(mid_u))) if n > 1 else 1.0)
    cluster = np.floor((mid_u - mid_u[0]) / (cluster_windows * span)).astype(np.int64)
    cluster = np.unique(cluster, return_inverse=True)[1]
    n_cl = int(cluster.max()) + 1
    return sparse.csr_matrix((np.ones(n), (cluster, np.arange(n))), shape=(n_cl, n)), n_cl


def _durations(cls: np.ndarray, s: np.ndarray, e: np.ndarray, n_cls: int,
               durations_ns: Optional[npt.ArrayLike]) -> np.ndarray:
    """Per class, the duration its energy is taken over: given, or the median of its executions."""
    durations = np.empty(n_cls)
    for c in range(n_cls):
        mine = cls == c
        durations[c] = float(np.median((e - s)[mine])) if mine.any() else math.nan
    if durations_ns is not None:
        d_in = np.asarray(durations_ns, dtype=np.float64)
        if d_in.shape != durations.shape:
            raise ValueError(f"durations_ns: one per class ({n_cls})")
        durations = d_in
    return durations


def _level_maps(n_model: int, n_col: int, drift_mean: np.ndarray, offsets: np.ndarray, K: np.ndarray,
                cls: np.ndarray, durations: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """Linear maps from the unknowns to the curves and gaps at the drift's mean level, each class's curve, its energy.

    A class with every execution excluded has NaN maps.
    """
    n_cls = len(K)
    level = np.zeros((n_model, n_col))
    level[:, :n_model] = np.eye(n_model)
    level[:, n_model:] = drift_mean[None, :]
    counts = np.bincount(cls[cls >= 0], minlength=n_cls)
    L = [level[offsets[c]:offsets[c] + K[c]] if counts[c] else np.full((int(K[c]), n_col), np.nan)
         for c in range(n_cls)]
    H = np.stack([durations[c] * 1e-9 / K[c] * L[c].sum(axis=0) for c in range(n_cls)])
    return level, L, H


@dataclass(frozen=True)
class _Solved:
    """The fitted system every channel shares: design, inverse, clusters and the maps to curves and energies."""

    A: sparse.csr_matrix
    G: np.ndarray
    Minv: np.ndarray
    edf: float
    C: sparse.csr_matrix  # clusters x logs
    n_cl: int
    level: np.ndarray
    L: list[np.ndarray]
    H: np.ndarray
    z: float  # normal quantile of the intervals
    reach: np.ndarray
    gap_col0: int
    n_model: int
    n_steps: int


def _channel_estimates(sol: _Solved, y: np.ndarray, aty: np.ndarray
                       ) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, float]:
    """One channel's curves and their SDs, energies and half-widths, gap powers and RMS residual."""
    n, n_col = sol.A.shape
    x = sol.Minv @ aty
    r = y - sol.A @ x
    # Cluster-robust covariance (sandwich), with a small-sample factor.
    S = np.asarray((sol.C @ sol.A.multiply(r[:, None])).toarray()) if sol.n_cl else np.zeros((0, n_col))
    meat = S.T @ S * (sol.n_cl / max(sol.n_cl - 1, 1)) * (n / max(n - sol.edf, 1.0))
    cov = sol.Minv @ meat @ sol.Minv
    energy = sol.H @ x
    curves = [Lc @ x for Lc in sol.L]
    sds = [np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Lc, cov, Lc), 0.0, None)) for Lc in sol.L]
    x = sol.level @ x
    half = sol.z * np.sqrt(np.clip(np.einsum("ij,jk,ik->i", sol.H, cov, sol.H), 0.0, None))
    g = x[sol.gap_col0:sol.n_model].copy()
    g[sol.reach[sol.gap_col0:sol.n_model] == 0] = np.nan
    gap = g.reshape(len(sol.L) + 1, sol.n_steps)
    return curves, sds, energy, half, gap, float(np.sqrt(np.mean(r ** 2)))


def fit_timeline(
    sensor: SensorModel,
    t_ns: npt.ArrayLike,
    values: dict[str, npt.ArrayLike],
    starts_ns: npt.ArrayLike,
    ends_ns: npt.ArrayLike,
    classes: npt.ArrayLike,
    bins: Sequence[int],
    *,
    windows_ns: Optional[npt.ArrayLike] = None,
    durations_ns: Optional[npt.ArrayLike] = None,
    confidence: float = 0.95,
    drift_ns: float = 100_000_000.0,
    cluster_windows: float = 20.0,
    continuity: float = 1e-2,
) -> TimelineFit:
    """Fit every kernel class's curve and the gaps' power to windowed logs over a mixed timeline.

    Parameters
    ----------
    sensor : SensorModel
        What each log measures (window or filter, delay, gain, offset).
    t_ns : array_like
        The logs' stamps on the timeline (ns, the executions' clock).
    values : dict of str to array_like
        Per channel, the logged power (W).
    starts_ns, ends_ns : array_like
        The executions on one device, in start order, not overlapping.
    classes : array_like of int
        Per execution, its class (0 .. len(bins)-1), or -1 for an execution
        whose power is not modelled (a warm-up, a concurrent kernel): logs
        that reach it are left out.
    bins : sequence of int
        Curve bins per class (>= 1).
    windows_ns : array_like, optional
        Per-log boxcar windows (a counter's intervals); default the model's.
    durations_ns : array_like, optional
        Per class, the duration its energy is taken over (default the
        median of its executions).
    confidence : float
        Of the energy intervals.
    drift_ns : float
        Knot spacing of a slow drift shared by every kernel and gap
        (piecewise linear, centred: the curves are the level averaged over
        the logs); 0 leaves it out.
    continuity : float
        Weight (relative to the data's scale) of the prior that the power
        after a kernel follows on from its last bin and relaxes step by
        step (fixed, not chosen by cross-validation: the directions it
        steadies barely change the fit, so GCV cannot see them).
    cluster_windows : float
        The intervals treat blocks of logs spanning this many responses as
        independent clusters (errors within a block may be correlated).

    Returns
    -------
    TimelineFit

    Raises
    ------
    ValueError
        Bad arguments (named), or fewer usable logs than unknowns.

    Notes
    -----
    Section IV-B step 8 of the paper, for logs that are window averages
    (the forward model of averaging sensors, Yang et al. SC'24) over an
    application's mixed timeline instead of one kernel's runs.
    """
    t, s, e, cls, K = _check_timeline(t_ns, starts_ns, ends_ns, classes, bins, confidence)
    ys = _calibrated(sensor, values, t)
    w = np.broadcast_to(np.asarray(sensor.window_ns if windows_ns is None else windows_ns, dtype=np.float64),
                        t.shape)
    w = np.where(w > 0, w, sensor.window_ns)
    n_cls = len(K)
    # Every class draws one curve. (Splitting a class by the kernel before it, since power follows
    # activity with a lag, was tried on the simulated loop: it did not lower the residual and widened
    # the errors.)
    offsets = np.concatenate([[0], np.cumsum(K)[:-1]]).astype(np.int64)
    gap_col0 = int(K.sum())
    n_steps = len(GAP_EDGES_NS) - 1  # gap steps (a launch gap is its kernel's)
    n_model = gap_col0 + (n_cls + 1) * n_steps  # curves and gaps; a drift's columns follow
    A, idx, lo, hi = _response_matrix(sensor, t, w, _tiles(s, e, cls, offsets, K, gap_col0), n_model)
    A, drift_mean = _with_drift(A, lo[idx], hi[idx], drift_ns)
    n_col = A.shape[1]
    if len(idx) < n_col + 5:
        raise ValueError(f"t_ns: {len(idx)} usable logs for {n_col} unknowns; record longer")
    edge_logs = _edge_logs(s, e, cls, lo[idx], n_cls)
    reach = np.diff(A.tocsc().indptr)  # logs that reach each column (stored entries have weight > 0)
    # Columns no log reaches (a gap length that never occurs) are pinned by the ridge and reported NaN.
    G = (A.T @ A).toarray()
    P = _curve_penalty(K, offsets, n_col)
    ridge = _ridge(G, _continuity(n_cls, gap_col0, n_steps, n_col), reach, continuity)
    Aty = {ch: A.T @ y[idx] for ch, y in ys.items()}
    lam_abs, lam_rel = _smoothing(A, G, P, ridge, Aty["total"], ys["total"][idx])
    Minv = np.linalg.inv(G + lam_abs * P + ridge)
    C, n_cl = _clusters(lo[idx], hi[idx], cluster_windows)
    durations = _durations(cls, s, e, n_cls, durations_ns)
    level, L, H = _level_maps(n_model, n_col, drift_mean, offsets, K, cls, durations)
    sol = _Solved(A, G, Minv, float(np.trace(Minv @ G)), C, n_cl, level, L, H,
                  float(stats.norm.ppf(0.5 + confidence / 2)), reach, gap_col0, n_model, n_steps)
    curves: dict[str, list[np.ndarray]] = {}
    sds: dict[str, list[np.ndarray]] = {}
    energy: dict[str, np.ndarray] = {}
    half: dict[str, np.ndarray] = {}
    gap: dict[str, np.ndarray] = {}
    resid: dict[str, float] = {}
    for ch, y in ys.items():
        curves[ch], sds[ch], energy[ch], half[ch], gap[ch], resid[ch] = _channel_estimates(sol, y[idx], Aty[ch])
    return TimelineFit(
        bins=K, curves=curves, sd=sds, energy_j=energy, energy_half_width_j=half, gap_w=gap,
        durations_ns=durations, n_logs=len(idx), dropped_logs=int(len(t) - len(idx)),
        logs_per_bin=[reach[offsets[c]:offsets[c] + K[c]] for c in range(n_cls)], edge_logs=edge_logs,
        lam=float(lam_rel), residual_w=resid, confidence=confidence)
