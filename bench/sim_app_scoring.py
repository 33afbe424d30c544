#!/usr/bin/env python3
"""The native in-situ path on the simulator, scored against its truth: what `fingrav run --device sim` measures.

A shared simulated GPU (``fingrav_native.sim.SharedSimGPU``) is recorded with
``PowerRecorder`` while ``fingrav-sim-app`` runs its training-step workload in
another process and reports each execution through the stand-in
rocprofiler-sdk runtime to the real tool library; the launch journal
(``read_launches(...).to_trace()``) and the capture go through
``fg.profile_trace``. Per kernel signature: the estimate with its covering
half-width against (a) the truth's mean over every execution and (b) the
truth's mean over the executions whose duration is within 3 % of the
estimate's (the golden bin the method chose: paper Section IV-A, step 5). A
workload whose executions of one kernel differ in duration (clocks parked
before the first of a burst, the over-cap GEMM throttled) has (a) and (b)
apart; (b) is the like-for-like score.

Run:  python bench/sim_app_scoring.py [--seconds 3] [--seed 1] [--json F]
Needs the package built with its simulator (fingrav-sim-app, the stand-in and the tool library).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import fingrav_native as fg
from fingrav_native import native
from fingrav_native.app import PowerRecorder
from fingrav_native.files import read_launches
from fingrav_native.sim import SharedSimGPU, app_path, standin_library


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="fingrav-simapp-")
    gpu = SharedSimGPU.create(os.path.join(folder, "gpu.sim"), seed=args.seed)
    launches = os.path.join(folder, "launches")
    os.mkdir(launches)
    env = dict(os.environ, **gpu.env(), FINGRAV_LAUNCH_DIR=launches, ROCP_TOOL_LIBRARIES=native.tool_library("rocm"))
    with PowerRecorder(gpu) as rec:
        r = subprocess.run([app_path(), "--vendor", "rocm", "--standin", standin_library("rocm"), "--seconds",
                            str(args.seconds), "--seed", str(args.seed)], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 1
    truth = gpu.truth()
    tp = fg.profile_trace(read_launches(launches).to_trace(), rec.capture)
    ex = truth.executions
    names = ex["kernel"].astype(str)
    dur = (ex["end_ns"] - ex["start_ns"]).astype(np.float64)
    rows = []
    print(f"{'kernel':16s} {'n':>5s} {'golden':>6s} {'estimate mJ':>18s} {'all mJ':>9s} {'err':>7s} "
          f"{'bin mJ':>9s} {'err':>7s} covered")
    for k in tp.kernels:
        sel = names == str(k["name"])
        near = sel & (np.abs(dur - k["duration_ns"]) <= 0.03 * k["duration_ns"])
        all_j = float(ex["energy_j"][sel].mean())
        bin_j = float(ex["energy_j"][near].mean()) if near.any() else float("nan")
        est, hw = float(k["energy_j"]), float(k["energy_half_width_j"])
        row = {"kernel": str(k["name"]), "executions": int(sel.sum()), "golden": int(k["golden"]),
               "estimate_j": est, "half_width_j": hw, "truth_all_j": all_j, "truth_bin_j": bin_j,
               "err_all": est / all_j - 1, "err_bin": est / bin_j - 1, "covered": abs(est - bin_j) <= hw}
        rows.append(row)
        print(f"{row['kernel']:16s} {row['executions']:5d} {row['golden']:6d} {est * 1e3:9.3f}+-{hw * 1e3:7.3f} "
              f"{all_j * 1e3:9.3f} {row['err_all']:+7.2%} {bin_j * 1e3:9.3f} {row['err_bin']:+7.2%} {row['covered']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"seconds": args.seconds, "seed": args.seed, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
