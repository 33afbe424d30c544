"""Trace export: the trace-event structure Perfetto and chrome://tracing read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fingrav_native import profile
from fingrav_native.backends import SimBackend
from fingrav_native.files import export_trace, load_profile, save_profile, trace_events


@pytest.fixture(scope="module")
def prof():
    return profile("cb-4k-gemm", SimBackend(seed=3), mode="both", runs=20, executions=12, top_up=False)


def test_structure(prof, tmp_path):
    path = export_trace(prof, tmp_path / "t.json")
    with open(path) as f:
        doc = json.load(f)  # strict JSON: no NaN tokens
    ev = doc["traceEvents"]
    assert doc["displayTimeUnit"] == "ns"
    for e in ev:
        assert e["ph"] in {"M", "X", "C", "i"}
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], float) and e["ts"] >= -1e6
    tl = prof.timeline
    slices = [e for e in ev if e["ph"] == "X"]
    assert len(slices) == len(tl.executions)
    assert all(e["dur"] > 0 for e in slices)
    # The earliest execution is the origin.
    assert min(e["ts"] for e in slices) == 0.0
    # One thread per run, named, golden runs tagged.
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    runs = np.unique(tl.executions["run"])
    for r in runs:
        assert names[int(r) + 1].startswith(f"run {int(r)}")
    assert sum("(golden)" in n for n in names.values()) == len(tl.golden_runs)
    # Slices of a run are its executions, in order and without overlap.
    for r in runs:
        mine = sorted((e for e in slices if e["tid"] == int(r) + 1), key=lambda e: e["ts"])
        assert [e["args"]["index"] for e in mine] == list(range(len(mine)))
        for a, b in zip(mine, mine[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-3
    # A counter track per channel the logger has, one point per log.
    counters = [e for e in ev if e["ph"] == "C"]
    for ch in ("total", "compute", "io", "memory"):
        pts = [e for e in counters if e["name"] == f"power {ch} (W)"]
        assert len(pts) == int(np.isfinite(tl.logs[ch]).sum())
    # Every LOI is marked on its run's thread at its host time.
    lois = [e for e in ev if e["ph"] == "i"]
    assert len(lois) == sum(len(p.lois) for p in prof.profiles.values())
    origin = doc["otherData"]["origin_host_ns"]
    for label, p in prof.profiles.items():
        mine = [e for e in lois if e["name"] == f"LOI {label}"]
        assert len(mine) == len(p.lois)
        got = sorted((e["tid"] - 1, e["ts"]) for e in mine)
        want = sorted((int(r), (h - origin) / 1e3) for r, h in zip(p.lois["run"], p.lois["host_ns"]))
        np.testing.assert_allclose(np.array(got), np.array(want))


def test_survives_a_file_round_trip(prof, tmp_path):
    back = load_profile(save_profile(prof, tmp_path / "p.fgprof"))
    assert trace_events(back) == trace_events(prof)


def test_errors(prof):
    with pytest.raises(ValueError, match="profile: expected a Profile"):
        trace_events("nope")  # type: ignore[arg-type]
    import dataclasses
    bare = dataclasses.replace(prof, timeline=None)
    with pytest.raises(ValueError, match="carries no timeline"):
        trace_events(bare)
