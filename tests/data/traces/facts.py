#!/usr/bin/env python3
"""Recompute the pinned facts of the real traces with plain json/gzip/csv.

Nothing here imports fingrav_native: the numbers are an independent reading
of the files, for tests of the in-situ trace readers to compare against.
The traces are not in the repository: they are read from ``traces/`` of the
real-data folder (``$FINGRAV_REAL_DATA``, by default ``../shared/data/public``
beside the repository; tests/real_data.py says where each comes from).

    python3 facts.py            # print the facts of every file as JSON
    python3 facts.py --check    # recompute and compare with EXPECTED below

Definitions (Kineto / Chrome-trace JSON files):
  kernel_cat       the spelling(s) of the kernel category: 'kernel' (new
                   schema) or 'Kernel' (PyTorch 1.8/1.9-era schema)
  kernels          events with ph 'X' and cat.lower() == 'kernel'
  dur0             kernels with dur == 0
  nccl             kernels whose name contains 'nccl' (case-insensitive)
  profiler_steps   events named exactly ProfilerStep#<digits>, counted per cat
  profiler_step_names  the distinct such names, in step order
  devices          sorted set of kernel args['device'] (pid when absent)
  streams          sorted [device, stream] pairs, stream = args['stream']
                   (tid when absent)
  tid_types        python type names of the kernels' tid field
  max_name_len     longest kernel name, in characters
  base_time_ns     whether the top-level key baseTimeNanoseconds is present
  first_ts/last_ts min / max kernel ts (as written in the file, microseconds)
  last_end         max kernel ts + dur
  kernels_in_ts_order  whether the kernels appear in the file sorted by ts
  overlap          compute kernels (non-NCCL) whose [ts, ts+dur) overlaps an
                   NCCL kernel on the same device with positive length
                   (s < e2 and s2 < e), as [overlapping, compute_total]

rocprofv3 kernel_trace CSV files: one kernel per row (Kind KERNEL_DISPATCH);
dur = End_Timestamp - Start_Timestamp (nanoseconds); devices = Agent_Id values
(as strings, they are ints in older and "Agent N" in newer rocprofv3);
streams = [Agent_Id, Queue_Id] pairs.
"""

import csv
import gzip
import json
import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # tests/: real_data, standard library only
import real_data  # noqa: E402

KINETO_FILES = [
    "hta/sampled_rank-0.json.gz",
    "hta/nccl_data.ProfilerStep5.json.gz",
    "hta/inference_rank_1.json.gz",
    "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "kineto/gpu_metrics_input.json",
    "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz",
]
ROCPROF_KERNEL_CSV = [
    "rocprofv3/kernel_trace.csv",
    "rocprofv3/kernel_trace.agent-string.csv",
]
ROCPROF_MEMCPY_CSV = ["rocprofv3/memory_copy_trace.csv"]

STEP_RE = re.compile(r"^ProfilerStep#\d+$")


def _key(x):
    """Sort numbers numerically and everything else as text (also inside tuples)."""
    items = x if isinstance(x, tuple) else (x,)
    return tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in items)


def load_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def kineto_facts(path):
    doc = load_json(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    events = [e for e in events if isinstance(e, dict)]
    kernels = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]
    step_events = [e for e in events if STEP_RE.match(str(e.get("name", "")))]
    steps = Counter(e.get("cat") for e in step_events)

    def dev(e):
        return (e.get("args") or {}).get("device", e.get("pid"))

    def stream(e):
        return (e.get("args") or {}).get("stream", e.get("tid"))

    def is_nccl(e):
        return "nccl" in e.get("name", "").lower()

    nccl_by_dev = {}
    for e in kernels:
        if is_nccl(e):
            nccl_by_dev.setdefault(dev(e), []).append((e["ts"], e["ts"] + e["dur"]))
    compute = [e for e in kernels if not is_nccl(e)]
    overlapping = 0
    for e in compute:
        s, t = e["ts"], e["ts"] + e["dur"]
        if any(s < t2 and s2 < t for s2, t2 in nccl_by_dev.get(dev(e), ())):
            overlapping += 1
    return {
        "events": len(events),
        "kernel_cat": sorted({e["cat"] for e in kernels}),
        "kernels": len(kernels),
        "dur0": sum(1 for e in kernels if e.get("dur") == 0),
        "nccl": sum(1 for e in kernels if is_nccl(e)),
        "profiler_steps": dict(sorted(steps.items())),
        "profiler_step_names": sorted({e["name"] for e in step_events}, key=lambda n: int(n.split("#")[1])),
        "devices": sorted({dev(e) for e in kernels}, key=_key),
        "streams": sorted({(dev(e), stream(e)) for e in kernels}, key=_key),
        "tid_types": sorted({type(e.get("tid")).__name__ for e in kernels}),
        "max_name_len": max((len(e["name"]) for e in kernels), default=0),
        "base_time_ns": isinstance(doc, dict) and "baseTimeNanoseconds" in doc,
        "first_ts": min((e["ts"] for e in kernels), default=None),
        "last_ts": max((e["ts"] for e in kernels), default=None),
        "last_end": max((e["ts"] + e["dur"] for e in kernels), default=None),
        "kernels_in_ts_order": [e["ts"] for e in kernels] == sorted(e["ts"] for e in kernels),
        "overlap": [overlapping, len(compute)],
    }


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def rocprof_kernel_facts(path):
    rows = read_csv(path)
    start = [int(r["Start_Timestamp"]) for r in rows]
    end = [int(r["End_Timestamp"]) for r in rows]
    return {
        "kernels": len(rows),
        "kinds": sorted({r["Kind"] for r in rows}),
        "dur0": sum(1 for s, e in zip(start, end) if e == s),
        "nccl": sum(1 for r in rows if "nccl" in r["Kernel_Name"].lower()),
        "devices": sorted({r["Agent_Id"] for r in rows}),
        "streams": sorted({(r["Agent_Id"], r["Queue_Id"]) for r in rows}),
        "max_name_len": max(len(r["Kernel_Name"]) for r in rows),
        "first_ts": min(start),
        "last_ts": max(start),
        "last_end": max(end),
        "rows_in_start_order": start == sorted(start),
        "columns": len(rows[0]),
    }


def rocprof_memcpy_facts(path):
    rows = read_csv(path)
    return {
        "copies": len(rows),
        "directions": sorted({r["Direction"] for r in rows}),
        "agents": sorted({(r["Source_Agent_Id"], r["Destination_Agent_Id"]) for r in rows}),
        "first_ts": min(int(r["Start_Timestamp"]) for r in rows),
        "last_end": max(int(r["End_Timestamp"]) for r in rows),
    }


def _trace(rel):
    return real_data.path(f"traces/{rel}")


def all_facts():
    out = {}
    for rel in KINETO_FILES:
        out[rel] = kineto_facts(_trace(rel))
    for rel in ROCPROF_KERNEL_CSV:
        out[rel] = rocprof_kernel_facts(_trace(rel))
    for rel in ROCPROF_MEMCPY_CSV:
        out[rel] = rocprof_memcpy_facts(_trace(rel))
    # JSON round trip so tuples compare equal to the lists in EXPECTED
    return json.loads(json.dumps(out))


# regenerate with: python3 facts.py --emit (then review the diff)
EXPECTED = {
    "hta/sampled_rank-0.json.gz": {
        "events": 4855,
        "kernel_cat": ["kernel"],
        "kernels": 1154,
        "dur0": 0,
        "nccl": 10,
        "profiler_steps": {"user_annotation": 2},
        "profiler_step_names": ["ProfilerStep#551", "ProfilerStep#552"],
        "devices": [0],
        "streams": [[0, 7], [0, 23], [0, 84], [0, 203]],
        "tid_types": ["int"],
        "max_name_len": 1956,
        "base_time_ns": False,
        "first_ts": 1682725898082228,
        "last_ts": 1682725899305022,
        "last_end": 1682725899305046.0,
        "kernels_in_ts_order": False,
        "overlap": [253, 1144],
    },
    "hta/nccl_data.ProfilerStep5.json.gz": {
        "events": 13548,
        "kernel_cat": ["kernel"],
        "kernels": 900,
        "dur0": 0,
        "nccl": 7,
        "profiler_steps": {"user_annotation": 1},
        "profiler_step_names": ["ProfilerStep#5"],
        "devices": [0],
        "streams": [[0, 7], [0, 40]],
        "tid_types": ["int"],
        "max_name_len": 1677,
        "base_time_ns": True,
        "first_ts": 4458676644934.992,
        "last_ts": 4458676858313.152,
        "last_end": 4458676858467.742,
        "kernels_in_ts_order": True,
        "overlap": [57, 893],
    },
    "hta/inference_rank_1.json.gz": {
        "events": 54,
        "kernel_cat": ["Kernel"],
        "kernels": 4,
        "dur0": 0,
        "nccl": 0,
        "profiler_steps": {},
        "profiler_step_names": [],
        "devices": [0],
        "streams": [[0, 7]],
        "tid_types": ["int"],
        "max_name_len": 912,
        "base_time_ns": False,
        "first_ts": 1665536373729077,
        "last_ts": 1665536373730701,
        "last_end": 1665536373730706,
        "kernels_in_ts_order": True,
        "overlap": [0, 4],
    },
    "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz": {
        "events": 220,
        "kernel_cat": ["kernel"],
        "kernels": 14,
        "dur0": 0,
        "nccl": 0,
        "profiler_steps": {"gpu_user_annotation": 1, "user_annotation": 2},
        "profiler_step_names": ["ProfilerStep#1", "ProfilerStep#2"],
        "devices": [2],
        "streams": [[2, 0]],
        "tid_types": ["int"],
        "max_name_len": 938,
        "base_time_ns": True,
        "first_ts": 4203669603771.648,
        "last_ts": 4203669612357.612,
        "last_end": 4203669612366.093,
        "kernels_in_ts_order": True,
        "overlap": [0, 14],
    },
    "kineto/gpu_metrics_input.json": {
        "events": 340,
        "kernel_cat": ["Kernel"],
        "kernels": 30,
        "dur0": 0,
        "nccl": 0,
        "profiler_steps": {"Operator": 1},
        "profiler_step_names": ["ProfilerStep#2"],
        "devices": [0],
        "streams": [[0, 7]],
        "tid_types": ["str"],
        "max_name_len": 779,
        "base_time_ns": False,
        "first_ts": 1621401187225275,
        "last_ts": 1621401187236501,
        "last_end": 1621401187236502,
        "kernels_in_ts_order": True,
        "overlap": [0, 30],
    },
    "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz": {
        "events": 11527,
        "kernel_cat": ["Kernel"],
        "kernels": 1455,
        "dur0": 104,
        "nccl": 0,
        "profiler_steps": {"Operator": 1},
        "profiler_step_names": ["ProfilerStep#6"],
        "devices": [0],
        "streams": [[0, 7]],
        "tid_types": ["str"],
        "max_name_len": 657,
        "base_time_ns": False,
        "first_ts": 1623142623636426,
        "last_ts": 1623142623810151,
        "last_end": 1623142623810508,
        "kernels_in_ts_order": True,
        "overlap": [0, 1455],
    },
    "rocprofv3/kernel_trace.csv": {
        "kernels": 7,
        "kinds": ["KERNEL_DISPATCH"],
        "dur0": 0,
        "nccl": 0,
        "devices": ["1"],
        "streams": [["1", "1"], ["1", "2"], ["1", "3"], ["1", "4"]],
        "max_name_len": 73,
        "first_ts": 8819330200067564,
        "last_ts": 8819330200229796,
        "last_end": 8819330200369359,
        "rows_in_start_order": True,
        "columns": 18,
    },
    "rocprofv3/kernel_trace.agent-string.csv": {
        "kernels": 9,
        "kinds": ["KERNEL_DISPATCH"],
        "dur0": 0,
        "nccl": 0,
        "devices": ["Agent 4"],
        "streams": [["Agent 4", "1"], ["Agent 4", "2"], ["Agent 4", "3"], ["Agent 4", "4"]],
        "max_name_len": 73,
        "first_ts": 1550151853029637,
        "last_ts": 1550151853164197,
        "last_end": 1550151853174037,
        "rows_in_start_order": False,
        "columns": 22,
    },
    "rocprofv3/memory_copy_trace.csv": {
        "copies": 2,
        "directions": ["MEMORY_COPY_DEVICE_TO_HOST", "MEMORY_COPY_HOST_TO_DEVICE"],
        "agents": [["0", "1"], ["1", "0"]],
        "first_ts": 14955949675563,
        "last_end": 14955953315285,
    },
}


def emit(facts):
    """Python source for EXPECTED: one file per block, one fact per line."""

    def py(v):
        return json.dumps(v).replace("true", "True").replace("false", "False").replace("null", "None")

    lines = ["EXPECTED = {"]
    for name, f in facts.items():
        lines.append(f"    {json.dumps(name)}: {{")
        lines += [f"        {json.dumps(k)}: {py(v)}," for k, v in f.items()]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines)


def main(argv):
    try:
        facts = all_facts()
    except real_data.MissingRealData as e:
        print(f"facts.py: {e}", file=sys.stderr)
        return 2
    if "--check" in argv:
        bad = [k for k in EXPECTED if facts.get(k) != EXPECTED[k]]
        for k in bad:
            print(f"MISMATCH {k}:\n  got      {facts.get(k)}\n  expected {EXPECTED[k]}")
        print("ok" if not bad else f"{len(bad)} file(s) differ")
        return 1 if bad else 0
    if "--emit" in argv:
        print(emit(facts))
        return 0
    print(json.dumps(facts, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
