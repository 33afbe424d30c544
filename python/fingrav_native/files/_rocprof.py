"""GPU kernels from a rocprofv3 run (kernel_trace.csv, results.json or a rocpd database), and any trace by content.

rocprofv3 (ROCprofiler-SDK) writes one row per kernel dispatch to
``<pid>_kernel_trace.csv``: ``Kind`` (``KERNEL_DISPATCH``), ``Agent_Id`` (an
integer, or ``"Agent N"`` / ``"GPU N"`` in ROCm 6.4 and later), ``Queue_Id``,
``Stream_Id`` (newer releases), ``Correlation_Id``, ``Kernel_Name``,
``Start_Timestamp`` and ``End_Timestamp`` (integer ns), and the dispatch
shape ``Workgroup_Size_X/Y/Z`` and ``Grid_Size_X/Y/Z``
(``source/lib/output/generateCSV.cpp``, see :mod:`._rocprof_agents` for the
commit). Three things differ from a Kineto trace:

* the grid is in work-items (HSA's dispatch packet), not in blocks as CUDA
  counts it; the signature keeps rocprofv3's numbers as written;
* the timestamps are CLOCK_BOOTTIME ns, not the Unix epoch
  (:data:`~._rocprof_agents.ROCPROF_CLOCK`): a capture maps its logs onto
  that clock through its CLOCK_BOOTTIME brackets;
* ``Agent_Id`` counts every agent, CPUs first: the reader maps it to the GPU
  ordinal through the ``<pid>_agent_info.csv`` rocprofv3 writes beside the
  trace (``Node_Id``, ``Logical_Node_Id``, ``Agent_Type``); without that file
  the numbers stay agent numbers, and the trace says so
  (:attr:`KernelTrace.device_numbering`). ``"GPU N"`` is the ordinal itself.

:func:`read_rocprof_kernel_trace` also reads ``--output-format json``
(:mod:`._rocprof_json`) and rocpd (:mod:`._rocpd`) by their content;
:func:`read_trace` tells all of them and Kineto JSON apart.
"""

from __future__ import annotations

import csv
import os
from typing import Optional, Union

from fingrav_native._checks import file_path
from fingrav_native.files._kineto import load_trace_json, read_kineto_trace
from fingrav_native.files._rocpd import SQLITE_MAGIC, read_rocpd
from fingrav_native.files._rocprof_agents import AGENT_NUMBERING, ROCPROF_CLOCK, Agent, gpu_ordinals
from fingrav_native.files._rocprof_json import ROCPROF_JSON_KEY, rocprof_trace_from_doc
from fingrav_native.files._safe import file_problem, short_repr
from fingrav_native.insitu._trace import GPU_ORDINAL, KernelTrace, TraceFormatError, missing_trace

_REQUIRED = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")

#: Columns every rocprofv3 release writes (generateCSV.cpp) that the reader takes as they are: a file
#: without one would leave the reader to guess (two shapes of one GEMM merged under a made-up grid).
#: ``Stream_Id`` is not among them: releases before HIP streams were recorded write queues only.
_WRITTEN = ("Agent_Id", "Queue_Id", "Correlation_Id", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z",
            "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z")


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int(row: dict[str, str], key: str, i: int, where: str, default: int | None = None) -> int:
    """Cell ``key`` of row ``i`` as an int64 (plain decimal digits); an empty cell is refused unless a
    ``default`` is given (a field the format leaves optional)."""
    v = row.get(key)
    if v is None or v == "":
        if default is None:
            raise TraceFormatError(f"{where}: row {i} has no {key} (an empty cell or a short row); every "
                                   "rocprofv3 kernel trace writes it")
        return default
    if not isinstance(v, str):  # a row with more cells than columns: DictReader puts the rest in a list
        raise TraceFormatError(f"{where}: row {i} has {key}={short_repr(v)}; expected an integer")
    v = v.strip()
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
_Row = tuple[int, int, str, tuple[int, ...], tuple[int, ...], tuple[str, int], int, int]


def _agent(row: dict[str, str], i: int, where: str) -> tuple[str, int]:
    """``Agent_Id`` as (label, number): ``("Agent", n)`` for ``"Agent n"`` or a bare ``n``, ``("GPU", n)``."""
    v = row.get("Agent_Id")
    if not isinstance(v, str):
        return "Agent", _int(row, "Agent_Id", i, where)
    v = v.strip()
    if v.startswith("CPU "):
        raise TraceFormatError(f"{where}: row {i} has Agent_Id={short_repr(v)}; a kernel dispatch runs on a GPU")
    for label in ("Agent", "GPU"):
        if v.startswith(label + " "):
            return label, _int({"Agent_Id": v[len(label) + 1:]}, "Agent_Id", i, where)
    return "Agent", _int(row, "Agent_Id", i, where)


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
    stream = _int(row, "Stream_Id", i, where, default=-1)
    if stream <= 0:  # absent (an older release), or 0 (the null stream) in files that also give queues
        stream = _int(row, "Queue_Id", i, where)
    return (start, end, name, grid, block, _agent(row, i, where), stream, _int(row, "Correlation_Id", i, where))


def read_rocprof_kernel_trace(trace: Union[str, os.PathLike[str]]) -> KernelTrace:
    """Read the kernel dispatches of a rocprofv3 run: its ``kernel_trace.csv``, ``results.json`` or rocpd database.

    Parameters
    ----------
    trace : str or path
        What ``rocprofv3 --kernel-trace`` wrote, told apart by content: a
        rocpd SQLite database (``--output-format rocpd``, the default since
        ROCm 7.0: ``<pid>_results.db``), JSON (``--output-format json``:
        ``<pid>_results.json``) or CSV (``--output-format csv``:
        ``<pid>_kernel_trace.csv``).

    Returns
    -------
    KernelTrace
        ``clock="CLOCK_BOOTTIME"``; one device per GPU, numbered by GPU
        ordinal (rocprofv3's agents mapped through its agent table: see
        :mod:`fingrav_native.files._rocprof_agents`); one stream per HIP
        stream where the file has them, else per queue; no iterations or
        launch records (rocprofv3 keeps those in other tables).

    Raises
    ------
    TraceFormatError
        Naming the file: not readable (a directory, not UTF-8, a cell past
        the csv module's 128 kB limit, not a database), a required column,
        field or table missing, no kernel dispatch, a malformed value or one
        that does not fit int64 (the message names the row or record and the
        field), an agent that is not a GPU, or dispatch records that
        contradict each other.
    ValueError
        ``trace`` is not a path.

    Notes
    -----
    In-situ FinGraV on ROCm (paper Section IV-A's protocol over an
    application's own dispatches); the times stay exact int64 ns.
    """
    p, kind = _sniff(trace)
    if kind == "rocpd":
        return read_rocpd(p)
    if kind == "json":
        return rocprof_trace_from_doc(load_trace_json(p), p)
    return _read_csv(p)


def _sniff(trace: object) -> tuple[str, str]:
    """The path, and what its first bytes say it is: ``"rocpd"`` (SQLite), ``"json"`` (``{``, ``[``, gzip) or ``"csv"``."""
    p = file_path(trace, "trace")
    try:
        problem = file_problem(p)
    except FileNotFoundError:
        raise missing_trace(f"trace={p!r}") from None
    if problem is not None:
        raise TraceFormatError(f"trace={p!r}: {problem}")
    try:
        with open(p, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TraceFormatError(f"trace={p!r}: cannot read it ({exc})") from exc
    if head == SQLITE_MAGIC:
        return p, "rocpd"
    _refuse_empty(p, head)
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    return p, "json" if first in (b"{", b"[") or head[:2] == b"\x1f\x8b" else "csv"


def _refuse_empty(p: str, head: bytes) -> None:
    """Say what a trace that holds nothing is (an empty file, blank lines, a JSON ``null``), not which format it
    fails to be."""
    if len(head) == len(SQLITE_MAGIC) and head.strip(b"\xef\xbb\xbf \t\r\n"):
        return  # more than a few bytes of content: the readers name what is wrong with it
    try:
        with open(p, "rb") as f:
            body = f.read(64).strip(b"\xef\xbb\xbf \t\r\n")
    except OSError as exc:
        raise TraceFormatError(f"trace={p!r}: cannot read it ({exc})") from exc
    if not body:
        raise TraceFormatError(f"trace={p!r}: an empty file (no bytes, or only blank lines): no kernel trace was "
                               "written to it (the profiler stopped before exporting, or another file was meant)")
    if body == b"null":
        raise TraceFormatError(f"trace={p!r}: a JSON null, not a trace (no traceEvents list and no kernels): the "
                               "profiler exported nothing")


def _read_csv(p: str) -> KernelTrace:
    """:func:`read_rocprof_kernel_trace` for a ``kernel_trace.csv``."""
    where = f"trace={p!r}"
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
            unwritten = [c for c in _WRITTEN if c not in fields]
            if unwritten:
                # Without the dispatch shape, two shapes of one kernel would be one signature.
                raise TraceFormatError(f"{where}: no column{'s' if len(unwritten) > 1 else ''} "
                                       f"{', '.join(unwritten)}; every rocprofv3 kernel trace writes them (the "
                                       "grid and workgroup keep two shapes of one kernel apart): give the file as "
                                       "rocprofv3 wrote it")
            rows = [_dispatch(row, i, where) for i, row in enumerate(reader)
                    if row.get("Kind", "KERNEL_DISPATCH") in ("KERNEL_DISPATCH", None)]
    except OSError as exc:
        raise TraceFormatError(f"{where}: cannot read it ({exc})") from exc
    except (csv.Error, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"{where}: not a CSV file ({exc})") from exc
    if not rows:
        raise TraceFormatError(f"{where}: no KERNEL_DISPATCH rows; was rocprofv3 run with --kernel-trace?")
    devices, numbering = _gpu_ordinals_of(p, [r[5] for r in rows])
    # Dispatch begin/end from the command processor's timestamps, converted to CLOCK_BOOTTIME by ROCr.
    try:
        return KernelTrace.from_rows(
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
            [r[4] for r in rows], clock=ROCPROF_CLOCK, source=p, device=devices,
            stream=[r[6] for r in rows], correlation=[r[7] for r in rows], err_ns=1000.0,
            device_numbering=numbering)
    except (ValueError, OverflowError) as exc:
        # The records themselves are inconsistent (what make_executions refuses): the file is at fault.
        raise TraceFormatError(f"{where}: {exc}") from None


#: The columns of rocprofv3's ``agent_info.csv`` the reader needs (generateCSV.cpp).
_AGENT_COLUMNS = ("Node_Id", "Logical_Node_Id", "Agent_Type")


def agent_info_path(kernel_trace: str) -> Optional[str]:
    """The ``agent_info.csv`` rocprofv3 writes beside ``<prefix>kernel_trace.csv`` (None: not a name it writes)."""
    folder, name = os.path.split(kernel_trace)
    if not name.endswith("kernel_trace.csv"):
        return None
    return os.path.join(folder, name[: -len("kernel_trace.csv")] + "agent_info.csv")


def _gpu_ordinals_of(p: str, agents: list[tuple[str, int]]) -> tuple[list[int], str]:
    """Each row's GPU ordinal and the trace's device numbering (agent numbers where no agent table is found)."""
    if all(label == "GPU" for label, _ in agents):
        return [n for _, n in agents], GPU_ORDINAL  # rocprofv3 --agent-index type-relative: the ordinal itself
    info = agent_info_path(p)
    if info is None or not os.path.isfile(info):
        return [n for _, n in agents], AGENT_NUMBERING
    where = f"trace={p!r}: its agent table {os.path.basename(info)!r}"
    try:
        with open(info, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = [c for c in _AGENT_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceFormatError(f"{where}: no column {missing[0]!r}")
            table = [(_int(r, "Node_Id", i, where, None), _int(r, "Logical_Node_Id", i, where, None),
                      r.get("Agent_Type") == "GPU") for i, r in enumerate(reader)]
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"{where}: cannot read it ({exc})") from exc
    # Agent_Id is the logical node id by default, the node id with --agent-index absolute (metadata.cpp).
    by_logical = gpu_ordinals([Agent(key=lg, gpu=g, logical_node_id=lg) for _, lg, g in table], where)
    by_node = gpu_ordinals([Agent(key=nd, gpu=g, logical_node_id=lg) for nd, lg, g in table], where)
    out = []
    for label, n in agents:
        ordinal = n if label == "GPU" else by_logical.get(n, by_node.get(n))
        if ordinal is None:
            raise TraceFormatError(f"trace={p!r}: Agent_Id {label} {n} is no GPU of {os.path.basename(info)!r} "
                                   f"(its GPUs: logical node ids {sorted(by_logical)})")
        out.append(ordinal)
    return out, GPU_ORDINAL


def read_trace(trace: Union[str, "os.PathLike[str]"]) -> KernelTrace:
    """Read an application's kernel trace, whichever profiler wrote it (told apart by content).

    Parameters
    ----------
    trace : str or path
        A torch.profiler (Kineto) Chrome trace (``.json`` or ``.json.gz``),
        or what rocprofv3 wrote: ``kernel_trace.csv``, ``results.json``
        (``--output-format json``) or a rocpd database (``results.db``).

    Returns
    -------
    KernelTrace
        ``clock`` says which host clock its times are on (``"unix-epoch"``:
        CLOCK_REALTIME for Kineto; ``"CLOCK_BOOTTIME"`` for rocprofv3).

    Raises
    ------
    TraceFormatError
        As the format's reader (:func:`~fingrav_native.files.read_kineto_trace`,
        :func:`read_rocprof_kernel_trace`).
    ValueError
        ``trace`` is not a path.
    """
    p, kind = _sniff(trace)
    if kind == "rocpd":
        return read_rocpd(p)
    if kind == "csv":
        return _read_csv(p)
    # A Kineto trace is read by the streaming scanner (memory bounded by its kernels); only a JSON without a
    # traceEvents list is read whole, as the rocprofv3 JSON it may be.
    try:
        return read_kineto_trace(p)
    except TraceFormatError as exc:
        if "no traceEvents list" not in str(exc):
            raise
    doc = load_trace_json(p)
    if isinstance(doc, dict) and ROCPROF_JSON_KEY in doc:
        return rocprof_trace_from_doc(doc, p)
    raise TraceFormatError(f"trace={p!r}: no traceEvents list (not a Chrome trace) and no {ROCPROF_JSON_KEY!r} "
                           "key (not a rocprofv3 JSON output)")
