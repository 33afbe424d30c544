"""Steady-state execution (SSE) and steady-state power (SSP): which execution to profile.

Power varies across the executions of a run (paper Section III, C3). FinGraV
profiles two executions of interest (Section IV-A): the SSE execution, the
first one after the warm-up executions (three from idle), and the SSP
execution, the first one beyond which power no longer changes, found by a
binary search on the number of executions per run (Section IV-B step 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

__all__ = [
    "SSE_EXECUTIONS",
    "SSE_INDEX",
    "PowerMeasurement",
    "SspSearch",
    "SspStep",
    "find_ssp_executions",
]

#: Executions per run for the SSE profile: three warm-up executions, then the SSE one.
SSE_EXECUTIONS = 4
#: Index (0-based) of the SSE execution within a run.
SSE_INDEX = SSE_EXECUTIONS - 1


@dataclass(frozen=True)
class PowerMeasurement:
    """Mean power of the last execution over a set of runs, with its standard error."""

    mean_w: float
    stderr_w: float
    count: int  # LOIs behind the mean


@dataclass(frozen=True)
class SspStep:
    """One probe of the SSP search."""

    executions: int
    measurement: PowerMeasurement
    phase: str       # "start", "double" or "bisect"
    reference: int   # executions of the probe it was compared with
    steady: bool     # whether it matched the reference within the tolerance


@dataclass(frozen=True)
class SspSearch:
    """Result of the SSP search: the executions per run, and every probe taken."""

    executions: int
    steady_power_w: float
    trace: tuple[SspStep, ...]
    converged: bool  # False when max_executions was reached without a steady pair


def _same(a: PowerMeasurement, b: PowerMeasurement, tolerance: float, sigmas: float) -> bool:
    # Equal within the relative tolerance, widened by the measurements' own
    # noise so a noisy probe is not mistaken for a change.
    allowed = max(tolerance * abs(b.mean_w), sigmas * math.hypot(a.stderr_w, b.stderr_w))
    return abs(a.mean_w - b.mean_w) <= allowed


def find_ssp_executions(
    measure: Callable[[int], PowerMeasurement],
    *,
    start: int = SSE_EXECUTIONS,
    tolerance: float = 0.02,
    max_executions: int = 1024,
    sigmas: float = 2.0,
) -> SspSearch:
    """Find the executions per run that reach steady-state power (SSP).

    Parameters
    ----------
    measure : callable
        ``measure(n)`` runs the kernel in runs of ``n`` executions and
        returns the mean power of the *last* execution (a
        :class:`PowerMeasurement`). Each call costs runs on the device; the
        search makes O(log n) calls.
    start : int
        First count probed (the paper starts at four, the SSE run).
    tolerance : float
        Relative change in power below which two probes count as the same
        level, in (0, 1).
    max_executions : int
        Upper bound of the doubling phase.
    sigmas : float
        Differences within this many combined standard errors also count as
        the same level.

    Returns
    -------
    SspSearch
        The smallest count found to reach the steady level, the level, and
        the trace of every probe.

    Raises
    ------
    ValueError
        Bad arguments, named.

    Notes
    -----
    The paper's step 3 (Section IV-B): "do a binary search starting at four
    executions per run (doubling or halving #executions) to ascertain the
    number of executions needed to attain the SSP profile".

    1. Measure ``P(start)``.
    2. Doubling: measure ``P(2n)`` for n = start, 2 start, ... until
       ``P(2n)`` equals ``P(n)`` within the tolerance: power no longer
       changes between n and 2n executions, so steady state is reached by n.
       The level is ``P(2n)``.
    3. Bisection: between the last count that was not steady and n, probe
       the midpoint; if its power matches the level it is steady (move the
       upper end down), else move the lower end up; stop when the ends meet.
    4. Return the upper end: the smallest count whose last execution is at
       the steady level.

    Examples
    --------
    >>> levels = {n: PowerMeasurement(100.0 if n >= 10 else 80.0 + n, 0.1, 50) for n in range(1, 65)}
    >>> find_ssp_executions(levels.__getitem__, tolerance=0.01).executions
    10
    """
    if not callable(measure):
        raise ValueError("measure: must be callable as measure(executions) -> PowerMeasurement")
    if not isinstance(start, int) or start < 1:
        raise ValueError(f"start={start!r}: must be an integer >= 1")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance={tolerance}: must be in (0, 1)")
    if not isinstance(max_executions, int) or max_executions < 2 * start:
        raise ValueError(f"max_executions={max_executions!r}: must be an integer >= 2 * start ({2 * start})")
    if not sigmas >= 0:
        raise ValueError(f"sigmas={sigmas}: must be >= 0")

    cache: dict[int, PowerMeasurement] = {}

    def probe(n: int) -> PowerMeasurement:
        if n not in cache:
            m = measure(n)
            if not isinstance(m, PowerMeasurement) or not math.isfinite(m.mean_w):
                raise ValueError(f"measure({n}): returned {m!r}, not a PowerMeasurement with a finite mean")
            cache[n] = m
        return cache[n]

    prev_n = start
    prev = probe(start)
    trace: list[SspStep] = [SspStep(start, prev, "start", start, False)]
    lo = start  # largest count known not to be steady (or the start)
    converged = False
    n = start
    while 2 * n <= max_executions:
        nxt = probe(2 * n)
        steady = _same(prev, nxt, tolerance, sigmas)
        trace.append(SspStep(2 * n, nxt, "double", prev_n, steady))
        if steady:
            converged = True
            break
        lo = n
        prev_n, prev = 2 * n, nxt
        n *= 2
    if not converged:
        return SspSearch(n, prev.mean_w, tuple(trace), False)
    level = probe(2 * n)
    hi = n
    # The start itself may already be steady.
    if lo == start and n == start:
        return SspSearch(start, level.mean_w, tuple(trace), True)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        m = probe(mid)
        steady = _same(m, level, tolerance, sigmas)
        trace.append(SspStep(mid, m, "bisect", 2 * n, steady))
        if steady:
            hi = mid
        else:
            lo = mid
    return SspSearch(hi, level.mean_w, tuple(trace), True)
