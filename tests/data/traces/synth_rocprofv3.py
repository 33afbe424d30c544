"""Write the synthesized rocprofv3 outputs in rocprofv3/synth/ (python3 synth_rocprofv3.py [--check]).

No rocprofv3 JSON or rocpd output recorded on a real GPU exists in the upstream
repository (rocprofv3/SCHEMA_NOTES.md), so these files are SYNTHESIZED, not
real: one run of six kernel dispatches on a host with two CPU agents and two
GPUs whose KFD node ids have a gap (nodes 0, 1, 2, 4), written three ways
(kernel_trace.csv with agent_info.csv, results.json, results.db) in the
layout ROCprofiler-SDK writes at ROCm/rocm-systems commit
1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992 (projects/rocprofiler-sdk):

* CSV headers: source/lib/output/generateCSV.cpp (kernel_trace: 22 columns,
  Agent_Id "Agent <logical_node_id>"; agent_info: 53 columns);
* JSON: source/lib/output/generateJSON.cpp (nesting) and the cereal save()
  functions of source/include/rocprofiler-sdk/cxx/serialization/save.hpp,
  source/lib/output/stream_info.hpp and kernel_symbol_info.hpp (field names;
  kernel_symbols indexed by kernel id, index 0 an empty symbol; the agent
  handle is logical_node_id + 1);
* rocpd: the columns of source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql
  for the tables a kernel trace fills (each table named with a _<uuid>
  suffix, a view rocpd_<name> over it, rocpd_views.sql) and the values
  source/lib/output/generateRocpd.cpp inserts (rocpd_info_agent.id = node id,
  type_index = logical_node_type_id; rocpd_event.stack_id = the internal
  correlation id).

Written with the standard library only (json, csv, sqlite3), independently of
fingrav_native's own writer, so the readers are checked against a second
implementation of the layout. ``--check`` rewrites them to a temporary folder
and compares (the CSV and JSON byte for byte, the database table by table).
"""

from __future__ import annotations

import csv
import filecmp
import json
import os
import sqlite3
import sys
import tempfile

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rocprofv3", "synth")
PID = 7301
GUID = "0198c1a2-5b3e-7f00-8d2c-3a4b5c6d7e8f"
SUFFIX = "_" + GUID.replace("-", "_")

# (node_id, logical_node_id, type, logical_node_type_id, name, product_name)
AGENTS = [(0, 0, "CPU", 0, "AMD EPYC 9454 48-Core Processor", "AMD EPYC 9454 48-Core Processor"),
          (1, 1, "CPU", 1, "AMD EPYC 9454 48-Core Processor", "AMD EPYC 9454 48-Core Processor"),
          (2, 2, "GPU", 0, "gfx942", "AMD Instinct MI300X"),
          (4, 3, "GPU", 1, "gfx942", "AMD Instinct MI300X")]

KERNELS = {3: "void gemm_kernel<float, 128>(float const*, float const*, float*, int)",
           5: "elementwise_add(float*, float const*, int)",
           6: "void reduce<256>(float const*, float*, int)"}

# (GPU ordinal, stream, kernel_id, internal correlation id, start, end, grid, workgroup): CLOCK_BOOTTIME ns.
T0 = 276_543_210_987_654
DISPATCHES = [(0, 1, 3, 11, T0, T0 + 48_000, (16384, 1, 1), (256, 1, 1)),
              (0, 1, 5, 12, T0 + 48_000, T0 + 52_160, (1048576, 1, 1), (256, 1, 1)),
              (1, 2, 3, 13, T0 + 9_500, T0 + 57_900, (16384, 1, 1), (256, 1, 1)),
              (0, 2, 6, 14, T0 + 60_010, T0 + 61_234, (65536, 1, 1), (256, 1, 1)),
              (1, 2, 5, 15, T0 + 58_000, T0 + 62_100, (1048576, 1, 1), (256, 1, 1)),
              (0, 1, 3, 16, T0 + 70_000, T0 + 118_321, (16384, 1, 1), (256, 1, 1))]

AGENT_INFO_COLUMNS = [
    "Node_Id", "Logical_Node_Id", "Agent_Type", "Cpu_Cores_Count", "Simd_Count", "Cpu_Core_Id_Base", "Simd_Id_Base",
    "Max_Waves_Per_Simd", "Lds_Size_In_Kb", "Gds_Size_In_Kb", "Num_Gws", "Wave_Front_Size", "Num_Xcc", "Cu_Count",
    "Array_Count", "Num_Shader_Banks", "Simd_Arrays_Per_Engine", "Cu_Per_Simd_Array", "Simd_Per_Cu",
    "Max_Slots_Scratch_Cu", "Gfx_Target_Version", "Vendor_Id", "Device_Id", "Location_Id", "Domain",
    "Drm_Render_Minor", "Num_Sdma_Engines", "Num_Sdma_Xgmi_Engines", "Num_Sdma_Queues_Per_Engine", "Num_Cp_Queues",
    "Max_Engine_Clk_Ccompute", "Max_Engine_Clk_Fcompute", "Sdma_Fw_Version", "Fw_Version", "Capability",
    "Cu_Per_Engine", "Max_Waves_Per_Cu", "Family_Id", "Workgroup_Max_Size", "Grid_Max_Size", "Local_Mem_Size",
    "Hive_Id", "Gpu_Id", "Workgroup_Max_Dim_X", "Workgroup_Max_Dim_Y", "Workgroup_Max_Dim_Z", "Grid_Max_Dim_X",
    "Grid_Max_Dim_Y", "Grid_Max_Dim_Z", "Name", "Vendor_Name", "Product_Name", "Model_Name"]

# The scalar fields of save(rocprofiler_agent_v0_t), in order, between "type" and the strings.
AGENT_SCALARS = [
    "cpu_cores_count", "simd_count", "mem_banks_count", "caches_count", "io_links_count", "cpu_core_id_base",
    "simd_id_base", "max_waves_per_simd", "lds_size_in_kb", "gds_size_in_kb", "num_gws", "wave_front_size",
    "num_xcc", "cu_count", "array_count", "num_shader_banks", "simd_arrays_per_engine", "cu_per_simd_array",
    "simd_per_cu", "max_slots_scratch_cu", "gfx_target_version", "vendor_id", "device_id", "location_id", "domain",
    "drm_render_minor", "num_sdma_engines", "num_sdma_xgmi_engines", "num_sdma_queues_per_engine", "num_cp_queues",
    "max_engine_clk_ccompute", "max_engine_clk_fcompute"]
CAPABILITY_BITS = [
    "HotPluggable", "HSAMMUPresent", "SharedWithGraphics", "QueueSizePowerOfTwo", "QueueSize32bit", "QueueIdleEvent",
    "VALimit", "WatchPointsSupported", "WatchPointsTotalBits", "DoorbellType", "AQLQueueDoubleMap",
    "DebugTrapSupported", "WaveLaunchTrapOverrideSupported", "WaveLaunchModeSupported",
    "PreciseMemoryOperationsSupported", "DEPRECATED_SRAM_EDCSupport", "Mem_EDCSupport", "RASEventNotify",
    "ASICRevision", "SRAM_EDCSupport", "SVMAPISupported", "CoherentHostAccess", "DebugSupportedFirmware"]


def gpu_node(ordinal: int) -> tuple:
    return [a for a in AGENTS if a[2] == "GPU" and a[3] == ordinal][0]


def agent_scalars(a: tuple) -> dict:
    gpu = a[2] == "GPU"
    v = dict.fromkeys(AGENT_SCALARS, 0)
    v.update(cpu_cores_count=0 if gpu else 96, simd_count=1216 if gpu else 0, wave_front_size=64 if gpu else 0,
             num_xcc=8 if gpu else 0, cu_count=304 if gpu else 0, gfx_target_version=90402 if gpu else 0,
             vendor_id=4098 if gpu else 0, device_id=29857 if gpu else 0, max_engine_clk_fcompute=2100 if gpu else 0,
             max_engine_clk_ccompute=3810)
    return v


def write_csv(folder: str) -> None:
    with open(os.path.join(folder, f"{PID}_kernel_trace.csv"), "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        w.writerow(["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
                    "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size",
                    "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X",
                    "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"])
        for i, (g, s, k, c, t0, t1, grid, wg) in enumerate(DISPATCHES):
            w.writerow(["KERNEL_DISPATCH", f"Agent {gpu_node(g)[1]}", s, s, PID, i + 1, k, KERNELS[k], c, t0, t1,
                        0, 0, 32, 0, 48, *wg, *grid])
    with open(os.path.join(folder, f"{PID}_agent_info.csv"), "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        w.writerow(AGENT_INFO_COLUMNS)
        for a in AGENTS:
            sc = agent_scalars(a)
            nums = [sc[c.lower()] if c.lower() in sc else 0 for c in AGENT_INFO_COLUMNS[3:49]]
            w.writerow([a[0], a[1], a[2], *nums, a[4], "AMD" if a[2] == "GPU" else "CPU", a[5],
                        "gfx942" if a[2] == "GPU" else ""])


def json_agent(a: tuple) -> dict:
    gpu = a[2] == "GPU"
    d = {"size": 568, "id": {"handle": a[1] + 1}, "type": 2 if gpu else 1, **agent_scalars(a),
         "sdma_fw_version": {"uCodeSDMA": 0, "uCodeRes": 0}, "fw_version": {"uCode": 0, "Major": 0, "Minor": 0,
                                                                           "Stepping": 0},
         "capability": dict.fromkeys(CAPABILITY_BITS, 0), "cu_per_engine": 38 if gpu else 0,
         "max_waves_per_cu": 32 if gpu else 0, "family_id": 0, "workgroup_max_size": 1024 if gpu else 0,
         "grid_max_size": 4294967295 if gpu else 0, "local_mem_size": 0, "hive_id": 0, "gpu_id": 40000 + a[0] if gpu
         else 0, "workgroup_max_dim": {"x": 1024, "y": 1024, "z": 1024} if gpu else {"x": 0, "y": 0, "z": 0},
         "grid_max_dim": {"x": 4294967295, "y": 4294967295, "z": 4294967295} if gpu else {"x": 0, "y": 0, "z": 0},
         "name": a[4], "vendor_name": "AMD" if gpu else "CPU", "product_name": a[5],
         "model_name": "gfx942" if gpu else "", "node_id": a[0], "logical_node_id": a[1],
         "logical_node_type_id": a[3], "runtime_visibility": {"hsa": 1, "hip": 1, "rccl": 1, "rocdecode": 1},
         "uuid": {"bytes": 0}, "mem_banks": [], "caches": [], "io_links": []}
    return d


def json_doc() -> dict:
    symbols = []
    for kid in range(max(KERNELS) + 1):
        name = KERNELS.get(kid, "")
        symbols.append({"size": 88 if name else 0, "kernel_id": kid if name else 0, "code_object_id": 1 if name else 0,
                        "kernel_name": name, "kernel_object": 0x7F00_0000_0000 + 0x100 * kid if name else 0,
                        "kernarg_segment_size": 32, "kernarg_segment_alignment": 8, "group_segment_size": 0,
                        "private_segment_size": 0, "sgpr_count": 48, "arch_vgpr_count": 32, "accum_vgpr_count": 0,
                        "kernel_code_entry_byte_offset": 0, "kernel_address": {"handle": 0},
                        "formatted_kernel_name": name, "demangled_kernel_name": name, "truncated_kernel_name": name})
    dispatches = []
    for i, (g, s, k, c, t0, t1, grid, wg) in enumerate(DISPATCHES):
        dispatches.append({"size": 104, "kind": 11, "operation": 2, "thread_id": PID,
                           "correlation_id": {"internal": c, "external": 0, "ancestor": 0},
                           "start_timestamp": t0, "end_timestamp": t1,
                           "dispatch_info": {"size": 88, "agent_id": {"handle": gpu_node(g)[1] + 1},
                                             "queue_id": {"handle": s}, "kernel_id": k, "dispatch_id": i + 1,
                                             "private_segment_size": 0, "group_segment_size": 0,
                                             "workgroup_size": dict(zip("xyz", wg)), "grid_size": dict(zip("xyz", grid))},
                           "stream_id": {"handle": s}})
    kinds = ["NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API", "HSA_FINALIZE_EXT_API",
             "HIP_RUNTIME_API", "HIP_COMPILER_API", "MARKER_CORE_API", "MARKER_CONTROL_API", "MARKER_NAME_API",
             "MEMORY_COPY", "KERNEL_DISPATCH"]
    proc = {"metadata": {"node": {"hostname": "synth"}, "pid": PID, "init_time": T0 - 2_000_000_000,
                         "fini_time": T0 + 1_000_000_000, "command": ["./app"], "config": {}},
            "agents": [json_agent(a) for a in AGENTS], "counters": [],
            "strings": {"callback_records": [], "buffer_records": [{"kind": k, "operations": []} for k in kinds],
                        "marker_api": [], "correlation_id": {"external": []}, "counters": {"dimension_ids": []},
                        "pc_sample_instructions": [], "pc_sample_comments": [], "att_filenames": [],
                        "code_object_snapshot_filenames": []},
            "code_objects": [], "kernel_symbols": symbols, "host_functions": [], "summary": [],
            "callback_records": {"counter_collection": []},
            "buffer_records": {"kernel_dispatch": dispatches, "hip_api": [], "hsa_api": [], "marker_api": [],
                               "rccl_api": [], "memory_copy": [], "memory_allocation": [], "scratch_memory": [],
                               "rocdecode_api": [], "rocjpeg_api": [], "pc_sample_host_trap": [],
                               "pc_sample_stochastic": []}}
    return {"rocprofiler-sdk-tool": [proc]}


TABLES = {  # rocpd_tables.sql's columns for the tables a kernel trace fills (types as there)
    "metadata": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "tag" TEXT NOT NULL, "value" TEXT NOT NULL',
    "string": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "string" TEXT NOT NULL UNIQUE',
    "info_node": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "hash" BIGINT NOT NULL UNIQUE, '
                 '"machine_id" TEXT NOT NULL UNIQUE, "system_name" TEXT, "hostname" TEXT, "release" TEXT, '
                 '"version" TEXT, "hardware_name" TEXT, "domain_name" TEXT',
    "info_process": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                    '"ppid" INTEGER, "pid" INTEGER NOT NULL, "init" BIGINT, "fini" BIGINT, "start" BIGINT, '
                    '"end" BIGINT, "command" TEXT, "environment" JSONB DEFAULT \'{}\' NOT NULL, '
                    '"extdata" JSONB DEFAULT \'{}\' NOT NULL',
    "info_thread": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                   '"ppid" INTEGER, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL, "name" TEXT, "start" BIGINT, '
                   '"end" BIGINT, "extdata" JSONB DEFAULT \'{}\' NOT NULL',
    "info_agent": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                  '"pid" INTEGER NOT NULL, "type" TEXT CHECK ("type" IN (\'CPU\', \'GPU\')), "absolute_index" INTEGER, '
                  '"logical_index" INTEGER, "type_index" INTEGER, "uuid" INTEGER, "name" TEXT, "model_name" TEXT, '
                  '"vendor_name" TEXT, "product_name" TEXT, "user_name" TEXT, "extdata" JSONB DEFAULT \'{}\' NOT NULL',
    "info_queue": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                  '"pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB DEFAULT \'{}\' NOT NULL',
    "info_stream": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                   '"pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB DEFAULT \'{}\' NOT NULL',
    "info_code_object": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                        '"pid" INTEGER NOT NULL, "agent_id" INTEGER, "uri" TEXT, "load_base" BIGINT, '
                        '"load_size" BIGINT, "load_delta" BIGINT, "storage_type" TEXT, '
                        '"extdata" JSONB DEFAULT \'{}\' NOT NULL',
    "info_kernel_symbol": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                          '"pid" INTEGER NOT NULL, "code_object_id" INTEGER NOT NULL, "kernel_name" TEXT, '
                          '"display_name" TEXT, "kernel_object" INTEGER, "kernarg_segment_size" INTEGER, '
                          '"kernarg_segment_alignment" INTEGER, "group_segment_size" INTEGER, '
                          '"private_segment_size" INTEGER, "sgpr_count" INTEGER, "arch_vgpr_count" INTEGER, '
                          '"accum_vgpr_count" INTEGER, "extdata" JSONB DEFAULT \'{}\' NOT NULL',
    "event": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "category_id" INTEGER, '
             '"stack_id" INTEGER, "parent_stack_id" INTEGER, "correlation_id" INTEGER, '
             '"call_stack" JSONB DEFAULT \'{}\' NOT NULL, "line_info" JSONB DEFAULT \'{}\' NOT NULL, '
             '"extdata" JSONB DEFAULT \'{}\' NOT NULL',
    "kernel_dispatch": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                       '"pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER NOT NULL, '
                       '"kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL, "queue_id" INTEGER NOT NULL, '
                       '"stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, '
                       '"private_segment_size" INTEGER, "group_segment_size" INTEGER, '
                       '"workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL, '
                       '"workgroup_size_z" INTEGER NOT NULL, "grid_size_x" INTEGER NOT NULL, '
                       '"grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL, "region_name_id" INTEGER, '
                       '"event_id" INTEGER, "extdata" JSONB DEFAULT \'{}\' NOT NULL',
}


def write_rocpd(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 512")  # a small file: the tables hold a few rows
    for name, cols in TABLES.items():
        conn.execute(f'CREATE TABLE "rocpd_{name}{SUFFIX}" ({cols})')
        conn.execute(f'CREATE VIEW "rocpd_{name}" AS SELECT * FROM "rocpd_{name}{SUFFIX}"')
    t = {name: f'"rocpd_{name}{SUFFIX}"' for name in TABLES}
    conn.executemany(f"INSERT INTO {t['metadata']} (tag, value) VALUES (?, ?)",
                     [("schema_version", "3"), ("uuid", SUFFIX), ("guid", GUID)])
    conn.executemany(f"INSERT INTO {t['string']} (id, guid, string) VALUES (?, ?, ?)",
                     [(1, GUID, "KERNEL_DISPATCH"), (2, GUID, "")])
    conn.execute(f"INSERT INTO {t['info_node']} (id, guid, hash, machine_id, hostname) VALUES "
                 f"(1, ?, 123456789, 'f00dfeedf00dfeedf00dfeedf00dfeed', 'synth')", (GUID,))
    conn.execute(f"INSERT INTO {t['info_process']} (id, guid, nid, ppid, pid, init, fini, start, \"end\", command) "
                 f"VALUES (?, ?, 1, 1, ?, ?, ?, ?, ?, './app')",
                 (PID, GUID, PID, T0 - 2_000_000_000, T0 + 1_000_000_000, T0 - 2_000_000_000, T0 + 1_000_000_000))
    conn.execute(f"INSERT INTO {t['info_thread']} (id, guid, nid, ppid, pid, tid, name) VALUES (?, ?, 1, 1, ?, ?, "
                 f"'app')", (PID, GUID, PID, PID))
    conn.executemany(f"INSERT INTO {t['info_agent']} (id, guid, nid, pid, type, absolute_index, logical_index, "
                     f"type_index, uuid, name, model_name, vendor_name, product_name, user_name) "
                     f"VALUES (?, ?, 1, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
                     [(a[0], GUID, PID, a[2], a[0], a[1], a[3], a[4], "gfx942" if a[2] == "GPU" else "",
                       "AMD" if a[2] == "GPU" else "CPU", a[5], a[5]) for a in AGENTS])
    conn.executemany(f"INSERT INTO {t['info_queue']} (id, guid, nid, pid, name) VALUES (?, ?, 1, ?, ?)",
                     [(s, GUID, PID, f"Queue {s - 1}") for s in (1, 2)])
    conn.executemany(f"INSERT INTO {t['info_stream']} (id, guid, nid, pid, name) VALUES (?, ?, 1, ?, ?)",
                     [(s, GUID, PID, f"Stream {s - 1}") for s in (1, 2)])
    conn.execute(f"INSERT INTO {t['info_code_object']} (id, guid, nid, pid, agent_id, uri, storage_type) "
                 f"VALUES (1, ?, 1, ?, 2, 'file:///app#offset=0&size=0', 'FILE')", (GUID, PID))
    conn.executemany(f"INSERT INTO {t['info_kernel_symbol']} (id, guid, nid, pid, code_object_id, kernel_name, "
                     f"display_name, kernel_object, sgpr_count, arch_vgpr_count, accum_vgpr_count) "
                     f"VALUES (?, ?, 1, ?, 1, ?, ?, ?, 48, 32, 0)",
                     [(k, GUID, PID, n, n, 0x7F00_0000_0000 + 0x100 * k) for k, n in KERNELS.items()])
    for i, (g, s, k, c, t0, t1, grid, wg) in enumerate(DISPATCHES):
        conn.execute(f"INSERT INTO {t['event']} (id, guid, category_id, stack_id, parent_stack_id, correlation_id) "
                     f"VALUES (?, ?, 1, ?, ?, 0)", (i + 1, GUID, c, c))
        conn.execute(f"INSERT INTO {t['kernel_dispatch']} (id, guid, nid, pid, tid, agent_id, kernel_id, dispatch_id, "
                     f"queue_id, stream_id, start, \"end\", private_segment_size, group_segment_size, "
                     f"workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, "
                     f"region_name_id, event_id) VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?, ?, ?, "
                     f"2, ?)", (i + 1, GUID, PID, PID, gpu_node(g)[0], k, i + 1, s, s, t0, t1, *wg, *grid, i + 1))
    conn.commit()
    conn.close()


def write_all(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    write_csv(folder)
    with open(os.path.join(folder, f"{PID}_results.json"), "w") as f:
        json.dump(json_doc(), f, indent=1)
        f.write("\n")
    write_rocpd(os.path.join(folder, f"{PID}_results.db"))


def _dump(path: str) -> list:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return [(n, conn.execute(f'SELECT * FROM "{n}" ORDER BY 1').fetchall()) for n in names]
    finally:
        conn.close()


def main() -> int:
    if "--check" not in sys.argv[1:]:
        write_all(HERE)
        return 0
    with tempfile.TemporaryDirectory() as d:
        write_all(d)
        bad = [n for n in sorted(os.listdir(d)) if not (
            _dump(os.path.join(d, n)) == _dump(os.path.join(HERE, n)) if n.endswith(".db")
            else filecmp.cmp(os.path.join(d, n), os.path.join(HERE, n), shallow=False))]
    print("differ: " + ", ".join(bad) if bad else "all synthesized files are as this script writes them")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
