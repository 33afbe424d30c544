"""Standard output that goes away: a reader that closes the pipe, a full disk. Every command, one place (main)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from fingrav_native.app import _cli as cli

SUBPROCESS_TIMEOUT_S = 120  # bounds a hang only


class _Refusing:
    """A standard output whose writes the system refuses with ``error``."""

    def __init__(self, error: OSError) -> None:
        self.error = error

    def write(self, text: str) -> int:
        raise self.error

    def flush(self) -> None:
        raise self.error

    def isatty(self) -> bool:
        return False


@pytest.mark.parametrize("argv", [["devices"], ["devices", "--json"], ["sync", "--seconds", "0.2"]])
def test_a_closed_pipe_ends_the_command_quietly_with_141(monkeypatch, capsys, argv):
    monkeypatch.setattr(sys, "stdout", _Refusing(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    assert cli.main(argv) == cli.EXIT_BROKEN_PIPE == 141
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv", [["devices"], ["sync", "--seconds", "0.2", "--json"]])
def test_a_full_disk_on_standard_output_is_one_line_and_exit_1(monkeypatch, capsys, argv):
    monkeypatch.setattr(sys, "stdout", _Refusing(OSError(errno.ENOSPC, "No space left on device")))
    assert cli.main(argv) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert err == f"fingrav {argv[0]}: cannot write to standard output (No space left on device); nothing more " \
                  "was written\n"


def test_a_command_that_handles_oserror_itself_does_not_take_standard_output_for_its_file(monkeypatch, capsys,
                                                                                          tmp_path):
    # export maps OSError to "an output cannot be written": a closed stdout is not one of its files.
    from fingrav_native import profile
    from fingrav_native.backends import SimBackend
    from fingrav_native.files import save_profile

    path = tmp_path / "p.fgprof"
    save_profile(profile("cb-4k-gemm", SimBackend(seed=1), mode="sse", runs=8, top_up=False), path)
    monkeypatch.setattr(sys, "stdout", _Refusing(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    assert cli.main(["export", str(path), "--summary", str(tmp_path / "s.json")]) == cli.EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""
    assert (tmp_path / "s.json").exists()


def _run_program(argv: list[str], stdout) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fingrav_native", *argv], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=SUBPROCESS_TIMEOUT_S)


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["devices", "--verbose"], ["--help"], ["profile", "--help"], []])
def test_the_program_on_a_closed_pipe_exits_141_without_a_traceback(argv):
    # `fingrav devices | head -c 20`, deterministically: the reader is gone before anything is written.
    read, write = os.pipe()
    os.close(read)
    try:
        proc = _run_program(argv, write)
    finally:
        os.close(write)
    assert proc.returncode == cli.EXIT_BROKEN_PIPE
    assert proc.stderr == ""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_the_program_onto_a_full_disk_says_so_in_one_line():
    # `fingrav devices > /dev/full`
    with open("/dev/full", "w") as full:
        proc = _run_program(["devices"], full)
    assert proc.returncode == cli.EXIT_FAILURE
    assert proc.stderr == ("fingrav devices: cannot write to standard output (No space left on device); nothing "
                           "more was written\n")
