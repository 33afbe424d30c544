"""Step 8 of FinGraV: stitch the LOIs of many runs into one power profile.

One sub-millisecond execution gets at best one log from a 1 ms logger; many
golden runs together cover the whole execution (paper Section IV-B, step 8,
"plotting all collected LOIs and TOIs"). This module turns those LOIs into a
profile per power channel: a binned mean with a confidence interval per bin
and a smooth fit, either the paper's degree-4 polynomial regression (Section
V-B) or, by default, a local linear smoother (the smoothers and their bands
are in :mod:`fingrav_native.method._smoothers`, the result types and the
energy per execution in :mod:`fingrav_native.method._stitched`).

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
import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import scipy.special

from fingrav_native._checks import flag, fraction, integer_in, positive_number, short_repr
from fingrav_native._checks import readonly as _readonly
from fingrav_native._core import CHANNELS
from fingrav_native._threads import numeric_threads
from fingrav_native.method._guidance import lookup_guidance

# MIN_WINDOW is re-exported: it is the floor of stitch's span="auto" (its docstring names it).
from fingrav_native.method._smoothers import MIN_WINDOW as MIN_WINDOW
from fingrav_native.method._smoothers import SmoothFit, auto_windows, local_fit, poly_fit
from fingrav_native.method._stitched import (
    LogQualityWarning,
    Smoother,
    Span,
    StitchedChannel,
    StitchedProfile,
    XAxis,
)
from fingrav_native.records._layouts import check_channels

_SMOOTHERS = ("local", "poly4", None)


def _t_quantiles(p: float, df: np.ndarray) -> np.ndarray:
    """Student t quantile ``p`` for an array of degrees of freedom (NaN where df < 1)."""
    df = np.asarray(df, dtype=np.float64)
    out = np.full(df.shape, np.nan)
    ok = df >= 1
    if ok.any():
        # The ufunc scipy.stats.t.ppf evaluates (its _ppf), without the distribution wrapper's per-call cost:
        # a trace profiles hundreds of signatures, each channel's bins one call.
        out[ok] = scipy.special.stdtrit(df[ok], p)
    return out


def _check_lois(lois: np.ndarray, x: XAxis, weighted: bool) -> str:
    """The LOIs' position field, once they are checked to be LOI records that have it."""
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
    # The values stitched are power: a NaN total, an infinite, negative or absurd value is refused here too.
    check_channels(lois, "lois")
    return pos_field


def count_once(records: np.ndarray, name: str, label: str = "", stacklevel: int = 3) -> np.ndarray:
    """``records`` with every record that repeats an earlier one byte for byte left out, said in a warning.

    A log counted twice is not a second measurement: each copy halves the variance the intervals assume,
    and a bin's single LOI given twice has a standard deviation of zero, so the same array concatenated
    would narrow the intervals many times over while measuring nothing new.
    """
    if len(records) < 2 or _strictly_increasing_field(records):
        return records  # no two records alike (logs in time order: the common case, without hashing each)
    raw = np.ascontiguousarray(records)
    key = raw.view(np.dtype((np.void, raw.dtype.itemsize)))
    _, first = np.unique(key, return_index=True)
    repeats = len(records) - len(first)
    if repeats == 0:
        return records
    what = "logs repeat an earlier log's source_ts and values" if name == "samples" else "records repeat an earlier one"
    warnings.warn(f"{label + ': ' if label else ''}{name}: {repeats} of {len(records)} {what} (logs given twice, "
                  "or a reader polling faster than the sensor updates); each is counted once",
                  LogQualityWarning, stacklevel=stacklevel)
    return records[np.sort(first)]


def _strictly_increasing_field(records: np.ndarray) -> bool:
    """Whether a numeric field of ``records`` rises strictly from each record to the next: then no two are alike."""
    for name in records.dtype.names or ():
        col = records[name]
        if col.ndim == 1 and col.dtype.kind in "iuf" and bool(np.all(col[1:] > col[:-1])):
            return True
    return False


def _check_channels(lois: np.ndarray, channels: Sequence[str]) -> None:
    """Refuse channels that are not distinct fields of the LOIs."""
    if isinstance(channels, (str, bytes)) or not isinstance(channels, (list, tuple)) or len(channels) == 0 \
            or not all(isinstance(c, str) for c in channels):
        raise ValueError(f"channels: must be a non-empty sequence of channel names, got {short_repr(channels)}")
    names = lois.dtype.names or ()
    bad = [c for c in channels if c not in names]
    if bad:
        raise ValueError(f"channels: {bad} are not fields of lois")
    if len(set(channels)) != len(channels):
        raise ValueError(f"channels: names repeat: {list(channels)}")


def check_stitch_options(smoother: Optional[Smoother], confidence: float, span: Span,
                   grid_points: int) -> tuple[float, Span]:
    """The confidence level and the span, once the smoother, span and grid are checked."""
    if smoother not in _SMOOTHERS:
        raise ValueError(f"smoother: must be 'local', 'poly4' or None, got {smoother!r}")
    conf = fraction(confidence, "confidence")
    sp: Span
    if isinstance(span, str):
        if span != "auto":
            raise ValueError(f"span: must be a share of the LOIs in (0, 1] or 'auto', got {span!r}")
        sp = span
    else:
        sp = positive_number(span, "span", upper=1.0)
    integer_in(grid_points, "grid_points", 2, 1_000_000)
    return conf, sp


def _positions(lois: np.ndarray, pos_field: str) -> tuple[np.ndarray, np.ndarray]:
    """Each LOI's position and its execution's duration, both checked."""
    pos = lois[pos_field].astype(np.float64)
    if not np.all(np.isfinite(pos)) or np.any(pos < 0):
        raise ValueError(f"lois: {pos_field} must be finite and >= 0")
    duration = lois["duration_ns"].astype(np.float64)
    if not np.all(np.isfinite(duration)) or np.any(duration <= 0):
        raise ValueError("lois: duration_ns must be positive and finite")
    return pos, duration


@dataclass(frozen=True)
class _Axis:
    """The profile's axis: bin width, unit, edges and centres, each LOI's bin, and the fit's grid."""

    width: float
    unit: str
    edges: np.ndarray
    centres: np.ndarray
    index: np.ndarray
    grid: np.ndarray

    @property
    def n_bins(self) -> int:
        return len(self.centres)

#: Most bins a stitched profile has: a finer ``bin_width`` is refused (no sensor resolves such bins).
MAX_BINS = 100_000


def _axis(x: XAxis, bin_width: Optional[float], pos: np.ndarray, duration: np.ndarray, median_duration: float,
          grid_points: int) -> _Axis:
    """Bins of ``bin_width`` from 0 over the longest execution (or [0, 1]); Table I's LOI interval by default."""
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
    ratio = x_hi / width * (1 - 1e-12)
    n_bins = max(1, math.ceil(ratio)) if math.isfinite(ratio) else MAX_BINS + 1  # a width near 0: beyond any count
    if n_bins > MAX_BINS:
        # A width of 1e-5 ns asked for 1e10 bins: 75 GiB of edges before any error.
        raise ValueError(f"bin_width={bin_width!r}: {ratio:.3g} bins over the executions' {x_hi:g} {x_unit}; at most "
                         f"{MAX_BINS} (no sensor resolves bins that fine)")
    edges = np.arange(n_bins + 1, dtype=np.float64) * width
    centres = 0.5 * (edges[:-1] + edges[1:])
    # A position on the last edge falls in the last bin.
    bin_idx = np.minimum((pos / width).astype(np.int64), n_bins - 1)
    grid = np.linspace(0.0, x_hi, grid_points)
    return _Axis(width, x_unit, edges, centres, bin_idx, grid)


def _fit_weights(lois: np.ndarray, x: XAxis, duration: np.ndarray, weighted: bool) -> np.ndarray:
    """Each LOI's weight in the fit: ``1 / uncertainty**2`` of its position when weighted, else 1."""
    if not weighted:
        return np.ones(len(lois))
    u = lois["uncert_ns"].astype(np.float64)
    if x == "fraction":
        u = u / duration
    if not np.all(np.isfinite(u)) or np.any(u <= 0):
        raise ValueError(
            "weighted: needs every LOI's uncert_ns positive and finite, "
            f"{int(np.sum(~(np.isfinite(u) & (u > 0))))} of lois are not"
        )
    return 1.0 / u**2


def _bin_stats(v: np.ndarray, b: np.ndarray, n_bins: int,
               t_factor_p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per bin: count, mean, sample SD (two passes, for accuracy) and the half-width of the mean's t interval."""
    count = np.bincount(b, minlength=n_bins).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.bincount(b, weights=v, minlength=n_bins) / count
        resid = v - mean[b]
        var = np.bincount(b, weights=resid * resid, minlength=n_bins) / (count - 1)
    mean = np.where(count > 0, mean, np.nan)
    sd = np.where(count > 1, np.sqrt(np.where(count > 1, var, 0.0)), np.nan)
    half = _t_quantiles(t_factor_p, count - 1) * sd / np.sqrt(np.maximum(count, 1))
    return count, mean, sd, half


def _stitch_channel(lois: np.ndarray, name: str, x: XAxis, axis: _Axis, pos: np.ndarray, fit_w: np.ndarray,
                    smoother: Optional[Smoother], sp: Span, conf: float, window: Optional[int]) -> StitchedChannel:
    """One channel's bins and fit, over the LOIs with a finite value in it (a source may lack the channel)."""
    v_all = lois[name].astype(np.float64)
    ok = np.isfinite(v_all)
    v, b = v_all[ok], axis.index[ok]
    count, mean, sd, half = _bin_stats(v, b, axis.n_bins, 0.5 * (1.0 + conf))
    fit: Optional[SmoothFit] = None
    if smoother is not None and v.size:
        xs, ws = pos[ok], fit_w[ok]
        fit = (local_fit(xs, v, ws, axis.grid, sp, conf, window) if smoother == "local"
               else poly_fit(xs, v, ws, axis.grid, conf))
    empty = np.empty(0)
    return StitchedChannel(
        name=name,
        x=x,
        bin_edges=_readonly(axis.edges.copy()),
        bin_centres=_readonly(axis.centres.copy()),
        count=_readonly(count),
        mean=_readonly(mean),
        sd=_readonly(sd),
        ci_low=_readonly(mean - half),
        ci_high=_readonly(mean + half),
        confidence=conf,
        fit_kind=None if fit is None else fit.kind,
        fit_x=_readonly(empty.copy() if fit is None else axis.grid.copy()),
        fit_y=_readonly(empty.copy() if fit is None else np.asarray(fit.y, dtype=np.float64)),
        n_lois=int(v.size),
        fit_low=_readonly(empty.copy() if fit is None else np.asarray(fit.low, dtype=np.float64)),
        fit_high=_readonly(empty.copy() if fit is None else np.asarray(fit.high, dtype=np.float64)),
        fit_span=math.nan if fit is None else float(fit.span),
    )


@numeric_threads()
def stitch(
    lois: np.ndarray,
    *,
    x: XAxis = "time",
    bin_width: Optional[float] = None,
    channels: Sequence[str] = CHANNELS,
    smoother: Optional[Smoother] = "local",
    confidence: float = 0.95,
    span: Span = "auto",
    weighted: bool = False,
    grid_points: int = 201,
) -> StitchedProfile:
    """Stitch LOIs from many runs into a per-channel power profile.

    Parameters
    ----------
    lois : numpy.ndarray
        LOI_DTYPE records (from :func:`~fingrav_native.method.place_logs`),
        normally of the golden runs' executions of interest.
    x : {"time", "fraction"}
        Position of an LOI: its TOI in ns (``toi_ns``) or as a fraction of
        its execution's duration (``toi_frac``).
    bin_width : float, optional
        Bin width in ns (``x="time"``) or as a fraction (``x="fraction"``,
        at most 1). Default: the guidance LOI interval for the median
        duration (5 us below 50 us, 10 us above; Table I), expressed as a
        fraction of the median duration when ``x="fraction"``. At most
        :data:`MAX_BINS` bins over the longest execution.
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
        Points of the fine grid the fit is evaluated on (2 to 1,000,000).

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

    Warns
    -----
    LogQualityWarning
        LOIs that repeat an earlier LOI field for field; each is counted
        once (a log given twice is not a second measurement).

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
    weighted = flag(weighted, "weighted")
    pos_field = _check_lois(lois, x, weighted)
    lois = count_once(lois, "lois")
    _check_channels(lois, channels)
    conf, sp = check_stitch_options(smoother, confidence, span, grid_points)
    pos, duration = _positions(lois, pos_field)
    median_duration = float(np.median(duration))
    axis = _axis(x, bin_width, pos, duration, median_duration, int(grid_points))
    fit_w = _fit_weights(lois, x, duration, weighted)
    # One window search for the channels logged at the same LOIs.
    windows = (auto_windows(lois, channels, pos, fit_w)
               if smoother == "local" and sp == "auto" else {})
    out = [_stitch_channel(lois, name, x, axis, pos, fit_w, smoother, sp, conf, windows.get(name))
           for name in channels]
    fields = lois.dtype.names or ()
    runs = np.unique(lois["run"]) if "run" in fields else np.empty(0, dtype=np.int32)
    unc = lois["uncert_ns"].astype(np.float64) if "uncert_ns" in fields else np.full(1, np.nan)
    return StitchedProfile(
        x=x,
        x_unit=axis.unit,
        bin_width=float(axis.width),
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
