#!/usr/bin/env python3
"""``profile_trace`` on every real trace of the test set, quiet and beside other work, against a plain parse.

The traces are those ``tests/insitu/test_real_traces.py`` profiles (``traces/`` of ``$FINGRAV_REAL_DATA``,
``tests/real_data.py``), each with the synthetic logs the tests give it (``tests/sim_captures.py``'s
``synthetic_logs``: instantaneous 100 us logs of 80 W plus 150 W per kernel running). Per trace:

* **parse**: the plain reading of the same file, as ``bench/insitu_scale.py``'s baseline does it: gunzip
  where gzipped, ``json.loads``, numpy arrays of the kernel columns; for a rocprofv3 CSV, ``csv.DictReader``
  and numpy arrays of its kernel rows (best of three);
* **profile**: ``fingrav_native.profile_trace(path, logs, EpochIdentity())`` with default options, its own
  read of the file included (the logs made before the clock starts).

Both run in a fresh process in the default environment (no ``OPENBLAS_NUM_THREADS`` or its kin: the
package's thread policy decides), whose first, untimed calls load the package's modules. Each round runs
the process **quiet** and **loaded** (one busy process per core, the matrix-product loop of
``bench/busy_host_bench.py``), the order alternating from round to round, so the two see the machine's
other load alike. Figures are medians over the rounds; the limit is max(5 s, 3x the parse in the same
condition) (the project's target for profiling real traces).

The share of executions used: of the device's executions, those whose energy the result gives with an
interval: executions of a signature with a row past its warm-up, those attributed jointly in spans of
concurrent compute kernels (``TraceProfile.concurrency``), or every execution where the trace's kernel
span has an energy with an interval (``TraceProfile.span``). It is measured, untimed, under two loggers of
the same synthetic power: the tests' instantaneous 100 us logs, and 1 ms boxcar averages every 1 ms (what
NVML's power.draw and amd-smi's ~1 ms average are; ``synthetic_logs(kt, 1_000_000, window_ns=1_000_000)``).
Every energy given with an interval is checked against the closed-form truth (230 W x a row's duration), so a
share bought with intervals that do not hold the truth shows; the joint row ``[g]`` (the signatures without a row
of their own, attributed together) against the synthetic power integrated over each of its executions. The executions left out are counted by cause:
for instantaneous logs, how many logs fall strictly inside their executions (none: nothing measures their
power; one: a level without an interval); for the averaging sensor, the joint fit's interval.

Run:  python bench/realtrace_speed.py             (3 rounds and the shares, minutes on a busy 2-core host)
      python bench/realtrace_speed.py --quick     (one round; writes nothing unless --json)
Writes bench/results/realtrace_speed.json and the "## Real traces: speed" section of bench/results/README.md.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
TESTS = os.path.join(os.path.dirname(HERE), "tests")
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
# The traces tests/insitu/test_real_traces.py profiles (its FACTS).
TRACES = ("hta/inference_rank_1.json.gz", "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
          "hta/nccl_data.ProfilerStep5.json.gz", "hta/sampled_rank-0.json.gz", "kineto/gpu_metrics_input.json",
          "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz",
          "rocprofv3/kernel_trace.agent-string.csv", "rocprofv3/kernel_trace.csv")
TARGET_SHARE = 0.9
# The address space one share process may take (the traces run side by side).
SHARE_MEMORY_BYTES = 4 << 30
# One process per core, each a loop of matrix products on one BLAS thread (bench/busy_host_bench.py's).
BUSY_LOOP = ("import numpy as np\n"
             "a = np.random.default_rng(0).standard_normal((256, 256))\n"
             "while True:\n"
             "    a = np.tanh(a @ a)\n")


def _timed(fn: Any) -> tuple[Any, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def plain_parse(path: str) -> int:
    """The plain reading of a trace: json (gunzipped) or csv, then numpy arrays of its kernel columns."""
    import numpy as np

    if path.endswith(".csv"):
        with open(path, encoding="utf-8-sig", newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("Kind", "KERNEL_DISPATCH") == "KERNEL_DISPATCH"]
        cols = {"start": np.array([int(r["Start_Timestamp"]) for r in rows], dtype=np.int64),
                "end": np.array([int(r["End_Timestamp"]) for r in rows], dtype=np.int64),
                "name": np.array([r["Kernel_Name"] for r in rows]),
                "grid": np.array([[int(r[f"Grid_Size_{a}"]) for a in "XYZ"] for r in rows], dtype=np.int64),
                "block": np.array([[int(r[f"Workgroup_Size_{a}"]) for a in "XYZ"] for r in rows], dtype=np.int64)}
        return len(cols["start"])
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        doc = json.loads(f.read())
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]
    args = [e.get("args", {}) for e in ev]
    cols = {"ts": np.array([e["ts"] for e in ev], dtype=np.float64),
            "dur": np.array([e["dur"] for e in ev], dtype=np.float64),
            "name": np.array([e["name"] for e in ev]),
            "grid": np.array([a.get("grid", [-1, -1, -1]) for a in args], dtype=np.int64),
            "block": np.array([a.get("block", [-1, -1, -1]) for a in args], dtype=np.int64),
            "device": np.array([a.get("device", -1) for a in args], dtype=np.int64),
            "stream": np.array([str(a.get("stream", e.get("tid"))) for a, e in zip(args, ev)]),
            "correlation": np.array([a.get("correlation", -1) for a in args], dtype=np.int64)}
    return len(cols["ts"])


LOGGERS = {
    "instant": "instantaneous logs every 100 us (tests/sim_captures.py's synthetic_logs)",
    "window": "1 ms boxcar averages every 1 ms (NVML power.draw's and amd-smi's ~1 ms average; "
              "SensorModel(kind=\"window\", window_ns=1e6))",
}


def logged(kt: Any, logger: str) -> tuple[Any, dict[str, Any]]:
    """The synthetic logs of ``logger`` for trace ``kt`` and the keywords ``profile_trace`` takes with them."""
    from fingrav_native.sensors import SensorModel
    from sim_captures import synthetic_logs

    if logger == "instant":
        return synthetic_logs(kt), {}
    return (synthetic_logs(kt, period_ns=1_000_000, window_ns=1_000_000),
            {"sensor": SensorModel("1 ms window", "window", period_ns=1e6, window_ns=1e6)})


def _logs_inside(kt: Any, logs: Any, rows: Any) -> int:
    """Instantaneous logs strictly inside the executions ``rows`` (what a coarse level from them can rest on)."""
    import numpy as np

    t = np.sort(logs["source_ts"].astype(np.int64) - kt.origin_ns)
    ex = kt.executions[rows]
    return int(np.sum(np.clip(np.searchsorted(t, ex["end_ns"], side="left")
                              - np.searchsorted(t, ex["start_ns"], side="right"), 0, None)))


def _cause(logger: str, words: str, n_inside: int) -> str:
    """Why a signature's executions have no energy with an interval, by what the logs hold of them."""
    if logger == "instant" and n_inside == 0:
        return "no log falls strictly inside any of their executions: nothing measures their power"
    if logger == "instant" and n_inside == 1:
        return "one log inside their executions: a level but no interval"
    if logger == "window" and ("fewer than" in words or "no log determines" in words):
        return ("the joint fit gives their one-bin class no interval: the 1 ms windows cover them in about the same "
                "mix as their neighbours")
    return words


def share_used(kt: Any, tp: Any, logs: Any, logger: str) -> dict[str, Any]:
    """Of the device's executions, those whose energy the result gives with an interval, and the rest by cause.

    ``TraceProfile.used_executions`` counts them (stitched rows, coarse ``[c]`` rows, spans attributed jointly, or
    the kernel span's energy); executions of zero recorded duration (a trace artefact, no energy to attribute) are
    counted apart, neither used nor left out. A signature left out is counted under what the logs hold of it:
    for instantaneous logs, how many fall strictly inside its executions.
    """
    import math

    import numpy as np

    from fingrav_native.insitu import signature_label as _label

    ex = kt.executions
    device = int(np.unique(kt.device)[0])
    on = (kt.device == device) & (ex["end_ns"] > ex["start_ns"])
    rows_of = {_label(s): np.flatnonzero(on & (ex["kernel_id"] == int(s["id"]))) for s in kt.signatures}
    used, n = tp.used_executions()
    warm = int(np.sum(tp.kernels["warmup"])) if len(tp.kernels) else 0
    coarse = sum(int(r["count"]) for i, r in enumerate(tp.kernels) if tp._coarse(i))
    how = ("the kernel span's energy with its interval holds every execution" if used == n and tp.span is not None
           else "rows past warm-up (stitched and coarse [c]) and spans attributed jointly (tp.concurrency)"
           if tp.concurrency is not None else "executions of rows with an interval (stitched and coarse [c]), past "
           "their warm-up")
    causes: dict[str, list[int]] = {}
    members = set(tp.joint_members())
    if used < n:
        if warm:
            causes["left out as warm-up: ran while the power still rose (paper Section IV-A)"] = [warm, len(tp.kernels)]
        for label, words in tp.skipped.items():
            rows = rows_of.get(label)
            if rows is None or not len(rows) or label in members:  # a member's executions are the joint row's
                continue
            c = causes.setdefault(_cause(logger, words, _logs_inside(kt, logs, rows)), [0, 0])
            c[0], c[1] = c[0] + len(rows), c[1] + 1
        for i, r in enumerate(tp.kernels):  # rows whose energy has no interval
            if not (math.isfinite(r["energy_j"]) and math.isfinite(r["energy_half_width_j"])):
                c = causes.setdefault(f"a row whose energy has no interval ({tp._no_interval(i)})", [0, 0])
                c[0], c[1] = c[0] + int(r["count"]), c[1] + 1
    why = sorted(((w, c[0], c[1]) for w, c in causes.items()), key=lambda x: -x[1])
    # How much of the kernel span the kernels keep the GPU busy: what a 1 ms window can see of them.
    span_ns = float(ex["end_ns"][on].max() - ex["start_ns"][on].min()) if on.any() else math.nan
    busy = float(np.sum(ex["end_ns"][on] - ex["start_ns"][on])) / span_ns if on.any() else math.nan
    return {"logger": logger, "device": device, "executions": n, "used": used, "share": used / n if n else math.nan,
            "how": how, "coarse": coarse, "zero_duration": int(tp.zero_duration),
            "signatures": int(sum(1 for r in rows_of.values() if len(r))), "rows": int(len(tp.kernels)),
            "steps": int(len(kt.steps)), "span_ms": span_ns / 1e6, "busy_share": busy, "not_used_by_cause": why,
            **coverage(kt, tp)}


def coverage(kt: Any, tp: Any) -> dict[str, Any]:
    """The energies given with an interval against the synthetic truth, in closed form.

    A kernel running alone draws 80 W + 150 W (``tests/sim_captures.py``), so a row's true energy per execution is
    230 W x its duration; a communication kernel's additive level (CompPow's accounting) is the 150 W it adds; the
    kernel span's truth is the logs' power integrated exactly over it (``sim_captures.synthetic_energy``).
    """
    import math

    import numpy as np

    from sim_captures import synthetic_energy

    rows = covered = ex_rows = ex_covered = 0
    worst = 0.0
    for i, r in enumerate(tp.kernels):
        if not (math.isfinite(r["energy_j"]) and math.isfinite(r["energy_half_width_j"])):
            continue
        # A joint row that is not coarse is a communication kernel's additive level.
        level = bool(r["joint"]) and not tp._coarse(i)
        truth = (150.0 if level else 230.0) * float(r["duration_ns"]) * 1e-9
        ok = abs(float(r["energy_j"]) - truth) <= float(r["energy_half_width_j"])
        k = int(r["count"] - r["warmup"])
        rows, covered, ex_rows, ex_covered = rows + 1, covered + ok, ex_rows + k, ex_covered + k * ok
        worst = max(worst, abs(float(r["energy_j"]) / truth - 1.0))
    span: Optional[bool] = None
    joint = joint_row(kt, tp)
    sp = tp.span
    if sp is not None and math.isfinite(sp.energy_j) and math.isfinite(sp.energy_half_width_j):
        truth = float(synthetic_energy(kt, np.array([sp.start_ns]), np.array([sp.end_ns]))[0])
        span = abs(sp.energy_j - truth) <= sp.energy_half_width_j
    return {"rows_with_interval": rows, "rows_covered": covered, "executions_in_rows": ex_rows,
            "executions_covered": ex_covered, "worst_relative_error": worst, "span_covered": span, "joint_row": joint}


def joint_row(kt: Any, tp: Any) -> Optional[dict[str, Any]]:
    """The joint row [g] against its truth, the compute kernels' own draw, 230 W x their summed duration, as for every
    row (CompPow's accounting: a communication kernel beside them adds its level in its own row, and the logs
    inside them have that level taken off); also the synthetic power integrated over its executions, that level
    included (``sim_captures.synthetic_energy``). None without a joint row."""
    import numpy as np

    from sim_captures import synthetic_energy

    rows = [i for i in range(len(tp.kernels)) if tp._group(i)]
    if not rows:
        return None
    r, ep = tp.kernels[rows[0]], tp.profiles[rows[0]]
    ex = kt.executions[np.isin(kt.executions["run"], np.asarray(ep.golden.run_ids))]
    truth = 230.0 * float(np.sum(ex["end_ns"] - ex["start_ns"])) * 1e-9
    energy, half = float(r["energy_j"] * r["count"]), float(r["energy_half_width_j"] * r["count"])
    return {"members": len(tp.joint_members()), "executions": int(r["count"]), "energy_j": energy,
            "half_width_j": half, "truth_j": truth, "held": abs(energy - truth) <= half,
            "integral_j": float(np.sum(synthetic_energy(kt, ex["start_ns"], ex["end_ns"])))}


def shares(logger: str, name: str) -> None:
    """One process: trace ``name`` profiled with ``logger``'s synthetic logs, its share used and coverage (JSON)."""
    import warnings

    sys.path.insert(0, TESTS)
    import fingrav_native as fg
    from fingrav_native.files import read_trace
    from fingrav_native.sim import EpochIdentity
    from real_data import path as real_path

    # A cap on this process's memory: a fit that outgrows it fails here (reported as not measured) instead of
    # the host's OOM killer choosing among everyone's processes (the traces' shares run side by side).
    resource.setrlimit(resource.RLIMIT_AS, (SHARE_MEMORY_BYTES, SHARE_MEMORY_BYTES))
    kt = read_trace(real_path(f"traces/{name}"))
    logs, kw = logged(kt, logger)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tp, wall, cpu = _timed(lambda: fg.profile_trace(kt, logs, EpochIdentity(), **kw))
    print(json.dumps({"trace": name, "profile_s": wall, "profile_cpu_s": cpu, **share_used(kt, tp, logs, logger)}),
          flush=True)


def worker(rounds_tag: str) -> None:
    """One process: each trace's plain parse (best of three) and one ``profile_trace`` call, as JSON lines."""
    import warnings

    sys.path.insert(0, TESTS)
    import fingrav_native as fg
    from fingrav_native.files import read_trace
    from fingrav_native.sim import EpochIdentity
    from real_data import path as real_path
    from sim_captures import synthetic_logs

    paths = {name: real_path(f"traces/{name}") for name in TRACES}
    logs = {}
    for name, p in paths.items():
        kt = read_trace(p)
        logs[name] = (kt, synthetic_logs(kt))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Loads the modules every step imports on first use (alignment, communication, concurrency): not timed.
        for first in ("hta/nccl_data.ProfilerStep5.json.gz", "rocprofv3/kernel_trace.csv"):
            fg.profile_trace(paths[first], logs[first][1], EpochIdentity())
        for name, p in paths.items():
            parse = min((_timed(lambda: plain_parse(p)) for _ in range(3)), key=lambda r: r[1])
            tp, wall, cpu = _timed(lambda: fg.profile_trace(p, logs[name][1], EpochIdentity()))
            print(json.dumps({"trace": name, "tag": rounds_tag, "parse_s": parse[1], "parse_cpu_s": parse[2],
                              "profile_s": wall, "profile_cpu_s": cpu, "load": os.getloadavg()[0],
                              "blas_threads": sorted(set(fg.threads_in_force().values())),
                              "used": tp.used_executions()[0]}), flush=True)


def _busy(on: bool) -> list[subprocess.Popen[bytes]]:
    if not on:
        return []
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP], env=env) for _ in range(os.cpu_count() or 1)]


def run_round(condition: str, timeout_s: float) -> dict[str, dict[str, Any]]:
    """A fresh process in the default environment times every trace, under the condition's load."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    load = _busy(condition == "loaded")
    try:
        time.sleep(0.5 if load else 0.0)  # the busy processes running before the worker starts
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", condition], env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    finally:
        for p in load:
            p.kill()
        for p in load:
            p.wait()
    if done.returncode != 0:
        raise SystemExit(f"realtrace_speed: the {condition} worker failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["trace"]: r for r in rows}


def neighbour_bound(kt: Any, seeds: int = 20) -> dict[str, Any]:
    """Would a bound from the logged neighbours hold an unlogged signature's power? Measured where it fails.

    Each signature draws its own power (80 W + uniform 100-300 W, per seed: kernels unlike their neighbours, the
    case a bound from neighbours assumes away); instantaneous logs every 100 us at a random phase. For each
    signature no log falls strictly inside, the interval [min, max] of the logs just before and just after its
    executions; the share of those intervals that hold its true power (a 95 % interval should hold it 95 % of
    the time).
    """
    import numpy as np

    ex = kt.executions
    ex = ex[(kt.device == int(np.unique(kt.device)[0])) & (ex["end_ns"] > ex["start_ns"])]
    order = np.argsort(ex["start_ns"], kind="stable")
    s, e, k = ex["start_ns"][order], ex["end_ns"][order], ex["kernel_id"][order]
    held: list[bool] = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        draw = 80.0 + rng.uniform(100.0, 300.0, len(kt.signatures))
        t = np.arange(int(s.min()) - 2_000_000, int(e.max()) + 2_000_000, 100_000) + int(rng.integers(0, 100_000))
        j = np.clip(np.searchsorted(s, t, side="right") - 1, 0, None)
        inside = (t >= s[j]) & (t < e[j])
        p = np.where(inside, draw[k[j]], 80.0)
        logged = np.zeros(len(kt.signatures), dtype=bool)
        logged[k[j[inside & (t > s[j])]]] = True
        for sid in np.unique(k[~logged[k]]):
            m = k == sid
            near = np.concatenate([p[np.searchsorted(t, s[m], side="left") - 1],
                                   p[np.clip(np.searchsorted(t, e[m], side="right"), 0, len(t) - 1)]])
            held.append(bool(near.min() <= draw[sid] <= near.max()))
    return {"intervals": len(held), "held": float(np.mean(held)) if held else float("nan")}


def run_shares(logger: str, timeout_s: float) -> dict[str, dict[str, Any]]:
    """Fresh processes (untimed, one per trace, at once) profile every trace with ``logger``'s logs: the shares
    used and the coverage. The joint fit of 1 ms windows over a trace of a thousand kernels takes minutes of CPU
    on a busy host, so the traces run side by side."""
    procs = {name: subprocess.Popen([sys.executable, os.path.abspath(__file__), "--shares", logger, "--trace", name],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in TRACES}
    out: dict[str, dict[str, Any]] = {}
    t_end = time.monotonic() + timeout_s
    for name, p in procs.items():
        try:
            stdout, stderr = p.communicate(timeout=max(1.0, t_end - time.monotonic()))
        except subprocess.TimeoutExpired:
            # Not measured, and said so per trace, rather than the whole bench lost.
            p.kill()
            p.wait()
            out[name] = {"not_measured": f"profile_trace ran past {timeout_s:.0f} s (wall, beside the host's load)"}
            continue
        if p.returncode != 0:  # killed (memory) or failed: said per trace, the rest still reported
            last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
            out[name] = {"not_measured": f"exit code {p.returncode}: {last[:200]}"}
            continue
        out[name] = json.loads(stdout.splitlines()[-1])
    return out


def summarise(runs: dict[str, list[dict[str, dict[str, Any]]]]) -> dict[str, Any]:
    """Per trace and condition, the medians over the rounds, the ratio, the limit and whether it holds."""
    out: dict[str, Any] = {}
    for name in TRACES:
        row: dict[str, Any] = {}
        for cond, rounds in runs.items():
            got = [r[name] for r in rounds]
            med = {k: statistics.median(g[k] for g in got)
                   for k in ("parse_s", "parse_cpu_s", "profile_s", "profile_cpu_s", "load")}
            limit = max(5.0, 3.0 * med["parse_s"])
            row[cond] = {**med, "ratio": med["profile_s"] / med["parse_s"], "limit_s": limit,
                         "within": med["profile_s"] <= limit}
        out[name] = row
    return out


def why_below(s: dict[str, Any]) -> str:
    """Why a trace uses fewer than 90 % of its executions under one logger, by cause (empty at the target)."""
    if s["share"] >= TARGET_SHARE:
        return ""
    parts = [f"{count} executions of {nsig} signature{'s' if nsig != 1 else ''}: {words}"
             for words, count, nsig in s["not_used_by_cause"]]
    if s["logger"] == "window" and s["span_ms"] < 1.0:
        parts.append(f"the kernel span ({s['span_ms']:.2f} ms) is shorter than one 1 ms window: every window holds "
                     "it whole with time outside it, so neither a kernel nor the span is separated")
    elif s["logger"] == "window":
        parts.append(f"the kernels' durations add up to {100 * s['busy_share']:.1f} % of a {s['span_ms']:.2f} ms "
                     "span, so a 1 ms window holds a few microseconds of any one of them (150 W x 10 us / 1 ms = "
                     "1.5 W, against the logs' 1 W of noise)")
    where = (f"the energy per iteration, which has no interval from {s['steps']} iteration(s)" if s["steps"] else
             "the energy over the kernel span")
    return "; ".join(parts) + f". Their energy is only in {where}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round; writes nothing unless --json")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of quiet and loaded (medians)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds after which one worker is stopped")
    ap.add_argument("--json", help="write the figures here instead of bench/results/realtrace_speed.json")
    ap.add_argument("--loggers", nargs="+", choices=sorted(LOGGERS), default=sorted(LOGGERS),
                    help="the synthetic loggers whose share of executions used is measured (default: both)")
    ap.add_argument("--share-timeout", type=float, default=2400.0,
                    help="seconds after which a logger's shares not yet measured are reported as such")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--shares", choices=sorted(LOGGERS), help=argparse.SUPPRESS)
    ap.add_argument("--trace", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    if args.shares:
        shares(args.shares, args.trace)
        return
    sys.path.insert(0, TESTS)
    import real_data

    if real_data.root() is None:
        # A clone without the real-data folder: nothing to time (as the tests skip), said and not an error.
        print(f"realtrace_speed: skipped: {real_data.why_missing(f'traces/{TRACES[0]}')}")
        return
    try:
        for name in TRACES:
            real_data.path(f"traces/{name}")
    except real_data.MissingRealData as e:  # a folder named that lacks a trace: stop naming it
        raise SystemExit(f"realtrace_speed: {e}") from None
    rounds = 1 if args.quick else args.rounds
    load0 = os.getloadavg()
    print(f"{os.cpu_count()} cores, load average {load0[0]:.1f} at start; {rounds} round(s)", flush=True)
    runs: dict[str, list[dict[str, dict[str, Any]]]] = {"quiet": [], "loaded": []}
    for rnd in range(rounds):
        for cond in (("quiet", "loaded") if rnd % 2 == 0 else ("loaded", "quiet")):
            runs[cond].append(run_round(cond, args.timeout))
            worst = max(r["profile_s"] for r in runs[cond][-1].values())
            print(f"  round {rnd + 1} {cond:6s}: slowest profile_trace {worst:.2f} s, load average "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
    summary = summarise(runs)
    for logger in args.loggers:
        for name, got in run_shares(logger, args.share_timeout).items():
            summary[name].setdefault("shares", {})[logger] = (
                got if "not_measured" in got else {**got, "why_below_target": why_below(got)})
        print(f"  shares under {logger} logs: done, load average {os.getloadavg()[0]:.1f}", flush=True)
    from fingrav_native.files import read_trace

    for name in TRACES:
        summary[name]["neighbour_bound"] = neighbour_bound(read_trace(real_data.path(f"traces/{name}")))
    print(report(summary))
    out = {"bench": "realtrace_speed", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "load_average_at_start": load0, "load_average_at_end": os.getloadavg()},
           "target": "profile_trace <= max(5 s, 3x the plain parse), quiet and loaded; >= 90 % of executions used",
           "rounds": rounds, "summary": summary, "runs": runs}
    if args.quick and not args.json:
        return
    path = args.json or os.path.join(RESULTS, "realtrace_speed.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")
    if not args.json:
        from results_readme import write_section

        write_section("## Real traces: speed", section(out))


def _table(summary: dict[str, Any]) -> list[str]:
    lines = ["| trace | executions | parse s (quiet / loaded) | profile_trace s (quiet / loaded) | profile / parse "
             "(quiet / loaded) | limit s (quiet / loaded) | within | zero duration | load average (quiet / loaded) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in summary.items():
        q, b = r["quiet"], r["loaded"]
        s = r.get("shares", {}).get("instant", {"executions": -1, "zero_duration": -1})
        ok = "yes" if q["within"] and b["within"] else "**no**"
        lines.append(f"| {_short(name)} | {s['executions']:,} | {q['parse_s']:.3f} / {b['parse_s']:.3f} | "
                     f"{q['profile_s']:.2f} / {b['profile_s']:.2f} | {q['ratio']:.1f}x / {b['ratio']:.1f}x | "
                     f"{q['limit_s']:.1f} / {b['limit_s']:.1f} | {ok} | {s['zero_duration']} | {q['load']:.1f} / "
                     f"{b['load']:.1f} |")
    return lines


def _short(name: str) -> str:
    return f"{name.split('/')[0]}/{name.split('/')[1][:40]}"


def _share_table(summary: dict[str, Any]) -> list[str]:
    """Per trace and logger: the executions used, and the energies' coverage of the closed-form truth."""
    lines = ["| trace | logger | executions used (in coarse rows) | rows whose interval holds the truth (executions) "
             "| worst row error | kernel span's interval holds the truth | joint row [g]: executions, its interval holds "
             "the truth | profile_trace s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in summary.items():
        for logger, s in r.get("shares", {}).items():
            if "not_measured" in s:
                lines.append(f"| {_short(name)} | {logger} | not measured: {s['not_measured']} | | | | | |")
                continue
            span = {None: "-", True: "yes", False: "**no**"}[s["span_covered"]]
            lines.append(f"| {_short(name)} | {logger} | {s['used']} of {s['executions']} ({100 * s['share']:.0f} %; "
                         f"{s['coarse']}) | {s['rows_covered']} of {s['rows_with_interval']} "
                         f"({s['executions_covered']} of {s['executions_in_rows']}) | "
                         f"{100 * s['worst_relative_error']:.1f} % | {span} | {_joint_cell(s.get('joint_row'))} | "
                         f"{s['profile_s']:.2f} |")
    return lines


def _joint_cell(j: Optional[dict[str, Any]]) -> str:
    """The joint row's executions and whether its interval holds the exact truth ("-" without one)."""
    if not j:
        return "-"
    err = 100 * (j["energy_j"] / j["truth_j"] - 1.0)
    return f"{j['executions']} executions of {j['members']} signatures, {'yes' if j['held'] else '**no**'} ({err:+.1f} %)"


def report(summary: dict[str, Any]) -> str:
    """The tables and, per trace and logger below 90 % of executions used, why, by cause."""
    lines = [*_table(summary), "", *_share_table(summary), ""]
    nb = [(name, r["neighbour_bound"]) for name, r in summary.items()
          if r.get("neighbour_bound", {}).get("intervals")]
    if nb:
        lines.append("An unlogged signature's power bounded by its logged neighbours (each signature its own power, "
                     "80 W + uniform 100-300 W, 20 seeds), the share of such intervals that hold the truth: "
                     + "; ".join(f"{_short(n)} {100 * b['held']:.0f} % of {b['intervals']}" for n, b in nb)
                     + ". Far below 95 %: such a row would be false confidence, so executions no log falls inside "
                       "are left out.")
        lines.append("")
    for name, r in summary.items():
        for logger, s in r.get("shares", {}).items():
            if s.get("why_below_target"):
                lines.append(f"- {name} ({logger}): {s['used']} of {s['executions']} executions used: "
                             f"{s['why_below_target']}")
    return "\n".join(lines)


def section(out: dict[str, Any]) -> str:
    la, lb = out["machine"]["load_average_at_start"], out["machine"]["load_average_at_end"]
    return "\n".join([
        "## Real traces: speed", "",
        f"`python bench/realtrace_speed.py` ({out['date']}, {out['machine']['cores']} cores shared with other "
        f"work, load average {la[0]:.1f} at the start and {lb[0]:.1f} at the end, {out['rounds']} rounds, medians): "
        "`profile_trace` with default options in the default environment (its own read included) on every real "
        "trace the tests profile, with their synthetic logs, against a plain parse of the same file (json or csv "
        "+ numpy), quiet and beside one busy process per core, alternating. Target: profile_trace <= max(5 s, "
        "3x the parse) in both conditions, and >= 90 % of the executions used (energy given with an interval). "
        "The shares are measured under two synthetic loggers of the same power (80 W + 150 W per kernel "
        f"running): {LOGGERS['instant']}; {LOGGERS['window']}; each row's energy checked against the closed-form "
        "truth (230 W x its duration; 150 W for a communication kernel's additive level).",
        "", *report(out["summary"]).splitlines(), ""])


if __name__ == "__main__":
    main()
