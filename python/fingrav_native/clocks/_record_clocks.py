"""The error between a launch record clock and the sampler's clock, from bracketed reads.

The native launch capture stamps kernel records on the vendor's clock (rocprofiler-sdk:
``CLOCK_BOOTTIME``; CUPTI: ``CLOCK_REALTIME``) while the power sampler stamps its logs on
``CLOCK_MONOTONIC_RAW``; at every flush it reads the record clock between two raw reads. Each
such bracket ``(raw_before, clock, raw_after)`` places the clock's reading inside a window of
the bracket's width on the raw clock (the paper's Section IV-A sync, with a host clock in the
device's part), and the offsets over many brackets show how steady the relation is: both
record clocks are slewed by NTP where the raw clock is not, so the offset drifts at the slew's
rate (a few ppm at most) and steps when the wall clock is set (``CLOCK_REALTIME`` only).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fingrav_native.clocks._fitting import int_array


@dataclass(frozen=True)
class RecordClockError:
    """How a record clock sits against ``CLOCK_MONOTONIC_RAW``, from bracketed reads.

    Attributes
    ----------
    clock : str
        The record clock (``"CLOCK_BOOTTIME"``, ``"CLOCK_REALTIME"``).
    reads : int
        Brackets used.
    span_ns : float
        Raw-clock time from the first bracket's start to the last one's.
    width_min_ns, width_p50_ns, width_max_ns : float
        Bracket width (``raw_after - raw_before``): half the narrowest is the floor of any
        placement of a record-clock stamp on the raw clock.
    offset_ns : int
        Median of ``clock - (raw_before + raw_after) / 2``, to the nearest ns (an int: ``CLOCK_REALTIME``
        offsets are past 2**53 ns, where a float has no ns digits).
    offset_spread_ns : float
        Largest minus smallest offset over the reads: what a single constant offset would miss.
    skew_ppm : float
        Least-squares slope of the offset against raw time, ppm (NaN with fewer than two
        distinct bracket times).
    residual_ns : float
        Largest distance of an offset from that line: what an offset-and-skew map would miss.
    """

    clock: str
    reads: int
    span_ns: float
    width_min_ns: float
    width_p50_ns: float
    width_max_ns: float
    offset_ns: int
    offset_spread_ns: float
    skew_ppm: float
    residual_ns: float

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON (NaN as None)."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}

    def format(self) -> str:
        """One line: the bracket widths and the offset's stability."""
        skew = "n/a" if math.isnan(self.skew_ppm) else f"{self.skew_ppm:+.3f} ppm"
        return (f"{self.clock}: {self.reads} reads over {self.span_ns / 1e9:.2f} s; bracket width min "
                f"{self.width_min_ns:.0f} ns, median {self.width_p50_ns:.0f} ns, max {self.width_max_ns:.0f} ns; "
                f"offset {'-' if self.offset_ns < 0 else '+'}{abs(self.offset_ns) // 10**9}."
                f"{abs(self.offset_ns) % 10**9:09d} s, spread {self.offset_spread_ns:.0f} ns (skew {skew}, "
                f"residual {self.residual_ns:.0f} ns)")


def record_clock_error(brackets: npt.ArrayLike, clock: str) -> RecordClockError:
    """Bracket width and offset stability of a record clock against ``CLOCK_MONOTONIC_RAW``.

    Parameters
    ----------
    brackets : (n, 3) integer array_like
        Rows ``(raw_before_ns, clock_ns, raw_after_ns)`` as the launch capture writes them
        (``LaunchLog.brackets``) or ``_core.launch_clock_brackets`` reads them; n >= 1.
    clock : str
        The record clock's name, for the report.

    Returns
    -------
    RecordClockError

    Raises
    ------
    ValueError
        Not ``(n, 3)`` integers, empty, or a bracket that ends before it starts. A record clock
        that goes backwards is not refused: a wall-clock step shows in the spread.

    Notes
    -----
    The offset of each read is taken at its bracket's midpoint, the estimate of the paper's
    Section IV-A sync; differences are formed in int64 before any conversion to float, since
    ``CLOCK_REALTIME`` in ns is past 2**53.
    """
    if not isinstance(clock, str) or not clock:
        raise ValueError(f"clock={clock!r}: must name the record clock, e.g. 'CLOCK_BOOTTIME'")
    arr = int_array(brackets, "brackets")
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] < 1:
        raise ValueError(f"brackets: expected shape (n, 3), n >= 1, of (raw_before_ns, clock_ns, raw_after_ns); "
                         f"got {arr.shape}")
    # Not required to be monotonic: a step of the wall clock is what the spread is there to show.
    arr = arr[np.argsort(arr[:, 0], kind="stable")]
    if (arr[:, 2] < arr[:, 0]).any():
        i = int(np.flatnonzero(arr[:, 2] < arr[:, 0])[0])
        raise ValueError(f"brackets: raw_after < raw_before in row {i} (after sorting by raw_before)")
    before, value, after = arr[:, 0], arr[:, 1], arr[:, 2]
    width = (after - before).astype(np.float64)
    # clock - midpoint, relative to the first read's (int64, exact), so the float holds ns even where the
    # offset itself (CLOCK_REALTIME's, ~1.7e18 ns) is past 2**53.
    base = int(value[0]) - int(before[0])
    offset = ((value - before) - base).astype(np.float64) - width / 2
    t = (before - before[0]).astype(np.float64) + width / 2
    skew, residual = float("nan"), 0.0
    if np.ptp(t) > 0:
        slope, intercept = np.polyfit(t, offset, 1)
        skew = float(slope) * 1e6
        residual = float(np.max(np.abs(offset - (slope * t + intercept))))
    return RecordClockError(
        clock=clock, reads=int(len(arr)), span_ns=float(before[-1] - before[0]),
        width_min_ns=float(width.min()), width_p50_ns=float(np.median(width)), width_max_ns=float(width.max()),
        offset_ns=base + int(round(float(np.median(offset)))), offset_spread_ns=float(np.ptp(offset)), skew_ppm=skew,
        residual_ns=residual,
    )
