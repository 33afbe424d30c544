"""Validate the NVIDIA backend on a real GPU (H100/H200 or any NVIDIA GPU with NVML power).

Measures what the backend's error budget rests on and records it, with the
exact command, in bench/results/nvidia_validate.json and a section of
bench/results/README.md:

1. %globaltimer through the PTX probe: bracketed read latency (bracket
   widths), the timer's update step, and the clock map's error bound from
   the fit (paper Section IV-B step 1);
2. the marker probe: gap between back-to-back probes on one stream (the
   marker placement error, step 4);
3. NVML, per power mode: the real sample period (intervals between
   timestamps of consecutive distinct samples while idle) and the averaging
   behaviour: the step response to a GEMM burst (time for the logged power
   to cross 10% and 90% of the idle-to-busy step, on the logger's own clock
   mapped to host time by the lower envelope), compared across modes;
4. end to end: ``fg.profile`` on a PyTorch fp16 GEMM at two sizes
   (default 8192 and 2048, the paper's CB-8K and CB-2K).

Needs an NVIDIA GPU, the driver (libcuda, libnvidia-ml) and a CUDA build of
PyTorch; without them it stops at once with a message saying which is
missing. Run from the repository root:

    python bench/nvidia_validate.py [--device 0] [--sizes 8192 2048] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_readme import RESULTS, write_section  # noqa: E402


def _fail(msg: str) -> None:
    print(f"nvidia_validate: {msg}", file=sys.stderr)
    raise SystemExit(2)


def _pct(a: np.ndarray, qs: tuple[float, ...] = (0, 10, 50, 90, 99, 100)) -> dict[str, float]:
    a = np.asarray(a, dtype=np.float64)
    if len(a) == 0:
        return {}
    return {("min" if q == 0 else "max" if q == 100 else f"p{q:g}"): float(np.percentile(a, q)) for q in qs}


def check_environment(device: int) -> tuple[Any, Any, dict]:
    """The modules needed, or a clear exit naming what is missing.

    Returns the compiled core's face for experts (``fingrav_native.native``) for its CUDA and NVML entry
    points (``cuda_devices``, ``nvml_devices``, ``NvmlPowerSource``, the driver's version and path): this
    check must read the driver below the backend. Everything else goes through ``fg``.
    """
    try:
        from fingrav_native import native as _core
    except ImportError as exc:
        _fail(f"fingrav_native is not installed ({exc}); pip install . first")
    try:
        devs = _core.cuda_devices()
    except RuntimeError as exc:
        _fail(f"no usable NVIDIA GPU: {exc}")
    if device >= len(devs):
        _fail(f"--device {device}: the CUDA driver sees {len(devs)} device(s)")
    for name in ("NvmlPowerSource", "nvml_devices"):
        if not hasattr(_core, name):
            _fail(f"this build of fingrav_native has no NVML support (fingrav_native.native.{name} missing)")
    try:
        import torch
    except ImportError:
        _fail("PyTorch is not installed; install a CUDA build (https://pytorch.org)")
    if not torch.cuda.is_available():
        _fail("torch.cuda.is_available() is False: install a CUDA build of PyTorch")
    return _core, torch, devs[device]


def measure_clock(backend: Any, reads: int) -> dict:
    import fingrav_native as fg

    b = backend.read_clocks(reads)
    width = (b[:, 2] - b[:, 0]).astype(np.float64)
    # The %globaltimer step the backend measured at start is the map's resolution: a timer that moves
    # once a microsecond cannot place a read to better than that, however tight the bracket.
    cmap = fg.clocks.fit_clock_map(b, tick_ns=1.0, resolution_ticks=backend.capabilities.device_resolution_ticks)
    return {
        "reads": reads,
        "bracket_width_ns": _pct(width),
        "resolution": backend.measure_timer_resolution(1024),
        "clock_map": {k: (float(v) if isinstance(v, (int, float, np.floating, np.integer)) else v)
                      for k, v in cmap.as_dict().items()},
        "sync_error_bound_ns": float(cmap.best_rtt_ns / 2 + cmap.residual_ns),
    }


def _gemm_burst(torch: Any, n: int, seconds: float) -> tuple[int, int]:
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    import fingrav_native as fg
    import fingrav_native.native  # fg.native.host_time_ns

    t0 = fg.native.host_time_ns()
    launches = 0
    while fg.native.host_time_ns() - t0 < seconds * 1e9:
        for _ in range(8):
            torch.matmul(a, b, out=c)
        launches += 8
        torch.cuda.synchronize()
    return t0, launches


def measure_nvml(_core: Any, torch: Any, nvml_index: int, quick: bool) -> dict:
    import fingrav_native as fg
    import fingrav_native.native  # fg.native: the sampler and its limits

    out: dict = {}
    idle_s, burst_s = (0.5, 1.0) if quick else (1.5, 3.0)
    for mode in ("samples", "instant", "average", "energy", "usage"):
        try:
            src = _core.NvmlPowerSource(nvml_index, mode)
        except Exception as exc:  # a mode this GPU/driver does not offer
            out[mode] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        info = src.info
        period_poll = int(min(max(fg.native.MIN_PERIOD_NS, 250_000), fg.native.MAX_PERIOD_NS))
        with fg.native.Sampler(src, period_ns=period_poll) as sampler:
            time.sleep(idle_s)
            t0, launches = _gemm_burst(torch, 8192, burst_s)
            time.sleep(idle_s)
        s = sampler.drain() if sampler.available else np.zeros(0, dtype=fg.native.SAMPLE_DTYPE)
        res: dict = {"logs": int(len(s)), "native_period_ns": int(info.native_period_ns),
                     "window_ns": int(info.window_ns), "clock_domain": info.clock_domain, "launches": launches}
        if len(s) >= 4:
            ts = s["source_ts"].astype(np.float64) * float(info.tick_ns)
            idle = s[s["host_ns"] < t0]
            steps = np.diff(ts[s["host_ns"] < t0])
            res["idle_interval_ns"] = _pct(steps[steps > 0])
            # Logger clock -> host: a log is seen after it is stamped, so the
            # lower envelope of (seen - stamped) is the offset (one-sided).
            offset = float(np.min(s["host_ns"] - ts))
            t_host = ts + offset
            busy = s[(t_host > t0 + 0.5 * burst_s * 1e9) & (t_host < t0 + burst_s * 1e9)]
            if len(idle) and len(busy):
                p_idle, p_busy = float(np.mean(idle["total"])), float(np.median(busy["total"]))
                res.update(idle_w=p_idle, busy_w=p_busy)
                after = (t_host >= t0)
                for frac in (0.1, 0.5, 0.9):
                    hit = np.flatnonzero(after & (s["total"] >= p_idle + frac * (p_busy - p_idle)))
                    res[f"rise_{int(frac * 100)}_ms"] = float((t_host[hit[0]] - t0) / 1e6) if len(hit) else None
        out[mode] = res
    return out


def profile_gemms(backend: Any, sizes: list[int], quick: bool) -> list[dict]:
    import fingrav_native as fg

    results = []
    for n in sizes:
        w = fg.backends.torch_gemm(n, n, n, dtype="float16", device=backend.device)
        t = time.time()
        p = fg.profile(w, backend, runs=20 if quick else None, progress=lambda m: print("  " + m, flush=True))
        eb = p.error_budget
        results.append({
            "workload": w.name, "seconds": round(time.time() - t, 1), "runs": p.runs, "mode": p.mode,
            "profiles": sorted(p.profiles),
            "error_budget_ns": {k: float(getattr(eb, k)) for k in ("clock_map_ns", "marker_ns", "logger_window_ns",
                                                                   "total_ns")},
            "clock": {k: v for k, v in p.clock.items() if isinstance(v, (int, float, str))},
        })
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", type=int, default=0, help="CUDA device index")
    ap.add_argument("--sizes", type=int, nargs="+", default=[8192, 2048], help="square GEMM sizes to profile")
    ap.add_argument("--power", default="samples", help="NVML mode for the profiles")
    ap.add_argument("--reads", type=int, default=2000, help="bracketed clock reads")
    ap.add_argument("--quick", action="store_true", help="shorter bursts and 20 runs per profile")
    ap.add_argument("--out", default=str(RESULTS / "nvidia_validate.json"))
    args = ap.parse_args(argv)
    if args.device < 0:
        ap.error(f"--device {args.device}: must be >= 0")
    if args.reads < 16:
        ap.error(f"--reads {args.reads}: must be >= 16")
    command = "python bench/nvidia_validate.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))

    _core, torch, dev = check_environment(args.device)
    import fingrav_native as fg

    print(f"device {args.device}: {dev['name']} ({dev['pci_bus_id']})", flush=True)
    backend = fg.open_device(f"nvidia:{args.device}:{args.power}")
    caps = backend.capabilities
    result: dict = {
        "command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "host": platform.node(),
        "device": {k: (list(v) if isinstance(v, tuple) else v) for k, v in dev.items()},
        "driver_cuda_version": _core.cuda_driver_version(), "libcuda": _core.cuda_library_path(),
        "nvml_index": backend.nvml_index, "torch": torch.__version__,
        "nvml_driver_version": next((d["driver_version"] for d in _core.nvml_devices()
                                     if d["index"] == backend.nvml_index), None),
        "capabilities": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(caps).items()},
        "marker_gap_ns": _pct(backend.marker_gaps_ns),
    }
    print("clock ...", flush=True)
    result["globaltimer"] = measure_clock(backend, args.reads)
    print("nvml modes ...", flush=True)
    result["nvml"] = measure_nvml(_core, torch, backend.nvml_index, args.quick)
    print("profiles ...", flush=True)
    result["profiles"] = profile_gemms(backend, args.sizes, args.quick)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    g = result["globaltimer"]
    lines = [
        "## NVIDIA validation", "",
        f"`{command}` on {dev['name']} (PCI {dev['pci_bus_id']}, driver {result['nvml_driver_version']}, "
        f"CUDA {result['driver_cuda_version']}), {result['date']}. Raw: `{out.name}`.", "",
        f"- Power mode `{args.power}`: {caps.sensor_semantics}; {caps.describe_figures()}.",
        f"- %globaltimer read (bracket width): p10 {g['bracket_width_ns'].get('p10', float('nan')):.0f} ns, "
        f"median {g['bracket_width_ns'].get('p50', float('nan')):.0f} ns; update step "
        f"{g['resolution']['min_ns']} ns (median {g['resolution']['median_ns']:.0f}); "
        f"sync error bound {g['sync_error_bound_ns']:.0f} ns.",
        f"- Marker probe gap (back-to-back): median {result['marker_gap_ns'].get('p50', float('nan')):.0f} ns, "
        f"p90 {result['marker_gap_ns'].get('p90', float('nan')):.0f} ns.", "",
        "| NVML mode | logs | idle interval median (ms) | rise 10% (ms) | rise 90% (ms) | idle W | busy W |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, r in result["nvml"].items():
        if "error" in r:
            lines.append(f"| {mode} | unavailable: {r['error']} | | | | | |")
            continue
        iv = r.get("idle_interval_ns", {}).get("p50")
        lines.append(f"| {mode} | {r['logs']} | {iv / 1e6 if iv else float('nan'):.2f} | {r.get('rise_10_ms')} | "
                     f"{r.get('rise_90_ms')} | {r.get('idle_w', float('nan')):.1f} | {r.get('busy_w', float('nan')):.1f} |")
    lines += ["", "| workload | runs | seconds | error budget total (ns) |", "|---|---|---|---|"]
    for p in result["profiles"]:
        lines.append(f"| {p['workload']} | {p['runs']} | {p['seconds']} | {p['error_budget_ns']['total_ns']:.0f} |")
    write_section("## NVIDIA validation", "\n".join(lines) + "\n")
    print(f"wrote {out} and the README section", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
