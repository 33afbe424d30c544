#!/usr/bin/env python3
"""The native in-situ path on the simulator, scored against its truth: what `fingrav run --device sim` measures.

A shared simulated GPU (``fingrav_native.sim.SharedSimGPU``) is recorded with
``PowerRecorder`` while ``fingrav-sim-app`` runs its training-step workload in
another process and reports each execution through the stand-in
rocprofiler-sdk runtime to the real tool library; the launch journal
(``read_launches(...)``) and the capture go through
``fg.profile_trace``. Per kernel signature the table's energy per execution is
FinGraV's energy of the execution of interest over the *golden* executions
(the fullest execution-time bin past the warm-up: paper Section IV-B, steps
5-8), so it is scored against the truth of that same quantity, the mean
exact energy of those golden executions (``SharedSimTruth.score``); the
mean over every execution is reported beside it (clocks parked before a
burst and the over-cap GEMM throttled spread a kernel's durations over
several bins, so the two differ by several percent).

Run:  python bench/sim_app_scoring.py [--seconds 3] [--seeds 0-9] [--workload train-step|gemm-loop]
      [--json bench/results/sim_app_scoring.json]
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


def one_seed(seconds: float, seed: int, workload: str = "train-step") -> list[dict[str, object]]:
    """One capture of ``workload`` on a fresh shared device, scored per kernel."""
    folder = tempfile.mkdtemp(prefix="fingrav-simapp-")
    gpu = SharedSimGPU.create(os.path.join(folder, "gpu.sim"), seed=seed)
    launches = os.path.join(folder, "launches")
    os.mkdir(launches)
    env = dict(os.environ, **gpu.env(), FINGRAV_LAUNCH_DIR=launches, ROCP_TOOL_LIBRARIES=native.tool_library("rocm"))
    with PowerRecorder(gpu) as rec:
        r = subprocess.run([app_path(), "--vendor", "rocm", "--standin", standin_library("rocm"), "--seconds",
                            str(seconds), "--seed", str(seed), "--workload", workload], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"seed {seed}: fingrav-sim-app failed: {r.stderr}")
    log = read_launches(launches)
    # The launch records themselves as the trace: profile_trace maps the capture through their own brackets.
    tp = fg.profile_trace(log, rec.capture)
    a = tp.alignment
    rows = []
    for row in gpu.truth().score(tp):
        d = {name: row[name].item() for name in row.dtype.names}
        d.update(seed=seed, offset_us=a.offset_ns / 1e3 if a else None, offset_half_width_us=a.half_width_ns / 1e3
                 if a else None)
        rows.append(d)
    return rows


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--seeds", default="0-9", help="a seed or a range A-B")
    ap.add_argument("--workload", default="train-step", choices=("train-step", "gemm-loop"))
    ap.add_argument("--json", help="also write the rows and the per-kernel summary here")
    args = ap.parse_args()
    rows = []
    print(f"{'seed':>4s} {'kernel':16s} {'golden':>10s} {'estimate mJ':>18s} {'golden mJ':>10s} {'err':>7s} "
          f"{'all mJ':>10s} {'err':>7s} covered")
    for seed in _seeds(args.seeds):
        for d in one_seed(args.seconds, seed, args.workload):
            rows.append(d)
            print(f"{seed:4d} {d['kernel']:16s} {d['golden']:4d}/{d['executions']:5d} {d['estimate_j'] * 1e3:9.3f}"
                  f"+-{d['half_width_j'] * 1e3:7.3f} {d['truth_golden_j'] * 1e3:10.3f} {d['error']:+7.2%} "
                  f"{d['truth_all_j'] * 1e3:10.3f} {d['error_all']:+7.2%} {d['covered']}", flush=True)
    summary = {}
    print(f"\n{'kernel':16s} {'seeds':>5s} {'mean err':>8s} {'max |err|':>9s} {'median hw':>9s} {'covered':>7s}")
    for name in sorted({str(d["kernel"]) for d in rows}):
        mine = [d for d in rows if d["kernel"] == name]
        err = np.array([d["error"] for d in mine])
        hw = np.array([d["half_width_j"] / d["estimate_j"] for d in mine])
        cov = float(np.mean([d["covered"] for d in mine]))
        summary[name] = {"seeds": len(mine), "mean_error": float(err.mean()), "max_abs_error": float(np.abs(err).max()),
                         "within_3pc": float(np.mean(np.abs(err) <= 0.03)), "median_rel_half_width": float(
                             np.median(hw)), "coverage": cov}
        print(f"{name:16s} {len(mine):5d} {err.mean():+8.2%} {np.abs(err).max():9.2%} {np.median(hw):9.2%} "
              f"{cov:7.0%}")
    if args.json:
        doc = {"seconds": args.seconds, "seeds": args.seeds, "workload": args.workload, "summary": summary,
               "rows": rows}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
        write_readme(doc, os.path.basename(args.json))
    return 0


def write_readme(doc: dict[str, object], name: str) -> None:
    """The per-kernel summary as this workload's section of bench/results/README.md."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from results_readme import write_section

    lines = [f"## Native capture on the simulator: {doc['workload']}", "",
             f"`python bench/sim_app_scoring.py --workload {doc['workload']} --seconds {doc['seconds']:g} --seeds "
             f"{doc['seeds']} --json bench/results/{name}`: `fingrav run --device sim`'s path (PowerRecorder, the "
             "stand-in rocprofiler-sdk, the tool library, `profile_trace` on the launch records), one capture per "
             "seed, each kernel's energy per execution against the mean truth of the golden executions it stands "
             "for (`SharedSimTruth.score`); half-width relative to the estimate; covered: the truth inside the "
             "interval.", "", "| kernel | seeds | mean error | max abs error | within 3 % | median half-width | "
             "covered |", "| --- | --- | --- | --- | --- | --- | --- |"]
    summary = doc["summary"]
    assert isinstance(summary, dict)
    for kernel, v in summary.items():
        lines.append(f"| {kernel} | {v['seeds']} | {v['mean_error']:+.2%} | {v['max_abs_error']:.2%} | "
                     f"{v['within_3pc']:.0%} | {v['median_rel_half_width']:.1%} | {v['coverage']:.0%} |")
    write_section(str(lines[0]), "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
