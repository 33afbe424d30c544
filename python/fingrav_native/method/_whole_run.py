"""The whole-run view: every log of some runs on time since run start (paper Figures 5-7).

Where the stitched profile keeps only the logs inside one execution of
interest, this view keeps every log of a run, marks the execution each fell
in, and places the median execution boundaries and the warm-up / SSE / SSP
marks (paper Section V-B).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import check_power, finite_array, integer_in, numbers, positive_number, whole_numbers
from fingrav_native._checks import readonly as _readonly
from fingrav_native._threads import numeric_threads
from fingrav_native.method._align import assign_logs_to_executions
from fingrav_native.records._layouts import validate_executions


@dataclass(frozen=True)
class WholeRunView:
    """Every log of some runs on time since run start (paper Figures 5-7).

    Attributes
    ----------
    t_ns : numpy.ndarray
        Each kept log's time since its run's first execution started (ns).
    value : numpy.ndarray
        Each kept log's value.
    run : numpy.ndarray of int64
        Each kept log's run.
    execution : numpy.ndarray of int64
        Index of the execution the log fell in, -1 between executions.
    execution_index : numpy.ndarray of int64
        The execution indices present, ascending.
    boundary_start_ns, boundary_end_ns : numpy.ndarray
        Per execution index, the median across runs of its start and end
        since run start.
    runs : numpy.ndarray
        The run ids shown.
    sse_index : int or None
        Execution index of the SSE (None if no run has it).
    warmup_end_ns, sse_start_ns, sse_end_ns : float or None
        Medians across runs: end of the last warm-up execution (index
        ``sse_index - 1``), start and end of the SSE execution.
    ssp_start_ns, ssp_end_ns : float
        Median start and end of each run's last execution (the SSP).
    """

    t_ns: np.ndarray
    value: np.ndarray
    run: np.ndarray
    execution: np.ndarray
    execution_index: np.ndarray
    boundary_start_ns: np.ndarray
    boundary_end_ns: np.ndarray
    runs: np.ndarray
    sse_index: Optional[int]
    warmup_end_ns: Optional[float]
    sse_start_ns: Optional[float]
    sse_end_ns: Optional[float]
    ssp_start_ns: float
    ssp_end_ns: float


def _check_logs(samples_host_ns: npt.ArrayLike, values: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The logs' host times (1-D, finite) and one value per log, as float64."""
    h = numbers(samples_host_ns, "samples_host_ns").astype(np.float64)
    val = check_power(finite_array(values, "values"), "values")
    if h.ndim != 1:
        raise ValueError(f"samples_host_ns: must be 1-D, got shape {h.shape}")
    if not np.all(np.isfinite(h)):
        raise ValueError("samples_host_ns: must be finite host times (ns)")
    if val.shape != h.shape:
        raise ValueError(f"values: must have one value per log ({h.size}), got shape {val.shape}")
    return h, val


def _check_runs(runs: npt.ArrayLike, executions: np.ndarray) -> np.ndarray:
    """The distinct run ids to show, each of which must have executions."""
    r = whole_numbers(runs, "runs", 0, 2**63 - 1)
    if r.ndim != 1:
        raise ValueError(f"runs: must be a 1-D list of run ids, got shape {r.shape}")
    if r.size == 0:
        raise ValueError("runs: is empty; no run to show")
    r = np.unique(r)
    missing = r[~np.isin(r, executions["run"])]
    if missing.size:
        raise ValueError(f"runs: {missing.tolist()[:10]} have no executions")
    return r


def _check_marks(sse_index: Optional[int], pad_ns: float) -> tuple[Optional[int], float]:
    """The SSE's execution index (None: no marks) and the padding, checked."""
    sse = None if sse_index is None else integer_in(sse_index, "sse_index", 0)
    pad = positive_number(pad_ns, "pad_ns", allow_zero=True)
    return sse, pad


@dataclass(frozen=True)
class _Runs:
    """The shown runs' executions, by run then start, and per run: first and last row, id, start and end."""

    ex: np.ndarray
    first: np.ndarray
    last: np.ndarray
    ids: np.ndarray
    start: np.ndarray
    end: np.ndarray


def _runs_of(executions: np.ndarray, r: np.ndarray) -> _Runs:
    """Each shown run's span: from its first execution's start to its last one's end."""
    ex = executions[np.isin(executions["run"], r)]
    ex = ex[np.lexsort((ex["start_ns"], ex["run"]))]
    breaks = np.flatnonzero(np.diff(ex["run"])) + 1
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks, [len(ex)])) - 1
    run_ids = ex["run"][first].astype(np.int64)
    run_start = ex["start_ns"][first].astype(np.float64)
    run_end = np.maximum.reduceat(ex["end_ns"].astype(np.float64), first)
    return _Runs(ex, first, last, run_ids, run_start, run_end)


def _logs_in_runs(h: np.ndarray, rs: _Runs, pad: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The logs within each run's span +- ``pad`` (binary searches): their index, run and time since run start."""
    order = np.argsort(h, kind="stable")
    hs = h[order]
    i0 = np.searchsorted(hs, rs.start - pad, side="left")
    i1 = np.searchsorted(hs, rs.end + pad, side="right")
    cnt = np.clip(i1 - i0, 0, None)
    total = int(cnt.sum())
    offsets = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    kept = order[np.repeat(i0, cnt) + offsets]
    log_run = np.repeat(rs.ids, cnt)
    t = h[kept] - np.repeat(rs.start, cnt)
    return kept, log_run, t


def _marks(idx: np.ndarray, ex_start: np.ndarray, ex_end: np.ndarray,
           sse: Optional[int]) -> tuple[Optional[float], Optional[float], Optional[float]]:
    """Medians across runs of the SSE's start and end and of the warm-up's end (None where no run has them)."""

    def _median_of(k: int, arr: np.ndarray) -> Optional[float]:
        sel = idx == k
        return float(np.median(arr[sel])) if sel.any() else None

    sse_start = _median_of(sse, ex_start) if sse is not None else None
    sse_end = _median_of(sse, ex_end) if sse is not None else None
    warmup_end: Optional[float] = None
    if sse_start is not None and sse:
        warmup_end = _median_of(sse - 1, ex_end)
    elif sse_start is not None:
        warmup_end = 0.0  # the SSE is the first execution: no warm-up
    return sse_start, sse_end, warmup_end


@numeric_threads()
def whole_run_view(
    samples_host_ns: npt.ArrayLike,
    values: npt.ArrayLike,
    executions: np.ndarray,
    *,
    runs: npt.ArrayLike,
    sse_index: Optional[int] = 3,
    pad_ns: float = 0.0,
) -> WholeRunView:
    """Lay out all logs of the given runs on time since run start.

    Parameters
    ----------
    samples_host_ns : array_like of float
        Every log's host time (``logger_map.to_host(samples["source_ts"])``).
    values : array_like of float
        Every log's value in one channel (e.g. ``samples["total"]``).
    executions : numpy.ndarray
        EXECUTION_DTYPE records.
    runs : array_like of int
        Runs to show (e.g. the golden runs); each must have executions.
    sse_index : int or None
        Execution index of the SSE, 3 by default (the fourth execution,
        after three warm-up executions; paper Section IV-A); None for no
        warm-up/SSE marks.
    pad_ns : float
        Also keep logs up to this long before a run's first execution and
        after its last (the idle lead-in), >= 0.

    Returns
    -------
    WholeRunView
        Logs with their time since run start, the median execution
        boundaries and the warm-up / SSE / SSP marks.

    Raises
    ------
    ValueError
        Lengths differ, non-finite times, ``runs`` empty or naming runs
        without executions, invalid ``executions``, ``sse_index`` or
        ``pad_ns``.

    Notes
    -----
    Paper Section V-B, Figures 5-7 (all executions of a run, warm-up, SSE
    and SSP separated by vertical lines):

    1. A run starts at its first execution's start and ends at its last
       execution's end; keep the logs within ``[start - pad_ns, end +
       pad_ns]`` (binary searches on the sorted log times, per run) and
       place them at ``host_ns - start``.
    2. Mark the execution each log fell in
       (:func:`~fingrav_native.method.assign_logs_to_executions`), -1 for
       gaps.
    3. Per execution index, take the median across runs of its start and
       end since run start: the boundaries.
    4. Marks: warm-up ends at the median end of execution ``sse_index -
       1``; SSE spans execution ``sse_index``; SSP spans each run's last
       execution (paper footnote 2), medians across runs.

    Examples
    --------
    >>> from fingrav_native.records import make_executions
    >>> ex = make_executions([0, 0, 1, 1], [0, 1, 0, 1], [0] * 4,
    ...                      [100, 120, 500, 522], [110, 130, 510, 532])
    >>> v = whole_run_view([105, 125, 140, 508, 530], [1, 2, 3, 4, 5], ex, runs=[0, 1], sse_index=None)
    >>> v.t_ns.tolist(), v.execution.tolist()
    ([5.0, 25.0, 8.0, 30.0], [0, 1, 0, 1])
    >>> v.boundary_start_ns.tolist(), v.ssp_start_ns
    ([0.0, 21.0], 21.0)
    """
    h, val = _check_logs(samples_host_ns, values)
    executions = validate_executions(executions)
    r = _check_runs(runs, executions)
    sse, pad = _check_marks(sse_index, pad_ns)
    rs = _runs_of(executions, r)
    kept, log_run, t = _logs_in_runs(h, rs, pad)
    assign = assign_logs_to_executions(h[kept], rs.ex)
    execution = np.where(assign.run == log_run, assign.execution, -1)

    # Per execution index: median start/end since run start across runs.
    ex = rs.ex
    ex_start = ex["start_ns"] - np.repeat(rs.start, np.diff(np.append(rs.first, len(ex))))
    ex_end = ex["end_ns"] - np.repeat(rs.start, np.diff(np.append(rs.first, len(ex))))
    idx = ex["index"].astype(np.int64)
    uniq = np.unique(idx)
    b_start = np.array([np.median(ex_start[idx == k]) for k in uniq])
    b_end = np.array([np.median(ex_end[idx == k]) for k in uniq])
    sse_start, sse_end, warmup_end = _marks(idx, ex_start, ex_end, sse)
    return WholeRunView(
        t_ns=_readonly(t),
        value=_readonly(val[kept]),
        run=_readonly(log_run),
        execution=_readonly(execution.astype(np.int64)),
        execution_index=_readonly(uniq),
        boundary_start_ns=_readonly(b_start),
        boundary_end_ns=_readonly(b_end),
        runs=_readonly(rs.ids),
        sse_index=sse if sse_start is not None else None,
        warmup_end_ns=warmup_end,
        sse_start_ns=sse_start,
        sse_end_ns=sse_end,
        ssp_start_ns=float(np.median(ex_start[rs.last])),
        ssp_end_ns=float(np.median(ex_end[rs.last])),
    )
