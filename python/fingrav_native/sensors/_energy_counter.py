"""An energy counter's readings over a recording: what the energy closure of an in-situ profile checks against.

A GPU's energy counter (AMD's ``energy_accumulator`` in ``gpu_metrics``,
NVML's ``nvmlDeviceGetTotalEnergyConsumption``) integrates power in the
firmware, so the energy between two of its readings is exact up to its
quantum, whatever the power did in between. That makes it the reference an
in-situ profile's energies (each kernel's from the power logs, and the gaps'
between them) must add up to over the trace (issue 28's energy closure).
:class:`EnergyCounter` holds the readings as cumulative joules on the
counter's own clock, in segments (a reset, a lost step or a paused sampler
ends one: energy is never taken across a break).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import numbers, positive_number, readonly


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

    def __post_init__(self) -> None:
        # Each column checked by name (a dict or text was a TypeError from numpy).
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
        object.__setattr__(self, "t", readonly(t))
        object.__setattr__(self, "energy_j", readonly(e.copy()))
        object.__setattr__(self, "segment", readonly(seg))

    def __len__(self) -> int:
        return int(self.t.shape[0])

    @classmethod
    def from_reads(cls, t: npt.ArrayLike, energy_j: npt.ArrayLike, *, quantum_j: float = 0.0,
                   wrap_j: Optional[float] = None, stale_ns: float = 0.0, scope: str = "",
                   name: str = "energy counter") -> EnergyCounter:
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
            The counter's range when it wraps (``2**64 * quantum``); None: a
            backwards step is a reset and starts a new segment.

        Returns
        -------
        EnergyCounter

        Notes
        -----
        As :func:`~fingrav_native.sensors.counter_to_logs`: a counter read
        faster than it refreshes repeats its value, and only the first
        reading of each value is kept (the value was reached at or before
        it, within ``stale_ns``).
        """
        tt = np.asarray(t)
        ee = np.asarray(energy_j, dtype=np.float64)
        if tt.ndim != 1 or ee.ndim != 1 or len(tt) != len(ee):
            raise ValueError(f"t, energy_j: must be 1-D of one length, got {tt.shape} and {ee.shape}")
        if len(tt) and not np.issubdtype(tt.dtype, np.integer):
            raise ValueError(f"t: must be integers (counter ticks), got dtype {tt.dtype}")
        order = np.argsort(tt, kind="stable")
        tt, ee = tt[order].astype(np.int64), ee[order]
        if len(ee):
            keep = np.concatenate([[True], ee[1:] != ee[:-1]])
            tt, ee = tt[keep], ee[keep]
        step = np.diff(ee)
        back = step < 0
        if wrap_j is not None:
            step = np.where(back, step + positive_number(wrap_j, "wrap_j"), step)
            back = np.zeros_like(back)
        # A reset (or an unknown wrap) starts a new segment at its own value.
        seg = np.concatenate([[0], np.cumsum(back)]).astype(np.int64) if len(ee) else np.zeros(0, dtype=np.int64)
        cum = np.concatenate([[0.0], np.cumsum(np.where(back, 0.0, step))]) if len(ee) else np.zeros(0)
        return cls(tt, cum, seg, quantum_j=quantum_j, stale_ns=stale_ns, scope=scope, name=name)

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
        end = np.asarray(end_ts)
        w = np.asarray(window_ns, dtype=np.float64)
        p = np.asarray(power_w, dtype=np.float64)
        if end.ndim != 1 or w.shape != end.shape or p.shape != end.shape:
            raise ValueError(f"end_ts, window_ns, power_w: must be 1-D of one length, got {end.shape}, {w.shape} "
                             f"and {p.shape}")
        if len(end) and not np.issubdtype(end.dtype, np.integer):
            raise ValueError(f"end_ts: must be integers (counter ticks), got dtype {end.dtype}")
        tick = positive_number(tick_ns, "tick_ns")
        ok = (w > 0) & np.isfinite(p) & np.isfinite(w)
        order = np.argsort(end[ok], kind="stable")
        end, w, p = end[ok][order].astype(np.int64), w[ok][order], p[ok][order]
        start = end - np.round(w / tick).astype(np.int64)
        if len(end) == 0:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, np.zeros(0), z, quantum_j=quantum_j, stale_ns=stale_ns, scope=scope, name=name)
        # A step that does not start where the previous one ended (one tick of rounding allowed) breaks the chain.
        brk = np.concatenate([[True], np.abs(start[1:] - end[:-1]) > 1])
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
        return cls(t_out, e_out, seg_out, quantum_j=quantum_j, stale_ns=stale_ns, scope=scope, name=name)

    def describe(self) -> str:
        """The counter in words: its name, scope and quantum."""
        parts = [self.name]
        if self.scope:
            parts.append(f"{self.scope} scope")
        if self.quantum_j > 0:
            parts.append(f"quantum {joules_text(self.quantum_j)}")
        return ", ".join(parts)


def joules_text(j: float) -> str:
    """An energy with a unit that keeps 3-4 significant figures readable."""
    if not math.isfinite(j):
        return "?"
    a = abs(j)
    if a >= 1.0 or a == 0.0:
        return f"{j:.4g} J"
    if a >= 1e-3:
        return f"{1e3 * j:.4g} mJ"
    return f"{1e6 * j:.4g} uJ"
