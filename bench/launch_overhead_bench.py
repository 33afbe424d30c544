"""Native launch capture's overhead: CPU per launch record against a discarding client, drops, and the sampler beside it.

For each vendor (the rocprofiler-sdk tool on its stand-in runtime; the CUPTI consumer on the stand-in
libcupti, where the CUPTI headers were found at build time) the stand-in delivers the same dispatch
stream, at 10^4 and 10^5 kernel records per second with the default ring (FINGRAV_LAUNCH_CAPACITY
unset), to either

* the shipped tool (``libfingrav_rocprofiler_tool.so`` / ``libfingrav_cupti_tool.so``), which rings
  each record and writes the CRC-framed journal, or
* a client of the same runtime, configured alike (same buffer sizes, own delivery thread), that walks
  every record and discards it (``bench/rocprofiler_discard_tool.cpp``, ``bench/cupti_discard_tool.cpp``).

The consumer's cost per record is the difference, per repetition, of the process's CPU time less the
dispatching thread's over the stream and the runtime's shutdown, divided by the records: the clients run
on the runtime's delivery threads (and the capture on its writer), never on the dispatching thread, whose
CPU is the stand-in's own per-dispatch work, identical for both clients and, on a shared machine, most of
the noise (hundreds of ns a record from one run to the next at 10^4/s). The two clients alternate within
each repetition; the figure is the median of the per-repetition differences, with their quartiles and
range. The whole-process difference is reported beside it, with its spread. Drops are read from the
journal (``read_launches``: the ring's and the vendor's). The sampler (1 ms polls of a synthetic source,
drained every 100 ms) runs twice in one process per repetition: alone, then beside the 10^5/s stream
into the shipped tool; its CPU per poll and poll lateness are compared as ratios.

Targets: at most 200 ns per record (off the dispatching thread, median); no drop at 10^5 per second; sampler cost unchanged within
noise. Build and run (no Boost, no GPU needed; the CUPTI half needs ``pip install nvidia-cuda-cupti-cu12``
in the Python that configures)::

    cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DFINGRAV_BUILD_BENCH=ON \\
        -DPython_EXECUTABLE=$(which python) && cmake --build build/bench -j2 \\
        --target launch_overhead fingrav_rocprofiler_discard_tool fingrav_rocprofiler_tool \\
        fingrav_standin_rocprofiler fingrav_cupti_tool fingrav_standin_cupti fingrav_cupti_discard_tool
    PYTHONPATH=python python bench/launch_overhead_bench.py --build build/bench

Results: ``bench/results/launch_overhead.json`` and the "Launch capture overhead" section of
``bench/results/README.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_readme import RESULTS, write_section  # noqa: E402

TARGET_NS = 200.0


def _vendors(build: Path) -> dict[str, dict[str, Path]]:
    out = {}
    rocm = {"standin": build / "libfingrav_standin_rocprofiler.so", "tool": build / "libfingrav_rocprofiler_tool.so",
            "discard": build / "bench" / "libfingrav_rocprofiler_discard_tool.so"}
    cuda = {"standin": build / "libfingrav_standin_cupti.so", "tool": build / "libfingrav_cupti_tool.so",
            "discard": build / "bench" / "libfingrav_cupti_discard_tool.so"}
    for name, paths in (("rocm", rocm), ("cuda", cuda)):
        missing = [str(p) for p in paths.values() if not p.exists()]
        if missing:
            print(f"{name}: left out, not built: {', '.join(missing)}", file=sys.stderr)
        else:
            out[name] = paths
    return out


def _run(exe: Path, vendor: str, paths: dict[str, Path], client: str, n: int, rate: int,
         sampler_s: float = 0.0) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FINGRAV_", "ROCP_", "CUDA_INJECTION"))}
    lib = str(paths[client])
    with tempfile.TemporaryDirectory() as d:
        if client == "tool":
            env["FINGRAV_LAUNCH_DIR"] = d
        if vendor == "rocm":
            env["ROCP_TOOL_LIBRARIES"] = lib
        else:
            env["CUDA_INJECTION64_PATH"] = lib
            env["FINGRAV_CUPTI_LIBRARY"] = str(paths["standin"])
        cmd = [str(exe), str(paths["standin"]), str(n), str(rate)] + ([str(sampler_s)] if sampler_s else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        out: dict[str, Any] = json.loads(proc.stdout)
        if client == "tool":
            from fingrav_native.files import read_launches

            log = read_launches(d)
            out.update(written=int(len(log.records)), dropped=int(log.dropped),
                       vendor_dropped=int(log.vendor_dropped), closed=bool(log.closed))
    return out


def _spread(values: list[float]) -> dict[str, float]:
    """Median, quartiles and range of the per-repetition figures."""
    q1, med, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": q1, "q3": q3, "min": min(values), "max": max(values)}


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def _carry_over(results: dict[str, Any]) -> None:
    """Keeps the earlier results of a vendor not built here, marked with their date, rather than drop them."""
    path = RESULTS / "launch_overhead.json"
    if not path.exists():
        return
    earlier = json.loads(path.read_text())
    for vendor, v in earlier.get("vendors", {}).items():
        if vendor not in results["vendors"]:
            results["vendors"][vendor] = dict(v, carried_from=v.get("carried_from", earlier.get("date")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=Path("build/bench"), help="the CMake build folder")
    ap.add_argument("--records", type=int, default=60_000, help="kernel records per dispatch stream")
    ap.add_argument("--reps", type=int, default=7, help="repetitions (clients alternate within each)")
    ap.add_argument("--no-write", action="store_true", help="print only; write no result file")
    args = ap.parse_args(argv)
    exe = args.build / "bench" / "launch_overhead"
    if not exe.exists():
        raise SystemExit(f"{exe}: not built; see this script's docstring for the build command")
    vendors = _vendors(args.build)
    load0 = os.getloadavg()[0]
    results: dict[str, Any] = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                           "load_avg_start": load0},
                               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                               "records": args.records, "reps": args.reps, "target_ns_per_record": TARGET_NS,
                               "vendors": {}}
    for vendor, paths in vendors.items():
        per_rate = {}
        for rate in (10_000, 100_000):
            n = args.records
            diffs, off_diffs, tool_ns, discard_ns, drops, loads = [], [], [], [], [], []
            for rep in range(args.reps):
                order = ("tool", "discard") if rep % 2 == 0 else ("discard", "tool")
                got = {c: _run(exe, vendor, paths, c, n, rate) for c in order}
                tool_ns.append(got["tool"]["cpu_ns_per_record"])
                discard_ns.append(got["discard"]["cpu_ns_per_record"])
                diffs.append(tool_ns[-1] - discard_ns[-1])
                off_diffs.append(got["tool"]["off_dispatch_ns_per_record"] - got["discard"]["off_dispatch_ns_per_record"])
                drops.append(got["tool"]["dropped"] + got["tool"]["vendor_dropped"] + n - got["tool"]["written"])
                loads.append(os.getloadavg()[0])
            per_rate[str(rate)] = {"records": n, "consumer_cpu_ns_per_record": statistics.median(diffs),
                                   "per_rep_ns": diffs, "process_spread_ns": _spread(diffs),
                                   "consumer_cpu_ns_per_record_off_dispatch": statistics.median(off_diffs),
                                   "per_rep_off_dispatch_ns": off_diffs, "off_dispatch_spread_ns": _spread(off_diffs),
                                   "tool_process_ns_per_record": statistics.median(tool_ns),
                                   "discard_process_ns_per_record": statistics.median(discard_ns),
                                   "drops_max": max(drops), "load_avg_per_rep": loads}
            print(f"{vendor} {rate}/s: consumer off the dispatching thread {statistics.median(off_diffs):.0f} ns/record "
                  f"(per rep {', '.join(f'{d:.0f}' for d in off_diffs)}); whole process "
                  f"{statistics.median(diffs):.0f} (per rep {', '.join(f'{d:.0f}' for d in diffs)}); "
                  f"drops max {max(drops)}; load {min(loads):.1f}-{max(loads):.1f}", flush=True)
        samp = []
        for _ in range(args.reps):
            r = _run(exe, vendor, paths, "tool", args.records, 100_000, sampler_s=args.records / 100_000)
            a, b = r["sampler_alone"], r["sampler_beside"]
            samp.append({"cpu_per_poll_ratio": _ratio(b["cpu_ns_per_poll"], a["cpu_ns_per_poll"]),
                         "late_p50_ratio": _ratio(b["late_p50_ns"], a["late_p50_ns"]),
                         "late_p99_ratio": _ratio(b["late_p99_ns"], a["late_p99_ns"]), "alone": a, "beside": b})
        sampler = {k: statistics.median(s[k] for s in samp) for k in ("cpu_per_poll_ratio", "late_p50_ratio",
                                                                       "late_p99_ratio")}
        sampler["runs"] = samp
        print(f"{vendor} sampler beside the 10^5/s capture / alone: CPU per poll x{sampler['cpu_per_poll_ratio']:.2f}, "
              f"lateness p50 x{sampler['late_p50_ratio']:.2f}, p99 x{sampler['late_p99_ratio']:.2f}", flush=True)
        results["vendors"][vendor] = {"rates": per_rate, "sampler": sampler}
    results["machine"]["load_avg_end"] = os.getloadavg()[0]
    if args.no_write:
        return 0
    _carry_over(results)
    (RESULTS / "launch_overhead.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = ["## Launch capture overhead", "",
             f"`PYTHONPATH=python python bench/launch_overhead_bench.py --build {args.build}` (the build command is in "
             f"the script's docstring; full results: `bench/results/launch_overhead.json`). {os.cpu_count()} CPUs, "
             f"load average {load0:.2f} at start, {results['machine']['load_avg_end']:.2f} at the end (other "
             f"jobs sharing the machine); {args.reps} repetitions of {args.records:,}-record streams, medians "
             "of the paired differences; the sampler (1 ms polls) alone, then beside the 10^5/s stream, in one "
             "process.", "",
             "| vendor | rate (records/s) | consumer CPU per record (ns), off the dispatching thread: median "
             "[quartiles] (range) | target | whole process: median [quartiles] | drops | sampler CPU/poll "
             "beside/alone | lateness p50, p99 beside/alone |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for vendor, v in results["vendors"].items():
        s = v["sampler"]
        when = f" (run of {v['carried_from']}, not rebuilt here)" if "carried_from" in v else ""
        for rate, r in v["rates"].items():
            ok = "met" if r["consumer_cpu_ns_per_record_off_dispatch"] <= TARGET_NS else "**missed**"
            off = r.get("off_dispatch_spread_ns")
            proc = r.get("process_spread_ns")
            off_text = (f"{off['median']:.0f} [{off['q1']:.0f}, {off['q3']:.0f}] ({off['min']:.0f} to {off['max']:.0f})"
                        if off else f"{r['consumer_cpu_ns_per_record_off_dispatch']:.0f}")
            proc_text = (f"{proc['median']:.0f} [{proc['q1']:.0f}, {proc['q3']:.0f}]" if proc
                         else f"{r['consumer_cpu_ns_per_record']:.0f}")
            lines.append(f"| {vendor}{when} | {int(rate):,} | {off_text} | <= 200 ({ok}) | {proc_text} | "
                         f"{r['drops_max']} | {s['cpu_per_poll_ratio']:.2f} | {s['late_p50_ratio']:.2f}, "
                         f"{s['late_p99_ratio']:.2f} |")
    write_section("## Launch capture overhead", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
