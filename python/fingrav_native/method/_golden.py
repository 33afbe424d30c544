"""Step 5 of FinGraV: golden runs by execution-time binning.

Short kernels vary in execution time from run to run; stitching logs from
runs of different lengths blurs the profile (paper Section III, "execution
time variation"). FinGraV keeps only the golden runs: those whose execution
of interest falls in the most populated execution-time bin, where a bin holds
durations within a margin of each other (Section IV-A and IV-B, step 5).

Examples
--------
>>> sel = select_golden_runs([100, 101, 102, 150, 103], 0.05, runs=[7, 8, 9, 10, 11])
>>> sel.count, sel.run_ids.tolist()
(4, [7, 8, 9, 11])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import fraction, numbers, whole_numbers
from fingrav_native._checks import readonly as _readonly


@dataclass(frozen=True)
class GoldenSelection:
    """The execution-time bin with the most executions of interest.

    Attributes
    ----------
    low_ns, high_ns : float
        The bin ``[low_ns, high_ns]`` with ``high_ns = low_ns * (1 + margin)``;
        ``low_ns`` is the shortest member's duration.
    margin : float
        The binning margin used.
    mask : numpy.ndarray of bool
        Members of the bin, in input order.
    count : int
        Number of members.
    total : int
        Number of durations considered.
    run_ids : numpy.ndarray or None
        ``runs[mask]`` (input order) when ``runs`` was given.
    tied_windows : int
        How many bins held the same, maximal count (1 = no tie); the one
        whose centre is nearest the median duration was chosen.
    """

    low_ns: float
    high_ns: float
    margin: float
    mask: np.ndarray
    count: int
    total: int
    run_ids: Optional[np.ndarray]
    tied_windows: int

    @property
    def rejected(self) -> int:
        """Number of executions (runs) outside the bin."""
        return self.total - self.count

    @property
    def fraction(self) -> float:
        """Share of the executions inside the bin."""
        return self.count / self.total


def select_golden_runs(
    durations_ns: npt.ArrayLike,
    margin: float,
    *,
    runs: Optional[npt.ArrayLike] = None,
) -> GoldenSelection:
    """Find the execution-time bin with the most executions within ``margin``.

    Parameters
    ----------
    durations_ns : array_like of float
        Duration (ns) of each run's execution of interest (SSE or SSP), one
        per run.
    margin : float
        Binning margin, a fraction in (0, 1): a bin is ``[d, d * (1 +
        margin)]`` (Table I: 0.05 or 0.02).
    runs : array_like of int, optional
        Run id of each duration; the selected ids are returned.

    Returns
    -------
    GoldenSelection
        The bin's bounds, a member mask in input order, the golden run ids.

    Raises
    ------
    ValueError
        ``durations_ns`` is empty, not 1-D, non-finite or not positive;
        ``margin`` is outside (0, 1); ``runs`` has another length.

    Notes
    -----
    Paper Section IV-B, step 5 ("the execution time bin with the maximum
    number of executions within binning margin of each other"), as a
    sliding window rather than a fixed grid of bins, so no member is lost
    to where a grid's edges happen to fall. O(n log n):

    1. Sort the durations: ``d[0] <= ... <= d[n-1]``.
    2. Some bin with the most members starts at a member (slide any bin
       right until its lower edge meets its shortest member), so only the n
       windows ``[d[i], d[i] * (1 + margin)]`` need counting: with a binary
       search for each upper edge, ``count[i] = searchsorted(d, d[i] * (1 +
       margin), 'right') - i``.
    3. Take the largest count. Ties go to the window whose centre
       ``d[i] * (1 + margin / 2)`` is nearest the median duration (the
       common case the paper profiles), then to the shorter window start;
       both depend only on the sorted values, so the choice is independent
       of input order.
    4. Members are the durations inside the chosen window, reported in
       input order.

    Examples
    --------
    Two clusters of three within 5%: the tie goes to the window whose
    centre is nearer the median (151): 102.5 is 48.5 away, 205 is 54:

    >>> sel = select_golden_runs([100, 101, 102, 200, 201, 202], 0.05)
    >>> sel.low_ns, sel.count, sel.tied_windows
    (100.0, 3, 2)
    >>> sel.mask.tolist()
    [True, True, True, False, False, False]
    """
    m = fraction(margin, "margin")
    d = numbers(durations_ns, "durations_ns")
    if d.ndim != 1:
        raise ValueError(f"durations_ns: must be 1-D (one duration per run), got shape {d.shape}")
    if d.size == 0:
        raise ValueError("durations_ns: is empty; there are no runs to bin")
    if not np.issubdtype(d.dtype, np.number) or np.issubdtype(d.dtype, np.complexfloating):
        raise ValueError(f"durations_ns: must be real numbers of nanoseconds, got dtype {d.dtype}")
    d = d.astype(np.float64)
    bad = np.nonzero(~np.isfinite(d) | (d <= 0))[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"durations_ns: every duration must be positive and finite; {bad.size} are not "
            f"(first at position {i}: {d[i]!r})"
        )
    run_arr: Optional[np.ndarray] = None
    if runs is not None:
        run_arr = whole_numbers(runs, "runs", 0, 2**63 - 1)
        if run_arr.shape != d.shape:
            raise ValueError(f"runs: must have one id per duration ({d.size}), got shape {run_arr.shape}")

    order = np.argsort(d, kind="stable")
    s = d[order]
    upper = s * (1.0 + m)
    counts = np.searchsorted(s, upper, side="right") - np.arange(s.size)
    best = int(counts.max())
    cand = np.nonzero(counts == best)[0]
    if cand.size > 1:
        median = float(np.median(s))
        dist = np.abs(s[cand] * (1.0 + m / 2.0) - median)
        # argmin returns the first minimum: the shortest start among equals.
        i = int(cand[np.argmin(dist)])
    else:
        i = int(cand[0])
    low, high = float(s[i]), float(upper[i])
    mask = (d >= low) & (d <= high)
    return GoldenSelection(
        low_ns=low,
        high_ns=high,
        margin=m,
        mask=_readonly(mask),
        count=int(mask.sum()),
        total=int(d.size),
        run_ids=None if run_arr is None else _readonly(run_arr[mask].copy()),
        tied_windows=int(cand.size),
    )
