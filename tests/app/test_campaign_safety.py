"""Campaign folders never lose a measured run.

A folder is locked while a process writes it; runs without their manifest,
a manifest without its runs, and damaged files are refused, naming the file
and the field, before anything is written. The fuzz tests flip bits in and
truncate run files and campaign.json and check that what comes out is
either a CampaignFormatError (or, for settings that no longer match, a
CampaignMismatchError) or exactly the original replay.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import fingrav_native as fn
from fingrav_native.app import _cli as cli
from fingrav_native.app._campaign import open_campaign
from fingrav_native.backends import SimBackend
from fingrav_native.files import (
    CampaignFormatError,
    CampaignLockedError,
    CampaignMismatchError,
    StoredRun,
    load_campaign_runs,
    lock_campaign,
    read_manifest,
    run_files,
)

KERNEL = "cb-4k-gemm"
SETTINGS = dict(mode="both", runs=40, executions=16, seed=0)
SUBPROCESS_TIMEOUT_S = 300  # bounds a hang only
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


class InterruptingBackend(SimBackend):
    """The simulated backend, 'interrupted' (KeyboardInterrupt) before run k."""

    def __init__(self, interrupt_at: int, **kw):
        super().__init__(**kw)
        self.executed = 0
        self.interrupt_at = interrupt_at

    def execute_run(self, kernel, executions, run):
        if self.executed == self.interrupt_at:
            raise KeyboardInterrupt
        self.executed += 1
        return super().execute_run(kernel, executions, run)


def _interrupted_campaign(out: str, runs: int = 6) -> None:
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, InterruptingBackend(runs), out_dir=out, **SETTINGS)


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory) -> str:
    """An interrupted library campaign of six runs (copy it before changing it)."""
    out = str(tmp_path_factory.mktemp("campaign") / "c")
    _interrupted_campaign(out)
    return out


@pytest.fixture(scope="module")
def cli_campaign_dir(tmp_path_factory) -> str:
    """A complete `fingrav profile` campaign folder (copy it before changing it)."""
    out = str(tmp_path_factory.mktemp("cli") / "c")
    assert cli.main(["profile", KERNEL, "--mode", "sse", "--runs", "8", "--out", out, "--quiet"]) == cli.EXIT_OK
    return out


def _copy(src: str, tmp_path) -> str:
    dst = str(tmp_path / "copy")
    shutil.copytree(src, dst)
    return dst


def _snapshot(folder: str) -> dict[str, bytes]:
    """Every file under the folder, by relative path."""
    files = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, folder)] = f.read()
    return files


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


# --- runs without their manifest, a manifest without its runs --------------------------------------------


@pytest.mark.parametrize("resume", [True, False])
def test_runs_without_campaign_json_are_refused_and_nothing_is_written(campaign_dir, tmp_path, resume):
    out = _copy(campaign_dir, tmp_path)
    os.remove(os.path.join(out, "campaign.json"))
    before = _snapshot(out)
    backend = InterruptingBackend(10**9)
    with pytest.raises(CampaignFormatError, match=r"campaign.json: missing, but the folder holds 6 run files"):
        fn.profile(KERNEL, backend, out_dir=out, resume=resume, **SETTINGS)
    assert backend.executed == 0
    assert _snapshot(out) == before


def test_cli_resume_without_campaign_json_is_refused(cli_campaign_dir, tmp_path, capsys):
    out = _copy(cli_campaign_dir, tmp_path)
    os.remove(os.path.join(out, "campaign.json"))
    before = _snapshot(out)
    assert cli.main(["profile", "--resume", out]) == cli.EXIT_FAILURE
    line = _one_line(capsys.readouterr().err)
    assert "campaign.json: missing, but the folder holds" in line and "restore campaign.json" in line
    assert _snapshot(out) == before


def test_resume_with_the_runs_removed_is_refused(campaign_dir, tmp_path, capsys):
    out = _copy(campaign_dir, tmp_path)
    shutil.rmtree(os.path.join(out, "runs"))
    before = _snapshot(out)
    backend = InterruptingBackend(10**9)
    with pytest.raises(CampaignFormatError, match=r"0 run files, but campaign.json records 6 completed runs"):
        fn.profile(KERNEL, backend, out_dir=out, resume=True, **SETTINGS)
    assert backend.executed == 0
    assert _snapshot(out) == before


def test_resume_with_the_last_runs_removed_is_refused(campaign_dir, tmp_path):
    # Removing the tail leaves no gap, so only the manifest's count can tell.
    out = _copy(campaign_dir, tmp_path)
    for path in run_files(out)[4:]:
        os.remove(path)
    with pytest.raises(CampaignFormatError, match="4 run files, but campaign.json records 6"):
        fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, resume=True, **SETTINGS)


def test_cli_resume_with_the_runs_removed_is_refused(cli_campaign_dir, tmp_path, capsys):
    out = _copy(cli_campaign_dir, tmp_path)
    shutil.rmtree(os.path.join(out, "runs"))
    before = _snapshot(out)
    assert cli.main(["profile", "--resume", out]) == cli.EXIT_FAILURE
    assert "run files, but campaign.json records" in _one_line(capsys.readouterr().err)
    assert _snapshot(out) == before


def test_a_resume_stopped_by_other_settings_keeps_the_count(campaign_dir, tmp_path):
    # A replay refused halfway must not lower the count the next resume checks against.
    out = _copy(campaign_dir, tmp_path)
    path = run_files(out)[3]
    _rewrite_run(path, fields={"role": "top-up"})
    with pytest.raises(CampaignMismatchError, match="run 3 on disk"):
        fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, resume=True, **SETTINGS)
    assert read_manifest(out)["runs"] == 6


# --- damaged run files ---------------------------------------------------------------------------------


def _rewrite_run(path: str, *, fields: dict | None = None, drop_info: tuple[str, ...] = (), **arrays) -> None:
    """Rewrite a run file with info fields and arrays (``info`` itself too) replaced; None removes a member."""
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    doc = json.loads(str(members["info"]))
    doc.update(fields or {})
    for key in drop_info:
        del doc[key]
    members["info"] = np.array(json.dumps(doc))
    for key, value in arrays.items():
        if value is None:
            members.pop(key)
        else:
            members[key] = value
    np.savez(path, **members)


def _markers(path: str) -> np.ndarray:
    with np.load(path, allow_pickle=False) as z:
        return z["markers"]


DAMAGE = {
    "markers removed": (lambda p: dict(markers=_markers(p)[:0]), "'markers' has 0 rows for 16 executions"),
    "markers member gone": (lambda p: dict(markers=None), "lacks 'markers'"),
    "markers 2-D": (lambda p: dict(markers=_markers(p).reshape(4, 4)), "'markers' has 2 dimensions"),
    "markers of another dtype": (lambda p: dict(markers=np.zeros(16, dtype=np.int64)), "'markers' is of dtype"),
    "samples as floats": (lambda p: dict(samples=np.zeros(5)), "'samples' is of dtype"),
    "brackets of two columns": (lambda p: dict(brackets=np.zeros((4, 2), dtype=np.int64)), "'brackets' has shape"),
    "brackets as floats": (lambda p: dict(brackets=np.zeros((4, 3))), "'brackets' is of dtype"),
    "a pickled member": (lambda p: dict(meta__x=np.array([{}], dtype=object)), "holds Python objects"),
    "an unexpected member": (lambda p: dict(junk=np.zeros(3)), "unexpected member 'junk'"),
    "info gone": (lambda p: dict(info=None), "lacks its 'info' text"),
    "info not an object": (lambda p: dict(info=np.array("[1, 2]")), "'info' must be a JSON object"),
    "info not JSON": (lambda p: dict(info=np.array("{run")), "'info' is not readable JSON"),
    "run id a string": (lambda p: dict(fields={"run": "7"}), "info field 'run' must be an integer"),
    "run id fractional": (lambda p: dict(fields={"run": 7.5}), "info field 'run' must be an integer"),
    "executions missing": (lambda p: dict(drop_info=("executions",)), "'executions' must be an integer (missing)"),
    "executions a bool": (lambda p: dict(fields={"executions": True}), "'executions' must be an integer"),
    "seq of another file": (lambda p: dict(fields={"seq": 9}), "'seq' must be 2, the file's own number"),
    "an unknown role": (lambda p: dict(fields={"role": "golden"}), "info field 'role' must be one of"),
    "kernel a number": (lambda p: dict(fields={"kernel": 4}), "info field 'kernel' must be a string"),
    "meta a list": (lambda p: dict(fields={"meta": []}), "info field 'meta' must be an object"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_run_file_is_refused_naming_the_file_and_field(campaign_dir, tmp_path, case):
    out = _copy(campaign_dir, tmp_path)
    path = run_files(out)[2]
    change, message = DAMAGE[case]
    _rewrite_run(path, **change(path))
    with pytest.raises(CampaignFormatError) as exc:
        load_campaign_runs(out)
    text = str(exc.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_a_run_file_with_its_markers_removed_is_refused_on_resume(cli_campaign_dir, tmp_path, capsys):
    out = _copy(cli_campaign_dir, tmp_path)
    path = run_files(out)[1]
    _rewrite_run(path, markers=_markers(path)[:0])
    before = _snapshot(out)
    assert cli.main(["profile", "--resume", out]) == cli.EXIT_FAILURE
    line = _one_line(capsys.readouterr().err)
    assert path in line and "'markers' has 0 rows" in line
    assert _snapshot(out) == before


# --- damaged campaign.json and command.json -------------------------------------------------------------


def _edit_json(path: str, edit) -> None:
    with open(path) as f:
        doc = json.load(f)
    doc = edit(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def _set(key, value):
    def edit(doc):
        doc[key] = value
        return doc
    return edit


def _drop(key):
    def edit(doc):
        del doc[key]
        return doc
    return edit


MANIFEST_DAMAGE = [
    (_set("runs", "abc"), "field 'runs' must be an integer >= 0 (not 'abc')"),
    (_set("runs", -1), "field 'runs' must be an integer >= 0"),
    (_set("runs", True), "field 'runs' must be an integer >= 0"),
    (_drop("runs"), "field 'runs' must be an integer >= 0 (missing)"),
    (_set("settings", [1, 2]), "field 'settings' must be an object"),
    (_drop("settings"), "field 'settings' must be an object (missing)"),
    (_set("backend", "sim"), "field 'backend' must be an object"),
    (lambda d: {**d, "backend": {**d["backend"], "name": 3}}, "field 'backend.name' must be a string"),
    (lambda d: {**d, "backend": {"name": "sim"}}, "field 'backend.device' must be a string (missing)"),
    (_drop("kernel"), "field 'kernel' must be a string (missing)"),
    (_set("state", "paused"), "field 'state' must be one of running, interrupted, complete"),
    (_set("version", "1"), "field 'version' must be an integer"),
    (_set("error", 5), "field 'error' must be a string"),
    (lambda d: [d], "not a fingrav campaign manifest"),
]


@pytest.mark.parametrize("edit, message", MANIFEST_DAMAGE)
def test_wrong_types_in_campaign_json_are_refused_naming_the_field(campaign_dir, tmp_path, edit, message):
    out = _copy(campaign_dir, tmp_path)
    path = os.path.join(out, "campaign.json")
    _edit_json(path, edit)
    with pytest.raises(CampaignFormatError) as exc:
        read_manifest(out)
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value)
    before = _snapshot(out)
    with pytest.raises(CampaignFormatError):
        fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, resume=True, **SETTINGS)
    assert _snapshot(out) == before


def test_cli_resume_with_a_damaged_campaign_json_is_one_line(cli_campaign_dir, tmp_path, capsys):
    out = _copy(cli_campaign_dir, tmp_path)
    _edit_json(os.path.join(out, "campaign.json"), _set("runs", "abc"))
    assert cli.main(["profile", "--resume", out]) == cli.EXIT_FAILURE
    assert "campaign.json: field 'runs' must be an integer" in _one_line(capsys.readouterr().err)


COMMAND_DAMAGE = [
    (_set("runs", "abc"), "field 'runs' must be an integer in [2, 100000] or null (not 'abc')"),
    (_set("runs", 1), "field 'runs' must be an integer in [2, 100000] or null (not 1)"),
    (_set("executions", 10**8), "field 'executions' must be an integer in [4, 10000] or null"),
    (_set("margin", "0.1"), "field 'margin' must be a number in (0, 1) or null"),
    (_set("margin", float("nan")), "field 'margin' must be a number in (0, 1) or null (not nan)"),
    (_set("device", -1), "field 'device' must be an integer in [0, 1023]"),
    (_set("seed", 1.5), "field 'seed' must be an integer in [0, 4294967295]"),
    (_set("seed", True), "field 'seed' must be an integer in [0, 4294967295] (not True)"),
    (_set("backend", "tpu"), "field 'backend' must be one of sim, sim-live, amd, nvidia"),
    (_set("mode", None), "field 'mode' must be one of sse, ssp, both"),
    (_set("phase", "sometimes"), "field 'phase' must be one of"),
    (_set("kernel", ["cb-4k-gemm"]), "field 'kernel' must be a kernel name"),
    (_drop("kernel"), "field 'kernel' must be a kernel name (missing)"),
    (lambda d: [d], "must be a JSON object of the command's settings, not a list"),
    (lambda d: "x" * 10, "must be a JSON object"),
]


@pytest.mark.parametrize("edit, message", COMMAND_DAMAGE)
def test_wrong_types_in_command_json_are_refused_naming_the_field(cli_campaign_dir, tmp_path, capsys, edit,
                                                                    message):
    out = _copy(cli_campaign_dir, tmp_path)
    path = os.path.join(out, "command.json")
    _edit_json(path, edit)
    before = _snapshot(out)
    assert cli.main(["profile", "--resume", out]) == cli.EXIT_FAILURE
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"fingrav profile: {path}: ") and message in line
    assert _snapshot(out) == before


def test_a_command_json_that_is_not_json_is_one_line(cli_campaign_dir, tmp_path, capsys):
    out = _copy(cli_campaign_dir, tmp_path)
    with open(os.path.join(out, "command.json"), "w") as f:
        f.write("{")
    assert cli.main(["profile", "--resume", out]) == cli.EXIT_FAILURE
    assert "command.json: not readable JSON" in _one_line(capsys.readouterr().err)


def test_a_file_given_as_the_output_folder_is_one_line(tmp_path, capsys):
    path = tmp_path / "some_file"
    path.write_text("keep me")
    assert cli.main(["profile", KERNEL, "--out", str(path)]) == cli.EXIT_USAGE
    assert "--out=" in _one_line(capsys.readouterr().err)
    assert cli.main(["profile", KERNEL, "--out", str(path / "sub")]) == cli.EXIT_USAGE
    assert "--out=" in _one_line(capsys.readouterr().err)
    assert cli.main(["profile", "--resume", str(path)]) == cli.EXIT_USAGE
    assert "--resume=" in _one_line(capsys.readouterr().err)
    assert path.read_text() == "keep me"
    with pytest.raises(ValueError, match="is a file, not a folder"):
        fn.profile(KERNEL, SimBackend(seed=0), out_dir=str(path), **SETTINGS)


def test_a_new_campaign_never_goes_into_a_folder_of_library_runs(campaign_dir, tmp_path, capsys):
    # profile(out_dir=...) writes no command.json: the runs alone make it a campaign.
    out = _copy(campaign_dir, tmp_path)
    before = _snapshot(out)
    assert cli.main(["profile", KERNEL, "--out", out]) == cli.EXIT_USAGE
    assert "already holds a campaign (campaign.json and 6 run files" in _one_line(capsys.readouterr().err)
    assert _snapshot(out) == before


# --- the lock -----------------------------------------------------------------------------------------------


def _in_thread(fn_, *args, **kw):
    """Run fn_ in another thread; its exception (or None)."""
    caught: list[BaseException | None] = [None]

    def body():
        try:
            fn_(*args, **kw)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            caught[0] = exc

    t = threading.Thread(target=body)
    t.start()
    t.join(SUBPROCESS_TIMEOUT_S)
    return caught[0]


def _take_lock(out):
    with lock_campaign(out):
        pass


def test_a_held_folder_is_refused_to_everyone_else_and_free_after(tmp_path):
    out = str(tmp_path / "c")
    with lock_campaign(out):
        # Nested in the same thread: allowed (the CLI around profile()).
        with lock_campaign(out):
            pass
        exc = _in_thread(_take_lock, out)
        assert isinstance(exc, CampaignLockedError)
        assert f"in use by pid {os.getpid()} on " in str(exc) and "another thread of this process" in str(exc)
        before = _snapshot(out)
        exc = _in_thread(fn.profile, KERNEL, SimBackend(seed=0), out_dir=out, **SETTINGS)
        assert isinstance(exc, CampaignLockedError) and f"pid {os.getpid()}" in str(exc)
        assert _snapshot(out) == before
        assert os.listdir(out) == ["campaign.lock"]
    assert _in_thread(_take_lock, out) is None


def test_the_lock_is_released_when_profile_fails(tmp_path):
    out = str(tmp_path / "c")
    _interrupted_campaign(out)
    assert _in_thread(_take_lock, out) is None
    # Released, it names no holder.
    with open(os.path.join(out, "campaign.lock")) as f:
        assert f.read() == ""
    with pytest.raises(ValueError, match="already holds a campaign"):
        fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, **SETTINGS)
    assert _in_thread(_take_lock, out) is None


HOLDER = """
import os, sys
from fingrav_native.files._campaign_lock import lock_campaign
with lock_campaign(sys.argv[1]):
    if sys.argv[2] == "fork":
        # The lock outlives its taker in a child that inherited it.
        child = os.fork()
        if child == 0:
            sys.stdin.read()
            os._exit(0)
        print(child, flush=True)
        os._exit(0)
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.mark.slow
def test_another_process_holding_the_folder_is_named_and_a_dead_one_does_not_block(tmp_path, capsys):
    out = str(tmp_path / "c")
    with subprocess.Popen([sys.executable, "-c", HOLDER, out, "hold"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, env=ENV) as holder:
        try:
            assert holder.stdout.readline().strip() == "locked"
            before = _snapshot(out)
            with pytest.raises(CampaignLockedError, match=rf"{out}: in use by pid {holder.pid} on .* since "):
                fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, **SETTINGS)
            argv = ["profile", KERNEL, "--mode", "sse", "--runs", "8", "--out", out]
            assert cli.main(argv) == cli.EXIT_FAILURE
            assert f"in use by pid {holder.pid}" in _one_line(capsys.readouterr().err)
            assert _snapshot(out) == before and os.listdir(out) == ["campaign.lock"]
        finally:
            # Killed, not asked: the kernel drops a dead holder's lock.
            holder.kill()
    fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, **{**SETTINGS, "runs": 8})
    assert read_manifest(out)["state"] == "complete"


@pytest.mark.slow
def test_a_lock_kept_by_the_child_of_an_exited_holder_says_so(tmp_path):
    out = str(tmp_path / "c")
    with subprocess.Popen([sys.executable, "-c", HOLDER, out, "fork"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, env=ENV) as parent:
        assert int(parent.stdout.readline()) > 0  # the child's pid: it holds the lock now
        parent.wait(SUBPROCESS_TIMEOUT_S)
        try:
            with pytest.raises(CampaignLockedError, match=rf"pid {parent.pid} has exited, but a process it started"):
                fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, **SETTINGS)
        finally:
            parent.stdin.close()  # the child's stdin too: it reads EOF and exits
    # Once the child is gone, so is the lock (polled: the child ends on its own time).
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
    while isinstance(_in_thread(_take_lock, out), CampaignLockedError) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _in_thread(_take_lock, out) is None


def _sha(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return None


@pytest.mark.slow
def test_two_processes_on_one_campaign_folder_cannot_both_write(tmp_path):
    out = str(tmp_path / "c")
    # Long enough to still be running when the others have been refused, however loaded the machine.
    start = [sys.executable, "-m", "fingrav_native", "profile", "cb-2k-gemm", "--mode", "sse", "--runs", "20000",
             "--out", out]
    first = subprocess.Popen(start, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    seen: dict[str, str] = {}  # every file the first process wrote, as first seen

    def look() -> None:
        for path in [os.path.join(out, "command.json"), *run_files(out)]:
            if path not in seen and (digest := _sha(path)) is not None:
                seen[path] = digest

    others = []
    try:
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
        while time.monotonic() < deadline and first.poll() is None and len(run_files(out)) < 5:
            time.sleep(0.02)
        assert first.poll() is None, "the campaign ended before a second process could start"
        look()
        # A resume and a fresh start of the same folder while the first runs.
        others = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
                  for argv in ([sys.executable, "-m", "fingrav_native", "profile", "--resume", out], start)]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(p.poll() is None for p in others):
            look()
            time.sleep(0.01)
        look()
        assert all(p.poll() is not None for p in others), "a second process kept running in the folder"
        resumed, started = (p.communicate() for p in others)
        assert others[0].returncode == cli.EXIT_FAILURE, resumed
        assert f"in use by pid {first.pid} on " in _one_line(resumed[1])
        # A start while the campaign runs is told the folder is in use (exit 1), as the exit-code table says, not
        # that it holds a campaign to resume (exit 2).
        assert others[1].returncode == cli.EXIT_FAILURE, started
        assert f"in use by pid {first.pid}" in _one_line(started[1])
        assert first.poll() is None
    finally:
        for p in others:
            if p.poll() is None:
                p.kill()
                p.wait()
        if first.poll() is None:
            first.send_signal(signal.SIGINT)
    _, stderr = first.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    assert first.returncode == cli.EXIT_INTERRUPTED, stderr
    # Every file the first process wrote is as it wrote it.
    for path, digest in seen.items():
        assert _sha(path) == digest, f"{path} was rewritten"
    runs = load_campaign_runs(out)
    ids = [r.record.run for r in runs]
    assert len(set(ids)) == len(ids) >= 5
    assert read_manifest(out)["state"] == "interrupted"


@pytest.mark.slow
def test_two_quick_ctrl_c_give_one_message_and_exit_130(tmp_path):
    out = tmp_path / "c"
    argv = [sys.executable, "-m", "fingrav_native", "profile", "cb-2k-gemm", "--mode", "sse", "--runs", "4000",
            "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None and len(run_files(str(out))) < 30:
        time.sleep(0.02)
    assert proc.poll() is None, "the campaign ended before it could be interrupted"
    # Ctrl-C pressed again and again while the first one is being handled.
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.001)
    _, stderr = proc.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    assert proc.returncode == cli.EXIT_INTERRUPTED, stderr
    assert "Traceback" not in stderr
    assert _one_line(stderr).startswith("fingrav profile: interrupted; ")
    kept = load_campaign_runs(str(out))
    assert len(kept) >= 30 and read_manifest(str(out))["state"] == "interrupted"


# --- fuzz: bit flips and truncations ----------------------------------------------------------------


def _same_run(a: StoredRun, b: StoredRun) -> bool:
    ra, rb = a.record, b.record
    if (a.seq, a.role, a.kernel, a.path) != (b.seq, b.role, b.kernel, b.path):
        return False
    if (ra.run, ra.executions, ra.idle_wait_ns) != (rb.run, rb.executions, rb.idle_wait_ns):
        return False
    for x, y in ((ra.samples, rb.samples), (ra.markers, rb.markers), (ra.brackets, rb.brackets)):
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return False
    if ra.meta.keys() != rb.meta.keys():
        return False
    for key, x in ra.meta.items():
        y = rb.meta[key]
        if isinstance(x, np.ndarray):
            if not isinstance(y, np.ndarray) or x.dtype != y.dtype or x.tobytes() != y.tobytes():
                return False
        elif x != y:
            return False
    return True


def _mutate(data: bytes, rng: np.random.Generator) -> bytes:
    """A copy with a few bits flipped or a tail cut (a third of the cases)."""
    if rng.random() < 1 / 3:
        return data[:int(rng.integers(0, len(data)))]
    out = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        pos = int(rng.integers(0, len(out)))
        out[pos] ^= 1 << int(rng.integers(0, 8))
    return bytes(out)


def test_fuzzed_run_files_are_refused_or_read_exactly(campaign_dir, tmp_path):
    out = _copy(campaign_dir, tmp_path)
    original = load_campaign_runs(out)
    rng = np.random.default_rng(18)
    refused = 0
    for case in range(200):
        path = run_files(out)[int(rng.integers(0, len(original)))]
        with open(path, "rb") as f:
            good = f.read()
        bad = _mutate(good, rng)
        with open(path, "wb") as f:
            f.write(bad)
        try:
            runs = load_campaign_runs(out)
        except CampaignFormatError as exc:
            refused += 1
            assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc), (case, str(exc))
        else:
            # Accepted only where the damage touched nothing the replay reads (a timestamp, say).
            assert len(runs) == len(original), case
            assert all(_same_run(a, b) for a, b in zip(runs, original)), f"case {case}: a different replay"
        finally:
            with open(path, "wb") as f:
                f.write(good)
    assert refused >= 150


def test_fuzzed_campaign_json_is_refused_or_replays_exactly(campaign_dir, tmp_path):
    out = _copy(campaign_dir, tmp_path)
    path = os.path.join(out, "campaign.json")
    with open(path, "rb") as f:
        good = f.read()
    manifest = read_manifest(out)
    original = load_campaign_runs(out)
    caps = SimBackend(seed=0).capabilities
    rng = np.random.default_rng(1818)
    leaves: list[tuple[str, ...]] = []

    def walk(node, key_path):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*key_path, k))
        leaves.append(key_path)

    walk(manifest, ())
    swaps = ["abc", 7, -1, 2.5, True, None, [], {}, [1, 2]]
    refused = 0
    for case in range(200):
        kind = case % 3
        if kind == 2:
            # A structural edit: one field of another type, or gone.
            doc = copy.deepcopy(manifest)
            key_path = leaves[int(rng.integers(0, len(leaves)))]
            if not key_path:
                doc = swaps[int(rng.integers(0, len(swaps)))]
            else:
                parent = doc
                for k in key_path[:-1]:
                    parent = parent[k]
                if rng.random() < 0.25:
                    del parent[key_path[-1]]
                else:
                    parent[key_path[-1]] = swaps[int(rng.integers(0, len(swaps)))]
            bad = json.dumps(doc).encode()
        else:
            bad = _mutate(good, rng)
        with open(path, "wb") as f:
            f.write(bad)
        try:
            replay, _ = open_campaign(out, True, KERNEL, caps, manifest["settings"])
        except (CampaignFormatError, CampaignMismatchError) as exc:
            refused += 1
            assert "\n" not in str(exc), case
        else:
            assert len(replay) == len(original), case
            assert all(_same_run(a, b) for a, b in zip(replay, original)), f"case {case}: a different replay"
        finally:
            with open(path, "wb") as f:
                f.write(good)
    assert refused >= 100


# --- devices, FIFOs and links in a campaign's files -------------------------------------------------------


def _replace_with(path: str, what: str) -> None:
    """Put a link to /dev/zero (or a FIFO) where a campaign's file was."""
    os.remove(path)
    if what == "zero":
        os.symlink("/dev/zero", path)
    else:
        os.mkfifo(path)


def _cli_in_subprocess(argv: list[str]) -> subprocess.CompletedProcess:
    # A subprocess: the old reader read /dev/zero until the OOM killer came, or waited on the FIFO forever.
    return subprocess.run([sys.executable, "-m", "fingrav_native", *argv], capture_output=True, text=True,
                          env=ENV, timeout=SUBPROCESS_TIMEOUT_S)


@pytest.mark.parametrize("what", ["zero", "fifo"])
@pytest.mark.parametrize("name", ["campaign.json", "command.json", "runs/run_000002.npz"])
def test_a_device_or_fifo_in_place_of_a_campaign_file_is_refused_by_name(cli_campaign_dir, tmp_path, name, what):
    out = _copy(cli_campaign_dir, tmp_path)
    path = os.path.join(out, name)
    _replace_with(path, what)
    proc = _cli_in_subprocess(["profile", "--resume", out])
    assert proc.returncode == cli.EXIT_FAILURE, proc.stderr
    line = _one_line(proc.stderr)
    assert f"{path}: is not a regular file (a pipe, socket or device)" in line


def test_the_library_reader_refuses_a_fifo_run_file_and_manifest(campaign_dir, tmp_path):
    out = _copy(campaign_dir, tmp_path)
    _replace_with(run_files(out)[1], "fifo")
    with pytest.raises(CampaignFormatError, match=r"run_000001.npz: is not a regular file"):
        load_campaign_runs(out)
    _replace_with(os.path.join(out, "campaign.json"), "zero")
    with pytest.raises(CampaignFormatError, match=r"campaign.json: is not a regular file"):
        read_manifest(out)


@pytest.mark.parametrize("target", ["/dev/null", "other"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(tmp_path, capsys, target):
    out = tmp_path / "c"
    out.mkdir()
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    os.symlink("/dev/null" if target == "/dev/null" else str(victim), out / "campaign.lock")
    with pytest.raises(CampaignFormatError, match=r"campaign.lock: is a symbolic link .* remove it"):
        _take_lock(str(out))
    assert cli.main(["profile", KERNEL, "--mode", "sse", "--runs", "8", "--out", str(out)]) == cli.EXIT_FAILURE
    line = _one_line(capsys.readouterr().err)
    assert "campaign.lock: is a symbolic link" in line and "Invalid argument" not in line
    # The holder truncates and writes the lock file: through the link it would have emptied the target.
    assert victim.read_text() == "keep me"


def test_a_fifo_as_the_lock_file_is_refused(tmp_path):
    out = tmp_path / "c"
    out.mkdir()
    os.mkfifo(out / "campaign.lock")
    with pytest.raises(CampaignFormatError, match=r"campaign.lock: is not a regular file"):
        _take_lock(str(out))


# --- runs of another campaign -----------------------------------------------------------------------------


def test_a_run_file_from_another_campaign_is_refused_on_resume(campaign_dir, tmp_path, capsys):
    # Two interrupted campaigns of the same kernel and settings but other seeds: their run files look alike.
    out = _copy(campaign_dir, tmp_path)
    other = str(tmp_path / "other")
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, InterruptingBackend(6, seed=1), out_dir=other, **{**SETTINGS, "seed": 1})
    shutil.copyfile(run_files(other)[3], run_files(out)[3])
    before = _snapshot(out)
    backend = InterruptingBackend(10**9)
    with pytest.raises(CampaignFormatError, match=r"run_000003.npz: belongs to campaign '[0-9a-f]+', not this "
                                                  r"folder's '[0-9a-f]+' \(campaign.json\)"):
        fn.profile(KERNEL, backend, out_dir=out, resume=True, **SETTINGS)
    assert backend.executed == 0 and _snapshot(out) == before
    ids = {r.campaign_id for r in load_campaign_runs(other)}
    assert len(ids) == 1 and ids != {r.campaign_id for r in load_campaign_runs(campaign_dir)}


def test_a_cli_resume_with_a_run_of_another_campaign_keeps_the_profile(cli_campaign_dir, tmp_path, capsys):
    out = _copy(cli_campaign_dir, tmp_path)
    other = str(tmp_path / "other")
    assert cli.main(["profile", KERNEL, "--mode", "sse", "--runs", "8", "--seed", "3", "--out", other,
                     "--quiet"]) == cli.EXIT_OK
    capsys.readouterr()
    shutil.copyfile(run_files(other)[2], run_files(out)[2])
    before = _snapshot(out)
    assert cli.main(["profile", "--resume", out]) == cli.EXIT_FAILURE
    assert "run_000002.npz: belongs to campaign" in _one_line(capsys.readouterr().err)
    assert _snapshot(out) == before  # profile.fgprof included: not rewritten from the mixed runs


# --- concurrent starts ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_three_concurrent_starts_on_a_new_folder_one_runs_the_others_are_told_it_is_in_use(tmp_path):
    out = str(tmp_path / "new")
    start = [sys.executable, "-m", "fingrav_native", "profile", "cb-2k-gemm", "--mode", "sse", "--runs", "20000",
             "--out", out]
    procs = [subprocess.Popen(start, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
             for _ in range(3)]
    try:
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
        while time.monotonic() < deadline and sum(p.poll() is None for p in procs) > 1:
            time.sleep(0.02)
        running = [p for p in procs if p.poll() is None]
        assert len(running) == 1, [p.communicate() for p in procs if p.poll() is not None]
        for p in procs:
            if p is not running[0]:
                _, err = p.communicate()
                assert p.returncode == cli.EXIT_FAILURE, err
                assert f"in use by pid {running[0].pid}" in _one_line(err)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            p.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    assert running[0].returncode == cli.EXIT_INTERRUPTED
