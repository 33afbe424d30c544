"""Windowed logs over a timeline of many kernels: every kernel's curve and the gaps' power, fitted jointly.

:func:`~fingrav_native.sensors.deconvolve.deconvolve` recovers one kernel's
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
    (the sensor issue's forward model, Yang et al. SC'24) over an
    application's mixed timeline instead of one kernel's runs.
    """
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
    ys = {}
    for ch, v in values.items():
        y = np.asarray(v, dtype=np.float64)
        if y.shape != t.shape:
            raise ValueError(f"values[{ch!r}]: {y.shape} values for {t.shape[0]} logs")
        # The sensor's calibration undone: the unknowns are true watts.
        ys[ch] = (y - sensor.offset_w) / sensor.gain
    if "total" not in ys:
        raise ValueError("values: a 'total' channel is needed (the smoothing is chosen on it)")
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
    n_col = gap_col0 + (n_cls + 1) * n_steps
    a, b, col = _tiles(s, e, cls, offsets, K, gap_col0)

    # Each log's response [lo, hi] and the tiles it reaches (a contiguous run of sorted tiles).
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
    n_model = n_col
    drift_mean = np.zeros(0)
    if drift_ns > 0:
        # A slow drift shared by everything (the package heating over seconds, leakage with it):
        # piecewise-linear in time, centred over the logs so the curves are the average level.
        mid = 0.5 * (lo[idx] + hi[idx])
        nk = int(min(max(2, math.ceil((mid.max() - mid.min()) / drift_ns) + 1), 200))
        if nk >= 3:
            # Hat functions, two per log (sparse); the first is dropped because the hats sum to one,
            # like the curves and gaps do: the drift is zero at the first knot, and its mean over the
            # logs is added back to every level below (an exact reparametrisation).
            step = (mid.max() - mid.min()) / (nk - 1)
            u = (mid - mid.min()) / step
            j = np.minimum(np.floor(u).astype(np.int64), nk - 2)
            f = u - j
            r_ = np.concatenate([np.arange(len(idx)), np.arange(len(idx))])
            c_ = np.concatenate([j, j + 1])
            v_ = np.concatenate([1.0 - f, f])
            keep_h = c_ > 0
            B = sparse.csr_matrix((v_[keep_h], (r_[keep_h], c_[keep_h] - 1)), shape=(len(idx), nk - 1))
            drift_mean = np.asarray(B.mean(axis=0)).ravel()
            A = sparse.hstack([A, B], format="csr")
            n_col += nk - 1
    if len(idx) < n_col + 5:
        raise ValueError(f"t_ns: {len(idx)} usable logs for {n_col} unknowns; record longer")
    # Where a log's window edge falls inside an execution: the shape's information (per class).
    edge_ex = np.searchsorted(s, lo[idx], side="right") - 1
    in_ex = (edge_ex >= 0) & (lo[idx] < e[np.clip(edge_ex, 0, None)])
    edge_cls = cls[np.clip(edge_ex, 0, None)][in_ex]
    edge_logs = np.bincount(edge_cls[edge_cls >= 0], minlength=len(K))
    reach = np.diff(A.tocsc().indptr)  # logs that reach each column (stored entries have weight > 0)

    # Columns no log reaches (a gap length that never occurs) are pinned by the ridge and reported NaN.
    G = (A.T @ A).toarray()
    P = np.zeros((n_col, n_col))
    for c in range(n_cls):
        if K[c] >= 3:
            D = np.diff(np.eye(int(K[c])), 2, axis=0)
            o = int(offsets[c])
            P[o:o + K[c], o:o + K[c]] += D.T @ D
    Pc = np.zeros((n_col, n_col))
    # Continuity after a kernel: its gap steps follow on from each other (the power relaxes; it does
    # not jump). Without it, the first step after a kernel is nearly collinear with the kernel and
    # took 2.5 kW on a simulated loop. (Tying it to the kernel's last bin as well biased an exact
    # piecewise-constant timeline by 2.5 %: a kernel's end can be a step.)
    for c in range(n_cls + 1):
        chain = [gap_col0 + c * n_steps + m for m in range(n_steps)]
        for u, v in zip(chain[:-1], chain[1:]):
            Pc[u, u] += 1.0
            Pc[v, v] += 1.0
            Pc[u, v] -= 1.0
            Pc[v, u] -= 1.0
    scale = np.trace(G) / n_col
    ridge = 1e-9 * scale * np.eye(n_col) + continuity * scale * Pc
    ridge[np.diag_indices(n_col)] += np.where(reach == 0, scale, 0.0)
    Aty = {ch: A.T @ y[idx] for ch, y in ys.items()}
    y_tot = ys["total"][idx]
    n = len(idx)
    best = (math.inf, 0.0)
    if P.any():
        p_scale = scale / max(np.trace(P) / n_col, 1e-300)
        for lam in np.logspace(-6, 1, 15):
            M = G + lam * p_scale * P + ridge
            x = np.linalg.solve(M, Aty["total"])
            rss = float(np.sum((A @ x - y_tot) ** 2))
            edf = float(np.trace(np.linalg.solve(M, G)))
            gcv = n * rss / max(n - edf, 1.0) ** 2
            if gcv < best[0]:
                best = (gcv, lam)
        lam_abs = best[1] * p_scale
    else:
        lam_abs = 0.0
    M = G + lam_abs * P + ridge
    Minv = np.linalg.inv(M)
    edf = float(np.trace(Minv @ G))
    # Clusters: blocks of consecutive logs spanning at least ``cluster_windows`` responses. A
    # sliding average's errors are shared by overlapping windows, and a kernel's departures from
    # its shared curve (a slow run, a thermal swing) by every log over them: an interval that
    # treats logs as independent was 3x too narrow on a simulated loop.
    mid_u = 0.5 * (lo[idx] + hi[idx])
    span = max(float(np.median(hi[idx] - lo[idx])), float(np.median(np.diff(mid_u))) if n > 1 else 1.0)
    cluster = np.floor((mid_u - mid_u[0]) / (cluster_windows * span)).astype(np.int64)
    cluster = np.unique(cluster, return_inverse=True)[1]
    n_cl = int(cluster.max()) + 1
    C = sparse.csr_matrix((np.ones(n), (cluster, np.arange(n))), shape=(n_cl, n))
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    durations = np.empty(len(K))
    for c in range(len(K)):
        mine = cls == c
        durations[c] = float(np.median((e - s)[mine])) if mine.any() else math.nan
    if durations_ns is not None:
        d_in = np.asarray(durations_ns, dtype=np.float64)
        if d_in.shape != durations.shape:
            raise ValueError(f"durations_ns: one per class ({len(K)})")
        durations = d_in
    level = np.zeros((n_model, n_col))  # curves and gaps at the drift's mean level
    level[:, :n_model] = np.eye(n_model)
    level[:, n_model:] = drift_mean[None, :]
    # Each class's curve at the drift's mean level (a class with every execution excluded: NaN).
    counts = np.bincount(cls[cls >= 0], minlength=n_cls)
    L = [level[offsets[c]:offsets[c] + K[c]] if counts[c] else np.full((int(K[c]), n_col), np.nan)
         for c in range(n_cls)]
    H = np.stack([durations[c] * 1e-9 / K[c] * L[c].sum(axis=0) for c in range(n_cls)])
    curves: dict[str, list[np.ndarray]] = {}
    sds: dict[str, list[np.ndarray]] = {}
    energy: dict[str, np.ndarray] = {}
    half: dict[str, np.ndarray] = {}
    gap: dict[str, np.ndarray] = {}
    resid: dict[str, float] = {}
    for ch, y in ys.items():
        x = Minv @ Aty[ch]
        r = y[idx] - A @ x
        # Cluster-robust covariance (sandwich), with a small-sample factor.
        S = np.asarray((C @ A.multiply(r[:, None])).toarray()) if n_cl else np.zeros((0, n_col))
        meat = S.T @ S * (n_cl / max(n_cl - 1, 1)) * (n / max(n - edf, 1.0))
        cov = Minv @ meat @ Minv
        energy[ch] = H @ x
        curves[ch] = [Lc @ x for Lc in L]
        sds[ch] = [np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Lc, cov, Lc), 0.0, None)) for Lc in L]
        x = level @ x
        half[ch] = z * np.sqrt(np.clip(np.einsum("ij,jk,ik->i", H, cov, H), 0.0, None))
        g = x[gap_col0:n_model].copy()
        g[reach[gap_col0:n_model] == 0] = np.nan
        gap[ch] = g.reshape(len(K) + 1, n_steps)
        resid[ch] = float(np.sqrt(np.mean(r ** 2)))
    return TimelineFit(
        bins=K, curves=curves, sd=sds, energy_j=energy, energy_half_width_j=half, gap_w=gap,
        durations_ns=durations, n_logs=n, dropped_logs=int(len(t) - n),
        logs_per_bin=[reach[offsets[c]:offsets[c] + K[c]] for c in range(n_cls)], edge_logs=edge_logs,
        lam=float(best[1]), residual_w=resid, confidence=confidence)
