"""Step 8 of FinGraV: stitch the LOIs of many runs into one power profile.

One sub-millisecond execution gets at best one log from a 1 ms logger; many
golden runs together cover the whole execution (paper Section IV-B, step 8,
"plotting all collected LOIs and TOIs"). This module turns those LOIs into a
profile per power channel: a binned mean with a confidence interval per bin
and a smooth fit, either the paper's degree-4 polynomial regression (Section
V-B) or, by default, a local linear smoother. It also lays out whole runs
(the paper's Figures 5-7) and integrates a profile into energy per execution.

Examples
--------
>>> import numpy as np
>>> from fingrav_native.records import LOI_DTYPE
>>> lois = np.zeros(4, dtype=LOI_DTYPE)
>>> lois["toi_ns"] = [1_000, 3_000, 12_000, 14_000]
>>> lois["duration_ns"] = 20_000
>>> lois["total"] = [100, 110, 200, 220]
>>> p = stitch(lois, bin_width=10_000, channels=("total",), smoother=None)
>>> p["total"].mean.tolist(), p["total"].count.tolist()
([105.0, 210.0], [2, 2])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import numpy.typing as npt
import scipy.linalg
import scipy.optimize
import scipy.special
import scipy.stats

from fingrav_native._checks import positive_number
from fingrav_native._checks import readonly as _readonly
from fingrav_native._core import CHANNELS
from fingrav_native.method._align import assign_logs_to_executions
from fingrav_native.method._guidance import lookup_guidance
from fingrav_native.records._layouts import validate_executions

_SMOOTHERS = ("local", "poly4", None)


# Largest (grid points x window) block the local smoother evaluates at once.
_BLOCK_ELEMENTS = 1 << 21


def _t_quantiles(p: float, df: np.ndarray) -> np.ndarray:
    """Student t quantile ``p`` for an array of degrees of freedom (NaN where df < 1)."""
    df = np.asarray(df, dtype=np.float64)
    out = np.full(df.shape, np.nan)
    ok = df >= 1
    out[ok] = scipy.stats.t.ppf(p, df[ok])
    return out


@dataclass(frozen=True)
class StitchedChannel:
    """The stitched profile of one power channel.

    Attributes
    ----------
    name : str
        The channel (``"total"``, ``"compute"``, ``"io"``, ``"memory"``).
    x : str
        ``"time"`` (positions in ns from execution start) or ``"fraction"``
        (of the execution's duration).
    bin_edges : numpy.ndarray
        ``len(count) + 1`` bin edges.
    bin_centres : numpy.ndarray
        Bin centres.
    count : numpy.ndarray of int64
        LOIs with a finite value in each bin; empty bins are kept (count 0,
        mean NaN).
    mean, sd : numpy.ndarray
        Per-bin mean and sample standard deviation (NaN below 2 LOIs).
    ci_low, ci_high : numpy.ndarray
        Student-t confidence interval of each bin's mean at ``confidence``;
        NaN for bins with fewer than 2 LOIs.
    confidence : float
        Confidence level of the intervals.
    fit_kind : str or None
        ``"local"``, ``"poly4"`` (``"poly<d>"`` when fewer than 5 distinct
        positions forced a lower degree), or None when no fit was made.
    fit_x, fit_y : numpy.ndarray
        The smooth fit evaluated on a fine grid (empty when ``fit_kind`` is
        None).
    n_lois : int
        LOIs with a finite value in this channel.
    fit_low, fit_high : numpy.ndarray
        Simultaneous confidence band of the fit on ``fit_x`` at
        ``confidence``: it holds the whole curve at once, so a bump that
        fits inside it is not supported by the LOIs. NaN where the LOIs
        leave no degrees of freedom; empty without a fit (and in files
        written before the band existed).
    fit_span : float
        Share of the LOIs in each local window the fit used (chosen from
        the data with ``span="auto"``); NaN for a polynomial or no fit.
    """

    name: str
    x: str
    bin_edges: np.ndarray
    bin_centres: np.ndarray
    count: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    confidence: float
    fit_kind: Optional[str]
    fit_x: np.ndarray
    fit_y: np.ndarray
    n_lois: int
    fit_low: np.ndarray = field(default_factory=lambda: _readonly(np.empty(0)))
    fit_high: np.ndarray = field(default_factory=lambda: _readonly(np.empty(0)))
    fit_span: float = math.nan


@dataclass(frozen=True)
class StitchedProfile:
    """A stitched FinGraV profile: one :class:`StitchedChannel` per channel.

    Attributes
    ----------
    x : str
        ``"time"`` or ``"fraction"``.
    x_unit : str
        ``"ns"`` or ``"fraction"``.
    bin_width : float
        Bin width in ``x_unit``.
    channels : tuple of StitchedChannel
        In the order asked for.
    n_lois : int
        LOIs stitched.
    runs : numpy.ndarray
        Distinct run ids the LOIs came from.
    duration_ns : float
        Median duration of the executions the LOIs lie in.
    smoother : str or None
        The smoother asked for.
    span : float or str
        The span asked for: a share of the LOIs in each local fit, or
        ``"auto"`` (each channel's is in its ``fit_span``).
    weighted : bool
        Whether fits weighted LOIs by ``1 / uncertainty**2``.
    uncert_ns_median, uncert_ns_max : float
        Median and largest TOI placement uncertainty (the error budget).
    """

    x: str
    x_unit: str
    bin_width: float
    channels: tuple[StitchedChannel, ...]
    n_lois: int
    runs: np.ndarray
    duration_ns: float
    smoother: Optional[str]
    span: float | str
    weighted: bool
    uncert_ns_median: float
    uncert_ns_max: float

    def channel(self, name: str) -> StitchedChannel:
        """The channel called ``name``."""
        for c in self.channels:
            if c.name == name:
                return c
        raise KeyError(f"name: no channel {name!r}; stitched: {[c.name for c in self.channels]}")

    def __getitem__(self, name: str) -> StitchedChannel:
        return self.channel(name)

    @property
    def channel_names(self) -> tuple[str, ...]:
        """Names of the stitched channels."""
        return tuple(c.name for c in self.channels)


@dataclass(frozen=True)
class _Fit:
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
                  self_index: Optional[np.ndarray] = None, spread: bool = True, tube: bool = False) -> _LinearFit:
    """LOWESS-style local linear regression with a tricube kernel, evaluated at ``g``.

    ``x`` is sorted; each point's bandwidth h is the distance to its k-th
    nearest LOI. ``y`` may hold several channels (rows) at the same LOIs:
    the weights are computed once. ``self_index``: the LOI each point of
    ``g`` is (for the leverages); ``spread``: the fit's variance over the
    noise variance; ``tube``: also the path length of the normalised weight
    vectors from one point of ``g`` to the next (``g`` ascending).
    """
    n = x.size
    ys = y if y.ndim == 2 else y[None, :]
    k = np.broadcast_to(np.clip(np.asarray(k, dtype=np.int64), 1, n), g.shape)
    first, stop, h = _window_starts(x, g, k)
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
                before = np.take_along_axis(unit[:-1], np.clip(cols, 0, width - 1), axis=1)
                dots = (np.where(valid, before, 0.0) * unit[1:]).sum(axis=1)
                kappa += float(np.sqrt(np.maximum(0.0, 2.0 - 2.0 * dots)).sum())
            prev = (int(first[j - 1]), unit[-1])
        i = j
    if y.ndim == 1:
        return _LinearFit(fit[0], var, own, kappa, slope[0])
    return _LinearFit(fit, var, own, kappa, slope)


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
    for c, k in enumerate(ks):
        # One pass for every channel: the weights depend on positions only.
        lf = _local_linear(x, y, w, x, int(k), self_index=every, spread=False)
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
    hi = 2.0 * lo
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


def _auto_windows(lois: np.ndarray, channels: Sequence[str], pos: np.ndarray, w: np.ndarray) -> dict[str, int]:
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
    return np.full(grid.size, np.nan), np.full(grid.size, np.nan)


def _local_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, grid: np.ndarray, span: float | str,
               confidence: float, window: Optional[int] = None) -> _Fit:
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
        return _Fit("local", lf.y, *_nan_band(grid), k / n)
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
    return _Fit("local", lf.y, lf.y - half, lf.y + half, k / n)


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


def _poly_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, grid: np.ndarray, confidence: float) -> _Fit:
    """Weighted least-squares polynomial of degree 4 (fewer with < 5 distinct x), with its band."""
    deg = min(4, np.unique(x).size - 1)
    if deg < 0:
        return _Fit("poly0", np.full(grid.size, np.nan), *_nan_band(grid), math.nan)
    # Polynomial.fit maps x to [-1, 1] first, which keeps degree 4 well
    # conditioned for positions in ns; its weights multiply residuals.
    poly = np.polynomial.Polynomial.fit(x, y, deg, w=np.sqrt(w))
    fit = poly(grid)
    w = w / np.mean(w)
    n, p = x.size, deg + 1
    if n - p < 1:
        return _Fit(f"poly{deg}", fit, *_nan_band(grid), math.nan)
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
    return _Fit(f"poly{deg}", fit, fit - half, fit + half, math.nan)


def stitch(
    lois: np.ndarray,
    *,
    x: str = "time",
    bin_width: Optional[float] = None,
    channels: Sequence[str] = CHANNELS,
    smoother: Optional[str] = "local",
    confidence: float = 0.95,
    span: float | str = "auto",
    weighted: bool = False,
    grid_points: int = 201,
) -> StitchedProfile:
    """Stitch LOIs from many runs into a per-channel power profile.

    Parameters
    ----------
    lois : numpy.ndarray
        LOI_DTYPE records (from :func:`~fingrav_native.method.align.place_logs`),
        normally of the golden runs' executions of interest.
    x : {"time", "fraction"}
        Position of an LOI: its TOI in ns (``toi_ns``) or as a fraction of
        its execution's duration (``toi_frac``).
    bin_width : float, optional
        Bin width in ns (``x="time"``) or as a fraction (``x="fraction"``,
        at most 1). Default: the guidance LOI interval for the median
        duration (5 us below 50 us, 10 us above; Table I), expressed as a
        fraction of the median duration when ``x="fraction"``.
    channels : sequence of str
        Channels to stitch (fields of ``lois``).
    smoother : {"local", "poly4", None}
        ``"local"``: local linear regression with a tricube kernel (LOWESS
        without robustness iterations); ``"poly4"``: the paper's degree-4
        polynomial regression (Section V-B); None: bins only.
    confidence : float
        Confidence level of the bin intervals and of the fit's band, in
        (0, 1).
    span : float or "auto"
        Share of the LOIs in each local fit, in (0, 1], or ``"auto"``
        (default): per channel, the window that minimises generalised
        cross-validation, at least ``MIN_WINDOW`` LOIs (a quarter of them,
        at least 3, below 4 x ``MIN_WINDOW``).
    weighted : bool
        Weight each LOI in the fit by ``1 / uncertainty**2`` of its
        position (``uncert_ns``, or ``uncert_ns / duration_ns`` for
        fractions), which must then be positive. Bin means stay plain.
    grid_points : int
        Points of the fine grid the fit is evaluated on (at least 2).

    Returns
    -------
    StitchedProfile
        One :class:`StitchedChannel` per channel, in the order asked for.

    Raises
    ------
    ValueError
        ``lois`` empty, not LOI records, or with negative or non-finite
        positions; ``x``, ``bin_width``, ``channels``, ``smoother``,
        ``confidence``, ``span`` or ``grid_points`` invalid (the message
        names it); ``weighted`` with non-positive uncertainties.

    Notes
    -----
    Paper Section IV-B step 8 and Section V-B:

    1. Position each LOI by ``x``; bins of ``bin_width`` from 0 cover the
       longest execution (``x="time"``) or [0, 1] (``x="fraction"``); a
       position on the last edge falls in the last bin.
    2. Per channel, leave out LOIs whose value is NaN (a source without the
       channel); per bin, count, mean and sample standard deviation (two
       passes, for accuracy).
    3. Interval of each bin's mean: ``mean +- t_{(1+confidence)/2, n-1} *
       sd / sqrt(n)`` (Student t). Bins with one LOI have no interval (NaN)
       and empty bins no mean (NaN); neither is dropped.
    4. Fit on a grid of ``grid_points`` from 0 to the longest execution (or
       1): ``"local"`` fits, at each grid point, a line to its ``k =
       ceil(span * n)`` nearest LOIs weighted by the tricube kernel ``(1 -
       (d/h)**3)**3`` (h: the farthest of them) and takes its value there;
       inside a gap in the LOIs, h grows to 4 times the distance to the
       nearer edge, so the line reaches the far side and bridges the gap
       instead of extrapolating one side's slope across it (no change
       where LOIs are dense, none at an edge); ``"poly4"`` is a least-squares polynomial of degree 4 over all LOIs.
       Both are linear in the values (``fit(g) = sum_j l_j(g) y_j``), so
       they reproduce a constant shift.
    5. ``span="auto"``: try 12 windows k from ``MIN_WINDOW`` (``ceil(n / 4)``,
       at least 3, for fewer than ``4 * MIN_WINDOW`` LOIs) to n (geometric
       steps) and keep the one with the least generalised cross-validation
       score ``n * RSS / (n - tr S)**2`` (S: the hat matrix, whose trace
       is the sum of each LOI's weight in its own fit). Beyond 256 LOIs the
       search runs on an even subsample of 256 and the share found shrinks
       by ``(256 / n)**(1/5)``, the rate of a local line's optimal
       bandwidth. The Table I density gives only ~40 LOIs for a ~400 us
       execution: a fixed small span then fits single noisy LOIs, and
       the data, not a constant, should say how local the fit can be.
    6. Band: noise variance ``RSS / (n - 2 tr S + tr S'S)`` (Cleveland's
       degrees of freedom), the fit's standard error ``sigma * sqrt(sum_j
       l_j(g)**2)``, times a critical value from Sun & Loader's (1994)
       tube formula, so the band holds over the whole curve at once, not
       at each point alone. The local fit's band adds what that noise
       band leaves out: the smoother's bias, ``4/3 |fit_k - fit_{k/2}|``
       (a local line's bias grows as the window squared), and, in a gap
       between LOIs at a and b, how far a curve bending one way may stray
       from a line across it, ``|s_a - s_b| (g - a)(b - g) / (b - a)``
       (s: the fit's slopes there). A step with no LOI on it is still
       rounded off; the band is then wide there.

    Examples
    --------
    A linear ramp is reproduced by both fits:

    >>> import numpy as np
    >>> from fingrav_native.records import LOI_DTYPE
    >>> lois = np.zeros(50, dtype=LOI_DTYPE)
    >>> lois["duration_ns"] = 100_000
    >>> lois["toi_ns"] = np.linspace(0, 100_000, 50)
    >>> lois["total"] = 200 + lois["toi_ns"] / 1_000
    >>> p = stitch(lois, channels=("total",))
    >>> p.bin_width, len(p["total"].count)
    (10000.0, 10)
    >>> bool(np.allclose(p["total"].fit_y, 200 + p["total"].fit_x / 1_000))
    True
    """
    # ---- validate
    if not isinstance(lois, np.ndarray) or lois.dtype.names is None or lois.ndim != 1:
        raise ValueError("lois: must be a 1-D structured array of LOI_DTYPE records")
    if len(lois) == 0:
        raise ValueError("lois: is empty; no log fell inside an execution of interest, nothing to stitch")
    if x not in ("time", "fraction"):
        raise ValueError(f"x: must be 'time' or 'fraction', got {x!r}")
    pos_field = "toi_ns" if x == "time" else "toi_frac"
    needed = [pos_field, "duration_ns"] + (["uncert_ns"] if weighted else [])
    missing = [f for f in needed if f not in lois.dtype.names]
    if missing:
        raise ValueError(f"lois: missing fields {missing}")
    if isinstance(channels, str) or len(channels) == 0:
        raise ValueError(f"channels: must be a non-empty sequence of channel names, got {channels!r}")
    bad = [c for c in channels if c not in lois.dtype.names]
    if bad:
        raise ValueError(f"channels: {bad} are not fields of lois")
    if len(set(channels)) != len(channels):
        raise ValueError(f"channels: names repeat: {list(channels)}")
    if smoother not in _SMOOTHERS:
        raise ValueError(f"smoother: must be 'local', 'poly4' or None, got {smoother!r}")
    conf = positive_number(confidence, "confidence")
    if conf >= 1:
        raise ValueError(f"confidence: must be in (0, 1), got {conf!r}")
    sp: float | str
    if isinstance(span, str):
        if span != "auto":
            raise ValueError(f"span: must be a share of the LOIs in (0, 1] or 'auto', got {span!r}")
        sp = span
    else:
        sp = positive_number(span, "span", upper=1.0)
    if isinstance(grid_points, bool) or not isinstance(grid_points, (int, np.integer)) or grid_points < 2:
        raise ValueError(f"grid_points: must be an int >= 2, got {grid_points!r}")
    pos = lois[pos_field].astype(np.float64)
    if not np.all(np.isfinite(pos)) or np.any(pos < 0):
        raise ValueError(f"lois: {pos_field} must be finite and >= 0")
    duration = lois["duration_ns"].astype(np.float64)
    if not np.all(np.isfinite(duration)) or np.any(duration <= 0):
        raise ValueError("lois: duration_ns must be positive and finite")
    median_duration = float(np.median(duration))

    if x == "time":
        width = (
            lookup_guidance(median_duration).loi_interval_ns if bin_width is None else positive_number(bin_width, "bin_width")
        )
        x_hi = float(max(duration.max(), pos.max()))
        x_unit = "ns"
    else:
        if bin_width is None:
            interval = lookup_guidance(median_duration).loi_interval_ns
            width = 1.0 / max(1, math.ceil(median_duration / interval * (1 - 1e-12)))
        else:
            width = positive_number(bin_width, "bin_width", upper=1.0)
        x_hi = float(max(1.0, pos.max()))
        x_unit = "fraction"
    n_bins = max(1, math.ceil(x_hi / width * (1 - 1e-12)))
    edges = np.arange(n_bins + 1, dtype=np.float64) * width
    centres = 0.5 * (edges[:-1] + edges[1:])
    bin_idx = np.minimum((pos / width).astype(np.int64), n_bins - 1)
    grid = np.linspace(0.0, x_hi, int(grid_points))

    if weighted:
        u = lois["uncert_ns"].astype(np.float64)
        if x == "fraction":
            u = u / duration
        if not np.all(np.isfinite(u)) or np.any(u <= 0):
            raise ValueError(
                "weighted: needs every LOI's uncert_ns positive and finite, "
                f"{int(np.sum(~(np.isfinite(u) & (u > 0))))} of lois are not"
            )
        fit_w = 1.0 / u**2
    else:
        fit_w = np.ones(len(lois))
    t_factor_p = 0.5 * (1.0 + conf)

    windows = (_auto_windows(lois, channels, pos, fit_w)
               if smoother == "local" and sp == "auto" else {})
    out = []
    for name in channels:
        v_all = lois[name].astype(np.float64)
        ok = np.isfinite(v_all)
        v, b = v_all[ok], bin_idx[ok]
        count = np.bincount(b, minlength=n_bins).astype(np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.bincount(b, weights=v, minlength=n_bins) / count
            resid = v - mean[b]
            var = np.bincount(b, weights=resid * resid, minlength=n_bins) / (count - 1)
        mean = np.where(count > 0, mean, np.nan)
        sd = np.where(count > 1, np.sqrt(np.where(count > 1, var, 0.0)), np.nan)
        half = _t_quantiles(t_factor_p, count - 1) * sd / np.sqrt(np.maximum(count, 1))
        fit: Optional[_Fit] = None
        if smoother is not None and v.size:
            xs, ws = pos[ok], fit_w[ok]
            fit = (_local_fit(xs, v, ws, grid, sp, conf, windows.get(name)) if smoother == "local"
                   else _poly_fit(xs, v, ws, grid, conf))
        empty = np.empty(0)
        out.append(
            StitchedChannel(
                name=name,
                x=x,
                bin_edges=_readonly(edges.copy()),
                bin_centres=_readonly(centres.copy()),
                count=_readonly(count),
                mean=_readonly(mean),
                sd=_readonly(sd),
                ci_low=_readonly(mean - half),
                ci_high=_readonly(mean + half),
                confidence=conf,
                fit_kind=None if fit is None else fit.kind,
                fit_x=_readonly(empty.copy() if fit is None else grid.copy()),
                fit_y=_readonly(empty.copy() if fit is None else np.asarray(fit.y, dtype=np.float64)),
                n_lois=int(v.size),
                fit_low=_readonly(empty.copy() if fit is None else np.asarray(fit.low, dtype=np.float64)),
                fit_high=_readonly(empty.copy() if fit is None else np.asarray(fit.high, dtype=np.float64)),
                fit_span=math.nan if fit is None else float(fit.span),
            )
        )
    runs = np.unique(lois["run"]) if "run" in lois.dtype.names else np.empty(0, dtype=np.int32)
    unc = lois["uncert_ns"].astype(np.float64) if "uncert_ns" in lois.dtype.names else np.full(1, np.nan)
    return StitchedProfile(
        x=x,
        x_unit=x_unit,
        bin_width=float(width),
        channels=tuple(out),
        n_lois=len(lois),
        runs=_readonly(runs),
        duration_ns=median_duration,
        smoother=smoother,
        span=sp,
        weighted=bool(weighted),
        uncert_ns_median=float(np.median(unc)),
        uncert_ns_max=float(np.max(unc)),
    )


@dataclass(frozen=True)
class EnergyEstimate:
    """Energy of one execution from a stitched profile.

    Unpacks as ``energy_j, uncertainty_j = energy_per_execution(...)``.

    Attributes
    ----------
    energy_j : float
        Energy of the execution (J).
    uncertainty_j : float
        Approximate half-width of its confidence interval (J), at the
        profile's confidence; NaN when no bin has 2 LOIs.
    duration_ns : float
        The duration integrated over.
    channel : str
        The channel integrated.
    confidence : float
        Confidence level of ``uncertainty_j``.
    interpolated_share : float
        Share of the duration with no LOI (empty bins, or beyond the
        profile), whose power was interpolated from neighbouring bins.
    pooled_share : float
        Share of the duration whose interval used the pooled standard
        deviation (bins with fewer than 2 LOIs).
    note : str
        Empty, or what was interpolated or pooled.
    """

    energy_j: float
    uncertainty_j: float
    duration_ns: float
    channel: str
    confidence: float
    interpolated_share: float
    pooled_share: float
    note: str

    def __iter__(self) -> Iterator[float]:
        yield self.energy_j
        yield self.uncertainty_j


def energy_per_execution(stitched_channel: StitchedChannel, duration_ns: float) -> EnergyEstimate:
    """Integrate a stitched channel's binned mean power over one execution.

    Parameters
    ----------
    stitched_channel : StitchedChannel
        One channel of :func:`stitch`'s result (watts).
    duration_ns : float
        The execution's duration (ns), e.g. the golden bin's centre.

    Returns
    -------
    EnergyEstimate
        Energy (J) and its uncertainty (J); unpacks as a pair.

    Raises
    ------
    ValueError
        ``stitched_channel`` is not a StitchedChannel or has no LOI;
        ``duration_ns`` is not positive and finite.

    Notes
    -----
    1. Cut ``[0, duration_ns]`` at the bin edges (fraction edges are scaled
       by ``duration_ns``); a part beyond the last edge is one more,
       empty, segment.
    2. Each segment's power is its bin's mean; an empty bin's is
       interpolated linearly between the nearest non-empty bin centres
       (held constant beyond the outermost ones), and its share reported.
    3. Each segment's interval half-width is its bin's (``(ci_high -
       ci_low) / 2``); for bins with fewer than 2 LOIs, ``t * s_p /
       sqrt(max(n, 1))`` with ``s_p`` the standard deviation pooled over
       the bins with 2 or more (``t`` at the pooled degrees of freedom).
    4. ``energy = sum(P_b * L_b)`` and ``uncertainty = sqrt(sum((h_b *
       L_b)**2))`` over segment lengths ``L_b`` (bins are independent
       samples), converted from W*ns to J. The uncertainty is statistical:
       it leaves out the TOI placement budget and the logger's own error.

    Examples
    --------
    >>> import numpy as np
    >>> from fingrav_native.records import LOI_DTYPE
    >>> lois = np.zeros(4, dtype=LOI_DTYPE)
    >>> lois["toi_ns"] = [1_000, 3_000, 12_000, 14_000]
    >>> lois["duration_ns"] = 20_000
    >>> lois["total"] = [100, 100, 200, 200]
    >>> ch = stitch(lois, bin_width=10_000, channels=("total",), smoother=None)["total"]
    >>> e, u = energy_per_execution(ch, 20_000)   # 100 W * 10 us + 200 W * 10 us
    >>> round(e * 1e3, 9), u
    (3.0, 0.0)
    """
    if not isinstance(stitched_channel, StitchedChannel):
        raise ValueError(
            f"stitched_channel: must be a StitchedChannel (one channel of stitch()), got {type(stitched_channel).__name__}"
        )
    dur = positive_number(duration_ns, "duration_ns")
    ch = stitched_channel
    edges = np.asarray(ch.bin_edges, dtype=np.float64) * (dur if ch.x == "fraction" else 1.0)
    count = np.asarray(ch.count, dtype=np.int64)
    mean = np.asarray(ch.mean, dtype=np.float64)
    has = (count > 0) & np.isfinite(mean)
    if not has.any():
        raise ValueError(f"stitched_channel: channel {ch.name!r} has no LOI; no power to integrate")
    lo, hi = edges[:-1], edges[1:]
    centres = 0.5 * (lo + hi)
    if edges[-1] < dur:  # the profile ends before the execution does
        lo, hi = np.append(lo, edges[-1]), np.append(hi, dur)
        centres = np.append(centres, 0.5 * (edges[-1] + dur))
        count, mean, has = np.append(count, 0), np.append(mean, np.nan), np.append(has, False)
        half_bin = np.append(0.5 * (ch.ci_high - ch.ci_low), np.nan)
    else:
        half_bin = 0.5 * (np.asarray(ch.ci_high, dtype=np.float64) - np.asarray(ch.ci_low, dtype=np.float64))
    length = np.clip(np.minimum(hi, dur) - np.maximum(lo, 0.0), 0.0, None)
    power = np.where(has, mean, np.interp(centres, centres[has], mean[has]))

    sd = np.asarray(ch.sd, dtype=np.float64)
    multi = np.asarray(ch.count) >= 2
    dof = int(np.sum(np.asarray(ch.count)[multi] - 1))
    pooled = count < 2
    if dof > 0:
        s_p = math.sqrt(float(np.sum((np.asarray(ch.count)[multi] - 1) * sd[multi] ** 2)) / dof)
        t = float(scipy.stats.t.ppf(0.5 * (1.0 + ch.confidence), dof))
        half = np.where(pooled, t * s_p / np.sqrt(np.maximum(count, 1)), half_bin)
    else:
        half = np.full(count.shape, np.nan)
    energy = float(np.sum(power * length)) * 1e-9
    uncertainty = float(np.sqrt(np.sum((half * length) ** 2))) * 1e-9
    interp_share = float(np.sum(length[~has]) / dur)
    pooled_share = float(np.sum(length[pooled & (length > 0)]) / dur)
    notes = []
    if interp_share > 0:
        notes.append(f"{interp_share:.1%} of the execution has no LOI; its power was interpolated")
    if dof == 0:
        notes.append("no bin has 2 LOIs, so there is no interval: uncertainty_j is NaN")
    elif pooled_share > 0:
        notes.append(f"{pooled_share:.1%} of the execution is in bins with < 2 LOIs; their interval uses the pooled sd")
    return EnergyEstimate(
        energy_j=energy,
        uncertainty_j=uncertainty,
        duration_ns=dur,
        channel=ch.name,
        confidence=ch.confidence,
        interpolated_share=interp_share,
        pooled_share=pooled_share,
        note="; ".join(notes),
    )


@dataclass(frozen=True)
class WholeRunView:
    """Every log of some runs on time since run start (paper Figures 5-7).

    Attributes
    ----------
    t_ns : numpy.ndarray
        Each kept log's time since its run's first execution started (ns).
    value : numpy.ndarray
        Each kept log's value.
    run : numpy.ndarray of int64
        Each kept log's run.
    execution : numpy.ndarray of int64
        Index of the execution the log fell in, -1 between executions.
    execution_index : numpy.ndarray of int64
        The execution indices present, ascending.
    boundary_start_ns, boundary_end_ns : numpy.ndarray
        Per execution index, the median across runs of its start and end
        since run start.
    runs : numpy.ndarray
        The run ids shown.
    sse_index : int or None
        Execution index of the SSE (None if no run has it).
    warmup_end_ns, sse_start_ns, sse_end_ns : float or None
        Medians across runs: end of the last warm-up execution (index
        ``sse_index - 1``), start and end of the SSE execution.
    ssp_start_ns, ssp_end_ns : float
        Median start and end of each run's last execution (the SSP).
    """

    t_ns: np.ndarray
    value: np.ndarray
    run: np.ndarray
    execution: np.ndarray
    execution_index: np.ndarray
    boundary_start_ns: np.ndarray
    boundary_end_ns: np.ndarray
    runs: np.ndarray
    sse_index: Optional[int]
    warmup_end_ns: Optional[float]
    sse_start_ns: Optional[float]
    sse_end_ns: Optional[float]
    ssp_start_ns: float
    ssp_end_ns: float


def whole_run_view(
    samples_host_ns: npt.ArrayLike,
    values: npt.ArrayLike,
    executions: np.ndarray,
    *,
    runs: npt.ArrayLike,
    sse_index: Optional[int] = 3,
    pad_ns: float = 0.0,
) -> WholeRunView:
    """Lay out all logs of the given runs on time since run start.

    Parameters
    ----------
    samples_host_ns : array_like of float
        Every log's host time (``logger_map.to_host(samples["source_ts"])``).
    values : array_like of float
        Every log's value in one channel (e.g. ``samples["total"]``).
    executions : numpy.ndarray
        EXECUTION_DTYPE records.
    runs : array_like of int
        Runs to show (e.g. the golden runs); each must have executions.
    sse_index : int or None
        Execution index of the SSE, 3 by default (the fourth execution,
        after three warm-up executions; paper Section IV-A); None for no
        warm-up/SSE marks.
    pad_ns : float
        Also keep logs up to this long before a run's first execution and
        after its last (the idle lead-in), >= 0.

    Returns
    -------
    WholeRunView
        Logs with their time since run start, the median execution
        boundaries and the warm-up / SSE / SSP marks.

    Raises
    ------
    ValueError
        Lengths differ, non-finite times, ``runs`` empty or naming runs
        without executions, invalid ``executions``, ``sse_index`` or
        ``pad_ns``.

    Notes
    -----
    Paper Section V-B, Figures 5-7 (all executions of a run, warm-up, SSE
    and SSP separated by vertical lines):

    1. A run starts at its first execution's start and ends at its last
       execution's end; keep the logs within ``[start - pad_ns, end +
       pad_ns]`` (binary searches on the sorted log times, per run) and
       place them at ``host_ns - start``.
    2. Mark the execution each log fell in
       (:func:`~fingrav_native.method.align.assign_logs_to_executions`), -1 for
       gaps.
    3. Per execution index, take the median across runs of its start and
       end since run start: the boundaries.
    4. Marks: warm-up ends at the median end of execution ``sse_index -
       1``; SSE spans execution ``sse_index``; SSP spans each run's last
       execution (paper footnote 2), medians across runs.

    Examples
    --------
    >>> from fingrav_native.records import make_executions
    >>> ex = make_executions([0, 0, 1, 1], [0, 1, 0, 1], [0] * 4,
    ...                      [100, 120, 500, 522], [110, 130, 510, 532])
    >>> v = whole_run_view([105, 125, 140, 508, 530], [1, 2, 3, 4, 5], ex, runs=[0, 1], sse_index=None)
    >>> v.t_ns.tolist(), v.execution.tolist()
    ([5.0, 25.0, 8.0, 30.0], [0, 1, 0, 1])
    >>> v.boundary_start_ns.tolist(), v.ssp_start_ns
    ([0.0, 21.0], 21.0)
    """
    h = np.asarray(samples_host_ns, dtype=np.float64)
    val = np.asarray(values, dtype=np.float64)
    if h.ndim != 1:
        raise ValueError(f"samples_host_ns: must be 1-D, got shape {h.shape}")
    if not np.all(np.isfinite(h)):
        raise ValueError("samples_host_ns: must be finite host times (ns)")
    if val.shape != h.shape:
        raise ValueError(f"values: must have one value per log ({h.size}), got shape {val.shape}")
    executions = validate_executions(executions)
    r = np.asarray(runs)
    if r.ndim != 1:
        raise ValueError(f"runs: must be a 1-D list of run ids, got shape {r.shape}")
    if r.size == 0:
        raise ValueError("runs: is empty; no run to show")
    r = np.unique(r)
    missing = r[~np.isin(r, executions["run"])]
    if missing.size:
        raise ValueError(f"runs: {missing.tolist()[:10]} have no executions")
    if sse_index is not None and (
        isinstance(sse_index, bool) or not isinstance(sse_index, (int, np.integer)) or sse_index < 0
    ):
        raise ValueError(f"sse_index: must be a non-negative int or None, got {sse_index!r}")
    sse = None if sse_index is None else int(sse_index)
    pad = float(pad_ns)
    if not math.isfinite(pad) or pad < 0:
        raise ValueError(f"pad_ns: must be finite and >= 0, got {pad_ns!r}")

    ex = executions[np.isin(executions["run"], r)]
    ex = ex[np.lexsort((ex["start_ns"], ex["run"]))]
    breaks = np.flatnonzero(np.diff(ex["run"])) + 1
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks, [len(ex)])) - 1
    run_ids = ex["run"][first].astype(np.int64)
    run_start = ex["start_ns"][first].astype(np.float64)
    run_end = np.maximum.reduceat(ex["end_ns"].astype(np.float64), first)

    order = np.argsort(h, kind="stable")
    hs = h[order]
    i0 = np.searchsorted(hs, run_start - pad, side="left")
    i1 = np.searchsorted(hs, run_end + pad, side="right")
    cnt = np.clip(i1 - i0, 0, None)
    total = int(cnt.sum())
    offsets = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    kept = order[np.repeat(i0, cnt) + offsets]
    log_run = np.repeat(run_ids, cnt)
    t = h[kept] - np.repeat(run_start, cnt)
    assign = assign_logs_to_executions(h[kept], ex)
    execution = np.where(assign.run == log_run, assign.execution, -1)

    # Per execution index: median start/end since run start across runs.
    ex_start = ex["start_ns"] - np.repeat(run_start, np.diff(np.append(first, len(ex))))
    ex_end = ex["end_ns"] - np.repeat(run_start, np.diff(np.append(first, len(ex))))
    idx = ex["index"].astype(np.int64)
    uniq = np.unique(idx)
    b_start = np.array([np.median(ex_start[idx == k]) for k in uniq])
    b_end = np.array([np.median(ex_end[idx == k]) for k in uniq])

    def _median_of(k: int, arr: np.ndarray) -> Optional[float]:
        sel = idx == k
        return float(np.median(arr[sel])) if sel.any() else None

    sse_start = _median_of(sse, ex_start) if sse is not None else None
    sse_end = _median_of(sse, ex_end) if sse is not None else None
    warmup_end: Optional[float] = None
    if sse_start is not None and sse_index:
        warmup_end = _median_of(int(sse_index) - 1, ex_end)
    elif sse_start is not None:
        warmup_end = 0.0  # the SSE is the first execution: no warm-up
    return WholeRunView(
        t_ns=_readonly(t),
        value=_readonly(val[kept]),
        run=_readonly(log_run),
        execution=_readonly(execution.astype(np.int64)),
        execution_index=_readonly(uniq),
        boundary_start_ns=_readonly(b_start),
        boundary_end_ns=_readonly(b_end),
        runs=_readonly(run_ids),
        sse_index=sse if sse_start is not None else None,
        warmup_end_ns=warmup_end,
        sse_start_ns=sse_start,
        sse_end_ns=sse_end,
        ssp_start_ns=float(np.median(ex_start[last])),
        ssp_end_ns=float(np.median(ex_end[last])),
    )
