#!/usr/bin/env python3
"""Many GPUs: merge and stitch cost against the number of ranks, alignment error against the truth.

Every figure comes from a simulated node (``fg.sim.SimNode``, virtual time, one
host clock per rank with its own offset and skew) profiled end to end with
``fg.app.profile_node`` (one thread per rank, decisions agreed between them, host
clocks aligned by bracketed exchanges before and after the campaign):

1. **Cost**, for R in {2, 4, 8, 16, 32, 64} ranks, of a modest campaign so
   that 64 ranks stay affordable: a bandwidth-bound 512 MB all-reduce,
   mode ``"sse"`` (4 executions per run), ``--runs`` (40) runs,
   ``top_up=False``. Reported separately:

   * *simulator*: wall time spent inside the rank backends' calls and the
     clock exchanges (simulating R devices; not the method's cost);
   * *method, in the campaign*: the rest of ``profile_node``'s wall time
     (every rank's steps 1-8, fits, agreement between threads, the merge);
   * *merge*: ``fg.multi.merge_ranks(profiles, alignments)`` alone, given the R
     per-rank profiles (best of ``--reps``);
   * *stitch*: steps 5-8 on one rank's records, re-run with
     ``fg.stitch_logs`` on that rank's campaign timeline (its logs on its own
     host clock, identity logger map), best of ``--reps`` per rank, median
     over ranks.

   Only ratios within the same run are reported as findings (merge cost per
   rank relative to R=2, merge as a share of one rank's stitch): the box is
   shared and absolute times are noisy.

2. **Alignment error**: every collective execution of every rank in the
   merged timeline (``NodeProfile.timelines``, root's host clock) against
   the truth, ``host_from_true(0, end_true_ns)``: median, p99, max |error|,
   the share within the reported ``end_err_ns``; the same for the
   alignment alone (the rank's true end on its own host clock, mapped with
   its ``HostAlignment``, against the bound ``error_bound_ns``); the
   alignment bound per rank; and the cross-rank spread of the same
   execution's merged end (the true ends coincide within a few ns).

3. **Latency- vs bandwidth-bound** all-reduce (64 KB and 512 MB) at
   ``--size-ranks`` (8) ranks. 64 KB executions (~38 us at 8 ranks) catch
   a 1 ms log in execution 3 only every ~25 runs, so that campaign has
   ``--latency-runs`` (200) runs and top-up runs allowed (up to
   ``--latency-top-up`` = 400); the 512 MB point is the sweep's.

Usage::

    python bench/multigpu_bench.py            # bench/results/multigpu.json, multigpu.png, README section
    python bench/multigpu_bench.py --quick    # R in {2, 4}, smaller campaigns; writes nothing
    python bench/multigpu_bench.py --readme-only

Virtual time, seeded: the error figures are the same on any machine; only
the wall times differ.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import fingrav_native as fg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_readme import write_section  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SECTION = "## Many GPUs"
MB512 = 512 << 20
KB64 = 64 << 10
SSE_INDEX = 3


# --------------------------------------------------------------------------- timing the simulator


class TimedBackend(fg.backends.BackendWrapper):
    """A rank backend whose device calls add their wall time to a shared counter (the simulator's cost).

    ``profile_node`` serialises virtual-time backends behind one lock and
    calls this wrapper inside it, so the time measured is the simulation's
    own, not a wait for another rank's thread.
    """

    def __init__(self, backend: Any, clock: dict) -> None:
        super().__init__(backend)
        self._clock = clock

    def _around(self, call: Any, *args: Any) -> Any:
        t = time.perf_counter()
        try:
            return call(*args)
        finally:
            self._clock["s"] += time.perf_counter() - t


class Identity:
    """Logs already on the rank's host clock: identity map, the rank's clock-map bound."""

    def __init__(self, bound_ns: float) -> None:
        self.bound = float(bound_ns)

    def to_host(self, t: Any) -> np.ndarray:
        return np.asarray(t, dtype=np.float64)

    def error_bound_at(self, t: Any) -> np.ndarray:
        return np.full(np.shape(t), self.bound)


# --------------------------------------------------------------------------- one campaign


def campaign(devices: int, nbytes: int, *, seed: int, runs: int, top_up: bool = False,
             max_top_up_runs: int | None = None) -> tuple[fg.sim.SimNode, Any, dict]:
    node = fg.sim.SimNode(devices=devices, seed=seed)
    kernel = node.collective("allreduce", nbytes)
    sim = {"s": 0.0}
    t = time.perf_counter()
    backends = [TimedBackend(b, sim) for b in node.node_backends()]
    sim["s"] += time.perf_counter() - t  # building the rank backends measures every device's idle level

    def exchange(rank: int, n: int) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return node.exchange_brackets(rank, n)
        finally:
            sim["s"] += time.perf_counter() - t0

    t = time.perf_counter()
    prof = fg.app.profile_node(kernel, backends, exchange=exchange, mode="sse", runs=runs, top_up=top_up,
                               max_top_up_runs=max_top_up_runs)
    wall = time.perf_counter() - t
    return node, prof, {"campaign_s": wall, "simulator_s": sim["s"], "method_in_campaign_s": wall - sim["s"]}


def best_of(reps: int, fn: Any) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def stitch_rank(p: Any) -> tuple[Any, int]:
    """Steps 5-8 on one rank's campaign timeline: a callable re-running them, and the profile's own LOI count."""
    tl = p.timeline
    logs = tl.logs
    samples = np.zeros(len(logs), dtype=[("source_ts", "<i8"), ("window_ns", "<f8"), ("total", "<f4"),
                                         ("compute", "<f4"), ("io", "<f4"), ("memory", "<f4")])
    samples["source_ts"] = np.rint(logs["host_ns"]).astype(np.int64)
    for f in ("window_ns", "total", "compute", "io", "memory"):
        samples[f] = logs[f]
    lmap = Identity(p.error_budget.clock_map_ns)
    margin = p.settings["margin"]

    def go() -> Any:
        return fg.stitch_logs(samples, tl.executions, lmap, execution_of_interest=SSE_INDEX, margin=margin,
                              smoother=p.settings["smoother"], x=p.settings["x"], label="sse")

    return go, len(p.profiles["sse"].lois)


def q(a: np.ndarray) -> dict[str, float]:
    a = np.abs(np.asarray(a, dtype=np.float64))
    return {"median_ns": float(np.median(a)), "p99_ns": float(np.percentile(a, 99)), "max_ns": float(a.max())}


def alignment_errors(node: fg.sim.SimNode, prof: Any) -> dict[str, Any]:
    """Every rank's collective executions on the root's clock against the truth."""
    truth = node.collective_truth()
    errs, bounds, a_errs, a_bounds = [], [], [], []
    per_exec: dict[tuple[int, int], list[float]] = {}
    matched = 0
    for r, tl in enumerate(prof.timelines):
        ex = tl.executions
        tr = truth[truth["rank"] == r]
        key_t = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(tr["run"], tr["index"]))}
        idx = np.array([key_t.get((int(a), int(b)), -1) for a, b in zip(ex["run"], ex["index"])])
        ok = idx >= 0
        matched += int(ok.sum())
        ex, rows = ex[ok], tr[idx[ok]]
        root_true = node.host_from_true(0, rows["end_true_ns"].astype(np.float64))
        errs.append(ex["end_ns"] - root_true)
        bounds.append(ex["end_err_ns"].astype(np.float64))
        al = prof.alignment(r)
        # The rank's true end on its own host clock (end_host_ns is the host-seen end, sync latency included).
        own = np.asarray(node.host_from_true(r, rows["end_true_ns"].astype(np.float64)), dtype=np.float64)
        a_errs.append(al.to_root(own) - root_true)
        a_bounds.append(np.asarray(al.error_bound_ns(own), dtype=np.float64) * np.ones(len(own)))
        for (run, i), e in zip(zip(ex["run"], ex["index"]), ex["end_ns"]):
            per_exec.setdefault((int(run), int(i)), []).append(float(e))
    err, bound = np.concatenate(errs), np.concatenate(bounds)
    a_err, a_bound = np.concatenate(a_errs), np.concatenate(a_bounds)
    spread = np.array([max(v) - min(v) for v in per_exec.values() if len(v) == len(prof.timelines)])
    true_spread = []
    for (run, i) in per_exec:
        rows = truth[(truth["run"] == run) & (truth["index"] == i)]
        if len(rows) == len(prof.timelines):
            true_spread.append(int(rows["end_true_ns"].max() - rows["end_true_ns"].min()))
    return {
        "executions": int(len(err)),
        "matched": matched,
        "end": {**q(err), "within_reported": float(np.mean(np.abs(err) <= bound)),
                "reported_median_ns": float(np.median(bound))},
        "alignment_only": {**q(a_err), "within_bound": float(np.mean(np.abs(a_err) <= a_bound))},
        "alignment_bound_ns": {"median_over_ranks": float(np.median(prof.alignment_bound_ns[1:])),
                               "max_over_ranks": float(np.max(prof.alignment_bound_ns))},
        "cross_rank_spread_ns": {"median_ns": float(np.median(spread)), "p99_ns": float(np.percentile(spread, 99)),
                                 "max_ns": float(spread.max()), "true_max_ns": float(max(true_spread))},
    }


def measure(devices: int, nbytes: int, args: argparse.Namespace, *, runs: int, top_up: bool = False,
            max_top_up_runs: int | None = None) -> dict[str, Any]:
    node, prof, cost = campaign(devices, nbytes, seed=args.seed, runs=runs, top_up=top_up,
                                max_top_up_runs=max_top_up_runs)
    als = [prof.alignment(r) for r in range(devices)]
    merge_s, _ = best_of(args.reps, lambda: fg.multi.merge_ranks(prof.ranks, als))
    stitch = []
    same = True
    for p in prof.ranks:
        go, own = stitch_rank(p)
        s, ep = best_of(args.reps, go)
        stitch.append(s)
        same &= len(ep.lois) == own
    p0 = prof.ranks[0]
    out = {
        "ranks": devices,
        "nbytes": nbytes,
        "kernel": prof.kernel,
        "runs": int(p0.runs),
        "campaign_runs": int(p0.settings["runs"]),
        "top_up_runs": int(p0.profiles["sse"].top_up_runs),
        "duration_us": [float(d) / 1e3 for d in prof.node["sse"].duration_ns[[0, -1]]],
        "lois_rank0": int(len(p0.profiles["sse"].lois)),
        "cost": {
            **cost,
            "merge_s": merge_s,
            "stitch_per_rank_s": float(np.median(stitch)),
            "stitch_rerun_same_lois": bool(same),
        },
        "accuracy": alignment_errors(node, prof),
    }
    c = out["cost"]
    print(f"R={devices:3d} {prof.kernel}: campaign {c['campaign_s']:.2f} s (simulator {c['simulator_s']:.2f} s), "
          f"merge {c['merge_s'] * 1e3:.1f} ms, stitch/rank {c['stitch_per_rank_s'] * 1e3:.1f} ms; "
          f"end |err| median {out['accuracy']['end']['median_ns']:.0f} ns, max {out['accuracy']['end']['max_ns']:.0f} ns, "
          f"within reported {out['accuracy']['end']['within_reported']:.1%}", flush=True)
    return out


def add_ratios(sweep: list[dict[str, Any]]) -> None:
    base = sweep[0]
    b = base["cost"]
    for s in sweep:
        c, r = s["cost"], s["ranks"] / base["ranks"]
        s["ratios"] = {
            "merge_per_rank_vs_first": c["merge_s"] / s["ranks"] / (b["merge_s"] / base["ranks"]),
            "merge_over_one_rank_stitch": c["merge_s"] / c["stitch_per_rank_s"],
            "merge_per_rank_over_one_rank_stitch": c["merge_s"] / s["ranks"] / c["stitch_per_rank_s"],
            "stitch_per_rank_vs_first": c["stitch_per_rank_s"] / b["stitch_per_rank_s"],
            "method_per_rank_vs_first": c["method_in_campaign_s"] / s["ranks"] / (b["method_in_campaign_s"] / base["ranks"]),
            "simulator_per_rank_vs_first": c["simulator_s"] / s["ranks"] / (b["simulator_s"] / base["ranks"]),
            "merge_share_of_method": c["merge_s"] / c["method_in_campaign_s"],
            "ranks_vs_first": r,
        }
    rs = np.array([s["ranks"] for s in sweep], dtype=float)
    for key in ("merge_s", "stitch_per_rank_s", "method_in_campaign_s", "simulator_s"):
        ys = np.array([s["cost"][key] for s in sweep])
        if len(rs) >= 2:
            sweep[0].setdefault("fit", {})[key] = float(np.polyfit(np.log(rs), np.log(ys), 1)[0])


# --------------------------------------------------------------------------- plot


def plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sw = res["sweep"]
    rs = np.array([s["ranks"] for s in sw], dtype=float)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 6.4))
    series = [
        ("merge_s", "merge_ranks (whole node)", "o", "-", "#000000"),
        ("method_in_campaign_s", "method in the campaign (all ranks)", "s", "--", "#444444"),
        ("simulator_s", "simulator (R devices; not the method)", "^", ":", "#888888"),
        ("stitch_per_rank_s", "stitch, steps 5-8, one rank", "D", "-.", "#666666"),
    ]
    for key, label, mk, ls, col in series:
        ys = np.array([s["cost"][key] for s in sw])
        a1.plot(rs, ys / ys[0], marker=mk, linestyle=ls, color=col, label=label, linewidth=1.8, markersize=7,
                markerfacecolor="white" if key != "merge_s" else col)
    a1.plot(rs, rs / rs[0], color="black", linewidth=6, alpha=0.15, label="linear in ranks")
    a1.set_xscale("log", base=2)
    a1.set_yscale("log")
    a1.set_xticks(rs, [str(int(r)) for r in rs])
    a1.set_xlabel("ranks")
    a1.set_ylabel(f"wall time relative to R={int(rs[0])} (log)")
    a1.set_title("Cost against ranks (same run, ratios)", fontsize=10)
    a1.grid(True, which="major", linestyle=":", color="#bbbbbb")
    a1.legend(fontsize=8, loc="upper left", frameon=False)

    acc = [s["accuracy"] for s in sw]
    series2 = [
        (lambda a: a["end"]["median_ns"], "merged end |error|, median", "o", "-", "#000000"),
        (lambda a: a["end"]["max_ns"], "merged end |error|, max", "v", "-", "#555555"),
        (lambda a: a["alignment_only"]["max_ns"], "alignment alone |error|, max", "x", ":", "#777777"),
        (lambda a: a["alignment_bound_ns"]["median_over_ranks"], "alignment bound, median over ranks", "s", "--", "#333333"),
        (lambda a: a["end"]["reported_median_ns"], "reported end_err_ns, median", "D", "-.", "#999999"),
        (lambda a: a["cross_rank_spread_ns"]["max_ns"], "cross-rank spread of one end, max", "^", (0, (5, 1, 1, 1)), "#666666"),
    ]
    for f, label, mk, ls, col in series2:
        a2.plot(rs, [f(a) for a in acc], marker=mk, linestyle=ls, color=col, label=label, linewidth=1.6,
                markersize=7, markerfacecolor="white" if mk not in ("o", "x") else col)
    a2.set_xscale("log", base=2)
    a2.set_yscale("log")
    a2.set_xticks(rs, [str(int(r)) for r in rs])
    a2.set_xlabel("ranks")
    a2.set_ylabel("ns (log)")
    a2.set_title("Collective ends on the root's clock vs the truth", fontsize=10)
    a2.grid(True, which="major", linestyle=":", color="#bbbbbb")
    a2.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    cfg = res["config"]
    fig.suptitle(f"Many GPUs: SimNode, 512 MB all-reduce, mode sse, {cfg['runs']} runs, no top-up "
                 f"(virtual time, seed {cfg['seed']})", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.subplots_adjust(bottom=0.27)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- report


def fmt_ns(v: float) -> str:
    if v >= 999.5e3:
        return f"{v / 1e6:.3g} ms"
    if v >= 999.5:
        return f"{v / 1e3:.3g} us"
    return f"{v:.0f} ns"


def fmt_s(v: float) -> str:
    return f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.2f} s"


def readme_section(res: dict[str, Any]) -> str:
    cfg, sw = res["config"], res["sweep"]
    fit = sw[0].get("fit", {})
    lines = [
        SECTION,
        "",
        f"`python bench/multigpu_bench.py` ({res['date']}, {res['machine']}; full results "
        "`bench/results/multigpu.json`, plot `multigpu.png`). Simulated node (`SimNode`, virtual time, seed "
        f"{cfg['seed']}, every rank on its own host clock), profiled end to end with `profile_node` (one thread per "
        "rank, host clocks aligned by bracketed exchanges before and after). Campaign kept modest so 64 ranks stay "
        f"affordable: all-reduce of 512 MB (bandwidth-bound), mode `sse`, {cfg['runs']} runs, `top_up=False`. "
        f"Wall times are best of {cfg['reps']} on a shared 2-core box: read the ratios, not the absolute figures.",
        "",
        "Cost: *simulator* = time inside the rank backends and clock exchanges (simulating R devices, not the "
        "method); *method* = the rest of `profile_node` (all ranks' steps 1-8, fits, thread agreement, merge); "
        "*merge* = `merge_ranks(profiles, alignments)` alone; *stitch* = steps 5-8 re-run (`stitch_logs`) on one "
        "rank's timeline, median over ranks.",
        "",
        "| ranks | campaign | simulator | method | merge | stitch / rank | merge per rank vs R=2 | merge / one rank's stitch | merge share of method |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sw:
        c, r = s["cost"], s["ratios"]
        lines.append(
            f"| {s['ranks']} | {fmt_s(c['campaign_s'])} | {fmt_s(c['simulator_s'])} | {fmt_s(c['method_in_campaign_s'])} | "
            f"{fmt_s(c['merge_s'])} | {fmt_s(c['stitch_per_rank_s'])} | {r['merge_per_rank_vs_first']:.2f} | "
            f"{r['merge_over_one_rank_stitch']:.2f} | {r['merge_share_of_method']:.1%} |")
    if fit:
        lines += ["", "Fitted growth, time ~ ranks^k: " + ", ".join(
            f"{k.replace('_s', '').replace('_', ' ')} k={v:.2f}" for k, v in fit.items()) + "."]
    lines += [
        "",
        "Alignment error: every collective execution of every rank in the merged timeline "
        "(`NodeProfile.timelines`, root's host clock) against the truth `host_from_true(0, end_true_ns)`; "
        "*alignment alone* maps the rank's true end on its own host clock through its `HostAlignment` (the merge's "
        "share of the error, against `error_bound_ns`). Spread = max - min over ranks of one execution's merged end "
        "(the true ends coincide).",
        "",
        "| ranks | executions | end median | end p99 | end max | within reported end_err_ns | reported (median) | "
        "alignment alone max | within bound | alignment bound (median over ranks) | cross-rank spread median / max |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def acc_row(label: str, a: dict[str, Any]) -> str:
        e, al, sp = a["end"], a["alignment_only"], a["cross_rank_spread_ns"]
        return (f"| {label} | {a['executions']} | {fmt_ns(e['median_ns'])} | {fmt_ns(e['p99_ns'])} | {fmt_ns(e['max_ns'])} | "
                f"{e['within_reported']:.1%} | {fmt_ns(e['reported_median_ns'])} | {fmt_ns(al['max_ns'])} | "
                f"{al['within_bound']:.1%} | {fmt_ns(a['alignment_bound_ns']['median_over_ranks'])} | "
                f"{fmt_ns(sp['median_ns'])} / {fmt_ns(sp['max_ns'])} |")

    for s in sw:
        lines.append(acc_row(str(s["ranks"]), s["accuracy"]))
    sz = res["sizes"]
    lines += [
        "",
        f"Latency- vs bandwidth-bound all-reduce at {cfg['size_ranks']} ranks (the 512 MB row is the sweep's; the 64 KB "
        f"campaign has {cfg['latency_runs']} runs and up to {cfg['latency_top_up']} top-up runs, since a 1 ms log lands "
        "in a ~38 us execution 3 only every few dozen runs):",
        "",
        "| size | execution | runs (top-up) | LOIs rank 0 | end median | end max | within reported | alignment bound | merge | stitch / rank |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, s in sz.items():
        a, c = s["accuracy"], s["cost"]
        lines.append(
            f"| {label} | {s['duration_us'][0]:.1f}-{s['duration_us'][1]:.1f} us | {s['runs']} ({s['top_up_runs']}) | "
            f"{s['lois_rank0']} | {fmt_ns(a['end']['median_ns'])} | {fmt_ns(a['end']['max_ns'])} | "
            f"{a['end']['within_reported']:.1%} | {fmt_ns(a['alignment_bound_ns']['median_over_ranks'])} | "
            f"{fmt_s(c['merge_s'])} | {fmt_s(c['stitch_per_rank_s'])} |")
    lines += ["", *res.get("notes", []), ""]
    return "\n".join(lines)


def notes(res: dict[str, Any]) -> list[str]:
    sw = res["sweep"]
    out = []
    cov = min(s["accuracy"]["end"]["within_reported"] for s in sw + list(res["sizes"].values()))
    out.append(f"Coverage: the reported `end_err_ns` covers {cov:.1%} of merged ends at worst"
               + (" (all of them)." if cov >= 1 else " (**not all**: see multigpu.json)."))
    same = all(s["cost"]["stitch_rerun_same_lois"] for s in sw)
    out.append("The stitch re-run finds " + ("the same LOIs as each rank's own profile" if same else
               "a different LOI count from some rank's own profile (placement on the rank's host clock vs its logger map)")
               + "; its time is steps 5-8 only (no clock fit, no campaign).")
    fit = sw[0].get("fit", {})
    if fit.get("merge_s", 0) > 1.15:
        out.append(f"Merge grows faster than linearly in ranks (k={fit['merge_s']:.2f}); left as measured.")
    lat = res["sizes"].get("64 KB (latency-bound)")
    if lat is not None:
        c = lat["cost"]
        out.append(
            f"Merge cost follows the campaign's length, not only the ranks: the 64 KB campaign ({lat['runs']} runs) merges "
            f"in {c['merge_s'] / lat['ranks'] * 1e3:.0f} ms per rank, {c['merge_s'] / lat['ranks'] / c['stitch_per_rank_s']:.1f}x "
            "one rank's stitch; a profile of `merge_ranks` puts nearly all of it in `HostAlignment.error_bound_ns` "
            "(the causal bound, computed for every execution start/end and LOI). Left as is; a candidate for "
            "vectorising.")
    al_max = max(s["accuracy"]["alignment_only"]["max_ns"] for s in sw)
    al_b = min(s["accuracy"]["alignment_bound_ns"]["median_over_ranks"] for s in sw)
    out.append(f"The alignment alone is off by at most {fmt_ns(al_max)} against a bound of ~{fmt_ns(al_b)}: the rest of "
               "the merged end error (~1.5 us) is each rank's own placement of the execution end on its host clock.")
    return out


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="R in {2, 4}, smaller campaigns; writes nothing")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64])
    ap.add_argument("--runs", type=int, default=40, help="campaign runs of the 512 MB sweep")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of merge and stitch (best of)")
    ap.add_argument("--size-ranks", type=int, default=8, help="ranks of the 64 KB vs 512 MB comparison")
    ap.add_argument("--latency-runs", type=int, default=200)
    ap.add_argument("--latency-top-up", type=int, default=400)
    ap.add_argument("--no-readme", action="store_true", help="JSON and PNG only")
    ap.add_argument("--readme-only", action="store_true",
                    help="rewrite the README section and the PNG from multigpu.json")
    args = ap.parse_args()
    if args.readme_only:
        with open(RESULTS / "multigpu.json") as f:
            res = json.load(f)
        res["notes"] = notes(res)
        plot(res, RESULTS / "multigpu.png")
        write_section(SECTION, readme_section(res))
        return 0
    if args.quick:
        args.ranks, args.runs, args.reps, args.size_ranks = [2, 4], 20, 1, 4
    if args.size_ranks not in args.ranks:
        args.ranks = sorted(set(args.ranks) | {args.size_ranks})
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    sweep = [measure(r, MB512, args, runs=args.runs) for r in args.ranks]
    add_ratios(sweep)
    at = next(s for s in sweep if s["ranks"] == args.size_ranks)
    lat = measure(args.size_ranks, KB64, args, runs=args.latency_runs, top_up=True, max_top_up_runs=args.latency_top_up)
    res: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, load "
                   f"{load_before[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end",
        "config": {"seed": args.seed, "ranks": args.ranks, "runs": args.runs, "reps": args.reps, "mode": "sse",
                   "top_up": False, "size_ranks": args.size_ranks, "latency_runs": args.latency_runs,
                   "latency_top_up": args.latency_top_up},
        "sweep": sweep,
        "sizes": {"64 KB (latency-bound)": lat, "512 MB (bandwidth-bound)": at},
        "wall_s": time.perf_counter() - t0,
    }
    res["notes"] = notes(res)
    print(f"total {res['wall_s']:.1f} s")
    print("\n".join(res["notes"]))
    if args.quick:
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "multigpu.json", "w") as f:
        json.dump(res, f, indent=1, default=float)
    plot(res, RESULTS / "multigpu.png")
    if not args.no_readme:
        write_section(SECTION, readme_section(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
