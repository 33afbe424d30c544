#!/usr/bin/env python3
"""Attribution of windowed logs against a known truth: the old point attribution vs deconvolution.

A kernel of 366 us (cb-4k-gemm's SSP execution) with a ramp and a 25 % dip
mid-kernel, 15 executions per run (the last is the execution of interest,
power creeping 60 W over the run), the GPU idle before and cooling after,
logged by a boxcar sensor whose window is 0 to 50 times the kernel, at
random phase, 2 W of noise (the closed-form curve and logger of
``fingrav_native.sim._analytic``, an internal the tests share). For each
ratio both attributions are scored on the same logs:

* ``old``: the paper's step 6 as the package did it before (each log at the
  centre of its window's part inside the execution, value unchanged), then
  stitched (local smoother); scored at the LOIs' positions;
* ``deconv``: ``fg.method.deconvolve``.

Scores: RMSE against the true curve (% of its mean), the dip's depth
(truth 25 %) and position (truth 0.5), the mean-power bias, the
deconvolution's resolution and runtime. Then the named sensor presets at
their own period, and for the NVIDIA part-time sensor (25 ms window every
100 ms) the energy-per-execution error next to Yang et al.'s 4.89 % (SC'24,
their best protocol for whole-workload energy on the same sensor).

Run:  python bench/sensor_bench.py            (~3-6 minutes on 2 cores)
      python bench/sensor_bench.py --quick    (smoke run, writes nothing unless --json)
Writes bench/results/sensor.json, bench/results/sensor.png and the
"## Real sensors" section of bench/results/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from typing import Any

import numpy as np

import fingrav_native as fg

# The closed-form truth (curve, logger, identity clock map) is not public: no face exports it, so the
# bench imports it where the tests do.
from fingrav_native.sim._analytic import DURATION_NS, Identity, logged_runs, shape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_readme import write_section  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
RATIOS = (0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)


def dip_of(f: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Position and relative depth of the curve's minimum against the ramp it sits on."""
    i = int(np.nanargmin(y))
    return float(f[i]), float(1.0 - y[i] / (600.0 + 100.0 * f[i]))


def score_old(samples: np.ndarray, ex: np.ndarray) -> dict[str, float]:
    lois = fg.method.place_logs(samples, ex, Identity(), execution_of_interest=-1, min_overlap=0.0)
    f = lois["toi_frac"]
    truth = shape(f)
    st = fg.method.stitch(lois, x="fraction", bin_width=0.025, channels=("total",), smoother=None)["total"]
    ok = np.isfinite(st.mean)
    pos, depth = dip_of(st.bin_centres[ok], st.mean[ok])
    return {"rmse_pct": 100 * float(np.sqrt(np.mean((lois["total"] - truth) ** 2)) / np.mean(truth)),
            "bias_pct": 100 * float(np.mean(lois["total"]) / np.mean(truth) - 1), "dip_pos": pos, "dip_depth": depth,
            "lois": int(len(lois))}


def score_deconv(samples: np.ndarray, ex: np.ndarray, sensor: fg.SensorModel, runs: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dec = fg.method.deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(runs),
                         channels=("total",), bins=40, bootstrap=50, resolution_ns=10_000)
    wall = time.perf_counter() - t0
    c = dec["total"]
    f = dec.bin_centres
    truth = shape(f)
    pos, depth = dip_of(f, c.curve)
    e_true = float(np.mean(truth)) * DURATION_NS * 1e-9
    return {"rmse_pct": 100 * float(np.sqrt(np.mean((c.curve - truth) ** 2)) / np.mean(truth)),
            "bias_pct": 100 * float(np.mean(c.curve) / np.mean(truth) - 1), "dip_pos": pos, "dip_depth": depth,
            "energy_err_pct": 100 * (c.energy_j / e_true - 1), "energy_half_width_pct": 100 * c.energy_half_width_j / e_true,
            "resolution_us": dec.resolution_ns / 1e3, "edge_logs": dec.edge_logs, "logs": dec.n_logs,
            "band_coverage": float(np.mean((truth >= c.low) & (truth <= c.high))), "wall_s": wall,
            "warnings": list(dec.warnings)}


def sweep(runs: int, ratios: tuple[float, ...], seed: int) -> list[dict[str, Any]]:
    rows = []
    for r in ratios:
        window = r * DURATION_NS
        # The paper's 1 ms period while the window fits in it; a longer window slides (period = 1 ms still).
        sensor = (fg.SensorModel(f"{r:g}x", "instant", period_ns=1e6) if r == 0
                  else fg.SensorModel(f"{r:g}x", "window", period_ns=1e6, window_ns=window))
        samples, ex = logged_runs(runs, sensor, seed=seed)
        row = {"ratio": r, "window_us": window / 1e3, "old": score_old(samples, ex),
               "deconv": score_deconv(samples, ex, sensor, runs)}
        rows.append(row)
        o, d = row["old"], row["deconv"]
        print(f"  window {r:5.1f}x ({window / 1e3:8.0f} us): old RMSE {o['rmse_pct']:5.1f} % bias {o['bias_pct']:+6.1f} %"
              f" dip {o['dip_depth']:.2f} | deconv RMSE {d['rmse_pct']:5.1f} % bias {d['bias_pct']:+5.1f} % "
              f"dip {d['dip_depth']:.2f}@{d['dip_pos']:.2f} res {d['resolution_us']:5.0f} us ({d['wall_s']:.1f} s)",
              flush=True)
    return rows


def presets(runs_by_preset: dict[str, int], seed: int) -> list[dict[str, Any]]:
    rows = []
    for name, runs in runs_by_preset.items():
        sensor = fg.sensor_preset(name)
        if sensor.kind == "counter":  # differences of reads are exact boxcar windows of one period
            sensor = fg.SensorModel(name, "window", period_ns=sensor.period_ns, window_ns=sensor.period_ns)
        samples, ex = logged_runs(runs, sensor, seed=seed)
        row: dict[str, Any] = {"name": name, "runs": runs, "period_ms": sensor.period_ns / 1e6,
                               "window_ms": sensor.window_ns / 1e6}
        try:
            row["deconv"] = score_deconv(samples, ex, sensor, runs)
        except ValueError as exc:
            row["deconv"] = {"error": str(exc)}
        try:
            row["old"] = score_old(samples, ex)
        except ValueError as exc:
            row["old"] = {"error": str(exc)}
        rows.append(row)
        d = row["deconv"]
        print(f"  {name:24s} {runs:5d} runs: " + (f"RMSE {d['rmse_pct']:5.1f} % bias {d['bias_pct']:+5.1f} % "
              f"energy {d['energy_err_pct']:+5.1f} % (+-{d['energy_half_width_pct']:.1f}) res {d['resolution_us']:.0f} us"
              if "error" not in d else d["error"][:100]), flush=True)
    return rows


def figure(rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    x = [max(r["ratio"], 0.03) for r in rows]
    for key, label in (("old", "point attribution (before)"), ("deconv", "deconvolution")):
        axes[0].plot(x, [r[key]["rmse_pct"] for r in rows], "o-", label=label)
        axes[1].plot(x, [r[key]["bias_pct"] for r in rows], "o-", label=label)
    for ax, yl in zip(axes, ("RMSE vs truth (% of mean)", "mean-power bias (%)")):
        ax.set_xscale("log")
        ax.set_xlabel("window / kernel duration (0 plotted at 0.03)")
        ax.set_ylabel(yl)
        ax.grid(alpha=0.3)
    axes[1].axhline(0, color="k", lw=0.5)
    axes[0].legend(frameon=False)
    fig.suptitle("366 us kernel with a 25 % dip, 1 ms period, 400 runs")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs and ratios; writes nothing unless --json")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    runs = 150 if args.quick else 400
    ratios = (0.0, 1.0, 10.0) if args.quick else RATIOS
    print(f"window sweep, {runs} runs per point:")
    rows = sweep(runs, ratios, args.seed)
    per_preset = ({"instant-1ms": 150, "amd-1ms-average": 150, "part-time-100ms": 300} if args.quick else
                  {"instant-1ms": 400, "amd-1ms-average": 400, "amd-energy-accumulator": 400,
                   "part-time-100ms": 4000, "nvidia-energy-counter": 4000})
    print("sensor presets:")
    pre = presets(per_preset, args.seed)
    out = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
                    "machine": platform.machine(), "runs": runs, "kernel_us": DURATION_NS / 1e3, "dip": 0.25,
                    "noise_w": 2.0, "wall_s": time.perf_counter() - t0},
           "sweep": rows, "presets": pre,
           "yang_et_al_energy_error_pct": 4.89}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if args.quick and not args.json:
        return
    if not args.quick:
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, "sensor.json"), "w") as f:
            json.dump(out, f, indent=1)
        figure(rows, os.path.join(RESULTS, "sensor.png"))
        write_section("## Real sensors", readme(out))
    print(f"done in {time.perf_counter() - t0:.0f} s")


def readme(out: dict[str, Any]) -> str:
    lines = ["## Real sensors", "",
             "`python bench/sensor_bench.py`: a 366 us kernel with a 25 % mid-kernel dip, "
             f"{out['meta']['runs']} runs of 15 executions (the last is the execution of interest), logged by a "
             "boxcar sensor at random phase with 2 W noise (closed-form truth). "
             "`old` is the point attribution the package used before (a log at its window's centre, value "
             "unchanged); `deconv` is `fg.method.deconvolve`. RMSE and bias in % of the true mean; dip depth truth "
             "0.25 at 0.5.", "",
             "| window / kernel | old RMSE | old bias | old dip | deconv RMSE | deconv bias | deconv dip (pos) | "
             "resolution | band coverage |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in out["sweep"]:
        o, d = r["old"], r["deconv"]
        lines.append(f"| {r['ratio']:g}x | {o['rmse_pct']:.1f} % | {o['bias_pct']:+.1f} % | {o['dip_depth']:.2f} | "
                     f"{d['rmse_pct']:.1f} % | {d['bias_pct']:+.1f} % | {d['dip_depth']:.2f} ({d['dip_pos']:.2f}) | "
                     f"{d['resolution_us']:.0f} us | {100 * d['band_coverage']:.0f} % |")
    lines += ["", "Presets at their own period (`fg.sensors.SENSOR_PRESETS`; counters as exact windows of one "
              "period):", "", "| sensor | runs | deconv RMSE | bias | energy error (95 % half-width) | resolution |",
              "| --- | --- | --- | --- | --- | --- |"]
    for p in out["presets"]:
        d = p["deconv"]
        if "error" in d:
            lines.append(f"| {p['name']} | {p['runs']} | refused: {d['error'][:90]}... | | | |")
        else:
            lines.append(f"| {p['name']} | {p['runs']} | {d['rmse_pct']:.1f} % | {d['bias_pct']:+.1f} % | "
                         f"{d['energy_err_pct']:+.1f} % ({d['energy_half_width_pct']:.1f} %) | "
                         f"{d['resolution_us']:.0f} us |")
    lines += ["", f"Yang et al. (SC'24) report {out['yang_et_al_energy_error_pct']} % energy error for their best "
              "protocol on NVIDIA's part-time sensor (whole workloads); the `part-time-100ms` row is the energy of one "
              "366 us execution from the same kind of sensor.", "",
              f"![sweep](sensor.png)  (run took {out['meta']['wall_s']:.0f} s on {out['meta']['machine']}, "
              f"{out['meta']['date']})", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
