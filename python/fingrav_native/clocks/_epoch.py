"""The epoch map: the host clock (CLOCK_MONOTONIC_RAW) onto the Unix epoch (CLOCK_REALTIME), with its steps.

An application's tracer stamps on CLOCK_REALTIME and the sampler on the host clock; the epoch
map, fitted on bracketed reads of the two as the device clock maps are, joins them. The same
fit maps the host clock onto the other host clocks a tracer may stamp on (:data:`BRACKETED_CLOCKS`):
rocprofv3 stamps on CLOCK_BOOTTIME (rocprofiler-sdk ``source/lib/common/utility.hpp``:
``default_clock_id = CLOCK_BOOTTIME``), and CLOCK_MONOTONIC is the other steady clock tools use.
Both are slewed by NTP as CLOCK_REALTIME is, and CLOCK_BOOTTIME also counts the time the host
spent suspended, which the raw clock does not: a suspend during a capture is a step of
CLOCK_BOOTTIME against the raw clock, found and handled as a realtime step is.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import number_array, numbers, positive_number, readonly
from fingrav_native._errors import FingravWarning
from fingrav_native.clocks._maps import MIN_BRACKETS, ClockMap, ClockMapLike, PiecewiseClockMap
from fingrav_native.clocks._runs import fit_device_map
from fingrav_native.clocks._twosided import fit_clock_map

# Captures whose brackets span less than this fit an offset only: a rate
# fitted over a few ms of ~100 ns brackets would be mostly noise.
_MIN_SKEW_SPAN_NS = 50_000_000


# Without a fitted rate, realtime may run this far from the raw clock (NTP's
# largest slew, 500 ppm, plus crystal error): it grows the bound away from the reads.
_PRIOR_DRIFT_PPM = 500.0


# Knots of the chords that stand for a piecewise fit: 50 ms apart, the chords
# stay within ~1 ns of the smooth blend for skews changing by ppm per second.
_KNOT_SPACING_NS = 50_000_000


# A realtime rate may wander this much between bursts without being a step
# (NTP frequency corrections are sub-ppm; 50 ppm leaves a wide margin).
_RATE_TOLERANCE = 50e-6


ArrayLike = Union[npt.ArrayLike, int, float]


#: A realtime -> host-clock fit of one step-free stretch.
_Fit = Union[ClockMap, PiecewiseClockMap]


class ClockStepWarning(FingravWarning):
    """A bracketed clock stepped against the host clock while power was captured.

    CLOCK_REALTIME steps with an NTP step, settimeofday or a resumed VM;
    CLOCK_BOOTTIME with a suspend (it counts the time asleep, the raw host
    clock does not).

    The epoch map is then fitted on each side of the step separately (see
    :func:`fit_epoch_map`); times inside the step's gap carry its size in
    their error bound.
    """


@dataclass(frozen=True)
class ClockStep:
    """One step of a bracketed clock (CLOCK_REALTIME, CLOCK_BOOTTIME, ...) found in its brackets.

    Attributes
    ----------
    before_mono_ns, after_mono_ns : int
        Host time (CLOCK_MONOTONIC_RAW) of the last read before the step and
        the first read after it: the step happened in between.
    size_ns : float
        How far the clock jumped, net of its drift (positive: forward).
    unused_brackets : int
        Brackets inside the gap, on neither side for sure, left out of the fit.
    """

    before_mono_ns: int
    after_mono_ns: int
    size_ns: float
    unused_brackets: int


@dataclass(frozen=True)
class _Segment:
    """One step-free stretch of a map: chords through integer knots, and what bounds its error.

    ``x`` are knot ticks (int64, strictly increasing); the map's value at
    ``x[k]`` is the epoch time ``y[k] + yf[k]`` ns (``y`` int64, ``yf`` a
    small float), and between knots it is the chord of slope ``slope[k]``.
    """

    x: np.ndarray
    y: np.ndarray
    yf: np.ndarray
    slope: np.ndarray
    # The realtime -> host-clock fit (ClockMap or PiecewiseClockMap), None for realtime-stamped ticks.
    fit: Optional[ClockMapLike]
    mono_lo: int  # host-time span of the segment's brackets
    mono_hi: int
    epoch_offset: int  # epoch minus host time at the segment's centre (to turn an epoch time into host time)
    step_before_ns: float  # size of the step before it (0: none)
    step_after_ns: float
    chord_err_ns: float  # how far the chords may be from the smooth piecewise fit


def _chords(x: np.ndarray, y: np.ndarray, yf: np.ndarray) -> np.ndarray:
    """Slopes between consecutive knots (epoch ns per tick), from exact integer differences."""
    dy = (y[1:] - y[:-1]).astype(np.float64) + (yf[1:] - yf[:-1])
    return np.asarray(dy / (x[1:] - x[:-1]).astype(np.float64), dtype=np.float64)


def _split_ticks(values: ArrayLike, name: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """``values`` as an int64 part plus a float remainder (exact for integers), and whether it was a scalar."""
    arr, scalar = number_array(values, name)
    if np.issubdtype(arr.dtype, np.bool_):
        raise ValueError(f"{name}: expected ticks (numbers), got booleans")
    if np.issubdtype(arr.dtype, np.unsignedinteger):
        if arr.size and int(arr.max()) >= 2**63:
            raise ValueError(f"{name}: values must be below 2**63 (got {int(arr.max())})")
        return arr.astype(np.int64), np.zeros(arr.shape), scalar
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64), np.zeros(arr.shape), scalar
    if np.issubdtype(arr.dtype, np.floating):
        f = arr.astype(np.float64)
        if not np.isfinite(f).all():
            raise ValueError(f"{name}: values must be finite")
        base = np.rint(f)
        return base.astype(np.int64), f - base, scalar
    raise ValueError(f"{name}: expected numbers, got dtype {arr.dtype}")


def _eval_segment(seg: _Segment, base: np.ndarray, delta: np.ndarray, origin: int) -> np.ndarray:
    """Epoch ns minus ``origin`` at ticks ``base + delta`` on one segment; large parts in int64."""
    pos = base + np.rint(delta).astype(np.int64)
    j = np.clip(np.searchsorted(seg.x, pos, side="right") - 1, 0, len(seg.x) - 2)
    # Epoch-magnitude numbers meet only in the int64 subtractions; what
    # reaches a float is a difference (a few seconds at most, usually).
    head = (seg.y[j] - np.int64(origin)).astype(np.float64) + seg.yf[j]
    return np.asarray(head + seg.slope[j] * ((base - seg.x[j]).astype(np.float64) + delta), dtype=np.float64)


class EpochMap:
    """A clock map from some clock's ticks onto Unix-epoch (CLOCK_REALTIME) nanoseconds, or another host clock's.

    Made by :func:`fit_epoch_map` (the host clock, CLOCK_MONOTONIC_RAW, from
    epoch brackets) or by :meth:`PowerCapture.logger_map` (a power logger's
    timestamps: logger ticks -> host clock -> epoch). Frozen; plain values
    only.

    It is a chain of chords through integer knots ``(ticks, epoch ns)``, so
    every large number stays an integer: one chord per segment for a linear
    fit, chords 50 ms apart standing for a piecewise fit (within ~1 ns of
    it). A CLOCK_REALTIME step splits the map into segments, each fitted on
    its own brackets (:class:`ClockStepWarning`).

    Attributes
    ----------
    clock : str
        The clock it maps onto: ``"CLOCK_REALTIME"`` (the Unix epoch, the
        default), ``"CLOCK_BOOTTIME"`` or ``"CLOCK_MONOTONIC"``
        (:data:`BRACKETED_CLOCKS`). "Epoch" below means this clock.
    clock_domain : str
        What the ticks are: ``"CLOCK_MONOTONIC_RAW"``, or a power source's
        clock domain (``"sim-device"``, ``"nvml-host-us"``, ...).
    tick_ns : float
        Nominal length of one tick, ns.
    offset_ns : int
        ``clock - CLOCK_MONOTONIC_RAW`` at the centre of the
        brackets (of the first segment when the clock stepped), ns.
    drift_ppm : float
        How fast ``clock`` runs against CLOCK_MONOTONIC_RAW, ppm
        (positive: realtime runs fast; NTP's slew plus the raw clock's
        crystal error), over the first segment.
    residual_spread_ns : float
        Spread (max - min) of the tight brackets' residuals from the map, ns:
        how well the map follows the reads.
    n_brackets : int
        Epoch brackets the map was fitted from (all given).
    steps : tuple of ClockStep
        Steps of ``clock`` found (empty normally).
    logger : ClockMap or None
        For a logger map: the logger ticks -> host clock map composed with
        the epoch map (None for the host clock itself and for sources that
        stamp with CLOCK_REALTIME already).
    """

    def __init__(
        self,
        *,
        clock_domain: str,
        tick_ns: float,
        segments: Sequence[_Segment],
        bounds: np.ndarray,
        offset_ns: int,
        drift_ppm: float,
        residual_spread_ns: float,
        n_brackets: int,
        steps: tuple[ClockStep, ...],
        logger: Optional[ClockMap] = None,
        constant_bound_ns: Optional[float] = None,
        clock: str = "CLOCK_REALTIME",
    ) -> None:
        if not segments:
            raise ValueError("segments: an epoch map needs at least one segment")
        if len(bounds) != len(segments) - 1:
            raise ValueError(f"bounds: {len(bounds)} given for {len(segments)} segments")
        self._segments = tuple(segments)
        self._bounds = readonly(np.asarray(bounds, dtype=np.int64))
        self.clock_domain = str(clock_domain)
        self.tick_ns = float(tick_ns)
        self.offset_ns = int(offset_ns)
        self.drift_ppm = float(drift_ppm)
        self.residual_spread_ns = float(residual_spread_ns)
        self.n_brackets = int(n_brackets)
        self.steps = tuple(steps)
        self.logger = logger
        self._constant_bound = constant_bound_ns
        self.clock = str(clock)

    def __repr__(self) -> str:
        return (f"EpochMap(clock={self.clock!r}, clock_domain={self.clock_domain!r}, offset_ns={self.offset_ns}, "
                f"drift_ppm={self.drift_ppm:.3f}, residual_spread_ns={self.residual_spread_ns:.0f}, "
                f"n_brackets={self.n_brackets}, steps={len(self.steps)})")

    @property
    def segments(self) -> int:
        """Number of step-free segments (1 unless CLOCK_REALTIME stepped)."""
        return len(self._segments)

    @property
    def fits(self) -> tuple[Optional[ClockMapLike], ...]:
        """The realtime -> host-clock fits behind each segment (ClockMap or PiecewiseClockMap)."""
        return tuple(s.fit for s in self._segments)

    # ------------------------------------------------------------------ maps
    def _relative(self, ticks: ArrayLike, origin: int, name: str) -> tuple[np.ndarray, bool]:
        base, delta, scalar = _split_ticks(ticks, name)
        base, delta = np.atleast_1d(base), np.atleast_1d(delta)
        if len(self._segments) == 1:
            return _eval_segment(self._segments[0], base, delta, origin), scalar
        which = np.searchsorted(self._bounds, base + np.rint(delta).astype(np.int64), side="right")
        out = np.empty(base.shape, dtype=np.float64)
        for k, seg in enumerate(self._segments):
            m = which == k
            if m.any():
                out[m] = _eval_segment(seg, base[m], delta[m], origin)
        return out, scalar

    def to_host_relative(self, ticks: ArrayLike, origin_ns: int) -> Any:
        """Epoch time of ``ticks`` minus an integer origin, float64 ns, exact to well under 1 ns.

        Parameters
        ----------
        ticks : int or array_like of int
            Times in this map's clock (int64; floats are accepted but lose
            precision themselves above 2**53).
        origin_ns : int
            An epoch time in ns, e.g. a Kineto trace's
            ``baseTimeNanoseconds`` or the first kernel's start.

        Returns
        -------
        float or numpy.ndarray
            ``epoch(ticks) - origin_ns``. No epoch-magnitude number passes
            through a float: the map's integer anchor minus the origin is
            taken in int64, and only that difference and the tick distance
            from the anchor are floats. Times within 2**53 ns (104 days) of
            the origin come back resolved to the map's own precision.

        Raises
        ------
        ValueError
            ``origin_ns`` not an integer; ticks that are not numbers.
        """
        if isinstance(origin_ns, (bool, np.bool_)) or not isinstance(origin_ns, (int, np.integer)):
            raise ValueError(f"origin_ns={origin_ns!r}: must be an integer (epoch ns); a float at "
                             "epoch magnitude resolves only 256 ns")
        out, scalar = self._relative(ticks, int(origin_ns), "ticks")
        return float(out[0]) if scalar else out

    def to_host(self, ticks: ArrayLike) -> Any:
        """Epoch time of ``ticks`` as float64 ns.

        A float64 near 1.8e18 ns resolves only 256 ns: fine for plotting or
        a rough look, not for placing sub-millisecond kernels. Use
        :meth:`to_host_relative` (relative to an integer origin) or
        :meth:`to_host_ns` (int64) for that.
        """
        origin = int(self._segments[0].y[0])
        out, scalar = self._relative(ticks, origin, "ticks")
        val = out + float(origin)
        return float(val[0]) if scalar else val

    def to_host_ns(self, ticks: ArrayLike) -> Any:
        """Epoch time of ``ticks`` rounded to int64 ns (exact arithmetic; the int stays an int)."""
        origin = int(self._segments[0].y[0])
        out, scalar = self._relative(ticks, origin, "ticks")
        val = np.rint(out).astype(np.int64) + np.int64(origin)
        return int(val[0]) if scalar else val

    def error_bound_at(self, epoch_ns: ArrayLike) -> Any:
        """Bound on ``|to_host - truth|`` at epoch time ``epoch_ns``, ns.

        The sum of the bounds of the fits the map chains: the epoch fit's
        (asymmetry of the brackets, residual jitter, drift uncertainty
        growing away from the brackets, see
        :meth:`fingrav_native.clocks.ClockMap.error_bound_at`), the
        logger fit's for a logger map (its one-sided bias is not in it: see
        :func:`~fingrav_native.clocks.fit_one_sided_clock_map`), and
        the step size inside a CLOCK_REALTIME step's gap. For a source that
        stamps with CLOCK_REALTIME already (NVML), one tick (the stamp's
        truncation).
        """
        base, delta, scalar = _split_ticks(epoch_ns, "epoch_ns")
        base, delta = np.atleast_1d(base), np.atleast_1d(delta)
        if self._constant_bound is not None:
            out = np.full(base.shape, self._constant_bound)
            return float(out[0]) if scalar else out
        segs = self._segments
        # Which segment's host-time range an epoch time falls in depends on
        # the segment (a step moves the epoch under the host clock): try each.
        bounds = np.full((len(segs),) + base.shape, np.inf)
        inside = np.zeros((len(segs),) + base.shape, dtype=bool)
        for k, seg in enumerate(segs):
            mono = (base - np.int64(seg.epoch_offset)).astype(np.float64) + delta
            # Both neighbours claim a step's whole gap (either side may hold
            # the time): the larger bound, the step's, wins there.
            lo = -math.inf if k == 0 else float(segs[k - 1].mono_hi)
            hi = math.inf if k == len(segs) - 1 else float(segs[k + 1].mono_lo)
            inside[k] = (mono >= lo) & (mono <= hi)
            assert seg.fit is not None  # only realtime-stamped maps have none, and they have a constant bound
            b = np.asarray(seg.fit.error_bound_at(mono), dtype=np.float64) + seg.chord_err_ns
            if self.logger is not None:
                b = b + np.asarray(self.logger.error_bound_at(mono), dtype=np.float64)
            # Inside a step's gap it is not known which side a time is on.
            b = b + np.where(mono > seg.mono_hi, abs(seg.step_after_ns), 0.0)
            b = b + np.where(mono < seg.mono_lo, abs(seg.step_before_ns), 0.0)
            bounds[k] = b
        hit = np.where(inside, bounds, -np.inf).max(axis=0)
        # An epoch time no segment reaches lies in a forward step's gap: the
        # nearest segment's bound (its step term included) covers it.
        out = np.where(np.isfinite(hit), hit, bounds.min(axis=0))
        return float(out[0]) if scalar else out


def _int_brackets(brackets: npt.ArrayLike, name: str, clock: str = "CLOCK_REALTIME") -> np.ndarray:
    arr = numbers(brackets, name)  # uint64 reads past 2**63 refused there, not wrapped to negative times
    cols = f"(mono_raw_before_ns, {clock} ns, mono_raw_after_ns)"
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: must be an int64 array of {cols}; got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"{name}: expected shape (n, 3) of {cols}; got {arr.shape}")
    return arr.astype(np.int64)


def _find_steps(arr: np.ndarray, threshold_ns: float) -> tuple[list[tuple[int, int]], float]:
    """Where CLOCK_REALTIME stepped in brackets sorted by host time: (last index before, first after) pairs.

    Each bracket pins ``realtime - mono`` (the offset) to within its half
    width. Between consecutive reads the offset may change by the drift
    rate (the median over reads more than 1 ms apart) times the time between
    them, give or take ``_RATE_TOLERANCE``; a change beyond that plus the two
    half widths plus ``threshold_ns``, or realtime going back, is a step.
    Pairs are checked among all brackets and among the tight ones only, so a
    step next to a preempted (wide) read is still seen.
    """
    mb, rt, ma = arr[:, 0], arr[:, 1], arr[:, 2]
    w = (ma - mb).astype(np.float64)
    best = float(w.min())
    # Offsets relative to the first read: int64 differences first (exact).
    d = rt - mb
    off = (d - d[0]).astype(np.float64) - 0.5 * w
    t = (mb - mb[0]).astype(np.float64)
    tight = np.flatnonzero(w <= max(2.0 * best, best + 1000.0))

    def pair_excess(idx: np.ndarray, rate: float) -> np.ndarray:
        dt = np.diff(t[idx])
        do = np.diff(off[idx])
        allow = 0.5 * w[idx][:-1] + 0.5 * w[idx][1:] + threshold_ns + _RATE_TOLERANCE * dt
        return np.asarray(np.abs(do - rate * dt) - allow, dtype=np.float64)

    rate = 0.0
    if tight.size >= 2:
        dt = np.diff(t[tight])
        far = dt > 1e6
        if far.any():
            rate = float(np.median(np.diff(off[tight])[far] / dt[far]))
    pairs: list[tuple[int, int]] = []
    if arr.shape[0] >= 2:
        ex = pair_excess(np.arange(arr.shape[0]), rate)
        back = np.diff(rt) < 0  # realtime went back between two reads in sequence
        pairs += [(int(i), int(i) + 1) for i in np.flatnonzero((ex > 0) | back)]
    if tight.size >= 2:
        ex = pair_excess(tight, rate)
        pairs += [(int(tight[k]), int(tight[k + 1])) for k in np.flatnonzero(ex > 0)]
    # One step seen by both checks (or by several pairs in its gap) is one interval.
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(set(pairs)):
        if merged and lo < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged, rate


def _curve_points(fit: _Fit, realtime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points on a realtime -> host fit as (integer host ns, realtime's fractional correction there)."""
    if isinstance(fit, ClockMap):
        # Exact: the line's own integer references and small float terms.
        m_rel = fit.offset_ns + fit.ns_per_tick * (realtime - np.int64(fit.device_ref)).astype(np.float64)
        m_int = np.rint(m_rel)
        return (m_int.astype(np.int64) + np.int64(fit.host_ref),
                np.asarray((m_int - m_rel) / fit.ns_per_tick, dtype=np.float64))
    # A piecewise fit gives integer host ns exactly rounded (0.5 ns).
    return np.asarray(fit.to_host_ns(realtime), dtype=np.int64), np.zeros(realtime.shape)


def _fit_segment(seg: np.ndarray) -> tuple[_Fit, float]:
    """The realtime -> host-clock fit of one step-free run of brackets, and its chord error."""
    n = seg.shape[0]
    span = int(seg[-1, 0] - seg[0, 0])
    if n >= MIN_BRACKETS and span >= _MIN_SKEW_SPAN_NS:
        # The realtime clock plays the device clock (1 ns ticks): the read sat
        # between two host reads. Long captures get a piecewise fit (method.timeline).
        fit = fit_device_map(seg, 1.0)
        return fit, (1.0 if isinstance(fit, PiecewiseClockMap) else 0.0)
    return fit_clock_map(seg, tick_ns=1.0, fit_skew=False, prior_skew_ppm=_PRIOR_DRIFT_PPM,
                         min_reads=max(3, min(n, MIN_BRACKETS))), 0.0


def fit_epoch_map(brackets: npt.ArrayLike, *, step_threshold_ns: float = 20_000.0,
                  clock: str = "CLOCK_REALTIME") -> EpochMap:
    """Fit the map from the host clock (CLOCK_MONOTONIC_RAW) onto the Unix epoch (CLOCK_REALTIME) or another clock.

    Parameters
    ----------
    brackets : (n, 3) int64 array_like
        Rows ``(mono_raw_before_ns, realtime_ns, mono_raw_after_ns)`` from
        ``_core.read_epoch_brackets``, any order, at least 3 (for another
        ``clock``, that clock's read in the middle column).
    step_threshold_ns : float
        A change of the realtime offset beyond the brackets' widths, the
        drift and this much is a CLOCK_REALTIME step (default 20 us: NTP
        steps are 128 ms or more, settimeofday anything; slews are rates).
    clock : str
        The clock read between the host reads (:data:`BRACKETED_CLOCKS`):
        what the map maps onto, and what its messages name.

    Returns
    -------
    EpochMap
        ``to_host(mono_ns)`` gives epoch ns (``clock`` ns).

    Raises
    ------
    ValueError
        Naming the argument: not an ``(n, 3)`` integer array, fewer than 3
        rows, ``mono_after < mono_before``, a bad threshold, or no segment
        between steps with 3 brackets.

    Warns
    -----
    ClockStepWarning
        ``clock`` stepped (CLOCK_BOOTTIME: the host was suspended), or
        wandered beyond ``step_threshold_ns`` from a smooth fit (a fast slew).

    Notes
    -----
    The paper's Section IV-A syncs the GPU clock to the CPU's with
    bracketed reads; here the same fits sync the two host clocks, because
    the application's tracer stamps on one and the sampler on the other.

    1. Sort by host time; find steps (see below) and split there.
    2. On each side, fit realtime -> host clock with the bracketed fits of
       :mod:`fingrav_native.clocks` (realtime in the device clock's
       role, 1 ns ticks: the realtime read happened inside its host
       bracket, which is what those fits model). Reads spanning 2 s or more
       get a piecewise fit that follows a changing NTP slew
       (:func:`fingrav_native.clocks.fit_device_map`); under 50 ms,
       an offset only, the rate bound by NTP's 500 ppm.
    3. Invert without inverting: points of the fitted curve, taken at
       integer realtimes, are exactly points of the host -> epoch map with
       the roles swapped, so the map is the chords through them (two for a
       line, every 50 ms for a piecewise fit), knots kept in int64.

    A step is a jump of ``realtime - mono`` between consecutive reads
    beyond their half widths, the drift rate (median over reads more than
    1 ms apart, +-50 ppm) times the time between them, and
    ``step_threshold_ns``; or realtime going back. The chosen handling is a
    warning, not an error: a tracer reads realtime as it is, so times on
    each side map with that side's fit, which is what the trace saw. The
    step's instant is only known to lie between the last read before and
    the first after it (at most ``brackets_every_s`` apart), so inside
    that gap the bound includes the step's size.
    """
    threshold = positive_number(step_threshold_ns, "step_threshold_ns")
    if clock not in BRACKETED_CLOCKS:
        raise ValueError(f"clock={clock!r}: must be one of {', '.join(BRACKETED_CLOCKS)}")
    arr = _sorted_epoch_brackets(brackets, clock)
    n = arr.shape[0]
    gaps, rate = _find_steps(arr, threshold)

    # Step 1: runs of brackets between steps.
    runs, steps = _split_at_steps(arr, gaps, rate)
    short = [k for k, r in enumerate(runs) if r.shape[0] < 3]
    if len(short) == len(runs):
        raise ValueError(f"brackets: {clock} stepped {len(steps)} time(s) and no stretch between steps "
                         "holds 3 brackets to fit; record brackets more often (brackets_per_read)")

    # Step 2: a fit per run.
    fits: list[tuple[int, np.ndarray, _Fit, float]] = []
    for k, run in enumerate(runs):
        if run.shape[0] < 3:
            continue  # too few reads to fit: the neighbours cover its time, with the step in their bound
        fit, chord_err = _fit_segment(run)
        fits.append((k, run, fit, chord_err))

    # Step 3: knots, and how far the tight reads sit from them.
    segs: list[_Segment] = []
    residual_worst = 0.0
    spreads: list[float] = []
    for idx, (k, run, fit, chord_err) in enumerate(fits):
        # Which steps border this segment (runs too short to fit merge into the gap).
        before = sum(s.size_ns for s in steps[fits[idx - 1][0]:k]) if idx > 0 else 0.0
        after = sum(s.size_ns for s in steps[k:fits[idx + 1][0]]) if idx + 1 < len(fits) else 0.0
        seg = _segment_of(run, fit, chord_err, float(before), float(after))
        segs.append(seg)
        spread, worst = _segment_residuals(seg, run)
        spreads.append(spread)
        residual_worst = max(residual_worst, worst)

    bounds = np.array([0.5 * (segs[i].mono_hi + segs[i + 1].mono_lo) for i in range(len(segs) - 1)])
    bounds_i = np.floor(bounds).astype(np.int64) if bounds.size else np.zeros(0, dtype=np.int64)
    first = segs[0]
    total_span = float(first.x[-1] - first.x[0])
    drift = ((float(first.y[-1] - first.y[0]) + float(first.yf[-1] - first.yf[0])) / total_span - 1.0) * 1e6
    unused = sum(s.unused_brackets for s in steps) + sum(runs[k].shape[0] for k in short)
    _warn_of_steps(steps, unused, residual_worst, threshold, clock)
    return EpochMap(
        clock_domain=HOST_CLOCK,
        tick_ns=1.0,
        segments=segs,
        bounds=bounds_i,
        offset_ns=first.epoch_offset,
        drift_ppm=drift,
        residual_spread_ns=max(spreads) if spreads else 0.0,
        n_brackets=n,
        steps=tuple(steps),
        clock=clock,
    )


def _sorted_epoch_brackets(brackets: npt.ArrayLike, clock: str = "CLOCK_REALTIME") -> np.ndarray:
    """Epoch brackets checked (at least 3, no negative width) and sorted by host time."""
    arr = _int_brackets(brackets, "brackets", clock)
    n = arr.shape[0]
    if n < 3:
        raise ValueError(f"brackets: {n} {clock} brackets given; at least 3 are needed")
    bad = np.flatnonzero(arr[:, 2] < arr[:, 0])
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"brackets: mono_raw_after < mono_raw_before in row {i} "
                         f"({int(arr[i, 2])} < {int(arr[i, 0])}); columns must be "
                         "(mono_raw_before_ns, realtime_ns, mono_raw_after_ns)")
    return arr[np.argsort(arr[:, 0], kind="stable")]


def _split_at_steps(arr: np.ndarray, gaps: list[tuple[int, int]],
                    rate: float) -> tuple[list[np.ndarray], list[ClockStep]]:
    """Step 1: the runs of brackets between steps, and each step (its size net of the drift ``rate``)."""
    runs: list[np.ndarray] = []
    steps: list[ClockStep] = []
    start = 0
    d = arr[:, 1] - arr[:, 0]
    for lo, hi in gaps:
        runs.append(arr[start:lo + 1])
        dt = float(arr[hi, 0] - arr[lo, 0])
        size = float(d[hi] - d[lo]) - rate * dt
        steps.append(ClockStep(int(arr[lo, 2]), int(arr[hi, 0]), size, hi - lo - 1))
        start = hi
    runs.append(arr[start:])
    return runs, steps


def _segment_of(run: np.ndarray, fit: _Fit, chord_err: float, step_before_ns: float,
                step_after_ns: float) -> _Segment:
    """Step 3 for one run: its fit as chords through integer knots, with the epoch offset at its centre.

    A line needs its two ends; a piecewise fit, chords every 50 ms.
    """
    r0, r1 = int(run[:, 1].min()), int(run[:, 1].max())
    if isinstance(fit, PiecewiseClockMap):
        count = max(2, int(math.ceil((r1 - r0) / _KNOT_SPACING_NS)) + 1)
        realtime = r0 + np.rint(np.linspace(0.0, float(r1 - r0), count)).astype(np.int64)
    else:
        realtime = np.array([r0, max(r1, r0 + 1_000_000)], dtype=np.int64)
    realtime = np.unique(realtime)
    x, yf = _curve_points(fit, realtime)
    y = realtime
    keep = np.concatenate([[True], np.diff(x) > 0])  # strictly increasing host knots
    x, y, yf = x[keep], y[keep], yf[keep]
    if x.size < 2:
        x = np.array([x[0], x[0] + 1_000_000_000], dtype=np.int64)
        y = np.array([y[0], y[0] + 1_000_000_000], dtype=np.int64)
        yf = np.array([yf[0], yf[0]])
    mono_lo, mono_hi = int(run[0, 0]), int(run[-1, 2])
    centre = (mono_lo + mono_hi) // 2
    seg = _Segment(x=readonly(x), y=readonly(y), yf=readonly(yf), slope=readonly(_chords(x, y, yf)),
                   fit=fit, mono_lo=mono_lo, mono_hi=mono_hi, epoch_offset=0,
                   step_before_ns=step_before_ns, step_after_ns=step_after_ns, chord_err_ns=chord_err)
    # The segment's offset at its centre (exact integers), for turning epoch times back into host time.
    at_centre = _eval_segment(seg, np.array([centre], dtype=np.int64), np.zeros(1), int(y[0]))[0]
    offset = int(y[0]) + int(np.rint(at_centre)) - centre
    return dataclasses.replace(seg, epoch_offset=offset)


def _segment_residuals(seg: _Segment, run: np.ndarray) -> tuple[float, float]:
    """Spread of the tight reads' residuals (realtime minus the map mid-bracket), and the worst beyond a half width."""
    w = run[:, 2] - run[:, 0]
    tight = w <= max(2 * int(w.min()), int(w.min()) + 1000)
    mid = run[tight, 0] + w[tight] // 2
    r0i = int(run[0, 1])
    res = (run[tight, 1] - np.int64(r0i)).astype(np.float64) - _eval_segment(
        seg, mid, 0.5 * (w[tight] % 2).astype(np.float64), r0i)
    spread = float(np.ptp(res)) if res.size else 0.0
    worst = float(np.max(np.abs(res) - 0.5 * w[tight])) if res.size else 0.0
    return spread, worst


def _warn_of_steps(steps: list[ClockStep], unused: int, residual_worst: float, threshold: float,
                   clock: str = "CLOCK_REALTIME") -> None:
    """ClockStepWarning when ``clock`` stepped, or wandered beyond the threshold from a smooth fit."""
    # stacklevel 3: the warning names the caller of fit_epoch_map, not this helper.
    if steps:
        where = "; ".join(f"{s.size_ns / 1e3:+.3f} us between host times {s.before_mono_ns} and {s.after_mono_ns} ns"
                          for s in steps)
        warnings.warn(
            f"{clock} stepped during the capture ({where}{'; the host was suspended' if clock == 'CLOCK_BOOTTIME' else ''}"
            f"): the map onto it is fitted on each side separately, so times map to what a tracer read at that "
            f"moment; {unused} bracket(s) "
            "inside the gaps were not used, and times there carry the step in their error bound",
            ClockStepWarning, stacklevel=3)
    elif residual_worst > threshold:
        warnings.warn(
            f"{clock} wandered {residual_worst / 1e3:.3f} us from a smooth fit of its offset "
            f"(step_threshold_ns={threshold:g}): a small step or a fast NTP slew; the map's error is that large "
            "near it", ClockStepWarning, stacklevel=3)


def identity_logger_map(ticks: np.ndarray, tick_ns: float) -> ClockMap:
    """The logger -> host map of a source stamped with the host clock itself (exact, no error)."""
    ref = int(ticks[len(ticks) // 2]) if len(ticks) else 0
    host_ref = int(round(ref * tick_ns))
    lo = int(round(int(ticks.min()) * tick_ns)) if len(ticks) else host_ref
    hi = int(round(int(ticks.max()) * tick_ns)) if len(ticks) else host_ref
    return ClockMap(method="identity", device_ref=ref, host_ref=host_ref, offset_ns=0.0, ns_per_tick=float(tick_ns),
                    tick_ns=float(tick_ns), host_begin_ns=lo, host_end_ns=hi, host_center_ns=host_ref,
                    n_used=int(len(ticks)), n_total=int(len(ticks)), best_rtt_ns=math.nan, asymmetry_ns=0.0,
                    residual_ns=0.0, skew_bound_ppm=0.0, wander_ppm_per_s=0.0, coverage=1.0)


def compose_logger_map(epoch: EpochMap, logger: ClockMap, clock_domain: str, tick_ns: float) -> EpochMap:
    """``epoch`` after ``logger`` (logger ticks -> host ns -> epoch ns), knots kept integer."""
    b = logger.ns_per_tick

    def ticks_at(mono: np.ndarray) -> np.ndarray:
        rel = ((mono - np.int64(logger.host_ref)).astype(np.float64) - logger.offset_ns) / b
        return np.int64(logger.device_ref) + np.rint(rel).astype(np.int64)

    segs: list[_Segment] = []
    for seg in epoch._segments:
        x = np.unique(ticks_at(seg.x))
        if x.size < 2:
            x = np.array([x[0], x[0] + max(1, int(round(1e9 / b)))], dtype=np.int64)
        # Host time of each tick knot exactly as logger's integer reference plus a small float.
        delta = logger.offset_ns + b * (x - np.int64(logger.device_ref)).astype(np.float64)
        origin = int(seg.y[0])
        v = _eval_segment(seg, np.full(x.shape, logger.host_ref, dtype=np.int64), delta, origin)
        fl = np.floor(v)
        y = fl.astype(np.int64) + np.int64(origin)
        yf = v - fl
        segs.append(dataclasses.replace(seg, x=readonly(x), y=readonly(y), yf=readonly(yf),
                                        slope=readonly(_chords(x, y, yf))))
    bounds = ticks_at(epoch._bounds) if len(epoch._bounds) else np.zeros(0, dtype=np.int64)
    return EpochMap(clock_domain=clock_domain, tick_ns=tick_ns, segments=segs, bounds=bounds,
                    offset_ns=epoch.offset_ns, drift_ppm=epoch.drift_ppm,
                    residual_spread_ns=epoch.residual_spread_ns, n_brackets=epoch.n_brackets, steps=epoch.steps,
                    logger=logger, clock=epoch.clock)


def realtime_stamped_map(epoch: EpochMap, ticks: np.ndarray, clock_domain: str, tick_ns: float) -> EpochMap:
    """The map of a source that stamps with CLOCK_REALTIME itself: ticks x tick, no fit."""
    t0 = int(ticks.min()) if len(ticks) else 0
    x = np.array([t0, t0 + max(1, int(round(1e9 / tick_ns)))], dtype=np.int64)
    if float(tick_ns).is_integer():
        y = x * np.int64(int(tick_ns))
        yf = np.zeros(2)
    else:
        exact = [int(v) * tick_ns for v in x]
        y = np.array([int(math.floor(e)) for e in exact], dtype=np.int64)
        yf = np.array([e - math.floor(e) for e in exact])
    seg = _Segment(x=readonly(x), y=readonly(y), yf=readonly(yf), slope=readonly(_chords(x, y, yf)), fit=None,
                   mono_lo=0, mono_hi=0, epoch_offset=epoch.offset_ns, step_before_ns=0.0, step_after_ns=0.0,
                   chord_err_ns=0.0)
    # The stamp truncates to a tick: the true instant is within one tick after it.
    return EpochMap(clock_domain=clock_domain, tick_ns=tick_ns, segments=[seg], bounds=np.zeros(0, dtype=np.int64),
                    offset_ns=epoch.offset_ns, drift_ppm=epoch.drift_ppm,
                    residual_spread_ns=epoch.residual_spread_ns, n_brackets=epoch.n_brackets, steps=epoch.steps,
                    constant_bound_ns=float(tick_ns), clock=epoch.clock)


def wall_stamped_map(ticks: np.ndarray, tick_ns: float, clock_domain: str, bound_ns: float, *,
                     clock: str = "CLOCK_REALTIME", shift_ns: int = 0) -> EpochMap:
    """The map of logs a tool stamped with the wall clock and wrote to a file: ``ticks x tick - shift``, no fit.

    Parameters
    ----------
    ticks : numpy.ndarray
        The logs' stamps, int64 ticks of CLOCK_REALTIME.
    tick_ns : float
        One tick, ns.
    clock_domain : str
        What the ticks are (a power-log file's domain).
    bound_ns : float
        The map's error bound, constant over the file: the stamp's
        resolution plus the delay between the read and its stamp, plus the
        bound of ``shift_ns`` where one is applied.
    clock : str
        The clock mapped onto (:data:`BRACKETED_CLOCKS`).
    shift_ns : int
        ``CLOCK_REALTIME - clock``: 0 onto CLOCK_REALTIME; the boot time on the
        epoch onto CLOCK_BOOTTIME.

    Returns
    -------
    EpochMap
        No brackets behind it (``n_brackets`` 0): a file of logs holds none.
    """
    if clock not in BRACKETED_CLOCKS:
        raise ValueError(f"clock={clock!r}: must be one of {', '.join(BRACKETED_CLOCKS)}")
    if not (math.isfinite(bound_ns) and bound_ns >= 0):
        raise ValueError(f"bound_ns={bound_ns!r}: must be a finite number >= 0")
    t0 = int(ticks.min()) if len(ticks) else 0
    x = np.array([t0, t0 + max(1, int(round(1e9 / tick_ns)))], dtype=np.int64)
    if not float(tick_ns).is_integer():
        raise ValueError(f"tick_ns={tick_ns!r}: a wall-clock log's tick must be a whole number of ns")
    y = x * np.int64(int(tick_ns)) - np.int64(int(shift_ns))
    yf = np.zeros(2)
    seg = _Segment(x=readonly(x), y=readonly(y), yf=readonly(yf), slope=readonly(_chords(x, y, yf)), fit=None,
                   mono_lo=0, mono_hi=0, epoch_offset=-int(shift_ns), step_before_ns=0.0, step_after_ns=0.0,
                   chord_err_ns=0.0)
    return EpochMap(clock_domain=clock_domain, tick_ns=tick_ns, segments=[seg], bounds=np.zeros(0, dtype=np.int64),
                    offset_ns=-int(shift_ns), drift_ppm=0.0, residual_spread_ns=0.0, n_brackets=0, steps=(),
                    constant_bound_ns=float(bound_ns), clock=clock)


#: The host clock every sample is read on.
HOST_CLOCK = "CLOCK_MONOTONIC_RAW"


#: The host clocks a capture brackets against :data:`HOST_CLOCK`, the ones traces stamp on:
#: CLOCK_REALTIME (torch.profiler / Kineto), CLOCK_BOOTTIME (rocprofv3 and rocpd, ROCr's system
#: clock), CLOCK_MONOTONIC (the other steady clock).
BRACKETED_CLOCKS = ("CLOCK_REALTIME", "CLOCK_BOOTTIME", "CLOCK_MONOTONIC")
