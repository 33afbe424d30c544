"""The power logs' offset against an application's trace, found from the logs themselves.

A clock map from bracketed reads puts each log where its timestamp says,
but a timestamp is not always the instant the log measured: a firmware
clock fitted one-sidedly lands on the earliest *publication* of each log
(tens of microseconds late on the simulator, unknown on hardware), NVML
stamps the host's read, and the trace's own GPU times come through CUPTI's
conversion to the epoch clock. For a 37 us kernel, a 20 us offset moves most
of its logs onto its neighbours.

The trace says what ran when, so the offset can be measured: shift the logs
by ``delta`` and group each by what ran at its shifted time (a kernel
signature and a quarter of its execution, or a gap and how long after a
kernel); the right ``delta`` makes the groups tightest. The criterion is the
within-group sum of squares of a one-way analysis of variance, minimised on
a grid and refined by a parabola; the interval is the profile-likelihood
one (Wilks 1938): the shifts whose ``n log(SS / SS_min)`` stays below the
chi-squared quantile. This is the trigger alignment of equivalent-time
sampling (a sampling oscilloscope locks its samples to a known repetitive
signal), with the application's own kernels as the signal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

__all__ = ["LogAlignment", "align_logs_to_trace"]

#: Gap groups by time since the last kernel ended (ns).
_GAP_EDGES_NS = np.array([10_000.0, 100_000.0, 1_000_000.0])


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
    """

    offset_ns: float
    low_ns: float
    high_ns: float
    confidence: float
    ss_ratio: float
    logs: int
    at_edge: bool

    @property
    def half_width_ns(self) -> float:
        """Half-width of the interval."""
        return 0.5 * (self.high_ns - self.low_ns)


def _within_ss(t: np.ndarray, y: np.ndarray, starts: np.ndarray, ends: np.ndarray, kid: np.ndarray,
               n_kid: int) -> float:
    i = np.searchsorted(starts, t, side="right") - 1
    ok = i >= 0
    ic = np.clip(i, 0, None)
    inside = ok & (t < ends[ic])
    frac = np.clip((t - starts[ic]) / np.maximum(ends[ic] - starts[ic], 1.0), 0.0, 0.999999)
    since = t - ends[ic]
    group = np.where(inside, kid[ic] * 4 + (frac * 4).astype(np.int64),
                     n_kid * 4 + np.searchsorted(_GAP_EDGES_NS, since))
    group = np.where(ok, group, n_kid * 4 + len(_GAP_EDGES_NS) + 1)
    n_g = n_kid * 4 + len(_GAP_EDGES_NS) + 2
    cnt = np.bincount(group, minlength=n_g)
    tot = np.bincount(group, weights=y, minlength=n_g)
    nz = cnt > 0
    return float(np.sum(y * y) - np.sum(tot[nz] ** 2 / cnt[nz]))


def align_logs_to_trace(
    t_ns: npt.ArrayLike,
    power_w: npt.ArrayLike,
    starts_ns: npt.ArrayLike,
    ends_ns: npt.ArrayLike,
    kernel_ids: npt.ArrayLike,
    *,
    search_ns: float = 200_000.0,
    step_ns: float = 500.0,
    confidence: float = 0.95,
    max_logs: int = 200_000,
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
    n_kid = int(k.max()) + 1
    grid = np.arange(-search_ns, search_ns + 0.5 * step_ns, step_ns)
    ss = np.array([_within_ss(t + d, y, s, e, k, n_kid) for d in grid])
    j = int(np.argmin(ss))
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
    ss0 = _within_ss(t, y, s, e, k, n_kid)
    return LogAlignment(offset_ns=best, low_ns=float(grid[lo_j]) - 0.5 * step_ns,
                        high_ns=float(grid[hi_j]) + 0.5 * step_ns, confidence=confidence,
                        ss_ratio=ss_min / ss0 if ss0 > 0 else math.nan, logs=n, at_edge=at_edge)
