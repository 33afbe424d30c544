"""Read-latency summaries: round-trip statistics of bracketed reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fingrav_native.clocks._fitting import int_array


@dataclass(frozen=True)
class ReadLatency:
    """Round-trip statistics of bracketed reads (``host_after - host_before``).

    Attributes
    ----------
    n : int
        Number of reads.
    min_ns, p50_ns, p99_ns, max_ns, mean_ns : float
        Minimum, median, 99th percentile, maximum and mean round trip, ns.
        Half the minimum is the floor of any clock map made from these reads.
    """

    n: int
    min_ns: float
    p50_ns: float
    p99_ns: float
    max_ns: float
    mean_ns: float


def summarize_read_latency(brackets: npt.ArrayLike) -> ReadLatency:
    """Round-trip statistics of bracketed reads: min, median, p99, max, mean.

    Parameters
    ----------
    brackets : (n, 3) integer array_like
        Rows ``(host_before_ns, device_ticks, host_after_ns)``; n >= 1.

    Returns
    -------
    ReadLatency

    Raises
    ------
    ValueError
        Not an ``(n, 3)`` integer array, empty, or a negative round trip.

    Notes
    -----
    The paper (Section IV-A) benchmarks the timestamp read delay separately
    from the sync; here it comes from the same reads. Half the minimum is
    the floor of any map made from them (see :class:`~fingrav_native.clocks.ClockMap`).
    """
    arr = int_array(brackets, "brackets")
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(
            f"brackets: expected shape (n, 3) of (host_before_ns, device_ticks, host_after_ns); got {arr.shape}"
        )
    if arr.shape[0] < 1:
        raise ValueError("brackets: no reads given; at least 1 is needed")
    rtt = (arr[:, 2] - arr[:, 0]).astype(np.float64)
    if (rtt < 0).any():
        i = int(np.flatnonzero(rtt < 0)[0])
        raise ValueError(f"brackets: host_after < host_before in row {i}")
    p50, p99 = np.percentile(rtt, [50, 99])
    return ReadLatency(
        n=int(rtt.size),
        min_ns=float(rtt.min()),
        p50_ns=float(p50),
        p99_ns=float(p99),
        max_ns=float(rtt.max()),
        mean_ns=float(rtt.mean()),
    )
