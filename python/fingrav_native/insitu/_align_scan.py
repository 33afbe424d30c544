"""Every offset at which the logs still meet the kernels, scanned at once: where a far clock mismatch hides.

:func:`~fingrav_native.insitu.align_logs_to_trace` fits the logs finely
around the clock map's placement (+-100 us by default). A trace and a
capture whose clocks disagree by milliseconds (a trace from another host,
an NTP step, a wrong ``baseTimeNanoseconds``) put the best shift far
outside that window, and a loop's periodic kernels give some shift inside
it a fit that is merely no worse than the map's: no warning, and a table
tens of percent off. A finer grid over the whole range would cost a fit per
shift; a coarser one steps over the true shift's basin, which is as narrow
as the shortest kernels.

The scan therefore uses a statistic that cannot be stepped over. Each log
is regressed on which group of signatures is busy where it lands (whole
executions, the gaps between them, and outside the kernels' span: a one-way
analysis of variance), with each group's *share of a grid cell* as the
regressor, so the statistic is the exact one smoothed over a cell: a true
shift between two grid points still lowers it. Sums and counts per group
for every shift at once are cross-correlations of the logs with each
group's busy share (by ``scipy.fft``), so the cost is a few
FFTs over the logs' and kernels' joint span, whatever the number of shifts.
The scan only proposes; the shift it proposes is then fitted finely (the
instantaneous aligner's own regression) and must beat the best fit around
the map's placement at the strict level (0.01 over the shifts scanned).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.fft

from fingrav_native._threads import numeric_threads

#: Grid cells per typical execution (the busy-time-weighted median: the kernels that explain most of the
#: logs), and the most cells scanned. Shorter kernels are blurred by the cell, never stepped over.
CELLS_PER_KERNEL = 16
MAX_CELLS = 1 << 18


class Scan(NamedTuple):
    """The scan's shifts (ns), the smoothed residual sum of squares at each (inf where too few logs meet the
    kernels), and its cell (ns)."""

    shifts: np.ndarray
    rss: np.ndarray
    cell_ns: float


def _busy_share(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The share of each cell ``[edges[i], edges[i + 1])`` that the (non-overlapping) intervals cover."""
    if len(starts) == 0:
        return np.zeros(len(edges) - 1)
    cum = np.concatenate([[0.0], np.cumsum(ends - starts)])
    j = np.searchsorted(starts, edges, side="right")
    k = np.maximum(j - 1, 0)
    covered = np.where(j > 0, cum[j] - np.maximum(ends[k] - edges, 0.0), 0.0)
    return np.asarray(np.diff(covered) / np.diff(edges))


@numeric_threads()
def scan_offsets(t: np.ndarray, y: np.ndarray, starts: np.ndarray, ends: np.ndarray, group: np.ndarray,
                 n_groups: int, min_logs: int) -> Scan:
    """The smoothed one-way residual of the logs ``(t, y)`` (``y`` centred) at every shift they meet the kernels.

    Parameters
    ----------
    t, y : numpy.ndarray
        The logs' times (sorted) and centred powers.
    starts, ends, group : numpy.ndarray
        The kernels in start order, not overlapping, and each one's group (``0 .. n_groups - 1``).
    n_groups : int
        Groups of signatures.
    min_logs : int
        Shifts at which fewer logs land inside the kernels' span are not scored (inf).

    Returns
    -------
    Scan

    Notes
    -----
    A one-way analysis of variance (each log's power explained by the mean
    of the column it lands in) profiled over the shift, as in the
    trigger alignment of :func:`~fingrav_native.insitu.align_logs_to_trace`
    (paper Section IV-A step 2), with each column's share of a cell in
    place of its indicator and sums and counts from cross-correlations
    (Oppenheim and Schafer, *Discrete-Time Signal Processing*, Section 8.7:
    correlation by the FFT).
    """
    first, last = float(starts[0]), float(ends[-1])
    durations = ends - starts
    order = np.argsort(durations, kind="stable")
    busy = np.cumsum(durations[order])
    typical = float(durations[order][np.searchsorted(busy, 0.5 * busy[-1])])
    t0 = float(t[0])
    log_span = float(t[-1]) - t0
    # Shifts that bring the last log to the first kernel's start up to the first log to the last kernel's end.
    lo_shift, hi_shift = first - float(t[-1]), last - t0
    cell = max(typical / CELLS_PER_KERNEL, (hi_shift - lo_shift + log_span) / MAX_CELLS, 1.0)
    m = int(math.floor(log_span / cell)) + 1
    logs_at = np.minimum(((t - t0) / cell).astype(np.int64), m - 1)
    yy = np.bincount(logs_at, weights=y, minlength=m)
    nn = np.bincount(logs_at, minlength=m).astype(np.float64)
    # The kernels' axis: cell i is [x0 + i cell, x0 + (i + 1) cell); a log in log cell j at shift index k lands
    # in cell j + k, so shift k is x0 - t0 + k cell.
    x0 = lo_shift + t0 - cell
    n_cells = m + int(math.ceil((hi_shift - lo_shift) / cell)) + 2
    edges = x0 + cell * np.arange(n_cells + 1)
    inside = _busy_share(np.array([first]), np.array([last]), edges)
    shares = [_busy_share(starts[group == g], ends[group == g], edges) for g in range(n_groups)]
    columns = shares + [np.maximum(inside - np.sum(shares, axis=0), 0.0), 1.0 - inside]
    # Correlations by the FFT, the logs' transforms once: sum_j col[j + k] x[j] for k = 0 .. n_cells - m, which
    # a circular correlation of length >= n_cells holds unwrapped.
    size = scipy.fft.next_fast_len(n_cells, real=True)
    fy, fn = (np.conj(scipy.fft.rfft(x, size)) for x in (yy, nn))
    valid = n_cells - m + 1
    explained = np.zeros(valid)
    counts = []
    for c in columns:
        fc = scipy.fft.rfft(c, size)
        s = scipy.fft.irfft(fc * fy, size)[:valid]
        n = scipy.fft.irfft(fc * fn, size)[:valid]
        counts.append(n)
        # FFT rounding leaves counts of an empty column at ~1e-12: below a hundredth of a log it is empty.
        explained += np.where(n > 1e-2, s * s / np.maximum(n, 1e-2), 0.0)
    rss = float(y @ y) - explained
    met = len(t) - counts[-1]
    rss[met < min_logs] = np.inf
    shifts = x0 - t0 + cell * np.arange(len(rss))
    return Scan(shifts, rss, cell)


def far_candidates(scan: Scan, near_ns: float, margin: float, most: int = 3) -> list[float]:
    """The scan's best few local minima beyond ``near_ns`` of zero where the best within it scores above
    ``margin`` times them, best first, at least ``2 near_ns`` apart (a loop's iterations alias one another,
    and the cell blurs which alias is the true one)."""
    near = np.abs(scan.shifts) <= near_ns
    rss = scan.rss
    if not np.any(near) or not np.any(~near & np.isfinite(rss)):
        return []
    bar = float(np.min(rss[near])) / margin
    low = np.ones(len(rss), dtype=bool)
    low[1:] &= rss[1:] <= rss[:-1]
    low[:-1] &= rss[:-1] <= rss[1:]
    pick = np.flatnonzero(low & ~near & (rss < bar))
    out: list[float] = []
    for k in pick[np.argsort(rss[pick], kind="stable")].tolist():
        x = float(scan.shifts[k])
        if all(abs(x - o) > 2 * near_ns for o in out):
            out.append(x)
        if len(out) == most:
            break
    return out
