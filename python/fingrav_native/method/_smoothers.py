"""The smoothers of step 8: a local linear fit or a polynomial through the LOIs, each with a simultaneous band.

:func:`~fingrav_native.method` bins the LOIs and fits a smooth curve
through them; the curve comes from here. ``"local"`` is LOWESS without
robustness iterations (a tricube-weighted line per grid point, its window
chosen by generalised cross-validation); ``"poly4"`` is the paper's degree-4
polynomial regression (Section V-B). Both carry a band that holds over the
whole curve at once (Sun and Loader's tube formula), widened for the
smoother's bias and for the gaps between LOIs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, Optional, Sequence, Union

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.special

# Largest (grid points x window) block the local smoother evaluates at once: each of its twenty-odd
# elementwise passes makes a temporary of this many doubles (512 KiB), so a block's working set stays
# within a core's cache; a block of 2 ** 21 (16 MiB a temporary) runs every pass from memory, at about
# twice the time. A point's fit is its own window's whatever the block: the blocks change only the rounding of
# sums (a window's zero padding to the block's widest, the tube length's running total).
_BLOCK_ELEMENTS = 1 << 16


# Candidate windows the span search tries.
_SPAN_CANDIDATES = 12


# Residuals are scored on at most this many LOIs (an even subsample of the
# sorted LOIs beyond that), and the span search runs on such a subsample.
_SCORE_LOIS = 256


#: Fewest LOIs in a local window the span search considers: a local line
#: through fewer follows single noisy LOIs (a spike from one outlier); one
#: through many more cannot follow an execution's first microseconds with
#: Table I's ~40 (GCV decides between).
MIN_WINDOW = 6


# Fewest LOIs in the half window the band's bias estimate fits.
_BIAS_WINDOW = 3


# Inside a gap the window's half-width is at least 2 x this x the distance
# to the nearer edge: in the middle of a gap it spans twice the gap, so the
# LOIs on both sides weigh in about equally.
_GAP_REACH = 2.0


@dataclass(frozen=True)
class SmoothFit:
    """A smooth fit on the grid with its simultaneous band and the share of LOIs per local window."""

    kind: str
    y: np.ndarray
    low: np.ndarray
    high: np.ndarray
    span: float


def _window_starts(x: np.ndarray, g: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per grid point: first and stop of the LOIs within h, and h, the distance to the k-th nearest LOI.

    Every LOI within h takes part, so ties at the edge do not depend on the
    input order; ``x`` is sorted; ``k`` is one window per grid point, in [1, n].
    """
    n = x.size
    # The k nearest points to g form a window [lo, lo + k) of the sorted x:
    # binary search (vectorised over the grid) for its start.
    lo = np.zeros(g.size, dtype=np.int64)
    hi = np.full(g.size, n - k, dtype=np.int64)
    while True:
        active = lo < hi
        if not active.any():
            break
        mid = (lo + hi) // 2
        right = active & (g - x[mid] > x[np.minimum(mid + k, n - 1)] - g)
        lo = np.where(right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)
    h = np.maximum(g - x[lo], x[lo + k - 1] - g)  # the k-th smallest distance
    # Inside a gap in the LOIs, the k nearest on one side would extrapolate
    # that side's slope across it (a spike). Reach the other side too, the
    # more the further g is from both edges (continuous in g: at an edge the
    # usual window), so the fit bridges the gap. Dense LOIs: no change.
    right = np.searchsorted(x, g, side="left")
    inner = (right > 0) & (right < n)
    edge = np.minimum(g - x[np.clip(right - 1, 0, n - 1)], x[np.clip(right, 0, n - 1)] - g)
    h = np.where(inner, np.maximum(h, 2.0 * _GAP_REACH * edge), h)
    # Every point within h: a superset by binary search (a small tolerance
    # for rounding in g -+ h), masked exactly below.
    tol = 1e-9 * (np.abs(g) + h) + np.finfo(np.float64).tiny
    first = np.minimum(lo, np.searchsorted(x, g - h - tol, side="left"))
    stop = np.maximum(lo + k, np.searchsorted(x, g + h + tol, side="right"))
    return first, stop, h


@dataclass(frozen=True)
class _LinearFit:
    """A linear smoother evaluated at some points (see :func:`_local_linear`)."""

    y: np.ndarray  # the fit
    spread: np.ndarray  # sum_j l_j^2 / w_j: the fit's variance over the noise variance
    self_weight: Optional[np.ndarray]  # l_i(x_i) where the points are LOIs themselves
    tube_length: float  # path length of l / ||l|| along the points (Sun & Loader's kappa_0)
    slope: np.ndarray  # the local line's slope at each point


def _local_linear(x: np.ndarray, y: np.ndarray, w: np.ndarray, g: np.ndarray, k: int | np.ndarray, *,
                  self_index: Optional[np.ndarray] = None, spread: bool = True, tube: bool = False,
                  windows: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = None) -> _LinearFit:
    """LOWESS-style local linear regression with a tricube kernel, evaluated at ``g``.

    ``x`` is sorted; each point's bandwidth h is the distance to its k-th
    nearest LOI. ``y`` may hold several channels (rows) at the same LOIs:
    the weights are computed once. ``self_index``: the LOI each point of
    ``g`` is (for the leverages); ``spread``: the fit's variance over the
    noise variance; ``tube``: also the path length of the normalised weight
    vectors from one point of ``g`` to the next (``g`` ascending). ``windows``:
    :func:`_window_starts` of ``g`` and ``k``, where the caller found them
    already (for several windows at once).
    """
    n = x.size
    ys = y if y.ndim == 2 else y[None, :]
    first, stop, h = windows if windows is not None else _window_starts(
        x, g, np.broadcast_to(np.clip(np.asarray(k, dtype=np.int64), 1, n), g.shape))
    size = stop - first
    h_safe = np.where(h > 0, h, 1.0)  # h = 0: every point in the window sits at g
    fit = np.empty((ys.shape[0], g.size))
    slope = np.empty((ys.shape[0], g.size))
    var = np.full(g.size, np.nan)
    own = np.empty(g.size) if self_index is not None else None
    kappa = 0.0
    prev: Optional[tuple[int, np.ndarray]] = None  # (first, unit weights) of the previous point
    # Blocks of points whose (points x widest window) stays bounded; windows
    # of neighbouring points are alike (callers stack points by window).
    i = 0
    while i < g.size:
        j = min(g.size, i + max(1, _BLOCK_ELEMENTS // max(1, int(size[i]))))
        width = int(size[i:j].max())
        if (j - i) * width > 2 * _BLOCK_ELEMENTS:
            j = i + max(1, _BLOCK_ELEMENTS // width)
            width = int(size[i:j].max())
        pos = first[i:j, None] + np.arange(width)
        idx = np.minimum(pos, n - 1)
        d = x[idx] - g[i:j, None]
        ad = np.abs(d)
        inside = (pos < stop[i:j, None]) & (ad <= h[i:j, None])
        with np.errstate(over="ignore"):  # points far beyond a tiny h are masked out anyway
            u = np.minimum(ad / h_safe[i:j, None], 1.0)
        t = 1.0 - u * u * u
        wt = t * t * t * w[idx]
        wt[~inside] = 0.0
        s0 = wt.sum(axis=1)
        # All neighbours exactly at distance h (tricube weight 0): weigh them equally.
        none = s0 <= 0
        if none.any():
            wt[none] = np.where(inside[none], w[idx[none]], 0.0)
            s0 = wt.sum(axis=1)
        # Centred at the weighted mean position: unbalanced weights would
        # make the textbook s0 * s2 - s1**2 lose most of its digits.
        d_bar = (wt * d).sum(axis=1) / s0
        wdc = wt * (d - d_bar[:, None])
        sxx = (wdc * (d - d_bar[:, None])).sum(axis=1)
        # All weight at one position: no slope to fit, the local mean.
        flat = sxx <= 1e-12 * s0 * h[i:j] ** 2
        # fit = y_bar - slope * d_bar, with slope = sum(wt dc y) / sxx.
        lw = wt / s0[:, None] - np.where(flat, 0.0, d_bar / np.where(flat, 1.0, sxx))[:, None] * wdc
        yi = ys[:, idx]
        fit[:, i:j] = (lw * yi).sum(axis=2)
        slope[:, i:j] = np.where(flat, 0.0, (wdc * yi).sum(axis=2) / np.where(flat, 1.0, sxx))
        if spread or tube:
            scaled = lw / np.sqrt(w[idx])
            var[i:j] = (scaled * scaled).sum(axis=1)
        if own is not None and self_index is not None:
            at = self_index[i:j] - first[i:j]  # the LOI's own column in its window
            own[i:j] = lw[np.arange(j - i), np.clip(at, 0, width - 1)] * ((at >= 0) & (at < width))
        if tube:
            # Distance between consecutive unit vectors over the LOIs both
            # windows cover (zero elsewhere on one side): row r + 1's column
            # c is row r's column c + (its start - row r's start).
            unit = scaled / np.sqrt(var[i:j])[:, None]
            if prev is not None:
                f_p, u_p = prev
                f_r = int(first[i])
                a, b = max(f_p, f_r), min(f_p + u_p.size, f_r + width)
                dot = float(u_p[a - f_p:b - f_p] @ unit[0, a - f_r:b - f_r]) if b > a else 0.0
                kappa += math.sqrt(max(0.0, 2.0 - 2.0 * dot))
            if j - i > 1:
                cols = np.arange(width)[None, :] + (first[i + 1:j] - first[i:j - 1])[:, None]
                valid = (cols >= 0) & (cols < width)
                before = np.take(unit[:-1], np.clip(cols, 0, width - 1) + width * np.arange(j - i - 1)[:, None])
                dots = (np.where(valid, before, 0.0) * unit[1:]).sum(axis=1)
                kappa += float(np.sqrt(np.maximum(0.0, 2.0 - 2.0 * dots)).sum())
            prev = (int(first[j - 1]), unit[-1])
        i = j
    if y.ndim == 1:
        return _LinearFit(fit[0], var, own, kappa, slope[0])
    return _LinearFit(fit, var, own, kappa, slope)


def _even_subsample(n: int) -> np.ndarray:
    """Indices of at most ``_SCORE_LOIS`` LOIs spread evenly over the sorted ``n``."""
    if n <= _SCORE_LOIS:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, _SCORE_LOIS).round().astype(np.int64))


def _residual_stats(x: np.ndarray, y: np.ndarray, w: np.ndarray, k: int, *,
                    spread: bool = True) -> tuple[float, float, float, Optional[np.ndarray]]:
    """(weighted RSS, trace of the hat matrix, trace of S'WSW^-1, slopes) over the LOIs, for window k.

    Means over an even subsample of the LOIs, times n, beyond ``_SCORE_LOIS``
    (then no slopes: they are the local line's at every LOI); the third is
    NaN without ``spread``.
    """
    ev = _even_subsample(x.size)
    scale = x.size / ev.size
    lf = _local_linear(x, y, w, x[ev], k, self_index=ev, spread=spread)
    r = y[ev] - lf.y
    assert lf.self_weight is not None
    return (scale * float(np.sum(w[ev] * r * r)), scale * float(np.sum(lf.self_weight)),
            scale * float(np.sum(w[ev] * lf.spread)), lf.slope if ev.size == x.size else None)


def _choose_window(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per channel (row of ``y``), the local window (LOIs) minimising generalised cross-validation."""
    n = x.size
    if n > _SCORE_LOIS:
        # Search on an even subsample (the cost grows as LOIs x window),
        # then carry the bandwidth over: a local line's MSE-optimal
        # bandwidth shrinks as n^(-1/5).
        sub = _even_subsample(n)
        share = _choose_window(x[sub], y[:, sub], w[sub]) / sub.size * (sub.size / n) ** 0.2
        return np.asarray(np.minimum(n, np.maximum(MIN_WINDOW, np.round(share * n))), dtype=np.int64)
    # At least MIN_WINDOW LOIs; with fewer than 4 x that, a quarter of them
    # (at least 3): one line through all of a few LOIs cannot follow an
    # execution.
    k_lo = min(n, MIN_WINDOW, max(3, math.ceil(n / 4)))
    ks = np.unique(np.round(np.geomspace(k_lo, n, _SPAN_CANDIDATES)).astype(np.int64))
    scores = np.full((y.shape[0], ks.size), np.inf)
    every = np.arange(n)
    # Every candidate's windows in one vectorised search (the same per point as one search per candidate).
    first, stop, h = _window_starts(x, np.tile(x, ks.size), np.repeat(np.minimum(ks, n), n))
    for c, k in enumerate(ks):
        # One pass for every channel: the weights depend on positions only.
        at = slice(c * n, (c + 1) * n)
        lf = _local_linear(x, y, w, x, int(k), self_index=every, spread=False,
                           windows=(first[at], stop[at], h[at]))
        assert lf.self_weight is not None
        nu1 = float(np.sum(lf.self_weight))
        if n - nu1 > 0.5:
            scores[:, c] = n * np.sum(w * (y - lf.y) ** 2, axis=1) / (n - nu1) ** 2
    out = np.full(y.shape[0], ks[-1], dtype=np.int64)
    for r in range(y.shape[0]):
        if not np.isfinite(scores[r]).any():
            continue
        # Scores equal to rounding (a line fitted exactly by every window):
        # the widest of them, so the choice does not hang on the last digit.
        best = float(np.min(scores[r]))
        tol = 1e-9 * (abs(best) + float(np.var(y[r]))) + np.finfo(np.float64).tiny
        out[r] = ks[np.flatnonzero(scores[r] <= best + tol)[-1]]
    return out


def _tube_critical(kappa: float, dof: float, confidence: float) -> float:
    """Critical value c of a simultaneous band: P(sup |fit error| / sd > c) = 1 - confidence.

    Sun & Loader (1994), one dimension, noise variance estimated with
    ``dof`` degrees of freedom: ``kappa / pi * (1 + c^2 / dof)^(-dof / 2)
    + P(|t_dof| > c)``. At kappa = 0 this is the pointwise t quantile.
    """
    alpha = 1.0 - confidence

    def excess(c: float) -> float:
        # scipy.special's t distribution: the ufunc, not the slow rv_continuous wrapper.
        return kappa / math.pi * math.pow(1.0 + c * c / dof, -dof / 2.0) + 2.0 * float(scipy.special.stdtr(dof, -c)) - alpha

    lo = float(scipy.special.stdtrit(dof, 1.0 - alpha / 2.0))
    if kappa <= 0 or excess(lo) <= 0:
        return lo
    # At a tiny confidence the t quantile is 0, and doubling it would never leave 0.
    hi = max(2.0 * lo, 1.0)
    while excess(hi) > 0:
        hi *= 2.0
    return float(scipy.optimize.brentq(excess, lo, hi, xtol=1e-10))


def _noise_rss(rss: float, y: np.ndarray) -> float:
    """The residual sum of squares, zero where it is only the rounding of the values.

    A fit through the values exactly leaves residuals of a few ulps; times
    the spread of a curve extrapolated far from its LOIs they would read as
    a band.
    """
    floor = y.size * (64.0 * np.finfo(np.float64).eps * float(np.max(np.abs(y)))) ** 2
    return rss if rss > floor else 0.0


def auto_windows(lois: np.ndarray, channels: Sequence[str], pos: np.ndarray, w: np.ndarray) -> dict[str, int]:
    """The GCV window of each channel, one search for the channels logged at the same LOIs."""
    groups: dict[bytes, list[str]] = {}
    for name in channels:
        ok = np.isfinite(lois[name].astype(np.float64))
        if ok.any():
            groups.setdefault(np.packbits(ok).tobytes() + bytes([int(ok.sum() % 256)]), []).append(name)
    out: dict[str, int] = {}
    for names in groups.values():
        ok = np.isfinite(lois[names[0]].astype(np.float64))
        ys = np.stack([lois[name].astype(np.float64)[ok] for name in names])
        x = pos[ok]
        # By position, ties by the values: the subsample the search uses
        # beyond _SCORE_LOIS then does not depend on the input order.
        order = np.lexsort((*ys[::-1], x))
        ww = w[ok][order]
        ks = _choose_window(x[order], ys[:, order], ww / np.mean(ww))
        out.update({name: int(k) for name, k in zip(names, ks)})
    return out


def _nan_band(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A band of NaN on the grid: the LOIs leave no degrees of freedom to estimate the noise."""
    return np.full(grid.size, np.nan), np.full(grid.size, np.nan)


def local_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, grid: np.ndarray, span: Union[float, Literal["auto"]],
               confidence: float, window: Optional[int] = None) -> SmoothFit:
    """The local linear fit on the grid, its span (given, or chosen by GCV) and its simultaneous band."""
    # By position, ties by value: subsamples then do not depend on the input order.
    order = np.lexsort((y, x))
    x, y, w = x[order], y[order], w[order]
    w = w / np.mean(w)  # the band's noise model: variance sigma^2 / w
    n = x.size
    if window is not None:
        k = int(window)
    elif span == "auto":
        k = int(_choose_window(x, y[None, :], w)[0])
    else:
        k = min(n, max(3, math.ceil(float(span) * n)))
    lf = _local_linear(x, y, w, grid, k, tube=True)
    rss, nu1, nu2, slopes = _residual_stats(x, y, w, k)
    rss = _noise_rss(rss, y)
    dof = n - 2.0 * nu1 + nu2  # Cleveland's lookup degrees of freedom
    if not (dof >= 1 and np.all(np.isfinite(lf.spread))):
        return SmoothFit("local", lf.y, *_nan_band(grid), k / n)
    half = _tube_critical(lf.tube_length, dof, confidence) * np.sqrt(rss / dof * lf.spread)
    # The smoother's bias, which the noise band leaves out: a local line's
    # bias grows as the window squared, so a fit on half the window has a
    # quarter of it and 4/3 of their difference estimates it. It widens
    # the band where the window is too wide for the curve (a sharp step
    # with few LOIs on it) and barely elsewhere.
    k_half = k // 2
    if k_half >= _BIAS_WINDOW:
        half = half + 4.0 / 3.0 * np.abs(lf.y - _local_linear(x, y, w, grid, k_half).y)
    half = half + _gap_allowance(
        x, (lambda at: slopes[at]) if slopes is not None else (lambda at: _local_linear(x, y, w, x[at], k, spread=False).slope),
        grid)
    return SmoothFit("local", lf.y, lf.y - half, lf.y + half, k / n)


def _gap_allowance(x: np.ndarray, slope_at: Callable[[np.ndarray], np.ndarray], grid: np.ndarray) -> np.ndarray:
    """How far a smooth curve may stray from a line across each gap between LOIs.

    Between LOIs at a and b where the curve's slopes are s_a and s_b, a
    curve that bends one way only lies between the chord and the two
    tangents, at most ``|s_a - s_b| (g - a)(b - g) / (b - a)`` from the
    chord. Negligible where LOIs are dense; in a gap (few LOIs on a rise)
    it says the LOIs do not know the curve there.
    """
    right = np.searchsorted(x, grid, side="right")
    inner = (right > 0) & (right < x.size)
    ia, ib = np.clip(right - 1, 0, x.size - 1), np.clip(right, 0, x.size - 1)
    a, b = x[ia], x[ib]
    # Slopes only at the LOIs that border a grid point (at most two each).
    ends, where = np.unique(np.concatenate([ia, ib]), return_inverse=True)
    slope = slope_at(ends)[where]
    bend = np.abs(slope[grid.size:] - slope[:grid.size])
    with np.errstate(invalid="ignore", divide="ignore"):
        out = bend * (grid - a) * (b - grid) / (b - a)
    return np.where(inner & (b > a), out, 0.0)


def poly_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, grid: np.ndarray, confidence: float) -> SmoothFit:
    """Weighted least-squares polynomial of degree 4 (fewer with < 5 distinct x), with its band."""
    deg = min(4, np.unique(x).size - 1)
    if deg < 0:
        return SmoothFit("poly0", np.full(grid.size, np.nan), *_nan_band(grid), math.nan)
    # Polynomial.fit maps x to [-1, 1] first, which keeps degree 4 well
    # conditioned for positions in ns; its weights multiply residuals.
    poly = np.polynomial.Polynomial.fit(x, y, deg, w=np.sqrt(w))
    fit = poly(grid)
    w = w / np.mean(w)
    n, p = x.size, deg + 1
    if n - p < 1:
        return SmoothFit(f"poly{deg}", fit, *_nan_band(grid), math.nan)
    # The band from the same least squares: a QR of the weighted design
    # gives the fit's spread at g as ||R^-T v(g)||^2 (v: the powers of g).
    lo_x, hi_x = poly.domain
    scale = 2.0 / (hi_x - lo_x) if hi_x > lo_x else 1.0

    def design(t: np.ndarray) -> np.ndarray:
        return np.vander((t - lo_x) * scale - 1.0, p, increasing=True)

    r = scipy.linalg.qr(np.sqrt(w)[:, None] * design(x), mode="r")[0][:p]
    z = scipy.linalg.solve_triangular(r, design(grid).T, trans="T")  # p x grid
    spread = np.sum(z * z, axis=0)
    unit = z / np.sqrt(spread)
    kappa = float(np.sum(np.sqrt(np.maximum(0.0, 2.0 - 2.0 * np.sum(unit[:, 1:] * unit[:, :-1], axis=0)))))
    resid = y - poly(x)
    dof = float(n - p)
    c = _tube_critical(kappa, dof, confidence)
    half = c * np.sqrt(_noise_rss(float(np.sum(w * resid * resid)), y) / dof * spread)
    return SmoothFit(f"poly{deg}", fit, fit - half, fit + half, math.nan)

