"""A recording survives its process being killed: the journal beside the capture, and SIGTERM / SIGHUP.

The fast tests copy the journal while a recording runs: the copy is exactly
what a SIGKILL at that moment leaves (every ``write(2)`` returned is in it),
and it is read back against the capture the same recording writes whole at
the end. The slow tests kill a real recording process (SIGKILL, SIGTERM,
SIGHUP) on the real-time simulator and compare what is read back with what
the child said it had recorded, and the logs' placement with the
simulator's own logger clock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import fingrav_native as fg
from fingrav_native import _core
from fingrav_native.app import PowerRecorder
from fingrav_native.app import _recorder as recorder_module
from fingrav_native.files import CaptureFormatError, PowerCapture, RecoveredCaptureWarning, load_capture
from fingrav_native.files._journal import JOURNAL_MAGIC
from fingrav_native.sim import SimGPU


def _record_with_snapshot(tmp_path: Path, seconds: float = 0.4) -> tuple[PowerCapture, Path]:
    """A recording on the real-time simulator whose journal is copied midway: the capture, and the copy."""
    gpu = SimGPU(realtime=True, seed=4)
    out = tmp_path / "power.npz"
    snap = tmp_path / "killed.npz.journal"
    with PowerRecorder(gpu, out, brackets_every_s=0.05) as rec:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            gpu.run("cb-4k-gemm", 10)
            gpu.idle(2e6)
        assert os.path.exists(str(out) + ".journal") and not out.exists()
        shutil.copyfile(str(out) + ".journal", snap)  # what a SIGKILL now would leave
        gpu.run("cb-4k-gemm", 10)
    assert out.exists() and not os.path.exists(str(out) + ".journal")  # written whole, the journal gone
    return rec.capture, snap


def _recover(path: Path) -> tuple[PowerCapture, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capture = fg.load(path)
    return capture, [w for w in caught if issubclass(w.category, RecoveredCaptureWarning)]


def test_data_loss_a_killed_recording_is_rebuilt_from_its_journal(tmp_path):
    whole, snap = _record_with_snapshot(tmp_path)
    # fg.load of the capture's name, the capture missing: the journal beside it is read.
    got, said = _recover(tmp_path / "killed.npz")
    assert len(said) == 1 and "did not end" in str(said[0].message) and "killed.npz.journal" in str(said[0].message)
    n = len(got)
    assert n > 50 and got.recovered is not None and got.recovered["logs"] == n
    assert f"{n} logs over" in str(said[0].message) and "up to a second" in str(said[0].message)
    # Exactly what the recorder had: a prefix of the whole capture's logs and of each clock's brackets.
    assert np.array_equal(got.samples, whole.samples[:n])
    for clock in whole.clocks:
        b = got.brackets(clock)
        assert len(b) >= 8 and np.array_equal(b, whole.brackets(clock)[: len(b)])
    assert got.source == whole.source and got.sensor == whole.sensor and got.period_ns == whole.period_ns
    assert got.meta["recording_id"] == whole.meta["recording_id"]
    assert got.stats["drained"] == n
    # Its clock maps place the logs where the whole capture's do (within the maps' own bounds).
    lm, wm = got.logger_map(), whole.logger_map()
    ts = got.samples["source_ts"]
    origin = int(got.meta["started_epoch_ns"])
    diff = np.abs(lm.to_host_relative(ts, origin) - wm.to_host_relative(ts, origin))
    assert diff.max() <= lm.error_bound_at(lm.to_host_ns(ts)).max() + wm.error_bound_at(wm.to_host_ns(ts)).max() + 1e3
    # The journal itself loads too, and the recovered capture saves whole and says it was recovered.
    direct, said2 = _recover(snap)
    assert np.array_equal(direct.samples, got.samples) and len(said2) == 1
    fg.save(direct, tmp_path / "saved.npz")
    assert load_capture(tmp_path / "saved.npz").recovered["logs"] == n
    assert whole.recovered is None


def test_data_loss_a_torn_journal_tail_is_dropped_and_said_never_misread(tmp_path):
    whole, snap = _record_with_snapshot(tmp_path, seconds=0.25)
    data = snap.read_bytes()
    assert data.startswith(JOURNAL_MAGIC)
    full, _ = _recover(snap)
    rng = np.random.default_rng(0)
    cuts = sorted({*range(len(data) - 300, len(data)), *rng.integers(len(JOURNAL_MAGIC), len(data), 40).tolist()})
    header_end = None
    for cut in cuts:
        torn = tmp_path / "torn.npz.journal"
        torn.write_bytes(data[:cut])
        try:
            got, said = _recover(torn)
        except CaptureFormatError as exc:  # only a journal cut inside its header record has nothing to give
            assert "nothing to recover" in str(exc) and "torn.npz.journal" in str(exc)
            assert header_end is None or cut < header_end
            continue
        header_end = cut if header_end is None else min(header_end, cut)
        assert len(said) == 1
        n = len(got)
        assert np.array_equal(got.samples, full.samples[:n])  # a prefix, never a misread record
        for clock in got.clocks:
            assert np.array_equal(got.brackets(clock), full.brackets(clock)[: len(got.brackets(clock))])
        if got.recovered["dropped_bytes"]:
            assert "was dropped" in str(said[0].message) and "cut short" in got.recovered["dropped_reason"]
    # A last record written in part (its bytes there, not all of them right): refused by its checksum.
    damaged = bytearray(data)
    damaged[-3] ^= 0xFF
    (tmp_path / "bad.npz.journal").write_bytes(bytes(damaged))
    got, said = _recover(tmp_path / "bad.npz.journal")
    assert "checksum" in got.recovered["dropped_reason"] and "checksum" in str(said[0].message)
    assert np.array_equal(got.samples, full.samples[: len(got)])


def test_data_loss_a_journal_left_by_a_killed_recording_is_never_written_over(tmp_path):
    _, snap = _record_with_snapshot(tmp_path, seconds=0.1)
    target = tmp_path / "again.npz"
    shutil.copyfile(snap, str(target) + ".journal")
    before = Path(str(target) + ".journal").read_bytes()
    with pytest.raises(ValueError, match=r"path='.*again.npz': '.*again.npz.journal' beside it holds a recording"):
        PowerRecorder(_core.SyntheticSource(), target)
    assert Path(str(target) + ".journal").read_bytes() == before


def test_data_loss_a_capture_that_cannot_be_written_keeps_its_journal(tmp_path, monkeypatch):
    def full_disk(self, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PowerCapture, "save", full_disk)
    out = tmp_path / "p.npz"
    with pytest.raises(OSError, match="No space") as info, pytest.warns(RuntimeWarning, match="in the journal"):
        with PowerRecorder(_core.SyntheticSource(period_ns=1_000_000), out, brackets_every_s=0.02):
            time.sleep(0.1)
    assert any("p.npz.journal" in note for note in info.value.__notes__)
    monkeypatch.undo()
    got, said = _recover(out)
    assert len(got) > 10 and len(said) == 1


def test_unclear_a_journal_of_another_recording_beside_a_whole_capture_is_said(tmp_path):
    whole, snap = _record_with_snapshot(tmp_path, seconds=0.1)
    out = tmp_path / "power.npz"
    # The same recording's journal (a kill between the rename and its removal): the capture is that recording.
    shutil.copyfile(snap, str(out) + ".journal")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(load_capture(out).samples, whole.samples)
    # A later recording to the same name that was killed: the capture read is the earlier one, and that is said.
    other = tmp_path / "other.npz"
    with PowerRecorder(_core.SyntheticSource(), other, brackets_every_s=0.02):
        shutil.copyfile(str(other) + ".journal", str(out) + ".journal")
    with pytest.warns(RecoveredCaptureWarning, match="journal of another recording to this name that did not end"):
        load_capture(out)


def test_data_loss_sigterm_inside_a_recording_writes_the_capture_then_ends_as_the_signal(tmp_path, monkeypatch):
    delivered: list[int] = []
    monkeypatch.setattr(recorder_module.os, "kill", lambda pid, signum: delivered.append(signum))
    before = {s: signal.getsignal(s) for s in recorder_module.CLOSING_SIGNALS}
    out = tmp_path / "p.npz"
    with pytest.raises(SystemExit) as info:
        with PowerRecorder(_core.SyntheticSource(period_ns=1_000_000), out, brackets_every_s=0.02):
            assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
            time.sleep(0.05)
            signal.raise_signal(signal.SIGTERM)
            time.sleep(5)  # pragma: no cover - the signal ends the block first
    # Written whole (no journal left), then the signal delivered again with its default action.
    assert out.exists() and not os.path.exists(str(out) + ".journal") and len(load_capture(out)) > 10
    assert delivered == [signal.SIGTERM] and info.value.code == 128 + signal.SIGTERM
    assert {s: signal.getsignal(s) for s in recorder_module.CLOSING_SIGNALS} == before


def test_data_loss_signal_handlers_only_over_the_default_and_only_in_the_main_thread(tmp_path):
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup: a closed terminal must not end it
    try:
        with PowerRecorder(_core.SyntheticSource(), tmp_path / "a.npz"):
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, previous)
    seen: list[object] = []

    def in_thread() -> None:
        with PowerRecorder(_core.SyntheticSource(), tmp_path / "b.npz"):
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert seen == [signal.SIG_DFL] and (tmp_path / "b.npz").exists()


# --------------------------------------------------------------------------- a real process killed

_CHILD = textwrap.dedent("""
    import json, signal, sys, time
    import numpy as np
    from fingrav_native.app import PowerRecorder
    from fingrav_native.sim import SimGPU

    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as under a terminal, whatever the test runner inherited
    gpu = SimGPU(realtime=True, seed=7)
    # The simulator's logger clock onto CLOCK_MONOTONIC_RAW over the next minute, every 0.1 s.
    ticks = float(gpu.read_clocks(1)[0, 1]) + np.arange(601) * 1e8
    print(json.dumps({"truth": [ticks.tolist(), gpu.host_at_logger_ticks(ticks).tolist()]}), flush=True)
    with PowerRecorder(gpu, sys.argv[1]) as rec:
        while True:
            gpu.run("cb-4k-gemm", 10)
            gpu.idle(2e6)
            print(json.dumps({"raw_ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)}), flush=True)
""")


def _run_child(tmp_path: Path, signum: int, seconds: float = 4.0) -> tuple[Path, int, int, list[list[float]], int]:
    out = tmp_path / "power.npz"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(out)], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    truth = json.loads(child.stdout.readline())["truth"]
    first = last = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = child.stdout.readline()
        raw = json.loads(line)["raw_ns"]
        first = first or raw
        last = raw
    killed_at = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    child.send_signal(signum)
    rc = child.wait(timeout=60)
    child.stdout.close()
    return out, first, max(last, killed_at), truth, rc


def _placed_like_the_truth(capture: PowerCapture, truth: list[list[float]]) -> None:
    """The logger map puts the logs where the simulator's logger clock says, late by its publication delay only."""
    s = capture.samples
    origin = int(capture.meta["started_epoch_ns"])
    true_host = np.interp(s["source_ts"].astype(np.float64), truth[0], truth[1])
    em = capture.epoch_map()
    late = capture.logger_map().to_host_relative(s["source_ts"], origin) - em.to_host_relative(
        np.round(true_host).astype(np.int64), origin)
    assert late.min() > -5_000 and np.median(late) < 200_000, (late.min(), np.median(late))


@pytest.mark.slow
def test_data_loss_sigkill_loses_at_most_the_last_second_of_a_recording(tmp_path):
    out, first, killed_at, truth, rc = _run_child(tmp_path, signal.SIGKILL)
    assert rc == -signal.SIGKILL and not out.exists()
    got, said = _recover(out)
    assert len(said) == 1
    host = got.samples["host_ns"]
    assert host.min() <= first and killed_at - host.max() < 1.2e9, (killed_at - host.max()) / 1e9
    assert np.array_equal(got.samples["seq"], np.arange(len(got), dtype=np.uint64))  # none lost between
    _placed_like_the_truth(got, truth)


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_data_loss_sigterm_and_sighup_write_the_whole_capture_and_end_as_the_signal(tmp_path, signame):
    signum = getattr(signal, signame)
    out, first, killed_at, truth, rc = _run_child(tmp_path, signum)
    assert rc == -signum  # the signal's own default action ended it, after the capture was written
    assert out.exists() and not os.path.exists(str(out) + ".journal")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecoveredCaptureWarning)
        got = load_capture(out)
    assert got.recovered is None and got.stats["drained"] == len(got)
    host = got.samples["host_ns"]
    assert host.min() <= first and host.max() >= killed_at - 50_000_000 and got.epoch_brackets[-1, 0] >= killed_at
    _placed_like_the_truth(got, truth)


def test_unclear_every_recorder_option_is_checked_by_name():
    src = _core.SyntheticSource()
    with pytest.raises(ValueError, match=r"counter_period_ns=2000000: no counter is polled \(counter=None\)"):
        fg.record(src, counter=None, counter_period_ns=2_000_000)
    with pytest.raises(ValueError, match=r"counter_period_ns=2000000: no counter is polled \(.* has no energy counter"):
        fg.record(SimGPU(realtime=True, seed=1), counter_period_ns=2_000_000)
    with pytest.raises(TypeError, match="bogus"):
        fg.record(src, bogus=1)  # type: ignore[call-arg]
