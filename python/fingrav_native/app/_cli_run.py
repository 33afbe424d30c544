"""``fingrav record`` and ``fingrav run``: the recorder (and the launch capture) around any application."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Optional

from fingrav_native.app._child import (
    CommandNotRunnableError,
    ForwardedSignals,
    exit_status,
    find_command,
)
from fingrav_native.app._cli_common import EXIT_OK
from fingrav_native.app._recorder import PowerRecorder
from fingrav_native.files._outputs import check_output_path

__all__ = ["child_command", "record_command", "recorded_out", "run_child", "run_command", "say"]


def say(command: str, text: str) -> None:
    """One of fingrav's own lines: on stderr, prefixed, so the application's output stays as it is."""
    print(f"fingrav {command}: {text}", file=sys.stderr, flush=True)


def child_command(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (argparse keeps the ``--`` in a remainder when it opens it)."""
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    return cmd


def recorded_out(path: str, force: bool, option: str = "--out") -> str:
    """The capture's path, checked before anything runs: an existing file only with ``--force``, and only a capture."""
    out = check_output_path(path, option, writes="capture")
    if os.path.lexists(out) and not force:
        raise ValueError(f"{option}={out!r}: exists; a capture is never written over: choose another name, or "
                         "give --force to replace it")
    return out


def _record_args(args: argparse.Namespace) -> tuple[list[str], str]:
    """The command and the capture's path of ``fingrav record``, checked by name."""
    cmd = child_command(args)
    if cmd and args.seconds is not None:
        raise ValueError(f"--seconds={args.seconds:g}: records for a time without a command; with a command the "
                         "recording lasts as long as the command: give one or the other")
    if not cmd and args.seconds is None:
        raise ValueError("no command: give the command to record around after -- (fingrav record --device DEV "
                         "--out power.npz -- CMD [ARGS]), or --seconds N to record for a time")
    return cmd, recorded_out(args.out, args.force)


def record_command(args: argparse.Namespace) -> int:
    """``fingrav record``: the device's power saved around CMD (its exit status returned) or for ``--seconds``."""
    cmd, out = _record_args(args)
    if cmd:
        try:
            find_command(cmd)
        except CommandNotRunnableError as exc:
            say("record", f"{exc}; nothing was recorded")
            return exc.exit_code
    try:
        with ForwardedSignals() as signals, PowerRecorder(args.device, out) as rec:
            code = run_child(cmd, signals) if cmd else _wait(float(args.seconds), signals)
    except CommandNotRunnableError as exc:
        say("record", f"{exc}; the capture of the time it took is saved to {out}")
        return exc.exit_code
    capture = rec.capture
    span = (int(capture.epoch_brackets[-1, 1]) - int(capture.epoch_brackets[0, 1])) / 1e9
    say("record", f"{len(capture)} power logs over {span:.2f} s saved to {out}")
    return code


def run_child(cmd: list[str], signals: ForwardedSignals, env: Optional[dict[str, str]] = None) -> int:
    """Run ``cmd`` to its end with the signals forwarded; its exit status as a shell reports it."""
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as exc:  # found on PATH, refused by exec (a script without its interpreter, ENOEXEC)
        raise CommandNotRunnableError(f"{cmd[0]}: cannot be executed ({exc.strerror or exc})", 126) from exc
    signals.attach(child)
    return exit_status(child.wait())


def _wait(seconds: float, signals: ForwardedSignals) -> int:
    """Sleep ``seconds`` (a forwarded signal ends it early: 128 + its number, as for a command it ended)."""
    end = time.monotonic() + seconds
    while not signals.received:
        left = end - time.monotonic()
        if left <= 0:
            return EXIT_OK
        time.sleep(min(left, 0.05))
    return 128 + signals.received[0]


def run_command(args: argparse.Namespace) -> int:
    """``fingrav run``: CMD with the launch capture injected and its power recorded; the per-kernel table."""
    raise NotImplementedError
