"""Glitched readings of an energy counter: what is left out of it, and why, in words.

A cumulative counter integrates power in the firmware, so its value only
grows; a reading that does not (one value off and back at the next read, a
value that stops moving while the clock runs, a read that is not a number)
is a glitch of that reading, not a reset of the counter. Taken as a reset,
one glitch became a fall that no wrap explains and a false break; taken as
energy, a spike shifted every difference that ends at it. The helpers here
find the glitched readings (raw reads) or steps (energy-mode steps), so that
:class:`~fingrav_native.sensors.EnergyCounter` leaves them out and breaks
the counter there (a ``"glitch"`` break): energy is then taken on either
side, never across.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

#: A counter value held (read again unchanged, at least twice) for longer than this many times the median
#: interval between its changes is stuck: the firmware stopped publishing while the reader kept reading.
STUCK_FACTOR = 5.0


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


# ---------------------------------------------------------------------------------------------- raw reads


def stuck_holds(dt: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    """Which intervals between a counter's distinct values are a stuck value (read again, long held).

    ``dt``: each interval between successive distinct values; ``repeats``: how many reads repeated the value
    that starts it. A hold is stuck when read again at least twice and longer than :data:`STUCK_FACTOR` times
    the median interval (at least four intervals needed for a median).
    """
    pos = dt > 0
    if np.sum(pos) < 4:
        return np.zeros(len(dt), dtype=bool)
    med = float(np.median(dt[pos]))
    return np.asarray((repeats >= 2) & (dt > STUCK_FACTOR * med), dtype=bool)


def lone_readings(t: np.ndarray, e: np.ndarray, falls: np.ndarray, most: float) -> dict[int, float]:
    """Readings off their neighbours and back at the next read: index -> how far off (J, + up, - down).

    ``falls``: the intervals ``k`` (reading ``k`` to ``k + 1``) where the counter fell and no wrap explains
    it. Each is a glitch of reading ``k`` (a spike) or of ``k + 1`` (a dip) when, without that reading, its
    neighbours rise at no more than ``most`` (J per tick); of the two, the one whose neighbours rise nearer the
    counter's median rate. A fall that neither explains is a reset, and stays one.
    """
    n = len(e)
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.diff(e) / np.diff(t).astype(np.float64)
    ok_rates = rates[np.isfinite(rates) & (rates >= 0)]
    med = float(np.median(ok_rates)) if len(ok_rates) else 0.0
    out: dict[int, float] = {}
    for k in (int(x) for x in falls):
        best: Optional[tuple[float, int, float]] = None
        for j in (k, k + 1):
            if j in out or j - 1 in out or j + 1 in out or j < 1 or j + 1 >= n or t[j + 1] <= t[j - 1]:
                continue
            rise = float(e[j + 1] - e[j - 1])
            rate = rise / float(t[j + 1] - t[j - 1])
            if rise >= 0 and rate <= most:
                off = float(e[j] - (e[j - 1] + rate * float(t[j] - t[j - 1])))
                if best is None or abs(rate - med) < best[0]:
                    best = (abs(rate - med), j, off)
        if best is not None:
            out[best[1]] = best[2]
    return out


def lone_text(off_j: float) -> str:
    """A glitched reading in words."""
    return (f"a glitched reading: the counter {'jumped' if off_j > 0 else 'dipped'} {joules_text(abs(off_j))} off "
            "its neighbours and came back at the next read")


# ---------------------------------------------------------------------------------------------- steps


def glitched_steps(p: np.ndarray, w: np.ndarray, chained: np.ndarray, limit: float) -> tuple[np.ndarray, list[str]]:
    """Energy-mode steps to leave out, each's class (``"reset"``, ``"pair"``, ``"stuck"``, ``"catch-up"``, ``"nan"``; "" kept).

    Parameters
    ----------
    p, w : numpy.ndarray
        Each step's mean power (W) and window (ns, positive).
    chained : numpy.ndarray of bool
        Whether step ``k`` starts where step ``k - 1`` ended.
    limit : float
        The most a step may read (W).

    Returns
    -------
    (numpy.ndarray of str, list of str)
        Per step its class ("" kept), and for a glitched reading between two steps ("pair") the words.

    Notes
    -----
    Steps are differences of a cumulative counter: one reading off by ``d``
    J and back at the next adds ``d`` to one step and takes it from the
    next, so a negative step whose chained neighbour it cancels (their
    joint power a power) is that reading's glitch, both left out. A
    negative or impossible step alone is a reset (or a glitch no neighbour
    explains). A step of exactly 0 W is a value that did not move (no
    accelerator draws 0 W): a stuck stretch, left out with the step after it,
    where a counter that caught up lands.
    """
    n = len(p)
    fin = np.isfinite(p)
    cls = np.full(n, "", dtype=object)
    cls[~fin] = "nan"
    cls[fin & ((p < 0) | (p > limit))] = "reset"
    words = [""] * n
    good = fin & (p > 0) & (p <= limit)
    med = float(np.median(p[good])) if good.any() else 0.0
    for k in np.flatnonzero(fin & (p < 0)):
        best: Optional[tuple[float, int, float]] = None
        for j in (int(k) - 1, int(k) + 1):
            if not (0 <= j < n) or not fin[j] or cls[j] == "pair" or not chained[max(j, int(k))]:
                continue
            joint = float((p[k] * w[k] + p[j] * w[j]) / (w[k] + w[j]))
            if 0.0 <= joint <= limit and (best is None or abs(joint - med) < best[0]):
                best = (abs(joint - med), j, joint)
        if best is not None:
            j, joint = best[1], best[2]
            first = min(j, int(k))
            off = float((p[first] - joint) * w[first] * 1e-9)
            cls[j] = cls[k] = "pair"
            words[j] = words[int(k)] = lone_text(off)
    zero = fin & (p == 0)
    cls[zero & (cls == "")] = "stuck"
    # The step after a stuck run holds the catch-up of a counter that kept counting underneath.
    after = np.flatnonzero(zero[:-1] & ~zero[1:]) + 1
    after = after[chained[after] & (cls[after] == "")]
    cls[after] = "catch-up"
    return cls, words


def steps_text(cls: np.ndarray, words: list[str], w: np.ndarray, limit_why: str) -> tuple[str, str]:
    """The kind and words of one break over the left-out steps ``cls`` (their windows ``w``, ns)."""
    parts = []
    resets = int(np.sum(cls == "reset"))
    if resets:
        parts.append(f"{resets} counter step(s) of a negative power or above {limit_why} left out (a reset or a "
                     "glitch)")
    pairs = [words[i] for i in np.flatnonzero(cls == "pair")][::2]
    if len(pairs) == 1:
        parts.append(pairs[0])
    elif pairs:
        parts.append(f"{len(pairs)} glitched readings (each off its neighbours and back at the next read)")
    stuck = cls == "stuck"
    if stuck.any():
        parts.append(f"the counter stuck at one value for {int(np.sum(stuck))} step(s) over "
                     f"{float(np.sum(w[stuck])) / 1e6:.4g} ms (0 W, which no accelerator draws)"
                     + ("; the step after, where a counter that kept counting catches up, left out too"
                        if np.any(cls == "catch-up") else ""))
    nans = int(np.sum(cls == "nan"))
    if nans:
        parts.append(f"{nans} counter step(s) not a number")
    kind = "reset" if resets and len(parts) == 1 else "glitch"
    return kind, "; ".join(parts)
