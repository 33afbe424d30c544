"""`fingrav profile` (Ctrl-C, --resume), `fingrav sync`, and the terminal progress line."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from fingrav_native.app import CampaignProgress, TerminalProgress, as_reporter
from fingrav_native.app import _cli as cli
from fingrav_native.files import load_campaign_runs, load_profile, read_manifest

SUBPROCESS_TIMEOUT_S = 300  # bounds a hang only


@pytest.mark.slow
def test_profile_writes_the_campaign_folder(tmp_path, capsys):
    out = tmp_path / "c"
    argv = ["profile", "cb-4k-gemm", "--runs", "30", "--executions", "12", "--out", str(out), "--trace", "--plots"]
    assert cli.main(argv) == cli.EXIT_OK
    stdout = capsys.readouterr().out
    assert stdout.startswith("Profile('cb-4k-gemm' on sim: both")
    assert "error budget (median per LOI, +-): clock map" in stdout
    # The sensor line says what a log is and where each figure comes from.
    assert "  sensor: simulated instant-1ms sensor (instant)" in stdout
    assert "period 1 ms (documented), window 0 (documented), delay 0 (documented)" in stdout
    prof = load_profile(str(out / "profile.fgprof"))
    assert prof.settings["runs"] == 30 and prof.settings["executions_per_run"] == 12
    assert len(load_campaign_runs(str(out))) == prof.runs
    trace = json.loads((out / "profile.trace.json").read_text())
    assert trace["traceEvents"]
    # Figures of a campaign folder's profile.fgprof are named after the folder.
    for name in ("whole_run", "kernel_sse", "kernel_ssp", "by_component"):
        assert (out / f"c_{name}.png").stat().st_size > 10_000
    # Progress goes to stderr only on a terminal: pytest's capture is not one.
    assert capsys.readouterr().err == ""


def test_profile_refuses_a_folder_holding_a_campaign_and_resume_of_a_complete_one_replays(tmp_path, capsys):
    out = str(tmp_path / "c")
    base = ["profile", "cb-4k-gemm", "--mode", "sse", "--runs", "20", "--out", out]
    assert cli.main(base) == cli.EXIT_OK
    first = capsys.readouterr().out
    assert cli.main(base) == cli.EXIT_USAGE
    assert "already holds a campaign; continue it with --resume" in capsys.readouterr().err
    assert cli.main(["profile", "--resume", out]) == cli.EXIT_OK
    assert capsys.readouterr().out.splitlines()[:2] == first.splitlines()[:2]
    assert cli.main(["profile", "--resume", out, "--runs", "21"]) == cli.EXIT_USAGE
    assert "--runs=21: the campaign" in capsys.readouterr().err


@pytest.mark.parametrize("argv, code, message", [
    (["profile"], cli.EXIT_USAGE, "kernel: give a preset"),
    (["profile", "no-such-kernel"], cli.EXIT_USAGE, "kernel='no-such-kernel': not a simulator preset"),
    (["profile", "mod:fn"], cli.EXIT_USAGE, "module:function workload runs on amd or nvidia"),
    (["profile", "cb-4k-gemm", "--runs", "1"], cli.EXIT_USAGE, "argument --runs: '1'"),
    (["profile", "cb-4k-gemm", "--margin", "1.5"], cli.EXIT_USAGE, "argument --margin: '1.5'"),
    (["profile", "cb-4k-gemm", "--executions", "2"], cli.EXIT_USAGE, "argument --executions: '2'"),
    (["profile", "cb-4k-gemm", "--seed", "-1"], cli.EXIT_USAGE, "argument --seed: '-1'"),
    (["profile", "cb-9k-conv", "--backend", "amd"], cli.EXIT_USAGE, "GEMM/GEMV preset"),
    (["profile", "--resume", "/nonexistent/folder"], cli.EXIT_FAILURE, "no command.json there"),
    (["profile", "not_a_module_xyz:fn", "--backend", "nvidia"], cli.EXIT_FAILURE, "not_a_module_xyz"),
    (["sync", "--seconds", "0"], cli.EXIT_USAGE, "argument --seconds: '0'"),
    (["sync", "--burst", "1"], cli.EXIT_USAGE, "argument --burst: '1'"),
    (["sync", "--interval-ms", "0"], cli.EXIT_USAGE, "argument --interval-ms: '0'"),
])
def test_bad_usage_and_failures_have_their_exit_codes(tmp_path, monkeypatch, capsys, argv, code, message):
    monkeypatch.chdir(tmp_path)
    try:
        got = cli.main(argv)
    except SystemExit as exc:  # a number out of its range is refused by argparse
        got = exc.code
    assert got == code
    assert message in capsys.readouterr().err


def test_sync_reports_the_floor_skew_and_truth(tmp_path, capsys):
    assert cli.main(["sync", "--seconds", "3", "--plot", str(tmp_path / "s.png")]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "floor (half the best round trip): 1000 ns" in out  # the simulator's 2 us best round trip
    assert "skew +20." in out  # the simulated device runs 20 ppm fast
    assert "within the bound for 100.0% of reads" in out
    assert (tmp_path / "s.png").stat().st_size > 10_000
    assert cli.main(["sync", "--seconds", "1", "--json"]) == cli.EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["backend"] == "sim" and report["truth"]["covered"] == 1.0
    assert report["latency"]["min_ns"] >= 2000


def test_sync_on_a_missing_vendor_library_says_which(monkeypatch, capsys):
    monkeypatch.setenv("FINGRAV_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    monkeypatch.setenv("FINGRAV_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
    assert cli.main(["sync", "--backend", "nvidia"]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "fingrav sync:" in err and ("libnvidia-ml" in err or "libcuda" in err)


@pytest.mark.slow
def test_ctrl_c_keeps_the_runs_and_resume_finishes(tmp_path):
    # A real SIGINT to a real `python -m fingrav_native profile` process.
    out = tmp_path / "c"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "fingrav_native", "profile", "cb-2k-gemm", "--mode", "sse", "--runs", "4000",
            "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    runs = out / "runs"
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if runs.is_dir() and sum(n.endswith(".npz") for n in os.listdir(runs)) >= 30:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the campaign ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    assert proc.returncode == cli.EXIT_INTERRUPTED == 130, stderr
    assert "interrupted;" in stderr and f"fingrav profile --resume {out}" in stderr
    assert "Traceback" not in stderr
    kept = len(load_campaign_runs(str(out)))
    assert kept >= 30
    assert read_manifest(str(out))["state"] == "interrupted"
    done = subprocess.run([sys.executable, "-m", "fingrav_native", "profile", "--resume", str(out)],
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, env=env)
    assert done.returncode == 0, done.stderr
    prof = load_profile(str(out / "profile.fgprof"))
    assert prof.settings["resumed_runs"] == kept
    assert prof.runs == len(load_campaign_runs(str(out))) > kept
    assert read_manifest(str(out))["state"] == "complete"


def _state(**kw):
    base = dict(kernel="k", phase="runs", runs_done=5, runs_planned=10, lois=3, loi_target=40, elapsed_s=65.0,
                eta_s=30.0)
    base.update(kw)
    return CampaignProgress(**base)


def test_terminal_progress_is_silent_off_a_terminal():
    buf = io.StringIO()
    t = TerminalProgress(buf)
    assert not t.enabled
    t.line("hello")
    t.update(_state())
    t.close()
    assert buf.getvalue() == ""


def test_terminal_progress_draws_one_line_in_place():
    buf = io.StringIO()
    t = TerminalProgress(buf, force=True, min_interval_s=0)
    t.update(_state())
    t.update(_state(runs_done=6))
    t.line("  top-up: 3 LOIs short, 4 more runs")
    t.update(_state(phase="done", runs_done=10, eta_s=None))
    text = buf.getvalue()
    assert "\rk runs  runs 5/10  LOIs 3/40  elapsed 1:05  ETA 0:30" in text
    assert "\n" in text and text.endswith("\n")
    assert "  top-up: 3 LOIs short, 4 more runs" in text
    assert "k done  runs 10/10" in text


def test_terminal_progress_rate_limits_redraws():
    buf = io.StringIO()
    t = TerminalProgress(buf, force=True, min_interval_s=3600)
    for i in range(50):
        t.update(_state(runs_done=i))
    assert buf.getvalue().count("\r") == 1


def test_as_reporter_forms():
    lines = []
    r = as_reporter(lines.append)
    r.line("x")
    r.update(_state())
    assert lines == ["x"]
    assert isinstance(as_reporter(True), TerminalProgress)
    with pytest.raises(ValueError, match="progress=3"):
        as_reporter(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_interval_s"):
        TerminalProgress(io.StringIO(), min_interval_s=-1)


def test_help_of_every_command_has_examples(capsys):
    for cmd in ("profile", "sync", "plot", "export", "devices", "demo"):
        with pytest.raises(SystemExit) as exc:
            cli.main([cmd, "--help"])
        assert exc.value.code == 0
        assert "example" in capsys.readouterr().out


@pytest.mark.slow
def test_plot_of_several_profiles_adds_the_side_by_side_figure(tmp_path, capsys):
    for kernel in ("cb-4k-gemm", "cb-2k-gemm"):
        argv = ["profile", kernel, "--mode", "sse", "--runs", "20", "--out", str(tmp_path / kernel)]
        assert cli.main(argv) == cli.EXIT_OK
    capsys.readouterr()
    paths = [str(tmp_path / k / "profile.fgprof") for k in ("cb-4k-gemm", "cb-2k-gemm")]
    assert cli.main(["plot", *paths, "--out", str(tmp_path / "figs")]) == cli.EXIT_OK
    written = capsys.readouterr().out.split()
    # Figures are named after the campaign folders, so two profile.fgprof files do not collide.
    assert str(tmp_path / "figs" / "cb-4k-gemm_kernel_sse.png") in written
    assert str(tmp_path / "figs" / "cb-2k-gemm_kernel_sse.png") in written
    assert written[-1] == str(tmp_path / "figs" / "kernels_by_component.png")
    assert len(set(written)) == len(written)


def test_profile_takes_the_launch_phase_and_resume_keeps_it(tmp_path, capsys):
    out = tmp_path / "p"
    argv = ["profile", "cb-4k-gemm", "--mode", "sse", "--runs", "8", "--phase", "random", "--out", str(out)]
    assert cli.main(argv) == cli.EXIT_OK
    assert json.loads((out / "command.json").read_text())["phase"] == "random"
    prof = load_profile(str(out / "profile.fgprof"))
    assert prof.settings["phase"] == {"requested": "random", "used": "random"}
    # A resumed campaign may not change it.
    assert cli.main(["profile", "--resume", str(out), "--phase", "steered"]) != cli.EXIT_OK
    assert "--phase='steered'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["profile", "cb-4k-gemm", "--phase", "sometimes"])


@pytest.mark.parametrize("argv, message", [
    (["profile", "cb-4k-gemm", "--mode", "sse", "--executions", "8"], "--executions=8: sets the executions per run"),
    (["profile", "cb-4k-gemm", "--out", ""], "--out='': empty; give a folder"),
    (["profile", "--resume", ""], "--resume='': empty; give the campaign folder"),
    (["profile", "cb-4k-gemm", "--device", "2"], "--device=2: picks a GPU on amd or nvidia; the simulator is one"),
    (["sync", "--device", "1"], "--device=1: picks a GPU on amd or nvidia"),
    (["sync", "--backend", "nvidia", "--seed", "4"], "--seed=4: seeds the simulated device; nvidia has none"),
    (["characterize", "--device", "3"], "--device=3: picks a GPU on amd or nvidia"),
])
def test_options_that_would_be_ignored_are_refused(tmp_path, monkeypatch, capsys, argv, message):
    # Each would otherwise be ignored: --out '' falling back to ./fingrav-cb-4k-gemm, --executions with
    # --mode sse dropped, --device with the simulator and --seed on hardware doing nothing.
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_a_workload_spec_is_checked_before_it_is_called(tmp_path, monkeypatch, capsys):
    import json

    called = []
    monkeypatch.setattr(json, "dumps", lambda *a, **k: called.append(a) or "")  # noqa: ARG005
    monkeypatch.chdir(tmp_path)
    (tmp_path / "holds").mkdir()
    (tmp_path / "holds" / "command.json").write_text("{}")
    # The folder is refused before the workload module's function is looked at ...
    assert cli.main(["profile", "json:dumps", "--backend", "nvidia", "--out", "holds"]) == cli.EXIT_USAGE
    assert "already holds a campaign" in capsys.readouterr().err and not called


@pytest.mark.parametrize("spec, message", [
    ("json:dumps", "needs arguments"),
    ("os:abort", "names a builtin_function_or_method, not a Python function"),
    ("collections:OrderedDict", "names a type, not a Python function"),
])
def test_a_workload_spec_that_is_not_a_workload_function_is_never_called(spec, message):
    from fingrav_native.backends import resolve_workload

    # os:abort would end the process, json:dumps was called with no arguments: refused before any call.
    with pytest.raises(ValueError, match=f"spec={spec!r}: .*{message}"):
        resolve_workload(spec)


def test_a_workload_function_annotated_to_return_something_else_is_never_called(tmp_path, monkeypatch):
    from fingrav_native.backends import resolve_workload

    (tmp_path / "mywork_annotated.py").write_text(
        "CALLS = []\ndef gemm() -> int:\n    CALLS.append(1)\n    return 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="annotated to return int, not a Workload"):
        resolve_workload("mywork_annotated:gemm")
    import mywork_annotated

    assert mywork_annotated.CALLS == []


def test_unclear_sync_reports_the_launch_record_clocks(capsys):
    from fingrav_native.app._sync import sync_report
    from fingrav_native.backends import SimBackend

    calls = [0]

    def synthetic(clock: str, n: int) -> np.ndarray:
        # Width 200 ns; offset 7 us (BOOTTIME), or 1.7e18 ns with a 1 us step between bursts (REALTIME).
        calls[0] += 1
        before = 1_000_000_000 * calls[0] + 1_000 * np.arange(n, dtype=np.int64)
        base = 7_000 if clock == "CLOCK_BOOTTIME" else 1_700_000_000_000_000_000 + 1_000 * (calls[0] // 2 % 2)
        return np.stack([before, before + 100 + base, before + 200], axis=1)

    report = sync_report(SimBackend(seed=1), seconds=0.2, burst=4, interval_s=0.1, read_record_clock=synthetic)
    text = report.format()
    assert "launch record clocks against CLOCK_MONOTONIC_RAW" in text
    boot, real = report.record_clocks
    assert boot.clock == "CLOCK_BOOTTIME" and boot.width_p50_ns == 200 and boot.offset_spread_ns == 0
    assert real.offset_spread_ns == 1_000 and real.offset_ns > 1.6e18
    assert "CLOCK_BOOTTIME: 12 reads" in text and "spread 1000 ns" in text
    # The command's report, with the native reads, has both lines and their JSON.
    assert cli.main(["sync", "--seconds", "0.2"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "    CLOCK_BOOTTIME: " in out and "    CLOCK_REALTIME: " in out and "bracket width min" in out
    assert cli.main(["sync", "--seconds", "0.2", "--json"]) == cli.EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert [r["clock"] for r in doc["record_clocks"]] == ["CLOCK_BOOTTIME", "CLOCK_REALTIME"]
    assert doc["record_clocks"][0]["width_min_ns"] >= 0
