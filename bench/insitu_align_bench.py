#!/usr/bin/env python3
"""What measuring the logs' offset costs inside ``profile_trace``, as the trace grows.

``profile_trace(align="auto")`` measures the logs' offset against the
kernels (``fg.insitu.align_logs_to_trace``) before attributing them; with
``align=False`` it does not. A measurement whose cost grows with the
signatures (dense least squares over every signature's column, a thousand
of them per call) makes the default about 1,000x slower than
``align=False`` on a real 19k-kernel trace. This bench times both in the
same run, on two loops:

* ``loop``: the simulator's training loop (``fingrav_native.sim.logged_loop``,
  instant 1 ms logs, five signatures, seven kernels per iteration);
* ``many``: the issue's shape, a trace of 300 signatures (Zipf popularity,
  5-300 us kernels, 2-10 us launch gaps, a level per signature, a first-order
  power lag of 10 us), 1 kHz instantaneous logs, the trace 20 us off the logs
  (the truth the alignment should find).

Rows: 10^4 and 10^5 kernels of each; per row the wall time of
``profile_trace`` default and ``align=False`` (best of ``--repeat``), their
ratio, the aligner's own time on the same logs and kernels, and the offset
found against the truth. ``--million`` adds 10^6 kernels of ``many``, written
as a Kineto trace: the time to read it beside ``profile_trace``'s (the
target: the default no slower than reading the trace).

Run:  python bench/insitu_align_bench.py             (about two minutes on 2 cores)
      python bench/insitu_align_bench.py --million   (adds 10^6 kernels: several minutes, ~6 GB)
      python bench/insitu_align_bench.py --quick --json F   (10^4 only; writes only F)
Writes bench/results/insitu_align.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from typing import Any, Callable

import numpy as np

import fingrav_native as fg
from fingrav_native.insitu import KernelTrace, align_logs_to_trace

# The closed-form truth (loop, logger, identity clock map) is not public: the bench imports it where the tests do.
from fingrav_native.records import make_executions
from fingrav_native.sim import ANALYTIC_LOG_DTYPE, SEQUENCE, EpochIdentity, Identity, logged_loop

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
#: The trace's clock against the logs' in the ``many`` case (the logs are placed this far late).
TRUE_OFFSET_NS = -20_000.0


def many_signatures(n_kernels: int, *, signatures: int = 300, seed: int = 0, lag_ns: float = 10_000.0,
                    period_ns: float = 1e6, noise_w: float = 3.0) -> tuple[KernelTrace, np.ndarray]:
    """The issue's shape: many signatures, instantaneous logs through a first-order lag, stamped 20 us late."""
    rng = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, signatures + 1)
    sig = rng.choice(signatures, n_kernels, p=pop / pop.sum())
    dur = np.exp(rng.uniform(np.log(5e3), np.log(300e3), signatures))[sig] * (1 + 0.01 * rng.standard_normal(n_kernels))
    level = rng.uniform(250.0, 600.0, signatures)[sig] - 180.0  # above the 180 W between kernels
    s = 1e6 + np.concatenate([[0.0], np.cumsum(dur + rng.uniform(2e3, 10e3, n_kernels))[:-1]])
    e = s + dur
    t = np.arange(s[0] - 5e5, e[-1] + 5e5, period_ns) + rng.uniform(0, period_ns)
    # The lagged power in closed form: each kernel adds level * (exp(-(t - min(e, t)) / lag) - exp(-(t - s) / lag))
    # for the kernels begun by t, back to 40 lags.
    lo = np.searchsorted(e, t - 40 * lag_ns)
    hi = np.searchsorted(s, t, side="right")
    cnt = hi - lo
    rows = np.repeat(np.arange(len(t)), cnt)
    k = np.repeat(lo, cnt) + np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    tt = t[rows]
    w = np.exp(-(tt - np.minimum(e[k], tt)) / lag_ns) - np.exp(-(tt - s[k]) / lag_ns)
    y = 180.0 + np.bincount(rows, weights=level[k] * w, minlength=len(t)) + noise_w * rng.standard_normal(len(t))
    samples = np.zeros(len(t), dtype=ANALYTIC_LOG_DTYPE)
    samples["source_ts"] = np.rint(t - TRUE_OFFSET_NS).astype(np.int64)
    samples["total"] = y
    ex = make_executions(np.arange(n_kernels), np.zeros(n_kernels, dtype=int), sig, s, e)
    return KernelTrace.from_executions(ex, [f"kernel_{i}" for i in sig]), samples


def sim_loop(n_kernels: int) -> tuple[KernelTrace, np.ndarray]:
    """The simulator's training loop with instant 1 ms logs, ``n_kernels`` kernels (seven per iteration)."""
    loop = logged_loop(fg.sensors.sensor_preset("instant-1ms"), seed=0, iterations=max(n_kernels // len(SEQUENCE), 2))
    return loop.trace, loop.samples


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return float(best), out


def row(case: str, n_kernels: int, repeat: int) -> dict[str, Any]:
    """One trace: profile_trace default and align=False, the aligner alone, the offset found."""
    t0 = time.perf_counter()
    kt, samples = sim_loop(n_kernels) if case == "loop" else many_signatures(n_kernels)
    gen = time.perf_counter() - t0
    ex = kt.executions
    t_logs = samples["source_ts"].astype(np.float64) - kt.origin_ns
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        off_s, _ = _best(lambda: fg.profile_trace(kt, samples, Identity(), align=False), repeat)
        auto_s, tp = _best(lambda: fg.profile_trace(kt, samples, Identity()), repeat)
    alone = ~kt.concurrent()
    align_s, a = _best(lambda: align_logs_to_trace(t_logs, samples["total"], ex["start_ns"][alone], ex["end_ns"][alone],
                                                   ex["kernel_id"][alone]), repeat)
    out = {"case": case, "kernels": int(len(ex)), "signatures": int(len(kt.signatures)), "logs": int(len(samples)),
           "generate_s": gen, "profile_default_s": auto_s, "profile_align_false_s": off_s,
           "ratio_default_over_false": auto_s / off_s, "align_s": align_s,
           "offset_us": a.offset_ns / 1e3, "interval_us": [a.low_ns / 1e3, a.high_ns / 1e3], "lag_us": a.lag_ns / 1e3,
           "columns": a.columns, "pooled": a.pooled, "true_offset_us": TRUE_OFFSET_NS / 1e3 if case == "many" else None,
           "reported": tp.alignment is not None}
    print(f"  {case:5s} {out['kernels']:8d} kernels {out['signatures']:4d} sigs {out['logs']:6d} logs: default "
          f"{auto_s:7.2f} s, align=False {off_s:7.2f} s, ratio {auto_s / off_s:5.2f}; aligner {align_s:6.2f} s; offset "
          f"{a.offset_ns / 1e3:+.1f} us [{a.low_ns / 1e3:+.1f}, {a.high_ns / 1e3:+.1f}], lag {a.lag_ns / 1e3:.0f} us, "
          f"{a.columns} columns, {a.pooled} pooled", flush=True)
    return out


def million(repeat: int) -> dict[str, Any]:
    """10^6 kernels of ``many`` as a Kineto trace: reading it, then profile_trace default and align=False."""
    kt, samples = many_signatures(1_000_000)
    ex = kt.executions
    base = 1_763_900_000_000_000_000
    sig = kt.signatures[ex["kernel_id"]]
    with tempfile.TemporaryDirectory() as d:
        path = fg.files.write_kineto_trace(
            os.path.join(d, "t.json.gz"), [str(x) for x in sig["name"]], [(1, 1, 1)] * len(ex), [(1, 1, 1)] * len(ex),
            ex["start_ns"].astype(np.int64) + kt.origin_ns + base, ex["end_ns"].astype(np.int64) + kt.origin_ns + base,
            base_time_ns=base)
        read_s, trace = _best(lambda: fg.files.read_kineto_trace(path), 1)
    samples["source_ts"] += base
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        off_s, _ = _best(lambda: fg.profile_trace(trace, samples, EpochIdentity(), align=False), repeat)
        auto_s, tp = _best(lambda: fg.profile_trace(trace, samples, EpochIdentity()), repeat)
    a = tp.alignment
    out = {"case": "many", "kernels": int(len(ex)), "logs": int(len(samples)), "read_trace_s": read_s,
           "profile_default_s": auto_s, "profile_align_false_s": off_s, "ratio_default_over_false": auto_s / off_s,
           "default_over_read": auto_s / read_s, "offset_us": None if a is None else a.offset_ns / 1e3}
    print(f"  10^6 kernels: read {read_s:.1f} s, default {auto_s:.1f} s, align=False {off_s:.1f} s "
          f"(default / read {auto_s / read_s:.2f})", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10^4 kernels only")
    ap.add_argument("--million", action="store_true", help="add 10^6 kernels (read time against profile time)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many timings (default 3)")
    ap.add_argument("--json", help="write here instead of bench/results/insitu_align.json")
    args = ap.parse_args()
    sizes = (10_000,) if args.quick else (10_000, 100_000)
    rows = [row(case, n, args.repeat if n <= 10_000 else 1) for n in sizes for case in ("loop", "many")]
    out: dict[str, Any] = {
        "bench": "insitu_align", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=HERE).stdout.strip(),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs allowed, load average "
                   f"{os.getloadavg()[0]:.2f} at the end (shared box: absolute figures are noisy, ratios less so)",
        "threads": os.environ.get("OPENBLAS_NUM_THREADS", "unset"), "rows": rows}
    if args.million:
        out["million"] = million(1)
    path = args.json or (None if args.quick else os.path.join(RESULTS, "insitu_align.json"))
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
