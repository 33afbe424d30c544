"""The plain arrays every FinGraV step consumes and produces.

Everything the analysis layer works on is a numpy structured array, so each
step also runs on logs a user brings from elsewhere (docs/ARCHITECTURE.md, the data flow):

* ``samples`` — power logs, SAMPLE_DTYPE (from the C++ sampler, the
  simulator, or a user): ``source_ts`` in the logger's own clock, ``host_ns``
  the host time right after the read that saw the log, one column per channel.
* ``executions`` — EXECUTION_DTYPE: every execution's run, index within the
  run, kernel id, and start/end on the host timeline with the uncertainty of
  each (how well the GPU-side markers were placed).
* ``lois`` — LOI_DTYPE: logs of interest, i.e. logs placed inside an
  execution of interest, with their time of interest (TOI) and placement
  uncertainty (paper Section IV-A).

The clock maps that turn device or logger ticks into host time are objects
with ``to_host(ticks)`` and ``error_bound_at(host_ns)`` (see
:mod:`fingrav_native.clocks`).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import check_power, flag, float_ns_to_int, instance_of
from fingrav_native._checks import whole_numbers as _whole_numbers
from fingrav_native._core import CHANNELS as CHANNELS  # re-exported: the layouts the steps consume
from fingrav_native._core import SAMPLE_DTYPE as SAMPLE_DTYPE

#: One execution of a kernel, on the host timeline (CLOCK_MONOTONIC_RAW ns, or
#: the Unix epoch for traces that use it). Times are exact int64 ns: a float64
#: at epoch magnitude (1.8e18 ns) resolves only 256 ns, which would turn a
#: 25 us execution into 24,832 or 25,088 ns.
EXECUTION_DTYPE = np.dtype(
    [
        ("run", "<i8"),           # run id
        ("index", "<i8"),         # execution index within the run (0 = first)
        ("kernel_id", "<i4"),
        ("start_ns", "<i8"),      # host time the execution started, exact ns
        ("end_ns", "<i8"),        # host time it ended, exact ns
        ("start_err_ns", "<f4"),  # half-width of the uncertainty of start_ns
        ("end_err_ns", "<f4"),    # ... and of end_ns
    ]
)


#: The layout before int64 times (fingrav-native <= 0.x profile files): still read, see as_executions.
EXECUTION_DTYPE_V1 = np.dtype(
    [("run", "<i4"), ("index", "<i4"), ("kernel_id", "<i4"), ("start_ns", "<f8"), ("end_ns", "<f8"),
     ("start_err_ns", "<f4"), ("end_err_ns", "<f4")]
)


#: One kernel execution as a vendor profiling runtime reported it (rocprofiler-sdk's kernel-dispatch
#: record, CUPTI's concurrent-kernel activity), field for field the C++ ``fingrav::launch::LaunchRecord``
#: (csrc/fingrav/launch/launch_record.hpp): the rows of a launch journal's ``LNCH`` records.
LAUNCH_DTYPE = np.dtype(
    [
        ("start_ns", "<i8"),        # on the journal's record clock (HEAD's record_clock), ns
        ("end_ns", "<i8"),
        ("correlation_id", "<u8"),  # the vendor's own id
        ("queue", "<u8"),           # HSA queue id (ROCm) or CUDA stream id
        ("symbol", "<u4"),          # index into the journal's kernel names (SYMB records)
        ("device", "<i4"),          # GPU ordinal as the runtime numbers devices; -1 unknown
        ("grid", "<u4", (3,)),      # ROCm: work-items, as rocprofv3 reports; CUDA: blocks; 0 unknown
        ("block", "<u4", (3,)),     # work-items per workgroup / threads per block; 0 unknown
        ("flags", "<u4"),           # bit 0: the runtime adjusted (clamped) the times
        ("reserved", "<u4"),
    ]
)


#: GPU-side markers of one execution, in device-clock ticks, as a backend returns them (RunRecord.markers)
#: and a campaign folder keeps them.
MARKER_RECORD_DTYPE = np.dtype(
    [
        ("run", "<i4"),
        ("index", "<i4"),
        ("kernel_id", "<i4"),
        ("begin_ticks", "<i8"),
        ("end_ticks", "<i8"),
        ("host_launch_ns", "<i8"),  # host time of the launch call (host-side marker)
        ("host_sync_ns", "<i8"),    # host time completion was seen (last of a launch), else -1
    ]
)


#: A log of interest: one power log placed inside one execution of interest.
LOI_DTYPE = np.dtype(
    [
        ("run", "<i8"),
        ("execution", "<i8"),     # execution index within the run
        ("kernel_id", "<i4"),
        ("seq", "<u8"),           # the log's sampler sequence number
        ("host_ns", "<i8"),       # the log's time on the host timeline, ns rounded (window end if windowed)
        ("window_ns", "<f8"),     # averaging window ending at host_ns (0 = instantaneous)
        ("toi_ns", "<f8"),        # time of interest: execution start to the log (windowed: centre of the window's part inside the execution)
        ("toi_frac", "<f8"),      # toi_ns / duration_ns
        ("duration_ns", "<f8"),   # the execution's duration
        ("uncert_ns", "<f8"),     # placement uncertainty of toi_ns (half-width)
        ("overlap", "<f4"),       # share of the log's window inside the execution (1 if instantaneous)
        ("total", "<f4"),
        ("compute", "<f4"),
        ("io", "<f4"),
        ("memory", "<f4"),
    ]
)


_INT64 = np.iinfo(np.int64)


_INT32 = np.iinfo(np.int32)


def _exact_times(values: Any, name: str) -> np.ndarray:
    """Host times as exact int64 ns: integers as given; floats rounded to the ns if they still hold it."""
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"{name}: not a numeric array ({exc})") from None
    if arr.dtype.kind == "f":
        return float_ns_to_int(arr, name, "pass them as int64 ns (e.g. Kineto's ts + baseTimeNanoseconds read exactly)")
    return _whole_numbers(arr, name, int(_INT64.min), int(_INT64.max))


def _uncertainties(values: Any, name: str, n: int) -> np.ndarray:
    if isinstance(values, (bool, np.bool_, str, bytes)) or values is None:
        raise ValueError(f"{name}={values!r}: must be a number of ns (or one per execution)")
    try:
        arr = np.broadcast_to(np.asarray(values, dtype=np.float64), (n,))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: must be a number or one per execution ({exc})") from None
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1e12):
        # Above 1000 s an error bound is no execution's (and a float32 field holds at most 3.4e38).
        raise ValueError(f"{name}: uncertainties must be finite, >= 0 and at most 1e12 ns")
    return arr


def make_executions(
    run: npt.ArrayLike,
    index: npt.ArrayLike,
    kernel_id: npt.ArrayLike,
    start_ns: npt.ArrayLike,
    end_ns: npt.ArrayLike,
    start_err_ns: npt.ArrayLike = 0.0,
    end_err_ns: npt.ArrayLike = 0.0,
) -> np.ndarray:
    """Build an EXECUTION_DTYPE array from columns, validating them.

    Parameters
    ----------
    run, index : array_like of int
        Run id and execution index within the run: whole numbers >= 0 that
        fit int64 (a float such as 0.2 is refused, never truncated).
    kernel_id : array_like of int
        Kernel id, a whole number that fits int32.
    start_ns, end_ns : array_like of int (or float)
        Host-time start and end of each execution, ns. Give int64 for exact
        times; floats are rounded to the ns, and refused above 2**53 ns
        (Unix-epoch times, where a float64 has already lost up to 256 ns).
    start_err_ns, end_err_ns : array_like of float or float
        Uncertainty (half-width, ns) of each start and end: finite, >= 0.

    Returns
    -------
    numpy.ndarray
        EXECUTION_DTYPE records.

    Raises
    ------
    ValueError
        Mismatched lengths, fractional or out-of-range ids, non-finite
        times, an execution that ends before it starts, negative or
        non-finite uncertainties, a (run, index) pair given twice, or
        executions that overlap in host time (one device runs one
        execution at a time, so neither executions of one run nor of
        different runs may share time); the message names the argument.

    Notes
    -----
    Paper Section IV-A: executions are placed on the host timeline through
    the clock map; every later step (golden runs, LOI/TOI, stitching)
    relies on these records being exact and consistent.

    Examples
    --------
    >>> ex = make_executions([0, 0], [0, 1], [0, 0], [1_000, 3_000], [2_000, 4_000])
    >>> ex["end_ns"] - ex["start_ns"]
    array([1000, 1000])
    """
    cols = {"run": run, "index": index, "kernel_id": kernel_id, "start_ns": start_ns, "end_ns": end_ns}
    shapes = {}
    for name, col in cols.items():
        try:
            shapes[name] = np.shape(col)
        except ValueError:  # a ragged nest: numpy cannot say its shape
            raise ValueError(f"{name}: must be 1-D numbers, got a ragged {type(col).__name__}") from None
    n = shapes["run"][0] if len(shapes["run"]) == 1 else -1
    for name, shape in shapes.items():
        if len(shape) != 1 or shape[0] != n:
            raise ValueError(f"{name}: must be 1-D with the same length as run ({n}), got shape {shape}")
    out = np.zeros(n, dtype=EXECUTION_DTYPE)
    out["run"] = _whole_numbers(run, "run", 0, int(_INT64.max))
    out["index"] = _whole_numbers(index, "index", 0, int(_INT64.max))
    out["kernel_id"] = _whole_numbers(kernel_id, "kernel_id", int(_INT32.min), int(_INT32.max))
    out["start_ns"] = _exact_times(start_ns, "start_ns")
    out["end_ns"] = _exact_times(end_ns, "end_ns")
    out["start_err_ns"] = _uncertainties(start_err_ns, "start_err_ns", n)
    out["end_err_ns"] = _uncertainties(end_err_ns, "end_err_ns", n)
    return validate_executions(out)


def lex_order(secondary: np.ndarray, primary: np.ndarray) -> np.ndarray:
    """``np.lexsort((secondary, primary))``, without the sort where the records are in that order already.

    Executions usually come sorted (by run, by start): one O(n) check then
    replaces two O(n log n) sorts, the same order either way (lexsort is
    stable, so sorted input gives ``arange``).
    """
    p, s = primary, secondary
    if len(p) < 2 or bool(np.all((p[1:] > p[:-1]) | ((p[1:] == p[:-1]) & (s[1:] >= s[:-1])))):
        return np.arange(len(p))
    return np.lexsort((s, p))


def validate_executions(executions: np.ndarray, name: str = "executions", *, exclusive: bool = True) -> np.ndarray:
    """Check executions and return them as EXECUTION_DTYPE; raise ValueError naming what is wrong.

    Parameters
    ----------
    executions : numpy.ndarray
        A structured array with the fields of EXECUTION_DTYPE. The layout
        before int64 times (int32 ids, float64 times: EXECUTION_DTYPE_V1,
        what older profile files hold) is converted exactly.
    name : str
        The argument's name, for messages.
    exclusive : bool
        True (default): the executions ran on one device one at a time, so
        none may overlap another in host time, whatever its run. False for
        traces of several streams or devices (a profiler trace): then only
        executions of one run must not overlap.

    Returns
    -------
    numpy.ndarray
        The same records as EXECUTION_DTYPE (the input itself when it
        already is).

    Raises
    ------
    ValueError
        See :func:`make_executions`.

    Notes
    -----
    Paper Section IV-B steps 5-6 read run, index and start/end of every
    execution; a duplicate (run, index) would count one run twice among the
    golden runs, overlapping times would place one log in two executions.
    """
    instance_of(name, "name", str, "the argument's name, a str")
    exclusive = flag(exclusive, "exclusive")
    if not isinstance(executions, np.ndarray) or executions.dtype.names is None:
        raise ValueError(f"{name}: must be a structured array with the fields of EXECUTION_DTYPE")
    missing = [f for f in EXECUTION_DTYPE.names or () if f not in executions.dtype.names]
    if missing:
        raise ValueError(f"{name}: missing fields {missing}")
    if executions.ndim != 1:
        raise ValueError(f"{name}: must be 1-D")
    if len(executions) == 0:
        raise ValueError(f"{name}: is empty; nothing was executed")
    if executions.dtype != EXECUTION_DTYPE:
        conv = np.zeros(len(executions), dtype=EXECUTION_DTYPE)
        conv["run"] = _whole_numbers(executions["run"], f"{name}['run']", 0, int(_INT64.max))
        conv["index"] = _whole_numbers(executions["index"], f"{name}['index']", 0, int(_INT64.max))
        conv["kernel_id"] = _whole_numbers(executions["kernel_id"], f"{name}['kernel_id']",
                                           int(_INT32.min), int(_INT32.max))
        conv["start_ns"] = _exact_times(executions["start_ns"], f"{name}['start_ns']")
        conv["end_ns"] = _exact_times(executions["end_ns"], f"{name}['end_ns']")
        conv["start_err_ns"] = executions["start_err_ns"]
        conv["end_err_ns"] = executions["end_err_ns"]
        executions = conv
    elif np.any(executions["run"] < 0) or np.any(executions["index"] < 0):
        raise ValueError(f"{name}: run and index must be >= 0")
    start, end = executions["start_ns"], executions["end_ns"]
    bad = np.nonzero(end <= start)[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name}: execution {i} (run {int(executions['run'][i])}, index {int(executions['index'][i])}) "
            f"ends at {int(end[i])} ns, not after its start {int(start[i])} ns"
        )
    errs = np.concatenate((executions["start_err_ns"], executions["end_err_ns"])).astype(np.float64)
    if not np.all(np.isfinite(errs)) or np.any(errs < 0):
        raise ValueError(f"{name}: start_err_ns and end_err_ns must be finite and >= 0")
    key = lex_order(executions["index"], executions["run"])
    r, k = executions["run"][key], executions["index"][key]
    dup = np.nonzero((r[1:] == r[:-1]) & (k[1:] == k[:-1]))[0]
    if dup.size:
        i = int(key[dup[0] + 1])
        raise ValueError(f"{name}: run {int(executions['run'][i])} has execution index "
                         f"{int(executions['index'][i])} more than once")
    runs = executions["run"] if not exclusive else np.zeros(len(executions), dtype=np.int64)
    order = lex_order(start, runs)
    s, e, g = start[order], end[order], runs[order]
    # One device runs one execution at a time. Sorted by start, checking each
    # against the one before suffices: if no neighbour overlaps, the ends are
    # sorted too, so no earlier execution can reach further.
    overlap = np.nonzero((g[1:] == g[:-1]) & (s[1:] < e[:-1]))[0]
    if overlap.size:
        j, i = int(order[overlap[0] + 1]), int(order[overlap[0]])
        which = (f"in run {int(executions['run'][j])}" if executions["run"][i] == executions["run"][j]
                 else f"across runs {int(executions['run'][i])} and {int(executions['run'][j])} "
                      "(runs given the same host times?)")
        raise ValueError(
            f"{name}: executions overlap {which}: run {int(executions['run'][j])} index "
            f"{int(executions['index'][j])} starts at {int(start[j])} ns, before run {int(executions['run'][i])} "
            f"index {int(executions['index'][i])} ends at {int(end[i])} ns; a device runs one execution at a time"
        )
    return executions


def validate_samples(samples: np.ndarray, name: str = "samples", *, require_total: bool = False,
                     max_power_w: Optional[float] = None) -> np.ndarray:
    """Check power logs before any step uses them; raise ValueError naming what is wrong.

    Parameters
    ----------
    samples : numpy.ndarray
        Power logs: a 1-D structured array with ``source_ts`` (the logger's
        timestamps, integer or finite float), optional ``window_ns`` and any
        of the channels of ``CHANNELS`` (SAMPLE_DTYPE or compatible).
    name : str
        The argument's name, for messages.
    require_total : bool
        Refuse logs without a ``total`` field (what a profile is built from;
        placing logs alone does not need it).
    max_power_w : float, optional
        The board's power limit where known: logs above 3 x it are refused.
        Unknown, the ceiling is 10 kW
        (:data:`~fingrav_native._checks.POWER_CEILING_W`), more than any
        accelerator draws.

    Returns
    -------
    numpy.ndarray
        ``samples`` itself.

    Raises
    ------
    ValueError
        Not a structured 1-D array, no ``source_ts``, no logs, non-finite
        timestamps or windows, negative windows; a ``total`` with any NaN or
        infinity (a log with no reading must be left out by whoever made
        it, not averaged in as nothing); any channel with an infinity, a
        negative power or an absurd one (above the ceiling: a flipped
        exponent, a unit error). Other channels may be NaN (a backend that
        does not report them).

    Notes
    -----
    Paper Section IV-B steps 6-8 average and integrate the logs' values; one
    NaN or infinity there silently gives a profile with no energy, a negative
    one an energy below zero, one 3e38 W log among hundreds (a flipped
    exponent) a profile of absurd energy, so they are refused here, where the
    logs enter.
    """
    instance_of(name, "name", str, "the argument's name, a str")
    require_total = flag(require_total, "require_total")
    if not isinstance(samples, np.ndarray) or samples.dtype.names is None or samples.ndim != 1:
        raise ValueError(f"{name}: must be a 1-D structured array (SAMPLE_DTYPE) with a source_ts field")
    names = samples.dtype.names
    if "source_ts" not in names:
        raise ValueError(f"{name}: has no source_ts field (fields: {list(names)})")
    if len(samples) == 0:
        raise ValueError(f"{name}: is empty; the logger recorded nothing")
    ts = samples["source_ts"]
    if ts.dtype.kind not in "iuf":
        raise ValueError(f"{name}: source_ts must be numbers, got dtype {ts.dtype}")
    if ts.dtype.kind == "f" and not np.all(np.isfinite(ts)):
        raise ValueError(f"{name}: source_ts must be finite")
    if "window_ns" in names:
        w = samples["window_ns"]
        if w.dtype.kind not in "iuf" or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(f"{name}: window_ns must be finite and >= 0")
    if require_total and "total" not in names:
        raise ValueError(f"{name}: has no total field; the total power is what every profile is built from")
    check_channels(samples, name, max_power_w=max_power_w)
    return samples


def check_channels(samples: np.ndarray, name: str, *, max_power_w: Optional[float] = None,
                   nan_total: bool = False) -> None:
    """Every power channel of ``samples`` a power: no infinity, no negative, nothing above the ceiling.

    NaN is refused in ``total`` unless ``nan_total`` (a capture or a
    recording keeps a failed read as NaN, as NVML reports it; the analysis
    refuses it where it would be averaged in) and allowed elsewhere (a
    channel the backend does not report).
    """
    for c in CHANNELS:
        if c not in (samples.dtype.names or ()):
            continue
        v = samples[c]
        if v.dtype.kind not in "iuf":
            raise ValueError(f"{name}: {c} must be numbers, got dtype {v.dtype}")
        check_power(v, f"{name}: {c}", max_power_w=max_power_w, allow_nan=nan_total or c != "total")
