"""An application run as fingrav's child: found first, its signals forwarded, its exit status passed through.

``fingrav record -- CMD`` and ``fingrav run -- CMD`` wrap any command the way
a shell runs it: the command is looked up on ``PATH`` before anything is
recorded (127 when it is not found, 126 when it cannot be executed, the
shell's codes), its standard streams are fingrav's own (never read or
rewritten), and its exit status becomes fingrav's, a child ended by signal N
giving 128 + N as a shell reports it (POSIX ``sh``, "Exit Status").
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from typing import Any, Callable, Mapping, Optional, Sequence

from fingrav_native._errors import FingravError

__all__ = ["EXIT_CANNOT_EXECUTE", "EXIT_NOT_FOUND", "FORWARDED_SIGNALS", "CommandNotRunnableError",
           "ForwardedSignals", "exit_status", "find_command"]

#: A shell's exit status for a command not found (POSIX sh, "Command Search and Execution").
EXIT_NOT_FOUND = 127

#: A shell's exit status for a command found but not executable.
EXIT_CANNOT_EXECUTE = 126

#: The signals fingrav passes on to its child: an interrupt, a termination, a closed terminal.
FORWARDED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class CommandNotRunnableError(FingravError):
    """The command cannot be started: not found (``exit_code`` 127) or not executable (126)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def find_command(argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> str:
    """The executable a shell would run for ``argv[0]``; raises :class:`CommandNotRunnableError` naming it.

    Parameters
    ----------
    argv : sequence of str
        The command and its arguments (at least the command).
    env : mapping, optional
        The child's environment, whose ``PATH`` is searched (default fingrav's).

    Returns
    -------
    str
        The path of the executable.
    """
    if not argv or not argv[0]:
        raise CommandNotRunnableError("no command given after --", EXIT_NOT_FOUND)
    name = argv[0]
    if os.sep in name:
        if not os.path.exists(name):
            raise CommandNotRunnableError(f"{name}: no such file", EXIT_NOT_FOUND)
        if os.path.isdir(name) or not os.access(name, os.X_OK):
            raise CommandNotRunnableError(f"{name}: cannot be executed (a folder, or no execute permission)",
                                          EXIT_CANNOT_EXECUTE)
        return name
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(name, path=path)
    if found is None:
        raise CommandNotRunnableError(f"{name}: command not found on PATH", EXIT_NOT_FOUND)
    return found


def exit_status(returncode: int) -> int:
    """A child's exit status as a shell reports it: its code, or 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


class ForwardedSignals:
    """While open, SIGINT, SIGTERM and SIGHUP sent to fingrav are sent on to the child (or counted without one).

    A context manager, used in the main thread around the child's whole
    life. Each signal is sent to the child's process group when the child
    leads one of its own (a program that called ``setsid``), else to the
    child. One exception, as ``uv run`` makes it: a SIGINT while the child
    shares fingrav's process group and that group is the terminal's
    foreground one was sent by the terminal (Ctrl-C) to both already, and
    is not sent twice. A signal whose handler is ``SIG_IGN`` (``nohup``, a
    background job) stays ignored, as it is in the child. Outside the main
    thread nothing is installed. The handlers found are put back on exit.

    Attributes
    ----------
    received : list of int
        Every signal received, in order.
    """

    def __init__(self, on_signal: Optional[Callable[[int], None]] = None) -> None:
        self.received: list[int] = []
        self._child: Optional[subprocess.Popen[bytes]] = None
        self._previous: dict[int, Any] = {}
        self._on_signal = on_signal

    def attach(self, child: subprocess.Popen[bytes]) -> None:
        """Forward to ``child`` from now on (a signal received before it started is sent at once)."""
        self._child = child
        for signum in self.received:
            self._forward(signum)

    def __enter__(self) -> ForwardedSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in FORWARDED_SIGNALS:
                if signal.getsignal(signum) != signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def _handle(self, signum: int, frame: object) -> None:
        self.received.append(signum)
        if self._child is not None:
            self._forward(signum)
        if self._on_signal is not None:
            self._on_signal(signum)

    def _forward(self, signum: int) -> None:
        child = self._child
        if child is None or child.returncode is not None:
            return
        try:
            group = os.getpgid(child.pid)
            if signum == signal.SIGINT and group == os.getpgrp() and _terminal_foreground() == group:
                return  # the terminal sent this Ctrl-C to the whole foreground group, the child included
            if group == child.pid:
                os.killpg(group, signum)
            else:
                os.kill(child.pid, signum)
        except ProcessLookupError:
            pass  # it ended meanwhile: its status is what counts


def _terminal_foreground() -> Optional[int]:
    """The foreground process group of fingrav's controlling terminal (None: no terminal)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return None
    try:
        return os.tcgetpgrp(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
