"""The ``fingrav`` command line: parse, run the command, map what went wrong to an exit code.

The commands live beside it (``_cli_profile``, ``_cli_files``, ``_cli_device``,
``_cli_demo``), the parser in ``_cli_parser`` and the option ranges in
``_cli_ranges``; the names below are its public face (tests and
``python -m fingrav_native`` use them).
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional, Sequence

from fingrav_native.app._cli_common import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from fingrav_native.app._cli_demo import demo_command
from fingrav_native.app._cli_device import characterize_command, devices_command, sync_command
from fingrav_native.app._cli_files import export_command, plot_command, trace_command
from fingrav_native.app._cli_parser import build_parser
from fingrav_native.app._cli_profile import profile_command
from fingrav_native.app._cli_ranges import FloatRange, IntRange
from fingrav_native.files._campaign import CampaignFormatError, CampaignMismatchError
from fingrav_native.files._capture import CaptureFormatError
from fingrav_native.files._profiles import ProfileFormatError
from fingrav_native.insitu._trace import TraceFormatError
from fingrav_native.method._align import NoLogsInExecutionsError

__all__ = ["EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "FloatRange", "IntRange", "build_parser",
           "main"]


#: A command as main runs it: the parsed arguments and whether ``fingrav`` is the program (a second
#: Ctrl-C then stays ignored until exit) in, the exit code out.
_Run = Callable[[argparse.Namespace, bool], int]

#: Errors that mean the command failed (exit code 1), not that it was misused: the usage was fine.
#: A missing library or device (LibraryNotFoundError, DeviceUnavailableError: RuntimeErrors) or module is
#: a failure to run, as is an output the disk refuses (a file where a folder goes, no permission, disk full).
_CANNOT_RUN = (OSError, ImportError, RuntimeError)

#: Each command: how main runs it, and the errors that make it exit 1; any other ValueError is bad usage
#: (exit 2). None: the command sets its exit codes itself.
_COMMANDS: dict[str, tuple[_Run, Optional[tuple[type[BaseException], ...]]]] = {
    "demo": (lambda args, as_program: demo_command(args, as_program=as_program), None),
    "devices": (lambda args, _: devices_command(args), None),
    # A malformed trace or capture is named by its own error, a ValueError that is a failure to read.
    "trace": (lambda args, _: trace_command(args), (OSError, TraceFormatError, CaptureFormatError)),
    # A damaged profile is a failure to read, as an output the disk refuses is a failure to write.
    "plot": (lambda args, _: plot_command(args), (ProfileFormatError, OSError)),
    "export": (lambda args, _: export_command(args), (ProfileFormatError, OSError)),
    # A campaign folder in use (CampaignLockedError, a RuntimeError), a damaged or incomplete folder, a
    # campaign that gave no logs (NoLogsInExecutionsError, a ValueError): the command failed, the usage was fine.
    "profile": (lambda args, as_program: profile_command(args, as_program=as_program),
                (CampaignMismatchError, CampaignFormatError, NoLogsInExecutionsError, *_CANNOT_RUN)),
    "sync": (lambda args, _: sync_command(args), _CANNOT_RUN),
    "characterize": (lambda args, _: characterize_command(args), _CANNOT_RUN),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fingrav`` command; returns the process exit code.

    Exit codes (the README's table has them per command): 0 done, 1 the
    command failed, 2 bad usage, 130 interrupted by Ctrl-C. A number out
    of its option's range is bad usage refused by argparse, which raises
    ``SystemExit(2)`` instead of returning (as for any unparseable argument).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``fingrav`` (default ``sys.argv[1:]``: run as
        the program, when a second Ctrl-C stays ignored until exit).

    Returns
    -------
    int
        The exit code.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command not in _COMMANDS:
        parser.error(f"unknown command {args.command!r}")
        return EXIT_USAGE  # pragma: no cover - parser.error exits
    run, failures = _COMMANDS[args.command]
    if failures is None:
        return run(args, argv is None)
    try:
        return run(args, argv is None)
    except failures as exc:
        print(f"fingrav {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except ValueError as exc:
        print(f"fingrav {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
