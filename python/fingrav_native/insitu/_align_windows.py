"""The offset of an averaging sensor's logs against an application's trace, found from the logs themselves.

:func:`~fingrav_native.insitu.align_logs_to_trace` places instantaneous logs
among the kernels; a log that averages (a 1 ms or 5 ms window, a counter's
interval, a first-order filter) measures the mean power over its response,
which in a loop covers several kernels and gaps. A clock mismatch between
trace and capture (a trace from another host, an NTP step, a wrong
``baseTimeNanoseconds``: 0.3 to 200 ms) moves every response onto other
kernels all the same, and the joint fit (:func:`~fingrav_native.method.fit_timeline`)
then attributes them to the wrong ones without a word.

The trace says what ran when, so the offset can be measured: shift the logs
by ``delta`` and regress each log's power on the share of its response each
group of signatures keeps busy (the eight busiest signatures by default, the
rest pooled; an intercept for the gaps), ``a + sum_g b_g share_g``. The share
is exact and cheap: a boxcar's is a difference of the group's cumulative busy
time at the window's two ends, a first-order filter's a running
log-sum-exp over the group's kernels (``logaddexp.accumulate``, once), so
each shift costs a binary search per log and group, never a pass over the
kernels. The search runs coarse to fine (every 100 us over the range on a
few hundred logs; around the best few, every 10 us on a few thousand; around
the best, every 2 us on all, up to ``max_logs``), so its cost grows with
the logs kept, not with the trace. The interval is the profile-likelihood
one of nonlinear least squares (Bates and Watts 1988, Section 6.1), and the
map's own placement (offset 0) is tested against the best shift at the
strict level the instantaneous aligner uses (0.01 over the shifts searched).

The measurement is reported, never applied: a shift through a window
trades with the sensor model's ``delay_ns`` and with the power's shape inside
the kernels, which the busy share does not model, so it checks the clock
map at the resolution of :func:`~fingrav_native.insitu._align.mismatch_slack_ns`;
it does not replace it.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy import stats

from fingrav_native._threads import numeric_threads
from fingrav_native.insitu._align import LogAlignment, least_squares_rss
from fingrav_native.method._joint import merged_intervals
from fingrav_native.sensors._model import SensorModel

#: Below this spread (standard deviation over the logs) of the kernels' busy share of each response, logs
#: the kernels do not explain say nothing of the offset: every window sees the same mix (a 1 s average over
#: a loop of sub-millisecond kernels: 0.1 %; a 1 ms one: 20-30 %).
SAME_MIX = 0.02

#: Coarse grid step (ns) and the shifts kept from it for the middle level.
_COARSE_STEP_NS = 100_000.0
_MID_STEP_NS = 10_000.0
_CANDIDATES = 5

#: Logs x shifts evaluated at once (memory bounded: a float64 per log, shift and group).
_BATCH_ROWS = 200_000


class _Busy:
    """Per group of signatures, its busy intervals, and its busy share of any response (boxcar or filter)."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, group: np.ndarray, n_groups: int,
                 sensor: SensorModel) -> None:
        self.ref = float(np.min(starts))  # times relative to the first kernel: small exp arguments
        self.sensor = sensor
        self.parts = []
        for g in range(n_groups):
            a, b = merged_intervals(starts[group == g] - self.ref, ends[group == g] - self.ref)
            cum = np.concatenate([[0.0], np.cumsum(b - a)])
            lse = np.empty(0)
            if sensor.shape == "first_order":
                tau = sensor.tau_ns
                with np.errstate(divide="ignore"):
                    # Per kernel k, log of exp(b_k / tau) (1 - exp(-(b_k - a_k) / tau)), summed over k so far.
                    lse = np.logaddexp.accumulate(b / tau + np.log(-np.expm1(-(b - a) / tau)))
            self.parts.append((a, b, cum, lse))

    def _cumulative(self, g: int, x: np.ndarray) -> np.ndarray:
        """Busy time of group ``g`` before each ``x``."""
        a, b, cum, _ = self.parts[g]
        j = np.searchsorted(a, x, side="right")
        k = np.maximum(j - 1, 0)
        return np.where(j > 0, cum[j] - np.maximum(b[k] - x, 0.0), 0.0)

    def _filtered(self, g: int, x: np.ndarray) -> np.ndarray:
        """A first-order filter's response at ``x`` to group ``g`` being busy (1 when always busy)."""
        a, b, _, lse = self.parts[g]
        tau = self.sensor.tau_ns
        j = np.searchsorted(a, x, side="right")
        k = np.maximum(j - 1, 0)
        # Kernels before the last one started are over: their total through the running sums.
        done = np.where(j > 1, np.exp(np.minimum(lse[np.maximum(j - 2, 0)] - x / tau, 0.0)), 0.0)
        last = np.exp(-(x - np.minimum(b[k], x)) / tau) - np.exp(-np.maximum(x - a[k], 0.0) / tau)
        return np.asarray(done + np.where(j > 0, last, 0.0))

    def shares(self, hi: np.ndarray, w: np.ndarray, shifts: np.ndarray) -> np.ndarray:
        """``(shifts, logs, groups + 1)``: each group's share of each response moved by each shift, and a 1."""
        # Log-major: each log's shifts are consecutive and increasing, so the binary searches walk memory in order.
        x = (hi[:, None] - self.ref + shifts[None, :]).ravel()
        ww = np.repeat(w, len(shifts))
        out = np.ones((len(x), len(self.parts) + 1))
        for g in range(len(self.parts)):
            if self.sensor.shape == "first_order":
                out[:, g] = self._filtered(g, x)
            else:
                out[:, g] = (self._cumulative(g, x) - self._cumulative(g, x - ww)) / ww
        return out.reshape(len(hi), len(shifts), -1).transpose(1, 0, 2)


class _Fits:
    """Residual sums of squares per shift on a set of logs, each computed once."""

    def __init__(self, busy: _Busy, hi: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
        self.busy, self.hi, self.w, self.y = busy, hi, w, y - float(np.mean(y))
        self.cache: dict[float, float] = {}

    def rss(self, shifts: np.ndarray) -> np.ndarray:
        todo = np.array([d for d in np.unique(shifts).tolist() if d not in self.cache])
        per = max(_BATCH_ROWS // max(len(self.hi), 1), 1)
        for i in range(0, len(todo), per):
            ds = todo[i:i + per]
            r = least_squares_rss(self.busy.shares(self.hi, self.w, ds), self.y)
            self.cache.update(zip(ds.tolist(), r.tolist()))
        return np.array([self.cache[float(d)] for d in shifts])


def _subset(n: int, k: int) -> np.ndarray:
    """``k`` of ``n`` indices, evenly spaced (all where ``n <= k``)."""
    return np.unique(np.linspace(0, n - 1, min(k, n)).astype(np.int64))


def _candidates(fits: _Fits, reach: float) -> np.ndarray:
    """The coarse grid's best few local minima, and 0 (the map's own placement, always looked at)."""
    grid = np.arange(-reach, reach + 0.5 * _COARSE_STEP_NS, _COARSE_STEP_NS)
    ss = fits.rss(grid)
    interior = np.ones(len(ss), dtype=bool)
    interior[1:] &= ss[1:] <= ss[:-1]
    interior[:-1] &= ss[:-1] <= ss[1:]
    best = grid[interior][np.argsort(ss[interior], kind="stable")[:_CANDIDATES]]
    return np.unique(np.append(best, 0.0))


def _refine(fits: _Fits, centre: float, step: float, half: float, reach: float, crit: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """Shifts every ``step`` around ``centre``, widened until the minimum and its interval lie inside."""
    while True:
        lo, hi = max(centre - half, -reach), min(centre + half, reach)
        grid = np.arange(math.ceil(lo / step), math.floor(hi / step) + 1) * step
        ss = fits.rss(grid)
        j = int(np.argmin(ss))
        inside = ss <= crit * max(float(ss[j]), 1e-300)
        open_lo = grid[0] > -reach + step and (j == 0 or inside[0])
        open_hi = grid[-1] < reach - step and (j == len(grid) - 1 or inside[-1])
        if not (open_lo or open_hi) or half > 4 * reach:
            return grid, ss
        half *= 2.0


def _groups(starts: np.ndarray, ends: np.ndarray, kid: np.ndarray, most: int) -> tuple[np.ndarray, int, int]:
    """Per kernel its group: the ``most - 1`` busiest signatures their own, the rest one; groups; pooled."""
    sigs, inv = np.unique(kid, return_inverse=True)
    if len(sigs) <= most:
        return inv.astype(np.int64), len(sigs), 0
    busy = np.bincount(inv, weights=ends - starts, minlength=len(sigs))
    rank = np.empty(len(sigs), dtype=np.int64)
    rank[np.argsort(-busy, kind="stable")] = np.arange(len(sigs))
    return np.minimum(rank[inv], most - 1), most, len(sigs) - most + 1


@numeric_threads()
def measure_window_offset(t_ns: np.ndarray, power_w: np.ndarray, windows_ns: np.ndarray, sensor: SensorModel,
                          starts_ns: np.ndarray, ends_ns: np.ndarray, kernel_ids: np.ndarray, *,
                          search_ns: float = 250e6, step_ns: float = 2_000.0, confidence: float = 0.95,
                          max_logs: int = 20_000, max_signatures: int = 8,
                          logs_per_column: int = 10) -> tuple[Optional[LogAlignment], str]:
    """Measure the offset between averaging power logs and a kernel trace, or say why the logs cannot.

    Parameters
    ----------
    t_ns, power_w : numpy.ndarray
        The logs' stamps on the trace's timeline (through the clock map) and their total power.
    windows_ns : numpy.ndarray
        Each log's boxcar window (its own, or the model's); ignored for a first-order filter.
    sensor : SensorModel
        An averaging sensor: its shape, delay and (for a filter) time constant.
    starts_ns, ends_ns, kernel_ids : numpy.ndarray
        The kernels on the logs' device (any order; concurrent ones of one signature count once).
    search_ns : float
        Offsets in ``[-search_ns, search_ns]`` are tried, and at most a quarter of the kernels' span, so
        that the logs used (those whose response stays inside the span at every shift) are half of it.
    step_ns : float
        The finest grid step (the interval's resolution).
    confidence : float
        Of the interval.
    max_logs : int
        At most this many logs (evenly spaced) in the finest fits.
    max_signatures : int
        Groups of signatures (the busiest own one, the rest share the last).
    logs_per_column : int
        Logs needed per regression column; fewer than two columns' worth: None.

    Returns
    -------
    (LogAlignment or None, str)
        The offset as :func:`~fingrav_native.insitu.align_logs_to_trace`
        gives it (``lag_ns`` 0, ``window_ns`` the logs' median response
        length: a boxcar's window, a filter's ``2 tau``), and why the logs
        cannot determine it, empty where they can: fewer than
        ``2 * logs_per_column`` logs whose response stays inside the kernels'
        span at every shift (None then), or kernels that explain no more of
        the logs than chance while every response covers them in about the
        same mix (:data:`SAME_MIX`: a 25 ms or 1 s window over a loop of
        sub-millisecond kernels), so that no shift could show.

    Notes
    -----
    Paper Section IV-A step 2 (the logs on the kernels' timeline) checked
    through the sensor's forward model (Yang et al., SC'24: a log is the mean
    power over its window): a linear model in each group's busy share, the
    residual profiled over the shift; interval and tests as in
    :func:`~fingrav_native.insitu.align_logs_to_trace` (Bates and Watts
    1988, Section 6.1; the F tests at a level divided by the shifts searched).
    """
    memory = np.asarray(sensor.memory_ns(windows_ns), dtype=np.float64)
    hi_all = np.asarray(t_ns, dtype=np.float64) - sensor.delay_ns
    first, last = float(np.min(starts_ns)), float(np.max(ends_ns))
    reach = float(min(search_ns, 0.25 * (last - first)))
    use = (hi_all - memory >= first + reach) & (hi_all <= last - reach) & np.isfinite(power_w)
    if reach <= 2 * _COARSE_STEP_NS or int(use.sum()) < 2 * logs_per_column:
        return None, (f"{int(use.sum())} logs whose response stays inside the kernels' span at every shift "
                      f"searched (+-{reach / 1e6:.3g} ms; {2 * logs_per_column} needed)")
    pick = np.flatnonzero(use)[_subset(int(use.sum()), max_logs)]
    hi, y = hi_all[pick], np.asarray(power_w, dtype=np.float64)[pick]
    w = np.maximum(np.asarray(windows_ns, dtype=np.float64)[pick] if np.ndim(windows_ns) else
                   np.full(len(pick), float(windows_ns)), 1.0)
    group, n_groups, pooled = _groups(np.asarray(starts_ns, dtype=np.float64), np.asarray(ends_ns, dtype=np.float64),
                                      np.asarray(kernel_ids), max(1, min(max_signatures, len(y) // logs_per_column - 1)))
    busy = _Busy(np.asarray(starts_ns, dtype=np.float64), np.asarray(ends_ns, dtype=np.float64), group, n_groups,
                 sensor)
    p = n_groups + 1
    nu = max(len(y) - p - 1, 1)
    crit = 1.0 + float(stats.f.ppf(confidence, 1, nu)) / nu
    searched = 2.0 * reach / step_ns + 1.0
    coarse, mid = (_Fits(busy, hi[i], w[i], y[i]) for i in (_subset(len(y), 400), _subset(len(y), 4000)))
    # The best few basins of the coarse grid (a loop's iterations alias one another), each looked at closer.
    best = min(((float(np.min(mid.rss(_refine(mid, c, _MID_STEP_NS, 2 * _COARSE_STEP_NS, reach, crit)[0]))), c)
                for c in _candidates(coarse, reach).tolist()))
    fine = _Fits(busy, hi, w, y)
    mid_grid, mid_ss = _refine(mid, best[1], _MID_STEP_NS, 2 * _COARSE_STEP_NS, reach, crit)
    grid, ss = _refine(fine, float(mid_grid[int(np.argmin(mid_ss))]), step_ns, 2 * _MID_STEP_NS, reach, crit)
    ss_total = float(fine.y @ fine.y)
    df1 = max(p - 1, 1)
    explained = 1.0 / (1.0 + float(stats.f.ppf(1.0 - 0.01 / searched, df1, nu)) * df1 / nu)
    strict = 1.0 + float(stats.f.ppf(1.0 - 0.01 / searched, 1, nu)) / nu
    width = 2.0 * sensor.tau_ns if sensor.shape == "first_order" else float(np.median(w))
    al = _window_result(grid, ss, float(fine.rss(np.array([0.0]))[0]), ss_total, (crit, strict, explained), reach,
                        confidence, len(y), p, pooled, width)
    spread = float(np.std(np.sum(busy.shares(hi, w, np.zeros(1))[0, :, :-1], axis=1)))
    if not al.explained and spread < SAME_MIX:
        return al, (f"every response covers the kernels in about the same mix (their busy share varies by "
                    f"{100 * spread:.1f} % across the logs), so the kernels explain no more of the logs than chance "
                    "at any shift")
    return al, ""


def _window_result(grid: np.ndarray, ss: np.ndarray, ss0: float, ss_total: float, levels: tuple[float, float, float],
                   reach: float, confidence: float, logs: int, columns: int, pooled: int,
                   window: float) -> LogAlignment:
    """The minimum refined by a parabola, the connected run of accepted shifts around it, and the tests."""
    crit, strict, explained = levels
    j = int(np.argmin(ss))
    ss_min = max(float(ss[j]), 1e-300)
    best = float(grid[j])
    step = float(grid[1] - grid[0]) if len(grid) > 1 else 0.0
    if 0 < j < len(grid) - 1:
        a, b, c = ss[j - 1], ss[j], ss[j + 1]
        if a - 2 * b + c > 0:
            best += 0.5 * step * (a - c) / (a - 2 * b + c)
    inside = ss / ss_min <= crit
    lo_j = hi_j = j
    while lo_j > 0 and inside[lo_j - 1]:
        lo_j -= 1
    while hi_j < len(grid) - 1 and inside[hi_j + 1]:
        hi_j += 1
    determined = ss_min <= explained * ss_total
    at_edge = grid[lo_j] <= -reach + step or grid[hi_j] >= reach - step or not determined
    return LogAlignment(offset_ns=best, low_ns=float(grid[lo_j]) - 0.5 * step, high_ns=float(grid[hi_j]) + 0.5 * step,
                        confidence=confidence, ss_ratio=ss_min / ss0 if ss0 > 0 else math.nan, logs=logs,
                        at_edge=bool(at_edge), lag_ns=0.0, columns=columns, pooled=pooled,
                        explained=bool(determined), search_ns=reach, zero_rejected=bool(ss0 > strict * ss_min),
                        window_ns=window)
