"""Output paths are checked before the work that fills them: `check_output_path` and every writer that uses it."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fingrav_native.files._outputs import (
    OutputFolderMissingError,
    OutputNotWritableError,
    OutputPathError,
    check_distinct_outputs,
    check_output_path,
)


def test_a_new_file_in_a_writable_folder_passes(tmp_path):
    path = str(tmp_path / "out.json")
    assert check_output_path(path, "--summary") == path
    assert not os.path.exists(path)  # the check writes nothing under the name
    assert os.listdir(tmp_path) == []


def test_an_existing_plain_file_may_be_replaced(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("{}")
    assert check_output_path(str(path), "--summary") == str(path)


@pytest.mark.parametrize("folder", [False, True])
def test_an_empty_path_is_refused(folder):
    with pytest.raises(OutputPathError, match=r"--out='': empty; give a "):
        check_output_path("", "--out", folder=folder)


def test_a_directory_where_a_file_goes_is_refused(tmp_path):
    with pytest.raises(OutputPathError, match=r"--plot='.*': is a directory; give a file name"):
        check_output_path(str(tmp_path), "--plot")


def test_a_file_where_a_folder_goes_is_refused(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    with pytest.raises(OutputPathError, match="is an existing file, not a folder"):
        check_output_path(str(path), "--out", folder=True)
    with pytest.raises(OutputPathError, match="cannot be created, .* is a file, not a folder"):
        check_output_path(str(path / "sub" / "deeper"), "--out", folder=True)


def test_a_missing_folder_is_a_file_not_found_error_and_a_value_error(tmp_path):
    with pytest.raises(OutputFolderMissingError, match=r"its folder does not exist \('.*nope'\)") as info:
        check_output_path(str(tmp_path / "nope" / "x.json"), "--out")
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, ValueError)


def test_a_missing_folder_for_a_folder_output_is_fine(tmp_path):
    path = str(tmp_path / "a" / "b")
    assert check_output_path(path, "--out", folder=True) == path
    assert not os.path.exists(tmp_path / "a")  # nothing created by the check


def test_an_unwritable_location_is_a_permission_error(unwritable_folder):
    folder = unwritable_folder
    with pytest.raises(OutputNotWritableError, match="cannot be written there") as info:
        check_output_path(os.path.join(folder, "x.json"), "--out")
    assert isinstance(info.value, PermissionError) and isinstance(info.value, ValueError)
    with pytest.raises(OutputNotWritableError):
        check_output_path(os.path.join(folder, "new", "deeper"), "--out", folder=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to write-protected files")
def test_a_write_protected_file_is_refused(tmp_path):
    path = tmp_path / "keep.json"
    path.write_text("{}")
    path.chmod(0o444)
    with pytest.raises(OutputNotWritableError, match="write-protected"):
        check_output_path(str(path), "--summary")


@pytest.mark.parametrize("node", ["fifo", "device"])
def test_a_fifo_or_device_is_refused(tmp_path, node):
    if node == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)
    else:
        path = str(tmp_path / "null")
        os.symlink("/dev/null", path)
    with pytest.raises(OutputPathError, match="is not a regular file"):
        check_output_path(path, "--trace")


def test_an_input_of_the_command_is_refused_by_any_name(tmp_path):
    path = tmp_path / "p.fgprof"
    path.write_bytes(b"x")
    os.symlink(path, tmp_path / "link")
    for given in (str(path), str(tmp_path / "link"), str(tmp_path / "." / "p.fgprof")):
        with pytest.raises(OutputPathError, match="is an input of this command"):
            check_output_path(given, "--summary", protect=[str(path)])


def _campaign(tmp_path):
    out = tmp_path / "c"
    (out / "runs").mkdir(parents=True)
    for name in ("campaign.json", "command.json", "campaign.lock", "profile.fgprof"):
        (out / name).write_bytes(b"{}")
    (out / "runs" / "run_000003.npz").write_bytes(b"PK")
    return out


@pytest.mark.parametrize("name", ["campaign.json", "command.json", "campaign.lock", "runs/run_000003.npz",
                                  "runs/run_000099.npz"])
def test_a_campaign_folders_own_files_are_never_an_output(tmp_path, name):
    out = _campaign(tmp_path)
    with pytest.raises(OutputPathError, match="nothing but the campaign itself writes there"):
        check_output_path(str(out / name), "--summary")


def test_a_campaigns_profile_may_be_rewritten_as_a_profile_only(tmp_path):
    out = _campaign(tmp_path)
    assert check_output_path(str(out / "profile.fgprof"), "path", writes="profile")
    with pytest.raises(OutputPathError, match="the campaign's profile.fgprof"):
        check_output_path(str(out / "profile.fgprof"), "--trace")


def test_a_saved_or_measured_file_of_another_format_is_never_replaced(tmp_path):
    from fingrav_native.files._safe import save_npz_atomically

    capture = str(tmp_path / "power.npz")
    save_npz_atomically(capture, {"header": np.array("{}"), "epoch_brackets": np.zeros((1, 3), np.int64)},
                        "capture")
    with pytest.raises(OutputPathError, match="holds a power capture"):
        check_output_path(capture, "--summary")
    with pytest.raises(OutputPathError, match="holds a power capture"):
        check_output_path(capture, "path", writes="profile")
    assert check_output_path(capture, "path", writes="capture") == capture


def test_outputs_of_one_command_must_differ(tmp_path):
    a = str(tmp_path / "x.json")
    check_distinct_outputs({"--trace": a, "--summary": str(tmp_path / "y.json"), "--parquet": None})
    with pytest.raises(OutputPathError, match="--trace=.*, --summary=.*: the same file"):
        check_distinct_outputs({"--trace": a, "--summary": os.path.join(str(tmp_path), ".", "x.json")})


def test_not_a_path_is_refused():
    with pytest.raises(OutputPathError, match="path=3: must be a file path"):
        check_output_path(3, "path")


# --- the library's writers check where they write ------------------------------------------------------------


def test_a_power_recorder_checks_its_path_before_recording(tmp_path, unwritable_folder):
    # PowerRecorder only checked that the folder exists: a read-only one was found after the recording.
    from fingrav_native import _core
    from fingrav_native.app import PowerRecorder

    src = _core.SyntheticSource()
    with pytest.raises(OutputNotWritableError, match="cannot be written there"):
        PowerRecorder(src, path=os.path.join(unwritable_folder, "p.npz"))
    with pytest.raises(OutputPathError, match="is a directory"):
        PowerRecorder(src, path=str(tmp_path))
    campaign = _campaign(tmp_path)
    with pytest.raises(OutputPathError, match="a campaign run file"):
        PowerRecorder(src, path=str(campaign / "runs" / "run_000003.npz"))


def test_the_library_writers_refuse_a_campaigns_run_file(tmp_path):
    import fingrav_native as fg
    from fingrav_native.backends import SimBackend
    from fingrav_native.files import export_trace, save_profile

    out = str(tmp_path / "c")
    prof = fg.profile("cb-4k-gemm", SimBackend(seed=0), mode="sse", runs=4, top_up=False, out_dir=out)
    run = os.path.join(out, "runs", "run_000001.npz")
    with open(run, "rb") as f:
        before = f.read()
    for write in (lambda: save_profile(prof, run), lambda: export_trace(prof, run), lambda: fg.save(prof, run),
                  lambda: export_trace(prof, os.path.join(out, "profile.fgprof"))):
        with pytest.raises(OutputPathError, match="nothing but the campaign itself writes there"):
            write()
    with open(run, "rb") as f:
        assert f.read() == before
    # The campaign's own profile may be saved again, as a profile.
    save_profile(prof, os.path.join(out, "profile.fgprof"))


def test_export_trace_is_written_whole_with_the_permissions_of_a_plain_file(tmp_path):
    import json

    import fingrav_native as fg
    from fingrav_native.backends import SimBackend
    from fingrav_native.files import export_trace

    prof = fg.profile("cb-4k-gemm", SimBackend(seed=0), mode="sse", runs=4, top_up=False)
    plain = tmp_path / "plain"
    plain.write_text("")
    for name in ("t.json", "t.json.gz"):
        path = export_trace(prof, tmp_path / name)
        assert os.stat(path).st_mode & 0o777 == os.stat(plain).st_mode & 0o777
        assert path.endswith(name)
    with open(tmp_path / "t.json") as f:
        assert json.load(f)["traceEvents"]
    assert sorted(os.listdir(tmp_path)) == ["plain", "t.json", "t.json.gz"]  # no temporary left


def test_data_loss_without_overwrite_an_existing_file_is_refused_by_the_one_guard(tmp_path):
    # The guard that refuses to replace without --force / overwrite=True is the same check every writer makes,
    # so a writer that asks for it cannot forget the others (a directory, an input, a measured file).
    path = tmp_path / "power.npz"
    path.write_bytes(b"plain")
    with pytest.raises(OutputPathError, match=r"^--out='.*power\.npz': exists; a capture is kept: choose another "
                                              r"name or replace it \(--force\)$"):
        check_output_path(str(path), "--out", overwrite=False, why="a capture is kept")
    with pytest.raises(OutputPathError, match=r"^out='.*': exists; choose another name or replace it "
                                              r"\(overwrite=True\)$"):
        check_output_path(str(path), "out", overwrite=False)
    assert check_output_path(str(path), "--out", overwrite=True) == str(path)
    assert check_output_path(str(tmp_path / "new.npz"), "--out", overwrite=False) == str(tmp_path / "new.npz")


def test_data_loss_one_atomic_writer_and_one_output_guard_in_the_tree():
    # Every file the package writes goes through one writer (temporary file, fsync, rename) and one guard:
    # a second copy of either is where a write cut short or an unchecked overwrite comes back.
    import re

    import fingrav_native

    root = os.path.dirname(fingrav_native.__file__)
    renames, guards = [], []
    for folder, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                code = "\n".join(line.split("#", 1)[0] for line in f)
            rel = os.path.relpath(path, root)
            # (the recorder's journal appends and fsyncs its records: it never replaces a file)
            if re.search(r"\bos\.(replace|rename)\(|\bshutil\.move\(|\bos\.fsync\(", code) and "_journal" not in rel:
                renames.append(rel)
            if re.search(r"lexists\([^)]*\)\s+and\s+not\s+(force|overwrite)\b", code):
                guards.append(rel)
    assert renames == [os.path.join("files", "_outputs.py")]
    assert guards == []
