"""An energy counter's readings over a recording: what the energy closure of an in-situ profile checks against.

A GPU's energy counter (AMD's ``energy_accumulator`` in ``gpu_metrics``,
NVML's ``nvmlDeviceGetTotalEnergyConsumption``) integrates power in the
firmware, so the energy between two of its readings is exact up to its
quantum, whatever the power did in between. That makes it the reference an
in-situ profile's energies (each kernel's from the power logs, and the gaps'
between them) must add up to over the trace (the energy closure).
:class:`EnergyCounter` holds the readings as cumulative joules on the
counter's own clock, in segments (a reset, a lost step or a paused sampler
ends one: energy is never taken across a break), and says where each break
is and what it was (:attr:`EnergyCounter.breaks`), so that a closure over
the readings names it rather than blaming a gain or an offset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import numbers, positive_number, power_limit, readonly, tick_length
from fingrav_native.sensors._counter_glitch import (
    glitched_steps,
    joules_text,
    lone_readings,
    lone_text,
    steps_text,
    stuck_holds,
)

#: A forward step of the counter's clock longer than this many times its median interval is a jump (a clock
#: set forward, or a paused reader, which the readings cannot tell apart): a new time base, as a clock that
#: went back, since a clock map fitted on one side misplaces the other.
CLOCK_JUMP_FACTOR = 50.0

#: Where the clock's tick is not given, a step (or a wrapped fall) at more than this many times the counter's
#: median rate is no power (a board idles at a tenth of its peak at the least).
STEP_RATIO = 100.0

#: The kinds of :attr:`EnergyCounter.breaks`: the counter's value fell or stepped beyond any board's power
#: ("reset"), its clock went back or jumped far ahead ("clock": a new time base), it lost a few steps ("gap"),
#: or a reading glitched: off and back, stuck while the clock ran, not a number ("glitch", left out).
BREAK_KINDS = ("reset", "clock", "gap", "glitch")


@dataclass(frozen=True)
class EnergyCounter:
    """Readings of an energy counter: cumulative joules at timestamps on the counter's clock.

    Attributes
    ----------
    t : numpy.ndarray
        int64 timestamps, in the ticks of the counter's clock (a capture maps
        them onto the trace's; with arrays of logs, the logs' clock map does).
        Non-decreasing within a segment.
    energy_j : numpy.ndarray
        float64 cumulative energy at each reading (J), non-decreasing within
        a segment; only differences within a segment mean anything.
    segment : numpy.ndarray
        int64 segment of each reading, non-decreasing: energy is taken between
        readings of one segment only.
    quantum_j : float
        The counter's step (2^-16 J on MI300, 1 mJ on NVIDIA; 0 when unknown):
        a difference of two readings is off by less than one quantum.
    stale_ns : float
        How long before its timestamp a reading's value may have been reached
        (0 when the counter stamps its own values; the poll period when the
        reader stamps the read).
    scope : str
        What the counter measures ("gpu", "socket", "module", ...; "" when
        unknown): named when the closure fails, as a counter of a wider scope
        reads more than the GPU's power.
    name : str
        The counter, in words.
    breaks : tuple of (int, str, str)
        Each break between segments found in the raw readings: the index of
        the first reading after it, its kind (:data:`BREAK_KINDS`: ``"clock"``
        starts a new time base, whose readings a clock map fitted on the other
        does not place) and what happened, in words.

    Raises
    ------
    ValueError
        Naming the field: arrays of different lengths or not 1-D, energies
        not finite, time or energy going back within a segment, segments out
        of order, a negative quantum or staleness.
    """

    t: np.ndarray
    energy_j: np.ndarray
    segment: np.ndarray
    quantum_j: float = 0.0
    stale_ns: float = 0.0
    scope: str = ""
    name: str = "energy counter"
    breaks: tuple[tuple[int, str, str], ...] = ()

    def __post_init__(self) -> None:
        # Each column checked by name (a dict or text would reach numpy, whose TypeError names no argument).
        t = numbers(self.t, "t")
        e = numbers(self.energy_j, "energy_j").astype(np.float64)
        seg = numbers(self.segment, "segment")
        if t.ndim != 1 or e.ndim != 1 or seg.ndim != 1 or not len(t) == len(e) == len(seg):
            raise ValueError(f"t, energy_j, segment: must be 1-D of one length, got shapes {t.shape}, {e.shape} "
                             f"and {seg.shape}")
        if len(t) and not (np.issubdtype(t.dtype, np.integer) and np.issubdtype(seg.dtype, np.integer)):
            raise ValueError(f"t, segment: must be integers (counter ticks, segment numbers), got {t.dtype} and "
                             f"{seg.dtype}")
        if not np.all(np.isfinite(e)):
            raise ValueError("energy_j: must be finite")
        t, seg = t.astype(np.int64), seg.astype(np.int64)
        if np.any(np.diff(seg) < 0):
            raise ValueError("segment: must be non-decreasing (readings in time order)")
        same = np.diff(seg) == 0
        if np.any(same & (np.diff(t) < 0)):
            raise ValueError("t: goes back within a segment; readings must be in time order")
        if np.any(same & (np.diff(e) < 0)):
            raise ValueError("energy_j: goes back within a segment (a reset or a wrap starts a new segment)")
        positive_number(self.quantum_j, "quantum_j", allow_zero=True)
        positive_number(self.stale_ns, "stale_ns", allow_zero=True)
        for name in ("scope", "name"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be a string")
        for b in self.breaks:
            if not (isinstance(b, tuple) and len(b) == 3 and isinstance(b[0], (int, np.integer))
                    and 0 < int(b[0]) < max(len(t), 1) and b[1] in BREAK_KINDS and isinstance(b[2], str)):
                raise ValueError(f"breaks: each must be (index of a reading after the first, one of {BREAK_KINDS}, "
                                 f"text), got {b!r}"[:200])
            if seg[int(b[0])] == seg[int(b[0]) - 1]:
                raise ValueError(f"breaks: reading {int(b[0])} does not start a new segment")
        object.__setattr__(self, "t", readonly(t))
        object.__setattr__(self, "energy_j", readonly(e.copy()))
        object.__setattr__(self, "segment", readonly(seg))

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def time_base(self) -> np.ndarray:
        """The time base of each reading: 0 until the counter's clock first went back, then 1, ..."""
        base = np.zeros(len(self), dtype=np.int64)
        for k, kind, _ in self.breaks:
            if kind == "clock":
                base[int(k):] += 1
        return base

    @classmethod
    def from_reads(cls, t: npt.ArrayLike, energy_j: npt.ArrayLike, *, quantum_j: float = 0.0,
                   wrap_j: Optional[float] = None, stale_ns: float = 0.0, scope: str = "",
                   name: str = "energy counter", tick_ns: Optional[float] = None) -> EnergyCounter:
        """Raw counter readings (in J) as read: repeated values dropped, wraps undone, resets split.

        Parameters
        ----------
        t : array_like of int
            When each value was read or stamped, in the counter's clock ticks.
        energy_j : array_like of float
            The counter's value, in joules (raw counts times the quantum).
        quantum_j, stale_ns, scope, name
            As the attributes.
        wrap_j : float, optional
            The counter's documented range when it wraps (``2**64 * quantum``;
            ``2**32 * 2**-16`` J for a 32-bit accumulator of 2^-16 J): a fall
            is a wrap when the step plus the range is a power a board draws;
            any other fall is a reset. None: every fall is a reset.
        tick_ns : float, optional
            The clock's tick (ns): a step is then bounded by a board's power
            ceiling; None: by :data:`STEP_RATIO` times the counter's median
            rate.

        Returns
        -------
        EnergyCounter

        Notes
        -----
        As :func:`~fingrav_native.sensors.counter_to_logs`: a counter read
        faster than it refreshes repeats its value, and only the first
        reading of each value is kept (the value was reached at or before
        it, within ``stale_ns``). Readings are taken in the order given and
        each break starts a new segment, named in :attr:`breaks` (the same
        rules as :func:`~fingrav_native.sensors.counter_to_logs`): a fall no
        wrap explains or a step beyond any board's power (a reset, a
        glitch), a timestamp that goes back (the counter's clock reset: a
        new time base; sorting would interleave the two), and a forward step
        of the clock longer than :data:`CLOCK_JUMP_FACTOR` times the median
        interval (a clock jump or a paused reader).
        """
        tt = np.asarray(t)
        ee = np.asarray(energy_j, dtype=np.float64)
        if tt.ndim != 1 or ee.ndim != 1 or len(tt) != len(ee):
            raise ValueError(f"t, energy_j: must be 1-D of one length, got {tt.shape} and {ee.shape}")
        if len(tt) and not np.issubdtype(tt.dtype, np.integer):
            raise ValueError(f"t: must be integers (counter ticks), got dtype {tt.dtype}")
        wrap = None if wrap_j is None else positive_number(wrap_j, "wrap_j")
        tick = None if tick_ns is None else tick_length(tick_ns, "tick_ns")
        # In read order: sorting would interleave the two time bases of a clock that went back.
        tt, ee, raw, notes = _glitched_reads(tt.astype(np.int64), ee, wrap, tick)
        if len(ee) == 0:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, np.zeros(0), z, quantum_j=quantum_j, stale_ns=stale_ns, scope=scope, name=name)
        dt = np.diff(tt).astype(np.float64)
        step = np.diff(ee)
        kinds, texts = _read_breaks(tt, ee, dt, step, wrap, tick)
        # A glitch is named on the interval across it (the reading after it ends that interval), left out.
        for key, said in notes.items():
            k = int(np.searchsorted(raw, key)) - 1
            if 0 <= k < len(dt):
                kinds[k], texts[k] = ("clock", f"{texts[k]}; {said}") if kinds[k] == "clock" else ("glitch", said)
        if wrap is not None:
            step = np.where((kinds == "") & (step < 0), step + wrap, step)
        brk = kinds != ""
        seg = np.concatenate([[0], np.cumsum(brk)]).astype(np.int64)
        cum = np.concatenate([[0.0], np.cumsum(np.where(brk, 0.0, step))])
        breaks = tuple((int(k) + 1, str(kinds[k]), texts[k]) for k in np.flatnonzero(brk))
        return cls(tt, cum, seg, quantum_j=quantum_j, stale_ns=stale_ns, scope=scope, name=name, breaks=breaks)

    @classmethod
    def from_steps(cls, end_ts: npt.ArrayLike, window_ns: npt.ArrayLike, power_w: npt.ArrayLike, *,
                   tick_ns: float, quantum_j: float = 0.0, stale_ns: float = 0.0, scope: str = "",
                   name: str = "energy counter") -> EnergyCounter:
        """A counter rebuilt from its steps: each the mean power over a window ending at a timestamp.

        What an energy-mode power source logs (AMD ``gpu_metrics`` energy,
        NVML's energy mode, :func:`~fingrav_native.sensors.counter_to_logs`):
        ``power_w`` over ``(end_ts - window_ns, end_ts]``. Steps that chain
        (each starts where the previous ended, to within one tick) are one
        segment; a gap (a lost step, a reset the source dropped) starts the
        next.

        Parameters
        ----------
        end_ts : array_like of int
            Each step's end, in the counter's clock ticks.
        window_ns : array_like
            Each step's length, ns.
        power_w : array_like
            Each step's mean power, W.
        tick_ns : float
            The clock's tick, ns.
        quantum_j, stale_ns, scope, name
            As the attributes.

        Returns
        -------
        EnergyCounter
        """
        end = numbers(end_ts, "end_ts")
        w = numbers(window_ns, "window_ns").astype(np.float64)
        # Not a number, negative or past any board: a glitched step, left out and named below, not refused.
        p = numbers(power_w, "power_w").astype(np.float64)
        if end.ndim != 1 or w.shape != end.shape or p.shape != end.shape:
            raise ValueError(f"end_ts, window_ns, power_w: must be 1-D of one length, got {end.shape}, {w.shape} "
                             f"and {p.shape}")
        if len(end) and not np.issubdtype(end.dtype, np.integer):
            raise ValueError(f"end_ts: must be integers (counter ticks), got dtype {end.dtype}")
        tick = tick_length(tick_ns, "tick_ns")
        limit, why = power_limit(None)
        # In the order recorded: sorting would interleave the two time bases of a clock that went back.
        with np.errstate(invalid="ignore", over="ignore"):
            bad = np.flatnonzero(~np.isfinite(w) | (w < 0) | ~(w / tick < 2.0**62))
        if len(bad):
            raise ValueError(f"window_ns: each step's length must be a finite number of ns, 0 or more, within the "
                             f"counter's clock (2**62 ticks); step {int(bad[0])} is {float(w[bad[0]])!r}")
        valid = w > 0  # a step of no length holds no energy
        end, w, p = end[valid].astype(np.int64), w[valid], p[valid]
        start = end - np.round(w / tick).astype(np.int64)
        chained = np.zeros(len(end), dtype=bool)
        chained[1:] = np.abs(start[1:] - end[:-1]) <= 1
        what, words = glitched_steps(p, w, chained, limit)
        out, w_all = what != "", w
        kept = np.flatnonzero(~out)
        lost = np.cumsum(out)[kept]
        end, w, p, start = end[kept], w[kept], p[kept], start[kept]
        if len(end) == 0 and out.any():
            raise ValueError(f"the energy counter ({name}): all {len(out)} of its steps are left out, no energy "
                             f"left to take: {steps_text(what, words, w_all, why)[1]}"[:600])
        if len(end) == 0:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, np.zeros(0), z, quantum_j=quantum_j, stale_ns=stale_ns, scope=scope, name=name)
        # A step that does not start where the previous one ended (one tick of rounding allowed) breaks the chain.
        brk = np.concatenate([[True], np.abs(start[1:] - end[:-1]) > 1])
        # A step left out (a reset, a glitched reading, a stuck value, not a number) breaks it too.
        brk[1:] |= lost[1:] != lost[:-1]
        seg_of_step = np.cumsum(brk) - 1
        e_step = p * w * 1e-9
        # Per segment: its first step's start at the energy reached so far, then each step's end.
        n_seg = int(seg_of_step[-1]) + 1
        first = np.flatnonzero(brk)
        t_out = np.empty(len(end) + n_seg, dtype=np.int64)
        seg_out = np.empty(len(end) + n_seg, dtype=np.int64)
        e_out = np.empty(len(end) + n_seg)
        pos_end = np.arange(len(end)) + seg_of_step + 1  # each step's end after its segment's opening read
        pos_start = first + np.arange(n_seg)
        cum = np.cumsum(e_step)
        t_out[pos_end], t_out[pos_start] = end, start[first]
        e_out[pos_end] = cum
        e_out[pos_start] = cum[first] - e_step[first]
        seg_out[pos_end], seg_out[pos_start] = seg_of_step, np.arange(n_seg)
        breaks = _step_breaks(first, start, end, kept, lost, (what, words, w_all, why), tick, pos_start, seg_of_step)
        return cls(t_out, e_out, seg_out, quantum_j=quantum_j, stale_ns=stale_ns, scope=scope, name=name,
                   breaks=tuple(breaks))

    def describe(self) -> str:
        """The counter in words: its name, scope and quantum."""
        parts = [self.name]
        if self.scope:
            parts.append(f"{self.scope} scope")
        if self.quantum_j > 0:
            parts.append(f"quantum {joules_text(self.quantum_j)}")
        return ", ".join(parts)


def _step_breaks(first: np.ndarray, start: np.ndarray, end: np.ndarray, kept: np.ndarray, lost: np.ndarray,
                 left_out: tuple[np.ndarray, list[str], np.ndarray, str], tick: float, pos_start: np.ndarray,
                 seg_of_step: np.ndarray) -> list[tuple[int, str, str]]:
    """Where each segment after the first opens, and why the chain broke there: a clock reset or jump, steps left
    out (``left_out``: :func:`glitched_steps`'s kinds and words, every step's length, the power limit's reason), a
    gap."""
    what, words, w_all, why = left_out
    breaks = []
    for k in first[1:]:
        if end[k] < end[k - 1]:
            kind, text = "clock", (f"the counter's clock went back by {(end[k - 1] - end[k]) * tick / 1e6:.4g} ms "
                                   "(a clock reset: a new time base)")
        elif lost[k] != lost[k - 1]:
            gone = slice(int(kept[k - 1]) + 1, int(kept[k]))
            kind, text = steps_text(what[gone], words[gone], w_all[gone], why)
        elif start[k] - end[k - 1] > CLOCK_JUMP_FACTOR * float(np.median(end - start)):
            kind, text = "clock", (f"the counter's clock jumped {(start[k] - end[k - 1]) * tick / 1e6:.4g} ms ahead "
                                   "(a clock jump, or a paused reader: taken as a new time base)")
        else:
            kind, text = "gap", f"{(start[k] - end[k - 1]) * tick / 1e6:.4g} ms without counter steps"
        breaks.append((int(pos_start[seg_of_step[k]]), kind, text))
    return breaks


def _glitched_reads(t: np.ndarray, e: np.ndarray, wrap: Optional[float], tick_ns: Optional[float]) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, dict[int, str]]:
    """Raw reads without repeats and glitched readings: times, values, their raw indices, and the glitches.

    The glitches: raw index of the reading after each -> its words. A read that is not a number, a value held
    (read again) far longer than the counter moves (:func:`~fingrav_native.sensors._counter_glitch.stuck_holds`),
    a value off its neighbours and back at the next read (:func:`~fingrav_native.sensors._counter_glitch.lone_readings`).
    """
    raw = np.arange(len(e))
    notes: dict[int, list[str]] = {}
    bad = ~np.isfinite(e)
    if bad.any():
        edge = np.diff(np.concatenate([[0], bad.astype(np.int8), [0]]))
        for a, b in zip(np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)):
            notes.setdefault(int(b), []).append(f"{int(b - a)} reading(s) of the counter not a number")
        t, e, raw = t[~bad], e[~bad], raw[~bad]
    if len(e):
        keep = np.concatenate([[True], e[1:] != e[:-1]])
        first = np.flatnonzero(keep)
        repeats = np.diff(np.append(first, len(e))) - 1
        t, e, raw = t[keep], e[keep], raw[keep]
        dt = np.diff(t).astype(np.float64)
        for k in np.flatnonzero(stuck_holds(dt, repeats[:-1])):
            notes.setdefault(int(raw[k + 1]), []).append(
                f"the counter stuck at {joules_text(float(e[k]))} for {int(repeats[k])} repeated reads over "
                f"{_ticks_text(float(dt[k]), tick_ns)} (then moved {joules_text(float(e[k + 1] - e[k]))}): the "
                "interval across it left out")
    if len(e) >= 3:
        dt, step = np.diff(t).astype(np.float64), np.diff(e)
        most, _ = _most_step(dt, step, tick_ns)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            wrapped = (step + (wrap if wrap is not None else math.nan)) / dt
        falls = np.flatnonzero((step < 0) & (dt > 0) & ~(wrapped <= most))
        lone = lone_readings(t, e, falls, most)
        if lone:
            for j, off in lone.items():
                notes.setdefault(int(raw[j + 1]), []).append(lone_text(off))
            drop = np.zeros(len(e), dtype=bool)
            drop[list(lone)] = True
            t, e, raw = t[~drop], e[~drop], raw[~drop]
    return t, e, raw, {k: "; ".join(v) for k, v in notes.items()}


def _ticks_text(ticks: float, tick_ns: Optional[float]) -> str:
    return f"{ticks * tick_ns / 1e6:.4g} ms" if tick_ns is not None else f"{ticks:.4g} ticks"


def _most_step(dt: np.ndarray, step: np.ndarray, tick_ns: Optional[float]) -> tuple[float, str]:
    """The most the counter may rise per tick (J), and why: a board's ceiling, else STEP_RATIO x its median rate."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rising = (step / dt)[(dt > 0) & (step > 0)]
    if tick_ns is not None:
        limit, why = power_limit(None)
        return limit * tick_ns * 1e-9, why
    return (STEP_RATIO * float(np.median(rising)) if len(rising) >= 2 else math.inf,
            f"{STEP_RATIO:g} x the counter's median rate")


def _read_breaks(t: np.ndarray, e: np.ndarray, dt: np.ndarray, step: np.ndarray, wrap: Optional[float],
                 tick_ns: Optional[float]) -> tuple[np.ndarray, list[str]]:
    """Each interval between raw readings: "" where it is energy, else the kind of break, and the words for it.

    The most a step may hold: a board's ceiling (:func:`~fingrav_native._checks.power_limit`) over its interval
    where the tick is known; else :data:`STEP_RATIO` times the counter's median rate.
    """
    pos = dt > 0
    med = float(np.median(dt[pos])) if np.sum(pos) >= 4 else math.inf
    most, why = _most_step(dt, step, tick_ns)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rate = step / dt
        wrapped = (step + (wrap if wrap is not None else math.nan)) / dt
    kinds = np.full(len(dt), "", dtype=object)
    texts = [""] * len(dt)
    unit = "ms" if tick_ns is not None else "ticks"
    scale = (tick_ns or 1.0) / (1e6 if tick_ns is not None else 1.0)
    for k in range(len(dt)):
        if dt[k] < 0:
            kinds[k], texts[k] = "clock", (f"the counter's clock went back by {-dt[k] * scale:.4g} {unit} (a clock "
                                           "reset: a new time base)")
        elif dt[k] > CLOCK_JUMP_FACTOR * med:
            kinds[k], texts[k] = "clock", (f"the counter's clock jumped {dt[k] * scale:.4g} {unit} ahead, "
                                           f"{dt[k] / med:.0f} x its median interval (a clock jump, or a paused "
                                           "reader: taken as a new time base)")
        elif step[k] < 0 and not (wrap is not None and wrapped[k] <= most):
            kinds[k], texts[k] = "reset", (f"the counter fell from {joules_text(float(e[k]))} to "
                                           f"{joules_text(float(e[k + 1]))} (a reset"
                                           + (f": no wrap of {joules_text(wrap)} explains it)" if wrap else ")"))
        elif step[k] >= 0 and not rate[k] <= most:
            kinds[k], texts[k] = "reset", (f"the counter stepped {joules_text(float(step[k]))} in "
                                           f"{dt[k] * scale:.4g} {unit}, above {why} (a reset or a glitch)")
    return kinds, texts


__all__ = ["BREAK_KINDS", "CLOCK_JUMP_FACTOR", "STEP_RATIO", "EnergyCounter", "joules_text"]
