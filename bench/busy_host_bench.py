#!/usr/bin/env python3
"""``profile_trace`` on a busy host: the default environment against one BLAS thread forced, in the same run.

A GPU host running a training job has its cores busy. OpenBLAS starts a
thread per core, and every small solve then waits for its threads to get a
core: ``profile_trace`` took 312-339 s beside other work on a 10^6-kernel
trace and 18 s with ``OPENBLAS_NUM_THREADS=1``. The package's thread policy
(``fingrav_native.thread_policy``) runs the method's small solves on one BLAS
thread at its entry points, so the default environment should now cost what
forcing one thread does.

Per workload, every condition runs ``profile_trace`` with default options in
a fresh subprocess whose environment has no ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` (the default environment; the
data is made before the clock starts):

* **busy**: while one busy process per core (numpy matrix products on one
  BLAS thread each) keeps every core busy;
* **busy_one_thread**: the same, inside ``threadpool_limits(1, "blas")``;
* **quiet**: no busy processes;
* **busy_no_policy** (``--no-policy``): busy, with the package's policy
  switched off (``fg.thread_policy(False)``): what the default
  environment cost before the policy.

Workloads: ``many``, 10^4 kernels of 300 signatures (Zipf popularity, 5-300
us kernels, instantaneous 1 ms logs through a 10 us lag: the kernel mix of
``bench/insitu_align_bench.py``); ``averaging``, the simulator's training
loop (``fingrav_native.sim.logged_loop``) logged by a 1 ms average (the
joint attribution engine); ``real``, the largest real Kineto trace of
``$FINGRAV_REAL_DATA`` (resnet50, 1,455 executions) with instantaneous
100 us logs of a closed-form power (as ``tests/insitu/test_real_traces.py``
makes them), when the folder is there.

Conditions alternate over ``--repeat`` rounds; medians, and busy /
busy_one_thread per round (calls seconds apart, so others' load moves both
alike). Target: the median of those ratios <= 1.2. Only ratios within one run mean anything: the
machine's other load moves the absolute times.

Run:  python bench/busy_host_bench.py                 (ten minutes and more on a busy 2-core host)
      python bench/busy_host_bench.py --quick         (one round, smaller workloads)
      python bench/busy_host_bench.py --no-policy     (adds busy_no_policy: 22 min in all here, beside other work)
Writes bench/results/busy_host.json and the "## Busy host" section of bench/results/README.md
(with --json PATH: only PATH).
"""

from __future__ import annotations

import argparse
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
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
CONDITIONS = ("busy", "busy_one_thread", "quiet")
# One process per core, each a loop of matrix products on one BLAS thread: every core busy, as beside a
# training job's data loaders and host threads.
BUSY_LOOP = ("import numpy as np\n"
             "a = np.random.default_rng(0).standard_normal((256, 256))\n"
             "while True:\n"
             "    a = np.tanh(a @ a)\n")


def _make(workload: str, quick: bool) -> tuple[Any, Any, Any]:
    """The trace, the logs and the clock map of a workload (made before any timing)."""

    import fingrav_native as fg
    from fingrav_native.sim import EpochIdentity, Identity

    if workload == "many":
        sys.path.insert(0, HERE)
        from insitu_align_bench import many_signatures

        kt, samples = many_signatures(3_000 if quick else 10_000)
        return kt, samples, Identity()
    if workload == "averaging":
        from fingrav_native.sim import logged_loop

        loop = logged_loop(fg.sensors.sensor_preset("amd-1ms-average"), seed=0, iterations=100 if quick else 300)
        return loop.trace, loop.samples, Identity()
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    from fingrav_native.files import read_trace
    from real_data import require
    from sim_captures import synthetic_logs

    kt = read_trace(require("traces/kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz"))
    return kt, synthetic_logs(kt), EpochIdentity()


def worker(workload: str, condition: str, quick: bool) -> None:
    """One timed ``profile_trace`` call; prints its figures as one JSON line."""
    import warnings

    from threadpoolctl import threadpool_limits

    import fingrav_native as fg

    kt, samples, cmap = _make(workload, quick)
    limit = threadpool_limits(limits=1, user_api="blas") if condition == "busy_one_thread" else None
    with warnings.catch_warnings(), fg.thread_policy(condition != "busy_no_policy"):
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        tp = fg.profile_trace(kt, samples, cmap)
        wall = time.perf_counter() - t0
    if limit is not None:
        limit.restore_original_limits()
    print(json.dumps({"wall_s": wall, "kernels": int(len(kt.executions)), "signatures": int(len(kt.signatures)),
                      "logs": int(len(samples)), "rows": int(len(tp.kernels)),
                      "blas_default": sorted(set(fg.threads_in_force().values()))}))


def _busy(on: bool) -> list[subprocess.Popen[bytes]]:
    if not on:
        return []
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP], env=env) for _ in range(os.cpu_count() or 1)]


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def run_one(workload: str, condition: str, quick: bool, timeout_s: float) -> dict[str, Any]:
    """A fresh subprocess in the default environment times one call, under its condition's load."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", workload, condition] + (["--quick"] if quick else [])
    load = _busy(condition.startswith("busy"))
    try:
        time.sleep(0.5 if load else 0.0)  # the busy processes running before the worker starts
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"wall_s": None, "note": f"over {timeout_s:.0f} s, stopped"}
    finally:
        _stop(load)
    if done.returncode != 0:
        raise SystemExit(f"{workload}/{condition} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _median(rows: list[dict[str, Any]]) -> float | None:
    walls = [r["wall_s"] for r in rows if r.get("wall_s") is not None]
    return statistics.median(walls) if len(walls) == len(rows) else None


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One workload's medians, their ratios to busy_one_thread, and busy / busy_one_thread round by round.

    The rounds' own ratios pair calls made seconds apart, so the load that others put on the machine
    moves both alike; their median is the target's figure.
    """
    med = {c: _median(rows) for c, rows in runs.items()}
    base = med["busy_one_thread"]
    by_round = [a["wall_s"] / b["wall_s"] for a, b in zip(runs["busy"], runs["busy_one_thread"])
                if a.get("wall_s") and b.get("wall_s")]
    paired = statistics.median(by_round) if by_round else None
    first = runs["quiet"][0]
    return {"kernels": first["kernels"], "signatures": first["signatures"], "logs": first["logs"], "median_s": med,
            "over_busy_one_thread": {c: (m / base if m is not None and base else None) for c, m in med.items()},
            "busy_over_one_thread_by_round": by_round, "busy_over_one_thread_paired": paired,
            "target_met": paired is not None and paired <= 1.2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round, smaller workloads")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every condition (medians)")
    ap.add_argument("--no-policy", action="store_true", help="add busy_no_policy (the default environment "
                    "without the package's thread policy)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds after which one call is stopped")
    ap.add_argument("--json", help="write the figures here instead of bench/results/busy_host.json")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker, quick=args.quick)
        return
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    import real_data

    workloads = ["many", "averaging"] + (["real"] if real_data.root() else [])
    conditions = CONDITIONS + (("busy_no_policy",) if args.no_policy else ())
    repeat = 1 if args.quick else args.repeat
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {w: {c: [] for c in conditions} for w in workloads}
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; {repeat} round(s)", flush=True)
    for rnd in range(repeat):
        for w in workloads:
            for c in conditions:
                r = run_one(w, c, args.quick, args.timeout)
                runs[w][c].append(r)
                wall = f"{r['wall_s']:.2f} s" if r.get("wall_s") is not None else r["note"]
                print(f"  round {rnd + 1} {w:9s} {c:16s} {wall}", flush=True)
    summary = {w: summarise(runs[w]) for w in workloads}
    for w, r in summary.items():
        shown = ", ".join(f"{c} {m:.2f} s ({r['over_busy_one_thread'][c]:.2f}x)" if m is not None else f"{c} stopped"
                          for c, m in r["median_s"].items())
        print(f"{w} ({r['kernels']} kernels, {r['signatures']} signatures, {r['logs']} logs): {shown}; busy / "
              f"busy_one_thread round by round: {', '.join(f'{x:.2f}' for x in r['busy_over_one_thread_by_round'])}")
    out = {"bench": "busy_host", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "load_average_at_end": os.getloadavg()},
           "target": "median over rounds of busy / busy_one_thread <= 1.2", "rounds": repeat, "quick": args.quick,
           "summary": summary, "runs": runs}
    path = args.json or os.path.join(RESULTS, "busy_host.json")
    if args.quick and not args.json:
        return
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")
    if not args.json:
        _write_section(out)


def _write_section(out: dict[str, Any]) -> None:
    """The "## Busy host" section of bench/results/README.md."""
    from results_readme import write_section

    def fmt(x: float | None, unit: str) -> str:
        return "stopped" if x is None else f"{x:.2f}{unit}"

    cols = [c for c in ("busy", "busy_one_thread", "quiet", "busy_no_policy")
            if c in next(iter(out["summary"].values()))["median_s"]]
    lines = ["## Busy host", "",
             f"`python bench/busy_host_bench.py{' --no-policy' if 'busy_no_policy' in cols else ''}` "
             f"({out['date']}, {out['machine']['cores']} cores shared with other work, {out['rounds']} rounds, "
             "medians): `profile_trace` with default options in the default environment while one busy process "
             "per core runs, against the same call inside `threadpool_limits(1)`, and quiet. Target: busy / "
             "busy_one_thread <= 1.2 (the median of the rounds' ratios).", "",
             "| workload | kernels | signatures | logs | " + " | ".join(f"{c} s (x)" for c in cols)
             + " | busy / busy_one_thread by round (median) |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in cols) + " | --- |"]
    for w, r in out["summary"].items():
        cells = [f"{fmt(r['median_s'][c], '')} ({fmt(r['over_busy_one_thread'][c], 'x')})" for c in cols]
        rounds = ", ".join(f"{x:.2f}" for x in r["busy_over_one_thread_by_round"])
        lines.append(f"| {w} | {r['kernels']:,} | {r['signatures']} | {r['logs']:,} | " + " | ".join(cells)
                     + f" | {rounds} (**{fmt(r['busy_over_one_thread_paired'], 'x')}**) |")
    write_section("## Busy host", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
