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
smallest residual, found on a grid and refined by a parabola; the interval
is the profile-likelihood one of nonlinear least squares (Bates and Watts
1988, Section 6.1): the shifts whose residual stays below
``RSS_min (1 + F(1, nu) / nu)``, ``nu`` the residual degrees of freedom.
This is the trigger alignment of equivalent-time sampling (a sampling
oscilloscope locks its samples to a known repetitive signal), with the
application's own kernels as the signal.

The cost does not grow with the trace. The regression has a fixed number of
columns: the signatures with the most busy time get their own quarters,
the rest share one "other kernels" group, and every column has at least
``logs_per_column`` logs (fewer logs than columns fit any shift exactly and
make a tight interval out of noise). Without a lag a log's regressors are
one-hot, so a shift's residual is a one-way analysis of variance (one pass
of ``bincount``). With a lag the regressors are each column's past activity
through ``exp(-u / tau)``, summed exactly (no cut-off) from running
log-sum-exp totals of the kernels of each group (``logaddexp.accumulate``,
linear in the kernels, once per lag), and each shift's fit is its normal
equations (columns x columns). The lagged fits are searched coarse to fine:
every fourth shift on at most ``coarse_logs`` logs, then every shift on all
logs around the best and out to the interval's ends. Neighbouring shifts
share their normal equations: while a shifted log stays in one quarter (or
gap) every lagged regressor but the quarter in progress's decays by the same
``exp(-delta / tau)``, so a run of shifts sums each log's outer products once
per stretch it spends in one quarter and scales them per shift; the search
costs the logs plus their crossings of quarter boundaries per lag, not the
logs times the shifts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats

from fingrav_native._checks import (
    check_power,
    finite_array,
    fraction,
    integer_in,
    positive_number,
    short_repr,
    whole_numbers,
)
from fingrav_native._errors import FingravWarning
from fingrav_native._threads import numeric_threads
from fingrav_native.insitu._align_design import Located, RegressionDesign, Segments, kernel_groups
from fingrav_native.insitu._align_scan import far_candidates, scan_offsets
from fingrav_native.insitu._overlap import communication_level, running

#: Coarse search: every this many grid steps (lagged fits), at most ``coarse_logs`` logs.
_COARSE_EVERY = 4

#: The fine search around the clock map's placement: offsets within this (ns), on a grid of this step. A map
#: from bracketed reads errs by microseconds; a map coarser than this has its bound searched instead
#: (``profile_trace``).
FINE_SEARCH_NS = 100_000.0
FINE_SEARCH_STEP_NS = 1_000.0


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
        The minimum, or its interval, reaches the edge of the search range,
        or the kernels explain no more of the logs' scatter than the best
        of as many shifts of noise would (an F test): the offset is not
        determined; not trusted, not
        applied.
    lag_ns : float
        The power's lag behind activity that fitted best (of ``lags_ns``).
    columns : int
        Regression columns (four quarters per signature group and the
        level between kernels); 0 in files written before it was kept.
    pooled : int
        Signatures that share one "other kernels" group, because the logs
        are too few to give each its own quarters (``logs_per_column``).
    explained : bool
        Whether the kernels explain more of the logs' scatter than the best
        of as many shifts of noise (the F test above). An offset at the edge
        that the kernels explain is a clock mismatch beyond the search range;
        one they do not explain says only that the logs do not follow the
        kernels (a mismatch far beyond it, or a sensor that averages).
    search_ns : float
        The search range's half-width (offsets in ``[-search_ns, search_ns]``).
    zero_rejected : bool
        Whether the logs reject the map's own placement (offset 0) at the
        strict level the F test uses (0.01 over the shifts searched): the
        best shift fits better by more than the search over many shifts
        and a model short of the logs' whole truth (kernels of other
        devices, concurrency) explain. A warning of a mismatch needs it.
    window_ns : float
        0 for instantaneous logs; for an averaging sensor's logs the median
        length of their response (a window, a filter's reach): the offset
        was measured through it (``insitu._align_windows``), is reported
        and applied only inside a clock map's bound wider than
        :data:`FINE_SEARCH_NS` (``profile_trace``).
    far : bool
        The best offset lies beyond the fine search around the map's
        placement: found by the scan over every shift at which the logs
        still meet the kernels (``insitu._align_scan`` for instantaneous
        logs, ``insitu._align_windows`` for averaging ones), fitted finely there,
        and better than every shift near the map at the strict level; a
        clock mismatch, reported and never applied (``search_ns`` is then the
        scan's reach).
    """

    offset_ns: float
    low_ns: float
    high_ns: float
    confidence: float
    ss_ratio: float
    logs: int
    at_edge: bool
    lag_ns: float = 0.0
    columns: int = 0
    pooled: int = 0
    explained: bool = True
    search_ns: float = math.nan
    zero_rejected: bool = False
    window_ns: float = 0.0
    far: bool = False

    @property
    def half_width_ns(self) -> float:
        """Half-width of the interval."""
        return 0.5 * (self.high_ns - self.low_ns)


#: Shifts in one run of the lagged fits' shared normal equations (``RegressionDesign.lagged_run``): a run longer than
#: the shortest quarters moves most logs across a boundary, and those are rebuilt at every shift.
_RUN = 12

#: Fewer logs than this are fitted densely at every shift: it costs little there, and residuals from the rows keep
#: the last digits of a nearly flat profile of few logs (a real trace's 87), whose minimum a tie decides.
_SHARED_MIN_LOGS = 2_000

#: Logs x shifts fitted at once (a block of shifts shares the numpy calls; bounded, so memory is).
_BATCH_ROWS = 20_000


class _Profile:
    """Residual sums of squares per shift and lag, each computed once, on all logs or a coarse subset."""

    def __init__(self, design: RegressionDesign, t: np.ndarray, y: np.ndarray, grid: np.ndarray, taus: np.ndarray,
                 coarse_logs: int) -> None:
        self.design, self.grid, self.taus = design, grid, taus
        pick = np.unique(np.linspace(0, len(t) - 1, min(coarse_logs, len(t))).astype(np.int64))
        self.sets = {True: (t, y), False: (t[pick], y[pick] - float(np.mean(y[pick])))}
        # The logs' times, by which the design keeps the power-free part of their fits (RegressionDesign.keep_fits).
        self.times = {full: hashlib.blake2b(tt.tobytes(), digest_size=16).digest() if design.keep_fits else b""
                      for full, (tt, _) in self.sets.items()}
        self.whole = len(pick) == len(t)  # the subset is every log: one set of fits serves both
        self.cache: dict[tuple[bool, float], np.ndarray] = {}

    def fill(self, deltas: npt.ArrayLike, full: bool = True, lagged: bool = True) -> None:
        """Fit every shift of ``deltas`` not fitted yet (the lagged fits too unless ``lagged`` is False)."""
        full = full or self.whole
        t, y = self.sets[full]
        todo = [d for d in np.atleast_1d(np.asarray(deltas, dtype=np.float64)).tolist() if (full, d) not in self.cache
                or (lagged and not np.all(np.isfinite(self.cache[(full, d)])))]
        if lagged and len(todo) > 1 and len(t) >= _SHARED_MIN_LOGS:
            todo = self._fill_runs(np.sort(np.asarray(todo)), t, y, full)
        per = max(_BATCH_ROWS // len(t), 1)
        for i in range(0, len(todo), per):
            ds = np.asarray(todo[i:i + per])
            key = (self.times[full], full, tuple(ds.tolist()))
            where = self.design._kept_fit((*key, "located"),
                                          lambda: self.design.locate((t[None, :] + ds[:, None]).ravel()))
            out = np.full((len(ds), len(self.taus)), np.nan)
            for k, tau in enumerate(self.taus):
                if tau == 0:
                    out[:, k] = self.design.anova(where, y, len(ds))
                elif lagged:
                    out[:, k] = self.design.lagged(where, y, float(tau), len(ds), key)
            for d, row in zip(ds, out):
                self.cache[(full, float(d))] = row

    def _fill_runs(self, ds: np.ndarray, t: np.ndarray, y: np.ndarray, full: bool) -> list[float]:
        """Fit the shifts of ``ds`` (sorted) that lie in runs of evenly spaced neighbours (the fine search's
        every shift, the coarse one's every fourth) by shared normal equations (``RegressionDesign.lagged_run``); the
        shifts left alone, for the plain fits."""
        gaps = np.diff(ds)
        cut = np.flatnonzero(gaps > 1.5 * float(np.min(gaps))) + 1
        alone: list[float] = []
        for run in np.split(ds, cut):
            for i in range(0, len(run), _RUN):
                part = run[i:i + _RUN]
                if len(part) < 2:
                    alone.extend(part.tolist())
                    continue
                key = (self.times[full], full, tuple(part.tolist()))
                where, segs = self.design._kept_fit((*key, "segments"), lambda: self._segments(t, part))
                out = np.full((len(part), len(self.taus)), np.nan)
                for k, tau in enumerate(self.taus):
                    out[:, k] = (self.design.anova(where, y, len(part)) if tau == 0 else
                                 self.design.lagged_run(segs, y, part, float(tau), key))
                for d, row in zip(part.tolist(), out):
                    self.cache[(full, d)] = row
        return alone

    def _segments(self, t: np.ndarray, part: np.ndarray) -> tuple[Located, Segments]:
        """Where the logs ``t`` fall at each shift of ``part``, and their phases over the run."""
        where = self.design.locate((t[None, :] + part[:, None]).ravel())
        return where, self.design.segments(where, len(part), len(t))

    def shifted(self, delta: float, full: bool = True) -> np.ndarray:
        """Per lag, the residual with the logs shifted by ``delta``."""
        self.fill([delta], full)
        full = full or self.whole
        return self.cache[(full, float(delta))]

    def at(self, i: int, full: bool = True) -> np.ndarray:
        """Per lag, the residual at grid shift ``i``."""
        return self.shifted(float(self.grid[i]), full)

    def bests(self, lo: int, hi: int, full: bool = True) -> np.ndarray:
        """The residuals at grid shifts ``lo..hi`` (inclusive), the lag profiled out (of the fits made there)."""
        full = full or self.whole
        return np.asarray(np.nanmin([self.cache[(full, d)] for d in self.grid[lo:hi + 1].tolist()], axis=1))


def _fine_window(prof: _Profile, crit: float) -> tuple[int, int, int]:
    """Grid indices ``lo..hi`` holding the minimum over all logs and the interval around it, and the minimum's."""
    m = len(prof.grid)
    # Coarse: the no-lag fit at every shift, the lagged ones at every fourth, on a subset of the logs.
    prof.fill(prof.grid, full=False, lagged=False)
    prof.fill(prof.grid[np.unique(np.append(np.arange(0, m, _COARSE_EVERY), m - 1))], full=False)
    c = int(np.argmin(prof.bests(0, m - 1, full=False)))
    lo, hi = max(c - _COARSE_EVERY, 0), min(c + _COARSE_EVERY, m - 1)
    while True:
        prof.fill(prof.grid[lo:hi + 1])
        ss = prof.bests(lo, hi)
        j = lo + int(np.argmin(ss))
        # As a product: logs the fit explains exactly (constant readings, a flat load) leave a zero minimum.
        inside = ss <= crit * ss.min()
        # Widen while the minimum, or a shift still inside the interval, is at the window's end.
        grow_lo = lo > 0 and (j == lo or inside[0])
        grow_hi = hi < m - 1 and (j == hi or inside[-1])
        if not (grow_lo or grow_hi):
            return lo, hi, j
        lo = max(lo - _COARSE_EVERY, 0) if grow_lo else lo
        hi = min(hi + _COARSE_EVERY, m - 1) if grow_hi else hi


def _near_logs(s: np.ndarray, e: np.ndarray, t: np.ndarray, search_ns: float, reach_ns: float) -> np.ndarray:
    """The kernels a log (sorted times ``t``) can see at some shift: running within ``[t - search_ns - reach_ns,
    t + search_ns]``.

    Older ones weigh at most ``exp(-reach / tau)`` in a lagged regressor
    (e^-40 at 40 lags), so leaving them out changes nothing but the cost
    where the logs are sparse against the kernels (a long trace's logs
    thinned to ``max_logs``).
    """
    i = np.searchsorted(t, s - search_ns)
    return (i < len(t)) & (t[np.minimum(i, len(t) - 1)] <= e + search_ns + reach_ns)


def _checked(t_ns: npt.ArrayLike, power_w: npt.ArrayLike, starts_ns: npt.ArrayLike, ends_ns: npt.ArrayLike,
             kernel_ids: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The arrays as float64 / int64, each named when it is wrong."""
    t = finite_array(t_ns, "t_ns")
    y = check_power(finite_array(power_w, "power_w"), "power_w")
    s = finite_array(starts_ns, "starts_ns")
    e = finite_array(ends_ns, "ends_ns")
    k = whole_numbers(kernel_ids, "kernel_ids", 0, 2**31 - 1)
    if t.shape != y.shape or t.ndim != 1:
        raise ValueError("t_ns, power_w: must be 1-D of one length")
    if not (s.shape == e.shape == k.shape) or s.ndim != 1 or len(s) == 0:
        raise ValueError("starts_ns, ends_ns, kernel_ids: must be 1-D of one non-zero length")
    if np.any(np.diff(s) < 0):
        raise ValueError("starts_ns: must be in start order")
    if np.any(k < 0):
        raise ValueError("kernel_ids: must be >= 0")
    if np.any(e < s) or np.any(s[1:] < e[:-1]):
        raise ValueError("starts_ns, ends_ns: the kernels must not overlap (leave concurrent ones out) and must "
                         "end after they start")
    return t, y, s, e, k


def _checked_overlay(overlay_ns: Optional[tuple[npt.ArrayLike, npt.ArrayLike]]
                     ) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """The overlay's starts and ends as float64, checked; None for none or an empty one."""
    if overlay_ns is None:
        return None
    if not isinstance(overlay_ns, (tuple, list)) or len(overlay_ns) != 2:
        raise ValueError(f"overlay_ns={short_repr(overlay_ns)}: must be (starts, ends) of the overlay's kernels")
    a, b = finite_array(overlay_ns[0], "overlay_ns"), finite_array(overlay_ns[1], "overlay_ns")
    if a.shape != b.shape or a.ndim != 1 or np.any(b < a):
        raise ValueError("overlay_ns: starts and ends must be 1-D of one length, each end at or after its start")
    return (a, b) if len(a) else None


@numeric_threads()
def align_logs_to_trace(
    t_ns: npt.ArrayLike,
    power_w: npt.ArrayLike,
    starts_ns: npt.ArrayLike,
    ends_ns: npt.ArrayLike,
    kernel_ids: npt.ArrayLike,
    *,
    search_ns: float = FINE_SEARCH_NS,
    step_ns: float = FINE_SEARCH_STEP_NS,
    confidence: float = 0.95,
    max_logs: int = 30_000,
    lags_ns: Sequence[float] = (0.0, 5_000.0, 10_000.0, 15_000.0, 25_000.0),
    logs_per_column: int = 10,
    max_signatures: int = 8,
    coarse_logs: int = 1_000,
    overlay_ns: Optional[tuple[npt.ArrayLike, npt.ArrayLike]] = None,
) -> LogAlignment:
    """Measure the offset between instantaneous power logs and a kernel trace.

    Parameters
    ----------
    t_ns : array_like
        The logs' times on the trace's timeline (through the clock map).
    power_w : array_like
        Their total power.
    starts_ns, ends_ns : array_like
        The kernels on the logs' device, in start order, not overlapping.
    kernel_ids : array_like of int
        Per kernel, its signature (any integers >= 0).
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
    logs_per_column : int
        Logs needed per regression column: signatures beyond what the logs
        support share one group (``LogAlignment.pooled``), and fewer than
        five columns' worth of logs (one group and the level between
        kernels) is refused.
    max_signatures : int
        At most this many signatures get their own quarters (the ones with
        the most busy time); the rest share one group.
    coarse_logs : int
        Logs of the coarse search (every fourth shift); the fine one uses
        all.
    overlay_ns : (array_like, array_like), optional
        Starts and ends (ns) of kernels that ran beside those of
        ``starts_ns`` and add a level of their own (communication kernels on
        their own streams, as :func:`~fingrav_native.method.fit_timeline`'s
        ``overlay_ns``). Their level is fitted by least squares on what ran
        at each log (``insitu._overlap.communication_level``) with the logs
        where the map puts them, taken off the logs taken while one ran, and
        the offset measured on the rest; an offset beyond the measurement's
        resolution (:data:`MISMATCH_SLACK_NS`) places the logs for a second
        fit of the level.

    Returns
    -------
    LogAlignment

    Raises
    ------
    ValueError
        Bad arguments (named), or fewer than ``5 * logs_per_column`` logs
        (50 by default) over the kernels.

    Notes
    -----
    Paper Section IV-A step 2 (the logs on the kernel's timeline) checked
    against the kernels themselves: a regression of each log's power on the
    kernels' quarters around it for each shift, with the profile-likelihood
    interval of nonlinear least squares (Bates and Watts 1988, *Nonlinear
    Regression Analysis and Its Applications*, Section 6.1: Wilks 1938 with
    the residual degrees of freedom, which widens it where the columns are
    many for the logs). Valid for logs that measure an instant; a window's
    offset is its sensor model's delay (``SensorModel.delay_ns``).
    """
    t, y, s, e, k = _checked(t_ns, power_w, starts_ns, ends_ns, kernel_ids)
    overlay = _checked_overlay(overlay_ns)
    search_ns, step_ns = positive_number(search_ns, "search_ns"), positive_number(step_ns, "step_ns")
    # The offsets tried: a grid of at most 100,000 (a finer one is a mistake, and its memory a crash).
    if not (step_ns < search_ns and search_ns / step_ns <= 50_000):
        raise ValueError(f"search_ns={search_ns!r}, step_ns={step_ns!r}: need 0 < step_ns < search_ns and at most "
                         "100,000 offsets (2 x search_ns / step_ns)")
    fraction(confidence, "confidence")
    integer_in(logs_per_column, "logs_per_column", 2)
    integer_in(max_signatures, "max_signatures", 1)
    max_logs = integer_in(max_logs, "max_logs", 1)
    integer_in(coarse_logs, "coarse_logs", 1)
    taus = finite_array(lags_ns, "lags_ns")
    if taus.ndim != 1 or len(taus) == 0 or not np.all(taus >= 0):
        raise ValueError(f"lags_ns={short_repr(lags_ns)}: must be one or more time constants >= 0")
    ok = (t > s[0] - search_ns) & (t < e[-1] + search_ns)
    order = np.argsort(t[ok], kind="stable")
    t, y = t[ok][order], y[ok][order]
    if len(t) > max_logs:
        pick = np.linspace(0, len(t) - 1, max_logs).astype(np.int64)
        t, y = t[pick], y[pick]
    if len(t) < 5 * logs_per_column:
        raise ValueError(f"t_ns: {len(t)} logs over the trace's kernels; at least {5 * logs_per_column} are needed "
                         f"to align them ({logs_per_column} per regression column, five columns at the least)")
    group, n_groups, pooled = kernel_groups(s, e, k, len(t) // logs_per_column, max_signatures)
    near = _near_logs(s, e, t, search_ns, 40.0 * float(taus.max()))
    design = RegressionDesign(s[near], e[near], group[near], n_groups)
    fit = _Fit(s, e, group, n_groups, pooled, design, near, search_ns, step_ns, confidence, taus,
               logs_per_column, coarse_logs)
    if overlay is None:
        return _offset(t, y, fit)
    # The offset is measured twice on the same logs (below): the second fits reuse the first's power-free part.
    design.keep_fits = True
    # Logs taken while an overlay (communication) ran draw its level on top of the kernels': left in, it is
    # scatter the kernels' quarters do not explain, and a loop whose kernels run alone only outside it fit best
    # one GEMM off (+409 us on exact clocks, a false mismatch). The offset is measured first with the level
    # left in (it only adds scatter: +8 us there), the level fitted with the logs placed by it and taken off,
    # and the offset measured again. A level fitted where a mismatch misplaces the logs is no level (-216 W
    # for 60 W at -2 ms), so it is never fitted at the map's placement before the logs have placed themselves.
    first = _offset(t, y, fit)
    placed_at = first.offset_ns if first.explained and not first.at_edge else 0.0
    level = communication_level(t + placed_at, y, np.concatenate([s, overlay[0]]), np.concatenate([e, overlay[1]]),
                                np.concatenate([k, np.zeros(len(overlay[0]), dtype=k.dtype)]),
                                np.arange(len(s) + len(overlay[0])) >= len(s)).level_w
    if not math.isfinite(level):
        return first
    return _offset(t, y - level * running(t + placed_at, overlay[0], overlay[1]), fit)


class _Fit(NamedTuple):
    """What every fit of one set of logs against the kernels shares: the kernels, their groups and design, and
    the search's settings."""

    s: np.ndarray
    e: np.ndarray
    group: np.ndarray
    n_groups: int
    pooled: int
    design: RegressionDesign
    near: np.ndarray
    search_ns: float
    step_ns: float
    confidence: float
    taus: np.ndarray
    logs_per_column: int
    coarse_logs: int


def _offset(t: np.ndarray, y: np.ndarray, fit: _Fit) -> LogAlignment:
    """The offset of the logs ``(t, y)`` (sorted) against the kernels: the fine search around the map's placement,
    and the scan for a far one (:func:`align_logs_to_trace`)."""
    s, e, group, n_groups, pooled, design, near, search_ns, step_ns, confidence, taus, logs_per_column, \
        coarse_logs = fit
    grid = np.arange(-search_ns, search_ns + 0.5 * step_ns, step_ns)
    yc = y - float(np.mean(y))
    prof = _Profile(design, t, yc, grid, taus, coarse_logs)
    # The residual's degrees of freedom: the logs less the columns, the shift and the lag.
    nu = len(t) - design.p - 2
    crit = 1.0 + float(stats.f.ppf(confidence, 1, nu)) / nu
    # Whether the kernels explain the logs at all, at the best of the shifts tried: an F test of the
    # columns against the mean alone, at a level divided by the shifts searched (the best of many shifts
    # of noise explains a little by chance). Without it the profile's chance minimum gave a tight offset.
    df1, df2 = max(design.p - 1, 1), max(nu, 1)
    explained = 1.0 / (1.0 + float(stats.f.ppf(1.0 - 0.01 / len(grid), df1, df2)) * df1 / df2)
    # The map's own placement rejected at the same strict level: one more parameter (the shift), searched.
    strict = 1.0 + float(stats.f.ppf(1.0 - 0.01 / len(grid), 1, df2)) / df2
    placed, near_min = _result(prof, (crit, strict), confidence, pooled, float(yc @ yc), explained)
    # Every shift at which the logs still meet the kernels, scanned at once: a mismatch of milliseconds puts
    # the best shift far outside the fine search, and a loop's periodic kernels make some shift inside it fit
    # no worse than the map's own placement (2.5 ms: no warning, a GEMM 28 % low). The scan proposes; the
    # proposal is fitted finely and must beat the best near shift at the strict level over the shifts scanned.
    # The smoothed statistic explains less than the fine one, so the proposal needs only half the strict margin.
    scan = scan_offsets(t, yc, s, e, group, n_groups, 5 * logs_per_column)
    strict_far = 1.0 + float(stats.f.ppf(1.0 - 0.01 / len(scan.shifts), 1, df2)) / df2
    candidates = far_candidates(scan, search_ns, 0.5 * (1.0 + strict_far))
    far_design = RegressionDesign(s, e, group, n_groups) if candidates and not np.all(near) else design
    # A proposal is off by at most the scan's cell: refined within that (and the fine search's own width) of
    # it, not across a search widened to a coarse map's bound, three times over.
    half = min(search_ns, max(FINE_SEARCH_NS, 2.0 * scan.cell_ns))
    far_grid = grid[np.abs(grid) <= half + 0.5 * step_ns]
    best: Optional[tuple[float, LogAlignment]] = None
    for c in candidates:
        far_prof = _Profile(far_design, t, yc, step_ns * round(c / step_ns) + far_grid, taus, coarse_logs)
        far, far_min = _result(far_prof, (crit, strict_far), confidence, pooled, float(yc @ yc), explained)
        if far.explained and near_min > strict_far * far_min and (best is None or far_min < best[0]):
            best = far_min, far
    if best is None:
        return placed
    far = best[1]
    reach = float(np.max(np.abs(scan.shifts[np.isfinite(scan.rss)])))
    return dataclasses.replace(far, far=True, zero_rejected=True, search_ns=max(reach, search_ns))


def _result(prof: _Profile, crits: tuple[float, float], confidence: float, pooled: int, ss_total: float,
            explained: float) -> tuple[LogAlignment, float]:
    """The minimum, refined by a parabola, and the connected run of accepted shifts around it; and its residual.

    ``explained``: the residual share of ``ss_total`` below which the kernels explain the logs (an F
    test's bound); above it the offset is not determined, and is flagged as at the edge.
    """
    crit, strict = crits
    grid, m = prof.grid, len(prof.grid)
    lo, hi, j = _fine_window(prof, crit)
    ss = prof.bests(lo, hi)
    ss_min = max(float(ss[j - lo]), 1e-300)
    lag = float(prof.taus[int(np.nanargmin(prof.at(j)))])
    at_edge = j in (0, m - 1)
    best = float(grid[j])
    step = float(grid[1] - grid[0])
    if not at_edge:
        # A parabola through the minimum and its neighbours.
        a, b, c = ss[j - 1 - lo], ss[j - lo], ss[j + 1 - lo]
        den = a - 2 * b + c
        if den > 0:
            best += 0.5 * step * (a - c) / den
    inside = ss / ss_min <= crit
    lo_j, hi_j = j, j
    while lo_j > lo and inside[lo_j - 1 - lo]:
        lo_j -= 1
    while hi_j < hi and inside[hi_j + 1 - lo]:
        hi_j += 1
    # An interval that reaches the search range's edge leaves the offset undetermined within it: the
    # logs do not place themselves (a clock off by more than the range, or power that ignores the
    # kernels); a minimum inside such a flat profile is chance, so it counts as at the edge too.
    determined = ss_min <= explained * ss_total
    at_edge = at_edge or lo_j == 0 or hi_j == m - 1 or not determined
    ss0 = float(np.nanmin(prof.shifted(0.0)))
    return LogAlignment(offset_ns=best, low_ns=float(grid[lo_j]) - 0.5 * step, high_ns=float(grid[hi_j]) + 0.5 * step,
                        confidence=confidence, ss_ratio=ss_min / ss0 if ss0 > 0 else math.nan,
                        logs=len(prof.sets[True][0]), at_edge=at_edge, lag_ns=lag, columns=prof.design.p,
                        pooled=pooled, explained=bool(determined), search_ns=float(grid[-1]),
                        zero_rejected=bool(ss0 > strict * ss_min)), ss_min


class ClockMismatchWarning(FingravWarning):
    """The logs sit elsewhere on the trace's timeline than the clock map puts them, beyond the map's bound.

    Issued by :func:`~fingrav_native.profile_trace` (and recorded in
    ``TraceProfile.warnings``) when :func:`align_logs_to_trace` finds the
    logs' offset outside the map's error bound, at the edge of its search
    range, or finds that the kernels do not explain the logs at all: a trace
    from another host, an NTP step between trace and capture, a wrong
    ``baseTimeNanoseconds``, or logs of another run. Per-kernel figures of such
    a table are not trustworthy.
    """


#: Slack beyond the map's bound before a measured offset is a mismatch: the measurement's own resolution.
#: The offset is fitted beside a power lag chosen on a grid 5 us apart (``lags_ns``), and the two trade
#: microseconds: exactly placed simulated logs measured -2.8 us (95 % -4.5 to -1.5) on one loop and +1.4 us
#: (0.5 to 1.5) on another. A smaller mismatch is not found (5 us cost a 25 us kernel 6 % of its energy).
MISMATCH_SLACK_NS = 5_000.0

#: For an averaging sensor's logs (``LogAlignment.window_ns`` > 0) the slack is at least this, and at least
#: :data:`WINDOW_SLACK_SHARE` of the window: the busy share of a window models neither the power's shape
#: inside a kernel nor its relaxation after one, and a sensor's delay (``SensorModel.delay_ns``) trades
#: with the offset one for one. Exact logs of the simulator's loop measured -14 to -26 us under 1 ms and
#: 5 ms windows (20 seeds each, ``bench/insitu_window_offset_bench.py``) and -19 to -21 us under a 1 ms filter.
WINDOW_SLACK_NS = 50_000.0
WINDOW_SLACK_SHARE = 0.05


def mismatch_slack_ns(alignment: LogAlignment) -> float:
    """How far beyond the map's bound a measured offset may lie before it is a mismatch: its resolution."""
    if alignment.window_ns > 0:
        return max(WINDOW_SLACK_NS, WINDOW_SLACK_SHARE * alignment.window_ns)
    return MISMATCH_SLACK_NS


def offset_disagreement(alignment: LogAlignment, bound_ns: float) -> str:
    """What the measured offset says about the clock map, in words; empty where they agree.

    Parameters
    ----------
    alignment : LogAlignment
        As :func:`align_logs_to_trace` returns it (not applied).
    bound_ns : float
        The clock map's error bound over the logs (``error_bound_at``;
        ``inf`` where the map has none).

    Returns
    -------
    str
        Empty, or a sentence naming the disagreement and what commonly causes
        it.

    Notes
    -----
    Paper Section IV-A, step 2 places every log through the calibrated
    CPU-GPU clock map and trusts its bound; a trace and a capture from
    different clocks break that silently. Three signs, in this order: the
    kernels explain nothing of the logs (the offset is far outside the search
    or the logs are not of these kernels); the best offset or its interval
    reaches the search's edge while the kernels do explain them (a mismatch
    beyond ``search_ns``, where the map's bound is narrower than the search:
    a coarser map, such as a tool's millisecond wall-clock stamps, may put
    the logs anywhere within its bound, so its edge is no mismatch); the interval excludes the map's bound plus
    :func:`mismatch_slack_ns` (:data:`MISMATCH_SLACK_NS` for instantaneous
    logs, a window's :data:`WINDOW_SLACK_SHARE` and at least
    :data:`WINDOW_SLACK_NS` for averaging ones). The last two only where the logs reject the
    map's placement at the strict level (``LogAlignment.zero_rejected``):
    on a real trace's 14 kernels, 87 logs and concurrent streams the best
    shift sat at the edge with the map's placement rejected only at 5 %.
    """
    a = alignment
    causes = ("a trace from another host, a clock step (NTP) between trace and capture, a wrong "
              "baseTimeNanoseconds, or logs of another run")
    reach = f"+-{a.search_ns / 1e3:.0f} us" if math.isfinite(a.search_ns) else "the search range"
    windowed = a.window_ns > 0
    if windowed:
        causes += ", or a sensor model whose window or delay_ns is wrong for these logs"
    if not a.explained:
        misfit = "" if windowed else ", or a sensor that averages: declare it with sensor="
        return (f"the kernels explain no more of the power logs' scatter than chance at any offset within {reach} "
                f"of the clock map: the logs do not follow these kernels ({causes}{misfit}); the per-kernel "
                "figures rest on the map alone")
    if not a.zero_rejected:
        return ""
    if a.at_edge and not (math.isfinite(a.search_ns) and a.search_ns <= bound_ns):
        return (f"the power logs fit the kernels best at the edge of the offsets searched ({reach}, best "
                f"{a.offset_ns / 1e3:+.1f} us): the trace's and the capture's clocks disagree by more than that "
                f"({causes}); the per-kernel figures are not trustworthy")
    slack = mismatch_slack_ns(a)
    limit = (bound_ns if math.isfinite(bound_ns) else math.inf) + slack
    # A map coarser than the search (a tool's millisecond wall-clock stamps): the edge lies inside its bound.
    if not a.at_edge and (a.low_ns > limit or a.high_ns < -limit):
        where = (f"measured through their {a.window_ns / 1e6:.3g} ms responses, beyond its bound of +-{bound_ns / 1e3:.1f} "
                 f"us and the measurement's {slack / 1e3:.0f} us resolution" if windowed else
                 f"beyond its bound of +-{bound_ns / 1e3:.1f} us")
        todo = ("the offset of an averaging sensor's logs is reported, never applied: correct the clock map or "
                "the sensor model, or re-record trace and capture together" if windowed else
                "pass align=True to apply the measured offset, or re-record trace and capture together")
        return (f"the power logs sit {a.offset_ns / 1e3:+.1f} us ({a.low_ns / 1e3:+.1f} to {a.high_ns / 1e3:+.1f}, "
                f"{100 * a.confidence:.0f} %) from where the clock map puts them, {where} ({causes}); the per-kernel "
                f"figures are not trustworthy; {todo}")
    return ""
