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
        epilog="example: fingrav demo --seconds 1 --period-us 100",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="live sampling demo: a simulated GPU running GEMMs (or the synthetic test source)",
        description=(
            "Run a simulated MI300X-class GPU in real time through a GEMM/GEMV sequence while "
            "the C++ sampler thread polls its 1 ms power logger, and print what was seen per run "
            "against the device's true power. --source synthetic polls the deterministic test "
            "source instead."
        ),
        epilog="examples:\n  fingrav demo\n  fingrav demo --seed 3 --period-us 100\n"
               "  fingrav demo --source synthetic --seconds 2 --period-us 100",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--source", choices=("sim", "synthetic"), default="sim",
                      help="what to sample (default sim)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the simulated GPU (default 0)")
    demo.add_argument("--seconds", type=float, default=1.0,
                      help="synthetic source only: how long to sample (default 1.0)")
    demo.add_argument(
        "--period-us", type=float, default=250.0, help="sampler period in microseconds (default 250)"
    )
    demo.add_argument(
        "--source-period-us",
        type=float,
        default=1000.0,
        help="synthetic source only: how often it produces a reading, in microseconds (default 1000)",
    )
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
    return parser


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
        from .demo import run_sim_demo, run_synthetic_demo

        try:
            if args.source == "sim":
                if args.seed < 0:
                    raise ValueError(f"seed={args.seed}: must be >= 0")
                run_sim_demo(seed=args.seed, period_ns=int(round(args.period_us * 1000)))
            else:
                run_synthetic_demo(
                    seconds=args.seconds,
                    period_ns=int(round(args.period_us * 1000)),
                    source_period_ns=int(round(args.source_period_us * 1000)),
                )
        except ValueError as exc:
            print(f"fingrav demo: {exc}", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK
    if args.command == "devices":
        return _devices(args)
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE  # pragma: no cover - parser.error exits
