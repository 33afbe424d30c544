"""Every public file loader refuses a bad file with its documented error, naming the file.

Random bit flips and truncations of a saved profile, a power capture and
application traces must either load the very same thing (a flip in a byte
nobody reads) or raise the loader's own error: ProfileFormatError,
CaptureFormatError, TraceFormatError. Never zlib.error, MemoryError,
RecursionError, KeyError, TypeError or UnicodeDecodeError, which is what
came out before. Hypothesis then edits a profile's ``fingrav.json`` tree
(a wrong type in any field, a field missing or added, nesting 65 to 400
deep) and the error must name the field's path. The limits (directories,
zip and gzip bombs, absurd array headers, old layouts that must still
load) are checked one by one.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import io
import json
import math
import os
import typing
import warnings
import zipfile
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fingrav_native import profile
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.backends import SimBackend
from fingrav_native.files import (
    CaptureFormatError,
    PowerCapture,
    ProfileFormatError,
    _safe,
    export_parquet,
    load_capture,
    load_profile,
    read_kineto_trace,
    read_rocprof_kernel_trace,
    read_trace,
    save_profile,
    write_kineto_trace,
    write_rocprof_trace,
)
from fingrav_native.insitu import KernelTrace, TraceFormatError
from fingrav_native.records import EXECUTION_DTYPE, EXECUTION_DTYPE_V1, LOI_DTYPE
from fingrav_native.sensors import SENSOR_PRESETS

EPOCH = 1_763_900_000_123_456_789
TREES = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# --------------------------------------------------------------------------- helpers


def _same(a: Any, b: Any) -> bool:
    """Deep equality of loaded objects: dataclasses, arrays (dtype and bits), containers, NaN equal to NaN."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and a.tobytes() == b.tobytes())
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def _flips(data: bytes, n: int, seed: int, hot: tuple[tuple[int, int], ...] = ()) -> list[tuple[int, int]]:
    """``n`` (byte, bit) flips spread over the file, plus as many again inside the ``hot`` ranges."""
    rng = np.random.default_rng(seed)
    out = [(int(rng.integers(0, len(data))), int(rng.integers(0, 8))) for _ in range(n)]
    for lo, hi in hot:
        out += [(int(rng.integers(lo, hi)), int(rng.integers(0, 8))) for _ in range(n // (2 * len(hot)))]
    return out


def _flipped(data: bytes, pos: int, bit: int) -> bytes:
    b = bytearray(data)
    b[pos] ^= 1 << bit
    return bytes(b)


def _cuts(data: bytes, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return sorted({0, 1, len(data) - 1, *(int(x) for x in rng.integers(0, len(data), n))})


def _zip_hot(data: bytes) -> tuple[tuple[int, int], ...]:
    """Byte ranges holding a zip's structure: the first member (header and JSON) and the central directory."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        first_end = infos[1].header_offset if len(infos) > 1 else len(data)
        return ((0, first_end), (zf.start_dir, len(data)))


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _write_zip(path: Any, members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> str:
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return str(path)


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _get(tree: Any, keys: list[Any]) -> Any:
    for k in keys:
        tree = tree[k]
    return tree


# --------------------------------------------------------------------------- files to break


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Any]:
    """A small saved profile (both SSE and SSP, with its timeline) and what it loads as."""
    prof = profile("cb-4k-gemm", SimBackend(seed=5), mode="both", runs=20, executions=12, top_up=False)
    path = save_profile(prof, tmp_path_factory.mktemp("profile") / "p.fgprof")
    with open(path, "rb") as f:
        data = f.read()
    return data, load_profile(path)


@pytest.fixture(scope="module")
def profile_meta(profile_file: tuple[bytes, Any]) -> tuple[dict[str, Any], dict[str, bytes]]:
    members = _members(profile_file[0])
    return json.loads(members["fingrav.json"]), members


def _capture() -> PowerCapture:
    n = 200
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["host_ns"] = 1_000_000_000 + np.arange(n) * 1_000_000
    s["host_poll_begin_ns"] = s["host_ns"] - 3_000
    s["source_ts"] = np.arange(n) * 100_000
    s["seq"] = s["source_seq"] = np.arange(n)
    s["total"] = 300.0 + np.arange(n) % 7
    mono = 1_000_000_000 + np.arange(20, dtype=np.int64) * 10_000_000
    brackets = np.stack([mono, EPOCH + mono + 50, mono + 100], axis=1).astype(np.int64)
    boot = np.stack([mono, 270_000_000_000_000 + mono + 60, mono + 130], axis=1).astype(np.int64)
    return PowerCapture(samples=s, epoch_brackets=brackets, clock_brackets={"CLOCK_BOOTTIME": boot},
                        source={"name": "test", "clock_domain": "sim-device", "tick_ns": 10.0,
                                "native_period_ns": 1_000_000, "window_ns": 0, "channels": ["total"]},
                        sensor=SENSOR_PRESETS["amd-1ms-average"], period_ns=250_000,
                        stats={"drops": 0, "samples": n}, meta={"device": "test", "hostname": "h"})


@pytest.fixture(scope="module")
def capture_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, PowerCapture]:
    path = _capture().save(tmp_path_factory.mktemp("capture") / "power.npz")
    with open(path, "rb") as f:
        return f.read(), load_capture(path)


def _write_trace(path: Any) -> str:
    n = 24
    starts = [EPOCH + 10_000 * i + 7 for i in range(n)]
    ends = [s + 4_000 + 13 * i for i, s in enumerate(starts)]
    names = ["gemm" if i % 3 else "gemv" for i in range(n)]
    return write_kineto_trace(path, names, [(8, 1, 1)] * n, [(256, 1, 1)] * n, starts, ends, base_time_ns=EPOCH,
                              launch_ns=[s - 2_000 for s in starts],
                              steps=[(EPOCH + 80_000 * k, EPOCH + 80_000 * (k + 1)) for k in range(3)])


@pytest.fixture(scope="module")
def trace_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, KernelTrace]]:
    folder = tmp_path_factory.mktemp("trace")
    out = {}
    for name in ("t.json.gz", "t.json"):
        path = _write_trace(folder / name)
        with open(path, "rb") as f:
            out[name] = (f.read(), read_kineto_trace(path))
    return out


def _same_trace(a: KernelTrace, b: KernelTrace) -> bool:
    return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a) if f.name != "source")


# --------------------------------------------------------------------------- bit flips and truncations


def test_bit_flips_in_a_profile_load_the_same_profile_or_are_refused(profile_file, tmp_path):
    data, original = profile_file
    path = tmp_path / "flip.fgprof"
    refused = 0
    for pos, bit in _flips(data, 200, seed=18, hot=_zip_hot(data)):
        path.write_bytes(_flipped(data, pos, bit))
        try:
            back = load_profile(path)
        except ProfileFormatError as exc:
            assert str(path) in str(exc)
            refused += 1
            continue
        assert _same(original, back), f"a flip of bit {bit} at byte {pos} loaded a different profile"
    assert refused > 150  # CRC-32 catches nearly every flip in data; the rest fall in unread bytes


def test_truncated_profiles_are_refused(profile_file, tmp_path):
    data, _ = profile_file
    path = tmp_path / "cut.fgprof"
    for cut in _cuts(data, 50, seed=19):
        path.write_bytes(data[:cut])
        with pytest.raises(ProfileFormatError, match="cut.fgprof"):
            load_profile(path)


def _same_capture(a: PowerCapture, b: PowerCapture) -> bool:
    return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))


def test_bit_flips_and_truncations_of_a_capture_are_refused_or_harmless(capture_file, tmp_path):
    data, original = capture_file
    path = tmp_path / "flip.npz"
    for pos, bit in _flips(data, 150, seed=20, hot=_zip_hot(data)):
        path.write_bytes(_flipped(data, pos, bit))
        try:
            back = load_capture(path)
        except CaptureFormatError as exc:
            assert "flip.npz" in str(exc)
            continue
        assert _same_capture(original, back), f"a flip of bit {bit} at byte {pos} loaded a different capture"
    for cut in _cuts(data, 30, seed=21):
        path.write_bytes(data[:cut])
        with pytest.raises(CaptureFormatError, match="flip.npz"):
            load_capture(path)


def test_bit_flips_and_truncations_of_kineto_traces_are_refused_or_read(trace_files, tmp_path):
    data, original = trace_files["t.json.gz"]
    path = tmp_path / "flip.json.gz"
    for pos, bit in _flips(data, 150, seed=22):
        path.write_bytes(_flipped(data, pos, bit))
        try:
            back = read_kineto_trace(path)
        except TraceFormatError as exc:
            assert "flip.json.gz" in str(exc)
            continue
        # gzip's CRC-32 guards the JSON: what loads is what was written.
        assert _same_trace(original, back), f"a flip of bit {bit} at byte {pos} read a different trace"
    for cut in _cuts(data, 30, seed=23):
        path.write_bytes(data[:cut])
        with pytest.raises(TraceFormatError, match="flip.json.gz"):
            read_kineto_trace(path)
    # Plain JSON has no checksum: a flipped digit is another valid trace. Only the error type is promised.
    data, _ = trace_files["t.json"]
    path = tmp_path / "flip.json"
    for pos, bit in _flips(data, 100, seed=24):
        path.write_bytes(_flipped(data, pos, bit))
        try:
            assert isinstance(read_kineto_trace(path), KernelTrace)
        except TraceFormatError as exc:
            assert "flip.json" in str(exc)
    for cut in _cuts(data, 20, seed=25):
        path.write_bytes(data[:cut])
        with pytest.raises(TraceFormatError, match="flip.json"):
            read_kineto_trace(path)


def test_bit_flips_and_truncations_of_rocprofv3_json_and_rocpd_are_refused_or_read(tmp_path):
    n = 12
    starts = [270_000_000_000_000 + 10_000 * i for i in range(n)]
    kw = dict(names=[f"gemm_{i % 3}" for i in range(n)], grid=[(2048, 1, 1)] * n, block=[(256, 1, 1)] * n,
              start_ns=starts, end_ns=[t + 4_000 for t in starts], device=[i % 2 for i in range(n)])
    for fmt, name in (("json", "flip_results.json"), ("rocpd", "flip_results.db")):
        good = write_rocprof_trace(tmp_path / f"good_{name}", output_format=fmt, **kw)
        with open(good, "rb") as f:
            data = f.read()
        path = tmp_path / name
        for pos, bit in _flips(data, 120, seed=28):
            path.write_bytes(_flipped(data, pos, bit))
            try:
                assert isinstance(read_trace(path), KernelTrace)
            except TraceFormatError as exc:
                assert name in str(exc)
        for cut in _cuts(data, 20, seed=29):
            path.write_bytes(data[:cut])
            try:
                assert isinstance(read_trace(path), KernelTrace)  # a database cut after its last page
            except TraceFormatError as exc:
                assert name in str(exc)


ROCPROF = (
    '"Kind","Agent_Id","Queue_Id","Correlation_Id","Kernel_Name","Start_Timestamp","End_Timestamp",'
    '"Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
    + "".join(f'"KERNEL_DISPATCH","Agent {4 + i % 2}",1,{i + 1},"gemm_{i % 3}",{1_000_000 + 10_000 * i},'
              f'{1_004_000 + 10_000 * i},256,1,1,{2048 * (1 + i % 3)},1,1\n' for i in range(12)))


def test_bit_flips_and_truncations_of_a_rocprof_trace_are_refused_or_read(tmp_path):
    data = ROCPROF.encode()
    path = tmp_path / "flip_kernel_trace.csv"
    for pos, bit in _flips(data, 100, seed=26):
        path.write_bytes(_flipped(data, pos, bit))
        try:
            assert isinstance(read_rocprof_kernel_trace(path), KernelTrace)
        except TraceFormatError as exc:
            assert "flip_kernel_trace.csv" in str(exc)
    for cut in _cuts(data, 20, seed=27):
        path.write_bytes(data[:cut])
        try:
            assert isinstance(read_rocprof_kernel_trace(path), KernelTrace)  # a CSV cut after a row is shorter
        except TraceFormatError as exc:
            assert "flip_kernel_trace.csv" in str(exc)


# --------------------------------------------------------------------------- malformed fingrav.json trees

# JSON values of each kind, to put where a field expects another.
KINDS: dict[str, Any] = {
    "null": None, "bool": True, "int": 7, "float": -2.5, "str": "wrong", "list": [1, 2], "object": {"k": 1},
    "array": {"__array__": "a9999"}, "tuple": {"__tuple__": [1]}, "nonfinite": {"__float__": "nan"},
    "class:ErrorBudget": {"__class__": "ErrorBudget", "fields": {
        "clock_map_ns": 1.0, "marker_ns": 1.0, "logger_window_ns": 0.0, "total_ns": 1.0}},
}


def _allowed(tp: Any) -> set[str]:
    """The JSON kinds a field annotated ``tp`` may hold (from the annotation alone)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return set(KINDS)
    if origin is typing.Union or type(tp).__name__ == "UnionType":
        return set().union(*(_allowed(a) for a in typing.get_args(tp)))
    simple = {type(None): {"null"}, bool: {"bool"}, int: {"int"}, float: {"int", "float", "nonfinite"},
              str: {"str"}}
    if tp in simple:
        return simple[tp]
    if tp is np.ndarray or origin is np.ndarray:
        return {"array"}
    if origin is tuple:
        return {"tuple"}
    if origin is list:
        return {"list"}
    if origin is dict:
        return {"object"}
    assert dataclasses.is_dataclass(tp), tp
    return {f"class:{tp.__name__}"}


def _fields(node: Any, obj: Any, keys: list[Any], path: str, out: list[tuple[list[Any], str, Any, Any]]) -> None:
    """Every dataclass field in the tree: (JSON keys to its value, field path, annotation, dataclass field)."""
    if dataclasses.is_dataclass(obj):
        hints = typing.get_type_hints(type(obj))
        for f in dataclasses.fields(obj):
            sub, fpath = keys + ["fields", f.name], f"{path}.{f.name}"
            out.append((sub, fpath, hints[f.name], f))
            if hints[f.name] is not Any:
                _fields(node["fields"][f.name], getattr(obj, f.name), sub, fpath, out)
    elif isinstance(obj, tuple):
        for i, x in enumerate(obj):
            _fields(node["__tuple__"][i], x, keys + ["__tuple__", i], f"{path}[{i}]", out)
    elif isinstance(obj, dict):
        for k, x in obj.items():
            _fields(node[k], x, keys + [k], f"{path}[{k!r}]", out)


@pytest.fixture(scope="module")
def field_table(profile_file, profile_meta) -> list[tuple[list[Any], str, Any, Any]]:
    meta, _ = profile_meta
    out: list[tuple[list[Any], str, Any, Any]] = []
    _fields(meta["root"], profile_file[1], ["root"], "profile", out)
    assert len(out) > 200
    return out


def _load_edited(tmp_path: Any, members: dict[str, bytes], meta: dict[str, Any]) -> Any:
    edited = dict(members, **{"fingrav.json": json.dumps(meta).encode()})
    return load_profile(_write_zip(tmp_path / "edited.fgprof", edited, zipfile.ZIP_STORED))


@given(data=st.data())
@TREES
def test_a_wrong_type_in_any_field_is_refused_naming_the_field(profile_meta, field_table, tmp_path, data):
    meta, members = profile_meta
    keys, path, tp, _ = data.draw(st.sampled_from([f for f in field_table if f[2] is not Any]))
    kind = data.draw(st.sampled_from(sorted(set(KINDS) - _allowed(tp))))
    edited = copy.deepcopy(meta)
    _get(edited, keys[:-1])[keys[-1]] = copy.deepcopy(KINDS[kind])
    with pytest.raises(ProfileFormatError) as info:
        _load_edited(tmp_path, members, edited)
    assert f"edited.fgprof: {path}" in str(info.value)


@given(data=st.data())
@TREES
def test_a_missing_field_is_refused_unless_it_has_a_default(profile_meta, field_table, tmp_path, data):
    meta, members = profile_meta
    keys, path, _, field = data.draw(st.sampled_from(field_table))
    edited = copy.deepcopy(meta)
    del _get(edited, keys[:-1])[keys[-1]]
    if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
        # A file written before the field existed: it loads, unless the default contradicts the rest.
        try:
            _load_edited(tmp_path, members, edited)
        except ProfileFormatError as exc:
            assert f"edited.fgprof: {path.rsplit('.', 1)[0]}" in str(exc)
        return
    with pytest.raises(ProfileFormatError) as info:
        _load_edited(tmp_path, members, edited)
    owner = path.rsplit(".", 1)[0]
    assert f"edited.fgprof: {owner}: " in str(info.value) and f"missing ['{field.name}']" in str(info.value)


@given(data=st.data())
@TREES
def test_an_unknown_field_is_refused_naming_its_object(profile_meta, field_table, tmp_path, data):
    meta, members = profile_meta
    keys, path, _, _ = data.draw(st.sampled_from(field_table))
    edited = copy.deepcopy(meta)
    _get(edited, keys[:-1])["surprise"] = data.draw(st.sampled_from(list(KINDS.values())))
    with pytest.raises(ProfileFormatError) as info:
        _load_edited(tmp_path, members, edited)
    assert f"edited.fgprof: {path.rsplit('.', 1)[0]}: " in str(info.value)
    assert "unknown ['surprise']" in str(info.value)


@given(data=st.data())
@TREES
def test_deep_nesting_in_any_field_is_refused_naming_the_field(profile_meta, field_table, tmp_path, data):
    meta, members = profile_meta
    keys, path, _, _ = data.draw(st.sampled_from(field_table))
    depth = data.draw(st.integers(_safe.MAX_JSON_DEPTH + 1, 400))
    deep: Any = data.draw(st.sampled_from([1, "x", None]))
    for _ in range(depth):
        deep = data.draw(st.sampled_from(["list", "dict"])) == "list" and [deep] or {"k": deep}
    edited = copy.deepcopy(meta)
    _get(edited, keys[:-1])[keys[-1]] = deep
    with pytest.raises(ProfileFormatError, match="nests deeper than the 64 levels") as info:
        _load_edited(tmp_path, members, edited)
    assert f"edited.fgprof: {path}" in str(info.value)


def test_nesting_deeper_than_the_parser_goes_is_refused(profile_meta, tmp_path):
    _, members = profile_meta
    edited = dict(members, **{"fingrav.json": b"[" * 100_000 + b"]" * 100_000})
    with pytest.raises(ProfileFormatError, match="fingrav.json: nests deeper"):
        load_profile(_write_zip(tmp_path / "deep.fgprof", edited))


def test_nan_tokens_and_huge_numbers_are_not_json(profile_meta, tmp_path):
    meta, members = profile_meta
    text = json.dumps(meta)
    for bad in (text.replace('"format_version": 1', '"format_version": NaN'),
                text.replace('"format_version": 1', '"format_version": 1e999'),
                text.replace('"format_version": 1', '"format_version": ' + "9" * 5000)):
        edited = dict(members, **{"fingrav.json": bad.encode()})
        with pytest.raises(ProfileFormatError, match="fingrav.json: not JSON"):
            load_profile(_write_zip(tmp_path / "nan.fgprof", edited))


# --------------------------------------------------------------------------- what the types cannot say


def _replace_array(members: dict[str, bytes], meta: dict[str, Any], keys: list[Any], arr: np.ndarray) -> dict[str, bytes]:
    key = _get(meta, keys)["__array__"]
    return dict(members, **{f"arrays/{key}.npy": _npy(arr)})


@pytest.mark.parametrize(("where", "value", "message"), [
    # The cases: each loaded and exported before.
    (["root", "fields", "kernel"], 42, r"profile\.kernel: expected a str, got an integer"),
    (["root", "fields", "kernel"], "", r"profile\.kernel: is empty"),
    (["root", "fields", "profiles"], {}, r"profile\.profiles: is empty"),
    (["root", "fields", "mode"], "all", r"profile\.mode: 'all' is not one of"),
    (["root", "fields", "runs"], 3.5, r"profile\.runs: expected an int, got a number"),
    (["root", "fields", "runs"], True, r"profile\.runs: expected an int, got a bool"),
    (["root", "fields", "profiles", "sse", "fields", "golden", "fields", "count"], 3,
     r"profile\.profiles\['sse'\]\.golden\.count: is 3 but mask selects"),
])
def test_values_of_the_right_type_but_impossible_are_refused(profile_meta, tmp_path, where, value, message):
    meta, members = profile_meta
    edited = copy.deepcopy(meta)
    _get(edited, where[:-1])[where[-1]] = value
    with pytest.raises(ProfileFormatError, match=message):
        _load_edited(tmp_path, members, edited)


GOLDEN = ["root", "fields", "profiles", "sse", "fields", "golden", "fields"]
TIMELINE = ["root", "fields", "timeline", "fields"]


def test_arrays_of_the_wrong_content_are_refused_naming_the_field(profile_file, profile_meta, tmp_path):
    meta, members = profile_meta
    prof = profile_file[1]
    golden = prof.profiles["sse"].golden
    cases = [
        # The golden-run list replaced by zeros (the case): one run counted many times.
        (GOLDEN + ["run_ids"], np.zeros_like(golden.run_ids), r"profile\.profiles\['sse'\]\.golden\.run_ids: "),
        (GOLDEN + ["run_ids"], golden.run_ids.astype(np.float64), r"golden\.run_ids: must hold int values"),
        (GOLDEN + ["run_ids"], golden.run_ids[:-1], r"golden\.run_ids: has \d+ runs for count"),
        (GOLDEN + ["mask"], golden.mask.astype(np.int8), r"golden\.mask: must hold bool values"),
        (TIMELINE + ["golden_runs"], np.zeros(3, dtype=np.int64), r"profile\.timeline\.golden_runs: holds a run id"),
        (TIMELINE + ["golden_runs"], np.array([10_000]), r"timeline\.golden_runs: run 10000 is not among"),
        (TIMELINE + ["executions"], prof.timeline.executions[:0], r"profile\.timeline\.executions: is empty"),
        (TIMELINE + ["logs"], np.zeros(3), r"profile\.timeline\.logs: must be a LOG_DTYPE record array"),
        (["root", "fields", "profiles", "sse", "fields", "lois"], np.zeros(2, dtype=[("run", "<i8")]),
         r"profile\.profiles\['sse'\]\.lois: must be a LOI_DTYPE record array"),
        (["root", "fields", "profiles", "ssp", "fields", "stitched", "fields", "channels", "__tuple__", 0,
          "fields", "mean"], np.zeros(3), r"stitched\.channels\[0\]\.mean: has 3 values for \d+ bins"),
    ]
    for keys, arr, message in cases:
        with pytest.raises(ProfileFormatError, match=message):
            load_profile(_write_zip(tmp_path / "arr.fgprof", _replace_array(members, meta, keys, arr)))


def test_files_written_before_int64_times_still_load(profile_file, profile_meta, tmp_path):
    """Executions in EXECUTION_DTYPE_V1 and LOIs with float64 host times convert exactly."""
    meta, members = profile_meta
    prof = profile_file[1]
    ex = prof.timeline.executions
    old_ex = np.zeros(len(ex), dtype=EXECUTION_DTYPE_V1)
    for name in EXECUTION_DTYPE_V1.names:
        old_ex[name] = ex[name]
    lois = prof.profiles["sse"].lois
    before = {"run": "<i4", "execution": "<i4", "host_ns": "<f8"}  # the layout of fingrav-native <= 0.x
    old_loi_dtype = np.dtype([(n, before.get(n, LOI_DTYPE[n].str)) for n in LOI_DTYPE.names])
    old_lois = np.zeros(len(lois), dtype=old_loi_dtype)
    for name in LOI_DTYPE.names:
        old_lois[name] = lois[name]
    edited = _replace_array(members, meta, TIMELINE + ["executions"], old_ex)
    edited = _replace_array(edited, meta, ["root", "fields", "profiles", "sse", "fields", "lois"], old_lois)
    back = load_profile(_write_zip(tmp_path / "old.fgprof", edited))
    assert back.timeline.executions.dtype == EXECUTION_DTYPE
    assert back.timeline.executions.tobytes() == ex.tobytes()
    assert back.profiles["sse"].lois.dtype == LOI_DTYPE
    assert back.profiles["sse"].lois.tobytes() == lois.tobytes()


def test_an_array_referenced_twice_or_missing_is_refused(profile_meta, tmp_path):
    meta, members = profile_meta
    edited = copy.deepcopy(meta)
    golden = _get(edited, GOLDEN)
    golden["run_ids"] = dict(golden["mask"])
    with pytest.raises(ProfileFormatError, match=r"golden\.run_ids: array a\d+ is referenced twice"):
        _load_edited(tmp_path, members, edited)
    key = golden["mask"]["__array__"]
    fewer = {k: v for k, v in members.items() if k != f"arrays/{key}.npy"}
    with pytest.raises(ProfileFormatError, match=rf"golden\.mask: array arrays/{key}\.npy is missing"):
        load_profile(_write_zip(tmp_path / "fewer.fgprof", fewer))


def test_a_member_twice_in_an_archive_is_refused(profile_meta, capture_file, tmp_path):
    # zipfile reads the last of two members of one name: a second fingrav.json won without a word.
    meta, members = profile_meta
    other = copy.deepcopy(meta)
    other["root"]["fields"]["kernel"] = "someone else's kernel"
    path = _write_zip(tmp_path / "two.fgprof", members)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name as it writes it
        with zipfile.ZipFile(path, "a") as zf:
            zf.writestr("fingrav.json", json.dumps(other))
    with pytest.raises(ProfileFormatError, match=r"member 'fingrav.json' is in the archive twice"):
        load_profile(path)
    # The same for a power capture's members.
    capture = _members(capture_file[0])
    path = _write_zip(tmp_path / "two.npz", capture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(path, "a") as zf:
            zf.writestr("samples.npy", capture["samples.npy"])
    with pytest.raises(CaptureFormatError, match=r"member 'samples.npy' is in the archive twice"):
        load_capture(path)


# --------------------------------------------------------------------------- limits


def _npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue()


@pytest.mark.parametrize(("blob", "message"), [
    (_npy_header((2**30, 2**8)), r"declares shape .* but \d+ bytes follow"),  # 2 TB: refused, not allocated
    (_npy_header((2**40, 2**20)), r"declares \d+ elements of float64: not a real array"),
    (_npy_header((-5,)), r"not sizes >= 0"),
    (_npy_header((3,), "|O") + b"x" * 24, r"holds Python objects"),
    (_npy_header((1 << 20,), "<U100000"), r"declares shape .* but 0 bytes follow"),
    (b"\x93NUMPY\x03\x00" + b"\x00" * 20, r"format version 3\.0"),
    (b"\x93NUMPY\x01\x00\x10\x00{'descr': ((((((", r"header is damaged"),
    (b"not an array", r"not a \.npy array"),
])
def test_absurd_or_damaged_array_headers_are_refused_before_allocating(profile_meta, tmp_path, blob, message):
    meta, members = profile_meta
    key = _get(meta, GOLDEN + ["mask"])["__array__"]
    edited = dict(members, **{f"arrays/{key}.npy": blob})
    with pytest.raises(ProfileFormatError, match=rf"golden\.mask: array arrays/{key}\.npy: .*{message}"):
        load_profile(_write_zip(tmp_path / "npy.fgprof", edited))


def _lie_about_size(data: bytes, member: str, size: int) -> bytes:
    """The archive with ``member``'s expanded size in the central directory set to ``size``."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        i = zf.start_dir
    b = bytearray(data)
    while b[i:i + 4] == b"PK\x01\x02":  # central directory entries: sizes at 20 and 24, name at 46
        name_len, extra_len, comment_len = (int.from_bytes(b[i + k:i + k + 2], "little") for k in (28, 30, 32))
        if b[i + 46:i + 46 + name_len].decode() == member:
            b[i + 24:i + 28] = size.to_bytes(4, "little")
            return bytes(b)
        i += 46 + name_len + extra_len + comment_len
    raise AssertionError(f"no member {member}")


def test_zip_bombs_are_refused_before_expanding(profile_file, tmp_path, monkeypatch):
    data, _ = profile_file
    # A header declaring 4 GiB for a few kB: more than DEFLATE can expand (or a lying directory).
    path = tmp_path / "lying.fgprof"
    path.write_bytes(_lie_about_size(data, "fingrav.json", 2**32 - 2))
    with pytest.raises(ProfileFormatError, match="more than DEFLATE can expand|more than"):
        load_profile(path)
    # A real bomb: 32 MiB of zeros in a 32 kB member, refused by the ratio cap (lowered to keep the test small).
    members = _members(data)
    members["arrays/zz.npy"] = _npy(np.zeros(4 << 20))
    bomb = _write_zip(tmp_path / "bomb.fgprof", members)
    monkeypatch.setattr(_safe, "RATIO_FREE_BYTES", 1 << 20)
    with pytest.raises(ProfileFormatError, match=r"bomb\.fgprof: the archive's members expand to \d+ bytes"):
        load_profile(bomb)
    # A header that understates the size cannot bypass the caps: the expanded bytes are counted.
    monkeypatch.setattr(_safe, "RATIO_FREE_BYTES", 256 << 20)
    path.write_bytes(_lie_about_size(data, "fingrav.json", 100))
    with pytest.raises(ProfileFormatError, match="fingrav.json"):
        load_profile(path)


def test_a_folder_or_a_pipe_given_as_a_profile_is_named(tmp_path, profile_file):
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    with pytest.raises(ProfileFormatError, match=r"path='.*campaign': is a directory"):
        load_profile(campaign)
    (campaign / "profile.fgprof").write_bytes(profile_file[0])
    with pytest.raises(ProfileFormatError, match="the campaign's profile in it is"):
        load_profile(campaign)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.fgprof"
        os.mkfifo(fifo)
        with pytest.raises(ProfileFormatError, match="not a regular file"):
            load_profile(fifo)  # an open would wait for a writer forever
    with pytest.raises(ValueError, match="path=3: must be a file path"):
        load_profile(3)  # type: ignore[arg-type]


def test_outputs_that_are_files_or_folders_in_the_wrong_place_are_named(profile_file, tmp_path):
    prof = profile_file[1]
    taken = tmp_path / "taken"
    taken.write_text("x")
    with pytest.raises(ValueError, match=r"directory='.*taken': is an existing file, not a folder"):
        export_parquet(prof, taken)
    with pytest.raises(ValueError, match=r"directory='.*taken/sub': cannot be created"):
        export_parquet(prof, taken / "sub")
    with pytest.raises(ValueError, match=r"path='.*': is a directory; give a file name"):
        save_profile(prof, tmp_path)


# --------------------------------------------------------------------------- captures


def test_capture_limits_and_wrong_types_are_named(capture_file, tmp_path, monkeypatch):
    data, _ = capture_file
    folder = tmp_path / "capture.npz"
    folder.mkdir()
    with pytest.raises(CaptureFormatError, match=r"capture\.npz: is a directory"):
        load_capture(folder)
    members = _members(data)
    header = json.loads(np.lib.format.read_array(io.BytesIO(members["header.npy"]))[()])

    def with_header(h: Any, name: str) -> str:
        return _write_zip(tmp_path / name, dict(members, **{"header.npy": _npy(np.array(json.dumps(h)))}))

    deep: Any = 1
    for _ in range(200):
        deep = [deep]
    cases = [
        (dict(header, meta={"x": deep}), r"nests deeper than the 64 levels"),
        (dict(header, source=dict(header["source"], tick_ns="10")), r"source\.tick_ns: expected a clock's tick, a finite number"),
        (dict(header, source=dict(header["source"], channels="total")), r"source\.channels: expected a list"),
        (dict(header, source=[1]), r"source: expected an object"),
        (dict(header, stats=[1]), r"stats: expected an object"),
        (dict(header, period_ns="fast"), r"period_ns"),
        (dict(header, sensor=dict(header["sensor"], name=5)), r"sensor\.name: expected a string"),
        (dict(header, sensor=dict(header["sensor"], period_ns=None)), r"sensor\.period_ns: expected a number"),
        (dict(header, version=True), r"format version True is not a version number"),
    ]
    for h, message in cases:
        with pytest.raises(CaptureFormatError, match=message):
            load_capture(with_header(h, "h.npz"))
    # The header as an array of numbers, and a sample array whose header declares a petabyte.
    odd = _write_zip(tmp_path / "odd.npz", dict(members, **{"header.npy": _npy(np.arange(3))}))
    with pytest.raises(CaptureFormatError, match="the header is not a string"):
        load_capture(odd)
    huge = _write_zip(tmp_path / "huge.npz", dict(members, **{"samples.npy": _npy_header((2**50,), "<f8")}))
    with pytest.raises(CaptureFormatError, match=r"huge\.npz: the array 'samples': the \.npy header declares"):
        load_capture(huge)
    bomb = _write_zip(tmp_path / "bomb.npz", dict(members, **{"samples.npy": _npy(np.zeros(4 << 20))}))
    monkeypatch.setattr(_safe, "RATIO_FREE_BYTES", 1 << 20)
    with pytest.raises(CaptureFormatError, match=r"bomb\.npz: the archive's members expand"):
        load_capture(bomb)


# --------------------------------------------------------------------------- traces


def _kernel(**fields: str) -> str:
    """One kernel event as JSON text, fields given as raw JSON."""
    base = {"ph": '"X"', "cat": '"kernel"', "name": '"k"', "ts": "1", "dur": "2"}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in {**base, **fields}.items()) + "}"


@pytest.mark.parametrize(("text", "message"), [
    ('{"traceEvents": [%s]}' % _kernel(ts="1e999999999"),
     r"event 0 has ts=Decimal\('1E\+999999999'\); expected microseconds that fit int64"),
    ('{"baseTimeNanoseconds": %d, "traceEvents": []}' % 2**70, r"baseTimeNanoseconds=\d+; expected an integer"),
    ('{"baseTimeNanoseconds": "soon", "traceEvents": []}', r"baseTimeNanoseconds='soon'"),
    ('{"baseTimeNanoseconds": %d, "traceEvents": [%s]}' % (2**63 - 10, _kernel()), r"does not fit int64 ns"),
    ('{"traceEvents": [%s]}' % _kernel(name='["k", "k", "k"]'), r"kernel event 0 has name=a list of 3 items"),
    ('{"traceEvents": [%s]}' % _kernel(args='{"grid": [%d]}' % 2**64), r"args\.grid=a list of 1 items"),
    ('{"traceEvents": [%s]}' % _kernel(args='{"device": 0.5}'), r"args\.device=Decimal\('0\.5'\); expected an integer"),
    ('{"traceEvents": [%s]}' % _kernel(args='{"stream": %d}' % 2**64), r"args\.stream=\d+; expected an integer"),
])
def test_numbers_that_do_not_fit_and_wrong_types_in_traces_are_named(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=rf"trace='.*bad\.json': .*{message}"):
        read_kineto_trace(path)


def test_optional_trace_context_that_is_malformed_is_left_out(tmp_path):
    events = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 10, "dur": 2, "args": {"correlation": 1}},
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + "9" * 5000, "ts": 0, "dur": 50},
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#\u00b2", "ts": 0, "dur": 50},
              {"ph": "X", "cat": ["cuda_runtime"], "name": {"a": 1}, "ts": 5, "dur": 1},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 5, "dur": 1,
               "args": {"correlation": 2**80}}]
    path = tmp_path / "ctx.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = read_kineto_trace(path)
    assert len(t) == 1 and len(t.steps) == 0 and t.launch_ns.tolist() == [np.iinfo(np.int64).min]


def test_trace_files_that_are_not_files_bombs_or_deep_are_named(tmp_path, monkeypatch):
    folder = tmp_path / "trace.json"
    folder.mkdir()
    with pytest.raises(TraceFormatError, match=r"trace='.*trace\.json': is a directory"):
        read_kineto_trace(folder)
    with pytest.raises(TraceFormatError, match=r"trace='.*trace\.json': is a directory"):
        read_rocprof_kernel_trace(folder)
    with pytest.raises(TraceFormatError, match=r"no such file"):
        read_kineto_trace(tmp_path / "absent.json")
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb") as f:
        f.write(b" " * (4 << 20))
    monkeypatch.setattr("fingrav_native.files._kineto.MAX_TRACE_BYTES", 1 << 20)
    with pytest.raises(TraceFormatError, match=r"bomb\.json\.gz': expands past 1048576 bytes"):
        read_kineto_trace(bomb)
    deep = tmp_path / "deep.json"
    for text, message in ((b"[" * 100_000 + b"]" * 100_000, r"deep\.json': the file: nests deeper than the JSON"),
                          (b"\xff\xfe{}", r"not JSON"),
                          (b"\x1f\x8b\x08\x00garbage", r"not JSON")):
        deep.write_bytes(text)
        with pytest.raises(TraceFormatError, match=message):
            read_kineto_trace(deep)
    # Nesting where the reader does not look is left alone (a trace is not walked: millions of nodes);
    # where it looks, the field is named.
    nested: Any = 1
    for _ in range(500):
        nested = [nested]
    events = [json.loads(_kernel()), {"ph": "X", "cat": "cpu_op", "args": nested}]
    deep.write_text(json.dumps({"traceEvents": events}))
    assert len(read_kineto_trace(deep)) == 1
    deep.write_text(json.dumps({"traceEvents": [json.loads(_kernel(ts=json.dumps(nested)))]}))
    with pytest.raises(TraceFormatError, match=r"kernel event 0 has ts=a list of 1 items"):
        read_kineto_trace(deep)
    gz = tmp_path / "damaged.json.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 40)
    with pytest.raises(TraceFormatError, match=r"damaged\.json\.gz': cannot read it"):
        read_kineto_trace(gz)


@pytest.mark.parametrize(("row", "message"), [
    ('"KERNEL_DISPATCH",4,1,1,"k",1000,' + "9" * 30 + ",1,1,1,1,1,1",
     r"row 0 has End_Timestamp='9+'; expected an integer that fits int64"),
    ('"KERNEL_DISPATCH",4,1,1,"k",1000,1_000_000,1,1,1,1,1,1', r"row 0 has End_Timestamp='1_000_000'"),
    ('"KERNEL_DISPATCH",4,1,1', r"row 0 has no Start_Timestamp"),
    ('"KERNEL_DISPATCH",4,1,1,"k",1000,2000,1,1,1,' + "7" * 200_000 + ",1,1", r"not a CSV file"),
])
def test_malformed_rocprof_rows_are_named(tmp_path, row, message):
    path = tmp_path / "k_kernel_trace.csv"
    path.write_text(ROCPROF.splitlines()[0] + "\n" + row + "\n")
    with pytest.raises(TraceFormatError, match=rf"trace='.*k_kernel_trace\.csv': {message}"):
        read_rocprof_kernel_trace(path)


def test_every_annotation_in_the_class_table_is_one_the_loader_checks():
    """A field of a new kind (a set, a Literal) would otherwise meet no check; the table is walked here."""
    from fingrav_native.files._profile_schema import CLASSES as _CLASSES

    def supported(tp: Any) -> bool:
        origin = typing.get_origin(tp)
        if tp in (Any, type(None), bool, int, float, str, np.ndarray) or origin is np.ndarray:
            return True
        if origin is typing.Union or type(tp).__name__ == "UnionType":
            return all(supported(a) for a in typing.get_args(tp))
        if origin is tuple:
            args = typing.get_args(tp)
            return all(supported(a) for a in args if a is not Ellipsis)
        if origin is list:
            return supported(typing.get_args(tp)[0])
        if origin is dict:
            key, value = typing.get_args(tp)
            return key is str and supported(value)
        return isinstance(tp, type) and _CLASSES.get(tp.__name__) is tp

    for cls in _CLASSES.values():
        for name, tp in typing.get_type_hints(cls).items():
            assert supported(tp), f"{cls.__name__}.{name}: {tp}"
