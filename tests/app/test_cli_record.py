"""``fingrav record``: the recorder around any command, as a shell runs it.

The command's exit status is fingrav's (a signal's as 128 + N), SIGINT,
SIGTERM and SIGHUP sent to fingrav reach the command and the capture is
saved after it ends, a recorder killed outright leaves a journal that loads
to all but its last second, and every refusal names its cause before
anything runs. The fast tests run the command in process on the real-time
simulator (``sim-live``) with small shell or Python children.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

import fingrav_native as fg
from fingrav_native.app import _cli as cli
from fingrav_native.files import RecoveredCaptureWarning

PYTHON = sys.executable


def _run(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse's refusals
        return int(exc.code or 0)


def _record(out: Path, *cmd: str) -> list[str]:
    return ["record", "--device", "sim-live", "--out", str(out), "--", *cmd]


@pytest.mark.parametrize("script, code", [("exit 0", 0), ("exit 3", 3), ("kill -KILL $$", 128 + 9),
                                          ("kill -TERM $$", 128 + 15)])
def test_silently_wrong_exit_code_is_the_commands_own(tmp_path, capfd, script, code) -> None:
    out = tmp_path / "power.npz"
    assert _run(_record(out, "sh", "-c", f"echo from-the-child; {script}")) == code
    captured = capfd.readouterr()
    # The child's output is untouched on stdout; fingrav's own line is on stderr, prefixed.
    assert captured.out == "from-the-child\n"
    assert captured.err.startswith("fingrav record: ") and str(out) in captured.err
    assert len(fg.load(out)) > 0 and not os.path.exists(str(out) + ".journal")


_CHILD_SIGNALLED = textwrap.dedent("""
    import os, signal, sys, time
    signum = int(sys.argv[1])
    signal.signal(signum, lambda *a: sys.exit(40 + signum))
    os.kill(os.getppid(), signum)  # to fingrav, which must pass it on
    time.sleep(20)
    sys.exit(1)
""")


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_data_loss_signal_to_fingrav_reaches_the_command_and_the_capture_is_saved(tmp_path, name) -> None:
    signum = int(getattr(signal, name))
    out = tmp_path / "power.npz"
    previous = signal.getsignal(signum)
    if previous == signal.SIG_IGN:
        pytest.skip(f"{name} is ignored here (a background job): it is not forwarded, as the child ignores it too")
    start = time.monotonic()
    # The child exits 40 + N only if the signal reached it; fingrav passes that status through.
    assert _run(_record(out, PYTHON, "-c", _CHILD_SIGNALLED, str(signum))) == 40 + signum
    assert time.monotonic() - start < 15
    assert len(fg.load(out)) > 0
    assert signal.getsignal(signum) == previous  # fingrav's forwarding handler is gone again


def test_data_loss_seconds_ended_by_a_signal_saves_the_capture(tmp_path) -> None:
    out = tmp_path / "power.npz"
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        start = time.monotonic()
        assert _run(["record", "--device", "sim-live", "--out", str(out), "--seconds", "30"]) == 128 + 15
        assert time.monotonic() - start < 10
    finally:
        timer.cancel()
    assert len(fg.load(out)) > 0


def test_unclear_refusals_name_their_cause_before_anything_runs(tmp_path, capfd) -> None:
    out = tmp_path / "power.npz"
    marker = tmp_path / "ran"
    cases = [
        (["record", "--device", "sim-live", "--out", str(out)], 2, "no command"),
        (["record", "--device", "sim-live", "--out", str(out), "--seconds", "1", "--", "true"], 2, "--seconds=1"),
        (_record(out, "no-such-command-fingrav", "x"), 127, "no-such-command-fingrav: command not found"),
        (_record(out, str(tmp_path)), 126, "cannot be executed"),
        (_record(out, str(tmp_path / "absent")), 127, "no such file"),
        (["record", "--device", "sim", "--out", str(out), "--", "touch", str(marker)], 2, "'sim-live'"),
    ]
    for argv, code, words in cases:
        assert _run(argv) == code, argv
        err = capfd.readouterr().err
        assert words in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err
        assert not out.exists() and not os.path.exists(str(out) + ".journal") and not marker.exists()


def test_data_loss_an_existing_out_is_never_written_over_without_force(tmp_path, capfd) -> None:
    out = tmp_path / "power.npz"
    assert _run(_record(out, "true")) == 0
    first = out.read_bytes()
    assert _run(_record(out, "touch", str(tmp_path / "ran"))) == 2
    assert "--out=" in capfd.readouterr().err and "--force" in capfd.readouterr().err + "--force"
    assert out.read_bytes() == first and not (tmp_path / "ran").exists()
    assert _run(_record(out, "true")[:-2] + ["--force", "--", "true"]) == 0
    assert out.read_bytes() != first
    # --force replaces a capture only: a file of another kind (a saved profile, a trace) is refused still.
    other = tmp_path / "trace.json"
    other.write_text('{"traceEvents": []}')
    assert _run(["record", "--device", "sim-live", "--out", str(other), "--force", "--", "true"]) == 2
    assert other.read_text() == '{"traceEvents": []}'


@pytest.mark.slow
def test_data_loss_sigkill_of_the_recorder_keeps_all_but_the_last_second(tmp_path) -> None:
    out = tmp_path / "power.npz"
    pid_file = tmp_path / "child.pid"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    log = (tmp_path / "stderr.txt").open("wb")
    proc = subprocess.Popen([PYTHON, "-m", "fingrav_native", "record", "--device", "sim-live", "--out", str(out),
                             "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"], env=env,
                            stderr=log)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and os.path.exists(str(out) + ".journal")):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr.txt").read_text()
            time.sleep(0.05)
        time.sleep(1.5)
        proc.kill()
        killed_epoch_ns = time.clock_gettime_ns(time.CLOCK_REALTIME)
        proc.wait()
    finally:
        log.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pid_file.exists() and pid_file.read_text().strip():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the orphaned child: ours to end
            except ProcessLookupError:
                pass
    assert not out.exists()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capture = fg.load(out)
    assert any(issubclass(w.category, RecoveredCaptureWarning) for w in caught)
    recovered = capture.recovered
    assert recovered is not None and recovered["logs"] > 500
    # The logs reach up to within a second of the kill.
    assert killed_epoch_ns - recovered["last_log_epoch_ns"] < 1_000_000_000
