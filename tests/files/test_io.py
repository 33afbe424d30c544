"""Profile files: round trip, and clear errors for truncated or foreign files."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import zipfile

import numpy as np
import pytest

from fingrav_native import profile
from fingrav_native.app import profile_interleaved
from fingrav_native.backends import SimBackend
from fingrav_native.files import FORMAT_VERSION, ProfileFormatError, load_profile, save_profile


@pytest.fixture(scope="module")
def prof():
    return profile("cb-4k-gemm", SimBackend(seed=5), mode="both", runs=20, executions=12, top_up=False)


def _assert_same(a, b, path="p"):
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            _assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, path
        if a.dtype.names:
            for n in a.dtype.names:
                np.testing.assert_array_equal(a[n], b[n], err_msg=f"{path}[{n}]")
        else:
            np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), path
    else:
        assert a == b and type(a) is type(b), (path, a, b)


def test_round_trip_is_exact(prof, tmp_path):
    path = save_profile(prof, tmp_path / "p.fgprof")
    back = load_profile(path)
    _assert_same(prof, back)
    assert repr(back) == repr(prof)


def test_nvidia_capabilities_round_trip(prof, tmp_path):
    # A saved profile says what its logs were and where each figure
    # came from (here an H100 in usage mode, with a measured 1 us timer step).
    from fingrav_native.backends import nvml_provenance, nvml_semantics, nvml_sensor

    caps = dataclasses.replace(
        prof.backend, name="nvidia", device="NVIDIA H100 (CUDA 0, PCI 0000:18:00.0)", logger_period_ns=100e6,
        logger_window_ns=1e9, logger_clock="nvml-host-us", logger_tick_ns=1000.0, device_tick_ns=1.0,
        sensor=nvml_sensor("usage", 100e6, 1e9, True), sensor_semantics=nvml_semantics("usage", 1e9, True),
        provenance=nvml_provenance(True), device_resolution_ticks=1000.0)
    nv = dataclasses.replace(prof, backend=caps)
    back = load_profile(save_profile(nv, tmp_path / "nv.fgprof"))
    _assert_same(nv, back)
    assert back.backend.provenance == {"period": "measured", "window": "documented", "delay": "assumed",
                                       "tick": "measured"}
    assert back.backend.describe_figures() == ("period 100 ms (measured), window 1 s (documented), "
                                               "delay 0 (assumed), tick 1 us (measured)")
    assert "1 s average" in back.backend.sensor_semantics and back.backend.device_resolution_ticks == 1000.0


def test_profile_saved_before_the_timer_step_was_recorded_reads_as_one_tick(prof, tmp_path):
    path = save_profile(prof, tmp_path / "old.fgprof")
    # An older file has no device_resolution_ticks: it reads as 1 (every tick).
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read("fingrav.json"))
        members = {n: z.read(n) for n in z.namelist()}
    fields = meta["root"]["fields"]["backend"]["fields"]
    assert "device_resolution_ticks" in fields
    del fields["device_resolution_ticks"]
    members["fingrav.json"] = json.dumps(meta).encode()
    old = tmp_path / "older.fgprof"
    with zipfile.ZipFile(old, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    assert load_profile(old).backend.device_resolution_ticks == 1.0


def test_capabilities_refuse_a_timer_step_below_one_tick(prof):
    for bad in (0.5, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="device_resolution_ticks="):
            dataclasses.replace(prof.backend, device_resolution_ticks=bad)


def test_file_is_self_describing_and_pickle_free(prof, tmp_path):
    path = save_profile(prof, tmp_path / "p.fgprof")
    with zipfile.ZipFile(path) as zf:
        meta = json.loads(zf.read("fingrav.json"))  # standard JSON: no NaN tokens
        names = zf.namelist()
        for n in names:
            if n.endswith(".npy"):
                with zf.open(n) as f:
                    # Readable by plain numpy with pickle refused.
                    np.lib.format.read_array(f, allow_pickle=False)
    assert meta["format"] == "fingrav-profile" and meta["format_version"] == FORMAT_VERSION
    assert meta["root"]["__class__"] == "Profile"
    assert meta["root"]["fields"]["kernel"] == "cb-4k-gemm"
    assert "error_budget" in meta["root"]["fields"] and "clock" in meta["root"]["fields"]


def test_interleaved_round_trip(tmp_path):
    backend = SimBackend(seed=2)
    ref = profile("cb-4k-gemm", backend, mode="ssp", runs=20, executions=12, top_up=False)
    il = profile_interleaved("cb-4k-gemm", [("mb-8k-gemv", 10)], backend, runs=30, reference=ref)
    back = load_profile(save_profile(il, tmp_path / "i.fgprof"))
    _assert_same(il, back)


def test_truncated_file(prof, tmp_path):
    path = save_profile(prof, tmp_path / "p.fgprof")
    assert path == str(tmp_path / "p.fgprof")
    data = (tmp_path / "p.fgprof").read_bytes()
    for cut in (10, len(data) // 2, len(data) - 30):
        bad = tmp_path / f"cut{cut}.fgprof"
        bad.write_bytes(data[:cut])
        with pytest.raises(ProfileFormatError, match="cut"):
            load_profile(bad)


def test_foreign_files(tmp_path):
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    with pytest.raises(ProfileFormatError, match="not a zip archive"):
        load_profile(txt)
    npz = tmp_path / "arrays.npz"
    np.savez(npz, x=np.arange(3))
    with pytest.raises(ProfileFormatError, match="no fingrav.json inside"):
        load_profile(npz)
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("fingrav.json", json.dumps({"format": "something-else", "format_version": 1}))
    with pytest.raises(ProfileFormatError, match="'something-else' is not 'fingrav-profile'"):
        load_profile(other)
    with pytest.raises(FileNotFoundError, match="path="):
        load_profile(tmp_path / "absent.fgprof")


def _rewrite_meta(src, dst, edit):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.namelist():
            data = zin.read(item)
            if item == "fingrav.json":
                meta = json.loads(data)
                edit(meta)
                data = json.dumps(meta).encode()
            zout.writestr(item, data)


def test_newer_version_and_unknown_types_are_refused(prof, tmp_path):
    path = save_profile(prof, tmp_path / "p.fgprof")
    newer = tmp_path / "newer.fgprof"
    _rewrite_meta(path, newer, lambda m: m.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(ProfileFormatError, match="newer than this fingrav-native reads"):
        load_profile(newer)
    evil = tmp_path / "evil.fgprof"
    _rewrite_meta(path, evil, lambda m: m["root"].update({"__class__": "os.system"}))
    with pytest.raises(ProfileFormatError, match="unknown type 'os.system'"):
        load_profile(evil)
    missing = tmp_path / "missing.fgprof"
    _rewrite_meta(path, missing, lambda m: m["root"]["fields"].pop("mode"))
    with pytest.raises(ProfileFormatError, match="Profile fields"):
        load_profile(missing)


def test_save_rejects_non_profiles(tmp_path):
    with pytest.raises(ValueError, match="profile: expected a Profile"):
        save_profile({"a": 1}, tmp_path / "x.fgprof")  # type: ignore[arg-type]
    assert not (tmp_path / "x.fgprof").exists()


def test_parquet_export(prof, tmp_path):
    import pyarrow.parquet as pq

    from fingrav_native.files import export_parquet

    paths = export_parquet(prof, tmp_path / "pq")
    names = sorted(p.rsplit("/", 1)[1] for p in paths)
    assert names == ["curve_sse.parquet", "curve_ssp.parquet", "executions.parquet", "logs.parquet",
                     "lois_sse.parquet", "lois_ssp.parquet"]
    lois = pq.read_table(tmp_path / "pq" / "lois_ssp.parquet")
    assert lois.num_rows == len(prof.profiles["ssp"].lois)
    np.testing.assert_array_equal(lois.column("total").to_numpy(), prof.profiles["ssp"].lois["total"])
    assert lois.schema.metadata[b"fingrav.kernel"] == b"cb-4k-gemm"
    curve = pq.read_table(tmp_path / "pq" / "curve_ssp.parquet").to_pydict()
    total = prof.profiles["ssp"].stitched.channels[0]
    bins = [m for c, k, m in zip(curve["channel"], curve["kind"], curve["mean"]) if c == total.name and k == "bin"]
    np.testing.assert_allclose(bins, total.mean)
    ex = pq.read_table(tmp_path / "pq" / "executions.parquet")
    assert ex.num_rows == len(prof.timeline.executions)


def test_parquet_without_pyarrow_says_what_to_install(prof, tmp_path, monkeypatch):
    from fingrav_native.files import export_parquet

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install 'fingrav-native\[parquet\]'"):
        export_parquet(prof, tmp_path / "pq")


def test_html_repr_for_notebooks(prof):
    html = prof._repr_html_()
    assert html.startswith("<div><b>cb-4k-gemm</b>")
    assert html.count("<tr>") == 1 + len(prof.profiles)  # header + one row per execution of interest
    for p in prof.profiles.values():
        assert f"<td>{p.golden.count}/{p.golden.total}</td>" in html
        assert f"<td>{len(p.lois)} / {p.loi_target}</td>" in html
    assert f"per LOI {prof.error_budget.total_ns:.0f}" in html
