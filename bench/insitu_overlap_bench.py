#!/usr/bin/env python3
"""A DDP-like loop under an averaging sensor: the share of compute executions the joint fit uses, and its errors.

The simulator's closed-form training loop (``fingrav_native.sim``: five kernels, 400 to 25 us, seven to an
iteration, 1024 iterations) with an all-reduce per iteration on its own stream beside five of the seven
kernels (71 % of the compute executions overlapped), adding 60 W while it runs; logged through a 1 ms
(default) or 5 ms boxcar, 2 W noise; ``fg.profile_trace`` with default options. Per seed: the compute
executions the joint fit used, the communication level it fitted, and each signature's energy against
the simulator's truth (the kernel's own draw, the communication's level not in it).

Run:  python bench/insitu_overlap_bench.py              (seeds 0-4, 1 ms; about a minute on 2 cores)
      python bench/insitu_overlap_bench.py --window-ms 5
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))

import fingrav_native as fg  # noqa: E402
from fingrav_native.sim import (  # noqa: E402
    COMMUNICATION,
    Identity,  # noqa: E402
    logged_loop,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--window-ms", type=float, default=1.0)
    args = ap.parse_args()
    sensor = fg.SensorModel(f"avg-{args.window_ms:g}ms", "window", period_ns=1e6, window_ns=args.window_ms * 1e6)
    worst_long, worst_all = 0.0, 0.0
    for seed in range(args.seeds):
        t0 = time.process_time()
        loop = logged_loop(sensor, seed=seed, iterations=1024, communication_w=60.0)
        kt = loop.trace
        compute = kt.signatures["name"][kt.executions["kernel_id"]] != COMMUNICATION[0]
        tp = fg.profile_trace(kt, loop.samples, Identity(), sensor=sensor, max_power_w=loop.max_power_w)
        used = sum(ep.deconvolution.n_runs for ep in tp.profiles if ep.deconvolution is not None)
        over = int((kt.concurrent() & compute).sum())
        note = next(w for w in tp.warnings if "overlapped a communication kernel" in w)
        level = note.split("additive level of its own, ")[1].split(", over")[0]
        errs = {}
        for r in tp.kernels:
            truth = loop.energy_j[loop.names.index(str(r["name"]))]
            errs[str(r["name"])] = (float(r["energy_j"] / truth - 1), float(r["duration_ns"]))
        worst_long = max([worst_long] + [abs(e) for e, d in errs.values() if d >= 100_000])
        worst_all = max([worst_all] + [abs(e) for e, _ in errs.values()])
        print(f"seed {seed}: {used} of {int(compute.sum())} compute executions used ({100 * used / compute.sum():.1f} %; "
              f"{over} overlapped by the all-reduce), level {level} (truth 60 W); energy errors "
              + ", ".join(f"{n.split('_')[0]} {100 * e:+.2f} %" for n, (e, _) in errs.items())
              + f" [{time.process_time() - t0:.0f} s CPU]", flush=True)
    print(f"worst |error|: kernels of 100 us or more {100 * worst_long:.2f} %, all {100 * worst_all:.2f} %")


if __name__ == "__main__":
    main()
