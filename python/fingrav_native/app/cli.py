"""The ``fingrav`` command line."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from typing import Any, Sequence, cast

import numpy as np

from fingrav_native.app import plot as fplot
from fingrav_native.app.demo import run_demo, run_sim_demo, run_synthetic_demo
from fingrav_native.app.plot import plot_sync_error
from fingrav_native.backends.amd import AmdBackend
from fingrav_native.backends.base import Backend
from fingrav_native.backends.devices import format_reports, list_backends
from fingrav_native.backends.nvidia import NvidiaBackend
from fingrav_native.backends.sim import LiveSimBackend, SimBackend
from fingrav_native.backends.workloads import resolve_workload, torch_gemm, torch_gemv
from fingrav_native.clocks.report import sync_report
from fingrav_native.files.profiles import ProfileFormatError, export_parquet, load_profile
from fingrav_native.files.trace import export_trace
from fingrav_native.insitu.capture import CaptureFormatError, load_capture
from fingrav_native.insitu.kineto import TraceFormatError
from fingrav_native.insitu.profile import profile_trace
from fingrav_native.method.campaign import CampaignFormatError, CampaignMismatchError, load_campaign_runs
from fingrav_native.method.phase import PHASES
from fingrav_native.method.profile import PROFILE_FILE, profile
from fingrav_native.method.progress import ProgressReporter, TerminalProgress
from fingrav_native.method.results import InterleavedProfile, Profile
from fingrav_native.sensors.characterize import characterize
from fingrav_native.sim.device import kernel_presets

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: Interrupted by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser for ``fingrav`` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="fingrav",
        description="Fine-grain GPU power profiles of sub-millisecond kernels (FinGraV).",
        epilog="examples:\n  fingrav demo\n  fingrav demo --live --source synthetic --seconds 1 --period-us 100",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="profile the paper's CB-4K GEMM (SSE, SSP) and MB->2K on the simulated GPU; write files and figures",
        description=(
            "Profile CB-4K GEMM (its SSE and SSP executions) and the paper's interleaved MB->2K case "
            "on the simulated MI300X-class GPU in virtual time (deterministic, a few seconds), write "
            "the profiles (.fgprof), a Perfetto trace and PNG figures into --out, and print a short "
            "summary with the timing error budget. --live instead polls a simulated GPU running in "
            "real time (or, with --source synthetic, the synthetic test source) with the C++ sampler."
        ),
        epilog="examples:\n  fingrav demo\n  fingrav demo --out demo-figs --seed 3\n"
               "  fingrav demo --live --seed 3 --period-us 100\n"
               "  fingrav demo --live --source synthetic --seconds 2 --period-us 100",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--out", default="fingrav-demo", metavar="DIR",
                      help="folder for the demo's files (default ./fingrav-demo)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the simulated GPU (default 0)")
    demo.add_argument("--live", action="store_true",
                      help="the live sampling demo instead (real time; writes no files)")
    demo.add_argument("--source", choices=("sim", "synthetic"), default=None,
                      help="--live only: what to sample (default sim)")
    demo.add_argument("--seconds", type=float, default=None,
                      help="--live --source synthetic only: how long to sample (default 1.0)")
    demo.add_argument("--period-us", type=float, default=None,
                      help="--live only: sampler period in microseconds (default 250)")
    demo.add_argument("--source-period-us", type=float, default=None,
                      help="--live --source synthetic only: how often it produces a reading, in microseconds "
                           "(default 1000)")
    devices = sub.add_parser(
        "devices",
        help="list every backend, what was found, and why any is unavailable",
        description=(
            "Report each backend (sim, amd, nvidia): whether it can profile here, the devices it "
            "found, and for an unavailable one why and the one fix (what to install or set). "
            "--verbose adds every library and device file looked for, with the path that loaded or "
            "every path tried. Exit code 0 when at least one hardware backend (or, with "
            "--backend, every named one) is available, 1 otherwise; the simulator is always available."
        ),
        epilog="examples:\n  fingrav devices\n  fingrav devices --verbose --backend nvidia\n  fingrav devices --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    devices.add_argument("--json", action="store_true", help="print the reports as JSON (always in full)")
    devices.add_argument("-v", "--verbose", action="store_true",
                         help="also list every library and device file looked for and every path tried")
    devices.add_argument("--backend", action="append", choices=("sim", "amd", "nvidia"),
                         help="report only this backend (repeatable)")
    plot = sub.add_parser(
        "plot",
        help="draw a saved profile's figures (whole run, kernel per component, SSP search)",
        description="Write PNG figures of a profile saved by save_profile / fingrav profile.",
        epilog="examples:\n  fingrav plot cb-4k.fgprof --out figs/\n  fingrav plot cb-4k.fgprof --out figs/ --format pdf\n  fingrav plot cb-8k.fgprof cb-4k.fgprof cb-2k.fgprof --out figs/   # Figure 8: side by side",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plot.add_argument("profile", nargs="+",
                      help="saved profile(s) (.fgprof); with several, also their kernels side by side per component")
    plot.add_argument("--out", default=".", help="folder for the figures (default: current folder)")
    plot.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="image format (default png)")
    plot.add_argument("--dpi", type=int, default=120, help="resolution of raster images (default 120)")
    export = sub.add_parser(
        "export",
        help="export a saved profile as a Perfetto trace, Parquet tables or a JSON summary",
        description=("Export a saved profile: --trace writes trace-event JSON for ui.perfetto.dev or "
                     "chrome://tracing; --parquet writes LOI, curve and timeline tables (needs pyarrow); "
                     "--summary writes the error budget, settings and per-profile figures as JSON."),
        epilog=("examples:\n  fingrav export cb-4k.fgprof --trace cb-4k.trace.json\n"
                "  fingrav export cb-4k.fgprof --parquet tables/ --summary summary.json"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("profile", help="a saved profile (.fgprof)")
    export.add_argument("--trace", metavar="FILE", help="write a trace-event JSON file")
    export.add_argument("--parquet", metavar="DIR", help="write Parquet tables into DIR")
    export.add_argument("--summary", metavar="FILE", help="write a JSON summary")
    _add_profile_parser(sub)
    _add_sync_parser(sub)
    _add_characterize_parser(sub)
    _add_trace_parser(sub)
    return parser


def _add_trace_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    trace = sub.add_parser(
        "trace",
        help="per-kernel power and energy of an application from its torch.profiler trace and a power capture",
        description=(
            "In-situ FinGraV: read a torch.profiler (Kineto) trace and the power logs a PowerRecorder "
            "captured while it ran, profile every kernel signature (name, grid, block) over its own "
            "executions, print the top-kernels table and the energy per iteration, and write a Perfetto "
            "trace with power counter tracks over the kernel slices, figures, and the table as JSON."
        ),
        epilog=("examples:\n  fingrav trace trace.json.gz --power power.npz --out insitu/\n"
                "  fingrav trace trace.json.gz --power power.npz --top 6 --format pdf"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    trace.add_argument("trace", help="a torch.profiler Chrome trace (.json or .json.gz)")
    trace.add_argument("--power", required=True, metavar="CAPTURE",
                       help="the power capture recorded beside it (PowerRecorder's .npz)")
    trace.add_argument("--out", default="fingrav-trace", metavar="DIR",
                       help="folder for the Perfetto trace, figures and table (default ./fingrav-trace)")
    trace.add_argument("--top", type=int, default=4, help="kernels whose stitched profiles are drawn (default 4)")
    trace.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="image format (default png)")
    trace.add_argument("--min-executions", type=int, default=20,
                       help="signatures with fewer executions are listed as not profiled (default 20)")
    trace.add_argument("--sensor", default=None, metavar="PRESET",
                       help="what each log measures, if not the capture's own sensor model (a preset name)")


BACKENDS = ("sim", "sim-live", "amd", "nvidia")


def _add_profile_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    prof = sub.add_parser(
        "profile",
        help="profile a kernel (the paper's eight steps) into a campaign folder; Ctrl-C keeps the runs",
        description=(
            "Profile one kernel with FinGraV: time it, pick runs and margin from the paper's Table I, find "
            "the steady-state-power execution by binary search, run the campaign, keep the golden runs, "
            "place and stitch the power logs. Every completed run is written to OUT/runs/ as it finishes, "
            "so Ctrl-C (exit code 130) loses at most the run under way; --resume OUT continues the campaign "
            "with the settings it was started with. The profile is saved as OUT/profile.fgprof.\n\n"
            "KERNEL is a simulator preset (cb-{8k,4k,2k}-gemm, mb-{8k,4k,2k}-gemv, allgather-64k, ...; see "
            "fingrav_native.sim.kernel_presets()) or, for amd/nvidia, 'module:function' naming a function "
            "that returns a fingrav_native.backends.workloads.Workload; on amd/nvidia the GEMM/GEMV presets run as "
            "PyTorch fp16 GEMMs/GEMVs of that size."),
        epilog=("examples:\n  fingrav profile cb-4k-gemm --out cb4k/\n"
                "  fingrav profile mb-2k-gemv --mode sse --runs 400 --margin 0.02 --out gemv/ --plots --trace\n"
                "  fingrav profile mymodels.layers:attention_workload --backend nvidia --device 1 --out attn/\n"
                "  fingrav profile --resume cb4k/\n\n"
                "exit codes: 0 done, 1 the campaign failed (device, library, no logs), 2 bad usage, "
                "130 interrupted (resume with --resume)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prof.add_argument("kernel", nargs="?", help="a preset name or module:function (not needed with --resume)")
    prof.add_argument("--backend", choices=BACKENDS, default=None,
                      help="where to run (default sim: the simulated GPU in virtual time)")
    prof.add_argument("--device", type=int, default=None, help="GPU index for amd/nvidia (default 0)")
    prof.add_argument("--mode", choices=("sse", "ssp", "both"), default=None,
                      help="execution(s) of interest (default both)")
    prof.add_argument("--runs", type=int, default=None, help="runs in the campaign (default: Table I guidance)")
    prof.add_argument("--margin", type=float, default=None,
                      help="golden-run bin margin in (0, 1) (default: Table I guidance)")
    prof.add_argument("--executions", type=int, default=None,
                      help="executions per run, skipping the SSP search (default: found by the search)")
    prof.add_argument("--seed", type=int, default=None, help="seed of the simulated device (default 0)")
    prof.add_argument("--phase", choices=PHASES, default=None,
                      help="launch phase of the campaign runs: steered (equivalent-time sampling), random (the "
                           "paper's protocol), or auto (default: steered where the sensor is predictable)")
    prof.add_argument("--out", metavar="DIR", help="campaign folder (default: ./fingrav-<kernel>)")
    prof.add_argument("--resume", metavar="DIR",
                      help="continue the interrupted campaign in DIR with the settings it was started with")
    prof.add_argument("--plots", action="store_true", help="also write the figures into the folder")
    prof.add_argument("--trace", action="store_true", help="also write a Perfetto trace (profile.trace.json)")
    prof.add_argument("--quiet", action="store_true", help="no progress (progress is shown only on a terminal)")


def _add_device_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """--backend (default sim), --device and --seed, as `sync` and `characterize` take them."""
    parser.add_argument("--backend", choices=BACKENDS, default="sim", help=f"which {what} (default sim)")
    parser.add_argument("--device", type=int, default=0, help="GPU index for amd/nvidia (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated device (default 0)")


def _add_sync_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    sync = sub.add_parser(
        "sync",
        help="clock-sync report: read latency, floor, skew, drift and error bound of a backend's clock map",
        description=(
            "Take bursts of bracketed device-clock reads (host before, device, host after) for a while and "
            "report the read latency, the floor no calibration removes (half the best round trip), the "
            "fitted skew, the error bound of the map at the end, and how far a drift-following piecewise "
            "map departs from a single line. On the simulator the true error is reported as well."),
        epilog=("examples:\n  fingrav sync\n  fingrav sync --backend nvidia --seconds 10 --json\n"
                "  fingrav sync --backend amd --device 1 --plot sync.png"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_device_arguments(sync, "clock")
    sync.add_argument("--seconds", type=float, default=2.0, help="how long to take reads (default 2)")
    sync.add_argument("--burst", type=int, default=32, help="reads per burst (default 32)")
    sync.add_argument("--interval-ms", type=float, default=100.0, help="time between bursts (default 100 ms)")
    sync.add_argument("--json", action="store_true", help="print the report as JSON")
    sync.add_argument("--plot", metavar="FILE", help="also draw each read's distance from the map (PNG/PDF/SVG)")


def _add_characterize_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    ch = sub.add_parser(
        "characterize",
        help="measure a backend's power sensor (period, window or filter, delay) with a load square wave",
        description=(
            "Run a heavy and a light kernel in alternation (a square wave of load, as Yang et al., SC'24) "
            "over many runs at random phase against the sensor, place every log on the host timeline, "
            "and fit the sensor: update period, boxcar window or first-order filter, delay. The result "
            "is a sensor file that profiles use (stitch_logs(sensor=load_characterisation(FILE).sensor)). "
            "The GPU's own power must follow the load faster than the sensor averages; where it does "
            "not (clock ramps, heating), the fitted window includes the GPU's response."),
        epilog=("examples:\n  fingrav characterize --out sim-sensor.json\n"
                "  fingrav characterize --backend nvidia --kernel cb-8k-gemm --light mb-2k-gemv --out h100.json"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_device_arguments(ch, "device")
    ch.add_argument("--kernel", default="cb-8k-gemm", help="the heavy kernel (default cb-8k-gemm)")
    ch.add_argument("--light", default="mb-2k-gemv", help="the light kernel (default mb-2k-gemv)")
    ch.add_argument("--runs", type=int, default=40, help="runs (default 40)")
    ch.add_argument("--cycles", type=int, default=4, help="heavy/light cycles per run (default 4)")
    ch.add_argument("--half-period-ms", type=float, default=None,
                    help="length of each level (default: from the declared sensor)")
    ch.add_argument("--out", metavar="FILE", help="write the characterisation (JSON) here")
    ch.add_argument("--json", action="store_true", help="print the characterisation as JSON")


def _characterize(args: argparse.Namespace) -> int:
    import json

    if args.runs < 2:
        raise ValueError(f"--runs={args.runs}: must be >= 2")
    if args.cycles < 1:
        raise ValueError(f"--cycles={args.cycles}: must be >= 1")
    if args.half_period_ms is not None and not args.half_period_ms > 0:
        raise ValueError(f"--half-period-ms={args.half_period_ms}: must be > 0")
    backend = _make_backend(args.backend, args.device, args.seed)
    kernel = _resolve_kernel(args.kernel, args.backend)
    light = _resolve_kernel(args.light, args.backend)
    # The hardware backends take a Workload where the protocol says KernelSpec; the runtime contract is the same.
    c = characterize(cast(Backend, backend), kernel, light, runs=args.runs, cycles=args.cycles,
                     half_period_ns=None if args.half_period_ms is None else args.half_period_ms * 1e6)
    if args.out:
        c.save(args.out)
    if args.json:
        print(json.dumps(c.as_dict(), indent=2))
        return EXIT_OK
    s, st = c.sensor, c.step
    print(f"sensor of {c.device}: {s.kind}, period {s.period_ns / 1e3:.1f} us "
          f"(+-{c.period.uncertainty_ns / 1e3:.2f}, jitter {c.period.jitter_ns / 1e3:.1f} us)")
    if st is not None:
        length = (f"boxcar window {st.window_ns / 1e3:.1f} +- {st.window_err_ns / 1e3:.1f} us" if st.shape == "boxcar"
                  else f"first-order filter, tau {st.tau_ns / 1e3:.1f} +- {st.tau_err_ns / 1e3:.1f} us")
        print(f"  {length}; delay {st.delay_ns / 1e3:.1f} +- {st.delay_err_ns / 1e3:.1f} us; "
              f"10-90 % rise {st.rise_ns / 1e3:.1f} us")
        print(f"  fit residual {st.residual_w:.1f} W over {st.logs} logs (the other shape: {st.other_residual_w:.1f} W)")
    if args.out:
        print(f"  written to {args.out}")
    return EXIT_OK


def _make_backend(name: str, device: int, seed: int) -> object:
    if device < 0:
        raise ValueError(f"--device={device}: must be >= 0")
    if seed < 0:
        raise ValueError(f"--seed={seed}: must be >= 0")
    if name == "sim":
        return SimBackend(seed=seed)
    if name == "sim-live":
        return LiveSimBackend(seed=seed)
    if name == "amd":
        return AmdBackend(device=device)
    return NvidiaBackend(device=device)


_HW_PRESET = re.compile(r"^(cb|mb)-(\d+)k-(gemm|gemv)$")


def _resolve_kernel(spec: str, backend_name: str) -> object:
    """A kernel for the backend from the command line's KERNEL."""
    if ":" in spec:
        if backend_name.startswith("sim"):
            raise ValueError(f"kernel={spec!r}: a module:function workload runs on amd or nvidia; "
                             "the simulator runs its presets (fingrav_native.sim.kernel_presets())")
        return resolve_workload(spec)
    if backend_name.startswith("sim"):
        names = [k["name"] for k in kernel_presets()]
        if spec not in names:
            raise ValueError(f"kernel={spec!r}: not a simulator preset; choose one of {', '.join(names)}")
        return spec
    m = _HW_PRESET.match(spec)
    if m is None:
        raise ValueError(f"kernel={spec!r}: on {backend_name} give module:function, or a GEMM/GEMV preset "
                         "such as cb-4k-gemm or mb-8k-gemv")
    n = int(m.group(2)) * 1024
    return torch_gemm(n, n, n) if m.group(3) == "gemm" else torch_gemv(n, n)


#: What `fingrav profile` records next to the campaign, so --resume can rebuild the same request.
COMMAND_FILE = "command.json"


def _profile(args: argparse.Namespace) -> int:
    import json
    import os

    if args.resume:
        if args.out and os.path.abspath(args.out) != os.path.abspath(args.resume):
            raise ValueError(f"--out={args.out!r}: --resume continues in its own folder ({args.resume!r})")
        path = os.path.join(args.resume, COMMAND_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(f"--resume={args.resume!r}: no {COMMAND_FILE} there; not a folder written "
                                    "by fingrav profile")
        with open(path) as f:
            saved = json.load(f)
        given = {k: getattr(args, k) for k in ("kernel", "backend", "device", "mode", "runs", "margin",
                                               "executions", "seed", "phase")}
        for key, value in given.items():
            if value is not None and value != saved.get(key):
                raise ValueError(f"--{key}={value!r}: the campaign in {args.resume!r} was started with "
                                 f"{saved.get(key)!r}; --resume uses the settings it was started with")
        request, out = saved, args.resume
    else:
        if not args.kernel:
            raise ValueError("kernel: give a preset or module:function (or --resume DIR)")
        request = {"kernel": args.kernel, "backend": args.backend or "sim",
                   "device": 0 if args.device is None else args.device,
                   "mode": args.mode or "both", "runs": args.runs, "margin": args.margin,
                   "executions": args.executions, "seed": 0 if args.seed is None else args.seed,
                   "phase": args.phase or "auto"}
        out = args.out or f"fingrav-{args.kernel.replace(':', '-').replace('.', '-')}"
    if request["runs"] is not None and request["runs"] < 2:
        raise ValueError(f"--runs={request['runs']}: must be >= 2")
    if request["margin"] is not None and not 0 < request["margin"] < 1:
        raise ValueError(f"--margin={request['margin']}: must be in (0, 1)")
    if request["executions"] is not None and request["executions"] < 4:
        raise ValueError(f"--executions={request['executions']}: must be >= 4")
    kernel = _resolve_kernel(request["kernel"], request["backend"])
    if not args.resume and os.path.exists(os.path.join(out, COMMAND_FILE)):
        raise ValueError(f"--out={out!r}: already holds a campaign; continue it with --resume {out} "
                         "or choose another folder")
    backend = _make_backend(request["backend"], request["device"], request["seed"])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, COMMAND_FILE), "w") as f:
        json.dump(request, f, indent=1)
    reporter = ProgressReporter() if args.quiet else TerminalProgress()
    try:
        prof = profile(kernel, backend, mode=request["mode"], runs=request["runs"],  # type: ignore[arg-type]
                       margin=request["margin"], executions=request["executions"], seed=request["seed"],
                       out_dir=out, resume=bool(args.resume), progress=reporter,
                       # Folders written before phase steering existed ran at random phase.
                       phase=request.get("phase", "random"))
    except KeyboardInterrupt:
        done = len(load_campaign_runs(out))
        print(f"fingrav profile: interrupted; {done} completed runs are in {out}/runs/. "
              f"Continue with: fingrav profile --resume {out}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(prof)
    b = prof.error_budget
    print(f"  error budget (median per LOI, +-): clock map {b.clock_map_ns / 1e3:.2f} us, kernel start "
          f"{b.marker_ns / 1e3:.2f} us, logger window {b.logger_window_ns / 1e3:.2f} us -> total "
          f"{b.total_ns / 1e3:.2f} us")
    print(os.path.join(out, PROFILE_FILE))
    if args.trace:
        print(export_trace(prof, os.path.join(out, "profile.trace.json")))
    if args.plots:
        _plot(argparse.Namespace(profile=[os.path.join(out, PROFILE_FILE)], out=out, format="png",
                                 dpi=120))
    return EXIT_OK


def _sync(args: argparse.Namespace) -> int:
    import json

    if not args.interval_ms > 0:
        raise ValueError(f"--interval-ms={args.interval_ms}: must be positive")
    backend = _make_backend(args.backend, args.device, args.seed)
    report = sync_report(backend, seconds=args.seconds, burst=args.burst,  # type: ignore[arg-type]
                         interval_s=args.interval_ms / 1e3)
    if args.json:
        print(json.dumps(report.as_dict(), indent=1))
    else:
        print(report.format())
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ax = plot_sync_error(report.brackets, report.piecewise or report.linear)
        ax.figure.savefig(args.plot, dpi=120)
        plt.close(ax.figure)
        print(args.plot)
    return EXIT_OK


def _load(path: str) -> object:
    return load_profile(path)


def _figure_stem(path: str) -> str:
    import os

    stem = os.path.splitext(os.path.basename(path))[0]
    if stem == "profile":
        # A campaign folder's profile.fgprof: name its figures after the folder.
        stem = os.path.basename(os.path.dirname(os.path.abspath(path))) or stem
    return stem


def _plot(args: argparse.Namespace) -> int:
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = [args.profile] if isinstance(args.profile, str) else list(args.profile)
    os.makedirs(args.out, exist_ok=True)
    figures = []
    kernels = []  # (name, ExecutionProfile) of every profile, for the side-by-side figure
    for path in paths:
        prof = _load(path)
        stem = _figure_stem(path)
        if isinstance(prof, InterleavedProfile):
            figures.append((stem, "interleaved", fplot.plot_interleaved(prof).figure))
            prof = prof.reference
        assert isinstance(prof, Profile)
        if prof.whole_run is not None:
            figures.append((stem, "whole_run", fplot.plot_whole_run(prof).figure))
        for label, ep in prof.profiles.items():
            figures.append((stem, f"kernel_{label}", fplot.plot_kernel(ep).figure))
            kernels.append((f"{prof.kernel} {label.upper()}" if len(paths) > 1 else label.upper(), ep))
        if prof.ssp_search is not None:
            figures.append((stem, "ssp_search", fplot.plot_ssp_search(prof.ssp_search).figure))
    if len(kernels) > 1:
        # Paper Figures 8 and 10: kernels (or SSE vs SSP) side by side, one panel per component.
        stem = _figure_stem(paths[0]) if len(paths) == 1 else "kernels"
        figures.append((stem, "by_component", fplot.figure_kernels_by_component(kernels)))
    for stem, name, fig in figures:
        path = os.path.join(args.out, f"{stem}_{name}.{args.format}")
        fig.savefig(path, dpi=args.dpi)
        plt.close(fig)
        print(path)
    return EXIT_OK


def _summary(prof: object) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if isinstance(prof, InterleavedProfile):
        extra = {"preceded_by": [list(x) for x in prof.preceded_by], "power_ratio": prof.power_ratio}
        prof = prof.reference
    assert isinstance(prof, Profile)
    out = {
        "kernel": prof.kernel, "mode": prof.mode, "runs": prof.runs, "backend": dataclasses.asdict(prof.backend),
        "settings": prof.settings, "error_budget_ns": dataclasses.asdict(prof.error_budget),
        "clock": prof.clock, "versions": prof.versions, **extra,
        "profiles": {
            label: {"execution_index": ep.execution_index, "executions_per_run": ep.executions_per_run,
                    "golden_runs": ep.golden.count, "runs": ep.golden.total, "lois": int(len(ep.lois)),
                    "loi_target": ep.loi_target, "duration_ns": ep.duration_ns,
                    "energy_j": {k: e.energy_j for k, e in ep.energy.items()},
                    "energy_uncertainty_j": {k: e.uncertainty_j for k, e in ep.energy.items()}}
            for label, ep in prof.profiles.items()},
    }
    return out


def _export(args: argparse.Namespace) -> int:
    import json
    import math

    if not (args.trace or args.parquet or args.summary):
        raise ValueError("nothing to export: give --trace, --parquet and/or --summary")
    prof = _load(args.profile)
    if args.trace:
        print(export_trace(prof, args.trace))  # type: ignore[arg-type]
    if args.parquet:
        for p in export_parquet(prof, args.parquet):  # type: ignore[arg-type]
            print(p)
    if args.summary:
        def clean(v: object) -> object:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v

        with open(args.summary, "w") as f:
            json.dump(clean(_summary(prof)), f, indent=1, allow_nan=False)
        print(args.summary)
    return EXIT_OK


def _trace(args: argparse.Namespace) -> int:
    import json
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if args.top < 1:
        raise ValueError(f"--top={args.top}: must be >= 1")
    tp = profile_trace(args.trace, load_capture(args.power), min_executions=args.min_executions, sensor=args.sensor)
    print(tp)
    os.makedirs(args.out, exist_ok=True)
    written = [export_trace(tp, os.path.join(args.out, "power_trace.json.gz"))]
    fig = fplot.plot_kernel_energy(tp).figure
    for name, f in (("energy_by_kernel", fig), ("top_kernels", fplot.figure_trace_profiles(tp, top=args.top))):
        path = os.path.join(args.out, f"{name}.{args.format}")
        f.savefig(path, dpi=120)
        plt.close(f)
        written.append(path)
    rows = [{"name": str(r["name"]), "grid": r["grid"].tolist(), "block": r["block"].tolist(),
             **{k: (r[k].item() if np.isfinite(r[k]) else None) if r[k].dtype.kind == "f" else int(r[k])
                for k in ("count", "golden", "warmup", "duration_ns", "power_w", "energy_j",
                          "energy_half_width_j", "share")}}
            for r in tp.kernels]
    doc = {"trace": os.path.abspath(args.trace), "power": os.path.abspath(args.power), "sensor": tp.sensor,
           "kernels": rows, "concurrent": tp.concurrent, "skipped": tp.skipped,
           "iterations": None if tp.summary is None else dataclasses.asdict(tp.summary)}
    path = os.path.join(args.out, "kernels.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    written.append(path)
    for p in written:
        print(p)
    print("open power_trace.json.gz in https://ui.perfetto.dev")
    return EXIT_OK


def _devices(args: argparse.Namespace) -> int:
    import json

    reports = list_backends(args.backend)
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], indent=2))
    else:
        print(format_reports(reports, verbose=args.verbose))
    if args.backend:
        return EXIT_OK if all(r.available for r in reports) else EXIT_FAILURE
    # Without --backend the question a script asks is "is there real hardware here?"
    return EXIT_OK if any(r.available for r in reports if r.backend != "sim") else EXIT_FAILURE


def _demo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    live_only = [f"--{name.replace('_', '-')}" for name in ("source", "seconds", "period_us", "source_period_us")
                 if getattr(args, name) is not None]
    try:
        if args.seed < 0:
            raise ValueError(f"seed={args.seed}: must be >= 0")
        if not args.live:
            # Live-only options would be silently ignored by the profiling demo.
            if live_only:
                raise ValueError(f"{live_only[0]}: only with --live")
            run_demo(args.out, seed=args.seed)
            return EXIT_OK
        period_ns = int(round((250.0 if args.period_us is None else args.period_us) * 1000))
        if args.source in (None, "sim"):
            if args.seconds is not None or args.source_period_us is not None:
                raise ValueError(f"{'--seconds' if args.seconds is not None else '--source-period-us'}: "
                                 "only with --source synthetic")
            run_sim_demo(seed=args.seed, period_ns=period_ns)
        else:
            run_synthetic_demo(
                seconds=1.0 if args.seconds is None else args.seconds,
                period_ns=period_ns,
                source_period_ns=int(round((1000.0 if args.source_period_us is None else args.source_period_us)
                                           * 1000)),
            )
    except ValueError as exc:
        print(f"fingrav demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # --out not writable, disk full
        print(f"fingrav demo: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fingrav`` command; returns the process exit code.

    Exit codes: 0 success, 1 the command failed, 2 bad usage.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command == "demo":
        return _demo(parser, args)
    if args.command == "devices":
        return _devices(args)
    if args.command == "trace":
        try:
            return _trace(args)
        except (FileNotFoundError, OSError) as exc:
            print(f"fingrav trace: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            # A malformed trace or capture is named by its own error (TraceFormatError, CaptureFormatError).
            print(f"fingrav trace: {exc}", file=sys.stderr)
            return EXIT_FAILURE if isinstance(exc, (TraceFormatError, CaptureFormatError)) else EXIT_USAGE
    if args.command in ("plot", "export"):
        try:
            return _plot(args) if args.command == "plot" else _export(args)
        except (ProfileFormatError, FileNotFoundError) as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.command in ("profile", "sync", "characterize"):
        try:
            if args.command == "characterize":
                return _characterize(args)
            return _profile(args) if args.command == "profile" else _sync(args)
        # A missing library or device (LibraryNotFoundError, DeviceUnavailableError
        # are RuntimeErrors) or module is a failure to run, not bad usage.
        except (CampaignMismatchError, CampaignFormatError, FileNotFoundError, ImportError, RuntimeError) as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE  # pragma: no cover - parser.error exits
