"""``fingrav demo``: the profiling demo, or with ``--live`` the live sampling demos."""

from __future__ import annotations

import argparse
import sys

from fingrav_native.app._cli_common import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, SigintOnce
from fingrav_native.app._demo import DemoInterrupted, run_demo, run_sim_demo, run_synthetic_demo
from fingrav_native.files._outputs import check_output_path


def _demo_interrupted(args: argparse.Namespace, exc: KeyboardInterrupt) -> str:
    """The one line `fingrav demo` prints on Ctrl-C: what it wrote, and what it left."""
    if args.live:
        return "fingrav demo: interrupted; the live demo writes no files"
    if not isinstance(exc, DemoInterrupted):  # before run_demo made its folder
        return "fingrav demo: interrupted before any file was written; nothing was created"
    if exc.files:
        n = len(exc.files)
        return (f"fingrav demo: interrupted; kept the {n} {'file' if n == 1 else 'files'} it had completed in "
                f"{exc.out_dir}/: " + ", ".join(exc.files))
    if exc.removed_folder:
        return (f"fingrav demo: interrupted before any file was written; removed the folder {exc.out_dir} "
                "it had created")
    return f"fingrav demo: interrupted before any file was written; {exc.out_dir}/ holds nothing new"


def demo_command(args: argparse.Namespace, *, as_program: bool = False) -> int:
    """``fingrav demo``: its own exit codes, and on Ctrl-C one line saying what was kept."""
    with SigintOnce(keep_ignoring=as_program) as sigint:
        try:
            _run_demo(args)
        except KeyboardInterrupt as exc:
            # Whatever was completed stays (run_demo says what); a second
            # Ctrl-C while this is said is ignored, not a second traceback.
            sigint.ignore()
            print(_demo_interrupted(args, exc), file=sys.stderr)
            return EXIT_INTERRUPTED
        except OSError as exc:  # --out not writable (also a ValueError: checked first), disk full
            print(f"fingrav demo: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            print(f"fingrav demo: {exc}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_OK


def _run_demo(args: argparse.Namespace) -> None:
    """The demo the options ask for (ValueError: options that do not go together)."""
    # Each number is in range (parse time); what is left is which go together.
    live_only = [f"--{name.replace('_', '-')}" for name in ("source", "seconds", "period_us", "source_period_us")
                 if getattr(args, name) is not None]
    if args.live and args.out is not None:
        # The live demo writes no files: a folder given would be ignored without a word.
        raise ValueError("--out: the live demo writes no files; leave it out (or drop --live)")
    if args.out is None:
        args.out = "fingrav-demo"
    if not args.live:
        # Live-only options would be silently ignored by the profiling demo.
        if live_only:
            raise ValueError(f"{live_only[0]}: only with --live")
        check_output_path(args.out, "--out", folder=True)
        run_demo(args.out, seed=args.seed)
        return
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
            source_period_ns=int(round((1000.0 if args.source_period_us is None
                                        else args.source_period_us) * 1000)),
        )
