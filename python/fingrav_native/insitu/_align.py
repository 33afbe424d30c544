"""The power logs' offset against an application's trace, found from the logs themselves.

A clock map from bracketed reads puts each log where its timestamp says,
but a timestamp is not always the instant the log measured: a firmware
clock fitted one-sidedly lands on the earliest *publication* of each log
(tens of microseconds late on the simulator, unknown on hardware), NVML
stamps the host's read, and the trace's own GPU times come through CUPTI's
conversion to the epoch clock. For a 37 us kernel, a 20 us offset moves most
of its logs onto its neighbours.

The trace says what ran when, so the offset can be measured: shift the logs
by ``delta`` and regress each log's power on what ran around its shifted
time (each signature's quarters of execution, seen through a first-order
lag whose time constant is profiled out, so the power's own lag behind
activity is not taken for an offset); the right ``delta`` leaves the
smallest residual, found on a grid and refined by a parabola; the interval is the profile-likelihood
one (Wilks 1938): the shifts whose ``n log(RSS / RSS_min)`` stays below the
chi-squared quantile. This is the trigger alignment of equivalent-time
sampling (a sampling oscilloscope locks its samples to a known repetitive
signal), with the application's own kernels as the signal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats


@dataclass(frozen=True)
class LogAlignment:
    """The offset that places the logs on the trace's timeline best.

    Attributes
    ----------
    offset_ns : float
        Add to each log's time (the shift that makes the groups tightest).
    low_ns, high_ns : float
        Its interval at ``confidence`` (profile likelihood).
    confidence : float
    ss_ratio : float
        Within-group sum of squares at ``offset_ns`` over that at zero
        (below one: the shift explains part of the scatter).
    logs : int
        Logs used.
    at_edge : bool
        The minimum lies at the edge of the search range: not trusted, not
        applied.
    lag_ns : float
        The power's lag behind activity that fitted best (of ``lags_ns``).
    """

    offset_ns: float
    low_ns: float
    high_ns: float
    confidence: float
    ss_ratio: float
    logs: int
    at_edge: bool
    lag_ns: float = 0.0

    @property
    def half_width_ns(self) -> float:
        """Half-width of the interval."""
        return 0.5 * (self.high_ns - self.low_ns)


class _Tiles:
    """Each kernel execution cut in quarters of its progress: the columns a log's power is regressed on."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, kid: np.ndarray) -> None:
        q = np.arange(5) / 4.0
        d = (ends - starts)[:, None]
        edges = starts[:, None] + d * q[None, :]
        self.a = edges[:, :4].ravel()
        self.b = edges[:, 1:].ravel()
        self.col = (kid[:, None] * 4 + np.arange(4)[None, :]).ravel()
        self.n_col = int(kid.max()) * 4 + 4


def _rss(t: np.ndarray, y: np.ndarray, tiles: _Tiles, tau: float) -> float:
    """Residual sum of squares of power regressed on each kernel quarter's activity, lagged by ``tau``.

    Power follows activity through a first-order lag (the simulator's ``tau_power_ns``; a
    board's regulators and sensor path): a quarter's regressor is its indicator convolved with
    ``exp(-u / tau) / tau`` (the plain indicator at ``tau = 0``), so a lag is fitted as a lag and
    not taken for a clock offset.
    """
    reach = 6.0 * tau
    j0 = np.searchsorted(tiles.b, t - reach, side="right" if tau == 0 else "left")
    j1 = np.searchsorted(tiles.a, t, side="right")
    cnt = np.maximum(j1 - j0, 0)
    rows = np.repeat(np.arange(len(t)), cnt)
    k = np.repeat(j0, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    tt = t[rows]
    if tau == 0:
        w = ((tiles.a[k] <= tt) & (tt < tiles.b[k])).astype(np.float64)
    else:
        hi = np.minimum(tiles.b[k], tt)
        w = np.exp(-(tt - hi) / tau) - np.exp(-(tt - tiles.a[k]) / tau)
    X = np.zeros((len(t), tiles.n_col + 1))
    np.add.at(X, (rows, tiles.col[k]), w)
    X[:, -1] = 1.0
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    r = y - X @ coef
    return float(r @ r)


def align_logs_to_trace(
    t_ns: npt.ArrayLike,
    power_w: npt.ArrayLike,
    starts_ns: npt.ArrayLike,
    ends_ns: npt.ArrayLike,
    kernel_ids: npt.ArrayLike,
    *,
    search_ns: float = 100_000.0,
    step_ns: float = 1_000.0,
    confidence: float = 0.95,
    max_logs: int = 30_000,
    lags_ns: Sequence[float] = (0.0, 5_000.0, 10_000.0, 15_000.0, 25_000.0),
) -> LogAlignment:
    """Measure the offset between instantaneous power logs and a kernel trace.

    Parameters
    ----------
    t_ns : array_like
        The logs' times on the trace's timeline (through the clock map).
    power_w : array_like
        Their total power.
    starts_ns, ends_ns : array_like
        The kernels on the logs' device, in start order.
    kernel_ids : array_like of int
        Per kernel, its signature (0 .. n-1).
    search_ns : float
        Offsets in ``[-search_ns, search_ns]`` are tried.
    step_ns : float
        Grid step (the minimum is refined between steps).
    confidence : float
        Of the interval.
    max_logs : int
        At most this many logs are used (evenly spaced), for speed.
    lags_ns : sequence of float
        Time constants tried for the power's first-order lag behind
        activity (profiled out: a lag delays and smooths, an offset only
        delays, so the two are told apart).

    Returns
    -------
    LogAlignment

    Raises
    ------
    ValueError
        Bad arguments (named), or fewer than 50 logs.

    Notes
    -----
    Paper Section IV-A step 2 (the logs on the kernel's timeline) checked
    against the kernels themselves: a one-way analysis of variance over the
    groups each shift makes, with a profile-likelihood interval (Wilks
    1938). Valid for logs that measure an instant; a window's offset is its
    sensor model's delay (``SensorModel.delay_ns``).
    """
    t = np.asarray(t_ns, dtype=np.float64)
    y = np.asarray(power_w, dtype=np.float64)
    s = np.asarray(starts_ns, dtype=np.float64)
    e = np.asarray(ends_ns, dtype=np.float64)
    k = np.asarray(kernel_ids, dtype=np.int64)
    if t.shape != y.shape or t.ndim != 1:
        raise ValueError("t_ns, power_w: must be 1-D of one length")
    if not (s.shape == e.shape == k.shape) or s.ndim != 1 or len(s) == 0:
        raise ValueError("starts_ns, ends_ns, kernel_ids: must be 1-D of one non-zero length")
    if np.any(np.diff(s) < 0):
        raise ValueError("starts_ns: must be in start order")
    if np.any(k < 0):
        raise ValueError("kernel_ids: must be >= 0")
    if not (search_ns > 0 and 0 < step_ns < search_ns):
        raise ValueError(f"search_ns={search_ns!r}, step_ns={step_ns!r}: need 0 < step_ns < search_ns")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r}: must be in (0, 1)")
    ok = np.isfinite(t) & np.isfinite(y) & (t > s[0] - search_ns) & (t < e[-1] + search_ns)
    t, y = t[ok], y[ok]
    if len(t) > max_logs:
        pick = np.linspace(0, len(t) - 1, max_logs).astype(np.int64)
        t, y = t[pick], y[pick]
    if len(t) < 50:
        raise ValueError(f"t_ns: {len(t)} logs over the trace's kernels; at least 50 are needed to align them")
    y = y - float(np.mean(y))
    tiles = _Tiles(s, e, k)
    grid = np.arange(-search_ns, search_ns + 0.5 * step_ns, step_ns)
    # The lag profiled out: for each shift, the best of a few time constants.
    taus = np.asarray(lags_ns, dtype=np.float64)
    ss_tau = np.array([[_rss(t + d, y, tiles, float(tau)) for tau in taus] for d in grid])
    ss = ss_tau.min(axis=1)
    j = int(np.argmin(ss))
    lag = float(taus[int(np.argmin(ss_tau[j]))])
    at_edge = j in (0, len(grid) - 1)
    best = float(grid[j])
    if not at_edge:
        # A parabola through the minimum and its neighbours.
        a, b, c = ss[j - 1], ss[j], ss[j + 1]
        den = a - 2 * b + c
        if den > 0:
            best += 0.5 * step_ns * (a - c) / den
    ss_min = max(float(ss[j]), 1e-300)
    n = len(t)
    crit = float(stats.chi2.ppf(confidence, 1))
    inside = n * np.log(np.maximum(ss, 1e-300) / ss_min) <= crit
    # The connected run of accepted shifts around the minimum.
    lo_j, hi_j = j, j
    while lo_j > 0 and inside[lo_j - 1]:
        lo_j -= 1
    while hi_j < len(grid) - 1 and inside[hi_j + 1]:
        hi_j += 1
    ss0 = min(_rss(t, y, tiles, float(tau)) for tau in taus)
    return LogAlignment(offset_ns=best, low_ns=float(grid[lo_j]) - 0.5 * step_ns,
                        high_ns=float(grid[hi_j]) + 0.5 * step_ns, confidence=confidence,
                        ss_ratio=ss_min / ss0 if ss0 > 0 else math.nan, logs=n, at_edge=at_edge, lag_ns=lag)
