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
import signal
import sys
import threading
from typing import Any, Callable, Optional, Sequence

# Only what main needs before it holds SIGINT: the exit codes and the Ctrl-C handling (light modules). Each
# command's module, and the package's analysis behind it (scipy, matplotlib), is imported when that command
# runs, so a Ctrl-C at any moment of the start is one line and exit code 130, never a traceback.
from fingrav_native.app._cli_common import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    SigintOnce,
)
from fingrav_native.app._cli_ranges import FloatRange, IntRange

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "FloatRange", "IntRange",
           "build_parser", "main"]


#: A command as main runs it: the parsed arguments and whether ``fingrav`` is the program (a second
#: Ctrl-C then stays ignored until exit) in, the exit code out.
_Run = Callable[[argparse.Namespace, bool], int]

#: Errors that mean the command failed (exit code 1), not that it was misused: the usage was fine.
#: A missing library or device (LibraryNotFoundError, DeviceUnavailableError: RuntimeErrors) or module is
#: a failure to run, as is an output the disk refuses (a file where a folder goes, no permission, disk full).
_CANNOT_RUN = (OSError, ImportError, RuntimeError)

#: What a command's failure tuple may hold.
_Failures = Optional[tuple[type[BaseException], ...]]


def _command(name: str) -> tuple[_Run, _Failures]:
    """How main runs command ``name``, and the errors that make it exit 1; any other ValueError is bad usage
    (exit 2). None: the command sets its exit codes itself. Its module is imported here, on first use."""
    if name == "demo":
        from fingrav_native.app import _cli_demo as demo

        return (lambda args, as_program: demo.demo_command(args, as_program=as_program)), None
    if name in ("devices", "sync", "characterize"):
        from fingrav_native.app import _cli_device as device

        if name == "devices":
            return (lambda args, _: device.devices_command(args)), None
        run = device.sync_command if name == "sync" else device.characterize_command
        return (lambda args, _: run(args)), _CANNOT_RUN
    if name in ("trace", "plot", "export"):
        return _files_command(name)
    if name in ("record", "run"):
        from fingrav_native.app import _cli_run as run_module
        from fingrav_native.files._capture import CaptureFormatError
        from fingrav_native.files._launches import LaunchFormatError
        from fingrav_native.method._engine_design import FitTooLargeError

        command = run_module.record_command if name == "record" else run_module.run_command
        # A device or library missing, a capture the disk refuses, launch files that cannot be read, a joint fit
        # past its memory budget: the command failed (exit 1); the application's own exit status is returned
        # otherwise.
        return (lambda args, _: command(args)), (*_CANNOT_RUN, LaunchFormatError, CaptureFormatError,
                                                 FitTooLargeError)
    from fingrav_native.app import _cli_profile as profile
    from fingrav_native.files._campaign import CampaignFormatError, CampaignMismatchError
    from fingrav_native.method._align import NoLogsInExecutionsError

    # A campaign folder in use (CampaignLockedError, a RuntimeError), a damaged or incomplete folder, a
    # campaign that gave no logs (NoLogsInExecutionsError, a ValueError): the command failed, the usage was fine.
    return ((lambda args, as_program: profile.profile_command(args, as_program=as_program)),
            (CampaignMismatchError, CampaignFormatError, NoLogsInExecutionsError, *_CANNOT_RUN))


def _files_command(name: str) -> tuple[_Run, _Failures]:
    """``trace``, ``plot`` and ``export`` as :func:`_command` gives them."""
    from fingrav_native.app import _cli_files as files

    if name == "trace":
        from fingrav_native.files._capture import CaptureFormatError
        from fingrav_native.files._launches import LaunchFormatError
        from fingrav_native.insitu._trace import TraceFormatError
        from fingrav_native.method._engine_design import FitTooLargeError

        # A malformed trace, capture or launch file is named by its own error, a ValueError that is a failure to read;
        # a joint fit past its memory budget (a MemoryError naming its classes and columns) is a failure to run.
        return (lambda args, _: files.trace_command(args)), (OSError, ImportError, TraceFormatError,
                                                             CaptureFormatError, LaunchFormatError, FitTooLargeError)
    from fingrav_native.files._profiles import ProfileFormatError

    # A damaged profile is a failure to read, as an output the disk refuses is a failure to write; a missing
    # optional library (pyarrow for --parquet) is a failure to run, named with the extra that brings it.
    run = files.plot_command if name == "plot" else files.export_command
    return (lambda args, _: run(args)), (ProfileFormatError, OSError, ImportError)


#: The commands main knows (the parser lists the same ones).
_COMMAND_NAMES = ("demo", "devices", "trace", "plot", "export", "profile", "sync", "characterize", "record", "run",
                  "help")


def build_parser() -> argparse.ArgumentParser:
    """The ``fingrav`` argument parser (built on demand: it imports the modules whose choices it lists)."""
    from fingrav_native.app._cli_parser import build_parser as build

    return build()


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

    Exit codes (docs/reference/exit-codes.md has them per command): 0 done, 1 the
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
    # Held from main's first line: a Ctrl-C while the command's modules load (seconds: scipy, matplotlib) or
    # between its steps is one line and exit code 130 like one during its work.
    owns_sigint = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    seen: list[str] = []  # the command, once parsed: names it in a message about standard output
    try:
        code = _guarded_main(argv, as_program, seen)
    except KeyboardInterrupt:
        if not owns_sigint:
            raise  # called from a program with its own Ctrl-C handling: it is its to handle
        if as_program:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while the line is written
        print(f"{_named(argv, seen)}: interrupted; the files it named are whole, one it was writing may be cut "
              "short", file=sys.stderr)
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        _forget_handled_interrupt()
    return code


def _forget_handled_interrupt() -> None:
    """Keep CPython from ending the process by SIGINT (exit -2) for a Ctrl-C the command has handled.

    CPython marks a KeyboardInterrupt raised inside ``exec`` of a string
    as unhandled even when it is caught (scipy and numpy run such code while
    they import: a Ctrl-C there is common), and at exit kills the process
    with SIGINT after the command said it was interrupted. Every evaluation
    of a string clears the mark first (``run_eval_code_obj`` in
    ``Python/pythonrun.c``), so one that raises nothing leaves it clear.
    """
    exec("pass")  # a constant string: it clears the mark, nothing else runs


def _named(argv: Sequence[str] | None, seen: list[str]) -> str:
    """``fingrav COMMAND`` for a message: the parsed command, else the first argument that names one."""
    if seen:
        return f"fingrav {seen[0]}"
    given = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in given if a in _COMMAND_NAMES), None)
    return f"fingrav {command}" if command else "fingrav"


def _guarded_main(argv: Sequence[str] | None, as_program: bool, seen: list[str]) -> int:
    """Main's body inside the standard-output guard."""
    real = sys.stdout
    guarded = _GuardedOutput(real) if real is not None else None
    if guarded is not None:
        sys.stdout = guarded
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


def _start(argv: Sequence[str] | None, as_program: bool, seen: list[str]) -> int | tuple[argparse.Namespace, _Run,
                                                                                         _Failures]:
    """Parse the arguments and import the command's module, with Ctrl-C held: an exit code, or what to run."""
    with SigintOnce(keep_ignoring=as_program) as sigint:
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
            if args.command is None:
                parser.print_help()
                return EXIT_USAGE
            seen.append(str(args.command))
            if args.command == "help":
                # The command's own --help: one text for both spellings (argparse prints it and exits 0).
                parser.parse_args([args.topic, "--help"] if args.topic else ["--help"])
                return EXIT_OK  # pragma: no cover - --help exits
            if args.command not in _COMMAND_NAMES:
                parser.error(f"unknown command {args.command!r}")
                return EXIT_USAGE  # pragma: no cover - parser.error exits
            return (args, *_command(args.command))
        except (KeyboardInterrupt, ImportError) as exc:
            # numpy turns a Ctrl-C during its compiled modules' start into an ImportError: ours when SIGINT fired.
            if not sigint.installed or (isinstance(exc, ImportError) and not sigint.fired):
                raise
            sigint.ignore()
            print(f"{_named(argv, seen)}: interrupted before it started; nothing was written", file=sys.stderr)
            return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None, as_program: bool, seen: list[str]) -> int:
    """Start the command, then run it under its own Ctrl-C handling (main's body, inside the output guard)."""
    started = _start(argv, as_program, seen)
    if isinstance(started, int):
        return started
    args, run, failures = started
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
