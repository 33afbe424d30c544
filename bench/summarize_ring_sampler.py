"""Writes the ring + sampler section of bench/results/README.md from ring.json
and sampler.json, so the summary can never disagree with the figures next to
it, followed by the hand-written analysis in bench/ring_sampler_notes.md. The
README is shared with the other benchmarks: only this section is replaced
(bench/results_readme.py).

Usage: python bench/summarize_ring_sampler.py [--results DIR] [--load TEXT]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_readme import write_section  # noqa: E402

HERE = Path(__file__).resolve().parent
SECTION = "## Ring throughput and sampler overhead"
NOTES = HERE / "ring_sampler_notes.md"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_rev(root: Path) -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "csrc", "bench/ring_bench.cpp",
             "bench/sampler_bench.py", "bench/sleep_floor.cpp"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        return rev + (" (with uncommitted changes to csrc/ or bench sources)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _met(flag: bool) -> str:
    return "met" if flag else "**not met**"


def _target_text(name: str, check: dict[str, Any]) -> str:
    if name == "cpu_fraction":
        limit = float(check["target"].split()[-1])
        return f"CPU {check['value'] * 100:.2f}% < {limit * 100:g}%: {_met(check['met'])}"
    if name == "jitter_p99_ns":
        limit = float(check["target"].split()[-1])
        return f"p99 {check['value'] / 1e3:.1f} us < {limit / 1e3:g} us: {_met(check['met'])}"
    if name == "drops":
        return f"{check['value']} lost with a 100 ms drain: {_met(check['met'])}"
    return f"{name} {check['value']} {check['target']}: {_met(check['met'])}"


def ring_section(d: dict[str, Any]) -> list[str]:
    c = d["config"]
    lines = [
        "### Ring throughput (`ring.json`)",
        "",
        f"One producer and one consumer thread{' pinned to CPUs ' + str(c['cpus']) if c['pinned'] else ''}, "
        f"capacity {c['capacity']}, producer pushes one item at a time, consumer pops one at a time "
        f"(`single`), up to {c['batch']} at a time as fast as it can (`batch`: our `pop_into`, Boost's "
        "`pop(T*, n)`, one lock per batch for the mutex queue), or the same but waiting about 1 us after a "
        f"batch of at most {c['batch'] // 4} (`backoff`: lets items accumulate, as the sampler's 100 ms "
        f"drain does, so trials stay in the streaming regime; see the notes). Trials of {c['items_per_trial']:,} items "
        f"({c['mutex_items_per_trial']:,} for the mutex queue; a quarter of each for 64-byte items), the three "
        "queues interleaved within each "
        f"repetition, repeated until each queue has {c['clean_wanted']} clean trials (up to {c['max_reps_run']} "
        "repetitions were run). "
        f"Boost {c['boost_version']} `spsc_queue` with compile-time capacity (its fastest form); "
        f"compiler {c['compiler']}.",
        "",
        "| item | pop | fingrav Mitems/s | boost Mitems/s | mutex Mitems/s | ours/boost (target >= "
        f"{d['targets']['min_ratio_vs_boost']:g}x) | ours/mutex (target >= {d['targets']['min_ratio_vs_mutex']:g}x) "
        "| best-of ratios | statistic | clean / trials |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in d["results"]:
        ips = r["items_per_s"]
        lines.append(
            f"| {r['item']} ({r['item_bytes']} B) | {r['pop']} | {ips['fingrav'] / 1e6:.1f} | {ips['boost'] / 1e6:.1f} "
            f"| {ips['mutex'] / 1e6:.2f} | {r['ratio_vs_boost']:.2f}x {_met(r['met_vs_boost'])} "
            f"| {r['ratio_vs_mutex']:.1f}x {_met(r['met_vs_mutex'])} "
            f"| {r['best_ratio_vs_boost']:.2f}x / {r['best_ratio_vs_mutex']:.1f}x | {r['statistic']} "
            f"| {r['fewest_clean_trials']} / {r['trials']} |"
        )
    lines += [
        "",
        "Clean trial: neither thread was involuntarily switched out (`getrusage(RUSAGE_THREAD)`). "
        "`median-clean`: median over the clean trials; `median-all`: median over all trials, used for a row "
        f"when some queue had fewer than {c['min_clean_trials']} clean ones (the machine was too busy: such "
        "figures measure the scheduler more than the queue). Clean / trials: the fewest clean trials of the "
        "row's three queues, and the trials each ran. Best-of: ratios of the fastest trials.",
        "",
    ]
    return lines


def sampler_section(d: dict[str, Any]) -> list[str]:
    c = d["config"]
    lines = [
        "### Sampler vs a pure-Python polling loop (`sampler.json`)",
        "",
        f"Each run {c['seconds_per_run']:g} s, {c['reps']} repetitions (medians; counts summed), a consumer "
        f"draining every {c['drain_period_s'] * 1e3:g} ms, ring capacity {c['capacity']}. The baseline is a "
        "Python thread calling `source.poll()` through the bindings with `time.sleep` to absolute deadlines. "
        "Jitter = poll start minus its deadline. CPU = poller thread CPU time / wall time (1.0 = one core).",
        "",
        "| rate | source | impl | period us | jitter p50 us | p99 us | max us | CPU % | process CPU % "
        "| drops | source readings missed |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in d["results"]:
        for name, s in (("C++ sampler", r["cpp_sampler"]), ("Python loop", r["python_loop"])):
            lines.append(
                f"| {r['rate']} | {r['source']} | {name} | {s['mean_period_ns'] / 1e3:.1f} "
                f"| {s['jitter_p50_ns'] / 1e3:.1f} | {s['jitter_p99_ns'] / 1e3:.1f} | {s['jitter_max_ns'] / 1e3:.0f} "
                f"| {s['poller_cpu_fraction'] * 100:.2f} | {s['process_cpu_fraction'] * 100:.2f} "
                f"| {s['drops']} | {s['source_missed']} |"
            )
    lines += [
        "",
        "Ratios C++ / Python (below 1: the C++ sampler is cheaper or tighter) and the targets for the "
        "C++ sampler:",
        "",
        "| rate | source | CPU ratio | jitter p50 ratio | jitter p99 ratio | targets |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in d["results"]:
        q = r["ratios_cpp_over_python"]
        t = "; ".join(_target_text(k, v) for k, v in r["targets"].items())
        lines.append(
            f"| {r['rate']} | {r['source']} | {q['poller_cpu_fraction']:.2f} | {q['jitter_p50']:.3f} "
            f"| {q['jitter_p99']:.3f} | {t} |"
        )
    floor = d.get("sleep_floor") or {}
    if floor:
        lines += [
            "",
            "Kernel floor on this machine, same run (`sleep_floor`: a C++ thread that only sleeps to absolute "
            "deadlines with 1 ns timer slack, no work, no spinning):",
            "",
            "| rate | lateness p50 us | p99 us | CPU % |",
            "|---|---:|---:|---:|",
        ]
        for rate, f in floor.items():
            lines.append(
                f"| {rate} | {f['lateness_p50_ns'] / 1e3:.1f} | {f['lateness_p99_ns'] / 1e3:.1f} "
                f"| {f['cpu_fraction'] * 100:.2f} |"
            )
    lines.append("")
    return lines


def section(ring: dict[str, Any], sampler: dict[str, Any], load: str) -> list[str]:
    m = sampler["machine"]
    out = [
        SECTION,
        "",
        "`bench/run_all.sh` builds and runs both, writes `ring.json` and `sampler.json`, and regenerates this "
        "section (figures generated by `bench/summarize_ring_sampler.py`; the notes at the end are "
        "`bench/ring_sampler_notes.md`).",
        "",
        f"- Date (UTC): {sampler['date']}",
        f"- Machine: {m['nproc']} CPUs, {_cpu_model()}, Linux {m['kernel']}, Python {m['python']}, "
        f"numpy {m['numpy']}, fingrav-native {m['fingrav_native']}",
        f"- Source: commit {_git_rev(HERE.parent)}",
    ]
    if load:
        out.append(f"- Load average: {load}")
    out += [
        "",
        "To reproduce:",
        "",
        "```sh",
        "apt-get install -y libboost-dev   # header-only baseline queue of the ring benchmark",
        "bench/run_all.sh                  # BUILD_DIR=..., VENV=... choose where it builds",
        "# or step by step:",
        "cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DFINGRAV_BUILD_BENCH=ON",
        "cmake --build build/bench --target ring_bench sleep_floor",
        "build/bench/bench/ring_bench --json bench/results/ring.json",
        "python3 -m venv build/bench-venv && build/bench-venv/bin/pip install .",
        "build/bench-venv/bin/python bench/sampler_bench.py --json bench/results/sampler.json \\",
        "    --sleep-floor build/bench/bench/sleep_floor",
        "build/bench-venv/bin/python bench/summarize_ring_sampler.py",
        "```",
        "",
        f"Headline: ring targets {_met(ring['all_targets_met'])}; sampler targets "
        f"{_met(sampler['all_targets_met'])} (details below).",
        "",
    ]
    out += ring_section(ring)
    out += sampler_section(sampler)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the ring + sampler section of bench/results/README.md.")
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--load", default="", help="load averages seen during the run, for the record")
    args = ap.parse_args(argv)
    ring = json.loads((args.results / "ring.json").read_text())
    sampler = json.loads((args.results / "sampler.json").read_text())
    lines = section(ring, sampler, args.load)
    if NOTES.is_file():
        lines.append(NOTES.read_text().rstrip())
    write_section(SECTION, "\n".join(lines) + "\n", args.results / "README.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
