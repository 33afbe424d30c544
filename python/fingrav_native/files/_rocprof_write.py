"""Kernel executions written as rocprofv3 would write them: ``kernel_trace.csv``, ``results.json`` or rocpd.

For the simulator (:meth:`~fingrav_native.app.SimTrainingLoop.write_rocprof_trace`)
and for tests: what a ``rocprofv3 --kernel-trace`` run on a host with
``cpu_agents`` CPU agents and the GPUs the executions name leaves behind, in
the layout ROCprofiler-SDK's writers use at the commit
:mod:`._rocprof_agents` names (the readers' modules describe each). Only the
fields and columns the readers use, plus the ones that give each record its
identity, are written; the names, nesting, types and numbering (agent
handles, node ids, kernel ids from 1, a table per name with a ``_<uuid>``
suffix and a view without) are upstream's.
"""

from __future__ import annotations

import csv
import io
import os
import sqlite3
import uuid
from typing import Any, Optional, Union

import numpy as np

from fingrav_native._checks import choice, integer_in, whole_numbers
from fingrav_native.files._outputs import atomic_output, check_output_path, write_atomically, write_json
from fingrav_native.files._rocprof_agents import UPSTREAM
from fingrav_native.files._rocprof_json import ROCPROF_JSON_KEY
from fingrav_native.insitu._trace import INT64_MAX, INT64_MIN, row_columns

#: ``--output-format`` values written.
FORMATS = ("csv", "json", "rocpd")


#: rocprofiler_buffer_tracing_kind_t / rocprofiler_kernel_dispatch_operation_t (include/rocprofiler-sdk/fwd.h).
_KIND_KERNEL_DISPATCH, _OP_COMPLETE = 11, 2

#: strings.buffer_records[kind].kind for kind 0 .. KERNEL_DISPATCH (the enum's names without their prefix).
_KINDS = ("NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API", "HSA_FINALIZE_EXT_API", "HIP_RUNTIME_API",
          "HIP_COMPILER_API", "MARKER_CORE_API", "MARKER_CONTROL_API", "MARKER_NAME_API", "MEMORY_COPY",
          "KERNEL_DISPATCH")


#: The handle of an agent is its logical node id plus this (source/lib/rocprofiler-sdk/agent.cpp's offset).
_HANDLE_OFFSET = 1


def _agents(n_gpus: int, cpus: int) -> list[dict[str, Any]]:
    """CPU agents first, then GPUs, numbered as agent.cpp numbers them."""
    out = []
    for k in range(cpus + n_gpus):
        gpu = k >= cpus
        out.append({"node_id": k, "logical_node_id": k, "logical_node_type_id": k - cpus if gpu else k,
                    "type": 2 if gpu else 1, "handle": k + _HANDLE_OFFSET,
                    "name": "gfx942" if gpu else "Simulated CPU", "product_name": "Simulated GPU" if gpu else "CPU"})
    return out


def _columns(names: Any, grid: Any, block: Any, start_ns: Any, end_ns: Any, device: Any, stream: Any,
             correlation: Any) -> dict[str, Any]:
    """The per-execution values, checked for one per execution (as KernelTrace.from_rows checks its rows)."""
    start, end, names, grid, block = row_columns(start_ns, end_ns, names, grid, block)
    n = len(start)

    def per(v: Any, what: str, default: np.ndarray) -> np.ndarray:
        return default if v is None else whole_numbers(v, what, INT64_MIN, INT64_MAX).ravel()

    cols: dict[str, Any] = {"names": list(names), "grid": [tuple(g) for g in grid], "block": [tuple(b) for b in block],
                            "start": start, "end": end, "device": per(device, "device", np.zeros(n, np.int64)),
                            "stream": per(stream, "stream", np.ones(n, np.int64)),
                            "correlation": per(correlation, "correlation", np.arange(1, n + 1))}
    for key, v in cols.items():
        if len(v) != n:
            raise ValueError(f"{key}: {len(v)} values for {n} executions")
    if any(len(g) != 3 for g in cols["grid"] + cols["block"]):
        raise ValueError("grid, block: three integers per execution")
    if n == 0 or np.any(cols["device"] < 0) or np.any(cols["stream"] < 1):
        raise ValueError("start_ns: at least one execution; device: GPU ordinals >= 0; stream: handles >= 1")
    return cols


def write_rocprof_trace(path: Union[str, os.PathLike[str]], names: Any, grid: Any, block: Any, start_ns: Any,
                        end_ns: Any, *, output_format: str = "csv", device: Any = None, stream: Any = None,
                        correlation: Any = None, pid: int = 4242, cpu_agents: int = 2) -> str:
    """Write kernel executions as a rocprofv3 kernel trace.

    Parameters
    ----------
    path : str or path-like
        The file: ``<prefix>kernel_trace.csv`` for CSV (its
        ``<prefix>agent_info.csv`` is written beside it), the ``.json`` or
        ``.db`` file otherwise.
    names : sequence of str
    grid, block : sequences of three integers
        Per execution (work-items, as HSA's dispatch packet counts the grid).
    start_ns, end_ns : array_like of int
        Per execution, CLOCK_BOOTTIME ns (what rocprofv3 stamps on).
    output_format : {"csv", "json", "rocpd"}
    device : array_like of int, optional
        Per execution, the GPU ordinal (default 0).
    stream : array_like of int, optional
        Per execution, the HIP stream (and queue) handle (default 1).
    correlation : array_like of int, optional
        Per execution, the internal correlation id (default 1, 2, ...).
    pid : int
        The process id rocprofv3 records.
    cpu_agents : int
        CPU agents before the GPUs (agent numbers are not GPU ordinals).

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ValueError
        Naming the argument: an unknown format, a CSV name rocprofv3 would
        not write, lengths that differ, a negative device or stream.
    """
    choice(output_format, "output_format", FORMATS)
    p = check_output_path(path, "path", writes="rocprof")
    pid = integer_in(pid, "pid", 0)
    cpu_agents = integer_in(cpu_agents, "cpu_agents", 0, 1024)
    if output_format == "csv" and not p.endswith("kernel_trace.csv"):
        raise ValueError(f"path={p!r}: a rocprofv3 CSV kernel trace is named <prefix>kernel_trace.csv")
    cols = _columns(names, grid, block, start_ns, end_ns, device, stream, correlation)
    agents = _agents(int(cols["device"].max()) + 1, int(cpu_agents))
    kernel_id: dict[str, int] = {}
    for name in cols["names"]:
        kernel_id.setdefault(name, len(kernel_id) + 1)  # id 0 is no kernel (metadata::get_kernel_symbols)
    if output_format == "csv":
        agent_path = os.path.join(os.path.dirname(p), os.path.basename(p)[: -len("kernel_trace.csv")]
                                  + "agent_info.csv")
        check_output_path(agent_path, "path", writes="rocprof", shown=f"path={p!r}: its agent_info.csv")
        _write_csv(p, cols, agents, kernel_id, int(cpu_agents))
    elif output_format == "json":
        write_json(p, _json_doc(cols, agents, kernel_id, int(cpu_agents), int(pid)))
    else:
        write_atomically(p, lambda tmp: _write_rocpd(tmp, cols, agents, kernel_id, int(cpu_agents), int(pid)))
    return p


def _write_csv(p: str, cols: dict[str, Any], agents: list[dict[str, Any]], kernel_id: dict[str, int],
               cpus: int) -> None:
    """kernel_trace.csv (generateCSV.cpp's 22 columns, ``"Agent <logical node id>"``) and agent_info.csv."""
    header = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
              "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
              "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z",
              "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
    with atomic_output(p) as raw, io.TextIOWrapper(raw, newline="", encoding="utf-8") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        w.writerow(header)
        for i, name in enumerate(cols["names"]):
            s = int(cols["stream"][i])
            w.writerow(["KERNEL_DISPATCH", f"Agent {cpus + int(cols['device'][i])}", s, s, 1, i + 1, kernel_id[name],
                        name, int(cols["correlation"][i]), int(cols["start"][i]), int(cols["end"][i]), 0, 0, 8, 0, 16,
                        *cols["block"][i], *cols["grid"][i]])
    folder, base = os.path.split(p)
    with atomic_output(os.path.join(folder, base[: -len("kernel_trace.csv")] + "agent_info.csv")) as raw, \
            io.TextIOWrapper(raw, newline="", encoding="utf-8") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        w.writerow(["Node_Id", "Logical_Node_Id", "Agent_Type", "Name", "Product_Name"])
        for a in agents:
            w.writerow([a["node_id"], a["logical_node_id"], "GPU" if a["type"] == 2 else "CPU", a["name"],
                        a["product_name"]])


def _json_doc(cols: dict[str, Any], agents: list[dict[str, Any]], kernel_id: dict[str, int], cpus: int,
              pid: int) -> dict[str, Any]:
    """The ``--output-format json`` document (generateJSON.cpp's nesting, save.hpp's field names)."""
    symbols: list[dict[str, Any]] = [{"size": 0, "kernel_id": 0, "code_object_id": 0, "kernel_name": "",
                                      "formatted_kernel_name": "", "demangled_kernel_name": "",
                                      "truncated_kernel_name": ""}]
    symbols += [{"size": 88, "kernel_id": k, "code_object_id": 1, "kernel_name": name, "kernel_object": 4096 * k,
                 "formatted_kernel_name": name, "demangled_kernel_name": name, "truncated_kernel_name": name}
                for name, k in kernel_id.items()]
    dispatches = []
    for i, name in enumerate(cols["names"]):
        g, b, s = cols["grid"][i], cols["block"][i], int(cols["stream"][i])
        dispatches.append({
            "size": 104, "kind": _KIND_KERNEL_DISPATCH, "operation": _OP_COMPLETE, "thread_id": pid,
            "correlation_id": {"internal": int(cols["correlation"][i]), "external": 0, "ancestor": 0},
            "start_timestamp": int(cols["start"][i]), "end_timestamp": int(cols["end"][i]),
            "dispatch_info": {"size": 64, "agent_id": {"handle": cpus + int(cols["device"][i]) + _HANDLE_OFFSET},
                              "queue_id": {"handle": s}, "kernel_id": kernel_id[name], "dispatch_id": i + 1,
                              "private_segment_size": 0, "group_segment_size": 0,
                              "workgroup_size": dict(zip("xyz", b)), "grid_size": dict(zip("xyz", g))},
            "stream_id": {"handle": s}})
    strings = {"buffer_records": [{"kind": k, "operations": []} for k in _KINDS[:-1]]
               + [{"kind": _KINDS[-1], "operations": ["NONE", "KERNEL_DISPATCH_ENQUEUE", "KERNEL_DISPATCH_COMPLETE"]}]}
    return {ROCPROF_JSON_KEY: [{
        "metadata": {"pid": pid, "init_time": int(cols["start"].min()) - 1_000_000,
                     "fini_time": int(cols["end"].max()) + 1_000_000, "command": ["simulated"],
                     "synthesized": f"fingrav_native, from the layout of {UPSTREAM}"},
        "agents": [{"size": 0, "id": {"handle": a["handle"]}, "type": a["type"], "name": a["name"],
                    "product_name": a["product_name"], "node_id": a["node_id"],
                    "logical_node_id": a["logical_node_id"], "logical_node_type_id": a["logical_node_type_id"]}
                   for a in agents],
        "counters": [], "strings": strings, "code_objects": [], "kernel_symbols": symbols, "summary": [],
        "callback_records": {"counter_collection": []},
        "buffer_records": {"kernel_dispatch": dispatches, "hip_api": [], "hsa_api": [], "marker_api": [],
                           "memory_copy": []}}]}


#: The tables a kernel trace needs, with upstream's columns (rocpd_tables.sql); {t} is the uuid suffix.
_SCHEMA = """
CREATE TABLE "rocpd_metadata{t}" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "tag" TEXT NOT NULL,
    "value" TEXT NOT NULL);
CREATE TABLE "rocpd_string{t}" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL,
    "string" TEXT NOT NULL UNIQUE);
CREATE TABLE "rocpd_info_agent{t}" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL,
    "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "type" TEXT CHECK ("type" IN ('CPU', 'GPU')),
    "absolute_index" INTEGER, "logical_index" INTEGER, "type_index" INTEGER, "uuid" INTEGER, "name" TEXT,
    "model_name" TEXT, "vendor_name" TEXT, "product_name" TEXT, "user_name" TEXT, "extdata" JSONB DEFAULT '{{}}' NOT NULL);
CREATE TABLE "rocpd_info_kernel_symbol{t}" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL,
    "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "code_object_id" INTEGER NOT NULL, "kernel_name" TEXT,
    "display_name" TEXT, "kernel_object" INTEGER, "kernarg_segment_size" INTEGER, "kernarg_segment_alignment" INTEGER,
    "group_segment_size" INTEGER, "private_segment_size" INTEGER, "sgpr_count" INTEGER, "arch_vgpr_count" INTEGER,
    "accum_vgpr_count" INTEGER, "extdata" JSONB DEFAULT '{{}}' NOT NULL);
CREATE TABLE "rocpd_event{t}" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL,
    "category_id" INTEGER, "stack_id" INTEGER, "parent_stack_id" INTEGER, "correlation_id" INTEGER,
    "call_stack" JSONB DEFAULT '{{}}' NOT NULL, "line_info" JSONB DEFAULT '{{}}' NOT NULL,
    "extdata" JSONB DEFAULT '{{}}' NOT NULL);
CREATE TABLE "rocpd_kernel_dispatch{t}" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL,
    "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER NOT NULL,
    "kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL, "queue_id" INTEGER NOT NULL,
    "stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "private_segment_size" INTEGER,
    "group_segment_size" INTEGER, "workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL,
    "workgroup_size_z" INTEGER NOT NULL, "grid_size_x" INTEGER NOT NULL, "grid_size_y" INTEGER NOT NULL,
    "grid_size_z" INTEGER NOT NULL, "region_name_id" INTEGER, "event_id" INTEGER,
    "extdata" JSONB DEFAULT '{{}}' NOT NULL);
"""


def _write_rocpd(p: str, cols: dict[str, Any], agents: list[dict[str, Any]], kernel_id: dict[str, int], cpus: int,
                 pid: int, guid: Optional[str] = None) -> None:
    """A rocpd database: upstream's tables (``_<uuid>`` suffix) and the ``rocpd_<name>`` views over them."""
    if os.path.exists(p):
        os.unlink(p)  # a database is appended to by sqlite: start from nothing, as rocprofv3 does
    guid = guid or str(uuid.uuid4())
    suffix = "_" + guid.replace("-", "_")
    conn = sqlite3.connect(p)
    try:
        conn.executescript(_SCHEMA.format(t=suffix))
        for table in ("metadata", "string", "info_agent", "info_kernel_symbol", "event", "kernel_dispatch"):
            conn.execute(f'CREATE VIEW "rocpd_{table}" AS SELECT * FROM "rocpd_{table}{suffix}"')
        conn.executemany(f'INSERT INTO "rocpd_metadata{suffix}" (tag, value) VALUES (?, ?)',
                         [("schema_version", "3"), ("uuid", suffix), ("guid", guid),
                          ("synthesized", f"fingrav_native, from the schema of {UPSTREAM}")])
        # rocpd_info_agent.id is the agent's node id (generateRocpd.cpp).
        conn.executemany(f'INSERT INTO "rocpd_info_agent{suffix}" (id, guid, nid, pid, type, absolute_index, '
                         f'logical_index, type_index, name, product_name) VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?)',
                         [(a["node_id"], guid, pid, "GPU" if a["type"] == 2 else "CPU", a["node_id"],
                           a["logical_node_id"], a["logical_node_type_id"], a["name"], a["product_name"])
                          for a in agents])
        conn.executemany(f'INSERT INTO "rocpd_info_kernel_symbol{suffix}" (id, guid, nid, pid, code_object_id, '
                         f'kernel_name, display_name) VALUES (?, ?, 1, ?, 1, ?, ?)',
                         [(k, guid, pid, name, name) for name, k in kernel_id.items()])
        n = len(cols["names"])
        # The event's stack_id is the internal correlation id, correlation_id the external one (generateRocpd.cpp).
        conn.executemany(f'INSERT INTO "rocpd_event{suffix}" (id, guid, stack_id, parent_stack_id, correlation_id) '
                         f'VALUES (?, ?, ?, ?, 0)',
                         [(i + 1, guid, int(c), int(c)) for i, c in enumerate(cols["correlation"])])
        conn.executemany(
            f'INSERT INTO "rocpd_kernel_dispatch{suffix}" (id, guid, nid, pid, tid, agent_id, kernel_id, dispatch_id, '
            f'queue_id, stream_id, "start", "end", workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, '
            f'grid_size_y, grid_size_z, event_id) VALUES (?, ?, 1, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            [(i + 1, guid, pid, cpus + int(cols["device"][i]), kernel_id[cols["names"][i]], i + 1,
              int(cols["stream"][i]), int(cols["stream"][i]), int(cols["start"][i]), int(cols["end"][i]),
              *cols["block"][i], *cols["grid"][i], i + 1) for i in range(n)])
        conn.commit()
    finally:
        conn.close()
