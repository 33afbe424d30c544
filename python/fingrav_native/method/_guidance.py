"""Step 1 of FinGraV: profiling guidance from the kernel's execution time.

The paper's Table I (Singhania et al., ISPASS 2025, Sections IV-B and V-B)
maps a kernel's execution time to how many runs to execute, how many logs of
interest (LOIs) to collect and how wide the execution-time binning margin of
the golden runs should be.

Examples
--------
>>> g = lookup_guidance(120_000)          # a 120 us kernel
>>> g.runs, g.loi_interval_ns, g.margin
(200, 10000.0, 0.05)
>>> target_loi_count(g, 120_000)          # one LOI per 10 us of execution
12
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import numbers, positive_number

_US = 1_000.0


_MS = 1_000_000.0


@dataclass(frozen=True)
class GuidanceRow:
    """One row of the paper's Table I.

    Attributes
    ----------
    label : str
        The execution-time range as the paper writes it.
    low_ns, high_ns : float
        The range ``[low_ns, high_ns)`` on the execution time (ns);
        ``high_ns`` is ``inf`` for the last row.
    runs : int
        Number of runs to execute.
    loi_interval_ns : float
        One LOI per this much execution time (ns).
    margin : float
        Binning margin of the golden runs (a fraction, 0.05 = 5%).
    """

    label: str
    low_ns: float
    high_ns: float
    runs: int
    loi_interval_ns: float
    margin: float


#: The paper's Table I, "FinGraV profiling guidance", in its row order.
TABLE_I: tuple[GuidanceRow, ...] = (
    GuidanceRow("25-50us", 25 * _US, 50 * _US, 400, 5 * _US, 0.05),
    GuidanceRow("50-200us", 50 * _US, 200 * _US, 200, 10 * _US, 0.05),
    GuidanceRow("200us-1ms", 200 * _US, 1 * _MS, 200, 10 * _US, 0.02),
    GuidanceRow(">1ms", 1 * _MS, math.inf, 200, 10 * _US, 0.02),
)


@dataclass(frozen=True)
class Guidance:
    """The guidance for one kernel: Table I's row plus what was extrapolated.

    Attributes
    ----------
    exec_time_ns : float
        The execution time the guidance is for (the median of the timings
        given to :func:`lookup_guidance`).
    runs : int
        Number of runs to execute.
    loi_interval_ns : float
        One LOI per this much execution time (ns); the stitching bin width.
    margin : float
        Binning margin for :func:`~fingrav_native.method.select_golden_runs`.
    row : GuidanceRow
        The Table I row the numbers come from.
    extrapolated : bool
        True when the execution time lies below Table I's first row (25 us).
    note : str
        Empty, or what was extrapolated and why it matters.
    """

    exec_time_ns: float
    runs: int
    loi_interval_ns: float
    margin: float
    row: GuidanceRow
    extrapolated: bool
    note: str

    @property
    def loi_per_us(self) -> float:
        """LOI density: LOIs to collect per microsecond of execution."""
        return _US / self.loi_interval_ns


def lookup_guidance(exec_time_ns: float | npt.ArrayLike) -> Guidance:
    """Look up the paper's Table I for a kernel's execution time.

    Parameters
    ----------
    exec_time_ns : float or array_like of float
        The kernel's execution time in nanoseconds, or the few timings of
        step 1 (their median is used).

    Returns
    -------
    Guidance
        Runs, LOI density and binning margin, with the Table I row; below
        25 us the first row is extrapolated and ``note`` says so.

    Raises
    ------
    ValueError
        ``exec_time_ns`` is empty, not numeric, non-finite or not positive.

    Notes
    -----
    Paper Section IV-B, step 1, and Table I (Section V-B):

    1. Take the median of the timings (step 1 times the kernel 4-5 times).
    2. Pick the row whose range ``[low, high)`` holds it: 25-50 us: 400
       runs, one LOI per 5 us, 5% margin; 50-200 us: 200 runs, one per
       10 us, 5%; 200 us-1 ms: 200 runs, one per 10 us, 2%; over 1 ms: 200,
       one per 10 us, 2%. A boundary belongs to the row above it (50 us is
       in 50-200 us).
    3. Below 25 us, Table I has no row: the 25-50 us row is used unchanged
       and the result is marked ``extrapolated``. The paper observes that
       shorter kernels need more runs and a slightly wider margin, and the
       clock-map and start-localisation errors become a larger share of
       the kernel; the note says so, with the LOI count the density gives.

    Examples
    --------
    >>> lookup_guidance([31_000, 30_000, 29_500]).row.label
    '25-50us'
    >>> g = lookup_guidance(10_000)
    >>> g.extrapolated, g.runs, g.margin
    (True, 400, 0.05)
    """
    arr = numbers(exec_time_ns, "exec_time_ns")
    if arr.ndim > 1:
        raise ValueError(f"exec_time_ns: must be a number or 1-D timings, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("exec_time_ns: no timings given")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"exec_time_ns: must be real numbers of nanoseconds, got dtype {arr.dtype}")
    arr = arr.astype(np.float64).ravel()
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"exec_time_ns: every timing must be positive and finite, got {arr.tolist()!r}")
    t = float(np.median(arr))

    if t < TABLE_I[0].low_ns:
        row = TABLE_I[0]
        note = (
            f"{t / _US:.3g} us is below Table I's shortest range (25-50 us): its row is extrapolated "
            f"unchanged ({row.runs} runs, one LOI per {row.loi_interval_ns / _US:g} us, "
            f"{row.margin:.0%} margin), which asks for only {math.ceil(t / row.loi_interval_ns)} LOI(s). "
            "The paper observes shorter kernels need more runs and a slightly wider margin, and "
            "clock-map and start-localisation errors are a larger share of such a kernel."
        )
        return Guidance(t, row.runs, row.loi_interval_ns, row.margin, row, True, note)
    row = next(r for r in TABLE_I if r.low_ns <= t < r.high_ns)
    return Guidance(t, row.runs, row.loi_interval_ns, row.margin, row, False, "")


def target_loi_count(guidance: Guidance, exec_time_ns: float) -> int:
    """Number of LOIs needed to reach the guidance density over an execution.

    Parameters
    ----------
    guidance : Guidance
        From :func:`lookup_guidance`.
    exec_time_ns : float
        The execution time (ns) the LOIs must cover.

    Returns
    -------
    int
        ``ceil(exec_time_ns / guidance.loi_interval_ns)``, at least 1.

    Raises
    ------
    ValueError
        ``guidance`` is not a :class:`Guidance`, or ``exec_time_ns`` is not
        positive and finite.

    Notes
    -----
    Paper Section IV-B, step 7 (top-up runs until the count of Table I is
    reached):

    1. Table I gives a density, one LOI per 5 us or per 10 us of execution.
    2. The count is the execution time divided by that interval, rounded
       up, so the density is met everywhere in the execution.

    Examples
    --------
    >>> target_loi_count(lookup_guidance(40_000), 40_000)
    8
    >>> target_loi_count(lookup_guidance(2_000_000), 2_000_000)
    200
    """
    if not isinstance(guidance, Guidance):
        raise ValueError(f"guidance: must be a Guidance from lookup_guidance(), got {type(guidance).__name__}")
    t = positive_number(exec_time_ns, "exec_time_ns")
    # A relative nudge so that e.g. 120 us / 10 us is 12, not 13 by rounding.
    return max(1, math.ceil(t / guidance.loi_interval_ns * (1 - 1e-12)))
