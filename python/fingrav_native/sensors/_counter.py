"""Energy counters as windowed logs with exact windows.

Differencing an energy counter gives the exact average power over the
interval between two reads: a windowed log whose both ends are known, so
it is placed exactly once the window is known. AMD MI300's
``energy_accumulator`` counts 2^-16 J steps about every 1 ms, stamped with the
firmware clock; NVIDIA's ``nvmlDeviceGetTotalEnergyConsumption`` counts mJ
and refreshes every 10-100 ms. Differenced naively, reads go wrong in five
ways; each is told apart here and counted, and none is ever turned into power:

* a counter read faster than it refreshes repeats its value ("stuck"), and
  naive differences give 0 W followed by a spike: only reads where the
  counter moved are kept, each window running from the previous move;
* a counter of fixed width wraps: the value falls to near zero from near
  its range, and the step plus the range is a power the board can draw;
* a counter that resets (driver reload) also falls, but the wrap would
  imply a power no board draws (a 15.5 MW step), and with no range known
  a fall is never a wrap;
* two reads out of order (a swap, a glitched value) give a fall between
  two steps that are too large: the fall and both steps beside it are left
  out (naively a negative step and doubled power either side);
* a timestamp that goes backwards (the firmware's clock reset) starts a
  new time base: the interval across it and the two beside it are left
  out (naively, sorting interleaved two time bases into steps 10x the true
  power).

A step that would be more power than a board draws (10 kW, more than any
accelerator draws, or 3 x the board's ``max_power_w``) is left out too. Every discontinuity is
counted in :class:`CounterLogs` and said once in a
:class:`CounterDiscontinuityWarning`.

Quantisation: a step of ``n`` quanta over ``dt`` has an error of up to one
quantum, ``quantum / dt`` watts; the largest is reported.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import positive_number, power_limit, short_repr, whole_numbers
from fingrav_native._errors import FingravWarning
from fingrav_native.records._log_layouts import COUNTER_LOG_DTYPE as COUNTER_LOG_DTYPE  # re-exported (the face)


class CounterDiscontinuityWarning(FingravWarning):
    """Counter reads with a discontinuity (a reset, reads out of order, a clock reset): the intervals are left out."""


@dataclass(frozen=True)
class CounterLogs:
    """Counter reads turned into windowed logs.

    Attributes
    ----------
    samples : numpy.ndarray
        COUNTER_LOG_DTYPE: ``total`` is the average power over ``(source_ts -
        window_ns, source_ts]``, ``energy_j`` the energy in it, ``quantum_w``
        its quantisation error bound.
    reads : int
        Reads given.
    stuck : int
        Reads that repeated the previous value (dropped: the counter had not refreshed).
    wraps : int
        Steps corrected for a wrap of the counter.
    resets : int
        Falls of the counter that no wrap explains (a reset, or reads out of
        order), each dropping its interval and the two beside it; and gaps
        longer than ``max_window_ns`` (the sampler paused), dropped.
    max_quantum_w : float
        Largest quantisation error of a log (W).
    clock_resets : int
        Timestamps earlier than the read before them (the logger's clock
        reset, or stamps out of order): the interval across each and the two
        beside it are dropped.
    implausible : int
        Steps left out because their power exceeds what a board draws
        (10 kW, or 3 x ``max_power_w``).
    """

    samples: np.ndarray
    reads: int
    stuck: int
    wraps: int
    resets: int
    max_quantum_w: float
    clock_resets: int = 0
    implausible: int = 0


def _reads(timestamps_ns: npt.ArrayLike, energy_j: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The reads as int64 ns and float64 J, checked (errors name the argument)."""
    t = whole_numbers(timestamps_ns, "timestamps_ns", int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max))
    if isinstance(energy_j, (str, bytes)) or energy_j is None:
        raise ValueError(f"energy_j={short_repr(energy_j)}: must be an array of counter reads (J)")
    try:
        e = np.asarray(energy_j, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"energy_j: must be numbers (J), got {short_repr(energy_j)} ({exc})") from None
    if t.ndim != 1 or e.ndim != 1 or len(t) != len(e):
        raise ValueError(f"timestamps_ns, energy_j: must be 1-D of one length, got {t.shape} and {e.shape}")
    if not np.all(np.isfinite(e)):
        raise ValueError("energy_j: must be finite")
    return t, e


def counter_to_logs(timestamps_ns: npt.ArrayLike, energy_j: npt.ArrayLike, *, quantum_j: float = 0.0,
                    wrap_j: Optional[float] = None, max_window_ns: float = 4.0e9,
                    max_power_w: Optional[float] = None) -> CounterLogs:
    """Difference energy-counter reads into windowed power logs with exact windows.

    Parameters
    ----------
    timestamps_ns : array_like of int
        When each value was taken, in the logger's clock (the firmware's
        timestamp where the counter carries one; else the read time), in
        the order the reads were taken. Integers that fit in int64 (the
        logs' ``source_ts``): a uint64 stamp past 2**63 is refused, not
        wrapped to a negative time.
    energy_j : array_like of float
        The counter, in joules (scale raw counts by the quantum first).
    quantum_j : float
        The counter's step (2^-16 J on MI300, 1e-3 J on NVIDIA).
    wrap_j : float, optional
        The counter's range when it wraps (e.g. ``2**64 * quantum``); None:
        a backwards step is a reset.
    max_window_ns : float
        Longest window kept (``window_ns`` is 32-bit); a longer gap (the
        sampler paused) is dropped, counted with the resets.
    max_power_w : float, optional
        The board's power limit where known: steps above 3 x it are not
        power. Default: a 10 kW ceiling, more than any accelerator draws
        (the largest are rated 1-3 kW).

    Returns
    -------
    CounterLogs

    Warns
    -----
    CounterDiscontinuityWarning
        Once, where any interval was left out for a reset, reads out of
        order, a clock reset, a gap or an implausible step: what, how many,
        and the first read concerned.

    Notes
    -----
    1. In read order, drop a read whose value or timestamp equals the
       previous one (stuck: the counter refreshes more slowly than it is
       read), so each kept read is a refresh, and its window runs from the
       previous kept read. Where the timestamps are read times rather than
       the counter's own, the window's ends are known to within a read
       interval.
    2. A timestamp below the previous one is a clock reset (or stamps out
       of order): the interval across it and the two beside it are dropped
       (sorting would interleave two time bases).
    3. A fall of the counter is a wrap when ``wrap_j`` is given and the
       step plus ``wrap_j`` is a power the board can draw (the value fell
       from within one step of the range); any other fall is a reset or
       reads out of order, and its interval and the two beside it (which
       hold the doubled or misplaced energy of a swap) are dropped.
    4. ``power = step / window``, kept when ``window <= max_window_ns``
       and the power within the ceiling; its quantisation error is
       ``quantum_j / window``.

    Examples
    --------
    >>> logs = counter_to_logs([0, 1_000_000, 1_500_000, 2_000_000], [0.0, 0.3, 0.3, 0.6])
    >>> logs.samples["total"].tolist(), logs.samples["window_ns"].tolist(), logs.stuck
    ([300.0, 300.0], [1000000, 1000000], 1)
    """
    t, e = _reads(timestamps_ns, energy_j)
    limit, why = power_limit(max_power_w)
    # A step coarser than a second of the ceiling's energy resolves no power (its quantum_w is beyond any board).
    q = positive_number(quantum_j, "quantum_j", allow_zero=True, upper=limit)
    wrap = None if wrap_j is None else positive_number(wrap_j, "wrap_j")
    cap = positive_number(max_window_ns, "max_window_ns", upper=float(np.iinfo(np.uint32).max))
    if wrap is not None and len(e) and (e.min() < 0 or e.max() >= wrap):
        raise ValueError(f"energy_j: reads must lie in [0, wrap_j={wrap:g}) for a counter that wraps, got "
                         f"[{e.min():g}, {e.max():g}]")
    n_reads = len(t)
    keep = np.ones(n_reads, dtype=bool)
    keep[1:] = (e[1:] != e[:-1]) & (t[1:] != t[:-1])
    stuck = int(np.sum(~keep))
    t, e, pos = t[keep], e[keep], np.flatnonzero(keep)
    dt = np.diff(t).astype(np.float64)
    de = np.diff(e)
    clock_back = dt <= 0
    fell = (de < 0) & ~clock_back
    is_wrap = np.zeros_like(fell)
    if wrap is not None:
        # An overflow (a range of 1e305 J) is a power no board draws: inf, not a wrap.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            is_wrap = fell & ((de + wrap) / (dt * 1e-9) <= limit)
        de = np.where(is_wrap, de + wrap, de)
    reset = fell & ~is_wrap
    # A fall nothing explains, or a stamp going back, spoils the steps beside it too: a swapped pair of
    # values doubles both, a swapped pair of stamps halves both (a reset costs two good steps, rarely).
    broken = reset | clock_back
    spoiled = broken.copy()
    spoiled[1:] |= broken[:-1]
    spoiled[:-1] |= broken[1:]
    gap = ~spoiled & (dt > cap)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf: beyond the ceiling, dropped
        power = de / (dt * 1e-9)
    implausible = ~spoiled & ~gap & (power > limit)
    good = ~spoiled & ~gap & ~implausible
    out = np.zeros(int(good.sum()), dtype=COUNTER_LOG_DTYPE)
    out["source_ts"] = t[1:][good]
    out["window_ns"] = dt[good]
    out["energy_j"] = de[good]
    out["total"] = power[good]
    out["quantum_w"] = q / (dt[good] * 1e-9)
    result = CounterLogs(out, n_reads, stuck, int(is_wrap.sum()), int(reset.sum() + gap.sum()),
                         float(out["quantum_w"].max()) if len(out) else 0.0, int(clock_back.sum()),
                         int(implausible.sum()))
    _warn_discontinuities(pos, t, reset, clock_back, gap, implausible, len(power) - len(out), why)
    return result


def _warn_discontinuities(pos: np.ndarray, t: np.ndarray, reset: np.ndarray, clock_back: np.ndarray,
                          gap: np.ndarray, implausible: np.ndarray, dropped: int, why: str) -> None:
    """One warning naming each kind of discontinuity found, with the first read of each."""
    said = []
    for mask, what in ((reset, "falls of the counter that no wrap explains (a reset, or reads out of order: the "
                               "interval and the two beside it dropped)"),
                       (clock_back, "timestamps earlier than the read before (the logger's clock reset, or stamps out of "
                                    "order: the interval and the two beside it dropped)"),
                       (gap, "gaps longer than max_window_ns"),
                       (implausible, f"steps above {why}")):
        if mask.any():
            k = int(np.flatnonzero(mask)[0])
            said.append(f"{int(mask.sum())} {what}, the first at read {int(pos[k + 1])} (t={int(t[k + 1])})")
    if said:
        warnings.warn(CounterDiscontinuityWarning(
            f"counter_to_logs: {'; '.join(said)}; {dropped} interval(s) left out, none turned into power"),
            stacklevel=3)
