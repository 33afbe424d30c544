"""The seam between acquiring and analysing: one recording type, one device resolver, one save/load.

Recording is checked against the containers it stands for (a campaign run, a
live capture): converting there and back is exact, and a saved recording
loads bit for bit. open_device is the one resolver the CLI, profile() and the
recorder share; save/load read the format from the file, never its name, and
go through the guarded reader (so a damaged or hostile file is refused by
name).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import fingrav_native as fg
from fingrav_native.app import _cli_common as cli_common
from fingrav_native.app import _open
from fingrav_native.backends import LiveSimBackend, SimBackend
from fingrav_native.files import load_characterisation
from fingrav_native.native import SAMPLE_DTYPE
from fingrav_native.sensors import estimate_period

# ---------------------------------------------------------------- Recording

def _run(seed: int = 3) -> tuple[object, object]:
    backend = SimBackend(seed=seed)
    rec = backend.execute_run("cb-4k-gemm", 12, backend.new_run_id())
    return backend, rec


def test_a_campaign_run_is_a_recording_and_back_exactly():
    backend, rec = _run()
    r = fg.Recording.from_run(rec, backend.capabilities, role="campaign")
    assert r.sensor == backend.capabilities.sensor
    assert list(r.clocks) == ["device"] and np.array_equal(r.clocks["device"], rec.brackets)
    assert r.provenance["role"] == "campaign" and r.provenance["run"] == rec.run
    back = r.to_run()
    assert back.run == rec.run and back.executions == rec.executions and back.idle_wait_ns == rec.idle_wait_ns
    for field in ("samples", "markers", "brackets"):
        got, want = getattr(back, field), getattr(rec, field)
        assert got.dtype == want.dtype and np.array_equal(got, want), field
    assert back.meta == dict(rec.meta, role="campaign")


def test_a_recording_is_immutable_and_owns_its_arrays():
    _, rec = _run()
    r = fg.Recording.from_run(rec)
    with pytest.raises(ValueError):
        r.samples["total"][0] = 1.0  # read-only view
    rec.samples["total"][0] = -5.0   # the source changes; the recording does not
    assert r.samples["total"][0] != -5.0


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"samples": np.zeros(3)}, "samples"),
    ({"clocks": {"device": np.zeros((4, 2), np.int64)}}, r"clocks\['device'\]"),
    ({"clocks": {"device": np.zeros((4, 3))}}, r"clocks\['device'\]"),
    ({"clocks": {"": np.zeros((4, 3), np.int64)}}, "clocks"),
    ({"clocks": [1, 2]}, "clocks"),
    ({"sensor": "amd-1ms-average"}, "sensor"),
    ({"provenance": ["x"]}, "provenance"),
    ({"executions": np.zeros(3)}, "executions"),
])
def test_a_bad_recording_is_refused_naming_the_field(kwargs, field):
    base = {"samples": np.zeros(4, SAMPLE_DTYPE)}
    with pytest.raises(ValueError, match=field):
        fg.Recording(**dict(base, **kwargs))


def test_a_recording_round_trips_through_save_and_load(tmp_path):
    backend, rec = _run(5)
    r = fg.Recording.from_run(rec, backend.capabilities, kernel="cb-4k-gemm")
    path = fg.save(r, tmp_path / "run.npz")
    assert [p.name for p in tmp_path.iterdir()] == ["run.npz"]  # written atomically, nothing left behind
    back = fg.load(path)
    assert isinstance(back, fg.Recording)
    assert back.samples.dtype == r.samples.dtype and np.array_equal(back.samples, r.samples)
    assert np.array_equal(back.markers, r.markers) and back.executions is None
    assert list(back.clocks) == list(r.clocks) and np.array_equal(back.clocks["device"], r.clocks["device"])
    assert back.sensor == r.sensor and back.source == r.source
    assert back.provenance.keys() == r.provenance.keys()
    for k, v in r.provenance.items():  # the simulator's per-execution truth arrays come back exact
        if isinstance(v, np.ndarray):
            assert back.provenance[k].dtype == v.dtype and np.array_equal(back.provenance[k], v), k
        else:
            assert back.provenance[k] == v, k


def test_a_recording_with_what_json_cannot_hold_is_refused_before_writing(tmp_path):
    r = fg.Recording(samples=np.zeros(2, SAMPLE_DTYPE), provenance={"x": float("nan")})
    with pytest.raises(ValueError, match="JSON-ready"):
        fg.save(r, tmp_path / "r.npz")
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_recording_is_refused_by_name(tmp_path):
    _, rec = _run()
    path = fg.save(fg.Recording.from_run(rec), tmp_path / "r.npz")
    assert path == str(tmp_path / "r.npz")
    data = (tmp_path / "r.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.npz"):
        fg.load(tmp_path / "cut.npz")


# ---------------------------------------------------------------- save / load

def test_load_reads_the_format_from_the_file_not_its_name(tmp_path):
    prof = fg.profile("cb-4k-gemm", "sim:2", mode="sse", runs=30)
    path = fg.save(prof, tmp_path / "profile.weird-suffix")
    back = fg.load(path)
    assert isinstance(back, fg.Profile) and back.kernel == prof.kernel


def test_save_refuses_what_it_cannot_save():
    with pytest.raises(ValueError, match="obj: cannot save a dict"):
        fg.save({"a": 1}, "x.npz")
    with pytest.raises(ValueError, match="path="):
        fg.save(fg.Recording(samples=np.zeros(1, SAMPLE_DTYPE)), 12)


@pytest.mark.parametrize("content", [b"", b"hello", b"[1, 2]"])
def test_load_refuses_files_of_no_format(tmp_path, content):
    p = tmp_path / "x.bin"
    p.write_bytes(content)
    with pytest.raises(ValueError, match="x.bin"):
        fg.load(p)


def test_load_refuses_a_directory_and_a_missing_file(tmp_path):
    with pytest.raises(ValueError, match="path="):
        fg.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        fg.load(tmp_path / "missing.npz")


def test_a_characterisation_round_trips_and_its_loader_is_guarded(tmp_path):
    c = fg.Characterisation(fg.sensor_preset("amd-1ms-average"), estimate_period(np.arange(10) * 1e6), None,
                            0.0, "sim", "test")
    back = fg.load(fg.save(c, tmp_path / "sensor.json"))
    assert back == c
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100 + "]" * 100)
    with pytest.raises(ValueError, match="nests deeper"):
        load_characterisation(deep)
    with pytest.raises(ValueError, match="not a readable sensor characterisation"):
        load_characterisation(tmp_path)  # a directory, not a file
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(70 << 20)  # past the JSON size cap: refused before it is read
    with pytest.raises(ValueError, match="larger than"):
        load_characterisation(big)


def test_a_characterisation_of_another_format_is_refused(tmp_path):
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="fingrav-sensor"):
        fg.load(p)


# ---------------------------------------------------------------- open_device

@pytest.mark.parametrize(("spec", "vendor", "index", "mode"), [
    ("sim", "sim", 0, None), ("sim:7", "sim", 7, None), ("sim-live", "sim-live", 0, None),
    ("nvidia:0", "nvidia", 0, None), ("NVIDIA:1:instant", "nvidia", 1, "instant"),
    (" amd:2:socket ", "amd", 2, "socket"),
])
def test_device_strings_parse(spec, vendor, index, mode):
    assert _open.parse_device(spec) == _open.DeviceSpec(vendor, index, mode)


@pytest.mark.parametrize("spec", ["", "gpu:0", "nvidia", "nvidia:-1", "amd:x", "sim:1:2", 5, None])
def test_bad_device_strings_are_refused_listing_the_forms(spec):
    with pytest.raises(ValueError, match="device=") as info:
        _open.parse_device(spec)
    assert "nvidia:N" in str(info.value) and "sim" in str(info.value)


def test_open_device_makes_the_simulated_backends():
    b = fg.open_device("sim:4")
    assert isinstance(b, SimBackend) and not isinstance(b, LiveSimBackend)
    assert isinstance(fg.open_device("sim", seed=9), SimBackend)
    assert isinstance(fg.open_device("sim-live"), LiveSimBackend)
    assert fg.open_device(b) is b  # a backend is returned as it is
    with pytest.raises(ValueError, match="seed="):
        fg.open_device("sim", seed=-1)
    with pytest.raises(ValueError, match="only a simulated device takes a seed"):
        fg.open_device("nvidia:0", seed=1)
    with pytest.raises(ValueError, match="unknown NVML mode"):
        fg.open_device("nvidia:0:bogus")
    with pytest.raises(ValueError, match="unknown channel"):
        fg.open_device("amd:0:bogus")
    with pytest.raises(ValueError, match="must be a backend or a device string"):
        fg.open_device(object())


def test_open_device_on_hardware_that_is_not_here_says_what_is_missing(monkeypatch):
    # No GPU on the machines this runs on: the hardware strings reach the vendor backends,
    # whose errors name the library or device and how to get it (never a bare traceback).
    for spec in ("nvidia:0", "amd:0"):
        with pytest.raises((fg.LibraryNotFoundError, fg.DeviceUnavailableError, RuntimeError, OSError)) as info:
            fg.open_device(spec)
        assert str(info.value)


def test_profile_cli_and_recorder_share_the_resolver(monkeypatch):
    seen: list[object] = []
    real = _open.open_device

    def spy(device="sim", **kw):
        seen.append(device)
        return real(device, **kw)

    # profile() and the CLI go through open_device.
    import fingrav_native.app._profile as app_profile
    monkeypatch.setattr(app_profile, "open_device", spy)
    # The CLI imports open_device when it opens a device (its start stays light), so the spy goes where it looks.
    monkeypatch.setattr(_open, "open_device", spy)
    fg.app.profile("cb-4k-gemm", "sim:1", mode="sse", runs=20)
    cli_common.make_backend("sim", 0, 3)
    assert seen == ["sim:1", "sim"]
    # The recorder reads the same strings, refusing the virtual-time simulator (it needs a live source).
    with pytest.raises(ValueError, match="live power source"):
        fg.record("sim")
    with pytest.raises(ValueError, match="unknown device string"):
        fg.record("gpu:0")


def test_record_returns_a_recorder_that_checks_its_folder_first(tmp_path):
    from fingrav_native.sim import SimGPU

    with pytest.raises(ValueError, match="its folder does not exist"):
        fg.record(SimGPU(realtime=True), tmp_path / "no" / "such" / "capture.npz")
    rec = fg.record(SimGPU(realtime=True), os.fspath(tmp_path / "c.npz"), period_ns=1_000_000)
    assert isinstance(rec, fg.app.PowerRecorder)


@pytest.mark.slow
def test_a_trace_profile_round_trips_through_save_and_load(tmp_path):
    from fingrav_native.app import simulate_training_loop

    trace, power = simulate_training_loop(400, seed=1).save(str(tmp_path / "run"))
    tp = fg.profile_trace(trace, fg.load(power))
    back = fg.load(fg.save(tp, tmp_path / "tp.fgprof"))
    assert isinstance(back, fg.TraceProfile)
    for field in ("kernels", "iterations", "signature_rows", "logs"):
        a, b = getattr(tp, field), getattr(back, field)
        assert a.dtype == b.dtype and np.array_equal(a, b), field
    assert back.trace.executions.tobytes() == tp.trace.executions.tobytes()
    assert (back.skipped, back.alignment, back.sensor, back.summary) == (tp.skipped, tp.alignment, tp.sensor,
                                                                          tp.summary)
    assert [p.label for p in back.profiles] == [p.label for p in tp.profiles]


def test_every_container_of_a_measurement_is_a_recording(tmp_path):
    # RunRecord, a stored campaign run, a Timeline, a capture and a campaign's timeline each
    # give the one Recording type, with their arrays intact.
    from fingrav_native.clocks import timeline_of
    from fingrav_native.files import load_campaign_runs

    backend, rec = _run(6)
    assert np.array_equal(rec.to_recording().markers, rec.markers)
    tl = timeline_of([rec], backend.capabilities)
    r = tl.to_recording(backend.capabilities.sensor)
    assert np.array_equal(r.executions, tl.executions) and np.array_equal(r.samples, tl.samples)

    prof = fg.profile("cb-4k-gemm", "sim:6", mode="sse", runs=20, out_dir=str(tmp_path / "c"))
    stored = load_campaign_runs(str(tmp_path / "c"))
    rs = stored[0].to_recording()
    assert rs.provenance["role"] == stored[0].role and rs.provenance["file"] == stored[0].path
    assert np.array_equal(rs.samples, stored[0].record.samples)
    ct = prof.timeline.to_recording()
    assert np.array_equal(ct.executions, prof.timeline.executions)
    np.testing.assert_array_equal(ct.samples["total"], prof.timeline.logs["total"])
    assert np.all(np.abs(ct.samples["source_ts"] - prof.timeline.logs["host_ns"]) <= 0.5)


def test_every_driver_opens_device_strings():
    # characterize, the node driver and the recorder read the same strings as profile and the CLI.
    with pytest.raises(ValueError, match="unknown device string"):
        fg.characterize("gpu:0")
    with pytest.raises(ValueError, match="unknown device string"):
        fg.app.profile_node("cb-4k-gemm", ["sim:1", "gpu:0"])
    rec = fg.record("sim-live", period_ns=1_000_000)
    assert isinstance(rec, fg.app.PowerRecorder)
    with pytest.raises(ValueError, match="virtual time"):
        fg.record("sim")


@pytest.mark.slow
def test_characterize_takes_a_device_string():
    c = fg.characterize("sim:2", runs=3, cycles=2)
    assert c.period.period_ns > 0 and c.sensor is not None
