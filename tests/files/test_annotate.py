"""The power written back into real Kineto traces: every event kept, energies in args, counter tracks.

The traces are real ones others recorded (``traces/`` of the real-data folder, tests/real_data.py), with the
synthetic power logs of tests/insitu/test_real_traces.py (no power was recorded with them). Each annotated
copy is read back by the package's reader (the same kernels) and by plain json (every original event the same
value, only args keys added; counters under the GPU's pid; the energies the table's).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
from decimal import Decimal

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native.files import _annotate as ann
from fingrav_native.files import annotate_trace, read_trace
from fingrav_native.insitu import TraceFormatError
from fingrav_native.sim import EpochIdentity
from real_data import require
from sim_captures import synthetic_logs as _logs

#: Kineto traces the reader reads, with the min_executions that profiles something in each.
TRACES = {
    "hta/nccl_data.ProfilerStep5.json.gz": 20,
    "hta/sampled_rank-0.json.gz": 2,
    "kineto/gpu_metrics_input.json": 2,
    "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz": 20,
}




@functools.lru_cache(maxsize=None)
def _profile(name: str):
    # One profile per trace, read-only in every test: the annotation of each output form reads the same one.
    path = require(f"traces/{name}")
    kt = read_trace(path)
    return path, profile_trace(kt, _logs(kt), EpochIdentity(), align=False, min_executions=TRACES[name])


def _load(path) -> dict:
    op = gzip.open if str(path).endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=Decimal)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("name", sorted(TRACES))
def test_a_real_trace_is_annotated_with_every_event_kept(name, suffix, tmp_path) -> None:
    path, tp = _profile(name)
    out = annotate_trace(path, tp, tmp_path / f"annotated{suffix}")
    with open(out, "rb") as f:
        assert (f.read(2) == b"\x1f\x8b") == suffix.endswith(".gz")
    before, after = _load(path), _load(out)
    ev_in, ev_out = before["traceEvents"], after["traceEvents"]
    # Every original event, in order, the same value but for the added args keys.
    added = 0
    for a, b in zip(ev_in, ev_out):
        extra = {k: v for k, v in b.get("args", {}).items() if k.startswith("fingrav_")} if isinstance(b, dict) else {}
        if extra:
            added += 1
            b = dict(b, args={k: v for k, v in b["args"].items() if k not in extra})
            if "args" not in a and not b["args"]:
                b.pop("args")
        assert a == b
    assert added > 0
    # The top-level keys kept, one added.
    assert {k: v for k, v in after.items() if k not in ("traceEvents", "fingrav")} == \
        {k: v for k, v in before.items() if k != "traceEvents"}
    # Counters: one per log, under the profiled GPU's pid, at the logs' times on the trace's clock.
    counters = ev_out[len(ev_in):]
    assert len(counters) == int(np.isfinite(tp.logs["total"]).sum())
    assert all(c["ph"] == "C" and c["name"] == "fingrav power total (W)" for c in counters)
    kernels = [e for e in ev_in if isinstance(e, dict) and e.get("ph") == "X"
               and str(e.get("cat", "")).lower() == "kernel"]
    assert {c["pid"] for c in counters} == {kernels[0]["pid"]}
    base = int(before.get("baseTimeNanoseconds", 0))
    ts_ns = np.array([int(Decimal(c["ts"]) * 1000) for c in counters])
    np.testing.assert_array_equal(ts_ns, tp.trace.origin_ns - base + np.rint(tp.logs["t_ns"]).astype(np.int64))
    np.testing.assert_allclose([float(c["args"]["power_w"]) for c in counters], tp.logs["total"], rtol=1e-6)
    # The energies are the table's, on the table's signature.
    rows = {tuple(r["grid"]) + tuple(r["block"]) + (str(r["name"]),): i for i, r in enumerate(tp.kernels)}
    for e in ev_out[:len(ev_in)]:
        a = e.get("args", {}) if isinstance(e, dict) else {}
        if "fingrav_row" in a:
            r = tp.kernels[a["fingrav_row"]]
            for key in ("energy_j", "power_w", "energy_half_width_j"):
                got, want = a[f"fingrav_{key}"], float(r[key])
                # A figure the table does not resolve (NaN) is null: JSON has no NaN.
                assert (got is None) if not np.isfinite(want) else float(got) == pytest.approx(want, rel=1e-12)
            key = tuple(a.get("grid", [-1, -1, -1])) + tuple(a.get("block", [-1, -1, -1])) + (e["name"],)
            assert rows.get(key, a["fingrav_row"]) == a["fingrav_row"]
    assert after["fingrav"]["kernel_events_annotated"] == added - sum(
        1 for e in ev_out[:len(ev_in)] if isinstance(e, dict) and "fingrav_note" in e.get("args", {}))
    # Our reader reads the same kernels from it.
    again = read_trace(out)
    k0, k1 = read_trace(path), again
    assert np.array_equal(k0.executions, k1.executions) and np.array_equal(k0.signatures, k1.signatures)
    assert np.array_equal(k0.steps, k1.steps) and k0.origin_ns == k1.origin_ns


def test_args_anywhere_in_an_event_and_nested_args_are_found(tmp_path) -> None:
    # Kineto writes args last; another writer may not, and an args object may hold a key "args" itself.
    path, tp = _profile("kineto/gpu_metrics_input.json")
    with open(path) as f:
        doc = json.load(f)
    kernels = [i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "Kernel"]
    for i in kernels[::2]:
        e = doc["traceEvents"][i]
        doc["traceEvents"][i] = {"args": e["args"], **{k: v for k, v in e.items() if k != "args"}}
    doc["traceEvents"][kernels[1]]["args"]["args"] = {"x": 1}
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(doc, indent=2))
    out = annotate_trace(moved, tp, tmp_path / "out.json")
    got = _load(out)["traceEvents"]
    for i in kernels:
        a = got[i]["args"]
        extra = [k for k in a if k.startswith("fingrav_")]
        assert extra and {k: v for k, v in a.items() if k not in extra} == json.loads(
            json.dumps(doc["traceEvents"][i]["args"]), parse_float=Decimal)
    assert got[kernels[1]]["args"]["args"] == {"x": 1}


def test_chunk_boundaries_anywhere_give_the_same_bytes(tmp_path, monkeypatch) -> None:
    name = "kineto/gpu_metrics_input.json"
    path, tp = _profile(name)
    whole = annotate_trace(path, tp, tmp_path / "whole.json")
    monkeypatch.setattr(ann, "_CHUNK", 7)  # a chunk ends inside keys, numbers, strings and escapes
    small = annotate_trace(path, tp, tmp_path / "small.json")
    with open(whole, "rb") as a, open(small, "rb") as b:
        assert a.read() == b.read()


def test_the_bare_array_form_and_a_missing_args_object(tmp_path) -> None:
    name = "kineto/gpu_metrics_input.json"
    path, tp = _profile(name)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))
    with open(annotate_trace(bare, tp, tmp_path / "out.json")) as f:
        got = json.load(f)
    assert isinstance(got, list) and len(got) > len(events) and got[-1]["ph"] == "C"
    assert any("fingrav_row" in e.get("args", {}) for e in got[:len(events)])
    # A kernel event without args (one of a signature run once) gets an args object of its own, the rest kept.
    k = next(i for i, e in enumerate(got[:len(events)]) if "fingrav_note" in e.get("args", {}))
    events[k] = {key: v for key, v in events[k].items() if key != "args"}
    bare.write_text(json.dumps(events))
    kt = read_trace(bare)  # that kernel now has no device (-1): profile device 0
    tp2 = profile_trace(kt, _logs(kt), EpochIdentity(), align=False, min_executions=2, device=0)
    with open(annotate_trace(bare, tp2, tmp_path / "out2.json")) as f:
        got = json.load(f)
    assert got[k] == dict(events[k], args={"fingrav_note": "on another device than the power logs' (device 0): "
                                                           "not profiled"})


def test_the_output_is_checked_before_any_work(tmp_path, monkeypatch) -> None:
    path, tp = _profile("kineto/gpu_metrics_input.json")
    (tmp_path / "dir").mkdir()
    (tmp_path / "taken.json").write_text("{}")
    for out, match in ((tmp_path / "dir", "is a folder"), (tmp_path / "no" / "x.json", "does not exist"),
                       (tmp_path / "taken.json", "exists; choose another name or replace it"), (path, "is the trace")):
        with pytest.raises(ValueError, match=match):
            ann.check_annotation_out(path, out)
    with pytest.raises(ValueError, match="is the trace itself"):
        annotate_trace(path, tp, path, overwrite=True)
    assert annotate_trace(path, tp, tmp_path / "taken.json", overwrite=True)
    monkeypatch.setattr(ann.os, "access", lambda p, mode: False)
    with pytest.raises(ValueError, match="--annotate='.*': its folder .* is not writable"):
        ann.check_annotation_out(path, tmp_path / "new.json", name="--annotate")
    with pytest.raises(ValueError, match="not a torch.profiler"):
        ann.check_annotation_out(require("traces/rocprofv3/kernel_trace.csv"), tmp_path / "x.json")


def test_a_profile_of_another_trace_or_an_annotated_trace_is_refused(tmp_path) -> None:
    path, tp = _profile("kineto/gpu_metrics_input.json")
    other = require("traces/hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    with pytest.raises(ValueError, match="the profile was made from another trace"):
        annotate_trace(other, tp, tmp_path / "x.json")
    assert not os.listdir(tmp_path)  # nothing left behind
    once = annotate_trace(path, tp, tmp_path / "once.json")
    with pytest.raises(ValueError, match="annotated already"):
        annotate_trace(once, tp, tmp_path / "twice.json")
    cut = tmp_path / "cut.json"
    with open(path, "rb") as f:
        cut.write_bytes(f.read()[:-200])
    with pytest.raises(TraceFormatError, match="truncated"):
        annotate_trace(cut, tp, tmp_path / "cut_out.json")
    assert sorted(os.listdir(tmp_path)) == ["cut.json", "once.json"]
