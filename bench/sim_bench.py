#!/usr/bin/env python3
"""Benchmark of the simulated device.

Two parts, both against baselines measured in the same process:

(a) Virtual-time throughput. A campaign is ``--runs`` runs of one kernel,
    ``--execs`` back-to-back executions each, with ``--gap-ms`` of virtual
    idle between runs (the paper's campaigns: many short runs). It is timed
    twice: through the Python wrapper (``SimGPU.run`` + ``SimGPU.idle``, what
    users call; each run also returns its executions and observed samples)
    and through the bare core calls (``SimDevice.launch/synchronize/advance``),
    with the exact truth trace recorded (``record_truth=1``, the default) and
    not. The target: a 200-run CB-4K GEMM campaign in well under a second of
    wall time, so that simulated campaigns cost tests and benchmarks little.

(b) Real-time overhead. A ``SimGPU(realtime=True)`` runs a GEMM workload on
    the main thread (``sequence`` + a short ``idle``) for ``--seconds`` while
    a ``fg.native.Sampler`` polls, at 1 kHz and at 10 kHz, either the
    device's logger (``gpu.power_source(depth)``: each poll advances the
    device to now, so the sampler thread pays for the simulation it drives)
    or a ``SyntheticSource`` (the cheap baseline: a table look-up per poll),
    alternately, ``--repeats`` times each. Reported: the sampler thread's CPU
    fraction (``SamplerStats.cpu_fraction``) for both and their ratio, the
    main thread's CPU fraction while it launches and synchronizes (also with
    no sampler at all, when the main thread drives the simulation alone),
    and sampling health (misses, deadline misses, jitter). Every sim-sourced
    run is also checked end to end: contiguous ``source_seq``, values equal
    to ``gpu.logs()`` for the same seq, ``host_ns >= publish_ns``.

Usage::

    python bench/sim_bench.py                 # writes bench/results/sim.json
    python bench/sim_bench.py --quick         # a smoke run (seconds), no files
    python bench/sim_bench.py --no-readme     # JSON only

Figures depend on the machine and its load; the JSON records both
(``system``), and ratios against the in-process baselines are the figures to
compare across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import fingrav_native as fg
import fingrav_native.native  # fg.native: the C++ core's Sampler, sources and constants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_readme import write_section  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SECTION = "## Simulated device"

CAMPAIGN_KERNELS = ("cb-4k-gemm", "cb-8k-gemm", "mb-2k-gemv")


# ----------------------------------------------------------------- helpers


def system_info() -> dict[str, Any]:
    try:
        load = os.getloadavg()
    except OSError:  # pragma: no cover - not on Linux
        load = (float("nan"),) * 3
    try:
        ncpu = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        ncpu = os.cpu_count() or 0
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus_allowed": ncpu,
        "loadavg_1_5_15": [round(x, 2) for x in load],
        "fingrav_native": fg.__version__,
        "numpy": np.__version__,
        "git": git_state(),
    }


def git_state() -> str:
    """HEAD of the source tree, and whether its C++ core had local edits."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "csrc", "python"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (csrc/python edited)" if dirty else "")


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


# ----------------------------------------------------------------- (a) virtual


def campaign_wrapper(kernel: str, runs: int, execs: int, gap_ns: int, record_truth: int, seed: int) -> tuple[float, fg.sim.SimGPU]:
    """A campaign through the user-facing wrapper; returns (wall s, gpu)."""
    gpu = fg.sim.SimGPU(seed=seed, record_truth=record_truth)
    t0 = time.perf_counter()
    for _ in range(runs):
        gpu.run(kernel, executions=execs)
        gpu.idle(gap_ns)
    return time.perf_counter() - t0, gpu


def campaign_core(kernel: str, runs: int, execs: int, gap_ns: int, record_truth: int, seed: int) -> tuple[float, fg.sim.SimGPU]:
    """The same campaign through the bare core calls (no per-run record copies)."""
    gpu = fg.sim.SimGPU(seed=seed, record_truth=record_truth)
    dev = gpu.device
    kid = gpu.kernel_id(kernel)
    t0 = time.perf_counter()
    for r in range(runs):
        dev.launch(kid, execs, r)
        dev.synchronize()
        dev.advance(gap_ns)
    return time.perf_counter() - t0, gpu


def bench_virtual(runs: int, execs: int, gap_ms: float, repeats: int, seed: int) -> dict[str, Any]:
    gap_ns = int(gap_ms * 1e6)
    out: dict[str, Any] = {
        "runs": runs,
        "executions_per_run": execs,
        "gap_ms": gap_ms,
        "repeats": repeats,
        "note": "wall times are per campaign; best and median of `repeats`; a fresh device each time",
        "cases": [],
    }
    modes: dict[str, Callable[..., tuple[float, fg.sim.SimGPU]]] = {"wrapper": campaign_wrapper, "core": campaign_core}
    # Warm up imports, allocators and caches once.
    campaign_core("cb-4k-gemm", 5, execs, gap_ns, 1, seed)
    for kernel in CAMPAIGN_KERNELS:
        for record_truth in (1, 0):
            for mode, fn_ in modes.items():
                walls = []
                gpu = None
                for _ in range(repeats):
                    wall, gpu = fn_(kernel, runs, execs, gap_ns, record_truth, seed)
                    walls.append(wall)
                assert gpu is not None
                ex = gpu.executions()
                n_exec = len(ex)
                virt_s = (gpu.now() - int(ex["host_launch_ns"][0])) / 1e9 if n_exec else 0.0
                busy_s = float((ex["end_ns"] - ex["start_ns"]).sum()) / 1e9
                best, med = min(walls), median(walls)
                case = {
                    "kernel": kernel,
                    "record_truth": record_truth,
                    "mode": mode,
                    "wall_s_best": round(best, 6),
                    "wall_s_median": round(med, 6),
                    "executions": n_exec,
                    "executions_per_s": round(n_exec / med, 1),
                    "runs_per_s": round(runs / med, 1),
                    "virtual_s": round(virt_s, 4),
                    "kernel_busy_virtual_s": round(busy_s, 4),
                    "speedup_virtual_over_wall": round(virt_s / med, 1),
                    "logs": int(len(gpu.logs())),
                }
                out["cases"].append(case)
                print(
                    f"  {kernel:11s} truth={record_truth} {mode:7s}: {med * 1e3:8.1f} ms median "
                    f"({best * 1e3:7.1f} best)  {n_exec / med:10.0f} exec/s  virtual {virt_s:6.2f} s "
                    f"({virt_s / med:6.0f}x real time)",
                    flush=True,
                )
    # How the per-run cost grows with the campaign's length: SimGPU.sequence
    # copies every execution and recomputes every observed sample so far on
    # each run, the core calls do not.
    scaling = []
    for n in (100, 200, 400, 800):
        w, _ = campaign_wrapper("mb-2k-gemv", n, execs, gap_ns, 0, seed)
        c, _ = campaign_core("mb-2k-gemv", n, execs, gap_ns, 0, seed)
        scaling.append(
            {"runs": n, "wrapper_ms_per_run": round(w * 1e3 / n, 4), "core_ms_per_run": round(c * 1e3 / n, 4)}
        )
        print(f"  scaling mb-2k-gemv, {n:4d} runs: wrapper {w * 1e3 / n:.3f} ms/run, core {c * 1e3 / n:.3f} ms/run", flush=True)
    out["scaling"] = {"kernel": "mb-2k-gemv", "record_truth": 0, "single_pass": True, "points": scaling}
    target = next(
        c for c in out["cases"] if c["kernel"] == "cb-4k-gemm" and c["record_truth"] == 1 and c["mode"] == "wrapper"
    )
    out["target"] = {
        "claim": "a 200-run campaign in well under a second (CB-4K GEMM, 25 executions/run, wrapper, truth recorded)",
        "wall_s_median": target["wall_s_median"],
        "met": bool(runs == 200 and target["wall_s_median"] < 0.5),
        "criterion": "median wall < 0.5 s for 200 runs",
    }
    return out


# ----------------------------------------------------------------- (b) real time


def _check_values(samples: np.ndarray, logs: np.ndarray, sseq: np.ndarray, lseq: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Each sample against the log of the same seq: values, source_ts, window_ns, not seen before published."""
    problems = []
    idx = np.searchsorted(lseq, sseq)
    found = (idx < len(lseq)) & (lseq[np.minimum(idx, len(lseq) - 1)] == sseq)
    if not found.all():
        problems.append(f"{int((~found).sum())} samples have a source_seq absent from gpu.logs()")
    L = logs[idx[found]]
    S = samples[found]
    for c in fg.native.CHANNELS:
        if not np.array_equal(L[c], S[c]):
            problems.append(f"channel {c}: values differ from gpu.logs()")
    if not np.array_equal(L["logger_ticks"], S["source_ts"]):
        problems.append("source_ts differs from the log's logger_ticks")
    if not np.array_equal(L["window_ns"], S["window_ns"]):
        problems.append("window_ns differs from the log's")
    margin = S["host_ns"] - L["publish_ns"]
    if (margin < 0).any():
        problems.append(f"{int((margin < 0).sum())} samples seen before their publish_ns")
    return problems, margin


def _check_gaps(samples: np.ndarray, logs: np.ndarray, sseq: np.ndarray, lseq: np.ndarray, depth: int,
                source_missed: int) -> tuple[list[str], np.ndarray, int]:
    """Each source_seq gap must be a sampler stall the sampler reported; returns (problems, gaps, logs missed)."""
    problems = []
    host = samples["host_ns"]
    d = np.diff(sseq)
    gaps = np.nonzero(d > 1)[0]
    flagged = (samples["flags"] & fg.native.FLAG_SOURCE_GAP) != 0
    if not np.array_equal(np.nonzero(flagged)[0], gaps + 1):
        problems.append("FLAG_SOURCE_GAP is not set exactly on the first sample after each gap")
    missed = int((d[gaps] - 1).sum())
    if missed != source_missed:
        problems.append(f"gaps skip {missed} logs but SamplerStats.source_missed={source_missed}")
    unexplained = 0
    for i in gaps:
        group = int((host == host[i + 1]).sum())  # readings the poll after the gap returned
        first_missed = int(sseq[i] + 1)
        j = np.searchsorted(lseq, first_missed)
        published_after_prev_poll = j < len(lseq) and logs["publish_ns"][j] > samples["host_poll_begin_ns"][i]
        if group != depth or not published_after_prev_poll:
            unexplained += 1
    if unexplained:
        problems.append(f"{unexplained} source_seq gaps not explained by a sampler stall longer than depth={depth} periods")
    return problems, gaps, missed


def verify_realtime(samples: np.ndarray, logs: np.ndarray, depth: int, source_missed: int) -> dict[str, Any]:
    """End-to-end checks of what a Sampler drained from gpu.power_source(depth).

    Polled faster than the logger, consecutive samples must have consecutive
    ``source_seq``. The only legitimate gap is a sampler stall longer than
    ``depth`` logger periods (a loaded box): then the poll after the stall
    returned a full ``depth`` of readings, the first of them flagged
    FLAG_SOURCE_GAP, the missed logs were published after the poll before
    the stall began, and SamplerStats.source_missed counts them. Such gaps
    are counted as ``stall_gaps``; any other gap is a defect.
    """
    res: dict[str, Any] = {"samples": int(len(samples))}
    if len(samples) == 0:
        res["ok"] = False
        res["problems"] = ["no samples"]
        return res
    problems = []
    sseq = samples["source_seq"].astype(np.int64)
    host = samples["host_ns"]
    if (np.diff(sseq) < 1).any():
        problems.append("source_seq not increasing")
    if not (np.diff(samples["seq"].astype(np.int64)) == 1).all():
        problems.append("sampler seq not contiguous (ring overrun)")
    lseq = logs["seq"].astype(np.int64)
    found_problems, margin = _check_values(samples, logs, sseq, lseq)
    problems += found_problems
    # Gaps: each must be a stall the sampler reported.
    gap_problems, gaps, missed = _check_gaps(samples, logs, sseq, lseq, depth, source_missed)
    problems += gap_problems
    # Completeness: every log published in the sampler's window was seen, or
    # lies in a stall gap.
    last_poll = int(host.max())
    expected = lseq[(lseq >= sseq[0]) & (logs["publish_ns"] <= last_poll)]
    if len(expected) != len(sseq) + missed or not np.isin(sseq, expected).all():
        problems.append(f"sampler saw {len(sseq)} logs (+{missed} in stall gaps), {len(expected)} were published in its window")
    res.update(
        {
            "first_source_seq": int(sseq[0]),
            "last_source_seq": int(sseq[-1]),
            "contiguous": bool(len(gaps) == 0),
            "stall_gaps": int(len(gaps)),
            "logs_missed_in_stalls": missed,
            "max_interval_between_new_readings_ms": round(float(np.diff(np.unique(host)).max(initial=0)) / 1e6, 3),
            "host_minus_publish_us_min": round(float(margin.min()) / 1e3, 3),
            "host_minus_publish_us_median": round(float(np.median(margin)) / 1e3, 3),
            "ok": not problems,
            "problems": problems,
        }
    )
    return res


def realtime_phase(source_kind: str, rate_hz: int, seconds: float, depth: int, seed: int, kernel: str, execs: int, gap_ms: float) -> dict[str, Any]:
    """One phase: the GEMM workload on the main thread, a sampler on `source_kind`."""
    gpu = fg.sim.SimGPU(seed=seed, realtime=True)
    period = int(round(1e9 / rate_hz))
    sampler = None
    if source_kind == "sim":
        src: Any = gpu.power_source(depth=depth)
    elif source_kind == "synthetic":
        src = fg.native.SyntheticSource(period_ns=1_000_000, depth=depth)
    else:
        src = None
    if src is not None:
        sampler = fg.native.Sampler(src, period_ns=period, capacity=1 << 16)
    chunks = []
    if sampler is not None:
        sampler.start()
    c0, w0 = time.thread_time(), time.perf_counter()
    end = w0 + seconds
    seqs = 0
    while time.perf_counter() < end:
        gpu.sequence([(kernel, execs)])
        gpu.idle(gap_ms * 1e6)
        seqs += 1
        if sampler is not None and sampler.available > 4096:
            chunks.append(sampler.drain())
    c1, w1 = time.thread_time(), time.perf_counter()
    res: dict[str, Any] = {
        "source": source_kind,
        "rate_hz": rate_hz,
        "sequences": seqs,
        "executions": int(len(gpu.executions())),
        "main_cpu_fraction": round((c1 - c0) / (w1 - w0), 4),
        "main_wall_s": round(w1 - w0, 3),
    }
    if sampler is not None:
        sampler.stop()
        if sampler.available:
            chunks.append(sampler.drain())
        st = sampler.stats()
        d = st.as_dict()
        res.update(
            {
                "sampler_cpu_fraction": round(st.cpu_fraction, 4),
                "sampler_cpu_us_per_poll": round(st.cpu_time_ns / max(st.polls, 1) / 1e3, 3),
                "polls": d["polls"],
                "samples": d["samples"],
                "duplicates": d["duplicates"],
                "drops": d["drops"],
                "source_missed": d["source_missed"],
                "deadline_misses": d["deadline_misses"],
                "mean_period_ns": round(d["mean_period_ns"], 1),
                "jitter_p50_us": d["jitter_p50_ns"] / 1e3,
                "jitter_p99_us": d["jitter_p99_ns"] / 1e3,
                "jitter_max_us": d["jitter_max_ns"] / 1e3,
            }
        )
        if source_kind == "sim":
            samples = np.concatenate(chunks) if chunks else np.empty(0, dtype=fg.native.SAMPLE_DTYPE)
            res["verify"] = verify_realtime(samples, gpu.logs(), depth, d["source_missed"])
    return res


def bench_realtime(rates: tuple[int, ...], seconds: float, repeats: int, depth: int, seed: int) -> dict[str, Any]:
    kernel, execs, gap_ms = "cb-4k-gemm", 25, 5.0
    out: dict[str, Any] = {
        "workload": f"main thread: SimGPU(realtime=True).sequence([({kernel!r}, {execs})]) then idle({gap_ms} ms), repeated",
        "seconds_per_phase": seconds,
        "repeats": repeats,
        "depth": depth,
        "baseline": "the same Sampler polling SyntheticSource(period_ns=1 ms, depth=depth) while the same workload runs",
        "rates": [],
    }
    # The main thread alone drives the simulation (no sampler): its CPU then.
    alone = [realtime_phase("none", 1000, seconds, depth, seed, kernel, execs, gap_ms) for _ in range(repeats)]
    out["no_sampler"] = {
        "main_cpu_fraction_median": median([a["main_cpu_fraction"] for a in alone]),
        "phases": alone,
    }
    print(f"  no sampler: main thread CPU {out['no_sampler']['main_cpu_fraction_median']:.3f}", flush=True)
    for rate in rates:
        phases: dict[str, list[dict[str, Any]]] = {"synthetic": [], "sim": []}
        for r in range(repeats):
            # Alternate the order so drift in the box's load hits both alike.
            order = ("synthetic", "sim") if r % 2 == 0 else ("sim", "synthetic")
            for kind in order:
                phases[kind].append(realtime_phase(kind, rate, seconds, depth, seed + r, kernel, execs, gap_ms))
        syn = median([p["sampler_cpu_fraction"] for p in phases["synthetic"]])
        sm = median([p["sampler_cpu_fraction"] for p in phases["sim"]])
        syn_pp = median([p["sampler_cpu_us_per_poll"] for p in phases["synthetic"]])
        sm_pp = median([p["sampler_cpu_us_per_poll"] for p in phases["sim"]])
        entry = {
            "rate_hz": rate,
            "sampler_cpu_fraction_sim_median": sm,
            "sampler_cpu_fraction_synthetic_median": syn,
            "ratio_sim_over_synthetic": round(sm / syn, 3) if syn > 0 else None,
            "sampler_cpu_us_per_poll_sim_median": sm_pp,
            "sampler_cpu_us_per_poll_synthetic_median": syn_pp,
            "sim_extra_cpu_us_per_poll": round(sm_pp - syn_pp, 3),
            "main_cpu_fraction_sim_median": median([p["main_cpu_fraction"] for p in phases["sim"]]),
            "main_cpu_fraction_synthetic_median": median([p["main_cpu_fraction"] for p in phases["synthetic"]]),
            "deadline_misses_sim": [p["deadline_misses"] for p in phases["sim"]],
            "deadline_misses_synthetic": [p["deadline_misses"] for p in phases["synthetic"]],
            "jitter_max_us_sim": [p["jitter_max_us"] for p in phases["sim"]],
            "jitter_max_us_synthetic": [p["jitter_max_us"] for p in phases["synthetic"]],
            "stall_gaps_sim": sum(p["verify"].get("stall_gaps", 0) for p in phases["sim"]),
            "verify_ok": all(p["verify"]["ok"] for p in phases["sim"]),
            "phases": phases,
        }
        out["rates"].append(entry)
        print(
            f"  {rate:6d} Hz: sampler CPU sim {sm:.4f} vs synthetic {syn:.4f} (x{entry['ratio_sim_over_synthetic']}),"
            f" {sm_pp:.2f} vs {syn_pp:.2f} us/poll; main CPU {entry['main_cpu_fraction_sim_median']:.3f}"
            f" (sim-polled) / {entry['main_cpu_fraction_synthetic_median']:.3f} (synthetic); deadline misses sim {entry['deadline_misses_sim']}"
            f" / synthetic {entry['deadline_misses_synthetic']}; stall gaps {entry['stall_gaps_sim']}; verify ok={entry['verify_ok']}",
            flush=True,
        )
        for p in phases["sim"]:
            if not p["verify"]["ok"]:
                print(f"    VERIFY FAILED: {p['verify']['problems']}", flush=True)
    return out


# ----------------------------------------------------------------- report


def readme_section(res: dict[str, Any], argv: list[str]) -> str:
    v, rt, sysi = res["virtual"], res["realtime"], res["system"]
    lines = [
        SECTION,
        "",
        f"`python {' '.join(['bench/sim_bench.py'] + argv)}` (full results: `bench/results/sim.json`). "
        f"Machine: {sysi['machine']}, {sysi['cpus_allowed']} CPUs allowed, load average "
        f"{sysi['loadavg_1_5_15'][0]} at start (shared box: absolute figures are noisy, ratios less so).",
        "",
        f"**Virtual time**: {v['runs']} runs x {v['executions_per_run']} executions, {v['gap_ms']:g} ms virtual idle "
        f"between runs, median of {v['repeats']}. `wrapper` = `SimGPU.run` + `SimGPU.idle` (returns each run's "
        "records); `core` = bare `SimDevice.launch/synchronize/advance`.",
        "",
        "| kernel | truth | mode | wall (ms) | executions/s | virtual s | x real time |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for c in v["cases"]:
        lines.append(
            f"| {c['kernel']} | {c['record_truth']} | {c['mode']} | {c['wall_s_median'] * 1e3:.1f} | "
            f"{c['executions_per_s']:,.0f} | {c['virtual_s']:.2f} | {c['speedup_virtual_over_wall']:,.0f} |"
        )
    t = v["target"]
    sc = v["scaling"]
    lines += [
        "",
        f"Target, {t['claim']}: {t['wall_s_median'] * 1e3:.1f} ms, **{'met' if t['met'] else 'NOT met'}** "
        f"({t['criterion']}).",
        "",
        f"Per-run cost against campaign length ({sc['kernel']}, truth off, one pass each): both should stay flat "
        "(`SimGPU.sequence` fetches only the records its run added); a wrapper cost that grows with the campaign "
        "would mean it copies the whole history again.",
        "",
        "| runs | wrapper ms/run | core ms/run |",
        "|---:|---:|---:|",
    ]
    lines += [f"| {q['runs']} | {q['wrapper_ms_per_run']:.3f} | {q['core_ms_per_run']:.3f} |" for q in sc["points"]]
    lines += [
        "",
        f"**Real time**: {rt['workload']}, {rt['seconds_per_phase']:g} s per phase, {rt['repeats']} phases per source "
        f"alternating; sampler on `gpu.power_source(depth={rt['depth']})` vs {rt['baseline']}. "
        "CPU fraction = thread CPU time / wall time (1.0 = one core).",
        "",
        "| poll rate | sampler CPU, sim | sampler CPU, synthetic | ratio | CPU us/poll sim / synthetic | main CPU (sim-polled / synthetic-polled) | deadline misses sim / synthetic | stall gaps | end-to-end checks |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for e in rt["rates"]:
        lines.append(
            f"| {e['rate_hz'] / 1000:g} kHz | {e['sampler_cpu_fraction_sim_median']:.4f} | "
            f"{e['sampler_cpu_fraction_synthetic_median']:.4f} | {e['ratio_sim_over_synthetic']} | "
            f"{e['sampler_cpu_us_per_poll_sim_median']:.2f} / {e['sampler_cpu_us_per_poll_synthetic_median']:.2f} | "
            f"{e['main_cpu_fraction_sim_median']:.3f} / {e['main_cpu_fraction_synthetic_median']:.3f} | "
            f"{sum(e['deadline_misses_sim'])} / {sum(e['deadline_misses_synthetic'])} | {e['stall_gaps_sim']} | "
            f"{'pass' if e['verify_ok'] else 'FAIL'} |"
        )
    lines += [
        "",
        f"Main thread CPU with no sampler at all (it then drives the simulation alone): "
        f"{rt['no_sampler']['main_cpu_fraction_median']:.3f}. Both sources cost the sampler thread mostly its own "
        "sleep-then-spin wait, so the CPU ratio is close to 1 and noisy on a loaded box; the difference in CPU per "
        "poll is the simulation's own cost (the poll advances the device to now).",
        "",
        "End-to-end checks on every sim-polled phase (also `tests/test_sim_realtime.py`): consecutive "
        "`source_seq`, values, `source_ts` and `window_ns` equal to `gpu.logs()` for the same seq, "
        "`host_ns >= publish_ns`, every log published while sampling seen. The only gaps allowed are *stall gaps*: "
        "the sampler thread did not run for more than `depth` logger periods (counted in deadline misses on a loaded "
        "box), the poll after returned a full `depth`, flagged `FLAG_SOURCE_GAP`, and `source_missed` counts exactly "
        "the missing logs; any other gap fails the check.",
        "",
    ]
    return "\n".join(lines)


def write_readme_section(text: str) -> None:
    """Replace (or append) our section of bench/results/README.md."""
    write_section(SECTION, text, RESULTS / "README.md")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200, help="runs per virtual campaign (default 200)")
    ap.add_argument("--execs", type=int, default=25, help="executions per run (default 25)")
    ap.add_argument("--gap-ms", type=float, default=50.0, help="virtual idle between runs, ms (default 50)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of each virtual campaign (default 3)")
    ap.add_argument("--seconds", type=float, default=2.0, help="wall seconds per real-time phase (default 2)")
    ap.add_argument("--rt-repeats", type=int, default=3, help="real-time phases per source and rate (default 3)")
    ap.add_argument("--depth", type=int, default=4, help="power_source depth (default 4)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="a smoke run: small and short, writes nothing")
    ap.add_argument("--out", type=Path, default=RESULTS / "sim.json")
    ap.add_argument("--no-readme", action="store_true", help="do not touch bench/results/README.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.repeats, args.seconds, args.rt_repeats = 20, 1, 0.3, 1
    for name in ("runs", "execs", "repeats", "rt_repeats", "depth"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')}={getattr(args, name)}: must be >= 1")
    if args.seconds <= 0 or args.gap_ms < 0:
        ap.error("--seconds must be > 0 and --gap-ms >= 0")

    res: dict[str, Any] = {"benchmark": "sim", "system": system_info(), "argv": argv}
    print("(a) virtual-time campaigns", flush=True)
    res["virtual"] = bench_virtual(args.runs, args.execs, args.gap_ms, args.repeats, args.seed)
    print("(b) real-time sampling overhead", flush=True)
    res["realtime"] = bench_realtime((1000, 10000), args.seconds, args.rt_repeats, args.depth, args.seed)
    res["system"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    ok = all(e["verify_ok"] for e in res["realtime"]["rates"])
    if args.quick:
        print("quick run: nothing written")
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")
        print(f"wrote {args.out}")
        if not args.no_readme:
            write_readme_section(readme_section(res, argv))
            print(f"updated {RESULTS / 'README.md'} ({SECTION})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
