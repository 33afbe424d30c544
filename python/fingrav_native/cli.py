"""The ``fingrav`` command line."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


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
            "Report each backend (sim, amd, nvidia): the libraries and device files it looked for, "
            "the path that loaded or why not (with the paths tried and what to install), and the "
            "devices it can profile. Exit code 0 when at least one hardware backend (or, with "
            "--backend, every named one) is available, 1 otherwise; the simulator is always available."
        ),
        epilog="examples:\n  fingrav devices\n  fingrav devices --json\n  fingrav devices --backend nvidia",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    devices.add_argument("--json", action="store_true", help="print the reports as JSON")
    devices.add_argument("--backend", action="append", choices=("sim", "amd", "nvidia"),
                         help="report only this backend (repeatable)")
    plot = sub.add_parser(
        "plot",
        help="draw a saved profile's figures (whole run, kernel per component, SSP search)",
        description="Write PNG figures of a profile saved by save_profile / fingrav profile.",
        epilog="examples:\n  fingrav plot cb-4k.fgprof --out figs/\n  fingrav plot cb-4k.fgprof --out figs/ --format pdf",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plot.add_argument("profile", help="a saved profile (.fgprof)")
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
    return parser


def _load(path: str) -> object:
    from .io import load_profile

    return load_profile(path)


def _plot(args: argparse.Namespace) -> int:
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import plot as fplot
    from .profile import InterleavedProfile, Profile

    prof = _load(args.profile)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.splitext(os.path.basename(args.profile))[0]
    figures = []
    if isinstance(prof, InterleavedProfile):
        figures.append(("interleaved", fplot.plot_interleaved(prof).figure))
        prof = prof.reference
    assert isinstance(prof, Profile)
    if prof.whole_run is not None:
        figures.append(("whole_run", fplot.plot_whole_run(prof).figure))
    for label, ep in prof.profiles.items():
        figures.append((f"kernel_{label}", fplot.plot_kernel(ep).figure))
    if prof.ssp_search is not None:
        figures.append(("ssp_search", fplot.plot_ssp_search(prof.ssp_search).figure))
    for name, fig in figures:
        path = os.path.join(args.out, f"{stem}_{name}.{args.format}")
        fig.savefig(path, dpi=args.dpi)
        plt.close(fig)
        print(path)
    return EXIT_OK


def _summary(prof: object) -> dict:
    import dataclasses

    from .profile import InterleavedProfile, Profile

    extra: dict = {}
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
        from .trace import export_trace

        print(export_trace(prof, args.trace))  # type: ignore[arg-type]
    if args.parquet:
        from .io import export_parquet

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


def _devices(args: argparse.Namespace) -> int:
    import json

    from .devices import format_reports, list_backends

    reports = list_backends(args.backend)
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], indent=2))
    else:
        print(format_reports(reports))
    if args.backend:
        return EXIT_OK if all(r.available for r in reports) else EXIT_FAILURE
    # Without --backend the question a script asks is "is there real hardware here?"
    return EXIT_OK if any(r.available for r in reports if r.backend != "sim") else EXIT_FAILURE


def _demo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .demo import run_demo, run_sim_demo, run_synthetic_demo

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
    if args.command in ("plot", "export"):
        from .io import ProfileFormatError

        try:
            return _plot(args) if args.command == "plot" else _export(args)
        except (ProfileFormatError, FileNotFoundError) as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE  # pragma: no cover - parser.error exits
