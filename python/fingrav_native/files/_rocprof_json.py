"""GPU kernels from rocprofv3's JSON output (``--output-format json``, ``<pid>_results.json``).

The layout, from ROCprofiler-SDK's writer (``source/lib/output/generateJSON.cpp``
and the cereal ``save`` functions of ``include/rocprofiler-sdk/cxx/serialization/save.hpp``
and ``source/lib/output/{stream_info,kernel_symbol_info}.hpp`` at the commit
:mod:`._rocprof_agents` names; the documented schema is
``source/docs/rocprofv3-schema.json``)::

    {"rocprofiler-sdk-tool": [            one element per process
        {"metadata": {"pid", "init_time", "fini_time", ...},
         "agents": [{"id": {"handle"}, "type" (1 CPU, 2 GPU), "node_id",
                     "logical_node_id", "logical_node_type_id", ...}],
         "kernel_symbols": [{"kernel_id", "kernel_name",
                             "formatted_kernel_name", ...}],   indexed by kernel_id
         "buffer_records": {"kernel_dispatch": [
             {"correlation_id": {"internal", "external", ...},
              "start_timestamp", "end_timestamp",             CLOCK_BOOTTIME ns
              "dispatch_info": {"agent_id": {"handle"}, "queue_id": {"handle"},
                                "kernel_id", "dispatch_id",
                                "workgroup_size": {"x", "y", "z"},
                                "grid_size": {"x", "y", "z"}, ...},
              "stream_id": {"handle"}, ...}], ...}, ...}]}

The kernel's name is ``formatted_kernel_name``, what the CSV's ``Kernel_Name``
shows (``metadata::get_kernel_name``); the correlation id the record's
``internal`` one, what the CSV's ``Correlation_Id`` shows. The agent handle is
mapped to the GPU ordinal through ``agents`` (:func:`~._rocprof_agents.gpu_ordinals`).

No JSON file recorded by rocprofv3 exists in the upstream repository (tests/data
holds one synthesized from this layout; its README says so).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Optional

from fingrav_native.files._rocprof_agents import ROCPROF_CLOCK, Agent, gpu_ordinals
from fingrav_native.files._safe import short_repr
from fingrav_native.insitu._trace import KernelTrace, TraceFormatError, json_int64

#: The top-level key of rocprofv3's JSON output (generateJSON.cpp's ``json_output``).
ROCPROF_JSON_KEY = "rocprofiler-sdk-tool"


def _get(obj: Any, path: str, where: str, *, required: bool = True) -> Any:
    """``obj["a"]["b"]`` for ``path="a.b"``; a missing required part is named."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            if required:
                raise TraceFormatError(f"{where} has no {path}")
            return None
        cur = cur[part]
    return cur


def _int(obj: Any, path: str, where: str) -> int:
    """A required integer field that fits int64 (``path`` dotted), named when it is missing or not one."""
    v = _get(obj, path, where)
    out = json_int64(v)
    if out is None:
        # JSON numbers with a fraction arrive as Decimal (load_trace_json): shown as written.
        shown = str(v) if isinstance(v, Decimal) else short_repr(v)
        raise TraceFormatError(f"{where} has {path}={shown}; expected an integer that fits int64")
    return out


def _opt_int(obj: Any, path: str, where: str) -> Optional[int]:
    """:func:`_int` of a field that may be absent or null (None then); a part of its path that is there but
    not an object (``"stream_id": "7"``) is refused, not read as absent."""
    cur = obj
    for k, part in enumerate(path.split(".")):
        if cur is None or (isinstance(cur, dict) and part not in cur):
            return None
        if not isinstance(cur, dict):
            head = ".".join(path.split(".")[:k])
            raise TraceFormatError(f"{where} has {head}={short_repr(cur)}; expected an object with {part!r}")
        cur = cur[part]
    return None if cur is None else _int(obj, path, where)


def _agents(process: dict[str, Any], where: str) -> dict[int, int]:
    """The process's GPU agents: handle -> GPU ordinal."""
    agents = process.get("agents")
    if not isinstance(agents, list):
        raise TraceFormatError(f"{where} has no agents list")
    out = []
    for j, a in enumerate(agents):
        w = f"{where}, agent {j},"
        out.append(Agent(key=_int(a, "id.handle", w), gpu=_int(a, "type", w) == 2,
                         logical_node_id=_int(a, "logical_node_id", w),
                         type_index=_opt_int(a, "logical_node_type_id", w)))
    return gpu_ordinals(out, where)


def _kernel_names(process: dict[str, Any], where: str) -> dict[int, str]:
    """kernel_id -> formatted name (``kernel_name`` where a symbol has no formatted one)."""
    symbols = process.get("kernel_symbols")
    if not isinstance(symbols, list):
        raise TraceFormatError(f"{where} has no kernel_symbols list")
    names: dict[int, str] = {}
    for j, sym in enumerate(symbols):
        w = f"{where}, kernel_symbols[{j}],"
        if not isinstance(sym, dict):
            raise TraceFormatError(f"{w} is {short_repr(sym)}, not an object")
        kid = _int(sym, "kernel_id", w)
        for key in ("formatted_kernel_name", "kernel_name"):
            if key in sym and not isinstance(sym[key], str):
                raise TraceFormatError(f"{w} has {key}={short_repr(sym[key])}; expected a string")
        name = sym.get("formatted_kernel_name") or sym.get("kernel_name")
        # The writer fills the ids it never saw with empty symbols (get_kernel_symbols: index = kernel id).
        if not name:
            continue
        if names.get(kid, name) != name:
            raise TraceFormatError(f"{w} names kernel_id={kid} {short_repr(name)}, which an earlier symbol named "
                                   f"{short_repr(names[kid])}: which kernel ran cannot be told")
        names[kid] = name
    return names


#: One dispatch: start, end, name, grid, block, GPU ordinal, stream (or queue), correlation id.
_Row = tuple[int, int, str, tuple[int, int, int], tuple[int, int, int], int, int, int]


def _dispatch(rec: Any, where: str, ordinal: dict[int, int], names: dict[int, str]) -> _Row:
    """One kernel_dispatch record checked: times ordered, its agent a GPU, its kernel named."""
    if not isinstance(rec, dict):
        raise TraceFormatError(f"{where} is {short_repr(rec)}, not an object")
    start, end = _int(rec, "start_timestamp", where), _int(rec, "end_timestamp", where)
    if start < 0 or end < start:
        raise TraceFormatError(f"{where} has start_timestamp={start}, end_timestamp={end}")
    agent = _int(rec, "dispatch_info.agent_id.handle", where)
    if agent not in ordinal:
        raise TraceFormatError(f"{where} has dispatch_info.agent_id.handle={agent}, which is no GPU of the "
                               f"process's agents (GPU handles: {sorted(ordinal)})")
    kid = _int(rec, "dispatch_info.kernel_id", where)
    if kid not in names:
        raise TraceFormatError(f"{where} has dispatch_info.kernel_id={kid}, which kernel_symbols does not name")
    grid = [_int(rec, f"dispatch_info.grid_size.{a}", where) for a in "xyz"]
    block = [_int(rec, f"dispatch_info.workgroup_size.{a}", where) for a in "xyz"]
    stream = _opt_int(rec, "stream_id.handle", where)
    if not stream:  # absent (before HIP streams were recorded), or 0 (the null stream): the queue
        stream = _int(rec, "dispatch_info.queue_id.handle", where)
    # Every record the writer saves carries its correlation id (save.hpp): one missing is not guessed.
    corr = _int(rec, "correlation_id.internal", where)
    return (start, end, names[kid], (grid[0], grid[1], grid[2]), (block[0], block[1], block[2]),
            ordinal[agent], stream, corr)


def rocprof_trace_from_doc(doc: Any, p: str) -> KernelTrace:
    """The kernel dispatches of a rocprofv3 JSON document already parsed (``p``: its path, for messages).

    Parameters
    ----------
    doc : object
        The parsed JSON (:func:`~fingrav_native.files._kineto.load_trace_json`).
    p : str
        The file's path.

    Returns
    -------
    KernelTrace
        ``clock="CLOCK_BOOTTIME"``, devices by GPU ordinal, streams by HIP
        stream (by queue where a record has none).

    Raises
    ------
    TraceFormatError
        Naming the file, the process, the record and the field: not this
        layout, no kernel dispatch, a malformed or out-of-range value, an
        agent that is not a GPU, a kernel id without a symbol.
    """
    where = f"trace={p!r}"
    procs = doc.get(ROCPROF_JSON_KEY) if isinstance(doc, dict) else None
    if isinstance(procs, dict):
        procs = [procs]
    if not isinstance(procs, list):
        raise TraceFormatError(f"{where}: no {ROCPROF_JSON_KEY!r} list (not rocprofv3 JSON output)")
    rows: list[_Row] = []
    for k, proc in enumerate(procs):
        w = f"{where}: {ROCPROF_JSON_KEY}[{k}]"
        if not isinstance(proc, dict):
            raise TraceFormatError(f"{w} is {short_repr(proc)}, not an object")
        records = _get(proc, "buffer_records", w, required=False)
        dispatches = records.get("kernel_dispatch", []) if isinstance(records, dict) else None
        if not isinstance(dispatches, list):
            raise TraceFormatError(f"{w} has no buffer_records.kernel_dispatch list")
        if not dispatches:
            continue
        ordinal, names = _agents(proc, w), _kernel_names(proc, w)
        rows += [_dispatch(rec, f"{w}.buffer_records.kernel_dispatch[{i}]", ordinal, names)
                 for i, rec in enumerate(dispatches)]
    if not rows:
        raise TraceFormatError(f"{where}: no kernel_dispatch records; was rocprofv3 run with --kernel-trace?")
    try:
        return KernelTrace.from_rows(
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
            [r[4] for r in rows], clock=ROCPROF_CLOCK, source=p, device=[r[5] for r in rows],
            stream=[r[6] for r in rows], correlation=[r[7] for r in rows], err_ns=1000.0)
    except (ValueError, OverflowError) as exc:
        raise TraceFormatError(f"{where}: {exc}") from None
