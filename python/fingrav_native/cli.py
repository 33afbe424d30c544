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
        help="live sampling demo on the built-in synthetic power source",
        description=(
            "Poll a deterministic synthetic power source with the C++ sampler thread, "
            "drain it from Python while it runs, and print what arrived and what it cost."
        ),
        epilog="example: fingrav demo --seconds 2 --period-us 100",
    )
    demo.add_argument("--seconds", type=float, default=1.0, help="how long to sample (default 1.0)")
    demo.add_argument(
        "--period-us", type=float, default=250.0, help="sampler period in microseconds (default 250)"
    )
    demo.add_argument(
        "--source-period-us",
        type=float,
        default=1000.0,
        help="how often the synthetic source produces a reading, in microseconds (default 1000)",
    )
    return parser


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
        from .demo import run_demo

        try:
            run_demo(
                seconds=args.seconds,
                period_ns=int(round(args.period_us * 1000)),
                source_period_ns=int(round(args.source_period_us * 1000)),
            )
        except ValueError as exc:
            print(f"fingrav demo: {exc}", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE  # pragma: no cover - parser.error exits
