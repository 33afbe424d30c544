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

from fingrav_native._checks import flag, fraction, integer_in, positive_number

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


def _check_search(measure: Callable[[int], PowerMeasurement], start: int, tolerance: float, max_executions: int,
                  sigmas: float) -> None:
    """Refuse bad search arguments, by name."""
    if not callable(measure):
        raise ValueError("measure: must be callable as measure(executions) -> PowerMeasurement")
    integer_in(start, "start", 1, 1 << 40)
    fraction(tolerance, "tolerance")
    integer_in(max_executions, "max_executions", 2 * start, 1 << 40)
    positive_number(sigmas, "sigmas", allow_zero=True)


class _Probes:
    """``measure`` called once per count (each call costs runs on the device), its answers checked."""

    def __init__(self, measure: Callable[[int], PowerMeasurement]) -> None:
        self._measure = measure
        self._cache: dict[int, PowerMeasurement] = {}

    def __call__(self, n: int) -> PowerMeasurement:
        if n not in self._cache:
            m = self._measure(n)
            if not isinstance(m, PowerMeasurement) or not math.isfinite(m.mean_w):
                raise ValueError(f"measure({n}): returned {m!r}, not a PowerMeasurement with a finite mean")
            self._cache[n] = m
        return self._cache[n]


def _double(probe: _Probes, start: int, max_executions: int, tolerance: float, sigmas: float, need: int,
            trace: list[SspStep]) -> tuple[list[int], int, int]:
    """The doubling phase: counts probed, the index of the first count of the matching run, and its matches.

    Stops once ``need`` consecutive doublings match, or at ``max_executions``.
    """
    counts = [start]
    matches = 0
    k = 0  # counts[k] is the candidate: the first of the matching run
    while counts[-1] * 2 <= max_executions:
        n_next = counts[-1] * 2
        m_next = probe(n_next)
        same = _same(probe(counts[-1]), m_next, tolerance, sigmas)
        trace.append(SspStep(n_next, m_next, "double", counts[-1], same))
        counts.append(n_next)
        if same:
            matches += 1
            if matches == need:
                break
        else:
            matches = 0
            k = len(counts) - 1
    return counts, k, matches


def _bisect(probe: _Probes, lo: int, hi: int, level: PowerMeasurement, reference: int, tolerance: float,
            sigmas: float, trace: list[SspStep]) -> int:
    """The bisection phase: the smallest count in (lo, hi] whose power matches the steady level."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        m = probe(mid)
        steady = _same(m, level, tolerance, sigmas)
        trace.append(SspStep(mid, m, "bisect", reference, steady))
        if steady:
            hi = mid
        else:
            lo = mid
    return hi


def find_ssp_executions(
    measure: Callable[[int], PowerMeasurement],
    *,
    start: int = SSE_EXECUTIONS,
    tolerance: float = 0.02,
    max_executions: int = 1024,
    sigmas: float = 2.0,
    confirm: bool = True,
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
    confirm : bool
        Require the level to hold over two consecutive doublings (n, 2n,
        4n) before accepting it (default). The paper accepts one (n, 2n);
        a flat stretch before a later rise (clocks still parked in the first
        millisecond of a run) then passes for steady state.

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
       ``P(2n)`` equals ``P(n)`` within the tolerance (and, with
       ``confirm``, ``P(4n)`` equals ``P(2n)`` too): power no longer changes
       from n executions on, so steady state is reached by n. The level is
       the last count's power.
    3. Bisection: between the count before n (not steady) and n, probe the
       midpoint; if its power matches the level it is steady (move the
       upper end down), else move the lower end up; stop when the ends meet.
    4. Return the upper end: the smallest count whose last execution is at
       the steady level.

    Examples
    --------
    >>> levels = {n: PowerMeasurement(100.0 if n >= 10 else 80.0 + n, 0.1, 50) for n in range(1, 65)}
    >>> find_ssp_executions(levels.__getitem__, tolerance=0.01).executions
    10
    >>> # A plateau (4 and 8 equal) before the rise: one doubling is fooled.
    >>> plateau = {n: PowerMeasurement(80.0 if n < 12 else 100.0, 0.1, 50) for n in range(1, 129)}
    >>> find_ssp_executions(plateau.__getitem__, confirm=False).executions
    4
    >>> find_ssp_executions(plateau.__getitem__).executions
    12
    """
    _check_search(measure, start, tolerance, max_executions, sigmas)
    confirm = flag(confirm, "confirm")
    probe = _Probes(measure)
    trace: list[SspStep] = [SspStep(start, probe(start), "start", start, False)]
    need = 2 if confirm else 1  # consecutive matching doublings that make a level
    counts, k, matches = _double(probe, start, max_executions, tolerance, sigmas, need, trace)
    if matches < need:
        last = counts[-1]
        return SspSearch(last, probe(last).mean_w, tuple(trace), False)
    level = probe(counts[-1])
    if k == 0:
        # Steady from the first count probed.
        return SspSearch(start, level.mean_w, tuple(trace), True)
    hi = _bisect(probe, counts[k - 1], counts[k], level, counts[-1], tolerance, sigmas, trace)
    return SspSearch(hi, level.mean_w, tuple(trace), True)
