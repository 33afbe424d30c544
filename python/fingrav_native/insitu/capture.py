"""Live power capture beside a running application, on the application trace's clock.

In-situ profiling (issue 17) follows the paper's Section IV-A protocol in an
application's own loop: every execution of a kernel in, say, a training step
is one run at a random phase against the power logger, so many steps give
many phases, and the method's golden-run selection and stitching
(Section IV-B, steps 5-8) turn them into one fine-grain profile. What the
method needs from the capture is what a campaign run records: the power logs
with their timestamps, and a map from those timestamps onto the timeline the
kernels were stamped on.

The application's tracer (torch.profiler, whose Chrome trace Kineto writes)
stamps GPU kernels on the Unix epoch, ``CLOCK_REALTIME``: event ``ts`` in us
plus the trace's ``baseTimeNanoseconds``. The native :class:`Sampler` stamps
each read with the host clock, ``CLOCK_MONOTONIC_RAW``, which NTP neither
slews nor steps. The two clocks differ by an offset (the boot time) and a
*drift*: NTP slews ``CLOCK_REALTIME`` by up to 500 ppm to steer it, and the
raw clock runs at the crystal's own rate. So during a capture this module
takes bursts of bracketed reads (``_core.read_epoch_brackets``: a realtime
read between two raw reads) and fits the map afterwards with the clock-sync
fits of :mod:`fingrav_native.clocks.maps` (offset, skew, piecewise over long
captures, error bounds), the paper's Section IV-A CPU-GPU sync applied to the
two host clocks.

Precision. Epoch nanoseconds are about 1.8e18; a float64 there resolves only
256 ns, coarser than a sub-millisecond kernel's features. Every host time
here stays int64 (samples, brackets, anchors), and
:meth:`EpochMap.to_host_relative` returns float64 nanoseconds relative to an
integer origin (a trace's ``baseTimeNanoseconds``, say) computed so that no
epoch-magnitude number ever passes through a float.

Names
-----
:class:`PowerRecorder`
    The context manager that records (a native Sampler thread, one Python
    thread that drains it and takes epoch brackets), and :func:`record_torch`,
    which runs a training step under torch.profiler inside one.
:class:`PowerCapture`, :func:`load_capture`
    What a recording is, saved as a versioned ``.npz`` without pickles.
:class:`EpochMap`, :func:`fit_epoch_map`, :class:`ClockStepWarning`
    The clock maps onto the Unix epoch, and the warning a realtime step gives.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import socket
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from fingrav_native import _core
from fingrav_native._checks import integer_in, number_array, positive_number, readonly
from fingrav_native._version import __version__
from fingrav_native.backends import amd_sysfs
from fingrav_native.backends.base import LivePower
from fingrav_native.backends.nvidia import NVML_MODES, match_nvml_device, nvml_sensor
from fingrav_native.backends.sim import SimBackend
from fingrav_native.clocks.maps import (
    MIN_BRACKETS,
    ClockMap,
    PiecewiseClockMap,
    fit_clock_map,
    fit_one_sided_clock_map,
)
from fingrav_native.files._safe import (
    MAX_JSON_BYTES,
    check_archive,
    file_problem,
    loads_json,
    open_zip,
    read_member,
    read_npy,
    short_repr,
)
from fingrav_native.method.records import SAMPLE_DTYPE
from fingrav_native.method.timeline import fit_device_map
from fingrav_native.sensors.model import SensorModel
from fingrav_native.sim.device import SimGPU

__all__ = [
    "CAPTURE_FORMAT",
    "CAPTURE_VERSION",
    "REALTIME_CLOCK_DOMAINS",
    "CaptureFormatError",
    "ClockStep",
    "ClockStepWarning",
    "EpochMap",
    "PowerCapture",
    "PowerRecorder",
    "fit_epoch_map",
    "load_capture",
    "record_torch",
]

#: The ``format`` a capture file's header names.
CAPTURE_FORMAT = "fingrav-power-capture"
#: Bumped on any change a reader of the previous version would misread.
CAPTURE_VERSION = 1

#: Power-source clock domains whose timestamps are already CLOCK_REALTIME:
#: NVML stamps its samples with the host's gettimeofday in us (nvml.h;
#: csrc/fingrav/nvidia/nvml.hpp), so they map onto the epoch by their tick alone.
REALTIME_CLOCK_DOMAINS = frozenset({"nvml-host-us"})
#: Clock domains stamped with the host clock itself (hwmon reads, stamped at the read).
_HOST_CLOCK_DOMAINS = frozenset({"host-monotonic-raw"})

#: The host clock every sample is read on.
HOST_CLOCK = "CLOCK_MONOTONIC_RAW"

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

# The most irrational fraction: polls at (4 + it) per logger period sweep
# the logs' phase evenly (a low-discrepancy sequence) instead of locking to it.
_GOLDEN_FRACTION = (math.sqrt(5.0) - 1.0) / 2.0

ArrayLike = Union[npt.ArrayLike, int, float]


class ClockStepWarning(UserWarning):
    """CLOCK_REALTIME stepped (NTP step, settimeofday, a VM resumed) while power was captured.

    The epoch map is then fitted on each side of the step separately (see
    :func:`fit_epoch_map`); times inside the step's gap carry its size in
    their error bound.
    """


class CaptureFormatError(ValueError):
    """A file is not a readable power capture (foreign, newer, truncated); the message names the path."""


@dataclass(frozen=True)
class ClockStep:
    """One CLOCK_REALTIME step found in epoch brackets.

    Attributes
    ----------
    before_mono_ns, after_mono_ns : int
        Host time (CLOCK_MONOTONIC_RAW) of the last read before the step and
        the first read after it: the step happened in between.
    size_ns : float
        How far realtime jumped, net of its drift (positive: forward).
    unused_brackets : int
        Brackets inside the gap, on neither side for sure, left out of the fit.
    """

    before_mono_ns: int
    after_mono_ns: int
    size_ns: float
    unused_brackets: int


# --------------------------------------------------------------------------- the map


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
    fit: Any  # the realtime -> host-clock fit (ClockMap or PiecewiseClockMap), None for realtime-stamped ticks
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
    """A clock map from some clock's ticks onto Unix-epoch (CLOCK_REALTIME) nanoseconds.

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
    clock_domain : str
        What the ticks are: ``"CLOCK_MONOTONIC_RAW"``, or a power source's
        clock domain (``"sim-device"``, ``"nvml-host-us"``, ...).
    tick_ns : float
        Nominal length of one tick, ns.
    offset_ns : int
        ``CLOCK_REALTIME - CLOCK_MONOTONIC_RAW`` at the centre of the
        brackets (of the first segment when realtime stepped), ns.
    drift_ppm : float
        How fast CLOCK_REALTIME runs against CLOCK_MONOTONIC_RAW, ppm
        (positive: realtime runs fast; NTP's slew plus the raw clock's
        crystal error), over the first segment.
    residual_spread_ns : float
        Spread (max - min) of the tight brackets' residuals from the map, ns:
        how well the map follows the reads.
    n_brackets : int
        Epoch brackets the map was fitted from (all given).
    steps : tuple of ClockStep
        CLOCK_REALTIME steps found (empty normally).
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

    def __repr__(self) -> str:
        return (f"EpochMap(clock_domain={self.clock_domain!r}, offset_ns={self.offset_ns}, "
                f"drift_ppm={self.drift_ppm:.3f}, residual_spread_ns={self.residual_spread_ns:.0f}, "
                f"n_brackets={self.n_brackets}, steps={len(self.steps)})")

    @property
    def segments(self) -> int:
        """Number of step-free segments (1 unless CLOCK_REALTIME stepped)."""
        return len(self._segments)

    @property
    def fits(self) -> tuple[Any, ...]:
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
        :meth:`fingrav_native.clocks.maps.ClockMap.error_bound_at`), the
        logger fit's for a logger map (its one-sided bias is not in it: see
        :func:`~fingrav_native.clocks.maps.fit_one_sided_clock_map`), and
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


def _int_brackets(brackets: npt.ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(brackets)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: must be an int64 array of (mono_raw_before_ns, realtime_ns, mono_raw_after_ns); "
                         f"got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"{name}: expected shape (n, 3) of (mono_raw_before_ns, realtime_ns, mono_raw_after_ns); "
                         f"got {arr.shape}")
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


def _curve_points(fit: Any, realtime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points on a realtime -> host fit as (integer host ns, realtime's fractional correction there)."""
    if isinstance(fit, ClockMap):
        # Exact: the line's own integer references and small float terms.
        m_rel = fit.offset_ns + fit.ns_per_tick * (realtime - np.int64(fit.device_ref)).astype(np.float64)
        m_int = np.rint(m_rel)
        return (m_int.astype(np.int64) + np.int64(fit.host_ref),
                np.asarray((m_int - m_rel) / fit.ns_per_tick, dtype=np.float64))
    # A piecewise fit gives integer host ns exactly rounded (0.5 ns).
    return np.asarray(fit.to_host_ns(realtime), dtype=np.int64), np.zeros(realtime.shape)


def _fit_segment(seg: np.ndarray) -> tuple[Any, float]:
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


def fit_epoch_map(brackets: npt.ArrayLike, *, step_threshold_ns: float = 20_000.0) -> EpochMap:
    """Fit the map from the host clock (CLOCK_MONOTONIC_RAW) onto the Unix epoch (CLOCK_REALTIME).

    Parameters
    ----------
    brackets : (n, 3) int64 array_like
        Rows ``(mono_raw_before_ns, realtime_ns, mono_raw_after_ns)`` from
        ``_core.read_epoch_brackets``, any order, at least 3.
    step_threshold_ns : float
        A change of the realtime offset beyond the brackets' widths, the
        drift and this much is a CLOCK_REALTIME step (default 20 us: NTP
        steps are 128 ms or more, settimeofday anything; slews are rates).

    Returns
    -------
    EpochMap
        ``to_host(mono_ns)`` gives epoch ns.

    Raises
    ------
    ValueError
        Naming the argument: not an ``(n, 3)`` integer array, fewer than 3
        rows, ``mono_after < mono_before``, a bad threshold, or no segment
        between steps with 3 brackets.

    Warns
    -----
    ClockStepWarning
        CLOCK_REALTIME stepped, or wandered beyond ``step_threshold_ns``
        from a smooth fit (a fast slew).

    Notes
    -----
    The paper's Section IV-A syncs the GPU clock to the CPU's with
    bracketed reads; here the same fits sync the two host clocks, because
    the application's tracer stamps on one and the sampler on the other.

    1. Sort by host time; find steps (see below) and split there.
    2. On each side, fit realtime -> host clock with the bracketed fits of
       :mod:`fingrav_native.clocks.maps` (realtime in the device clock's
       role, 1 ns ticks: the realtime read happened inside its host
       bracket, which is what those fits model). Reads spanning 2 s or more
       get a piecewise fit that follows a changing NTP slew
       (:func:`fingrav_native.method.timeline.fit_device_map`); under 50 ms,
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
    arr = _int_brackets(brackets, "brackets")
    n = arr.shape[0]
    if n < 3:
        raise ValueError(f"brackets: {n} epoch brackets given; at least 3 are needed")
    bad = np.flatnonzero(arr[:, 2] < arr[:, 0])
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"brackets: mono_raw_after < mono_raw_before in row {i} "
                         f"({int(arr[i, 2])} < {int(arr[i, 0])}); columns must be "
                         "(mono_raw_before_ns, realtime_ns, mono_raw_after_ns)")
    arr = arr[np.argsort(arr[:, 0], kind="stable")]
    gaps, rate = _find_steps(arr, threshold)

    # Step 1: runs of brackets between steps.
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
    short = [k for k, r in enumerate(runs) if r.shape[0] < 3]
    if len(short) == len(runs):
        raise ValueError(f"brackets: CLOCK_REALTIME stepped {len(steps)} time(s) and no stretch between steps "
                         "holds 3 brackets to fit; record brackets more often (brackets_per_read)")

    # Step 2: a fit per run.
    segs: list[_Segment] = []
    residual_worst = 0.0
    spreads: list[float] = []
    fits = []
    for k, run in enumerate(runs):
        if run.shape[0] < 3:
            continue  # too few reads to fit: the neighbours cover its time, with the step in their bound
        fit, chord_err = _fit_segment(run)
        fits.append((k, run, fit, chord_err))

    # Step 3: knots. A line needs its two ends; a piecewise fit, chords every 50 ms.
    for idx, (k, run, fit, chord_err) in enumerate(fits):
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
        # Which steps border this segment (runs too short to fit merge into the gap).
        before = sum(s.size_ns for s in steps[fits[idx - 1][0]:k]) if idx > 0 else 0.0
        after = sum(s.size_ns for s in steps[k:fits[idx + 1][0]]) if idx + 1 < len(fits) else 0.0
        seg = _Segment(x=readonly(x), y=readonly(y), yf=readonly(yf), slope=readonly(_chords(x, y, yf)),
                       fit=fit, mono_lo=mono_lo, mono_hi=mono_hi, epoch_offset=0,
                       step_before_ns=float(before), step_after_ns=float(after), chord_err_ns=chord_err)
        # The segment's offset at its centre (exact integers), for turning epoch times back into host time.
        at_centre = _eval_segment(seg, np.array([centre], dtype=np.int64), np.zeros(1), int(y[0]))[0]
        offset = int(y[0]) + int(np.rint(at_centre)) - centre
        seg = dataclasses.replace(seg, epoch_offset=offset)
        segs.append(seg)
        # Residuals of the tight reads: realtime minus the map at the bracket's midpoint.
        w = run[:, 2] - run[:, 0]
        tight = w <= max(2 * int(w.min()), int(w.min()) + 1000)
        mid = run[tight, 0] + w[tight] // 2
        r0i = int(run[0, 1])
        res = (run[tight, 1] - np.int64(r0i)).astype(np.float64) - _eval_segment(
            seg, mid, 0.5 * (w[tight] % 2).astype(np.float64), r0i)
        spreads.append(float(np.ptp(res)) if res.size else 0.0)
        residual_worst = max(residual_worst, float(np.max(np.abs(res) - 0.5 * w[tight])) if res.size else 0.0)

    bounds = np.array([0.5 * (segs[i].mono_hi + segs[i + 1].mono_lo) for i in range(len(segs) - 1)])
    bounds_i = np.floor(bounds).astype(np.int64) if bounds.size else np.zeros(0, dtype=np.int64)
    first = segs[0]
    total_span = float(first.x[-1] - first.x[0])
    drift = ((float(first.y[-1] - first.y[0]) + float(first.yf[-1] - first.yf[0])) / total_span - 1.0) * 1e6
    if steps:
        unused = sum(s.unused_brackets for s in steps) + sum(runs[k].shape[0] for k in short)
        where = "; ".join(f"{s.size_ns / 1e3:+.3f} us between host times {s.before_mono_ns} and {s.after_mono_ns} ns"
                          for s in steps)
        warnings.warn(
            f"CLOCK_REALTIME stepped during the capture ({where}): the epoch map is fitted on each side "
            f"separately, so times map to the realtime a tracer read at that moment; {unused} bracket(s) "
            "inside the gaps were not used, and times there carry the step in their error bound",
            ClockStepWarning, stacklevel=2)
    elif residual_worst > threshold:
        warnings.warn(
            f"CLOCK_REALTIME wandered {residual_worst / 1e3:.3f} us from a smooth fit of its offset "
            f"(step_threshold_ns={threshold:g}): a small step or a fast NTP slew; the map's error is that large "
            "near it", ClockStepWarning, stacklevel=2)
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
    )


def _identity_map(ticks: np.ndarray, tick_ns: float) -> ClockMap:
    """The logger -> host map of a source stamped with the host clock itself (exact, no error)."""
    ref = int(ticks[len(ticks) // 2]) if len(ticks) else 0
    host_ref = int(round(ref * tick_ns))
    lo = int(round(int(ticks.min()) * tick_ns)) if len(ticks) else host_ref
    hi = int(round(int(ticks.max()) * tick_ns)) if len(ticks) else host_ref
    return ClockMap(method="identity", device_ref=ref, host_ref=host_ref, offset_ns=0.0, ns_per_tick=float(tick_ns),
                    tick_ns=float(tick_ns), host_begin_ns=lo, host_end_ns=hi, host_center_ns=host_ref,
                    n_used=int(len(ticks)), n_total=int(len(ticks)), best_rtt_ns=math.nan, asymmetry_ns=0.0,
                    residual_ns=0.0, skew_bound_ppm=0.0, wander_ppm_per_s=0.0, coverage=1.0)


def _compose(epoch: EpochMap, logger: ClockMap, clock_domain: str, tick_ns: float) -> EpochMap:
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
                    logger=logger)


def _realtime_stamped(epoch: EpochMap, ticks: np.ndarray, clock_domain: str, tick_ns: float) -> EpochMap:
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
                    constant_bound_ns=float(tick_ns))


# --------------------------------------------------------------------------- the capture

_SOURCE_KEYS = ("name", "clock_domain", "tick_ns", "native_period_ns", "window_ns", "channels")


def _source_dict(source: _core.PowerSource) -> dict[str, Any]:
    info = source.info
    return {"name": str(info.name), "clock_domain": str(info.clock_domain), "tick_ns": float(info.tick_ns),
            "native_period_ns": int(info.native_period_ns), "window_ns": int(info.window_ns),
            "channels": [str(c) for c in info.channels]}


@dataclass(frozen=True)
class PowerCapture:
    """One live power recording beside an application, with what maps it onto the trace's clock.

    Made by :class:`PowerRecorder` and :func:`load_capture`. The samples'
    host times stay CLOCK_MONOTONIC_RAW int64; :meth:`epoch_map` and
    :meth:`logger_map` put them on the Unix epoch the application's trace
    uses.

    Attributes
    ----------
    samples : numpy.ndarray
        SAMPLE_DTYPE, in drain order (``seq`` consecutive unless the ring
        overflowed, which ``stats["drops"]`` counts).
    epoch_brackets : numpy.ndarray
        ``(n, 3)`` int64 ``(mono_raw_before_ns, realtime_ns,
        mono_raw_after_ns)``, at the start, every ``brackets_every_s`` and
        at the end.
    source : dict
        The power source: ``name``, ``clock_domain``, ``tick_ns``,
        ``native_period_ns``, ``window_ns``, ``channels``.
    sensor : SensorModel or None
        What each log is (instantaneous, a window, a counter), when known.
    period_ns : int
        The sampler's poll period.
    stats : dict
        The sampler's counters (``SamplerStats.as_dict()``: ``drops`` for
        ring overflows, ``source_missed`` for logs the source lost, ...)
        plus the recorder's own (``drain_thread_cpu_ns``, ``drains``,
        ``epoch_bracket_reads``, ``capacity``).
    meta : dict
        ``device``, ``hostname``, ``pid``, ``started_epoch_ns``,
        ``stopped_epoch_ns``, ``fingrav_native_version``, ``host_clock``,
        and ``trace`` when a trace was attached.

    Raises
    ------
    ValueError
        On construction, naming the field: wrong dtype or shape, a source
        dict missing keys, a non-positive period.
    """

    samples: np.ndarray
    epoch_brackets: np.ndarray
    source: dict[str, Any]
    sensor: Optional[SensorModel]
    period_ns: int
    stats: dict[str, Any]
    meta: dict[str, Any]

    def __post_init__(self) -> None:
        s = self.samples
        if not isinstance(s, np.ndarray) or s.dtype != SAMPLE_DTYPE or s.ndim != 1:
            raise ValueError(f"samples: must be a 1-D SAMPLE_DTYPE array; got "
                             f"{getattr(s, 'dtype', type(s).__name__)} of shape {getattr(s, 'shape', None)}")
        b = self.epoch_brackets
        if not isinstance(b, np.ndarray) or b.dtype != np.int64 or b.ndim != 2 or b.shape[1] != 3:
            raise ValueError(f"epoch_brackets: must be an (n, 3) int64 array; got "
                             f"{getattr(b, 'dtype', type(b).__name__)} of shape {getattr(b, 'shape', None)}")
        if b.shape[0] < 1:
            raise ValueError("epoch_brackets: empty; a capture needs its epoch brackets")
        if not isinstance(self.source, dict) or any(k not in self.source for k in _SOURCE_KEYS):
            missing = [k for k in _SOURCE_KEYS if not isinstance(self.source, dict) or k not in self.source]
            raise ValueError(f"source: must be a dict with {', '.join(_SOURCE_KEYS)}; missing {missing}")
        if self.sensor is not None and not isinstance(self.sensor, SensorModel):
            raise ValueError(f"sensor={self.sensor!r}: must be a SensorModel or None")
        integer_in(self.period_ns, "period_ns", 1)
        for name in ("stats", "meta"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"{name}: must be a dict")
        # Frozen like the dataclass: a capture is a record of what happened.
        object.__setattr__(self, "samples", readonly(s.copy() if s.flags.writeable else s))
        object.__setattr__(self, "epoch_brackets", readonly(b.copy() if b.flags.writeable else b))

    def __len__(self) -> int:
        return int(self.samples.shape[0])

    def epoch_map(self, *, step_threshold_ns: float = 20_000.0) -> EpochMap:
        """The host clock (the samples' ``host_ns``) onto epoch ns: :func:`fit_epoch_map` on the brackets."""
        return fit_epoch_map(self.epoch_brackets, step_threshold_ns=step_threshold_ns)

    def logger_map(self, *, step_threshold_ns: float = 20_000.0) -> EpochMap:
        """The logger's timestamps (the samples' ``source_ts``) onto epoch ns.

        Returns
        -------
        EpochMap
            With ``clock_domain`` the source's.

        Raises
        ------
        ValueError
            Too few samples to fit a logger with its own clock (16).

        Notes
        -----
        Paper Section IV-A places each power log by its own timestamp. By
        the source's clock domain:

        * CLOCK_REALTIME already (``"nvml-host-us"``, :data:`REALTIME_CLOCK_DOMAINS`):
          ``ticks * tick_ns``; the bound is one tick (the stamp truncates);
        * the host clock (``"host-monotonic-raw"``): the epoch map;
        * any other (a GPU or firmware clock): fitted one-sidedly from the
          samples (a log precedes the read that saw it;
          :func:`~fingrav_native.clocks.maps.fit_one_sided_clock_map`, as
          :func:`fingrav_native.method.timeline.fit_logger_map` does for
          campaign runs), then composed with the epoch map. The minimum
          publication delay biases that fit late and is not in the bound.
        """
        domain = str(self.source["clock_domain"])
        tick = float(self.source["tick_ns"])
        ticks = np.asarray(self.samples["source_ts"], dtype=np.int64)
        epoch = self.epoch_map(step_threshold_ns=step_threshold_ns)
        if domain in REALTIME_CLOCK_DOMAINS:
            return _realtime_stamped(epoch, ticks, domain, tick)
        if domain in _HOST_CLOCK_DOMAINS:
            return _compose(epoch, _identity_map(ticks, tick), domain, tick)
        try:
            lmap = fit_one_sided_clock_map(self.samples["host_ns"], ticks, tick_ns=tick)
        except ValueError as exc:
            raise ValueError(f"samples: the {domain!r} logger clock is fitted one-sidedly from the samples' "
                             f"(host_ns, source_ts): {exc}") from exc
        return _compose(epoch, lmap, domain, tick)

    # ------------------------------------------------------------------ files
    def _header(self) -> dict[str, Any]:
        return {"format": CAPTURE_FORMAT, "version": CAPTURE_VERSION, "source": self.source,
                "sensor": None if self.sensor is None else self.sensor.as_dict(), "period_ns": int(self.period_ns),
                "stats": self.stats, "meta": self.meta}

    def save(self, path: Union[str, os.PathLike[str]]) -> str:
        """Write the capture to ``path`` atomically; return the path written.

        Parameters
        ----------
        path : str or path-like
            The file (``.npz`` by convention; the name is kept as given).

        Returns
        -------
        str

        Notes
        -----
        A numpy ``.npz`` holding ``samples`` (SAMPLE_DTYPE), ``epoch_brackets``
        (int64) and ``header`` (a JSON string: ``format``, ``version`` and
        the dict fields); no pickles, so :func:`load_capture` reads it with
        ``allow_pickle=False``. Written to a temporary file in the same
        folder and renamed over ``path`` (``os.replace``), so a crash never
        leaves a half-written capture under the final name.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path")
        path = os.fspath(path)
        header = json.dumps(self._header())
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".fingrav-capture-", suffix=".npz.tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, samples=np.ascontiguousarray(self.samples),
                         epoch_brackets=np.ascontiguousarray(self.epoch_brackets), header=np.array(header))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path


def _check_source(source: Any) -> Optional[str]:
    """What is wrong with a capture header's ``source`` (None: nothing), by field."""
    if not isinstance(source, dict):
        return f"source: expected an object, got {short_repr(source)}"
    missing = [k for k in _SOURCE_KEYS if k not in source]
    if missing:
        return f"source: must be a dict with {', '.join(_SOURCE_KEYS)}; missing {missing}"
    for key in ("name", "clock_domain"):
        if not isinstance(source[key], str):
            return f"source.{key}: expected a string, got {short_repr(source[key])}"
    for key, low in (("tick_ns", "> 0"), ("native_period_ns", ">= 0"), ("window_ns", ">= 0")):
        v = source[key]
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
              and (v > 0 if low == "> 0" else v >= 0))
        if not ok:
            return f"source.{key}: expected a finite number {low}, got {short_repr(v)}"
    channels = source["channels"]
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        return f"source.channels: expected a list of strings, got {short_repr(channels)}"
    return None


def _check_sensor_fields(d: dict[str, Any]) -> Optional[str]:
    """What is wrong with the types of a header's ``sensor`` fields (None: nothing); the model checks values."""
    for f in dataclasses.fields(SensorModel):
        if f.name not in d:
            continue
        v = d[f.name]
        if f.type in ("str", str):
            if not isinstance(v, str):
                return f"sensor.{f.name}: expected a string, got {short_repr(v)}"
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"sensor.{f.name}: expected a number, got {short_repr(v)}"
    return None


def load_capture(path: Union[str, os.PathLike[str]]) -> PowerCapture:
    """Read a capture written by :meth:`PowerCapture.save`.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    PowerCapture

    Raises
    ------
    CaptureFormatError
        Naming the path: a directory or other non-file, not a readable
        ``.npz`` (truncated, damaged: the member is named), a file of another
        format, a newer format version (with the version found), more data
        than a capture holds (a zip bomb, an array header declaring more
        than its bytes), a header nested too deep, or missing or malformed
        arrays or header fields (named).
    FileNotFoundError
        No such file.
    ValueError
        ``path`` is not a path.

    Notes
    -----
    The ``.npz`` is read member by member with the size caps and ``.npy``
    header checks of the profile loader (:mod:`fingrav_native.files._safe`),
    never with pickle.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such power capture file")

    def bad(what: str) -> CaptureFormatError:
        return CaptureFormatError(f"{path}: {what}")

    problem = file_problem(path)
    if problem is not None:
        raise bad(f"{problem}; a power capture is an .npz file")
    zf = open_zip(path, lambda what: bad(f"not a readable {CAPTURE_FORMAT} file (.npz): {what}"))
    with zf:
        budget = check_archive(zf, os.path.getsize(path), bad, max_members=64)
        names = {n[: -len(".npy")] for n in zf.namelist() if n.endswith(".npy")}
        if "header" not in names:
            raise bad(f"not a {CAPTURE_FORMAT} file (no 'header' array; found {sorted(names)[:8]})")
        arrays: dict[str, np.ndarray] = {}
        for key in ("header", "samples", "epoch_brackets"):
            if key in names:
                # The header is a few kB of JSON; only the arrays may be large.
                data = read_member(zf, f"{key}.npy", bad, budget, limit=MAX_JSON_BYTES if key == "header" else None)
                arrays[key] = read_npy(data, bad, f"the array {key!r}")
    header_text = arrays["header"]
    if header_text.ndim != 0 or header_text.dtype.kind != "U":
        raise bad(f"the header is not a string (dtype {header_text.dtype}, shape {header_text.shape})")
    header = loads_json(str(header_text[()]), bad, "the header")
    if not isinstance(header, dict):
        raise bad(f"the header is a {type(header).__name__}, not a JSON object")
    fmt = header.get("format")
    if fmt != CAPTURE_FORMAT:
        raise bad(f"format {short_repr(fmt)}, not {CAPTURE_FORMAT!r}")
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise bad(f"format version {short_repr(version)} is not a version number")
    if version > CAPTURE_VERSION:
        raise bad(f"format version {version} is newer than this fingrav_native ({__version__}) reads "
                  f"(up to {CAPTURE_VERSION}); upgrade fingrav_native")
    for key in ("samples", "epoch_brackets"):
        if key not in arrays:
            raise bad(f"the array {key!r} is missing")
    for key in ("source", "period_ns", "stats", "meta"):
        if key not in header:
            raise bad(f"the header field {key!r} is missing")
    problem = _check_source(header["source"])
    if problem is not None:
        raise bad(problem)
    for key in ("stats", "meta"):
        if not isinstance(header[key], dict):
            raise bad(f"{key}: expected an object, got {short_repr(header[key])}")
    sensor = None
    if header.get("sensor") is not None:
        if not isinstance(header["sensor"], dict):
            raise bad(f"sensor: expected an object, got {type(header['sensor']).__name__}")
        problem = _check_sensor_fields(header["sensor"])
        if problem is not None:
            raise bad(problem)
        try:
            sensor = SensorModel.from_dict(header["sensor"])
        except (TypeError, ValueError, KeyError) as exc:
            raise bad(f"sensor: {exc}") from exc
    try:
        return PowerCapture(samples=arrays["samples"], epoch_brackets=arrays["epoch_brackets"],
                            source=header["source"], sensor=sensor, period_ns=header["period_ns"],
                            stats=header["stats"], meta=header["meta"])
    except (ValueError, TypeError) as exc:
        raise bad(str(exc)) from exc


# --------------------------------------------------------------------------- the recorder


@dataclass(frozen=True)
class _Resolved:
    source: _core.PowerSource
    sensor: Optional[SensorModel]
    # Builds the sensor once the period is measured (NVML reports none for some modes).
    sensor_for_period: Optional[Callable[[float], SensorModel]]
    description: str


_DEVICE_RE = re.compile(r"^(nvidia|amd):(\d+)(?::([a-z_]+))?$")


def _nvml_device(index: int, mode: str) -> _Resolved:
    """NVML power for CUDA device ``index`` (as torch numbers it), as NvidiaBackend opens it."""
    if mode not in NVML_MODES:
        raise ValueError(f"device='nvidia:{index}:{mode}': unknown NVML mode {mode!r}; one of {', '.join(NVML_MODES)}")
    for name in ("cuda_devices", "nvml_devices", "NvmlPowerSource"):
        if not hasattr(_core, name):
            raise RuntimeError(f"device='nvidia:{index}': this build of fingrav_native has no NVML support "
                               f"(_core.{name} is missing); rebuild from a source tree that includes it")
    # CUDA's numbering (CUDA_VISIBLE_DEVICES, what torch calls cuda:N) is
    # matched to NVML's by UUID: NVML numbers every GPU in PCI order.
    cuda = _core.cuda_devices()
    if index >= len(cuda):
        raise _core.DeviceUnavailableError(f"device='nvidia:{index}': the CUDA driver sees {len(cuda)} device(s) "
                                           "(indices follow CUDA_VISIBLE_DEVICES)")
    nvml_index = match_nvml_device(dict(cuda[index]), [dict(d) for d in _core.nvml_devices()])
    source = _core.NvmlPowerSource(nvml_index, mode)
    info = source.info
    documented = bool(source.window_documented)

    def sensor(period_ns: float) -> SensorModel:
        return nvml_sensor(mode, period_ns, float(info.window_ns), documented)

    return _Resolved(source, None, sensor,
                     f"{cuda[index]['name']} (CUDA {index}, NVML {nvml_index}, PCI {cuda[index]['pci_bus_id']}, "
                     f"NVML {mode})")


def _amd_device(index: int, mode: Optional[str]) -> _Resolved:
    """``gpu_metrics`` (else hwmon) power of AMD GPU ``index`` in HIP's order, as AmdBackend opens it."""
    if mode is not None and mode not in ("energy", "socket"):
        raise ValueError(f"device='amd:{index}:{mode}': unknown channel {mode!r}; 'energy' or 'socket'")
    # HIP (and torch on ROCm) numbers GPUs in KFD topology order, as AmdBackend does.
    gpus = sorted((g for g in amd_sysfs.find_amd_gpus() if g.kfd_node is not None), key=lambda g: int(g.kfd_node or 0))
    if not gpus:
        raise _core.DeviceUnavailableError(
            f"device='amd:{index}': no AMD GPU bound to amdgpu with a KFD node under /sys; load the amdgpu "
            "driver (ROCm) on a machine with an AMD GPU")
    if index >= len(gpus):
        raise _core.DeviceUnavailableError(f"device='amd:{index}': this machine has {len(gpus)} AMD GPU(s)")
    gpu = gpus[index]
    source = amd_sysfs.power_source(gpu, channel=mode or "energy")
    # AmdBackend declares no sensor model either: characterise it before deconvolving.
    return _Resolved(source, None, None, f"{gpu.name} (HIP {index}, {gpu.pci_address})")


def _resolve_device(device: Any) -> _Resolved:
    if isinstance(device, _core.PowerSource):
        return _Resolved(device, None, None, f"{device.info.name} ({device.info.clock_domain})")
    if isinstance(device, SimGPU):
        if not device.realtime:
            raise ValueError("device: a virtual-time SimGPU cannot be recorded live (its clock does not follow "
                             "the host's); create it with SimGPU(realtime=True)")
        # depth 8: a drain stall of up to 8 logger periods loses no log.
        return _Resolved(device.power_source(depth=8), device.sensor, None,
                         f"SimGPU (real time, seed {int(device.params['seed'])})")
    if isinstance(device, LivePower):  # LiveSimBackend, NvidiaBackend, AmdBackend
        caps = getattr(device, "capabilities")
        return _Resolved(device.power_source, caps.sensor, None, str(caps.device))
    if isinstance(device, SimBackend):
        raise ValueError("device: a virtual-time SimBackend cannot be recorded live; use LiveSimBackend "
                         "or SimGPU(realtime=True)")
    if isinstance(device, str):
        m = _DEVICE_RE.match(device.strip().lower())
        if m is None:
            raise ValueError(f"device={device!r}: unknown device string; expected 'nvidia:N' (CUDA device N, "
                             "NVML samples), 'nvidia:N:MODE' (an NVML mode), 'amd:N' or 'amd:N:socket'")
        vendor, index, mode = m.group(1), int(m.group(2)), m.group(3)
        try:
            return _nvml_device(index, mode or "samples") if vendor == "nvidia" else _amd_device(index, mode)
        except (_core.LibraryNotFoundError, _core.DeviceUnavailableError) as exc:
            # Same type, with which device string led here; the loader's text
            # already names the library paths tried and what to install.
            raise type(exc)(f"device={device!r}: {exc}") from exc
    raise ValueError(f"device={device!r}: must be a PowerSource, a real-time SimGPU, a LiveSimBackend, "
                     "NvidiaBackend or AmdBackend, or a string 'nvidia:N' / 'amd:N'")


def _default_period_ns(info: _core.SourceInfo) -> int:
    """The poll period a recorder uses by default (see PowerRecorder's Notes: never a whole fraction of the logger's)."""
    if info.clock_domain in REALTIME_CLOCK_DOMAINS or info.clock_domain in _HOST_CLOCK_DOMAINS:
        return 1_000_000  # stamped with a host clock: nothing to fit, the poll only has to keep up
    native = int(info.native_period_ns)
    period = native / (4.0 + _GOLDEN_FRACTION) if native > 0 else 1e6 * _GOLDEN_FRACTION
    return int(min(max(round(period), _core.MIN_PERIOD_NS), 1_000_000))


def _measured_period_ns(samples: np.ndarray, tick_ns: float) -> float:
    """The logger's period from the logs' own timestamps (median step between distinct logs); 0 if unknown."""
    if len(samples) < 3:
        return 0.0
    steps = np.diff(np.unique(np.asarray(samples["source_ts"], dtype=np.int64))).astype(np.float64) * tick_ns
    return float(np.median(steps)) if steps.size else 0.0


class PowerRecorder:
    """Record a GPU's power live while an application runs, with what maps it onto the trace's clock.

    A context manager. Inside the ``with`` block a native
    :class:`~fingrav_native.Sampler` thread polls the device's power source
    into a lock-free ring, and one Python thread wakes every
    ``brackets_every_s`` to drain the ring (so a capture of hours never
    overflows it) and take a burst of epoch brackets (so the map onto the
    trace's CLOCK_REALTIME follows NTP's drift). On exit the capture is
    built (:attr:`capture`) and, given a ``path``, saved. An exception in
    the ``with`` block still stops both threads and saves what was recorded
    (the block's exception is the one raised); a failure of the sampler
    (``SamplerError``) or of the drain thread is raised on exit; a capture
    that cannot be written raises too, and :attr:`capture` still holds it.

    Parameters
    ----------
    device : PowerSource, SimGPU, LiveSimBackend, NvidiaBackend, AmdBackend or str
        What to record: a power source; a real-time
        :class:`~fingrav_native.sim.device.SimGPU` (its logger, sensor model
        included); a hardware or live-sim backend (its power source and
        ``capabilities.sensor``); or ``"nvidia:N"`` (NVML power of CUDA
        device N as torch numbers it; ``"nvidia:N:MODE"`` picks an NVML mode
        such as ``instant``) or ``"amd:N"`` (``gpu_metrics``, else hwmon, of
        HIP device N; ``"amd:N:socket"`` for socket power).
    path : str or path-like, optional
        Where the capture is saved on exit.
    period_ns : int, optional
        Sampler poll period in ``[MIN_PERIOD_NS, MAX_PERIOD_NS]``. Default
        (None): 1 ms for sources stamped with a host clock (NVML, hwmon);
        for a logger with its own clock, its period divided by 4.618 (a
        golden-ratio dither, 216.5 us for a 1 ms logger; see Notes), or
        0.618 ms when the period is unknown.
    brackets_every_s : float
        How often the Python thread drains and takes epoch brackets, s
        (default 0.5; 0.01 to 60).
    brackets_per_read : int
        Epoch brackets per burst (default 8; at least 8 are taken at the
        start and at the end, so any capture can be fitted).
    capacity : int, optional
        Sampler ring slots (a power of two). Default: 8 times what one
        interval can bring, at least 65536, so the drain thread may stall
        for seconds (a main thread holding the GIL) without a drop.

    Raises
    ------
    ValueError
        Naming the argument: a period, interval, burst or capacity out of
        range; an unknown device string; a virtual-time SimGPU.
    LibraryNotFoundError, DeviceUnavailableError
        ``"nvidia:N"`` / ``"amd:N"`` without the driver or the device; the
        message says which library or device and how to get it.

    Notes
    -----
    In-situ profiling is the paper's Section IV-A protocol run by the
    application itself: each execution is one run at a random phase
    against the logger. The recorder takes no part in the application's
    timing: its threads sleep between polls and drains (see
    ``bench/insitu_overhead.py`` for the cost).

    Why the default poll period is not a round number: a logger with its
    own clock is mapped onto host time from when each log was first seen
    (a one-sided fit: the lower envelope of read delays). Polling at the
    logger's own period, or a whole fraction of it, locks the polls to the
    logs' phase, so every log is seen the same (unknown) delay late: on
    the simulated 1 ms logger, 1 ms polls placed every log ~660 us late and
    100 us polls ~64 us late, where 216.5 us polls (4.618 per log, an
    irrational ratio, so the phase sweeps every offset) found the envelope
    within ~5 us of the logger's publication delay.

    Examples
    --------
    >>> from fingrav_native.sim.device import SimGPU
    >>> gpu = SimGPU(realtime=True, seed=1)
    >>> with PowerRecorder(gpu) as rec:
    ...     _ = gpu.run("cb-4k-gemm", 20)
    >>> len(rec.capture) > 0
    True
    """

    def __init__(
        self,
        device: Any,
        path: Optional[Union[str, os.PathLike[str]]] = None,
        *,
        period_ns: Optional[int] = None,
        brackets_every_s: float = 0.5,
        brackets_per_read: int = 8,
        capacity: Optional[int] = None,
    ) -> None:
        if period_ns is not None:
            period_ns = integer_in(period_ns, "period_ns", _core.MIN_PERIOD_NS, _core.MAX_PERIOD_NS)
        self._every_s = positive_number(brackets_every_s, "brackets_every_s", upper=60.0)
        if self._every_s < 0.01:
            raise ValueError(f"brackets_every_s={brackets_every_s!r}: must be >= 0.01 (each wake-up costs CPU)")
        self._per_read = integer_in(brackets_per_read, "brackets_per_read", 1, 4096)
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path or None")
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(os.fspath(path)))):
            # Found now, not when a long recording ends and cannot be written.
            raise ValueError(f"path={os.fspath(path)!r}: its folder does not exist")
        if capacity is not None:
            capacity = integer_in(capacity, "capacity", _core.MIN_CAPACITY, 1 << 26)
            if capacity & (capacity - 1):
                raise ValueError(f"capacity={capacity}: must be a power of two >= {_core.MIN_CAPACITY}")
        self._path = None if path is None else os.fspath(path)
        self._resolved = _resolve_device(device)
        info = self._resolved.source.info
        self._period_ns = period_ns if period_ns is not None else _default_period_ns(info)
        if capacity is None:
            fastest = min(self._period_ns, int(info.native_period_ns) or self._period_ns)
            need = 8 * self._every_s * 1e9 / fastest
            capacity = max(1 << 16, 1 << int(math.ceil(math.log2(max(need, 1.0)))))
        self._capacity = int(capacity)
        self._state = "new"
        self._sampler: Optional[_core.Sampler] = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._chunks: list[np.ndarray] = []
        self._brackets: list[np.ndarray] = []
        self._error: Optional[BaseException] = None
        self._drains = 0
        self._thread_cpu_ns = 0
        self._capture: Optional[PowerCapture] = None
        self._trace_path: Optional[str] = None

    # ------------------------------------------------------------------ state
    @property
    def path(self) -> Optional[str]:
        """Where the capture is saved on exit (None: not saved)."""
        return self._path

    @property
    def period_ns(self) -> int:
        """The sampler's poll period, ns."""
        return self._period_ns

    @property
    def capacity(self) -> int:
        """The sampler ring's slots."""
        return self._capacity

    @property
    def source(self) -> _core.PowerSource:
        """The power source being recorded."""
        return self._resolved.source

    @property
    def capture(self) -> PowerCapture:
        """The capture, once the ``with`` block has ended."""
        if self._capture is None:
            raise RuntimeError("PowerRecorder.capture: there is no capture yet; it exists after the with block "
                               "ends (and not when the recording failed)")
        return self._capture

    @property
    def trace_path(self) -> Optional[str]:
        """The Chrome trace written by :meth:`attach`, if any."""
        return self._trace_path

    # ------------------------------------------------------------------ recording
    def _burst(self, n: int) -> None:
        self._brackets.append(_core.read_epoch_brackets(n))

    def _loop(self) -> None:
        cpu0 = time.thread_time_ns()
        try:
            assert self._sampler is not None
            # wait() returns True when stop is set: the main thread then takes
            # the final drain and brackets itself, after the sampler stopped.
            while not self._stop.wait(self._every_s):
                # A sampler whose thread failed refuses a drain once empty; the
                # failure itself is reported on exit (SamplerError).
                if self._sampler.available:
                    self._chunks.append(self._sampler.drain())
                self._burst(self._per_read)
                self._drains += 1
        except BaseException as exc:  # surfaced on exit, never lost with the thread
            self._error = exc
        finally:
            self._thread_cpu_ns = time.thread_time_ns() - cpu0

    def __enter__(self) -> PowerRecorder:
        if self._state != "new":
            raise RuntimeError("PowerRecorder: a recorder records once; create a new one")
        source = self._resolved.source
        if source.in_use:
            raise ValueError(f"device: its power source {source.info.name!r} is already polled by another Sampler "
                             "(a backend's run in progress?)")
        self._sampler = _core.Sampler(source, period_ns=self._period_ns, capacity=self._capacity)
        # Brackets first, so the epoch map covers the first sample.
        self._burst(max(self._per_read, MIN_BRACKETS))
        self._sampler.start()
        self._state = "recording"
        self._thread = threading.Thread(target=self._loop, name="fingrav-power-recorder", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            self._sampler.stop()
            self._state = "failed"
            raise
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Any) -> Literal[False]:
        if self._state != "recording":
            return False
        assert self._sampler is not None and self._thread is not None
        self._stop.set()
        self._thread.join()
        sampler_error: Optional[BaseException] = None
        try:
            self._sampler.stop()
        except _core.SamplerError as err:
            sampler_error = err
        # After the stop nothing more enters the ring: this drain takes the rest
        # (a stopped sampler refuses a drain with nothing left, hence the check).
        if self._sampler.available:
            self._chunks.append(self._sampler.drain())
        self._burst(max(self._per_read, MIN_BRACKETS))
        self._state = "done"
        # The sampler's own failure first: a drain thread error may only follow from it.
        failure: Optional[BaseException] = sampler_error
        if failure is None and self._error is not None:
            failure = RuntimeError(f"PowerRecorder: the drain thread failed: {self._error!r}")
            failure.__cause__ = self._error
        if failure is not None:
            self._state = "failed"
            if exc_type is None:
                raise failure
            return False  # the with block's own exception goes first
        try:
            self._capture = self._build()
            if self._path is not None:
                self._capture.save(self._path)
        except Exception as err:
            if exc_type is None:
                raise
            # The block already failed; its exception is the one to see.
            warnings.warn(f"PowerRecorder: the capture could not be saved after the with block raised: {err!r}",
                          RuntimeWarning, stacklevel=2)
        return False

    def _build(self) -> PowerCapture:
        assert self._sampler is not None
        samples = np.concatenate(self._chunks) if self._chunks else np.empty(0, dtype=SAMPLE_DTYPE)
        stats: dict[str, Any] = dict(self._sampler.stats().as_dict())
        if len(samples) != stats["drained"]:
            raise RuntimeError(f"PowerRecorder: kept {len(samples)} samples but the sampler drained "
                               f"{stats['drained']}; a sample was lost between ring and capture")
        brackets = np.concatenate(self._brackets).astype(np.int64, copy=False)
        stats.update(drain_thread_cpu_ns=int(self._thread_cpu_ns), drains=int(self._drains),
                     epoch_bracket_reads=int(brackets.shape[0]), capacity=self._capacity,
                     brackets_every_s=self._every_s)
        if stats["drops"]:
            warnings.warn(f"PowerRecorder: {stats['drops']} sample(s) were dropped because the ring "
                          f"(capacity={self._capacity}) was full; pass a larger capacity or a shorter "
                          "brackets_every_s", RuntimeWarning, stacklevel=3)
        source = _source_dict(self._resolved.source)
        sensor = self._resolved.sensor
        if sensor is None and self._resolved.sensor_for_period is not None:
            period = float(source["native_period_ns"]) or _measured_period_ns(samples, float(source["tick_ns"]))
            sensor = self._resolved.sensor_for_period(period)
        meta: dict[str, Any] = {
            "device": self._resolved.description,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            # From the epoch brackets themselves: the realtime of the first and
            # last reads, which enclose every sample's read.
            "started_epoch_ns": int(brackets[0, 1]),
            "stopped_epoch_ns": int(brackets[-1, 1]),
            "fingrav_native_version": __version__,
            "python": sys.version.split()[0],
            "host_clock": HOST_CLOCK,
        }
        if self._trace_path is not None:
            meta["trace"] = os.path.basename(self._trace_path)
        return PowerCapture(samples=samples, epoch_brackets=brackets, source=source, sensor=sensor,
                            period_ns=self._period_ns, stats=stats, meta=meta)

    # ------------------------------------------------------------------ traces
    def attach(self, prof: Any, path: Optional[Union[str, os.PathLike[str]]] = None) -> str:
        """Export a finished torch.profiler run's Chrome trace next to the capture; return its path.

        Parameters
        ----------
        prof : torch.profiler.profile
            A profiler whose ``with`` block has ended.
        path : str or path-like, optional
            Where to write the trace (``.json`` or gzipped ``.json.gz``).
            Default: the capture's path with ``.trace.json.gz`` for its
            extension.

        Returns
        -------
        str

        Raises
        ------
        ValueError
            ``prof`` has no ``export_chrome_trace``; no ``path`` and a
            recorder without one.

        Notes
        -----
        The trace stamps kernels on CLOCK_REALTIME (Kineto's
        ``baseTimeNanoseconds`` plus ``ts``), which the capture's
        :meth:`PowerCapture.logger_map` maps the power logs onto. Written to
        a temporary name and renamed, like the capture. Attached before the
        ``with`` block ends, the capture's ``meta["trace"]`` names it.
        """
        if not callable(getattr(prof, "export_chrome_trace", None)):
            raise ValueError(f"prof={prof!r}: must be a finished torch.profiler.profile (no export_chrome_trace)")
        if path is None:
            if self._path is None:
                raise ValueError("path: this recorder saves no capture to put the trace next to; pass path=")
            stem = self._path[:-4] if self._path.endswith(".npz") else self._path
            path = stem + ".trace.json.gz"
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path")
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        # torch gzips when the name ends in .gz: keep the suffix on the temporary name.
        suffix = ".json.gz" if path.endswith(".gz") else ".json"
        fd, tmp = tempfile.mkstemp(prefix=".fingrav-trace-", suffix=suffix, dir=folder)
        os.close(fd)
        try:
            prof.export_chrome_trace(tmp)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self._trace_path = path
        return path


def record_torch(
    step: Callable[[], Any],
    steps: int,
    device: Any,
    out_dir: Union[str, os.PathLike[str]],
    *,
    warmup_steps: int = 1,
    period_ns: Optional[int] = None,
    activities: Optional[Sequence[Any]] = None,
    tail_s: Optional[float] = None,
) -> tuple[str, str]:
    """Run a training step under torch.profiler while recording power: the in-situ inputs in one call.

    Parameters
    ----------
    step : callable
        One step of the application (forward, backward, optimiser), no
        arguments.
    steps : int
        Profiled steps (>= 1); ``prof.step()`` follows each.
    device
        What :class:`PowerRecorder` records (``"nvidia:0"``, a backend, ...).
    out_dir : str or path-like
        Folder for ``trace.json.gz`` and ``power.npz`` (created if missing).
    warmup_steps : int
        Steps run first, recorded for power but outside the profiler, so
        one-off costs (allocation, autotuning, lazy init) stay out of the
        trace (default 1).
    period_ns : int, optional
        Sampler poll period (default: :class:`PowerRecorder`'s).
    activities : sequence of torch.profiler.ProfilerActivity, optional
        Default CPU and CUDA.
    tail_s : float, optional
        Power kept recording after the last step, s, so the logs of its
        last kernels arrive (a window or publication delay). Default: two
        logger periods plus the logger's window, at least 10 ms, at most 3 s.

    Returns
    -------
    (str, str)
        The trace's path and the capture's path.

    Notes
    -----
    The paper's Section IV-A protocol in situ: each kernel execution in
    the steps is one run at a random phase against the logger, and
    :func:`fingrav_native.insitu.profile.profile_trace` turns the pair into
    per-kernel profiles. torch is imported here, not with the package.
    """
    import torch

    steps = integer_in(steps, "steps", 1)
    warmup_steps = integer_in(warmup_steps, "warmup_steps", 0)
    if not callable(step):
        raise ValueError(f"step={step!r}: must be a callable taking no arguments")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise ValueError(f"out_dir={out_dir!r}: must be a folder path")
    if tail_s is not None:
        tail_s = positive_number(tail_s, "tail_s", upper=60.0, allow_zero=True)
    acts = list(activities) if activities is not None else [torch.profiler.ProfilerActivity.CPU,
                                                          torch.profiler.ProfilerActivity.CUDA]
    if not acts:
        raise ValueError("activities: at least one ProfilerActivity is needed")
    out = os.fspath(out_dir)
    os.makedirs(out, exist_ok=True)
    power_path = os.path.join(out, "power.npz")
    trace_path = os.path.join(out, "trace.json.gz")
    cuda = torch.profiler.ProfilerActivity.CUDA in acts and torch.cuda.is_available()

    def sync() -> None:
        # Kernels are asynchronous: wait so the profiler and the logs see them finish.
        if cuda:
            torch.cuda.synchronize()

    with PowerRecorder(device, power_path, period_ns=period_ns) as rec:
        info = rec.source.info
        if tail_s is None:
            period = float(info.native_period_ns) or float(rec.period_ns)
            tail_s = min(3.0, max(0.01, (2 * period + float(info.window_ns)) / 1e9))
        for _ in range(warmup_steps):
            step()
        sync()
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(steps):
                step()
                prof.step()
            sync()
        rec.attach(prof, trace_path)
        time.sleep(tail_s)
    return trace_path, power_path
