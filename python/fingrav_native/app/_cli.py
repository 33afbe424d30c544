"""The ``fingrav`` command line: parse, run the command, map what went wrong to an exit code.

The commands live beside it (``_cli_profile``, ``_cli_files``, ``_cli_device``,
``_cli_demo``), the parser in ``_cli_parser`` and the option ranges in
``_cli_ranges``; the names below are its public face (tests and
``python -m fingrav_native`` use them).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Any, Callable, Optional, Sequence

from fingrav_native.app._cli_common import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
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

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "FloatRange", "IntRange",
           "build_parser", "main"]


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
    "trace": (lambda args, _: trace_command(args), (OSError, ImportError, TraceFormatError, CaptureFormatError)),
    # A damaged profile is a failure to read, as an output the disk refuses is a failure to write; a missing
    # optional library (pyarrow for --parquet) is a failure to run, named with the extra that brings it.
    "plot": (lambda args, _: plot_command(args), (ProfileFormatError, OSError, ImportError)),
    "export": (lambda args, _: export_command(args), (ProfileFormatError, OSError, ImportError)),
    # A campaign folder in use (CampaignLockedError, a RuntimeError), a damaged or incomplete folder, a
    # campaign that gave no logs (NoLogsInExecutionsError, a ValueError): the command failed, the usage was fine.
    "profile": (lambda args, as_program: profile_command(args, as_program=as_program),
                (CampaignMismatchError, CampaignFormatError, NoLogsInExecutionsError, *_CANNOT_RUN)),
    "sync": (lambda args, _: sync_command(args), _CANNOT_RUN),
    "characterize": (lambda args, _: characterize_command(args), _CANNOT_RUN),
}


class _OutputFailed(BaseException):
    """Standard output refused a write (its reader closed the pipe, the disk is full): the command stops here.

    A BaseException, like KeyboardInterrupt, so that no command's handler
    of its own failures (OSError among them) takes it for one of its files:
    :func:`main` says it once.
    """

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


class _GuardedOutput:
    """Standard output as the command sees it: a write or flush the system refuses raises :class:`_OutputFailed`."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as exc:
            raise _OutputFailed(exc) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _OutputFailed(exc) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _output_failed(command: Optional[str], error: OSError, as_program: bool) -> int:
    """The exit code for standard output that failed; one line on stderr unless its reader simply left."""
    if as_program:
        # What is still buffered would fail again when Python flushes at exit
        # (a second message, a traceback): it goes nowhere instead. The Python
        # docs' recipe for SIGPIPE (library/signal, "Note on SIGPIPE").
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
            os.close(devnull)
        except (OSError, ValueError):
            pass
    if isinstance(error, BrokenPipeError) or error.errno == errno.EPIPE:
        return EXIT_BROKEN_PIPE  # the reader had what it wanted (| head): nothing to say
    name = f"fingrav {command}" if command else "fingrav"
    print(f"{name}: cannot write to standard output ({error.strerror or error}); nothing more was written",
          file=sys.stderr)
    return EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fingrav`` command; returns the process exit code.

    Exit codes (the README's table has them per command): 0 done, 1 the
    command failed, 2 bad usage, 130 interrupted by Ctrl-C, 141 standard
    output closed by its reader (``fingrav devices | head``: quietly, as a
    program stopped by SIGPIPE). A number out of its option's range is bad
    usage refused by argparse, which raises ``SystemExit(2)`` instead of
    returning (as for any unparseable argument). Standard output that
    cannot be written (a full disk) is one line on stderr and exit code 1.

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
    as_program = argv is None
    real = sys.stdout
    guarded = _GuardedOutput(real) if real is not None else None
    if guarded is not None:
        sys.stdout = guarded
    seen: list[str] = []  # the command, once parsed: names it in a message about standard output
    try:
        try:
            return _main(argv, as_program, seen)
        finally:
            # What the command printed is written now, inside the guard: not
            # when Python exits, where a failure is a traceback.
            if sys.stdout is not None:
                sys.stdout.flush()
    except _OutputFailed as failed:
        return _output_failed(seen[0] if seen else None, failed.error, as_program)
    finally:
        if sys.stdout is guarded:
            sys.stdout = real


def _main(argv: Sequence[str] | None, as_program: bool, seen: list[str]) -> int:
    """Parse and run the command (main's body, inside the standard-output guard)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is not None:
        seen.append(str(args.command))
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command not in _COMMANDS:
        parser.error(f"unknown command {args.command!r}")
        return EXIT_USAGE  # pragma: no cover - parser.error exits
    run, failures = _COMMANDS[args.command]
    if failures is None:
        return run(args, as_program)
    try:
        return run(args, as_program)
    except failures as exc:
        print(f"fingrav {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except ValueError as exc:
        print(f"fingrav {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
