"""Nothing measured is lost through an output: the one guard and the one writer every file goes through.

Each test is named by the class of defect it pins (data loss, silently wrong, unclear) and holds the
package to what a measured file is worth: no writer replaces one of another kind, ``--force`` or not;
a write cut short (a full disk, simulated with ``RLIMIT_FSIZE``) leaves the previous file whole; every
output has the permissions ``open()`` gives; every JSON file parses with a strict parser.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import resource
import signal
import stat
import zipfile

import numpy as np
import pytest

import fingrav_native as fg
from fingrav_native.backends import SimBackend
from fingrav_native.files import _outputs, load_characterisation
from fingrav_native.files._annotate import check_annotation_out
from fingrav_native.files._campaign import write_manifest
from fingrav_native.files._capture import PowerCapture
from fingrav_native.files._io import load_recording
from fingrav_native.files._journal import Journal
from fingrav_native.files._kineto import write_kineto_trace
from fingrav_native.files._outputs import OutputPathError, check_output_path
from fingrav_native.files._rocprof_write import write_rocprof_trace
from fingrav_native.native import SAMPLE_DTYPE
from fingrav_native.sensors import estimate_period


def _strict(text: str) -> object:
    def refuse(token: str) -> object:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _bytes(path: object) -> bytes:
    with open(str(path), "rb") as f:
        return f.read()


def _text(path: object) -> str:
    return _bytes(path).decode("utf-8")


def _characterisation(uncertainty_ns: float = 2.0) -> fg.Characterisation:
    period = estimate_period(np.arange(10) * 1e6)
    period = type(period)(**{**vars(period), "uncertainty_ns": uncertainty_ns})
    return fg.Characterisation(fg.sensor_preset("amd-1ms-average"), period, None, 0.0, "sim", "test")


def _capture(n: int = 50) -> PowerCapture:
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["host_ns"] = 10**9 + np.arange(n) * 1_000_000
    s["host_poll_begin_ns"] = s["host_ns"] - 3_000
    s["source_ts"] = s["host_ns"]
    s["source_seq"] = s["seq"] = np.arange(n)
    s["total"] = 300.0
    brackets = np.array([[10**9 - 10, 1_700_000_000_000_000_000, 10**9 + 10]], dtype=np.int64)
    return PowerCapture(samples=s, epoch_brackets=brackets,
                           source={"name": "test", "clock_domain": "host", "tick_ns": 1.0,
                                   "native_period_ns": 1_000_000, "window_ns": 0, "channels": ["total"]},
                           sensor=None, period_ns=1_000_000, stats={"drops": 0, "samples": n}, meta={})


def _kineto(path: str) -> str:
    start = 1_000_000 + np.arange(3) * 10_000
    return write_kineto_trace(path, ["gemm"] * 3, [[1, 1, 1]] * 3, [[64, 1, 1]] * 3, start, start + 5_000,
                              base_time_ns=0)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One file of every kind the package measures or saves, made by its own writer."""
    d = tmp_path_factory.mktemp("kinds")
    backend = SimBackend(seed=3)
    rec = backend.execute_run("cb-4k-gemm", 4, backend.new_run_id())
    out = {"capture": _capture().save(str(d / "power.npz")),
           "recording": fg.save(fg.Recording.from_run(rec, backend.capabilities, role="campaign"),
                                str(d / "rec.npz")),
           "characterisation": fg.save(_characterisation(), str(d / "sensor.json")),
           "kineto": _kineto(str(d / "trace.json")),
           "rocprof": write_rocprof_trace(str(d / "x_kernel_trace.csv"), ["gemm"], [[1, 1, 1]], [[64, 1, 1]],
                                          [100], [200]),
           "rocpd": write_rocprof_trace(str(d / "x.db"), ["gemm"], [[1, 1, 1]], [[64, 1, 1]], [100], [200],
                                        output_format="rocpd"),
           "campaign": write_manifest(str(d / "camp"), {"kernel": "gemm"})}
    command = d / "command.json"  # as fingrav profile writes it
    command.write_text(json.dumps({"format": "fingrav-command", "kernel": "gemm", "backend": "sim"}))
    out["command"] = str(command)
    run = d / "run.npz"  # a campaign run file: its info member
    np.savez(run, info=np.array(json.dumps({"seq": 1})), samples=np.zeros(2))
    out["run"] = str(run)
    logs = d / "logs.csv"
    logs.write_text("t_ns,power_w\n1,100.0\n2,101.0\n")
    out["logs"] = str(logs)
    journal = Journal(str(d / "power.npz.journal"), {"recording_id": "x"})  # a recording under way, or killed
    journal.close()
    out["journal"] = journal.path
    return out


@pytest.fixture
def full_disk():
    """Writes past ``limit`` bytes fail with EFBIG, as on a full disk or under a file-size limit."""
    @contextlib.contextmanager
    def limit(nbytes: int):
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, old)

    return limit


@pytest.mark.parametrize("kind", ["capture", "recording", "run", "characterisation", "kineto", "rocprof", "rocpd",
                                  "campaign", "command", "logs", "journal"])
def test_data_loss_every_measured_or_saved_kind_is_recognised_by_its_content(files, kind, tmp_path):
    renamed = tmp_path / "renamed.dat"  # the name says nothing: the content does
    renamed.write_bytes(_bytes(files[kind]))
    with pytest.raises(OutputPathError, match=r"--summary=.*holds .*which this would overwrite"):
        check_output_path(str(renamed), "--summary")
    assert _outputs.file_kind(str(renamed)) == {"command": "campaign"}.get(kind, kind)


def test_data_loss_a_characterisation_save_never_replaces_a_measured_capture(files, tmp_path):
    copy = tmp_path / "power.npz"
    copy.write_bytes(_bytes(files["capture"]))
    before = copy.read_bytes()
    with pytest.raises(OutputPathError, match="power capture"):
        fg.save(_characterisation(), copy)
    assert copy.read_bytes() == before


def test_data_loss_saving_a_capture_never_replaces_a_saved_characterisation(files, tmp_path):
    sensor = tmp_path / "sensor.json"
    sensor.write_bytes(_bytes(files["characterisation"]))
    with pytest.raises(OutputPathError, match="sensor characterisation"):
        fg.save(_capture(), sensor)
    assert fg.load(sensor) == _characterisation()


@pytest.mark.parametrize("kind", ["capture", "kineto", "recording", "campaign"])
def test_data_loss_annotate_with_force_never_replaces_a_measured_file(files, kind, tmp_path):
    trace = _kineto(str(tmp_path / "t.json"))
    target = tmp_path / "target.json"
    target.write_bytes(_bytes(files[kind]))
    before = target.read_bytes()
    with pytest.raises(ValueError, match="which this would overwrite"):
        check_annotation_out(trace, str(target), overwrite=True, name="--annotate")
    assert target.read_bytes() == before


def test_data_loss_annotate_with_force_never_replaces_the_commands_power_capture(files, tmp_path):
    trace = _kineto(str(tmp_path / "t.json"))
    with pytest.raises(ValueError, match="is an input of this command"):
        check_annotation_out(trace, files["capture"], overwrite=True, name="--annotate", protect=[files["capture"]])


def test_data_loss_annotate_with_force_never_opens_a_fifo_or_device(tmp_path):
    trace = _kineto(str(tmp_path / "t.json"))
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for node in (str(fifo), os.devnull):
        with pytest.raises(ValueError, match="not a regular file"):
            check_annotation_out(trace, node, overwrite=True, name="--annotate")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_data_loss_annotate_with_force_never_replaces_a_campaign_run_file(tmp_path):
    trace = _kineto(str(tmp_path / "t.json"))
    write_manifest(str(tmp_path / "camp"), {"kernel": "gemm"})
    run = tmp_path / "camp" / "runs" / "run_000001.json"
    run.parent.mkdir()
    run.write_text("{}")
    with pytest.raises(ValueError, match="campaign"):
        check_annotation_out(trace, str(tmp_path / "camp" / "campaign.json"), overwrite=True, name="--annotate")


def test_data_loss_force_still_replaces_the_packages_own_trace_and_plain_files(tmp_path):
    trace = _kineto(str(tmp_path / "t.json"))
    plain = tmp_path / "notes.json"
    plain.write_text('{"a": 1}')
    assert check_annotation_out(trace, str(plain), overwrite=True, name="--annotate") == str(plain)
    # What export_trace and annotate_trace write: the generator named at the document's end.
    doc = {"traceEvents": [{"ph": "X", "name": "k" * 100, "ts": i, "dur": 1} for i in range(2000)],
           "otherData": {"generator": "fingrav-native"}}
    for name in ("power_trace.json.gz", "power_trace.json"):
        ours = str(tmp_path / name)
        with (gzip.open(ours, "wt") if name.endswith(".gz") else open(ours, "w")) as f:
            json.dump(doc, f)
        assert _outputs.file_kind(ours) == "trace"
        assert check_annotation_out(trace, ours, overwrite=True, name="--annotate") == ours
    doc.pop("otherData")
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps(doc))
    assert _outputs.file_kind(str(measured)) == "kineto"


@pytest.mark.parametrize("writer", ["characterisation", "kineto", "rocprof-csv", "rocprof-json", "json"])
def test_data_loss_a_write_cut_short_leaves_the_previous_file_whole(writer, tmp_path, full_disk):
    big = ["k" * 200] * 50
    start = 1_000_000 + np.arange(50) * 10_000
    path = {"characterisation": "sensor.json", "kineto": "trace.json", "rocprof-csv": "x_kernel_trace.csv",
            "rocprof-json": "x.json", "json": "table.json"}[writer]
    target = str(tmp_path / path)

    def write(small: bool) -> object:
        n = 1 if small else 50
        if writer == "characterisation":
            c = _characterisation()
            return fg.save(c if small else type(c)(c.sensor, c.period, c.step, c.quantum, c.device, "x" * 20_000),
                           target)
        if writer == "kineto":
            return write_kineto_trace(target, big[:n], [[1, 1, 1]] * n, [[1, 1, 1]] * n, start[:n], start[:n] + 5,
                                      base_time_ns=0)
        if writer.startswith("rocprof"):
            return write_rocprof_trace(target, big[:n], [[1, 1, 1]] * n, [[1, 1, 1]] * n, start[:n],
                                       start[:n] + 5, output_format=writer.split("-")[1])
        return _outputs.write_json(target, {"rows": big[:n]})

    write(small=True)
    before = _bytes(target)
    with full_disk(len(before) + 512), pytest.raises(OSError):
        write(small=False)
    assert _bytes(target) == before
    assert sorted(os.listdir(tmp_path)) == sorted(
        [path] + (["x_agent_info.csv"] if writer == "rocprof-csv" else []))  # no partial file left beside it


def test_data_loss_outputs_have_the_permissions_open_gives_not_owner_only(files, tmp_path):
    old = os.umask(0o022)
    try:
        written = [_capture().save(str(tmp_path / "p.npz")),
                   fg.save(fg.load(files["recording"]), str(tmp_path / "r.npz")),
                   fg.save(_characterisation(), str(tmp_path / "s.json")),
                   _outputs.write_json(str(tmp_path / "t.json"), {"a": 1})]
    finally:
        os.umask(old)
    assert {oct(stat.S_IMODE(os.stat(p).st_mode)) for p in written} == {oct(0o644)}


def test_silently_wrong_a_characterisation_is_strict_json_and_reads_nan_back(tmp_path):
    c = _characterisation(uncertainty_ns=float("nan"))
    path = fg.save(c, tmp_path / "sensor.json")
    doc = _strict(_text(path))
    assert doc["period"]["uncertainty_ns"] is None  # null: not determined
    back = load_characterisation(path)
    assert np.isnan(back.period.uncertainty_ns) and back.period.period_ns == c.period.period_ns


def test_silently_wrong_write_json_never_writes_a_bare_nan(tmp_path):
    path = _outputs.write_json(str(tmp_path / "k.json"), {"a": float("nan"), "b": [np.float64("inf"), np.int64(3)]})
    assert _strict(_text(path)) == {"a": None, "b": [None, 3]}


def test_unclear_loading_a_missing_file_is_file_not_found_naming_it(tmp_path):
    missing = str(tmp_path / "absent.npz")
    for load in (fg.load, load_characterisation, load_recording):
        with pytest.raises(FileNotFoundError, match="absent.npz"):
            load(missing)


def test_data_loss_a_renamed_profile_is_never_replaced_by_another_kind(tmp_path):
    saved = str(tmp_path / "p.json")  # a profile archive under a JSON name
    with zipfile.ZipFile(saved, "w") as zf:
        zf.writestr("fingrav.json", "{}")
    with pytest.raises(OutputPathError, match="saved profile"):
        fg.save(_characterisation(), saved)
    assert _outputs.file_kind(saved) == "profile"


@pytest.mark.parametrize("name", ["t.json", "t.json.gz", "x_kernel_trace.csv", "x_results.db", "x_results.json"])
def test_unclear_reading_a_missing_trace_is_file_not_found_naming_it(tmp_path, name):
    from fingrav_native.files import read_trace
    from fingrav_native.insitu import TraceFormatError

    path = str(tmp_path / name)
    with pytest.raises(FileNotFoundError, match=r"trace=.*" + name.replace(".", r"\.") + ".*no such file") as e:
        read_trace(path)
    assert isinstance(e.value, TraceFormatError)  # still a trace that cannot be read, as before


@pytest.mark.parametrize("opened", ["by path", "from a file object"])
def test_traceback_ctrl_c_inside_a_zip_archive_constructor_prints_nothing_at_exit(tmp_path, monkeypatch,
                                                                                   opened: str) -> None:
    # Ctrl-C lands between two bytecodes anywhere: inside zipfile's constructor, before it sets its _writing
    # flag, zipfile's own finalizer raises AttributeError, which Python prints as a traceback on the way out.
    import gc
    import inspect
    import sys

    lines, first = inspect.getsourcelines(zipfile.ZipFile.__init__)
    at = first + next(i for i, line in enumerate(lines) if "self._writing = False" in line)

    def tracer(frame, event, arg):  # the interrupt, delivered just before the flag is set
        if event == "call":
            return tracer if frame.f_code is zipfile.ZipFile.__init__.__code__ else None
        if event == "line" and frame.f_lineno == at:
            raise KeyboardInterrupt
        return tracer

    path = tmp_path / "a.npz"
    np.savez(path, x=np.arange(3))
    caught: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", caught.append)
    with open(path, "rb") as fh:
        sys.settrace(tracer)
        try:
            with pytest.raises(KeyboardInterrupt):
                _outputs.ZipArchive(str(path) if opened == "by path" else fh)
        finally:
            sys.settrace(None)
        gc.collect()
    assert caught == []
    # Whole archives read and close as before.
    with _outputs.ZipArchive(str(path)) as zf:
        assert zf.namelist() == ["x.npy"]


def test_traceback_ctrl_c_while_a_member_opens_for_writing_stays_an_interrupt(tmp_path, monkeypatch) -> None:
    # Between zipfile flagging an open member and handing back its handle, Ctrl-C leaves the flag set; numpy's
    # savez then closes the archive in a finally and zipfile's "open writing handle" ValueError replaces the
    # interrupt (a CLI exit 2 with that message, not 130).
    import gc
    import inspect
    import sys

    lines, first = inspect.getsourcelines(zipfile.ZipFile._open_to_write)
    at = first + 1 + next(i for i, line in enumerate(lines) if "self._writing = True" in line)

    def tracer(frame, event, arg):
        if event == "call":
            return tracer if frame.f_code is zipfile.ZipFile._open_to_write.__code__ else None
        if event == "line" and frame.f_lineno == at:
            raise KeyboardInterrupt
        return tracer

    caught: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", caught.append)
    target = tmp_path / "run.npz"
    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _outputs.atomic_output(str(target), sync=False) as f:
                _outputs.write_npz(f, {"x": np.arange(3)})
    finally:
        sys.settrace(None)
    gc.collect()
    assert caught == [] and not target.exists() and os.listdir(tmp_path) == []
    # Uninterrupted, the file is what numpy.savez writes: numpy reads it back.
    with _outputs.atomic_output(str(target), sync=False) as f:
        _outputs.write_npz(f, {"x": np.arange(3), "info": np.array("{}")})
    with np.load(target) as z:
        assert z["x"].tolist() == [0, 1, 2] and str(z["info"]) == "{}"
