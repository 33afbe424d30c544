"""Energy counters as windowed logs with exact windows.

Differencing an energy counter gives the exact average power over the
interval between two reads: a windowed log whose both ends are known, so
it is placed exactly once the window is known. AMD MI300's
``energy_accumulator`` counts 2^-16 J steps about every 1 ms, stamped with the
firmware clock; NVIDIA's ``nvmlDeviceGetTotalEnergyConsumption`` counts mJ
and refreshes every 10-100 ms. Three things go wrong if the reads are
differenced naively, and each is handled here and counted:

* a counter read faster than it refreshes repeats its value ("stuck"), and
  naive differences give 0 W followed by a spike: only reads where the
  counter moved are kept, each window running from the previous move;
* a counter of fixed width wraps: a negative step plus the wrap is the step;
* a counter that resets (driver reload) gives a negative step with no wrap
  known: the interval is dropped.

Quantisation: a step of ``n`` quanta over ``dt`` has an error of up to one
quantum, ``quantum / dt`` watts; the largest is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import positive_number

#: Windowed logs made from counter reads: the window ends at ``source_ts``.
COUNTER_LOG_DTYPE = np.dtype([("source_ts", "<i8"), ("window_ns", "<u4"), ("total", "<f4"),
                              ("energy_j", "<f8"), ("quantum_w", "<f4")])


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
        Steps dropped because the counter went backwards with no wrap known.
    max_quantum_w : float
        Largest quantisation error of a log (W).
    """

    samples: np.ndarray
    reads: int
    stuck: int
    wraps: int
    resets: int
    max_quantum_w: float


def counter_to_logs(timestamps_ns: npt.ArrayLike, energy_j: npt.ArrayLike, *, quantum_j: float = 0.0,
                    wrap_j: Optional[float] = None, max_window_ns: float = 4.0e9) -> CounterLogs:
    """Difference energy-counter reads into windowed power logs with exact windows.

    Parameters
    ----------
    timestamps_ns : array_like of int
        When each value was taken, in the logger's clock (the firmware's
        timestamp where the counter carries one; else the read time).
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

    Returns
    -------
    CounterLogs

    Notes
    -----
    1. Sort by time; drop a read whose value equals the previous one
       (stuck: the counter refreshes more slowly than it is read), so each
       kept read is a refresh, and its window runs from the previous kept
       read. Where the timestamps are read times rather than the counter's
       own, the window's ends are known to within a read interval.
    2. Steps below zero: add ``wrap_j`` when given, else drop the interval.
    3. ``power = step / window``; its quantisation error is
       ``quantum_j / window``.

    Examples
    --------
    >>> logs = counter_to_logs([0, 1_000_000, 1_500_000, 2_000_000], [0.0, 0.3, 0.3, 0.6])
    >>> logs.samples["total"].tolist(), logs.samples["window_ns"].tolist(), logs.stuck
    ([300.0, 300.0], [1000000, 1000000], 1)
    """
    t = np.asarray(timestamps_ns)
    e = np.asarray(energy_j, dtype=np.float64)
    if t.ndim != 1 or e.ndim != 1 or len(t) != len(e):
        raise ValueError(f"timestamps_ns, energy_j: must be 1-D of one length, got {t.shape} and {e.shape}")
    if len(t) and not np.issubdtype(t.dtype, np.integer):
        raise ValueError(f"timestamps_ns: must be integers (ns), got dtype {t.dtype}")
    if not np.all(np.isfinite(e)):
        raise ValueError("energy_j: must be finite")
    q = positive_number(quantum_j, "quantum_j", allow_zero=True)
    wrap = None if wrap_j is None else positive_number(wrap_j, "wrap_j")
    cap = positive_number(max_window_ns, "max_window_ns", upper=float(np.iinfo(np.uint32).max))
    t = t.astype(np.int64)
    order = np.argsort(t, kind="stable")
    t, e = t[order], e[order]
    n_reads = len(t)
    if n_reads:
        moved = np.concatenate([[True], e[1:] != e[:-1]])
        dup_t = np.concatenate([[False], t[1:] == t[:-1]])
        keep = moved & ~dup_t
        stuck = int(np.sum(~keep))
        t, e = t[keep], e[keep]
    else:
        stuck = 0
    dt = np.diff(t).astype(np.float64)
    de = np.diff(e)
    wraps = 0
    if wrap is not None:
        back = de < 0
        wraps = int(back.sum())
        de = np.where(back, de + wrap, de)
    good = (de >= 0) & (dt > 0) & (dt <= cap)
    resets = int(np.sum(~good))
    out = np.zeros(int(good.sum()), dtype=COUNTER_LOG_DTYPE)
    out["source_ts"] = t[1:][good]
    out["window_ns"] = dt[good]
    out["energy_j"] = de[good]
    out["total"] = de[good] / (dt[good] * 1e-9)
    out["quantum_w"] = q / (dt[good] * 1e-9)
    return CounterLogs(out, n_reads, stuck, wraps, resets, float(out["quantum_w"].max()) if len(out) else 0.0)
