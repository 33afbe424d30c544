"""GPU kernels from a rocprofv3 kernel trace (``--kernel-trace --output-format csv``), as executions.

rocprofv3 (ROCprofiler-SDK) writes one row per kernel dispatch to
``<pid>_kernel_trace.csv``: ``Kind`` (``KERNEL_DISPATCH``), ``Agent_Id`` (an
integer, or ``"Agent N"`` in ROCm 6.4 and later), ``Queue_Id``,
``Stream_Id`` (newer releases), ``Correlation_Id``, ``Kernel_Name``,
``Start_Timestamp`` and ``End_Timestamp`` (integer ns), and the dispatch
shape ``Workgroup_Size_X/Y/Z`` and ``Grid_Size_X/Y/Z``. Two things differ
from a Kineto trace:

* the grid is in work-items (HSA's dispatch packet), not in blocks as CUDA
  counts it; the signature keeps rocprofv3's numbers as written;
* the timestamps are on a host monotonic clock, not the Unix epoch: ROCr
  converts the dispatch's GPU ticks to its system clock, and
  ROCprofiler-SDK's own host stamps use the steady clock (CLOCK_MONOTONIC);
  which of CLOCK_MONOTONIC and CLOCK_BOOTTIME ROCr's system clock is (they
  differ by the time the host spent suspended) is not documented. The
  clock map of the power logs must end on that clock (``KernelTrace.clock``
  is ``"host-monotonic"``).

Not checked against a file from a real MI300X run (no AMD GPU here): the
layout follows ROCprofiler-SDK's documentation and published examples.
"""

from __future__ import annotations

import csv
import os
from typing import Union

from fingrav_native._checks import file_path
from fingrav_native.files._kineto import read_kineto_trace
from fingrav_native.files._safe import file_problem, short_repr
from fingrav_native.insitu._trace import KernelTrace, TraceFormatError

_REQUIRED = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int(row: dict[str, str], key: str, i: int, where: str, default: int | None = -1) -> int:
    """Cell ``key`` of row ``i`` as an int64 (plain decimal digits), or ``default`` when empty (None: required)."""
    v = row.get(key)
    if v is None or v == "":
        if default is None:
            raise TraceFormatError(f"{where}: row {i} has no {key} (a short row?)")
        return default
    if not isinstance(v, str):  # a row with more cells than columns: DictReader puts the rest in a list
        raise TraceFormatError(f"{where}: row {i} has {key}={short_repr(v)}; expected an integer")
    v = v.strip()
    if key == "Agent_Id" and v.startswith("Agent "):
        v = v[len("Agent "):]
    try:
        # Plain decimal digits only (int() would also take "1_000" and other scripts' digits).
        if not (v.isascii() and v.lstrip("+-").isdigit() and len(v) <= 20):
            raise ValueError(v)
        out = int(v)
    except ValueError:
        out = None
    if out is None or not _INT64_MIN <= out <= _INT64_MAX:
        raise TraceFormatError(f"{where}: row {i} has {key}={short_repr(row.get(key))}; "
                               "expected an integer that fits int64") from None
    return out


#: One dispatch: start and end (ns), kernel name, grid, block, agent, stream (or queue), correlation id.
_Row = tuple[int, int, str, tuple[int, ...], tuple[int, ...], int, int, int]


def _dispatch(row: dict[str, str], i: int, where: str) -> _Row:
    """One KERNEL_DISPATCH row checked: its times ordered, its name present, every integer within int64."""
    start = _int(row, "Start_Timestamp", i, where, default=None)
    end = _int(row, "End_Timestamp", i, where, default=None)
    if start < 0 or end < start:
        raise TraceFormatError(f"{where}: row {i} has Start_Timestamp={start}, End_Timestamp={end}")
    name = row.get("Kernel_Name")
    if not isinstance(name, str):
        raise TraceFormatError(f"{where}: row {i} has no Kernel_Name (a short row?)")
    grid = tuple(_int(row, f"Grid_Size_{a}", i, where) for a in "XYZ")
    block = tuple(_int(row, f"Workgroup_Size_{a}", i, where) for a in "XYZ")
    stream = _int(row, "Stream_Id", i, where)
    if stream <= 0:  # absent, or 0 (the null stream) in files that also give queues
        stream = _int(row, "Queue_Id", i, where)
    return (start, end, name, grid, block, _int(row, "Agent_Id", i, where), stream,
            _int(row, "Correlation_Id", i, where))


def read_rocprof_kernel_trace(trace: Union[str, os.PathLike[str]]) -> KernelTrace:
    """Read the kernel dispatches of a rocprofv3 ``kernel_trace.csv``.

    Parameters
    ----------
    trace : str or path
        The CSV file rocprofv3 ``--kernel-trace --output-format csv`` wrote.

    Returns
    -------
    KernelTrace
        ``clock="host-monotonic"``; one device per agent, one stream per
        queue (or HIP stream where the file has ``Stream_Id``); no
        iterations or launch records (rocprofv3 keeps those in other files).

    Raises
    ------
    TraceFormatError
        Naming the file: not readable (a directory, not UTF-8, a cell past
        the csv module's 128 kB limit), a required column missing, no
        ``KERNEL_DISPATCH`` row, a malformed value or one that does not fit
        int64 (the message names the row and column), or dispatch records
        that contradict each other.
    ValueError
        ``trace`` is not a path.

    Notes
    -----
    In-situ FinGraV on ROCm (paper Section IV-A's protocol over an
    application's own dispatches); the times stay exact int64 ns.
    """
    p = file_path(trace, "trace")
    where = f"trace={p!r}"
    try:
        problem = file_problem(p)
    except FileNotFoundError:
        problem = "cannot read it: no such file"
    if problem is not None:
        raise TraceFormatError(f"{where}: {problem}")
    try:
        # utf-8-sig: a file saved with a byte-order mark (spreadsheet tools add one) keeps its first
        # column's name; read as plain utf-8 it became "\ufeffKind", every row counted as a dispatch.
        with open(p, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            fields = reader.fieldnames or []
            missing = [c for c in _REQUIRED if c not in fields]
            if missing:
                raise TraceFormatError(f"{where}: no column {missing[0]!r}; not a rocprofv3 kernel trace "
                                       f"(columns: {[short_repr(c, 40) for c in fields[:8]]})")
            rows = [_dispatch(row, i, where) for i, row in enumerate(reader)
                    if row.get("Kind", "KERNEL_DISPATCH") in ("KERNEL_DISPATCH", None)]
    except OSError as exc:
        raise TraceFormatError(f"{where}: cannot read it ({exc})") from exc
    except (csv.Error, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"{where}: not a CSV file ({exc})") from exc
    if not rows:
        raise TraceFormatError(f"{where}: no KERNEL_DISPATCH rows; was rocprofv3 run with --kernel-trace?")
    # Dispatch begin/end from the command processor's timestamps, converted to the host clock by ROCr.
    try:
        return KernelTrace.from_rows(
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
            [r[4] for r in rows], clock="host-monotonic", source=p, device=[r[5] for r in rows],
            stream=[r[6] for r in rows], correlation=[r[7] for r in rows], err_ns=1000.0)
    except (ValueError, OverflowError) as exc:
        # The records themselves are inconsistent (what make_executions refuses): the file is at fault.
        raise TraceFormatError(f"{where}: {exc}") from None


def read_trace(trace: Union[str, "os.PathLike[str]"]) -> KernelTrace:
    """Read an application's kernel trace: rocprofv3 ``kernel_trace.csv`` (a ``.csv`` path), else Kineto JSON.

    Parameters
    ----------
    trace : str or path
        A torch.profiler (Kineto) Chrome trace (``.json`` or ``.json.gz``) or
        a rocprofv3 ``kernel_trace.csv``.

    Returns
    -------
    KernelTrace
    """
    if file_path(trace, "trace").endswith(".csv"):
        return read_rocprof_kernel_trace(trace)
    return read_kineto_trace(trace)
