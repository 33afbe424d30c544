"""Step 6 of FinGraV: logs of interest (LOI) and their time of interest (TOI).

The power logger knows nothing of kernels: its logs carry timestamps in the
logger's own clock. A clock map places them on the host timeline, where the
executions are, so each log that fell inside an execution of interest becomes
an LOI, and its position inside that execution its TOI (paper Section IV-A,
"high-resolution CPU-GPU sync", and Section IV-B, step 6).

Error budget of a TOI
---------------------
``toi_ns`` is a difference of two host times, the log's and the execution
start's, so its uncertainty (``uncert_ns``, a half-width) collects three
terms, one per source of timing error between the logger and the kernel:

1. the clock map's error bound at the log, ``logger_map.error_bound_at``;
2. the execution start's localisation, ``start_err_ns`` of the execution;
3. the logger's window semantics: a value averaged over a window stands for
   every instant of the part of the window inside the execution, so half
   that span (0 for an instantaneous log).

All three are bounds (half-widths), not standard deviations, so they are
added, not combined in quadrature: the sum bounds the TOI error whenever
each term bounds its own.

A clock map is any object with ``to_host(ticks) -> float64 ns`` and
``error_bound_at(host_ns) -> float64 ns`` (``ClockMapLike``; the maps of
:mod:`fingrav_native.clocks` are such objects).

Examples
--------
>>> import numpy as np
>>> from fingrav_native.records import SAMPLE_DTYPE, make_executions
>>> class Offset:                       # logger ticks = host ns - 1000, +-50 ns
...     def to_host(self, ticks): return np.asarray(ticks, dtype=np.float64) + 1000.0
...     def error_bound_at(self, host_ns): return np.full(np.shape(host_ns), 50.0)
>>> samples = np.zeros(3, dtype=SAMPLE_DTYPE)
>>> samples["source_ts"] = [0, 9_000, 20_000]   # host 1000, 10000, 21000
>>> samples["total"] = [100.0, 300.0, 200.0]
>>> executions = make_executions([0], [0], [1], [5_000.0], [15_000.0], start_err_ns=20.0)
>>> lois = place_logs(samples, executions, Offset())
>>> lois["toi_ns"].tolist(), lois["toi_frac"].tolist(), lois["uncert_ns"].tolist()
([5000.0], [0.5], [70.0])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import clock_map, numbers, real_number, whole_numbers
from fingrav_native._checks import readonly as _readonly
from fingrav_native._core import CHANNELS
from fingrav_native._errors import FingravError
from fingrav_native.clocks._maps import ClockMapLike, host_relative
from fingrav_native.records._layouts import LOI_DTYPE, lex_order, validate_executions, validate_samples


class NoLogsInExecutionsError(ValueError, FingravError):
    """No power log overlaps any execution of interest.

    A ValueError (the inputs cannot yield a profile), and its own type so a
    caller that can gather more runs (the orchestrator's top-up, step 7)
    tells it from malformed input without reading the message.
    """


@dataclass(frozen=True)
class LogAssignment:
    """Which execution each log fell in (-1 where none).

    Attributes
    ----------
    run : numpy.ndarray of int64
        Run id of the execution holding each log, -1 for none.
    execution : numpy.ndarray of int64
        Execution index within that run, -1 for none.
    row : numpy.ndarray of int64
        Row of that execution in the ``executions`` array, -1 for none.
    """

    run: np.ndarray
    execution: np.ndarray
    row: np.ndarray

    @property
    def assigned(self) -> np.ndarray:
        """Mask of the logs that fell inside some execution."""
        return self.row >= 0


def _int_or_none(value: Any, name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: must be an int or None, got {value!r}")
    # Counted from the end when negative; no run holds 2**62 executions either way.
    if not -(2**62) <= int(value) <= 2**62:
        raise ValueError(f"{name}={int(value)}: beyond any execution index (|index| <= 2**62)")
    return int(value)


def select_executions_of_interest(
    executions: np.ndarray,
    *,
    execution_of_interest: Optional[int] = None,
    kernel_id: Optional[int] = None,
    runs: Optional[npt.ArrayLike] = None,
) -> np.ndarray:
    """Mask of the executions of interest.

    Parameters
    ----------
    executions : numpy.ndarray
        EXECUTION_DTYPE records (validated).
    execution_of_interest : int, optional
        Execution index within each run: 3 is the fourth execution (SSE,
        paper Section IV-B step 3); a negative index counts from the end of
        each run, so -1 is each run's last execution (SSP). None keeps all.
    kernel_id : int, optional
        Keep only executions of this kernel.
    runs : array_like of int, optional
        Keep only these runs (e.g. the golden runs).

    Returns
    -------
    numpy.ndarray of bool
        One flag per execution, in input order.

    Raises
    ------
    ValueError
        Invalid ``executions``; ``runs`` empty or not 1-D; a filter that
        leaves no execution (the message names it).

    Notes
    -----
    1. Validate ``executions`` (:func:`~fingrav_native.records.validate_executions`).
    2. Keep executions whose index equals ``execution_of_interest``; for a
       negative value, whose index equals the run's largest index + 1 +
       ``execution_of_interest`` (per run, vectorised with ``np.maximum.at``).
    3. Then those of ``kernel_id`` and those in ``runs``.

    Examples
    --------
    >>> from fingrav_native.records import make_executions
    >>> ex = make_executions([0, 0, 1, 1, 1], [0, 1, 0, 1, 2], [0] * 5,
    ...                      [0, 10, 100, 110, 120], [5, 15, 105, 115, 125])
    >>> select_executions_of_interest(ex, execution_of_interest=-1).tolist()
    [False, True, False, False, True]
    """
    executions = validate_executions(executions)
    eoi = _int_or_none(execution_of_interest, "execution_of_interest")
    kid = _int_or_none(kernel_id, "kernel_id")
    mask = np.ones(len(executions), dtype=bool)
    index = executions["index"].astype(np.int64)
    if eoi is not None:
        if eoi >= 0:
            mask &= index == eoi
        else:
            uniq, inv = np.unique(executions["run"], return_inverse=True)
            last = np.full(uniq.size, np.iinfo(np.int64).min, dtype=np.int64)
            np.maximum.at(last, inv, index)
            mask &= index == last[inv] + 1 + eoi
        if not mask.any():
            raise ValueError(
                f"execution_of_interest: no run has an execution with index {eoi} "
                f"(indices present: {int(index.min())}..{int(index.max())})"
            )
    if kid is not None:
        mask &= executions["kernel_id"] == kid
        if not mask.any():
            raise ValueError(f"kernel_id: no execution of interest is of kernel {kid}")
    if runs is not None:
        r = whole_numbers(runs, "runs", 0, 2**63 - 1)  # an id of 0.5 is refused, not compared and missed
        if r.ndim != 1:
            raise ValueError(f"runs: must be a 1-D list of run ids, got shape {r.shape}")
        if r.size == 0:
            raise ValueError("runs: is empty; no run selected (were all runs rejected by binning?)")
        mask &= np.isin(executions["run"], r)
        if not mask.any():
            raise ValueError(f"runs: none of the {r.size} run id(s) has an execution of interest")
    return mask


def _field(samples: np.ndarray, name: str) -> Optional[np.ndarray]:
    names = samples.dtype.names or ()
    return samples[name] if name in names else None


def _as_host_array(values: Any, n: int, what: str, name: str = "logger_map") -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"{name}: {what} returned shape {arr.shape}, expected ({n},)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: {what} returned non-finite values")
    return arr


def _check_place_args(logger_map: ClockMapLike, min_overlap: float) -> float:
    """The share of a window that must lie inside an execution, once the clock map is known to be one."""
    clock_map(logger_map, "logger_map", ("to_host", "error_bound_at"))
    return real_number(min_overlap, "min_overlap", low=0.0, high=1.0)


def _windows(samples: np.ndarray) -> np.ndarray:
    """Each log's averaging window (ns, 0 = instantaneous; no ``window_ns`` field: all 0)."""
    win_field = _field(samples, "window_ns")
    window = np.zeros(len(samples)) if win_field is None else win_field.astype(np.float64)
    if not np.all(np.isfinite(window)) or np.any(window < 0):
        raise ValueError("samples: window_ns must be finite and >= 0")
    return window


@dataclass(frozen=True)
class _Selected:
    """The executions of interest by run and start, their starts and ends relative to an integer origin."""

    ex: np.ndarray
    origin: int
    start: np.ndarray
    end: np.ndarray


def _selected(executions: np.ndarray, execution_of_interest: Optional[int], kernel_id: Optional[int],
              runs: Optional[npt.ArrayLike]) -> _Selected:
    """The executions of interest, sorted by run then start (their ends are then sorted too: they do not overlap)."""
    mask = select_executions_of_interest(
        executions, execution_of_interest=execution_of_interest, kernel_id=kernel_id, runs=runs
    )
    sel = executions[mask]
    order = lex_order(sel["start_ns"], sel["run"])
    sel = sel[order]
    # All arithmetic relative to an exact integer origin: host times can be
    # Unix-epoch ns (1.8e18), where a float64 resolves only 256 ns.
    origin = int(sel["start_ns"].min())
    s_all = (sel["start_ns"] - origin).astype(np.float64)
    e_all = (sel["end_ns"] - origin).astype(np.float64)
    return _Selected(sel, origin, s_all, e_all)


def _overlapping_pairs(t: np.ndarray, b: np.ndarray, windowed: np.ndarray, w_max: float,
                       sel: _Selected) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The (log, execution) pairs that overlap, found with two binary searches per execution.

    An instantaneous log overlaps the executions with ``start <= t <= end``;
    a windowed one those with ``start < t`` and ``end > t - window``. Each
    execution's candidates are the logs with ``start <= t <= end + w_max``
    (every log that can reach it), then the exact test keeps the overlapping
    ones: one pass over all executions, no loop over runs (in situ, every
    execution is a run of its own).
    """
    log_order = np.argsort(t, kind="stable")
    t_sorted = t[log_order]
    s, e = sel.start, sel.end
    c0 = np.searchsorted(t_sorted, s, side="left")
    # 1 ns beyond end + w_max: a window that ends past it by less than a float's rounding is still a candidate.
    c1 = np.searchsorted(t_sorted, e + w_max + 1.0, side="right")
    cnt = np.clip(c1 - c0, 0, None)
    total = int(cnt.sum())
    if total == 0:
        return [], []
    ei = np.repeat(np.arange(len(s)), cnt)
    li = log_order[np.arange(total) - np.repeat(np.cumsum(cnt) - cnt - c0, cnt)]
    tc, bc, wc, se, ee = t[li], b[li], windowed[li], s[ei], e[ei]
    ok = np.where(wc, (se < tc) & (ee > bc), (se <= tc) & (tc <= ee))
    if not ok.any():
        return [], []
    return [li[ok]], [ei[ok]]


def _no_overlap(n: int, sel: _Selected, t: np.ndarray, b: np.ndarray, extra: str = "") -> NoLogsInExecutionsError:
    """The error for logs that miss every execution of interest, with both time ranges (a wrong clock map shows)."""
    n_runs = np.unique(sel.ex["run"]).size
    origin = sel.origin
    return NoLogsInExecutionsError(
        f"samples: no log overlaps an execution of interest{extra}: the {n} logs, mapped to host time "
        f"through logger_map, span [{origin + round(b.min())}, {origin + round(t.max())}] ns; the {len(sel.ex)} "
        f"execution(s) of interest in {n_runs} run(s) span [{origin + round(sel.start.min())}, "
        f"{origin + round(sel.end.max())}] ns "
        "(a clock map for another logger or session would do this)"
    )


def _loi_records(samples: np.ndarray, sel: np.ndarray, li: np.ndarray, ei: np.ndarray, host_tl: np.ndarray,
                 wl: np.ndarray, toi: np.ndarray, duration: np.ndarray, uncert: np.ndarray,
                 overlap: np.ndarray) -> np.ndarray:
    """LOI_DTYPE records of the (log, execution) pairs, sorted by run, execution and host time."""
    out = np.zeros(li.size, dtype=LOI_DTYPE)
    out["run"] = sel["run"][ei]
    out["execution"] = sel["index"][ei]
    out["kernel_id"] = sel["kernel_id"][ei]
    seq = _field(samples, "seq")
    out["seq"] = li if seq is None else seq[li]
    out["host_ns"] = host_tl
    out["window_ns"] = wl
    out["toi_ns"] = toi
    out["toi_frac"] = toi / duration
    out["duration_ns"] = duration
    out["uncert_ns"] = uncert
    out["overlap"] = overlap
    for c in CHANNELS:
        col = _field(samples, c)
        out[c] = math.nan if col is None else col[li]
    return out[np.lexsort((out["host_ns"], out["execution"], out["run"]))]


def place_logs(
    samples: np.ndarray,
    executions: np.ndarray,
    logger_map: ClockMapLike,
    *,
    execution_of_interest: Optional[int] = None,
    kernel_id: Optional[int] = None,
    runs: Optional[npt.ArrayLike] = None,
    min_overlap: float = 0.0,
) -> np.ndarray:
    """Place power logs inside the executions of interest (LOI and TOI).

    Parameters
    ----------
    samples : numpy.ndarray
        Power logs, SAMPLE_DTYPE or any structured array with ``source_ts``
        (logger ticks). Optional fields: ``window_ns`` (averaging window
        ending at ``source_ts``, 0 = instantaneous; absent = 0), ``seq``
        (absent = position), and the channels of ``CHANNELS`` (absent = NaN).
    executions : numpy.ndarray
        EXECUTION_DTYPE records on the host timeline.
    logger_map : clock map
        ``to_host(ticks)`` maps ``source_ts`` to host ns;
        ``error_bound_at(host_ns)`` bounds that mapping's error.
    execution_of_interest : int, optional
        Execution index within each run (3 = SSE, -1 = each run's last,
        the SSP); None takes every execution.
    kernel_id : int, optional
        Only executions of this kernel.
    runs : array_like of int, optional
        Only these runs, e.g. ``GoldenSelection.run_ids``.
    min_overlap : float
        Keep a windowed log only if at least this share of its window lies
        inside the execution, in [0, 1]; 0 keeps any overlap.

    Returns
    -------
    numpy.ndarray
        LOI_DTYPE records sorted by run, execution and host time.

    Raises
    ------
    ValueError
        ``samples`` empty, without ``source_ts``, or with negative or
        non-finite windows; ``executions`` invalid (overlapping, ending
        before they start, ...); a filter that selects no execution;
        ``logger_map`` returning the wrong shape or non-finite values;
        ``min_overlap`` outside [0, 1]; no log overlapping any execution of
        interest (the message gives both time ranges).
    TypeError
        ``logger_map`` lacks ``to_host`` or ``error_bound_at``.

    Notes
    -----
    Paper Section IV-A (CPU-GPU sync, LOI/TOI) and IV-B step 6; windowed
    logs after Section VI (loggers that report averages):

    1. Map every log's ``source_ts`` to host time ``t`` with
       ``logger_map.to_host``; its span is ``[t - window_ns, t]``, a single
       instant when ``window_ns`` is 0. (``window_ns`` is taken as host ns:
       tens of ppm of skew change a 1 ms window by tens of ns.)
    2. Select the executions of interest
       (:func:`select_executions_of_interest`).
    3. Per run, with the executions sorted by start (their ends are then
       sorted too: they do not overlap), find with two binary searches the
       executions each log overlaps: an instantaneous log those with
       ``start <= t <= end``; a windowed log those with ``start < t`` and
       ``end > t - window`` (one LOI per execution it overlaps, when several
       executions of interest fall in one window).
    4. Instantaneous log: ``toi_ns = t - start``, ``overlap = 1``.
       Windowed log: the value averages the window, so it is attributed to
       the part of the window inside the execution, ``[max(t - window,
       start), min(t, end)]``: ``toi_ns`` is that part's centre (the window
       centre when the window lies inside), ``overlap`` its length over
       the window's; logs below ``min_overlap`` are dropped.
    5. ``toi_frac = toi_ns / (end - start)``; ``uncert_ns`` =
       ``error_bound_at(t)`` + ``start_err_ns`` + half the span of step 4
       (bounds add; see the module's error budget).

    A log exactly at the boundary of two adjacent executions is placed in
    both. O((L + E) log(L + E)) for L logs and E executions.

    Examples
    --------
    A 4 us window ending 1 us after a 10 us execution's end: 3 us of it lie
    inside, centred 8.5 us into the execution:

    >>> import numpy as np
    >>> from fingrav_native.records import SAMPLE_DTYPE, make_executions
    >>> class Exact:
    ...     def to_host(self, ticks): return np.asarray(ticks, dtype=np.float64)
    ...     def error_bound_at(self, host_ns): return np.zeros(np.shape(host_ns))
    >>> s = np.zeros(1, dtype=SAMPLE_DTYPE)
    >>> s["source_ts"], s["window_ns"] = 11_000, 4_000
    >>> ex = make_executions([0], [0], [0], [0.0], [10_000.0])
    >>> loi = place_logs(s, ex, Exact())
    >>> float(loi["toi_ns"][0]), float(loi["overlap"][0]), float(loi["uncert_ns"][0])
    (8500.0, 0.75, 1500.0)
    """
    samples = validate_samples(samples)
    executions = validate_executions(executions)
    mo = _check_place_args(logger_map, min_overlap)
    window = _windows(samples)
    sel = _selected(executions, execution_of_interest, kernel_id, runs)
    return _place(samples, window, sel, logger_map, mo)


def place_logs_of_kernels(samples: np.ndarray, executions: np.ndarray, logger_map: ClockMapLike) -> np.ndarray:
    """Every log placed in every execution it overlaps, executions of several kernels at once (LOI and TOI).

    What :func:`place_logs` gives each kernel's executions alone, for all of
    them in one pass (an application's trace has hundreds of kernels, and
    placing each one's logs apart costs kernels x their logs): a
    (log, execution) pair's record depends on that log and that execution
    only, so each kernel's LOIs are those with its ``kernel_id``, in the
    same order. Executions of different runs may overlap (kernels of other
    streams); those of one run may not. Paper Section IV-B step 6.

    Parameters
    ----------
    samples, executions, logger_map
        As for :func:`place_logs` (every execution is of interest).

    Returns
    -------
    numpy.ndarray
        LOI_DTYPE records sorted by run, execution and host time; none where
        no log overlaps an execution.
    """
    samples = validate_samples(samples)
    executions = validate_executions(executions, exclusive=False)
    _check_place_args(logger_map, 0.0)
    window = _windows(samples)
    sel = _selected(executions, None, None, None)
    try:
        return _place(samples, window, sel, logger_map, 0.0)
    except NoLogsInExecutionsError:
        return np.zeros(0, dtype=LOI_DTYPE)


def _place(samples: np.ndarray, window: np.ndarray, sel: _Selected, logger_map: ClockMapLike,
           mo: float) -> np.ndarray:
    """Steps 1 and 3-5 of :func:`place_logs` on checked logs and the selected executions."""
    n = len(samples)

    # ---- step 1: logs on the host timeline (relative to the origin)
    t = _as_host_array(host_relative(logger_map, samples["source_ts"], sel.origin, "logger_map"), n, "to_host()")
    b = t - window
    windowed = window > 0

    # ---- step 3: per run, the (log, execution) pairs that overlap
    pair_logs, pair_execs = _overlapping_pairs(t, b, windowed, float(window.max()), sel)
    if not pair_logs:
        raise _no_overlap(n, sel, t, b)
    li = np.concatenate(pair_logs)
    ei = np.concatenate(pair_execs)

    # ---- step 4: TOI and overlap
    tl, bl, wl, isw = t[li], b[li], window[li], windowed[li]
    st, en = sel.start[ei], sel.end[ei]
    ov_lo = np.where(isw, np.maximum(bl, st), tl)
    ov_hi = np.where(isw, np.minimum(tl, en), tl)
    span = ov_hi - ov_lo
    overlap = np.where(isw, span / np.where(isw, wl, 1.0), 1.0)
    keep = overlap >= mo
    if not keep.all():
        li, ei, tl, wl, st, en, ov_lo, ov_hi, span, overlap = (
            a[keep] for a in (li, ei, tl, wl, st, en, ov_lo, ov_hi, span, overlap)
        )
        if li.size == 0:
            raise _no_overlap(n, sel, t, b, f" with at least {mo:g} of its window inside (min_overlap)")
    toi = 0.5 * (ov_lo + ov_hi) - st
    duration = en - st

    # ---- step 5: uncertainty (bounds add)
    host_tl = np.rint(tl).astype(np.int64) + np.int64(sel.origin)
    clock_err = _as_host_array(logger_map.error_bound_at(host_tl), tl.size, "error_bound_at()")
    if np.any(clock_err < 0):
        raise ValueError("logger_map: error_bound_at() returned negative bounds")
    uncert = clock_err + sel.ex["start_err_ns"][ei].astype(np.float64) + 0.5 * span
    return _loi_records(samples, sel.ex, li, ei, host_tl, wl, toi, duration, uncert, overlap)


def assign_logs_to_executions(samples_host_ns: npt.ArrayLike, executions: np.ndarray) -> LogAssignment:
    """Find the execution each log (already on host time) fell in.

    Parameters
    ----------
    samples_host_ns : array_like of float
        Each log's host time (e.g. ``logger_map.to_host(samples["source_ts"])``).
    executions : numpy.ndarray
        EXECUTION_DTYPE records.

    Returns
    -------
    LogAssignment
        Per log: run, execution index and row in ``executions``, or -1 for
        logs outside every execution (idle time, gaps between executions).

    Raises
    ------
    ValueError
        ``samples_host_ns`` not 1-D or non-finite; ``executions`` invalid,
        or executions of different runs overlapping in host time (a log
        there would belong to two executions).

    Notes
    -----
    For the whole-run view (paper Figures 5-7), where every log of a run
    matters, not only those of one execution:

    1. Validate; sort all executions by start and check that no two
       overlap, across runs too.
    2. For each log, the candidate is the last execution starting at or
       before it (one binary search); the log is in it if it is also at or
       before its end (``[start, end]`` closed; at a shared boundary the
       later execution wins).

    Examples
    --------
    >>> from fingrav_native.records import make_executions
    >>> ex = make_executions([0, 0], [0, 1], [0, 0], [10.0, 30.0], [20.0, 40.0])
    >>> a = assign_logs_to_executions([5, 15, 25, 30, 45], ex)
    >>> a.execution.tolist(), a.row.tolist()
    ([-1, 0, -1, 1, -1], [-1, 0, -1, 1, -1])
    """
    h = numbers(samples_host_ns, "samples_host_ns")
    if h.ndim != 1:
        raise ValueError(f"samples_host_ns: must be 1-D, got shape {h.shape}")
    if h.dtype.kind not in "iuf":
        raise ValueError(f"samples_host_ns: must be host times in ns (int64, or float), got dtype {h.dtype}")
    executions = validate_executions(executions)
    s, e = executions["start_ns"], executions["end_ns"]
    if h.dtype.kind == "f":
        if not np.all(np.isfinite(h)):
            raise ValueError("samples_host_ns: must be finite host times (ns)")
        if h.size and np.abs(h).max() >= 2.0**53:
            raise ValueError("samples_host_ns: float times beyond 2**53 ns (Unix-epoch scale) have already lost up "
                             "to 256 ns; pass int64 ns")
        # Below 2**53 every int64 time is exact as a float, so the comparisons are exact.
        s, e = s.astype(np.float64), e.astype(np.float64)
    else:
        h = h.astype(np.int64)
    # validate_executions refused overlaps across runs: sorted by start, the ends are sorted too.
    order = np.argsort(s, kind="stable")
    ss, es = s[order], e[order]
    cand = np.searchsorted(ss, h, side="right") - 1
    jc = np.clip(cand, 0, None)
    inside = (cand >= 0) & (h <= es[jc])
    row = np.where(inside, order[jc], -1).astype(np.int64)
    rc = np.clip(row, 0, None)
    run = np.where(inside, executions["run"][rc], -1).astype(np.int64)
    idx = np.where(inside, executions["index"][rc], -1).astype(np.int64)
    return LogAssignment(run=_readonly(run), execution=_readonly(idx), row=_readonly(row))
