#!/usr/bin/env python3
"""In-situ profiling: per-kernel energy error against the simulator's truth as iterations grow.

A training loop on the simulated GPU (``fg.app.simulate_training_loop``: one GEMM
name with two grids, a GEMV, host gaps, a data-loading pause every 50
iterations, a cold start, the simulator's slow runs and outliers) is written
as a torch.profiler trace plus the power capture a recorder would save, the
logger stamping in its own firmware clock. ``fg.profile_trace`` reads both; each
signature's energy per execution is compared with the mean true energy of the
golden executions it used. Rows: sensor presets x iterations, seeds 1-3;
the figure is the worst signature's error and each signature's.

The recorder's overhead (its CPU against a thread that only sleeps at the
same rate, and the slowdown of a CPU-bound loop beside it) is measured by
``bench/insitu_overhead.py``; this script runs it once and records its
figures beside the accuracy.

Run:  python bench/insitu_bench.py                  (full: a few minutes on 2 cores)
      python bench/insitu_bench.py --quick --json F (under a minute; writes only F)
Full runs write bench/results/insitu.json, insitu.png and the "## In situ"
section of bench/results/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from typing import Any

import numpy as np

import fingrav_native as fg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_readme import write_section  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
SENSORS = ("instant-1ms", "amd-1ms-average")
LADDER = {True: (300, 1000), False: (300, 1000, 3000, 6000)}


def one(sensor: str, iterations: int, seed: int) -> dict[str, Any]:
    """One loop, recorded and profiled: each signature's error against the truth."""
    loop = fg.app.simulate_training_loop(iterations, seed=seed, sensor=sensor)
    with tempfile.TemporaryDirectory() as d:
        trace, capture = loop.save(d)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resolution warnings are part of what is measured
            tp = fg.profile_trace(trace, fg.load(capture), min_executions=50)
        wall = time.perf_counter() - t0
    sig = {}
    for row, ep in zip(tp.kernels, tp.profiles):
        truth = loop.truth_energy_j(ep.golden.run_ids)
        sig[f"{row['name']} {int(row['grid'][0])}"] = {
            "error": float(row["energy_j"] / truth - 1), "half_width": float(row["energy_half_width_j"] / truth),
            "golden": int(row["golden"]), "count": int(row["count"])}
    return {"sensor": sensor, "iterations": iterations, "seed": seed, "signatures": sig, "profile_s": wall,
            "alignment_us": None if tp.alignment is None else tp.alignment.offset_ns / 1e3,
            "iteration_mj": None if tp.summary is None else 1e3 * tp.summary.energy_j}


def overhead(seconds: float) -> dict[str, Any] | None:
    try:
        from insitu_overhead import run_overhead  # bench/insitu_overhead.py
    except ImportError as exc:  # pragma: no cover - the script sits beside this one
        print(f"insitu_bench: no overhead measurement ({exc})", file=sys.stderr)
        return None
    return dict(run_overhead(seconds, 1_000_000))


def figure(rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(SENSORS), figsize=(5.2 * len(SENSORS), 3.6), layout="constrained", squeeze=False)
    for ax, sensor in zip(axes[0], SENSORS):
        mine = [r for r in rows if r["sensor"] == sensor]
        names = sorted({n for r in mine for n in r["signatures"]})
        for (ls, mk), name in zip([("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")], names):
            its = sorted({r["iterations"] for r in mine})
            err = [np.mean([abs(r["signatures"][name]["error"]) for r in mine
                            if r["iterations"] == i and name in r["signatures"]]) * 100 for i in its]
            ax.plot(its, err, ls, marker=mk, color="black", label=name)
        ax.axhline(3.0, color="0.5", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("iterations")
        ax.set_ylabel("|energy error| (%), mean of seeds")
        ax.set_title(sensor, fontsize="medium")
        ax.legend(fontsize="small")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def readme(out: dict[str, Any]) -> str:
    rows = out["rows"]
    lines = ["## In situ", "",
             "`python bench/insitu_bench.py`: a simulated training loop (gemm 128 = cb-4k-gemm, gemm 32 = "
             "cb-2k-gemm, gemv 64 = mb-4k-gemv; 7 kernels an iteration, host gaps, a 3 ms data-loading pause every 50 "
             "iterations, a cold start) written as a torch.profiler trace plus a power capture whose logger stamps in "
             "its own clock; `fg.profile_trace` per signature, against the mean true energy of the golden executions. "
             f"Seeds {out['meta']['seeds']}; each cell: mean |error| over seeds (worst seed in brackets).", "",
             "| sensor | iterations | " + " | ".join(out["signatures"]) + " | profile s |",
             "| --- | --- | " + " | ".join("---" for _ in out["signatures"]) + " | --- |"]
    for sensor in SENSORS:
        for it in sorted({r["iterations"] for r in rows}):
            mine = [r for r in rows if r["sensor"] == sensor and r["iterations"] == it]
            if not mine:
                continue
            cells = []
            for name in out["signatures"]:
                e = [abs(r["signatures"][name]["error"]) * 100 for r in mine if name in r["signatures"]]
                cells.append(f"{np.mean(e):.2f} % ({max(e):.2f})" if e else "-")
            lines.append(f"| {sensor} | {it} | " + " | ".join(cells) +
                         f" | {np.mean([r['profile_s'] for r in mine]):.1f} |")
    lines += ["", "Reading the rows: with the instantaneous logger every signature is within the 3 % target from a "
              "thousand iterations on (the 37 us GEMV needs them: at 300 iterations it has a few hundred logs). The "
              "logs' offset against the kernels is measured and applied because the firmware clock's one-sided fit "
              "lands on each log's publication (about -26 us found against a true -23.6 us; the power's own lag "
              "behind activity is fitted beside it). The 1 ms averaging sensor is deconvolved over the whole timeline "
              "(`fg.method.fit_timeline`): the 440 us GEMM comes out 7-9 % low and the 75 us GEMM within 9 % (3-6 % on "
              "average), but the 37 us GEMV stays 5-26 % high from a thousand iterations on (-48 to +100 % at 300): the simulated power of a kernel depends on what ran "
              "before it (a 15 us lag, dies that heat within a millisecond), and a 1 ms window cannot tell that "
              "context from the kernel itself. Read those rows as what the sensor cannot resolve.", ""]
    ov = out.get("overhead")
    if ov:
        lo = ov.get("loop", {})
        lines += [f"Recorder overhead at 1 kHz (`bench/insitu_overhead.py`, {ov.get('source')} source, "
                  f"{out['meta']['machine']}): its CPU (sampler + drain threads) {100 * ov['recorder']['cpu_fraction']:.2f} % "
                  f"of a core against {100 * ov['floor']['cpu_fraction']:.2f} % for a thread that only sleeps at the same "
                  f"rate ({ov['floor']['kind']}): **{ov['cpu_ratio']:.2f}x** (target <= 1.3). A CPU-bound loop beside it: "
                  f"median {lo.get('slowdown', float('nan')):.2f}x, fastest runs {lo.get('slowdown_of_fastest', float('nan')):.2f}x "
                  "(this 2-core VM's noise is +-20 %).", ""]
    lines += ["![in situ](insitu.png)", "", f"(run took {out['meta']['wall_s']:.0f} s, {out['meta']['date']}; "
              "simulator only: no GPU was lent to this task)", ""]
    return "\n".join(lines)


def write_results(out: dict[str, Any]) -> None:
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "insitu.json"), "w") as f:
        json.dump(out, f, indent=1)
    figure(out["rows"], os.path.join(RESULTS, "insitu.png"))
    write_section("## In situ", readme(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="two lengths, one seed; writes nothing unless --json")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--overhead-seconds", type=float, default=5.0, help="per condition (0: skip)")
    ap.add_argument("--readme-from", metavar="JSON", help="rewrite the figure and README section from a saved run")
    args = ap.parse_args()
    if args.readme_from:
        with open(args.readme_from) as f:
            write_results(json.load(f))
        return
    t0 = time.perf_counter()
    seeds = (1,) if args.quick else (1, 2, 3)
    rows = []
    for sensor in SENSORS:
        for it in LADDER[args.quick]:
            for seed in seeds:
                r = one(sensor, it, seed)
                rows.append(r)
                print(f"{sensor:16s} {it:5d} it seed {seed}: " + ", ".join(
                    f"{k} {100 * v['error']:+.2f} %" for k, v in r["signatures"].items()), flush=True)
    names = sorted({n for r in rows for n in r["signatures"]})
    out: dict[str, Any] = {
        "meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
                 "machine": platform.machine(), "seeds": list(seeds), "quick": bool(args.quick)},
        "signatures": names, "rows": rows,
        "overhead": overhead(args.overhead_seconds) if args.overhead_seconds > 0 else None}
    out["meta"]["wall_s"] = time.perf_counter() - t0
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if not args.quick:
        write_results(out)
    print(f"done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
