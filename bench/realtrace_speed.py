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
condition) (issue 41's "Done when").

The share of executions used: of the device's executions, those whose energy the result gives with an
interval: executions of a signature with a row past its warm-up, those attributed jointly in spans of
concurrent compute kernels (``TraceProfile.concurrency``), or every execution where the trace's kernel
span has an energy with an interval (``TraceProfile.span``). The rest are counted by why (the reasons of
``TraceProfile.skipped_by_reason``, warm-up), so a trace below 90 % says exactly what keeps it there.

Run:  python bench/realtrace_speed.py             (3 rounds, about 2 min on a busy 2-core host)
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
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from typing import Any

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


def share_used(kt: Any, tp: Any) -> dict[str, Any]:
    """Of the device's executions, those whose energy the result gives with an interval, and the rest by why.

    ``TraceProfile.used_executions`` counts them (stitched rows, coarse ``[c]`` rows, spans attributed jointly, or
    the kernel span's energy); executions of zero recorded duration (a trace artefact, no energy to attribute) are
    counted apart, neither used nor left out.
    """
    import math

    import numpy as np

    from fingrav_native.insitu import signature_label as _label

    ex = kt.executions
    device = int(np.unique(kt.device)[0])
    on = (kt.device == device) & (ex["end_ns"] > ex["start_ns"])
    per_sig = np.bincount(ex["kernel_id"][on], minlength=len(kt.signatures))
    label_of = {_label(s): int(s["id"]) for s in kt.signatures}
    used, n = tp.used_executions()
    warm = int(np.sum(tp.kernels["warmup"])) if len(tp.kernels) else 0
    coarse = sum(int(r["count"]) for i, r in enumerate(tp.kernels) if tp._coarse(i))
    how = ("the kernel span's energy with its interval holds every execution" if used == n and tp.span is not None
           else "rows past warm-up (stitched and coarse [c]) and spans attributed jointly (tp.concurrency)"
           if tp.concurrency is not None else "executions of rows with an interval (stitched and coarse [c]), past "
           "their warm-up")
    why: list[tuple[str, int, int]] = []
    if used < n:
        if warm:
            why.append(("left out as warm-up", warm, len(tp.kernels)))
        for words, labels in tp.skipped_by_reason():
            count = int(sum(per_sig[label_of[lb]] for lb in labels if lb in label_of))
            if count:
                why.append((words, count, len(labels)))
    return {"device": device, "executions": n, "used": used, "share": used / n if n else math.nan, "how": how,
            "coarse": coarse, "zero_duration": int(tp.zero_duration),
            "signatures": int(np.count_nonzero(per_sig)), "rows": int(len(tp.kernels)),
            "steps": int(len(kt.steps)), "not_used_by_reason": why}


def worker(rounds_tag: str) -> None:
    """One process: each trace's plain parse (best of three) and one ``profile_trace`` call, as JSON lines."""
    import warnings

    sys.path.insert(0, TESTS)
    import fingrav_native as fg
    from fingrav_native import _threads
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
                              "blas_threads": sorted(set(_threads.blas_threads().values())),
                              **share_used(logs[name][0], tp)}), flush=True)


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
        last = runs["quiet"][-1][name]
        row["share"] = {k: last[k] for k in ("device", "executions", "used", "share", "how", "coarse", "zero_duration",
                                             "signatures", "rows", "steps", "not_used_by_reason")}
        row["share"]["why_below_target"] = why_below(row["share"])
        out[name] = row
    return out


def _because(words: str, steps: int) -> str:
    """What a reason for leaving executions out says of the limit: the excerpt's, the logs', the trace's."""
    if "no log determines" in words:
        return ("run too few times to stitch (or with no log inside a golden execution), and no log at the logs' "
                "100 us period falls inside any of their executions, so no level is determined for a coarse row "
                "(a limit of the logs: a faster logger)")
    if "fewer than" in words:
        return (f"run fewer than min_executions=20 times in an excerpt of {steps} ProfilerStep(s) (a limit of the "
                "excerpt: a trace of 20 iterations holds each 20 times)" if steps else
                "run fewer than min_executions=20 times in a trace that marks no iteration (a limit of the trace)")
    if "no power log inside" in words:
        return ("have no log inside any golden execution at the logs' 100 us period (a limit of the logs: a "
                "faster logger, or more executions)")
    if "zero recorded duration" in words:
        return "have no duration at the trace's 1 us resolution: nothing to attribute (a limit of the trace)"
    if "warm-up" in words:
        return "ran while the power still rose (left out by the method, paper Section IV-A)"
    return words


def why_below(s: dict[str, Any]) -> str:
    """Why a trace uses fewer than 90 % of its executions, in words (empty where it reaches the target)."""
    if s["share"] >= TARGET_SHARE:
        return ""
    parts = [f"{count} executions of {nsig} signature{'s' if nsig != 1 else ''} {_because(words, s['steps'])}"
             for words, count, nsig in s["not_used_by_reason"]]
    where = ("the energy per iteration, which has no interval from fewer than 10 iterations" if s["steps"] else
             "the energy over the kernel span")
    return "; ".join(parts) + f". Their energy is in {where}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round; writes nothing unless --json")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of quiet and loaded (medians)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds after which one worker is stopped")
    ap.add_argument("--json", help="write the figures here instead of bench/results/realtrace_speed.json")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
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
             "(quiet / loaded) | limit s (quiet / loaded) | within | executions used (in coarse rows) | zero duration "
             "| load average (quiet / loaded) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in summary.items():
        q, b, s = r["quiet"], r["loaded"], r["share"]
        ok = "yes" if q["within"] and b["within"] else "**no**"
        lines.append(f"| {name.split('/')[0]}/{name.split('/')[1][:40]} | {s['executions']:,} | {q['parse_s']:.3f} / "
                     f"{b['parse_s']:.3f} | {q['profile_s']:.2f} / {b['profile_s']:.2f} | {q['ratio']:.1f}x / "
                     f"{b['ratio']:.1f}x | {q['limit_s']:.1f} / {b['limit_s']:.1f} | {ok} | {s['used']} "
                     f"({100 * s['share']:.0f} %; {s['coarse']}) | {s['zero_duration']} | {q['load']:.1f} / "
                     f"{b['load']:.1f} |")
    return lines


def report(summary: dict[str, Any]) -> str:
    """The table and, per trace below 90 % of executions used, why."""
    lines = _table(summary)
    if any(r["share"]["why_below_target"] for r in summary.values()):
        lines.append("")
    for name, r in summary.items():
        if r["share"]["why_below_target"]:
            lines.append(f"- {name}: {r['share']['used']} of {r['share']['executions']} executions used: "
                         f"{r['share']['why_below_target']}")
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
        "3x the parse) in both conditions, and >= 90 % of the executions used (energy given with an interval).",
        "", *report(out["summary"]).splitlines(), ""])


if __name__ == "__main__":
    main()
