#!/usr/bin/env python3
"""Clock-sync benchmark (issue 4): event placement error on host time, against baselines and the floor.

One simulated campaign (``SimGPU`` in virtual time, ground truth known) of
``--minutes`` (default 10) with 2 us reads (300 ns mean jitter), 0.2 % of
reads delayed by ~50 us, a 20 ppm skew that wanders (0.5 ppm, 90 s period)
and a read asymmetry of 0.55 (the device samples 55 % of the way through a
read: invisible to any calibration, so ``|0.55 - 0.5| x min round trip`` =
100 ns is the floor). During the campaign the host reads the device clock
the way each method needs:

1. **no sync**: the first read of the campaign, its ``host_before`` paired
   with its ticks, nominal tick length (no latency compensation, no skew);
2. **best of N**: the tightest of ``--start-reads`` (100) bracketed reads at
   the start, its midpoint, nominal tick length (what several profilers do);
3. **two-point (ROCr-style)**: one clock pair every 1/16 s (ROCr's
   ``GpuAgent::TranslateTime`` resyncs at 16 Hz; KFD's get-clock-counters
   takes the host time right after reading the GPU counter, so the pair is
   ``(ticks, host_after)``), linear interpolation between consecutive pairs;
   3m is the same with each pair's bracket midpoint (latency-compensated);
4. **ours**: a burst of ``--burst`` (32) bracketed reads every
   ``--burst-ms`` (250 ms), fitted afterwards with
   ``fit_piecewise_clock_map`` (1 s knots); 4s is a single
   ``fit_clock_map`` over the whole campaign (shows why the skew's wander
   needs the piecewise fit).

Events: ``--events`` device-tick timestamps at random host times across the
campaign (plus the same number in its last second: "the 10-minute mark"),
each mapped to host time by every method and compared with the truth
``SimGPU.host_at_device_ticks``. Reported: median, p99 and max absolute
error, error at the end, ours against the floor, and how often our reported
error bound covers the true error. Then the read latency (``read_rtt_ns``,
jitter scaled with it) and the skew (``device_skew_ppm``) are swept on
shorter campaigns (``--sweep-minutes``) and plotted.

Usage::

    python bench/clock_sync_bench.py              # bench/results/clock_sync.json, PNGs, README section
    python bench/clock_sync_bench.py --quick      # 1-minute smoke run, nothing written
    python bench/clock_sync_bench.py --no-readme  # JSON and PNGs only

Virtual time is deterministic: the same seed gives the same figures on any
machine (only the wall times differ).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fingrav_native import clocks as clocksync
from fingrav_native.sim import SimGPU

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_readme import write_section  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SECTION = "## Clock sync"

TICK_NS = 10.0
ROCR_SYNC_NS = 62_500_000  # 1/16 s
BASE_PARAMS: dict[str, float] = {
    "read_rtt_ns": 2000.0,
    "read_jitter_ns": 300.0,
    "read_outlier_prob": 0.002,
    "read_outlier_ns": 50_000.0,
    "read_asymmetry": 0.55,
    "device_skew_ppm": 20.0,
    "device_wander_ppm": 0.5,
    "device_wander_period_ns": 90e9,
    "device_tick_ns": TICK_NS,
    "record_truth": 0.0,
}

METHODS = {
    "no_sync": "1 no sync (first read, host_before, nominal tick)",
    "best_of_n": "2 best of N at start (midpoint, nominal tick)",
    "two_point": "3 two-point at 16 Hz, (ticks, host_after) pairs (ROCr-style)",
    "two_point_mid": "3m two-point at 16 Hz, bracket midpoints",
    "ours_single": "4s ours, one fit_clock_map over the campaign",
    "ours": "4 ours: bursts + fit_piecewise_clock_map",
}


# --------------------------------------------------------------------------- campaign


def run_campaign(
    params: dict[str, float], *, minutes: float, seed: int, start_reads: int, burst: int, burst_ms: float
) -> dict[str, Any]:
    """Record every method's reads during one virtual campaign."""
    gpu = SimGPU(seed=seed, **params)  # type: ignore[arg-type]  # params are all floats
    t0 = gpu.now()
    start = gpu.read_clocks(start_reads)
    duration = int(minutes * 60e9)
    burst_every = max(1, int(round(burst_ms * 1e6 / ROCR_SYNC_NS)))
    pairs: list[np.ndarray] = []
    bursts: list[np.ndarray] = []
    step = 0
    while True:
        target = t0 + step * ROCR_SYNC_NS
        if target > t0 + duration:
            break
        now = gpu.now()
        if target > now:
            gpu.idle(target - now)
        pairs.append(gpu.read_clocks(1))
        if step % burst_every == 0:
            bursts.append(gpu.read_clocks(burst))
        step += 1
    return {
        "gpu": gpu,
        "t0": t0,
        "t_end": t0 + duration,
        "start": start,
        "pairs": np.concatenate(pairs),
        "bursts": np.concatenate(bursts),
    }


def nominal_map(host_ref: float, dev_ref: int) -> Callable[[np.ndarray], np.ndarray]:
    def f(ticks: np.ndarray) -> np.ndarray:
        return host_ref + (ticks - dev_ref).astype(np.float64) * TICK_NS

    return f


def two_point_map(dev: np.ndarray, host: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Linear between consecutive (device, host) sync points; the end segments extrapolate."""
    d0, h0 = int(dev[0]), float(host[0])
    x = (dev - d0).astype(np.float64)
    y = host.astype(np.float64) - h0

    def f(ticks: np.ndarray) -> np.ndarray:
        q = (ticks - d0).astype(np.float64)
        j = np.clip(np.searchsorted(x, q, side="right") - 1, 0, x.size - 2)
        slope = (y[j + 1] - y[j]) / (x[j + 1] - x[j])
        return h0 + y[j] + slope * (q - x[j])

    return f


def build_methods(c: dict[str, Any]) -> tuple[dict[str, Callable[[np.ndarray], np.ndarray]], dict[str, Any]]:
    start, pairs, bursts = c["start"], c["pairs"], c["bursts"]
    maps: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    maps["no_sync"] = nominal_map(float(start[0, 0]), int(start[0, 1]))
    i = int(np.argmin(start[:, 2] - start[:, 0]))
    maps["best_of_n"] = nominal_map(0.5 * (float(start[i, 0]) + float(start[i, 2])), int(start[i, 1]))
    maps["two_point"] = two_point_map(pairs[:, 1], pairs[:, 2].astype(np.float64))
    maps["two_point_mid"] = two_point_map(pairs[:, 1], 0.5 * (pairs[:, 0] + pairs[:, 2]).astype(np.float64))
    t = time.perf_counter()
    single = clocksync.fit_clock_map(bursts, tick_ns=TICK_NS)
    t_single = time.perf_counter() - t
    t = time.perf_counter()
    pw = clocksync.fit_piecewise_clock_map(bursts, tick_ns=TICK_NS)
    t_pw = time.perf_counter() - t
    maps["ours_single"] = single.to_host
    maps["ours"] = pw.to_host
    info = {"single": single, "piecewise": pw, "fit_s": {"single": t_single, "piecewise": t_pw}}
    return maps, info


def stats(err: np.ndarray) -> dict[str, float]:
    a = np.abs(err)
    return {
        "median_ns": float(np.median(a)),
        "p99_ns": float(np.percentile(a, 99)),
        "max_ns": float(a.max()),
        "mean_signed_ns": float(np.mean(err)),
    }


def evaluate(c: dict[str, Any], *, events: int, seed: int) -> dict[str, Any]:
    gpu = c["gpu"]
    rng = np.random.default_rng(seed + 1000)
    t0, t_end = c["t0"], c["t_end"]
    hosts_all = rng.integers(t0, t_end, events)
    hosts_end = rng.integers(t_end - 1_000_000_000, t_end, events)
    maps, info = build_methods(c)
    out: dict[str, Any] = {"methods": {}}
    for name, f in maps.items():
        row = {}
        for label, hosts in (("campaign", hosts_all), ("end", hosts_end)):
            ticks = gpu.device_ticks_at(hosts)
            truth = gpu.host_at_device_ticks(ticks.astype(np.float64))
            err = f(ticks) - truth
            row[label] = stats(err)
            if name == "ours" and label == "campaign":
                bound = info["piecewise"].error_bound_at(truth)
                row["bound"] = {
                    "coverage": float(np.mean(np.abs(err) <= bound)),
                    "median_ns": float(np.median(bound)),
                    "max_ns": float(bound.max()),
                }
            if label == "campaign":
                out.setdefault("errors", {})[name] = err
        out["methods"][name] = row
    out["hosts_all"] = hosts_all
    out["info"] = info
    return out


def sweep_point(params: dict[str, float], args: argparse.Namespace, minutes: float) -> dict[str, Any]:
    c = run_campaign(params, minutes=minutes, seed=args.seed, start_reads=args.start_reads, burst=args.burst, burst_ms=args.burst_ms)
    ev = evaluate(c, events=args.sweep_events, seed=args.seed)
    floor = abs(params["read_asymmetry"] - 0.5) * params["read_rtt_ns"]
    return {
        "params": {k: params[k] for k in ("read_rtt_ns", "read_jitter_ns", "device_skew_ppm")},
        "floor_ns": floor,
        "methods": {m: ev["methods"][m]["campaign"] for m in METHODS},
    }


# --------------------------------------------------------------------------- plots

STYLE = {
    # marker, linestyle, colour: distinguishable in black and white by marker and dash.
    "no_sync": ("x", ":", "#999999"),
    "best_of_n": ("s", "--", "#666666"),
    "two_point": ("^", "-.", "#444444"),
    "two_point_mid": ("v", (0, (1, 1)), "#777777"),
    "ours_single": ("D", (0, (5, 1, 1, 1)), "#555555"),
    "ours": ("o", "-", "#000000"),
}


def plot_sweep(points: list[dict[str, Any]], key: str, xlabel: str, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5.4), sharey=True)
    xs = np.array([p["params"][key] for p in points], dtype=float)
    for ax, stat, label in ((axes[0], "median_ns", "median"), (axes[1], "p99_ns", "p99")):
        for m in METHODS:
            ys = np.array([p["methods"][m][stat] for p in points])
            mk, ls, col = STYLE[m]
            ax.plot(xs, ys, marker=mk, linestyle=ls, color=col, label=METHODS[m], linewidth=2.2 if m == "ours" else 1.3,
                    markersize=6, markerfacecolor="white" if m != "ours" else col)
        floor = np.array([p["floor_ns"] for p in points])
        ax.plot(xs, floor, color="black", linewidth=6, alpha=0.18, label="floor |asym-0.5| x min RTT")
        if xs.min() <= 0:
            ax.set_xscale("symlog", linthresh=1.0)
        else:
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(f"{label} |placement error|")
        ax.grid(True, which="major", linestyle=":", color="#bbbbbb")
    axes[0].set_ylabel("ns (log)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7.5, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_campaign(ev: dict[str, Any], t0: int, path: Path, floor: float, minutes: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hosts = ev["hosts_all"]
    order = np.argsort(hosts)
    ts = (hosts[order] - t0) / 60e9
    fig, ax = plt.subplots(figsize=(9, 6.0))
    for m in METHODS:
        e = np.abs(ev["errors"][m][order])
        e = np.maximum(e, 1.0)
        mk, ls, col = STYLE[m]
        sel = slice(None, None, max(1, e.size // 400))
        label = METHODS[m] + (" (under 2)" if m == "no_sync" else "")
        ax.plot(ts[sel], e[sel], marker=mk, linestyle="none", color=col, markersize=3.5,
                markerfacecolor="white" if m != "ours" else col, label=label)
    bound = ev["info"]["piecewise"].error_bound_at(hosts[order])
    ax.plot(ts, bound, color="black", linestyle="--", linewidth=2, zorder=5, label="ours: reported error bound")
    ax.axhline(floor, color="black", linewidth=6, alpha=0.18, label=f"floor {floor:.0f} ns")
    ax.set_yscale("log")
    ax.set_xlabel("campaign time (min)")
    ax.set_ylabel("|placement error| (ns, log)")
    ax.set_xlim(0, minutes)
    ax.grid(True, which="major", linestyle=":", color="#bbbbbb")
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    ax.set_title("Event placement error over a campaign (SimGPU, virtual time)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- report


def fmt_ns(v: float) -> str:
    if v >= 999.5e3:
        return f"{v / 1e6:.3g} ms"
    if v >= 999.5:
        return f"{v / 1e3:.3g} us"
    return f"{v:.0f} ns"


def readme_section(res: dict[str, Any], argv: list[str]) -> str:
    main = res["main"]
    cfg = res["config"]
    m = main["methods"]
    t = res["targets"]
    lines = [
        SECTION,
        "",
        f"`python {' '.join(['bench/clock_sync_bench.py'] + argv)}` (full results: `bench/results/clock_sync.json`; "
        f"plots `clock_sync_campaign.png`, `clock_sync_sweep_rtt.png`, `clock_sync_sweep_skew.png`). "
        f"Virtual time, seed {cfg['seed']}: deterministic, so the figures are the same on any machine.",
        "",
        f"Campaign: {cfg['minutes']:g} simulated minutes, reads {cfg['params']['read_rtt_ns']:.0f} ns + exp({cfg['params']['read_jitter_ns']:.0f} ns), "
        f"{cfg['params']['read_outlier_prob'] * 100:g} % outliers of ~{cfg['params']['read_outlier_ns'] / 1e3:.0f} us, "
        f"skew {cfg['params']['device_skew_ppm']:g} ppm wandering {cfg['params']['device_wander_ppm']:g} ppm over "
        f"{cfg['params']['device_wander_period_ns'] / 1e9:.0f} s, asymmetry {cfg['params']['read_asymmetry']:g} "
        f"(floor |asym-0.5| x min RTT = {main['floor_ns']:.0f} ns). {cfg['events']} events at random times, and "
        f"{cfg['events']} in the last second (\"end\"). Reads used: (1) 1, (2) {cfg['start_reads']}, (3) one per 1/16 s, "
        f"(4) {cfg['burst']} every {cfg['burst_ms']:g} ms.",
        "",
        "| method | median | p99 | max | median at the end |",
        "|---|---:|---:|---:|---:|",
    ]
    for k, label in METHODS.items():
        r = m[k]
        lines.append(
            f"| {label} | {fmt_ns(r['campaign']['median_ns'])} | {fmt_ns(r['campaign']['p99_ns'])} | "
            f"{fmt_ns(r['campaign']['max_ns'])} | {fmt_ns(r['end']['median_ns'])} |"
        )
    b = m["ours"]["bound"]
    lines += [
        "",
        f"Ours, reported error bound: median {fmt_ns(b['median_ns'])}, covers the true error for "
        f"{b['coverage'] * 100:.2f} % of events (the bound includes half the best round trip, "
        "since the asymmetry cannot be seen; the true error sits near the floor).",
        "",
        "Targets (issue 4):",
        "",
    ]
    for tk in t.values():
        lines.append(f"- {tk['what']}: {tk['value']} -> **{'met' if tk['met'] else 'NOT met'}**")
    sw = res["sweeps"]
    lines += [
        "",
        f"Sweeps ({sw['minutes']:g}-minute campaigns, {sw['events']} events, median |error|; the other parameters as above; "
        "read jitter scaled with the round trip):",
        "",
        "| read RTT | floor | (2) best of N | (3) two-point | (3m) midpoints | (4) ours | ours / floor |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in sw["rtt"]:
        mm = p["methods"]
        lines.append(
            f"| {fmt_ns(p['params']['read_rtt_ns'])} | {fmt_ns(p['floor_ns'])} | {fmt_ns(mm['best_of_n']['median_ns'])} | "
            f"{fmt_ns(mm['two_point']['median_ns'])} | {fmt_ns(mm['two_point_mid']['median_ns'])} | "
            f"{fmt_ns(mm['ours']['median_ns'])} | {mm['ours']['median_ns'] / p['floor_ns']:.2f} |"
        )
    lines += [
        "",
        "| skew | (2) best of N | (3) two-point | (4) ours | ours p99 |",
        "|---:|---:|---:|---:|---:|",
    ]
    for p in sw["skew"]:
        mm = p["methods"]
        lines.append(
            f"| {p['params']['device_skew_ppm']:g} ppm | {fmt_ns(mm['best_of_n']['median_ns'])} | "
            f"{fmt_ns(mm['two_point']['median_ns'])} | {fmt_ns(mm['ours']['median_ns'])} | {fmt_ns(mm['ours']['p99_ns'])} |"
        )
    lines += [
        "",
        "Notes: ours reaches the floor because the offset is centred in the band every tight bracket allows (a "
        "minimum filter) and the skew is refitted on 1 s knots; what remains is the asymmetry nobody can see. "
        "The two-point method with latency-compensated midpoints (3m) does nearly as well in median on this "
        "simulator, whose read jitter is split between the two legs in the same proportion as the base latency "
        "(so a midpoint is off by only 5 % of its round trip); its p99 and max show the outlier reads it cannot "
        "reject. Real contention does not split that kindly (an excess lands on either leg at random); "
        "`tests/test_clocksync.py` checks the fit on such reads too (error within |asym-0.5| x RTT + 40 ns). "
        "A single fit over the whole campaign (4s) is limited by the skew's wander. The floor is known here "
        "only because the simulator says so: on hardware the asymmetry is invisible, which is why the reported "
        "bound (about half the best round trip) is ten times the error actually reached.",
        "",
    ]
    return "\n".join(lines)


def write_readme_section(text: str) -> None:
    """Replace (or append) our section of bench/results/README.md."""
    write_section(SECTION, text, RESULTS / "README.md")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="main campaign length, simulated minutes (default 10)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--events", type=int, default=20_000, help="events evaluated (default 20000)")
    ap.add_argument("--start-reads", type=int, default=100, help="reads at the start for baseline 2 (default 100)")
    ap.add_argument("--burst", type=int, default=32, help="reads per burst for ours (default 32)")
    ap.add_argument("--burst-ms", type=float, default=250.0, help="burst period, ms (default 250)")
    ap.add_argument("--sweep-minutes", type=float, default=2.0, help="campaign length of each sweep point (default 2)")
    ap.add_argument("--sweep-events", type=int, default=5_000)
    ap.add_argument("--quick", action="store_true", help="1-minute campaign, short sweeps, nothing written")
    ap.add_argument("--no-readme", action="store_true", help="do not touch bench/results/README.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.minutes, args.sweep_minutes, args.events, args.sweep_events = 1.0, 0.5, 5_000, 2_000

    wall0 = time.perf_counter()
    params = dict(BASE_PARAMS)
    c = run_campaign(params, minutes=args.minutes, seed=args.seed, start_reads=args.start_reads, burst=args.burst, burst_ms=args.burst_ms)
    sim_s = time.perf_counter() - wall0
    ev = evaluate(c, events=args.events, seed=args.seed)
    floor = abs(params["read_asymmetry"] - 0.5) * params["read_rtt_ns"]
    lat = clocksync.summarize_read_latency(c["bursts"])
    pw = ev["info"]["piecewise"]
    main_res = {
        "floor_ns": floor,
        "methods": ev["methods"],
        "read_latency": dataclasses.asdict(lat),
        "piecewise": {
            "pieces": len(pw.pieces),
            "segment_ns": pw.segment_ns,
            "skipped_knots": pw.skipped_knots,
            "skew_ppm_range": [float(pw.skew_ppm.min()), float(pw.skew_ppm.max())],
            "fit_s": ev["info"]["fit_s"]["piecewise"],
        },
        "single_fit": {k: v for k, v in ev["info"]["single"].as_dict().items()},
        "sim_wall_s": sim_s,
        "reads": {"start": int(c["start"].shape[0]), "pairs": int(c["pairs"].shape[0]), "bursts": int(c["bursts"].shape[0])},
    }
    ours = ev["methods"]["ours"]
    best = ev["methods"]["best_of_n"]
    ratio_end = best["end"]["median_ns"] / ours["end"]["median_ns"]
    targets = {
        "median": {"what": "ours median < 250 ns", "value": fmt_ns(ours["campaign"]["median_ns"]), "met": ours["campaign"]["median_ns"] < 250},
        "p99": {"what": "ours p99 < 1 us", "value": fmt_ns(ours["campaign"]["p99_ns"]), "met": ours["campaign"]["p99_ns"] < 1000},
        "vs_best_of_n_at_end": {
            "what": f"ours >= 20x better than (2) at the {args.minutes:g}-minute mark",
            "value": f"{ratio_end:,.0f}x ({fmt_ns(best['end']['median_ns'])} vs {fmt_ns(ours['end']['median_ns'])})",
            "met": ratio_end >= 20,
        },
        "vs_floor": {
            "what": "ours within 2x of the floor (median)",
            "value": f"{ours['campaign']['median_ns'] / floor:.2f}x (p99 {ours['campaign']['p99_ns'] / floor:.2f}x) of {floor:.0f} ns",
            "met": ours["campaign"]["median_ns"] <= 2 * floor,
        },
        "bound_coverage": {
            "what": "our reported bound covers the true error for >= 99 % of events",
            "value": f"{ours['bound']['coverage'] * 100:.2f} %",
            "met": ours["bound"]["coverage"] >= 0.99,
        },
    }

    print(f"campaign: {args.minutes:g} min, {main_res['reads']}, sim {sim_s:.2f} s wall, floor {floor:.0f} ns")
    print(f"read latency: {lat}")
    for k, label in METHODS.items():
        r = ev["methods"][k]
        print(f"  {label:62s} median {fmt_ns(r['campaign']['median_ns']):>9s}  p99 {fmt_ns(r['campaign']['p99_ns']):>9s}  "
              f"max {fmt_ns(r['campaign']['max_ns']):>9s}  end {fmt_ns(r['end']['median_ns']):>9s}")
    print(f"  ours bound: {ours['bound']}")
    for tk in targets.values():
        print(f"  target: {tk['what']}: {tk['value']} -> {'met' if tk['met'] else 'NOT met'}")

    rtts = [500.0, 1000.0, 2000.0, 5000.0, 10_000.0, 20_000.0]
    skews = [0.0, 1.0, 5.0, 20.0, 50.0, 100.0, 200.0, 500.0]
    sw_rtt, sw_skew = [], []
    for r in rtts:
        p = dict(params, read_rtt_ns=r, read_jitter_ns=r * params["read_jitter_ns"] / params["read_rtt_ns"])
        sw_rtt.append(sweep_point(p, args, args.sweep_minutes))
        mm = sw_rtt[-1]["methods"]
        print(f"  rtt {r:7.0f} ns: floor {sw_rtt[-1]['floor_ns']:.0f}  ours {mm['ours']['median_ns']:.0f}/{mm['ours']['p99_ns']:.0f}  "
              f"two-point {mm['two_point']['median_ns']:.0f}  best-of-N {mm['best_of_n']['median_ns']:.0f}")
    for s in skews:
        p = dict(params, device_skew_ppm=s)
        sw_skew.append(sweep_point(p, args, args.sweep_minutes))
        mm = sw_skew[-1]["methods"]
        print(f"  skew {s:5.0f} ppm: ours {mm['ours']['median_ns']:.0f}/{mm['ours']['p99_ns']:.0f}  "
              f"two-point {mm['two_point']['median_ns']:.0f}  best-of-N {mm['best_of_n']['median_ns']:.0f}")
    wall = time.perf_counter() - wall0
    print(f"total wall {wall:.1f} s")

    res = {
        "benchmark": "clock_sync",
        "config": {
            "minutes": args.minutes,
            "seed": args.seed,
            "events": args.events,
            "start_reads": args.start_reads,
            "burst": args.burst,
            "burst_ms": args.burst_ms,
            "rocr_sync_ns": ROCR_SYNC_NS,
            "params": params,
            "methods": METHODS,
        },
        "main": main_res,
        "targets": targets,
        "sweeps": {"minutes": args.sweep_minutes, "events": args.sweep_events, "rtt": sw_rtt, "skew": sw_skew},
        "system": {
            "machine": platform.machine(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cpus_allowed": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "wall_s": wall,
        },
    }
    if args.quick:
        return 0 if all(t["met"] for t in targets.values()) else 1
    RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS / "clock_sync.json.tmp"
    tmp.write_text(json.dumps(res, indent=1) + "\n")
    os.replace(tmp, RESULTS / "clock_sync.json")
    plot_campaign(ev, c["t0"], RESULTS / "clock_sync_campaign.png", floor, args.minutes)
    plot_sweep(sw_rtt, "read_rtt_ns", "minimum read round trip (ns, log)", RESULTS / "clock_sync_sweep_rtt.png",
               f"Placement error vs read latency ({args.sweep_minutes:g}-min campaigns, skew 20 ppm, asymmetry 0.55)")
    plot_sweep(sw_skew, "device_skew_ppm", "device clock skew (ppm, symlog)", RESULTS / "clock_sync_sweep_skew.png",
               f"Placement error vs skew ({args.sweep_minutes:g}-min campaigns, 2 us reads, asymmetry 0.55)")
    print(f"wrote {RESULTS / 'clock_sync.json'} and 3 PNGs")
    if not args.no_readme:
        write_readme_section(readme_section(res, argv))
        print(f"updated {RESULTS / 'README.md'} ({SECTION})")
    return 0 if all(t["met"] for t in targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
