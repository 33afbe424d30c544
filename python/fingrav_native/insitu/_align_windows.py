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
each shift costs one binary search per log and window end (in every group's
interval starts merged, which places it among all groups' at once), never a
pass over the kernels. The search runs coarse to fine (every 100 us over the
range on a few hundred logs; around the best few, every 10 us on a few
thousand; around the best, every 2 us on all, up to ``max_logs``), so its cost grows with
the logs kept, not with the trace. The interval is the profile-likelihood
one of nonlinear least squares (Bates and Watts 1988, Section 6.1), and the
map's own placement (offset 0) is tested against the best shift at the
strict level the instantaneous aligner uses (0.01 over the shifts searched).

That search covers a quarter of the kernels' span at most, on the logs
whose response stays inside it at every shift; a trace 150 or 300 ms off
its capture lies beyond it. Every shift at which the responses still meet
the kernels is therefore scanned at once, as the instantaneous aligner does
(``insitu._align_scan``): the logs' least-squares residual on each group's
busy share of their responses, computed on cells a fraction of the window or
of the typical kernel (whichever is shorter, so that the window-smoothed
statistic cannot step over the true shift's basin), with the share of each
response outside the kernels' span a column of its own, and the sums of
products for every shift cross-correlations by the FFT. The scan proposes;
the best proposal is fitted finely on every log and must beat the best fit
near the map's placement at the strict level over the shifts scanned.

The measurement is reported, not applied: a shift through a window
trades with the sensor model's ``delay_ns`` and with the power's shape inside
the kernels, which the busy share does not model, so it checks the clock
map at the resolution of :func:`~fingrav_native.insitu._align.mismatch_slack_ns`;
it does not replace it. A map whose own bound is far wider than that (a
tool's log placed by a start and period given by hand, one period) is the
exception: ``profile_trace`` applies an offset measured inside its bound.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np
import numpy.typing as npt
import scipy.fft
from scipy import signal, stats

from fingrav_native._checks import (
    check_power,
    finite_array,
    fraction,
    instance_of,
    integer_in,
    positive_number,
    whole_numbers,
)
from fingrav_native._threads import numeric_threads
from fingrav_native.insitu._align import LogAlignment
from fingrav_native.insitu._align_design import least_squares_rss
from fingrav_native.insitu._align_scan import Scan, far_candidates
from fingrav_native.method._joint import merged_intervals
from fingrav_native.sensors._model import SensorModel

#: Below this spread (standard deviation over the logs) of the kernels' busy share of each response, the logs
#: say nothing of the offset, whatever a fit explains: every window sees the same mix (a 1 s average over a
#: loop of sub-millisecond kernels: 0.1 %; a 25 ms one without pauses: 0.8 %; a 1 ms one: 20-30 %).
SAME_MIX = 0.02

#: Coarse grid step (ns) and the shifts kept from it for the middle level.
_COARSE_STEP_NS = 100_000.0
_MID_STEP_NS = 10_000.0
_CANDIDATES = 5

#: Logs x shifts evaluated at once (memory bounded: a float64 per log, shift and group).
_BATCH_ROWS = 200_000

#: The far scan's cell is this fraction of the response or of the typical kernel, whichever is shorter (a
#: response's busy share moves by at most ``2 cell / window`` within a cell, so the smoothed statistic keeps
#: the true shift's basin), and it covers at most :data:`_SCAN_CELLS` cells (longer captures: coarser cells).
_CELLS_PER_SCALE = 8
_SCAN_CELLS = 1 << 18


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
        # Every group's interval starts in one sorted sequence: the starts at or before x are a prefix of it, so one
        # binary search there places x among every group's intervals at once. Per group and prefix length, what
        # the share's formulas read of the group's last interval started by then is tabled once; -inf where none
        # has started, which makes each formula's terms vanish, as they must before the group's first kernel.
        a_all = np.concatenate([part[0] for part in self.parts])
        label = np.repeat(np.arange(n_groups), [len(part[0]) for part in self.parts])
        order = np.argsort(a_all, kind="stable")
        self.starts = a_all[order]
        n = np.zeros((n_groups, len(order) + 1), dtype=np.int64)
        np.cumsum(label[order][None, :] == np.arange(n_groups)[:, None], axis=1, out=n[:, 1:])

        def table(g: int, values: np.ndarray, back: int) -> np.ndarray:
            # ``values[n - back]`` where the group has that many intervals started, -inf where it has not.
            return np.where(n[g] >= back, values[np.maximum(n[g] - back, 0)], -np.inf)

        self.busy_before = np.stack([self.parts[g][2][n[g]] for g in range(n_groups)])
        self.last_end = np.stack([table(g, self.parts[g][1], 1) for g in range(n_groups)])
        if sensor.shape == "first_order":
            self.last_start = np.stack([table(g, self.parts[g][0], 1) for g in range(n_groups)])
            self.done_lse = np.stack([table(g, self.parts[g][3], 2) for g in range(n_groups)])

    def cumulative(self, x: np.ndarray) -> np.ndarray:
        """``(groups, len(x))``: each group's busy time before each ``x``."""
        i = np.searchsorted(self.starts, x, side="right")
        # busy_before - max(last_end - x, 0), in place: the arrays hold every group at every log and shift, and a
        # fresh one per intermediate costs more in page faults than its arithmetic.
        running = np.take(self.last_end, i, axis=1)
        running -= x
        np.maximum(running, 0.0, out=running)
        busy = np.take(self.busy_before, i, axis=1)
        busy -= running
        return busy

    def _filtered(self, x: np.ndarray) -> np.ndarray:
        """``(groups, len(x))``: a first-order filter's response at each ``x`` to each group being busy (1 when
        always busy)."""
        i = np.searchsorted(self.starts, x, side="right")
        tau = self.sensor.tau_ns
        # Kernels before the last one started are over: their total through the running sums.
        done = np.exp(np.minimum(np.take(self.done_lse, i, axis=1) - x / tau, 0.0))
        last = (np.exp(-(x - np.minimum(np.take(self.last_end, i, axis=1), x)) / tau)
                - np.exp(-np.maximum(x - np.take(self.last_start, i, axis=1), 0.0) / tau))
        return np.asarray(done + last)

    def shares(self, hi: np.ndarray, w: np.ndarray, shifts: np.ndarray) -> np.ndarray:
        """``(shifts, logs, groups + 1)``: each group's share of each response moved by each shift, and a 1."""
        # Log-major: each log's shifts are consecutive and increasing, so the binary searches walk memory in order.
        x = (hi[:, None] - self.ref + shifts[None, :]).ravel()
        ww = np.repeat(w, len(shifts))
        out = np.ones((len(x), len(self.parts) + 1))
        if self.sensor.shape == "first_order":
            out[:, :-1] = self._filtered(x).T
        else:
            inside = self.cumulative(x)
            inside -= self.cumulative(x - ww)
            inside /= ww
            out[:, :-1] = inside.T
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


def _refine(fits: _Fits, centre: float, step: float, half: float, reach: float, crit: float,
            most: float = math.inf) -> tuple[np.ndarray, np.ndarray]:
    """Shifts every ``step`` around ``centre``, widened until the minimum and its interval lie inside (or the
    half-width passes ``most``)."""
    while True:
        lo, hi = max(centre - half, -reach), min(centre + half, reach)
        grid = np.arange(math.ceil(lo / step), math.floor(hi / step) + 1) * step
        ss = fits.rss(grid)
        j = int(np.argmin(ss))
        inside = ss <= crit * max(float(ss[j]), 1e-300)
        open_lo = grid[0] > -reach + step and (j == 0 or inside[0])
        open_hi = grid[-1] < reach - step and (j == len(grid) - 1 or inside[-1])
        if not (open_lo or open_hi) or half > min(4 * reach, most):
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


def _responses(col: np.ndarray, cell: float, sensor: SensorModel, width: float) -> np.ndarray:
    """Per cell, the column (constant within each cell, zero before the first) seen through the sensor's response
    that ends at the cell's centre: a ``width`` boxcar's mean, or a first-order filter's output."""
    if sensor.shape == "first_order":
        half = math.exp(-0.5 * cell / sensor.tau_ns)
        end = signal.lfilter([1.0 - half * half], [1.0, -half * half], col)
        before = np.concatenate([[0.0], end[:-1]])
        return np.asarray(half * before + (1.0 - half) * col)
    cum = np.concatenate([[0.0], np.cumsum(col)])
    at = np.arange(len(col)) + 0.5
    cells = width / cell
    knots = np.arange(len(cum), dtype=np.float64)
    return np.asarray((np.interp(at, knots, cum) - np.interp(at - cells, knots, cum, left=0.0)) / cells)


def _normal_rss(gram: np.ndarray, b: np.ndarray, yy: float) -> np.ndarray:
    """``yy - b' gram^+ b`` per shift: the residual of least squares from its normal equations, columns scaled to
    unit norm and a rank cut by eigenvalues as :func:`~fingrav_native.insitu._align.least_squares_rss` makes."""
    diag = np.diagonal(gram, axis1=1, axis2=2)
    # FFT rounding leaves a column no log sees at ~1e-12: below a millionth of a log it is empty.
    empty = diag < 1e-6
    norm = np.sqrt(np.where(empty, 1.0, diag))
    scaled = gram / (norm[:, :, None] * norm[:, None, :])
    scaled[empty[:, :, None] | empty[:, None, :]] = 0.0
    w, U = np.linalg.eigh(scaled)
    z = np.einsum("kji,kj->ki", U, np.where(empty, 0.0, b / norm))
    keep = w > 1e-10 * np.maximum(w[:, -1:], 1e-300)
    return np.asarray(yy - np.sum(np.where(keep, z * z / np.where(keep, w, 1.0), 0.0), axis=1))


def _scan(hi: np.ndarray, y: np.ndarray, scale: float, memory: float, busy: _Busy, n_groups: int,
          min_logs: float) -> Scan:
    """The least-squares residual of the logs (response ends ``hi``, centred ``y``) on each group's busy share of
    their responses, smoothed over a cell, at every shift at which the responses meet the kernels' span.

    ``busy`` holds the groups and, as group ``n_groups``, the span itself: responses that leave the span see
    it as their own level (a trace that covers part of the capture). Sums of products per shift are
    cross-correlations of the binned logs with each column's response (Oppenheim and Schafer,
    *Discrete-Time Signal Processing*, Section 8.7), so every shift costs the same few FFTs.
    """
    a, b, _, _ = busy.parts[n_groups]
    first, last = float(a[0]), float(b[-1])
    durations = np.concatenate([busy.parts[g][1] - busy.parts[g][0] for g in range(n_groups)])
    order = np.argsort(durations, kind="stable")
    cum = np.cumsum(durations[order])
    typical = float(durations[order][np.searchsorted(cum, 0.5 * cum[-1])])
    x = hi - busy.ref
    t0, t1 = float(np.min(x)), float(np.max(x))
    lo_shift, hi_shift = first - t1, last + memory - t0
    cell = max(min(scale, typical) / _CELLS_PER_SCALE, (hi_shift - lo_shift + t1 - t0 + memory) / _SCAN_CELLS, 1.0)
    m = int((t1 - t0) // cell) + 1
    at = np.minimum(((x - t0) / cell).astype(np.int64), m - 1)
    yy, nn = np.bincount(at, weights=y, minlength=m), np.bincount(at, minlength=m).astype(np.float64)
    # The kernels' axis: cell i is [x0 + i cell, x0 + (i + 1) cell), ``lead`` cells of history before the
    # first shift's earliest response; a log in log cell j at shift k = lo_shift + k cell reads cell j + k + lead.
    lead = int(math.ceil(memory / cell)) + 1
    shifts = int(math.ceil((hi_shift - lo_shift) / cell)) + 1
    edges = lo_shift + t0 - lead * cell + cell * np.arange(lead + m + shifts + 1)
    cols = [_responses(np.diff(c) / cell, cell, busy.sensor, scale)[lead:] for c in busy.cumulative(edges)]
    size = scipy.fft.next_fast_len(m + shifts, real=True)
    fy, fn = (np.conj(scipy.fft.rfft(v, size)) for v in (yy, nn))

    def corr(f: np.ndarray, col: np.ndarray) -> np.ndarray:
        return np.asarray(scipy.fft.irfft(scipy.fft.rfft(col, size) * f, size)[:shifts])

    p = len(cols) + 1
    gram, rhs = np.empty((shifts, p, p)), np.empty((shifts, p))
    for c in range(len(cols)):
        rhs[:, c] = corr(fy, cols[c])
        gram[:, c, -1] = gram[:, -1, c] = corr(fn, cols[c])
        for d in range(c, len(cols)):
            gram[:, c, d] = gram[:, d, c] = corr(fn, cols[c] * cols[d])
    gram[:, -1, -1], rhs[:, -1] = float(nn.sum()), float(yy.sum())
    # Too few responses meet the span at a shift: not fitted at all (an eigendecomposition per shift saved).
    few = gram[:, n_groups, -1] < min_logs
    rss = np.full(shifts, np.inf)
    rss[~few] = _normal_rss(gram[~few], rhs[~few], float(y @ y))
    return Scan(lo_shift + cell * np.arange(shifts), rss, cell)


def _far_offset(near: LogAlignment, logs: tuple[np.ndarray, np.ndarray, np.ndarray], sensor: SensorModel,
                kernels: tuple[np.ndarray, np.ndarray, np.ndarray, int, int], step_ns: float, confidence: float,
                max_logs: int, min_logs: int) -> Optional[LogAlignment]:
    """The best offset beyond the near search, where the logs place themselves there better than anywhere near the
    map at the strict level over every shift scanned; None where none does.

    Every finite log counts, its response's share outside the kernels' span a column of its own; the scan
    (:func:`_scan`) proposes, each proposal and the near search's best are fitted finely on the same logs.
    """
    hi_all, y_all, w_all = logs
    starts, ends, group, n_groups, pooled = kernels
    ok = np.flatnonzero(np.isfinite(hi_all) & np.isfinite(y_all))
    if len(ok) < min_logs:
        return None
    pick = ok[_subset(len(ok), max_logs)]
    hi, w = hi_all[pick], w_all[pick]
    y = y_all[pick] - float(np.mean(y_all[pick]))
    first, last = float(np.min(starts)), float(np.max(ends))
    # The span as one more group: its share, beside the intercept, is the level outside the trace.
    busy = _Busy(np.append(starts, first), np.append(ends, last), np.append(group, n_groups), n_groups + 1, sensor)
    memory = float(np.max(np.asarray(sensor.memory_ns(w), dtype=np.float64)))
    scale = sensor.tau_ns if sensor.shape == "first_order" else float(np.median(w))
    scan = _scan(hi, y, scale, memory, busy, n_groups, min_logs)
    finite = np.isfinite(scan.rss)
    if not np.any(finite):
        return None
    reach = float(np.max(np.abs(scan.shifts[finite])))
    p = n_groups + 2
    nu = max(len(y) - p - 1, 1)
    searched = 2.0 * reach / step_ns + 1.0
    crit = 1.0 + float(stats.f.ppf(confidence, 1, nu)) / nu
    strict = 1.0 + float(stats.f.ppf(1.0 - 0.01 / searched, 1, nu)) / nu
    candidates = far_candidates(scan, near.search_ns, 0.5 * (1.0 + strict))
    if not candidates:
        return None
    sub = _subset(len(y), 4000)
    mid, fine = _Fits(busy, hi[sub], w[sub], y[sub]), _Fits(busy, hi, w, y)

    def fitted(fits: _Fits, centre: float, half: float, limit: float) -> tuple[np.ndarray, np.ndarray]:
        # Widened at most to a few times the scan's cell: a flat profile beyond that is not determined.
        grid, ss = _refine(mid, centre, _MID_STEP_NS, half, limit, crit, 4 * half)
        return _refine(fits, float(grid[int(np.argmin(ss))]), step_ns, 2 * _MID_STEP_NS, limit, crit, 4 * half)

    ss_total = float(y @ y)
    df1 = max(p - 1, 1)
    explained = 1.0 / (1.0 + float(stats.f.ppf(1.0 - 0.01 / searched, df1, nu)) * df1 / nu)
    # Each proposal looked at closer on a subset of the logs; the best, if it beats the near shifts there, on all.
    near_mid = float(np.min(_refine(mid, near.offset_ns, _MID_STEP_NS, 2 * _COARSE_STEP_NS, near.search_ns,
                                    crit, 8 * _COARSE_STEP_NS)[1]))
    half = max(2 * scan.cell_ns, 2 * _MID_STEP_NS)
    low, centre = min((float(np.min(_refine(mid, c, _MID_STEP_NS, half, reach, crit, 4 * half)[1])), c)
                      for c in candidates)
    if near_mid <= strict * low:
        return None
    grid, ss = fitted(fine, centre, half, reach)
    low = float(np.min(ss))
    near_min = float(np.min(fitted(fine, near.offset_ns, 2 * _COARSE_STEP_NS, near.search_ns)[1]))
    if low > explained * ss_total or near_min <= strict * low:
        return None
    # Reported from the logs whose response stays inside the span around the offset: a response across the
    # span's edge sees the power ramp up from idle as a step, which pulled a 5 ms window's offset 0.6 ms.
    best = float(grid[int(np.argmin(ss))])
    margin = float(grid[-1] - grid[0]) + 2 * half
    inside = (hi + best - margin - memory >= first) & (hi + best + margin <= last)
    if int(inside.sum()) >= min_logs:
        grid, ss = fitted(_Fits(busy, hi[inside], w[inside], y[inside] - float(np.mean(y[inside]))), best, half,
                          reach)
    al = _window_result(grid, ss, float(fine.rss(np.array([0.0]))[0]), ss_total, (crit, strict, explained),
                        reach, confidence, len(y), p, pooled, near.window_ns)
    accepted = ss <= crit * max(float(np.min(ss)), 1e-300)
    # An interval cut by the widening's cap is not determined: said at the edge, not as a tight offset.
    return dataclasses.replace(al, far=True, zero_rejected=True,
                               at_edge=bool(al.at_edge or accepted[0] or accepted[-1]))


def _far_without_near(hi_all: np.ndarray, power_w: np.ndarray, windows_ns: np.ndarray, sensor: SensorModel,
                     starts_ns: np.ndarray, ends_ns: np.ndarray, kernel_ids: np.ndarray, reach: float, step_ns: float,
                     confidence: float, max_logs: int, max_signatures: int,
                     logs_per_column: int) -> Optional[LogAlignment]:
    """The far offset where the near search has too few logs: compared with the map's placement (offset 0)."""
    y = np.asarray(power_w, dtype=np.float64)
    ok = int(np.sum(np.isfinite(y) & np.isfinite(hi_all)))
    if ok < 2 * logs_per_column or len(starts_ns) == 0:
        return None
    w_all = np.maximum(np.asarray(windows_ns, dtype=np.float64) if np.ndim(windows_ns) else
                       np.full(len(hi_all), float(windows_ns)), 1.0)
    s, e = np.asarray(starts_ns, dtype=np.float64), np.asarray(ends_ns, dtype=np.float64)
    group, n_groups, pooled = _groups(s, e, np.asarray(kernel_ids), max(1, min(max_signatures, ok // logs_per_column - 1)))
    width = 2.0 * sensor.tau_ns if sensor.shape == "first_order" else float(np.median(w_all))
    near = LogAlignment(offset_ns=0.0, low_ns=-reach, high_ns=reach, confidence=confidence, ss_ratio=math.nan,
                        logs=0, at_edge=True, explained=False, search_ns=max(reach, 2 * _COARSE_STEP_NS),
                        window_ns=width)
    return _far_offset(near, (hi_all, y, w_all), sensor, (s, e, group, n_groups, pooled), step_ns, confidence,
                       max_logs, 2 * logs_per_column)


#: The finest step of the offset grid (ns): finer asks the fits for more shifts than any sensor resolves.
MIN_STEP_NS = 100.0
#: At most this many steps in the search's half-width (the grid's memory and time grow with it).
MAX_SEARCH_STEPS = 1_000_000
#: The longest span of kernels searched (ns; about 28 hours): beyond it, a corrupted stamp.
MAX_SPAN_NS = 1e14


def _checked_window_arrays(t_ns: npt.ArrayLike, power_w: npt.ArrayLike, windows_ns: npt.ArrayLike, sensor: Any,
                           starts_ns: npt.ArrayLike, ends_ns: npt.ArrayLike, kernel_ids: npt.ArrayLike
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The logs and kernels as float64 / int64, each refused by name when it is wrong."""
    t = finite_array(t_ns, "t_ns")
    y = check_power(power_w, "power_w", allow_nan=True)  # a NaN log is a failed read: not used
    if t.ndim != 1 or t.shape != y.shape:
        raise ValueError(f"t_ns, power_w: must be 1-D of one length, got shapes {t.shape} and {y.shape}")
    w = finite_array(windows_ns, "windows_ns")
    if (w.ndim and w.shape != t.shape) or np.any(w < 0):
        raise ValueError(f"windows_ns: one window >= 0 per log (or one for all), got shape {w.shape}")
    instance_of(sensor, "sensor", SensorModel, "a SensorModel")
    if not sensor.averages:
        raise ValueError(f"sensor={sensor.name!r}: an instantaneous sensor; its logs' offset is measured by "
                         "align_logs_to_trace")
    s, e = finite_array(starts_ns, "starts_ns"), finite_array(ends_ns, "ends_ns")
    k = whole_numbers(kernel_ids, "kernel_ids", 0, 2**31 - 1)
    if not (s.shape == e.shape == k.shape) or s.ndim != 1 or len(s) == 0:
        raise ValueError("starts_ns, ends_ns, kernel_ids: must be 1-D of one non-zero length")
    if np.any(e < s):
        raise ValueError("starts_ns, ends_ns: every kernel must end at or after its start")
    return t, y, w, s, e, k


def _checked_search(search_ns: float, step_ns: float, starts_ns: np.ndarray, ends_ns: np.ndarray) -> tuple[float, float]:
    """The search's half-width and step, in bounds the grid's memory and time allow."""
    search = positive_number(search_ns, "search_ns")
    step = positive_number(step_ns, "step_ns")
    if not (MIN_STEP_NS <= step < search and search / step <= MAX_SEARCH_STEPS):
        raise ValueError(f"search_ns={search_ns!r}, step_ns={step_ns!r}: need {MIN_STEP_NS:g} <= step_ns < search_ns "
                         f"and at most {MAX_SEARCH_STEPS:,} steps in search_ns")
    span = float(np.max(ends_ns)) - float(np.min(starts_ns))
    if span > MAX_SPAN_NS:
        raise ValueError(f"starts_ns, ends_ns: the kernels span {span:.4g} ns, over {MAX_SPAN_NS:.0e} ns (28 hours): "
                         "a corrupted stamp?")
    return search, step


@numeric_threads()
def measure_window_offset(t_ns: npt.ArrayLike, power_w: npt.ArrayLike, windows_ns: npt.ArrayLike,
                          sensor: SensorModel, starts_ns: npt.ArrayLike, ends_ns: npt.ArrayLike,
                          kernel_ids: npt.ArrayLike, *,
                          search_ns: float = 250e6, step_ns: float = 2_000.0, confidence: float = 0.95,
                          max_logs: int = 20_000, max_signatures: int = 8,
                          logs_per_column: int = 10) -> tuple[Optional[LogAlignment], str]:
    """Measure the offset between averaging power logs and a kernel trace, or say why the logs cannot.

    The averaging sensor's counterpart of
    :func:`~fingrav_native.insitu.align_logs_to_trace` (which takes logs of
    an instant): ``profile_trace`` runs it on every averaging sensor's logs
    to check the clock map against the kernels.

    Parameters
    ----------
    t_ns, power_w : array_like
        The logs' stamps on the trace's timeline (through the clock map) and
        their total power (a NaN power is a failed read, not used).
    windows_ns : array_like or float
        Each log's boxcar window (its own, or the model's; one for all);
        ignored for a first-order filter.
    sensor : SensorModel
        An averaging sensor: its shape, delay and (for a filter) time constant.
    starts_ns, ends_ns, kernel_ids : array_like
        The kernels on the logs' device (any order; concurrent ones of one
        signature count once), their signatures integers >= 0.
    search_ns : float
        The fine search around the map: offsets in ``[-search_ns, search_ns]``, and at most a quarter of the
        kernels' span, so that the logs it uses (those whose response stays inside the span at every shift)
        are half of it. Beyond it, every offset at which the responses meet the kernels is scanned
        (``LogAlignment.far`` where the best lies there).
    step_ns : float
        The finest grid step (the interval's resolution), at least 100 ns
        and at most a millionth of ``search_ns``.
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
        span at every shift (None then), or responses that all cover the
        kernels in about the same mix (:data:`SAME_MIX`: a 25 ms or 1 s
        window over a loop of sub-millisecond kernels), so that no shift
        could show (whatever the fit explains then is what else varies,
        such as the chip heating up).

    Raises
    ------
    ValueError
        An argument of the wrong type or out of its bounds (named), an
        instantaneous sensor, or kernels spanning over 1e14 ns (28 hours).

    Notes
    -----
    Paper Section IV-A step 2 (the logs on the kernels' timeline) checked
    through the sensor's forward model (Yang et al., SC'24: a log is the mean
    power over its window): a linear model in each group's busy share, the
    residual profiled over the shift; interval and tests as in
    :func:`~fingrav_native.insitu.align_logs_to_trace` (Bates and Watts
    1988, Section 6.1; the F tests at a level divided by the shifts searched).
    """
    t_ns, power_w, windows_ns, starts_ns, ends_ns, kernel_ids = _checked_window_arrays(
        t_ns, power_w, windows_ns, sensor, starts_ns, ends_ns, kernel_ids)
    search_ns, step_ns = _checked_search(search_ns, step_ns, starts_ns, ends_ns)
    fraction(confidence, "confidence")
    max_logs = integer_in(max_logs, "max_logs", 2, 10_000_000)
    max_signatures = integer_in(max_signatures, "max_signatures", 1, 1_000)
    logs_per_column = integer_in(logs_per_column, "logs_per_column", 1, 1_000_000)
    memory = np.asarray(sensor.memory_ns(windows_ns), dtype=np.float64)
    hi_all = np.asarray(t_ns, dtype=np.float64) - sensor.delay_ns
    first, last = float(np.min(starts_ns)), float(np.max(ends_ns))
    reach = float(min(search_ns, 0.25 * (last - first)))
    use = (hi_all - memory >= first + reach) & (hi_all <= last - reach) & np.isfinite(power_w)
    if reach <= 2 * _COARSE_STEP_NS or int(use.sum()) < 2 * logs_per_column:
        # Logs that leave the span near the map may still meet the kernels far from it (a trace 450 ms off a
        # 0.6 s capture): the full scan, against the map's own placement.
        far = _far_without_near(hi_all, power_w, windows_ns, sensor, starts_ns, ends_ns, kernel_ids, reach, step_ns,
                               confidence, max_logs, max_signatures, logs_per_column)
        if far is not None:
            return far, ""
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
    if spread < SAME_MIX:
        # Whatever the fit explains then comes from what else varies over the capture (the chip heating up),
        # which the busy share does not model: a 25 ms average of a loop "found" +55 ms on exact clocks.
        return al, (f"every response covers the kernels in about the same mix (their busy share varies by "
                    f"{100 * spread:.1f} % across the logs), so no shift could show in the logs")
    w_all = np.maximum(np.asarray(windows_ns, dtype=np.float64) if np.ndim(windows_ns) else
                       np.full(len(hi_all), float(windows_ns)), 1.0)
    far = _far_offset(al, (hi_all, np.asarray(power_w, dtype=np.float64), w_all), sensor,
                      (np.asarray(starts_ns, dtype=np.float64), np.asarray(ends_ns, dtype=np.float64), group, n_groups,
                       pooled), step_ns, confidence, max_logs, 2 * logs_per_column)
    return (al if far is None else far), ""


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
