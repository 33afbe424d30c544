"""Every command checks its outputs before its work: nothing measured is thrown away, nothing read is overwritten."""

from __future__ import annotations

import os

import pytest

from fingrav_native.app import _cli as cli
from fingrav_native.app import _cli_demo, _cli_device, _cli_files, _cli_profile
from fingrav_native.files import load_profile


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> str:
    """A complete `fingrav profile` campaign folder (read-only use)."""
    out = str(tmp_path_factory.mktemp("cli-outputs") / "c")
    assert cli.main(["profile", "cb-4k-gemm", "--mode", "sse", "--runs", "8", "--out", out, "--quiet"]) == 0
    return out


def _never(*args, **kwargs):
    raise AssertionError("the work started before its output was checked")


def _bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _err_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- characterize: minutes of runs on hardware are not thrown away -----------------------------------------


@pytest.mark.parametrize("where, code, message", [
    ("dir", cli.EXIT_USAGE, "is a directory; give a file name"),
    ("missing", cli.EXIT_FAILURE, "does not exist"),
    ("unwritable", cli.EXIT_FAILURE, "cannot be written there"),
    ("empty", cli.EXIT_USAGE, "--out='': empty"),
    ("run file", cli.EXIT_USAGE, "nothing but the campaign itself writes there"),
])
def test_characterize_checks_out_before_it_measures(tmp_path, monkeypatch, capsys, campaign, request, where, code,
                                                    message):
    monkeypatch.setattr(_cli_device, "characterize", _never)
    monkeypatch.setattr(_cli_device, "make_backend", _never)
    folder = request.getfixturevalue("unwritable_folder") if where == "unwritable" else ""
    out = {"dir": str(tmp_path), "missing": str(tmp_path / "no" / "s.json"),
           "unwritable": os.path.join(folder, "s.json"),
           "empty": "", "run file": os.path.join(campaign, "runs", "run_000001.npz")}[where]
    assert cli.main(["characterize", "--out", out]) == code
    assert message in _err_line(capsys)


def test_characterize_from_logs_refuses_device_options_it_would_ignore(tmp_path, capsys):
    logs, load = tmp_path / "logs.csv", tmp_path / "load.csv"
    logs.write_text("t_ns,power_w\n1,2\n")
    load.write_text("start_ns,end_ns\n1,2\n")
    for option in (["--runs", "10"], ["--backend", "sim"], ["--kernel", "cb-4k-gemm"], ["--half-period-ms", "5"]):
        argv = ["characterize", "--logs", str(logs), "--load", str(load), *option]
        assert cli.main(argv) == cli.EXIT_USAGE
        assert f"{option[0]}: runs a device; with --logs" in _err_line(capsys)


def test_characterize_out_onto_its_own_logs_is_refused(tmp_path, capsys):
    logs, load = tmp_path / "logs.csv", tmp_path / "load.csv"
    logs.write_text("t_ns,power_w\n1,2\n")
    load.write_text("start_ns,end_ns\n1,2\n")
    assert cli.main(["characterize", "--logs", str(logs), "--load", str(load), "--out", str(logs)]) == cli.EXIT_USAGE
    assert "is an input of this command" in _err_line(capsys)
    assert logs.read_text() == "t_ns,power_w\n1,2\n"


# --- export: the measured file is never the output ----------------------------------------------------------


@pytest.mark.parametrize("option", ["--summary", "--trace"])
def test_export_onto_its_own_profile_is_refused_and_the_profile_kept(campaign, tmp_path, capsys, option):
    profile = os.path.join(campaign, "profile.fgprof")
    before = _bytes(profile)
    assert cli.main(["export", profile, option, profile]) == cli.EXIT_USAGE
    line = _err_line(capsys)
    assert f"{option}=" in line and "is an input of this command" in line
    assert _bytes(profile) == before
    load_profile(profile)


@pytest.mark.parametrize("target", ["runs/run_000002.npz", "campaign.json", "command.json"])
def test_export_onto_a_campaigns_files_is_refused(campaign, tmp_path, capsys, target):
    path = os.path.join(campaign, target)
    before = _bytes(path)
    assert cli.main(["export", os.path.join(campaign, "profile.fgprof"), "--summary", path]) == cli.EXIT_USAGE
    assert "nothing but the campaign itself writes there" in _err_line(capsys)
    assert _bytes(path) == before


def test_export_onto_another_saved_profile_is_refused(campaign, tmp_path, capsys):
    other = tmp_path / "other.fgprof"
    other.write_bytes(_bytes(os.path.join(campaign, "profile.fgprof")))
    assert cli.main(["export", os.path.join(campaign, "profile.fgprof"), "--trace", str(other)]) == cli.EXIT_USAGE
    assert "holds a saved profile, which this would overwrite" in _err_line(capsys)


def test_export_with_one_file_for_two_outputs_or_an_empty_one_is_refused(campaign, tmp_path, capsys):
    profile = os.path.join(campaign, "profile.fgprof")
    same = str(tmp_path / "x.json")
    assert cli.main(["export", profile, "--trace", same, "--summary", same]) == cli.EXIT_USAGE
    assert "the same file" in _err_line(capsys)
    assert not os.path.exists(same)
    assert cli.main(["export", profile, "--summary", ""]) == cli.EXIT_USAGE
    assert "--summary='': empty" in _err_line(capsys)


def test_export_checks_its_outputs_before_it_reads_the_profile(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_cli_files, "_load", _never)
    assert cli.main(["export", "p.fgprof", "--summary", str(tmp_path / "no" / "s.json")]) == cli.EXIT_FAILURE
    assert "does not exist" in _err_line(capsys)
    (tmp_path / "f").write_text("")
    assert cli.main(["export", "p.fgprof", "--parquet", str(tmp_path / "f")]) == cli.EXIT_USAGE
    assert "is an existing file, not a folder" in _err_line(capsys)


# --- sync --plot: the file named is the file written ---------------------------------------------------------


@pytest.mark.parametrize("name, code, message", [
    ("dir", cli.EXIT_USAGE, "is a directory; give a file name"),
    ("sync", cli.EXIT_USAGE, "give a file name ending .png, .pdf, .svg"),
    ("sync.jpeg", cli.EXIT_USAGE, "give a file name ending .png, .pdf, .svg"),
    ("", cli.EXIT_USAGE, "--out='': empty"),
])
def test_sync_plot_is_checked_before_the_reads(tmp_path, monkeypatch, capsys, name, code, message):
    # --plot DIR wrote DIR.png and printed DIR; --plot '' drew nothing without a word.
    monkeypatch.setattr(_cli_device, "sync_report", _never)
    path = str(tmp_path) if name == "dir" else (str(tmp_path / name) if name else "")
    assert cli.main(["sync", "--out", path]) == code
    assert message in _err_line(capsys)
    assert os.listdir(tmp_path) == []


def test_sync_plot_writes_the_file_it_prints(tmp_path, capsys):
    path = str(tmp_path / "sync.svg")
    assert cli.main(["sync", "--seconds", "0.3", "--plot", path]) == cli.EXIT_OK
    assert capsys.readouterr().out.splitlines()[-1] == path
    assert os.listdir(tmp_path) == ["sync.svg"]
    with open(path) as f:
        assert "<svg" in f.read(4096)


# --- plot, trace, demo, profile: a folder the disk refuses is found before the work ----------------------------


def test_plot_checks_its_folder_before_it_reads_a_profile(tmp_path, monkeypatch, capsys, unwritable_folder):
    monkeypatch.setattr(_cli_files, "_load", _never)
    folder = unwritable_folder
    assert cli.main(["plot", "p.fgprof", "--out", os.path.join(folder, "figs")]) == cli.EXIT_FAILURE
    assert "cannot be written there" in _err_line(capsys)
    assert cli.main(["plot", "p.fgprof", "--out", ""]) == cli.EXIT_USAGE
    assert "--out='': empty" in _err_line(capsys)


def test_trace_never_writes_over_its_inputs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_cli_files, "profile_trace", _never)
    out = tmp_path / "o"
    out.mkdir()
    trace = out / "power_trace.json.gz"
    trace.write_bytes(b"the application's own trace")
    (tmp_path / "power.npz").write_bytes(b"x")
    assert cli.main(["trace", str(trace), "--power", str(tmp_path / "power.npz"), "--out", str(out)]) == \
        cli.EXIT_USAGE
    assert "power_trace.json.gz: is an input of this command" in _err_line(capsys)
    assert trace.read_bytes() == b"the application's own trace"


def test_demo_checks_its_folder_before_profiling(tmp_path, monkeypatch, capsys, unwritable_folder):
    monkeypatch.setattr(_cli_demo, "run_demo", _never)
    folder = unwritable_folder
    assert cli.main(["demo", "--out", os.path.join(folder, "demo")]) == cli.EXIT_FAILURE
    assert "cannot be written there" in _err_line(capsys)
    assert cli.main(["demo", "--live", "--out", str(tmp_path / "x")]) == cli.EXIT_USAGE
    assert "--out: the live demo writes no files" in _err_line(capsys)


def test_profile_checks_its_folder_before_the_device(tmp_path, monkeypatch, capsys, unwritable_folder):
    monkeypatch.setattr(_cli_profile, "make_backend", _never)
    folder = unwritable_folder
    assert cli.main(["profile", "cb-4k-gemm", "--out", os.path.join(folder, "c")]) == cli.EXIT_FAILURE
    assert "--out=" in (line := _err_line(capsys)) and "cannot be written there" in line


# --- the inputs: only regular files are read ----------------------------------------------------------------


def test_characterize_logs_that_are_a_fifo_or_a_device_are_refused_not_read(tmp_path, capsys):
    # np.genfromtxt read /dev/zero without end and waited on a FIFO for a writer.
    load = tmp_path / "load.csv"
    load.write_text("start_ns,end_ns\n1,2\n")
    fifo = str(tmp_path / "logs.csv")
    os.mkfifo(fifo)
    for logs in (fifo, "/dev/zero"):
        assert cli.main(["characterize", "--logs", logs, "--load", str(load)]) == cli.EXIT_USAGE
        assert "is not a regular file (a pipe, socket or device)" in _err_line(capsys)


def test_a_recording_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    from fingrav_native.files._io import RecordingFormatError, load_recording

    fifo = str(tmp_path / "r.npz")
    os.mkfifo(fifo)
    with pytest.raises(RecordingFormatError, match="is not a regular file"):
        load_recording(fifo)
