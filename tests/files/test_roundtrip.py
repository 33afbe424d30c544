"""Every file the package writes loads back: one hypothesis-driven round trip per writer.

For each writer, hypothesis builds what it is given, including what a
writer meets in the field and a reader refuses: NaN and infinities, numpy
scalars, tuples, non-string and colliding keys, the profile format's own
reserved keys, deep nesting, unicode of every plane, arrays of every dtype.
The property: the writer refuses up front (a ValueError, or the TypeError a
profile documents for what it cannot store) and writes nothing, or the
reader gives back exactly what was written, as its documented conversions
(JSON: tuples as lists, numpy scalars as numbers, keys as strings) make it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import tempfile
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fingrav_native import SAMPLE_DTYPE, profile
from fingrav_native.app._cli_files import _summary, summary_json
from fingrav_native.backends import SimBackend
from fingrav_native.files import (
    PowerCapture,
    load_campaign_runs,
    load_capture,
    load_characterisation,
    load_profile,
    read_manifest,
    save_characterisation,
    save_profile,
    write_manifest,
    write_run,
)
from fingrav_native.files._io import load_recording, save_recording
from fingrav_native.files._outputs import json_scalar
from fingrav_native.files._parquet import export_parquet
from fingrav_native.files._trace import export_trace
from fingrav_native.sensors import SENSOR_PRESETS, SensorModel
from fingrav_native.sensors._characterize import Characterisation, PeriodEstimate
from fingrav_native.sensors._response_fit import StepFit

EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.data_too_large])

# --- what writers are given ----------------------------------------------------------------------------------

# Every plane; lone surrogates, NUL and astral characters also on purpose (hypothesis draws them rarely).
texts = st.one_of(st.text(st.characters(exclude_categories=()), max_size=12),
                  st.sampled_from(["\ud800", "a\udfffb", "\x00", "x\x00y", "\u00e9", "\U0001d11e", " "]))
floats = st.floats(allow_nan=True, allow_infinity=True)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), floats, texts,
                    st.integers(-2**31, 2**31).map(np.int64), st.floats(width=32).map(np.float32), st.booleans().map(np.bool_),
                    st.integers(4400, 4500).map(lambda e: 10 ** e))
keys = st.one_of(texts, st.sampled_from(["__float__", "__array__", "__tuple__", "__class__"]),
                 st.integers(0, 3))
json_like = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(keys, inner, max_size=4)), max_leaves=12)
json_dicts = st.dictionaries(keys, json_like, max_size=5)


def deep(levels: int) -> Any:
    node: Any = 1
    for _ in range(levels):
        node = {"x": node}
    return node


json_dicts = st.one_of(json_dicts, st.integers(55, 70).map(lambda n: {"deep": deep(n)}))


def as_json(value: Any) -> Any:
    """What JSON gives back for ``value``: tuples as lists, numpy scalars as numbers (NaN stays NaN)."""
    return json.loads(json.dumps(value, default=json_scalar, allow_nan=True))


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, types too (1 is not 1.0 is not True)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return bool(a == b)


def nothing_written(folder: str) -> bool:
    return os.listdir(folder) == []


# --- PowerCapture.save / load_capture ------------------------------------------------------------------------

sources = st.fixed_dictionaries({
    "name": st.one_of(texts, st.integers()), "clock_domain": st.sampled_from(["host-monotonic-raw", "nvml-host-us",
                                                                              "sim-logger"]),
    "tick_ns": st.one_of(st.floats(0.5, 1e3), floats), "native_period_ns": st.integers(0, 10**7),
    "window_ns": st.integers(0, 10**7), "channels": st.lists(st.one_of(texts, st.integers()), max_size=4)})
def renamed(name: object) -> SensorModel:
    """The instant preset with any ``name``: SensorModel refuses a non-string one, so it is set past the check
    (a model changed after it was built); the writer must still refuse what the reader would."""
    model = dataclasses.replace(SENSOR_PRESETS["instant-1ms"])
    object.__setattr__(model, "name", name)
    return model


sensors = st.one_of(st.none(), st.sampled_from(sorted(SENSOR_PRESETS)).map(lambda k: SENSOR_PRESETS[k]),
                    st.builds(renamed, st.one_of(st.integers(), st.none(), texts)))


@EXAMPLES
@given(source=sources, sensor=sensors, stats=json_dicts, meta=json_dicts, n=st.integers(0, 40),
       brackets=hnp.arrays(np.int64, st.tuples(st.integers(1, 5), st.just(3))), period=st.integers(1, 10**9),
       raw=st.binary(min_size=SAMPLE_DTYPE.itemsize * 40, max_size=SAMPLE_DTYPE.itemsize * 40),
       power=st.lists(st.floats(0.0, 2_000.0, width=32), min_size=40, max_size=40))
def test_every_capture_saved_loads_back(source, sensor, stats, meta, n, brackets, period, raw, power):
    samples = np.frombuffer(raw, dtype=SAMPLE_DTYPE)[:n].copy()
    # Random bytes are rarely a power (a capture refuses NaN, negative and absurd logs): the channels get
    # powers, every other field stays arbitrary.
    for channel in ("total", "compute", "io", "memory"):
        samples[channel] = power[:n]
    try:
        cap = PowerCapture(samples=samples, epoch_brackets=brackets, source=source, sensor=sensor,
                           period_ns=period, stats=stats, meta=meta)
    except ValueError:
        assume(False)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "power.npz")
        try:
            cap.save(path)
        except ValueError:
            assert nothing_written(folder)
            return
        back = load_capture(path)  # never a CaptureFormatError for a file the package wrote
    assert back.samples.tobytes() == cap.samples.tobytes()
    np.testing.assert_array_equal(back.epoch_brackets, cap.epoch_brackets)
    assert back.period_ns == period and back.sensor == sensor
    for field in ("source", "stats", "meta"):
        assert same(getattr(back, field), as_json(getattr(cap, field))), field


def test_a_capture_load_capture_would_refuse_is_not_written(tmp_path):
    # A NaN in meta, a non-string sensor name: written, then refused by load_capture.
    source = {"name": "s", "clock_domain": "host-monotonic-raw", "tick_ns": 1.0, "native_period_ns": 0,
              "window_ns": 0, "channels": ["total"]}
    base = dict(samples=np.zeros(2, SAMPLE_DTYPE), epoch_brackets=np.zeros((2, 3), np.int64), source=source,
                sensor=None, period_ns=1000, stats={}, meta={})
    cases = {"meta['drift']: nan is not a finite number": dict(meta={"drift": float("nan")}),
             "sensor.name: expected a string": dict(sensor=renamed(7)),
             "stats: key 1 is not a string": dict(stats={1: 2}),
             "nests deeper than the 63 levels": dict(meta=deep(64))}
    for message, change in cases.items():
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
            PowerCapture(**{**base, **change}).save(tmp_path / "c.npz")
        assert not os.listdir(tmp_path)
    PowerCapture(**{**base, "meta": {"x": np.float32(0.5), "t": (1, 2)}}).save(tmp_path / "c.npz")
    assert load_capture(tmp_path / "c.npz").meta == {"x": 0.5, "t": [1, 2]}


# --- save_profile / load_profile, and what is exported from a profile -------------------------------------------


@functools.lru_cache(maxsize=None)
def _small_profile():
    # Built once, outside the tests' arguments: hypothesis would print all of it with every failing example.
    return profile("cb-4k-gemm", SimBackend(seed=2), mode="sse", runs=8, top_up=False)


@pytest.fixture
def small_profile():
    return _small_profile()


@EXAMPLES
@given(extra=json_dicts, kernel=texts)
def test_every_profile_saved_loads_back_and_exports(extra, kernel):
    small_profile = _small_profile()
    prof = dataclasses.replace(small_profile, settings={**small_profile.settings, "extra": extra},
                               kernel=kernel or "k")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "p.fgprof")
        try:
            save_profile(prof, path)
        except (ValueError, TypeError):
            assert nothing_written(folder)
            return
        back = load_profile(path)  # never a ProfileFormatError for a file the package wrote
        assert back.kernel == prof.kernel
        assert same(as_tree(back.settings["extra"]), as_tree(extra))
        # The exports of what was loaded are standard JSON that loads back.
        trace = export_trace(back, os.path.join(folder, "t.json"))
        with open(trace, encoding="utf-8") as f:
            assert json.load(f)["traceEvents"]
        text = json.dumps(summary_json(_summary(back)), allow_nan=False)
        assert json.loads(text)["kernel"] == prof.kernel
        tables = export_parquet(back, os.path.join(folder, "tables"))
        import pyarrow.parquet as pq

        lois = pq.read_table(os.path.join(folder, "tables", "lois_sse.parquet"))
        assert len(tables) == 4 and lois.num_rows == len(back.profiles["sse"].lois)
        assert lois.schema.metadata[b"fingrav.kernel"] == prof.kernel.encode("utf-8", "backslashreplace")


def as_tree(value: Any) -> Any:
    """A profile's settings as the format keeps them: tuples stay tuples, numpy scalars become numbers."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: as_tree(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(as_tree(v) for v in value)
    if isinstance(value, list):
        return [as_tree(v) for v in value]
    return value


def test_a_profile_that_would_not_load_is_not_written(small_profile, tmp_path):
    # A dict with the format's own key read back as a NaN float; nesting past 64 written, then refused.
    for extra, error, message in (({"x": {"__float__": "nan"}}, TypeError, "reserved by the profile format"),
                                  ({"x": deep(70)}, ValueError, "nests deeper than the 64 levels")):
        prof = dataclasses.replace(small_profile, settings={**small_profile.settings, "extra": extra})
        with pytest.raises(error, match=message):
            save_profile(prof, tmp_path / "p.fgprof")
        assert not os.listdir(tmp_path)


# --- campaign run files and campaign.json -------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _a_run():
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "c")
        profile("cb-4k-gemm", SimBackend(seed=1), mode="sse", runs=4, top_up=False, out_dir=out)
        return load_campaign_runs(out)[1].record


@pytest.fixture
def a_run():
    return _a_run()


meta_arrays = hnp.arrays(st.sampled_from([np.dtype(t) for t in ("int8", ">u8", "float32", "<c8", "bool", "<U3",
                                                                 "datetime64[ns]")]),
                         hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
metas = st.dictionaries(keys, st.one_of(json_like, meta_arrays), max_size=5)


@EXAMPLES
@given(meta=metas, kernel=texts, steer=st.one_of(st.none(), st.fixed_dictionaries(
    {"now_ns": st.floats(0, 1e18), "release_ns": st.one_of(st.none(), st.floats(0, 1e18))})))
def test_every_run_file_written_reads_back(meta, kernel, steer):
    rec = dataclasses.replace(_a_run(), meta=meta)
    with tempfile.TemporaryDirectory() as out:
        try:
            write_run(out, 0, "campaign", kernel, rec, campaign_id="c0ffee", steer=steer)
        except ValueError:
            assert not os.path.exists(os.path.join(out, "runs", "run_000000.npz"))
            return
        (got,) = load_campaign_runs(out, campaign_id="c0ffee")
    assert (got.seq, got.role, got.kernel, got.campaign_id) == (0, "campaign", kernel, "c0ffee")
    assert got.steer == steer
    for name in ("samples", "markers", "brackets"):
        assert getattr(got.record, name).tobytes() == getattr(rec, name).tobytes()
    expected = {str(k): v if isinstance(v, np.ndarray) else as_json(_jsonable(v)) for k, v in meta.items()}
    assert same(got.record.meta, expected)


def _jsonable(value: Any) -> Any:
    """The run file's documented conversion (files/_campaign.py): other objects as their repr."""
    from fingrav_native.files._campaign import _jsonable as convert

    return convert(value)


def test_two_meta_keys_that_write_alike_are_refused(a_run, tmp_path):
    with pytest.raises(ValueError, match=r"key '1' writes as '1', as another key"):
        write_run(str(tmp_path), 0, "campaign", "k", dataclasses.replace(a_run, meta={1: 1.0, "1": 2.0}))
    with pytest.raises(ValueError, match="as another key"):
        write_run(str(tmp_path), 0, "campaign", "k", dataclasses.replace(a_run, meta={"m": {2: 1, "2": 2}}))


@EXAMPLES
@given(settings_=json_dicts, kernel=texts, runs=st.integers(0, 10**6),
       state=st.sampled_from(["running", "interrupted", "complete"]))
def test_every_manifest_written_reads_back(settings_, kernel, runs, state):
    manifest = {"kernel": kernel, "backend": {"name": "sim", "device": "d"}, "settings": settings_,
                "state": state, "runs": runs, "campaign_id": "abc"}
    with tempfile.TemporaryDirectory() as out:
        try:
            write_manifest(out, manifest)
        except ValueError:
            assert not os.path.exists(os.path.join(out, "campaign.json"))
            return
        back = read_manifest(out)  # never a CampaignFormatError for a manifest the package wrote
    assert same(back["settings"], as_json(_jsonable(settings_)))
    assert (back["kernel"], back["runs"], back["state"]) == (kernel, runs, state)


# --- characterisation files ---------------------------------------------------------------------------------------

numbers = st.floats(allow_nan=True, allow_infinity=True)


@EXAMPLES
@given(sensor=st.sampled_from(sorted(SENSOR_PRESETS)).map(lambda k: SENSOR_PRESETS[k]),
       period=st.builds(PeriodEstimate, numbers, numbers, numbers, st.integers(0, 10**6), st.integers(0, 10**6),
                        st.integers(0, 10**6)),
       step=st.one_of(st.none(), st.builds(StepFit, st.sampled_from(["boxcar", "first_order"]),
                                           *[numbers] * 11, st.integers(0, 10**6))),
       quantum=numbers, device=texts, notes=texts)
def test_every_characterisation_saved_loads_back(sensor, period, step, quantum, device, notes):
    c = Characterisation(sensor=sensor, period=period, step=step, quantum=quantum, device=device, notes=notes)
    with tempfile.TemporaryDirectory() as folder:
        path = save_characterisation(c, os.path.join(folder, "s.json"))
        back = load_characterisation(path)
    assert same(as_json(back.as_dict()), as_json(c.as_dict()))


# --- recordings ------------------------------------------------------------------------------------------------------


@EXAMPLES
@given(provenance=st.dictionaries(keys, st.one_of(json_like, meta_arrays), max_size=4), source=json_dicts)
def test_every_recording_saved_loads_back(provenance, source):
    rec = dataclasses.replace(_a_run().to_recording(), provenance=provenance, source=source)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "r.npz")
        try:
            save_recording(rec, path)
        except ValueError:
            assert nothing_written(folder)
            return
        back = load_recording(path)  # never a RecordingFormatError for a file the package wrote
    assert same(dict(back.source), as_json(source))
    expected = {k: v if isinstance(v, np.ndarray) else as_json(v) for k, v in provenance.items()}
    assert same(dict(back.provenance), expected)
    assert back.samples.tobytes() == rec.samples.tobytes()


def test_sensor_model_presets_survive_a_capture_header(tmp_path):
    # Every preset as a capture's sensor: the reader's type checks agree with what the writer writes.
    source = {"name": "s", "clock_domain": "host-monotonic-raw", "tick_ns": 1.0, "native_period_ns": 0,
              "window_ns": 0, "channels": ["total"]}
    for name, sensor in SENSOR_PRESETS.items():
        assert isinstance(sensor, SensorModel)
        cap = PowerCapture(np.zeros(1, SAMPLE_DTYPE), np.zeros((1, 3), np.int64), source, sensor, 1000, {}, {})
        assert load_capture(cap.save(tmp_path / f"{name}.npz")).sensor == sensor


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_silently_wrong_a_non_finite_setting_reads_back_from_strict_json(value, tmp_path):
    # campaign.json is strict JSON (no bare NaN), yet a resume compares the settings it reads back: a
    # setting of inf written as null changed the campaign. Written tagged, read back as the float.
    settings_ = {"max_power_w": value, "nested": [value, 1.0], "text": "NaN"}
    write_manifest(str(tmp_path), {"kernel": "k", "backend": {"name": "sim", "device": "d"}, "settings": settings_,
                                   "state": "running", "runs": 0, "campaign_id": "abc"})
    raw = (tmp_path / "campaign.json").read_text()
    json.loads(raw, parse_constant=lambda c: pytest.fail(f"bare {c} in campaign.json"))
    assert same(read_manifest(str(tmp_path))["settings"], settings_)
