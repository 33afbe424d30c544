#!/usr/bin/env python3
"""Random against steered launch phase: runs needed for the same accuracy, on the sim's sensors.

For each sensor preset, cb-4k-gemm's SSP profile (64 executions per run, the
last is the execution of interest; the SSP search is skipped so that both
protocols profile the same execution) is measured with ``fg.profile(phase=
"random")`` (the paper's protocol, Section IV-A) and ``phase="steered"``
(sequential equivalent-time sampling, ``fg.method.PhaseSteerer``) at
a ladder of run counts and several seeds, and scored against the simulator's
truth (RMSE of the stitched or deconvolved curve, % of the true mean).

``random_runs`` is the largest rung of the ladder; the target RMSE is what
random phase reaches there (mean over seeds); ``steered_runs`` is where the
steered protocol's mean RMSE first reaches that target (log-log
interpolation between rungs; the smallest rung if it is already below).
``runs_ratio = random_runs / steered_runs``. Wall-clock time is that of the
campaigns at the largest rung (virtual time: the simulator's compute, not
the device's; a real device adds the waits, listed as ``*_device_s``, the
virtual seconds the campaign spanned).

Also measured here: how precisely the C++ release (``wait_until`` of
``fg.backends.HostRelease``, the sleep-then-spin every live backend releases
its launches with) hits a host-time target on this machine (the live path's
precision).

Run:  python bench/phase_bench.py                    (full: ~5-10 minutes on 2 cores)
      python bench/phase_bench.py --quick --json F   (under two minutes; writes only F)
Full runs write bench/results/phase.json, bench/results/phase.png and the
"## Phase steering" section of bench/results/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from typing import Any

import numpy as np

import fingrav_native as fg
import fingrav_native.native  # fg.native.host_time_ns

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_readme import write_section  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
KERNEL = "cb-4k-gemm"
EXECUTIONS = 64

#: Run ladders per sensor: (quick, full). Random phase on the part-time sensor hits the execution in well
#: under 1 % of runs, so its ladder is longer.
LADDERS = {
    "instant-1ms": ((10, 20, 40, 80), (10, 14, 20, 28, 40, 57, 80, 113, 160)),
    "amd-1ms-average": ((10, 20, 40), (10, 14, 20, 28, 40, 57, 80, 113, 160)),
    "part-time-100ms": ((10, 20, 40, 200), (10, 20, 40, 80, 160, 400)),
}


def score(p: Any, backend: fg.backends.SimBackend) -> dict[str, float]:
    """SSP profile against the sim's truth: RMSE and bias (fractions of the true mean), edges inside."""
    ep = p.profiles["ssp"]
    ch = next(c for c in ep.stitched.channels if c.name == "total")
    ex = backend.gpu.executions()
    centres = np.asarray(ch.bin_centres, dtype=np.float64)
    bw = float(np.median(np.diff(centres))) if len(centres) > 1 else 1e4
    offs = np.linspace(-bw / 2, bw / 2, 9)
    vals = []
    for r in ep.golden.run_ids if ep.golden.run_ids is not None else []:
        e = ex[(ex["run"] == r) & (ex["index"] == ep.execution_index)]
        if len(e) == 0:
            continue
        t = (e["start_ns"][0] + centres[:, None] + offs[None, :]).astype(np.int64)
        vals.append(backend.gpu.truth_power(t.ravel())[:, 0].reshape(t.shape).mean(axis=1))
    truth = np.nanmean(vals, axis=0)
    # The profile a user reads: the smooth fit through the LOIs where there is one (at the bin centres; it
    # holds its end values beyond the outermost LOIs), else the bin means.
    if ch.fit_y is not None and ch.fit_x is not None and np.isfinite(ch.fit_y).sum() >= 2:
        fx, fy = np.asarray(ch.fit_x, dtype=np.float64), np.asarray(ch.fit_y, dtype=np.float64)
        good = np.isfinite(fx) & np.isfinite(fy)
        order = np.argsort(fx[good])
        est = np.interp(centres, fx[good][order], fy[good][order])
    else:
        est = np.asarray(ch.mean, dtype=np.float64)
    ok = np.isfinite(est) & np.isfinite(truth)
    if not ok.any():
        return {"rmse": float("nan"), "bias": float("nan")}
    # Bins the profile could not fill count as wrong by the whole true value (an empty bin is no estimate).
    err = np.where(ok, est - truth, truth)
    return {"rmse": float(np.sqrt(np.mean(err[np.isfinite(err)] ** 2)) / np.nanmean(truth)),
            "bias": float(np.mean(est[ok]) / np.mean(truth[ok]) - 1), "empty_bins": int((~ok).sum())}


def campaign(sensor: str, phase: str, runs: int, seed: int) -> dict[str, Any]:
    b = fg.backends.SimBackend(seed=seed, sensor=sensor)
    t0 = time.perf_counter()
    v0 = b.gpu.now()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.SensorResolutionWarning)
        try:
            p = fg.profile(KERNEL, b, mode="ssp", runs=runs, executions=EXECUTIONS, top_up=False, phase=phase,
                           seed=seed)
        except ValueError as exc:  # too few logs in the execution to profile at all
            return {"rmse": float("nan"), "bias": float("nan"), "error": str(exc)[:200],
                    "wall_s": time.perf_counter() - t0, "device_s": (b.gpu.now() - v0) / 1e9}
    s = score(p, b)
    ph = p.settings["phase"]
    s.update(wall_s=time.perf_counter() - t0, device_s=(b.gpu.now() - v0) / 1e9, lois=int(len(p.profiles["ssp"].lois)),
             used=ph.get("used"), inside_rate=ph.get("steered_inside_rate") or ph.get("random_inside_rate"))
    return s


def runs_to_reach(ladder: tuple[int, ...], rmse: list[float], target: float) -> float:
    """Runs where the RMSE-against-runs curve first reaches ``target`` (log-log interpolation)."""
    r = np.asarray(ladder, dtype=np.float64)
    e = np.asarray(rmse, dtype=np.float64)
    for i in range(len(r)):
        if np.isfinite(e[i]) and e[i] <= target:
            if i == 0 or not np.isfinite(e[i - 1]) or e[i - 1] <= e[i]:
                return float(r[i])
            f = (math.log(e[i - 1]) - math.log(target)) / (math.log(e[i - 1]) - math.log(e[i]))
            return float(math.exp(math.log(r[i - 1]) + f * (math.log(r[i]) - math.log(r[i - 1]))))
    return float("inf")


def sensor_row(sensor: str, ladder: tuple[int, ...], seeds: tuple[int, ...]) -> dict[str, Any]:
    curves: dict[str, list[dict[str, Any]]] = {}
    for phase in ("random", "steered"):
        curves[phase] = []
        for runs in ladder:
            cs = [campaign(sensor, phase, runs, s) for s in seeds]
            rm = [c["rmse"] for c in cs]
            curves[phase].append({
                "runs": runs, "rmse": float(np.mean(rm)) if np.isfinite(rm).all() else float("nan"),
                "rmse_seeds": rm, "bias": float(np.nanmean([c["bias"] for c in cs])),
                "lois": float(np.mean([c.get("lois", 0) for c in cs])),
                "inside_rate": float(np.mean([c.get("inside_rate") or 0.0 for c in cs])),
                "wall_s": float(np.mean([c["wall_s"] for c in cs])),
                "device_s": float(np.mean([c["device_s"] for c in cs])),
                "used": sorted({str(c.get("used")) for c in cs}),
            })
            print(f"  {sensor:16s} {phase:8s} {runs:4d} runs: RMSE {100 * curves[phase][-1]['rmse']:6.2f} %  "
                  f"LOIs {curves[phase][-1]['lois']:6.1f}  ({curves[phase][-1]['wall_s']:.1f} s)", flush=True)
    rand, steer = curves["random"], curves["steered"]
    target = rand[-1]["rmse"]
    random_runs = float(ladder[-1])
    steered_runs = runs_to_reach(ladder, [c["rmse"] for c in steer], target) if np.isfinite(target) else float("nan")
    return {
        "name": sensor,
        "random_runs": random_runs,
        "steered_runs": steered_runs,
        "runs_ratio": random_runs / steered_runs if steered_runs and np.isfinite(steered_runs) else float("nan"),
        "random_rmse": target,
        "steered_rmse": steer[-1]["rmse"],
        "random_wall_s": rand[-1]["wall_s"],
        "steered_wall_s": steer[-1]["wall_s"],
        "random_device_s": rand[-1]["device_s"],
        "steered_device_s": steer[-1]["device_s"],
        "curves": curves,
    }


def release_precision(trials: int = 400) -> dict[str, float]:
    """How late ``HostRelease.wait_until`` wakes past a target 0.3-3 ms ahead, on this host (the live release)."""
    rng = np.random.default_rng(0)
    release = fg.backends.HostRelease()
    late = []
    for _ in range(trials):
        target = fg.native.host_time_ns() + int(rng.integers(300_000, 3_000_000))
        late.append(release.wait_until(target) - target)
    a = np.asarray(late, dtype=np.float64)
    return {"trials": trials, "median_ns": float(np.median(a)), "p90_ns": float(np.percentile(a, 90)),
            "p99_ns": float(np.percentile(a, 99)), "max_ns": float(a.max()),
            "within_10us": float(np.mean(a < 10_000))}


def figure(rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 3.8), squeeze=False)
    for ax, row in zip(axes[0], rows):
        for phase, style in (("random", "o--"), ("steered", "s-")):
            c = row["curves"][phase]
            ax.plot([x["runs"] for x in c], [100 * x["rmse"] for x in c], style, label=phase)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("runs")
        ax.set_ylabel("RMSE vs truth (% of mean)")
        ratio = row["runs_ratio"]
        ax.set_title(f"{row['name']}: " + (f"{ratio:.1f}x fewer runs" if np.isfinite(ratio) else "no gain"))
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def coverage_figure(path: str, sensor: str = "instant-1ms", runs: int = 80) -> None:
    """Where the logs of interest landed in the execution, both protocols, same runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for phase in ("random", "steered"):
        p = fg.profile(KERNEL, fg.backends.SimBackend(seed=1, sensor=sensor), mode="ssp", runs=runs,
                       executions=EXECUTIONS, top_up=False, phase=phase)
        lois = p.profiles["ssp"].lois
        ax.hist(np.asarray(lois["toi_ns"]) / 1e3, bins=34, histtype="step", lw=1.5,
                label=f"{phase}: {len(lois)} LOIs")
    ax.set_xlabel("time of interest in the execution (us)")
    ax.set_ylabel("logs of interest per bin")
    ax.set_title(f"{sensor}, {runs} runs of {EXECUTIONS} executions")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def readme(out: dict[str, Any]) -> str:
    rel = out["release"]
    lines = ["## Phase steering", "",
             "`python bench/phase_bench.py`: cb-4k-gemm's SSP profile (64 executions per run, the last "
             "is the execution of interest) at random phase (the paper) and steered (equivalent-time sampling, "
             f"`fg.method.PhaseSteerer`), {len(out['meta']['seeds'])} seeds per point, scored against the "
             "simulator's truth. "
             "`random_runs` is the largest rung; `steered_runs` is where steering reaches the RMSE random phase has "
             "there. Wall time is the simulator's compute for the largest rung; device seconds are the virtual "
             "time the campaign spanned (what a real GPU would take).", "",
             "| sensor | random runs | steered runs | ratio | random RMSE (seeds) | steered RMSE, same runs (seeds) | "
             "LOIs random / steered | wall s random / steered | device s random / steered |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def seeds(c: dict[str, Any]) -> str:
        return ", ".join(f"{100 * x:.1f}" for x in c["rmse_seeds"])

    for r in out["sensors"]:
        cr, cs = r["curves"]["random"][-1], r["curves"]["steered"][-1]
        reached = bool(np.isfinite(r["steered_runs"]))
        steered_runs = f"{r['steered_runs']:.1f}" if reached else "not reached"
        ratio = f"{r['runs_ratio']:.1f}x" if reached else "-"
        lines.append(f"| {r['name']} | {r['random_runs']:.0f} | {steered_runs} | {ratio} | "
                     f"{100 * r['random_rmse']:.2f} % ({seeds(cr)}) | {100 * r['steered_rmse']:.2f} % ({seeds(cs)}) | "
                     f"{cr['lois']:.0f} / {cs['lois']:.0f} | {r['random_wall_s']:.1f} / {r['steered_wall_s']:.1f} | "
                     f"{r['random_device_s']:.1f} / {r['steered_device_s']:.1f} |")
    lines += ["", "Reading the rows: `instant-1ms` gains from aiming (the launch offset to the 64th execution spreads by "
              "about 100 us, from the first execution's clock ramp, so aims are distributions, not bins). "
              "`amd-1ms-average` on this kernel is the sinc-zero case (the 1 ms window spans 2.98 executions of "
              "335 us, so windows inside the run carry no shape): steering uses quasi-random phases there, and the "
              "two protocols are within their seeds' spread; neither resolves the shape (`fg.SensorResolutionWarning`). "
              "`part-time-100ms`: random phase reaches the execution in under 1 % of runs and its profile is "
              "meaningless at any rung; steered runs aim a window edge into the execution in about half the runs, "
              "but 25 ms windows over a 335 us kernel stay coarse (the profile says so).",
              "", "Release precision of the live release (`HostRelease.wait_until`, C++ sleep-then-spin) on this "
              f"host ({out['meta']['machine']}, "
              f"{rel['trials']} targets 0.3-3 ms ahead): median {rel['median_ns']:.0f} ns late, p99 "
              f"{rel['p99_ns'] / 1e3:.1f} us, max {rel['max_ns'] / 1e3:.1f} us; {100 * rel['within_10us']:.1f} % "
              "within 10 us. Not measured on a GPU host (none was lent to this task).", "",
              "![runs](phase.png) ![coverage](phase_coverage.png)", "",
              f"(run took {out['meta']['wall_s']:.0f} s, {out['meta']['date']})", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short ladders, two seeds; writes nothing unless --json")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--sensors", default=",".join(LADDERS), help="comma-separated presets")
    ap.add_argument("--readme-from", metavar="JSON", help="rewrite the figures and README section from a saved run")
    args = ap.parse_args()
    if args.readme_from:
        with open(args.readme_from) as f:
            write_results(json.load(f))
        return
    t0 = time.perf_counter()
    seeds = (1, 2) if args.quick else (1, 2, 3)
    rows = []
    for name in args.sensors.split(","):
        if name not in LADDERS:
            raise SystemExit(f"--sensors: {name!r} is not one of {sorted(LADDERS)}")
        rows.append(sensor_row(name, LADDERS[name][0 if args.quick else 1], seeds))
    out = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "python": platform.python_version(), "machine": platform.machine(), "kernel": KERNEL,
                    "executions": EXECUTIONS, "seeds": list(seeds), "quick": bool(args.quick)},
           "release": release_precision(100 if args.quick else 400),
           "sensors": rows}
    out["meta"]["wall_s"] = time.perf_counter() - t0
    for r in rows:
        print(f"{r['name']:16s} random {r['random_runs']:.0f} runs -> {100 * r['random_rmse']:.2f} %, steered "
              f"{r['steered_runs']:.1f} runs: {r['runs_ratio']:.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, allow_nan=True)
    if not args.quick:
        write_results(out)
    print(f"done in {time.perf_counter() - t0:.0f} s")


def write_results(out: dict[str, Any]) -> None:
    """phase.json, the figures and the README section (also from a saved JSON: ``--readme-from``)."""
    rows = out["sensors"]
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "phase.json")
    if not os.path.exists(path) or os.path.abspath(path) != os.path.abspath(out.get("_path", "")):
        with open(path, "w") as f:
            json.dump({k: v for k, v in out.items() if k != "_path"}, f, indent=1)
    figure(rows, os.path.join(RESULTS, "phase.png"))
    coverage_figure(os.path.join(RESULTS, "phase_coverage.png"))
    write_section("## Phase steering", readme(out))


if __name__ == "__main__":
    main()
