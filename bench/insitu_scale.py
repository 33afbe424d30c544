#!/usr/bin/env python3
"""Reading and profiling torch.profiler traces at 10^4 to 10^7 kernels: time and peak memory against json + numpy.

Each size is a simulated training loop (``fingrav_native.sim``'s closed-form
loop: five kernels, 400 to 25 us, launched seven to an iteration with host
gaps and pauses; eight such groups, each its own grid, make one
``ProfilerStep``, so 40 signatures) written as torch.profiler writes it:
every kernel with the two nested CPU ops that issued it (the vendored
real traces have 2 to 6 CPU ops per kernel), its ``cudaLaunchKernel``
runtime call and the two flow events that tie them, Kineto's per-kernel
arguments, ``ts``/``dur`` in microseconds with three decimals, two-space
indentation, ``baseTimeNanoseconds`` last. The generator streams to disk, so
10^7 kernels (about 19 GB) fit. The power capture is an instantaneous
1 ms logger of the loop's closed-form power on the trace's clock.

Every measurement runs in a fresh subprocess (peak memory is its VmHWM,
the high-water mark of its own address space; ``ru_maxrss`` would carry the
parent's over fork and exec):

* **baseline**: ``json.load`` of the document, then numpy arrays of the
  kernel columns (ts, dur, name, grid, block, device, stream, correlation);
  the plain reading, with float64 times;
* **read**: ``fingrav_native.files.read_trace`` (the streaming scanner);
* **profile**: ``fingrav_native.profile_trace`` with default options on the
  trace read, after the read (its time alone, against that process's own
  read; peak memory of the process).

Targets, at 10^6 kernels: read <= 1.2x the baseline's
time, profile_trace <= the read's time, peak memory <= 2x the file; at 10^7,
a read in bounded memory (the baseline does not fit in this machine's
memory there and is skipped, with the reason).

Run:  python bench/insitu_scale.py            (10^4 .. 10^7; about an hour on 2 cores, ~25 GB of /tmp)
      python bench/insitu_scale.py --sizes 1e6 --layers 60   (a mix of 300 signatures: per-signature costs show)
      python bench/insitu_scale.py --quick    (10^4 and 10^5; under a minute; writes nothing unless --json)
      python bench/insitu_scale.py --real-mix 1e6   (a real kernel mix: the V100 resnet50 trace's iteration
                                                   repeated, 208 signatures; beside one busy process per core)

``--real-mix N`` writes a trace of N kernels by repeating the one ProfilerStep of the real V100 resnet50 trace
(``$FINGRAV_REAL_DATA/traces/kineto/resnet50_...ProfilerStep6``: 1,455 kernels of 208 signatures, every event
kept, its times, ids and step number shifted per copy), with the instantaneous 1 ms logs of
``tests/sim_captures.py``'s ``synthetic_logs`` (made after the read, untimed). While one busy process per core
runs (``bench/busy_host_bench.py``'s loop), it times the read and ``profile_trace`` with default options in
one fresh process per call, alternating the default environment (no ``OPENBLAS_NUM_THREADS`` or its kin: the
package's thread policy decides) with one BLAS thread forced (``OPENBLAS_NUM_THREADS=1``). Target:
profile_trace <= the read, in the default environment. Writes bench/results/insitu_scale_real_mix.json and the
"## In-situ scale: a real kernel mix" section of bench/results/README.md (with --json: only that file).
Full runs write bench/results/insitu_scale.json and the "## In-situ scale" section of bench/results/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
EPOCH_NS = 1_763_900_000_000_000_000
LAYERS = 8  # groups of the simulator's seven kernels per ProfilerStep (each its own grid: 5 signatures a layer)
SIZES = {True: (10_000, 100_000), False: (10_000, 100_000, 1_000_000, 10_000_000)}
# What json.load needs per byte of a Kineto document (measured here at 10^6 kernels: ~5.4x); past this
# machine's memory the baseline is not run.
BASELINE_BYTES_PER_BYTE = 6.0

# Kernel names as Kineto writes them (demangled templates), one per simulator signature.
KERNEL_NAMES = (
    "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, "
    "false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
    "void gemv2T_kernel_val<int, int, __half, __half, float, float, 128, 16, 4, 4, false, false, "
    "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__half const>, cublasGemvTensorStridedBatched<__half>, "
    "float> >(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__half const>, "
    "cublasGemvTensorStridedBatched<__half>, float>, float, float)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
    "float const*, float const*, float*, float*, float*)",
)
# The CPU ops that issue each kernel: an outer op and the one that launches (Kineto nests them).
OPS = (("aten::linear", "aten::mm"), ("aten::add", "aten::add_"),
       ("aten::scaled_dot_product_attention", "aten::_flash_attention_forward"), ("aten::linear", "aten::mv"),
       ("aten::layer_norm", "aten::native_layer_norm"))

KERNEL = """  {
    "ph": "X", "cat": "cpu_op", "name": "%(outer)s", "pid": 4242, "tid": 4242,
    "ts": %(outer_ts)s, "dur": %(outer_dur)s,
    "args": {
      "External id": %(outer_ext)d, "Record function id": 0, "Ev Idx": %(outer_ext)d,
      "Input Dims": [[8, 4096], [4096, 4096], [4096]], "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"],
      "Input Strides": [[4096, 1], [4096, 1], [1]], "Concrete Inputs": ["", "", ""]
    }
  },
  {
    "ph": "X", "cat": "cpu_op", "name": "%(op)s", "pid": 4242, "tid": 4242,
    "ts": %(op_ts)s, "dur": %(op_dur)s,
    "args": {
      "External id": %(ext)d, "Record function id": 0, "Ev Idx": %(ext)d,
      "Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"],
      "Input Strides": [[4096, 1], [4096, 1]], "Concrete Inputs": ["", ""]
    }
  },
  {
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,
    "ts": %(launch)s, "dur": 4.096,
    "args": {
      "cbid": 211, "correlation": %(corr)d,
      "external id": %(ext)d
    }
  },
  {
    "ph": "s", "id": %(corr)d, "pid": 4242, "tid": 4242, "ts": %(launch)s,
    "cat": "ac2g", "name": "ac2g"
  },
  {
    "ph": "X", "cat": "kernel", "name": "%(name)s", "pid": 0, "tid": 7,
    "ts": %(ts)s, "dur": %(dur)s,
    "args": {
      "queued": 0, "device": 0, "context": 1,
      "stream": 7, "correlation": %(corr)d,
      "registers per thread": 168,
      "shared memory": 81920,
      "blocks per SM": %(bps)s,
      "warps per SM": %(wps)s,
      "grid": [%(grid)d, 1, 1],
      "block": [256, 1, 1],
      "est. achieved occupancy %%": 12
    }
  },
  {
    "ph": "f", "id": %(corr)d, "pid": 0, "tid": 7, "ts": %(ts)s,
    "cat": "ac2g", "name": "ac2g", "bp": "e"
  },
"""

STEP = """  {
    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%(step)d", "pid": 4242, "tid": 4242,
    "ts": %(ts)s, "dur": %(dur)s,
    "args": {
      "External id": %(ext)d, "Record function id": 0, "Ev Idx": %(ext)d
    }
  },
"""


def _us(ns: np.ndarray) -> list[str]:
    """Integer ns as microseconds with three decimals, as Kineto writes them (exact, no float)."""
    q, r = np.divmod(ns.astype(np.int64), 1000)
    return [f"{a}.{b:03d}" for a, b in zip(q.tolist(), r.tolist())]


def _schedule(kernels: int, seed: int) -> Any:
    """The simulator's closed-form loop for ``kernels`` executions (at least one ProfilerStep)."""
    # The simulator's closed-form loop, its schedule drawn alone (the truth logged_loop logs).
    from fingrav_native.sim import SEQUENCE, LoopSchedule, draw_schedule

    iterations = -(-kernels // len(SEQUENCE))
    rng = np.random.default_rng(seed)
    starts, ends, sig, it, level, pause_after, end = draw_schedule(
        rng, iterations, duration_jitter=0.005, pause_ns=300_000.0, pause_jitter=0.1, warmup=0.04,
        warmup_iterations=max(1, iterations // 20), lead_ns=2e6, gap_range_ns=(2_000.0, 8_000.0))
    return LoopSchedule(starts, ends, sig, it, level, pause_after, record_end_ns=float(end), idle_w=120.0,
                        gap_w=180.0, gap_tau_ns=2_000.0, pause_tau_ns=50_000.0, drift_w_per_s=0.0, max_power_w=750.0)


def write_trace(path: str, kernels: int, seed: int = 0, layers: int = LAYERS) -> dict[str, Any]:
    """Stream a Kineto trace of ``kernels`` kernels to ``path`` and its 1 ms power logs beside it (.npy)."""
    sc = _schedule(kernels, seed)
    n = kernels
    start = np.round(sc.starts[:n]).astype(np.int64)
    end = np.maximum(np.round(sc.ends[:n]).astype(np.int64), start)
    layer = sc.iteration[:n] % layers
    step = sc.iteration[:n] // layers
    rng = np.random.default_rng([seed, 1])
    launch = start - rng.integers(8_000, 40_000, n)
    op_ts = launch - rng.integers(3_000, 9_000, n)
    op_dur = (launch - op_ts) + 6_000
    outer_ts = op_ts - rng.integers(2_000, 5_000, n)
    outer_dur = (op_ts - outer_ts) + op_dur + 1_500
    names = [json.dumps(k)[1:-1] for k in KERNEL_NAMES]
    t0 = time.perf_counter()
    with open(path, "w", encoding="utf-8") as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "NVIDIA H100 80GB '
                'HBM3", "totalGlobalMem": 85029158912,\n      "computeMajor": 9, "computeMinor": 0,\n      '
                '"maxThreadsPerBlock": 1024, "numSms": 132\n    }\n  ],\n  "cupti_version": 24,\n  '
                '"cuda_runtime_version": 12040,\n  "cuda_driver_version": 12040,\n  "profile_memory": 0,\n  '
                '"traceEvents": [\n')
        bounds = np.flatnonzero(np.diff(step, prepend=-1))
        step_end = np.append(launch[bounds[1:]], end[-1] + 400_000)
        block = 20_000
        for a in range(0, n, block):
            b = min(n, a + block)
            parts = []
            for s in np.flatnonzero((bounds >= a) & (bounds < b)).tolist():
                t = int(outer_ts[bounds[s]]) - 2_000
                parts.append(STEP % {"step": s, "ts": _us(np.array([t]))[0],
                                     "dur": _us(np.array([int(step_end[s]) - t]))[0], "ext": 10 * n + s})
            cols = dict(ts=_us(start[a:b]), dur=_us(end[a:b] - start[a:b]), launch=_us(launch[a:b]),
                        op_ts=_us(op_ts[a:b]), op_dur=_us(op_dur[a:b]), outer_ts=_us(outer_ts[a:b]),
                        outer_dur=_us(outer_dur[a:b]))
            sig, lay = sc.sig[a:b].tolist(), layer[a:b].tolist()
            for j in range(b - a):
                g = 132 * (1 + lay[j]) * (1 + sig[j])
                parts.append(KERNEL % {
                    "outer": OPS[sig[j]][0], "outer_ts": cols["outer_ts"][j], "outer_dur": cols["outer_dur"][j],
                    "outer_ext": 20 * n + a + j,
                    "op": OPS[sig[j]][1], "op_ts": cols["op_ts"][j], "op_dur": cols["op_dur"][j], "ext": a + j,
                    "launch": cols["launch"][j], "corr": a + j + 1, "name": names[sig[j]], "ts": cols["ts"][j],
                    "dur": cols["dur"][j], "grid": g, "bps": f"{g / 132:.6f}", "wps": f"{8 * g / 132:.6f}"})
            f.write("".join(parts))
        f.write('  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": '
                f'{_us(np.array([int(end[-1]) + 500_000]))[0]}\n  }}\n  ],\n  "traceName": "{os.path.basename(path)}",\n'
                f'  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {EPOCH_NS}\n}}\n')
    write_s = time.perf_counter() - t0
    # Instantaneous 1 ms logs of the loop's closed-form power, on the trace's clock.
    from fingrav_native.records import SAMPLE_DTYPE

    t = np.arange(1e6, float(end[-1]) + 1e6, 1e6) + 137.0
    logs = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    logs["source_ts"] = EPOCH_NS + np.round(t).astype(np.int64)
    logs["total"] = sc.power(t) + np.random.default_rng([seed, 2]).normal(0.0, 2.0, len(t))
    for ch in ("compute", "io", "memory"):
        logs[ch] = np.nan
    np.save(path + ".logs.npy", logs)
    return {"kernels": n, "bytes": os.path.getsize(path), "write_s": write_s, "steps": int(step[-1]) + 1,
            "logs": len(logs)}


# The real V100 training trace whose one iteration --real-mix repeats (tests/real_data.py's folder).
REAL_MIX_TRACE = "traces/kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz"
# Per event, the fields a copy shifts: times by the iteration's period, ids by a stride past every id of the file.
_TIME_FIELDS = ("ts",)
_TIME_ARGS = ("external ts",)
_ID_ARGS = ("correlation", "External id", "external id")
_MARK = re.compile(r'"@@(\d+)@@"')


def write_real_mix(path: str, kernels: int) -> dict[str, Any]:
    """Stream a Kineto trace of ``kernels`` kernels made of copies of the real resnet50 trace's iteration.

    Every event of the iteration is kept as recorded; per copy its ``ts`` (and ``external ts``) move by the
    iteration's length plus 1 ms, its correlation and external ids and flow ids by a stride past the file's
    largest, and ``ProfilerStep#6`` becomes ``ProfilerStep#(6 + copy)``. The document is serialised once with
    a marker per shifted value, and each copy joins the pieces with its values.
    """
    import gzip

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    from real_data import path as real_path

    with gzip.open(real_path(REAL_MIX_TRACE), "rb") as f:
        doc = json.loads(f.read())
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    events = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    step = next(e for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    per_copy = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "Kernel")
    period_us = int(step["dur"]) + 1000
    values: list[tuple[str, int]] = []  # (kind, recorded value): "t" time, "i" id, "s" step number

    def mark(kind: str, v: Any) -> str:
        values.append((kind, int(v)))
        return f"@@{len(values) - 1}@@"

    ids = [int(e["id"]) for e in events if "id" in e]
    ids += [int(a[k]) for e in events for a in [e.get("args", {})] for k in _ID_ARGS if isinstance(a.get(k), int)]
    stride = 10 ** len(str(max(ids) + 1))
    for e in events:
        for k in _TIME_FIELDS:
            if isinstance(e.get(k), int):
                e[k] = mark("t", e[k])
        if isinstance(e.get("id"), int):
            e["id"] = mark("i", e["id"])
        a = e.get("args", {})
        for k in _TIME_ARGS:
            if isinstance(a.get(k), int):
                a[k] = mark("t", a[k])
        for k in _ID_ARGS:
            if isinstance(a.get(k), int):
                a[k] = mark("i", a[k])
        if e is step:
            e["name"] = mark("s", str(e["name"]).split("#")[1])
    pieces = _MARK.split(json.dumps(events, separators=(",", ":"))[1:-1])
    text, idx = pieces[0::2], [int(i) for i in pieces[1::2]]
    kind = np.array([values[i][0] for i in idx])
    base = np.array([values[i][1] for i in idx], dtype=np.int64)
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    copies = -(-kernels // per_copy)
    t0 = time.perf_counter()
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(head)[:-1] + ', "traceEvents": [' + json.dumps(meta)[1:-1])
        for c in range(copies):
            v = base + np.where(kind == "t", c * period_us, np.where(kind == "i", c * stride, c))
            shown = [f'"ProfilerStep#{x}"' if k == "s" else str(x) for k, x in zip(kind.tolist(), v.tolist())]
            parts = [","]
            for a, b in zip(text, shown):
                parts += (a, b)
            parts.append(text[-1])
            f.write("".join(parts))
        f.write("]}\n")
    return {"kernels": copies * per_copy, "copies": copies, "kernels_per_copy": per_copy,
            "signatures_in_trace": None, "bytes": os.path.getsize(path), "write_s": time.perf_counter() - t0,
            "source": REAL_MIX_TRACE}


def real_mix(kernels: int, folder: str, rounds: int) -> dict[str, Any]:
    """Read and profile_trace of the repeated real trace, beside one busy process per core: the default
    environment and one BLAS thread forced, alternating."""
    sys.path.insert(0, HERE)
    from busy_host_bench import THREAD_VARS, _busy, _stop

    path = os.path.join(folder, f"real_mix_{kernels}.json")
    row: dict[str, Any] = measure(f"real-mix={kernels}", path)
    default = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    envs = {"default": default, "one_thread": dict(default, OPENBLAS_NUM_THREADS="1")}
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in envs}
    try:
        for r in range(rounds):
            for cond in (("default", "one_thread") if r % 2 == 0 else ("one_thread", "default")):
                load = _busy(True)
                try:
                    time.sleep(0.5)
                    got = measure("profile-real", path, envs[cond])
                finally:
                    _stop(load)
                got["load_after"] = os.getloadavg()[0]
                runs[cond].append(got)
                print(f"  round {r + 1} {cond:10s}: read {got['read_s']:.1f} s ({got['read_cpu_s']:.1f} CPU), "
                      f"profile_trace {got['profile_s']:.1f} s ({got['profile_cpu_s']:.1f} CPU): "
                      f"{got['profile_s'] / got['read_s']:.2f}x the read; BLAS threads {got['blas_threads']}, load "
                      f"{got['load_before']:.1f} -> {got['load_after']:.1f}", flush=True)
    finally:
        os.remove(path)
    for cond, rs in runs.items():
        row[cond] = {"profile_over_read": statistics.median(g["profile_s"] / g["read_s"] for g in rs),
                     "profile_over_read_cpu": statistics.median(g["profile_cpu_s"] / g["read_cpu_s"] for g in rs),
                     "profile_s": statistics.median(g["profile_s"] for g in rs),
                     "read_s": statistics.median(g["read_s"] for g in rs),
                     "profile_cpu_s": statistics.median(g["profile_cpu_s"] for g in rs),
                     "read_cpu_s": statistics.median(g["read_cpu_s"] for g in rs)}
    row["default_over_one_thread"] = row["default"]["profile_s"] / row["one_thread"]["profile_s"]
    row["target_met"] = row["default"]["profile_over_read"] <= 1.0
    row["runs"] = runs
    return row


# --------------------------------------------------------------------------- measurements (one per process)


def _peak_bytes() -> int:
    """This process's peak resident memory: VmHWM, the high-water mark of its own address space.

    Not ``ru_maxrss``: on Linux that survives fork and exec, so a child starts with its parent's peak
    (here the generator's, 1.7 GB at 10^7 kernels, made every child's "peak" that at least).
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # kB on Linux; bytes on macOS


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return float(r.ru_utime + r.ru_stime)


class _Timer:
    """Wall and CPU seconds of a block (CPU: this process's user + system time, what load on a shared
    machine does not inflate; every measured step runs on one thread)."""

    def __enter__(self) -> "_Timer":
        self.t0, self.c0 = time.perf_counter(), _cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.t0, _cpu_s() - self.c0


def child(kind: str, path: str) -> dict[str, Any]:
    """One measurement in this (fresh) process: its wall time and the process's peak memory."""
    if kind.startswith("generate="):
        kernels, _, layers = kind.split("=", 1)[1].partition(":")
        return write_trace(path, int(kernels), layers=int(layers or LAYERS))
    if kind.startswith("real-mix="):
        return write_real_mix(path, int(kind.split("=", 1)[1]))
    rss0 = _peak_bytes()
    out: dict[str, Any] = {"kind": kind}
    if kind == "baseline":
        with _Timer() as tm:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            ev = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
            cols = {"ts": np.array([e["ts"] for e in ev], dtype=np.float64),
                    "dur": np.array([e["dur"] for e in ev], dtype=np.float64),
                    "name": np.array([e["name"] for e in ev]),
                    "grid": np.array([e["args"]["grid"] for e in ev], dtype=np.int64),
                    "block": np.array([e["args"]["block"] for e in ev], dtype=np.int64),
                    "device": np.array([e["args"]["device"] for e in ev], dtype=np.int64),
                    "stream": np.array([e["args"]["stream"] for e in ev], dtype=np.int64),
                    "correlation": np.array([e["args"]["correlation"] for e in ev], dtype=np.int64)}
        out.update(read_s=tm.wall, read_cpu_s=tm.cpu, kernels=len(cols["ts"]))
    else:
        import fingrav_native as fg  # the baseline's process imports only json and numpy

        rss0 = _peak_bytes()
        with _Timer() as tm:
            kt = fg.files.read_trace(path)
        out.update(read_s=tm.wall, read_cpu_s=tm.cpu, kernels=len(kt), read_peak_bytes=_peak_bytes())
        if kind in ("profile", "profile-real"):
            from fingrav_native.sim import EpochIdentity

            if kind == "profile-real":
                sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
                from sim_captures import synthetic_logs

                logs = synthetic_logs(kt, period_ns=1_000_000)
                out.update(logs=len(logs), blas_threads=sorted(set(fg.threads_in_force().values())),
                           load_before=os.getloadavg()[0])
            else:
                logs = np.load(path + ".logs.npy")
            with _Timer() as tm:
                tp = fg.profile_trace(kt, logs, EpochIdentity())
            out.update(profile_s=tm.wall, profile_cpu_s=tm.cpu, signatures=len(tp.kernels),
                       iterations=len(tp.iterations))
    out["peak_bytes"] = _peak_bytes()
    out["start_peak_bytes"] = rss0
    return out


def measure(kind: str, path: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run :func:`child` in a fresh interpreter and return what it printed (one BLAS thread unless ``env``)."""
    env = env if env is not None else dict(os.environ, OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, path], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"insitu_scale: {kind} failed:\n{r.stderr[-3000:]}")
    got: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return got


def one_size(kernels: int, folder: str, repeats: int, layers: int = LAYERS) -> dict[str, Any]:
    path = os.path.join(folder, f"trace_{kernels}.json")
    # Written by a child too: this process stays small, whatever the trace's size.
    row: dict[str, Any] = measure(f"generate={kernels}:{layers}", path)
    row["signatures_in_trace"] = 5 * layers
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if BASELINE_BYTES_PER_BYTE * row["bytes"] > 0.9 * mem:
        row["baseline"] = None
        row["baseline_skipped"] = (f"json.load needs about {BASELINE_BYTES_PER_BYTE:.0f}x the document "
                                   f"({BASELINE_BYTES_PER_BYTE * row['bytes'] / 2**30:.0f} GiB), more than this "
                                   f"machine's {mem / 2**30:.0f} GiB")
    else:
        row["baseline"] = min((measure("baseline", path) for _ in range(repeats)), key=lambda m: m["read_cpu_s"])
    row["read"] = min((measure("read", path) for _ in range(repeats)), key=lambda m: m["read_cpu_s"])
    row["profile"] = measure("profile", path)
    read = row["read"]
    row["peak_over_file"] = read["peak_bytes"] / row["bytes"]
    row["profile_peak_over_file"] = row["profile"]["peak_bytes"] / row["bytes"]
    # Against the read in the same process, just before (the machine's load the same for both).
    row["profile_over_read"] = row["profile"]["profile_cpu_s"] / row["profile"]["read_cpu_s"]
    row["profile_over_read_wall"] = row["profile"]["profile_s"] / row["profile"]["read_s"]
    if row["baseline"] is not None:
        row["read_over_baseline"] = read["read_cpu_s"] / row["baseline"]["read_cpu_s"]
        row["read_over_baseline_wall"] = read["read_s"] / row["baseline"]["read_s"]
        row["baseline_peak_over_file"] = row["baseline"]["peak_bytes"] / row["bytes"]
    for p in (path, path + ".logs.npy"):
        os.remove(p)
    return row


def readme(out: dict[str, Any]) -> str:
    lines = ["## In-situ scale", "",
             "`python bench/insitu_scale.py`: torch.profiler-style traces of a simulated loop (each kernel with two "
             "nested CPU ops, its launch call and flow events, pretty-printed as Kineto writes them: "
             f"{out['rows'][-1]['bytes'] / out['rows'][-1]['kernels'] / 1e3:.1f} kB a kernel, where the vendored "
             "real traces have 1.5-4.8 kB even re-serialised compactly; 40 signatures, a ProfilerStep per 56 "
             "kernels), read with "
             "`json.load` + numpy (the baseline: float64 times, every event a dict), with `fg.files.read_trace` "
             "(the streaming C++ scanner), and profiled with `fg.profile_trace` defaults against instantaneous 1 ms "
             "logs; each a fresh process, peak memory its VmHWM (its own high-water mark: ru_maxrss would carry "
             "the parent's over fork and exec). Seconds are CPU seconds (user + system of the "
             "process, each step single-threaded): this shared "
             f"{out['meta']['cpus']}-CPU machine ran other work beside it, which stretches wall time (in brackets) "
             "but not CPU time.", "",
             "| kernels | file | baseline s (peak / file) | read s (peak / file) | read / baseline | profile_trace s "
             "| profile / read | profile's process peak / file |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in out["rows"]:
        b, rd, pr = r["baseline"], r["read"], r["profile"]
        base = (f"{b['read_cpu_s']:.2f} [{b['read_s']:.1f}] ({r['baseline_peak_over_file']:.1f}x)" if b is not None
                else "skipped")
        ratio = f"**{r['read_over_baseline']:.2f}x**" if b is not None else "-"
        lines.append(f"| 10^{round(math.log10(r['kernels']))} | {r['bytes'] / 2**20:,.0f} MiB | {base} | {rd['read_cpu_s']:.2f} "
                     f"[{rd['read_s']:.1f}] ({r['peak_over_file']:.2f}x) | {ratio} | {pr['profile_cpu_s']:.2f} "
                     f"[{pr['profile_s']:.1f}] | **{r['profile_over_read']:.2f}x** | {r['profile_peak_over_file']:.2f}x |")
    skipped = [r for r in out["rows"] if r["baseline"] is None]
    if skipped:
        lines += ["", "Baseline skipped at " + ", ".join(f"10^{round(math.log10(r['kernels']))}: {r['baseline_skipped']}"
                                                          for r in skipped) + "."]
    lines += ["", "Targets at 10^6 kernels: read <= 1.2x the baseline, profile_trace <= the "
              "read, peak memory <= 2x the file; 10^7 kernels read in bounded memory (what the reader keeps grows "
              "with the kernels, about 60 bytes each, not with the document; the process's peak adds the "
              "interpreter's ~110 MB and the KernelTrace built from the kept columns).", "",
              f"(run took {out['meta']['wall_s']:.0f} s, {out['meta']['date']})", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10^4 and 10^5 kernels only; writes nothing unless --json")
    ap.add_argument("--sizes", type=float, nargs="*", help="kernel counts (default: 1e4 1e5 1e6 1e7)")
    ap.add_argument("--repeats", type=int, default=0, help="runs of each read, best kept (default 3 below 10^6, else 1)")
    ap.add_argument("--dir", default=None, help="where the traces are written (default: a temporary folder in /tmp)")
    ap.add_argument("--layers", type=int, default=LAYERS,
                    help=f"layers of the loop, five signatures each (default {LAYERS}: 40 signatures; 60 gives a "
                    "mix of 300, as a real model's trace has hundreds); not the default: writes nothing unless --json")
    ap.add_argument("--real-mix", type=float, metavar="N", help="N kernels of the real resnet50 trace's iteration "
                    "repeated, profiled beside busy processes in the default environment and with one BLAS thread")
    ap.add_argument("--rounds", type=int, default=2, help="--real-mix: rounds of both environments (medians)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--readme-from", metavar="JSON", help="rewrite the README section from a saved run")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "TRACE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    if args.dir is not None and not os.path.isdir(args.dir):
        ap.error(f"--dir {args.dir!r}: no such folder (the traces are written into a new folder inside it)")
    if args.readme_from:
        with open(args.readme_from) as f:
            _write_readme(json.load(f))
        return
    t0 = time.perf_counter()
    if args.real_mix:
        _real_mix_main(int(args.real_mix), args)
        return
    sizes = [int(s) for s in args.sizes] if args.sizes else list(SIZES[args.quick])
    folder = tempfile.mkdtemp(prefix="insitu_scale_", dir=args.dir)
    rows = []
    try:
        for k in sizes:
            need = 2600 * k
            free = shutil.disk_usage(folder).free
            if free < 1.2 * need:
                print(f"insitu_scale: {k} kernels need about {need / 2**30:.1f} GiB in {folder}; "
                      f"{free / 2**30:.1f} GiB free: skipped", file=sys.stderr)
                continue
            r = one_size(k, folder, args.repeats or (3 if k < 1_000_000 else 1), args.layers)
            rows.append(r)
            b = r["baseline"]
            print(f"{k:>9d} kernels {r['bytes'] / 2**20:8.0f} MiB: baseline "
                  + (f"{b['read_cpu_s']:7.2f} s CPU ({r['baseline_peak_over_file']:.1f}x file)" if b else "skipped")
                  + f", read {r['read']['read_cpu_s']:7.2f} s ({r['peak_over_file']:.2f}x file"
                  + (f", {r['read_over_baseline']:.2f}x baseline)" if b else ")")
                  + f", profile_trace {r['profile']['profile_cpu_s']:7.2f} s ({r['profile_over_read']:.2f}x read, "
                  f"{r['profile_peak_over_file']:.2f}x file)", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
                    "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
                    "quick": bool(args.quick), "wall_s": time.perf_counter() - t0}, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if not args.quick and not args.sizes and args.layers == LAYERS:
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, "insitu_scale.json"), "w") as f:
            json.dump(out, f, indent=1)
        _write_readme(out)
    print(f"done in {time.perf_counter() - t0:.0f} s")


def _real_mix_main(kernels: int, args: argparse.Namespace) -> None:
    t0, load0 = time.perf_counter(), os.getloadavg()
    folder = tempfile.mkdtemp(prefix="insitu_scale_", dir=args.dir)
    try:
        row = real_mix(kernels, folder, args.rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
                    "requested": kernels, "rounds": args.rounds,
                    "python": platform.python_version(), "load_average_at_start": load0,
                    "load_average_at_end": os.getloadavg(), "wall_s": time.perf_counter() - t0}, "row": row}
    d, o = row["default"], row["one_thread"]
    print(f"{row['kernels']} kernels ({row['bytes'] / 2**30:.2f} GiB): profile_trace / read {d['profile_over_read']:.2f}x "
          f"in the default environment, {o['profile_over_read']:.2f}x with one BLAS thread forced (medians); "
          f"default / forced {row['default_over_one_thread']:.2f}x; target <= 1: "
          f"{'met' if row['target_met'] else 'MISSED'}")
    path = args.json or os.path.join(RESULTS, "insitu_scale_real_mix.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    if not args.json:
        from results_readme import write_section

        write_section("## In-situ scale: a real kernel mix", _real_mix_section(out))


def _real_mix_section(out: dict[str, Any]) -> str:
    row, m = out["row"], out["meta"]
    lines = ["## In-situ scale: a real kernel mix", "",
             f"`python bench/insitu_scale.py --real-mix {_kernels_arg(m.get('requested', row['kernels']))}` "
             f"({m['date']}, {m['cpus']} cores shared "
             f"with other work, load average {m['load_average_at_start'][0]:.1f} at the start and "
             f"{m['load_average_at_end'][0]:.1f} at the end): the real V100 resnet50 trace's iteration repeated "
             f"{row['copies']} times ({row['kernels']:,} kernels, 208 signatures, {row['bytes'] / 2**30:.2f} GiB), "
             "instantaneous 1 ms logs; read and `profile_trace` with default options in one fresh process per call "
             "while one busy process per core runs, alternating the default environment with one BLAS thread "
             f"forced, {m.get('rounds', 2)} rounds (medians). Target: profile_trace <= the read in the default "
             "environment. Wall seconds are stretched by the machine's load (others' work and the busy processes; "
             "the read also waits for the disk: the file does not stay in the page cache), CPU seconds are not.", "",
             "| environment | read s (CPU s) | profile_trace s (CPU s) | profile / read (wall; median of rounds) | "
             "profile / read (CPU) |",
             "| --- | --- | --- | --- | --- |"]
    for cond in ("default", "one_thread"):
        r = row[cond]
        lines.append(f"| {cond.replace('_', ' ')} | {r['read_s']:.1f} ({r.get('read_cpu_s', math.nan):.1f}) | "
                     f"{r['profile_s']:.1f} ({r.get('profile_cpu_s', math.nan):.1f}) | "
                     f"**{r['profile_over_read']:.2f}x** | {r['profile_over_read_cpu']:.2f}x |")
    return "\n".join(lines + ["", f"Default / forced one thread: {row['default_over_one_thread']:.2f}x.", ""])


def _kernels_arg(k: int) -> str:
    """A kernel count as the command line gives it (1e6 for a power of ten)."""
    e = round(math.log10(k)) if k > 0 else 0
    return f"1e{e}" if 10 ** e == k else str(k)


def _write_readme(out: dict[str, Any]) -> None:
    from results_readme import write_section

    write_section("## In-situ scale", readme(out))


if __name__ == "__main__":
    main()
