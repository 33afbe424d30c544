"""In-situ profiling of a rocprofv3 run: its three output formats, its clock, its agents.

A training loop on the simulated GPU is written as rocprofv3 writes a run
(kernel_trace.csv with its agent_info.csv, --output-format json, a rocpd
database), with timestamps on a simulated CLOCK_BOOTTIME days away from both
the epoch clock and the host's raw clock, beside the power capture a
recorder saves (which brackets CLOCK_BOOTTIME). profile_trace and
`fingrav trace` must give one table from the three, against the truth; a
capture that does not bracket CLOCK_BOOTTIME is refused, saying how to get
one that does.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import warnings

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native.app import _cli as cli
from fingrav_native.app import simulate_training_loop
from fingrav_native.files import (
    CAPTURE_FORMAT,
    PowerCapture,
    load_capture,
    read_rocprof_kernel_trace,
    read_trace,
    write_rocprof_trace,
)
from fingrav_native.insitu import ClockMismatchWarning, TraceFormatError
from sim_captures import host_stamped_capture as _host_stamped

FORMATS = (("csv", "4242_kernel_trace.csv"), ("json", "4242_results.json"), ("rocpd", "4242_results.db"))


@pytest.fixture(scope="module")
def loop():
    return simulate_training_loop(400, seed=2, pause_every=25)


@pytest.fixture(scope="module")
def session(loop, tmp_path_factory):
    """The loop written in the three formats, and its capture saved (format version 2)."""
    d = tmp_path_factory.mktemp("rocprof")
    paths = {fmt: loop.write_rocprof_trace(d / name, fmt) for fmt, name in FORMATS}
    return paths, loop.capture().save(d / "power.npz"), d


def _v1_capture_file(capture: PowerCapture, path) -> str:
    """The capture as fingrav_native wrote it before format version 2: CLOCK_REALTIME brackets only."""
    header = {"format": CAPTURE_FORMAT, "version": 1, "source": capture.source,
              "sensor": None if capture.sensor is None else capture.sensor.as_dict(), "period_ns": capture.period_ns,
              "stats": capture.stats, "meta": dict(capture.meta, fingrav_native_version="0.4.0")}
    np.savez(path, samples=capture.samples, epoch_brackets=capture.epoch_brackets, header=np.array(json.dumps(header)))
    return str(path)


def test_the_three_rocprofv3_formats_give_one_table_against_the_truth(loop, session, tmp_path, capsys):
    paths, capture_path, _ = session
    capture = load_capture(capture_path)
    tables = {}
    for fmt, path in paths.items():
        kt = read_trace(path)
        # CLOCK_BOOTTIME, days from the host's raw clock and decades from the epoch clock.
        assert kt.clock == "CLOCK_BOOTTIME" and kt.device.tolist() == [0] * len(kt)
        assert kt.origin_ns == int(loop.to_clock(loop.executions["start_ns"][:1], "CLOCK_BOOTTIME")[0])
        assert 3 * 86_400e9 < kt.origin_ns - int(loop.executions["start_ns"][0]) < 4 * 86_400e9
        tp = profile_trace(path, capture, min_executions=50)
        assert not tp.warnings and tp.alignment is not None and tp.alignment_applied
        assert "a rocprofv3 kernel trace marks none" in str(tp)
        k = tp.kernels
        assert sorted(zip(k["name"].tolist(), k["grid"][:, 0].tolist())) == [("gemm", 32), ("gemm", 128),
                                                                            ("gemv", 64)]
        for row, ep in zip(k, tp.profiles):
            assert row["energy_j"] == pytest.approx(loop.truth_energy_j(ep.golden.run_ids), rel=0.06), (fmt, row)
        tables[fmt] = k
        # The command line: the same table, written as JSON.
        out = tmp_path / fmt
        assert cli.main(["trace", path, "--power", capture_path, "--out", str(out), "--top", "1",
                         "--min-executions", "50"]) == cli.EXIT_OK
        doc = json.loads((out / "kernels.json").read_text())
        assert doc["trace_clock"] == "CLOCK_BOOTTIME" and doc["device"] == 0
        assert [r["energy_j"] for r in doc["kernels"]] == k["energy_j"].tolist()
    capsys.readouterr()
    # One table, bit for bit, whatever the format; and the same as the run's torch.profiler trace gives.
    assert np.array_equal(tables["csv"], tables["json"]) and np.array_equal(tables["csv"], tables["rocpd"])
    kineto = profile_trace(loop.write_trace(tmp_path / "t.json.gz"), capture, min_executions=50)
    assert np.array_equal(kineto.kernels["energy_j"], tables["csv"]["energy_j"])


def test_a_capture_without_boottime_brackets_is_refused_naming_what_to_record(loop, session, tmp_path, capsys):
    paths, capture_path, _ = session
    old = load_capture(_v1_capture_file(load_capture(capture_path), tmp_path / "old.npz"))
    assert old.clocks == ("CLOCK_REALTIME",) and not old.clock_brackets
    for path in paths.values():
        with pytest.raises(ValueError, match=r"^samples: the trace's kernels are stamped on CLOCK_BOOTTIME .*"
                                             r"brackets only CLOCK_REALTIME \(recorded by fingrav_native 0\.4\.0\).*"
                                             r"Record the power again with fingrav_native"):
            profile_trace(path, old, min_executions=50)
    assert cli.main(["trace", paths["rocpd"], "--power", str(tmp_path / "old.npz"),
                     "--out", str(tmp_path / "o")]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "CLOCK_BOOTTIME" in err and "Record the power again" in err and not (tmp_path / "o").exists()
    # The same old capture still serves a torch.profiler trace (CLOCK_REALTIME).
    tp = profile_trace(loop.write_trace(tmp_path / "t.json.gz"), old, min_executions=50)
    assert len(tp.kernels) == 3


def test_the_wrong_host_clock_is_never_a_table(loop, session):
    # CLOCK_MONOTONIC is CLOCK_BOOTTIME less the time suspended (47 min here); CLOCK_REALTIME is decades off.
    paths, capture_path, _ = session
    capture = load_capture(capture_path)
    for clock in ("CLOCK_MONOTONIC", "CLOCK_REALTIME"):
        with pytest.raises(ValueError, match=r"^samples: no power log falls within the trace's kernels"):
            profile_trace(paths["csv"], capture.samples, capture.logger_map(clock=clock), min_executions=50)




@pytest.mark.parametrize(("shift_ns", "warned"), [(0, None), (30_000, "from where the clock map puts them, beyond"),
                                                  (1_000_000, r"the power logs sit \+100\d\.\d us")])
def test_logs_placed_beyond_the_maps_bound_never_give_an_unwarned_table(tmp_path, shift_ns, warned):
    # A map from bracketed reads is trusted (align="auto" does not move the logs); the offset measured
    # against the kernels checks it. A trace 30 us or 1 ms off its true clock gave a table 30 % off
    # with no warning at all.
    loop = simulate_training_loop(400, seed=6, pause_every=0, logger_own_clock=0.0)
    ex = loop.executions
    k = [loop.kernels[i] for i in loop.signature]
    path = write_rocprof_trace(tmp_path / "kernel_trace.csv", [x.name for x in k], [x.grid for x in k],
                               [x.block for x in k], loop.to_clock(ex["start_ns"], "CLOCK_BOOTTIME") + shift_ns,
                               loop.to_clock(ex["end_ns"], "CLOCK_BOOTTIME") + shift_ns)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        tp = profile_trace(path, _host_stamped(loop), min_executions=50)
    assert not tp.alignment_applied
    if warned is None:
        assert not tp.warnings and not got
        for row, ep in zip(tp.kernels, tp.profiles):
            assert row["energy_j"] == pytest.approx(loop.truth_energy_j(ep.golden.run_ids), rel=0.06)
    else:
        assert len(tp.warnings) == 1 and re.search(warned, tp.warnings[0])
        # A mismatch the logs show is also a ClockMismatchWarning; an offset they cannot determine is a note.
        mism = [w for w in got if issubclass(w.category, ClockMismatchWarning)]
        assert bool(mism) == tp.warnings[0].startswith("clock mismatch: ")
        assert "CLOCK_BOOTTIME" in tp.warnings[0] or mism


def _csv(agents: list[str]) -> str:
    rows = "".join(f'"KERNEL_DISPATCH","{a}",1,1,7,{i + 1},3,"k",{i + 1},{1000 + 100 * i},{1050 + 100 * i},0,0,8,0,16,'
                   f'64,1,1,1024,1,1\n' for i, a in enumerate(agents))
    return ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
            '"Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count",'
            '"Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X",'
            '"Grid_Size_Y","Grid_Size_Z"\n' + rows)


def test_agent_numbers_become_gpu_ordinals(tmp_path):
    # rocprofv3 numbers agents CPUs first (agent.cpp); its agent index options (metadata.cpp): relative
    # "Agent <logical node id>" (default), absolute "Agent <node id>", type-relative "GPU <ordinal>".
    path = tmp_path / "9_kernel_trace.csv"
    info = tmp_path / "9_agent_info.csv"
    path.write_text(_csv(["GPU 1", "GPU 0"]))
    assert read_rocprof_kernel_trace(path).device.tolist() == [1, 0]
    # KFD node ids with a gap (node 3 is absent): relative and absolute numbering differ; both map.
    info.write_text('"Node_Id","Logical_Node_Id","Agent_Type"\n0,0,"CPU"\n1,1,"CPU"\n2,2,"GPU"\n4,3,"GPU"\n')
    path.write_text(_csv(["Agent 3", "Agent 2", "Agent 4"]))
    assert read_rocprof_kernel_trace(path).device.tolist() == [1, 0, 1]
    path.write_text(_csv(["Agent 1"]))
    with pytest.raises(TraceFormatError, match=r"Agent_Id Agent 1 is no GPU of '9_agent_info.csv' "
                                               r"\(its GPUs: logical node ids \[2, 3\]\)"):
        read_rocprof_kernel_trace(path)
    path.write_text(_csv(["CPU 0"]))
    with pytest.raises(TraceFormatError, match=r"row 0 has Agent_Id='CPU 0'; a kernel dispatch runs on a GPU"):
        read_rocprof_kernel_trace(path)
    # JSON without logical_node_type_id (the 2024 writer): the GPU's rank among GPUs by logical node id.
    doc = _json_doc(tmp_path)
    for a in doc["rocprofiler-sdk-tool"][0]["agents"]:
        del a["logical_node_type_id"]
    j = tmp_path / "r.json"
    j.write_text(json.dumps(doc))
    assert read_trace(j).device.tolist() == [1, 1]


def _json_doc(tmp_path) -> dict:
    """A two-GPU JSON output (GPU 1 runs both kernels), parsed."""
    p = write_rocprof_trace(tmp_path / "w.json", ["a", "b"], [(64, 1, 1)] * 2, [(64, 1, 1)] * 2, [100, 300],
                            [200, 400], output_format="json", device=[1, 1])
    with open(p) as f:
        return json.load(f)


def _edited_json(tmp_path, edit):  # type: ignore[no-untyped-def]
    """The synthesized rocprofv3 JSON with ``edit`` applied to its document, written as bad_results.json."""
    doc = _json_doc(tmp_path)
    edit(doc)
    path = tmp_path / "bad_results.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.pop("rocprofiler-sdk-tool"), None),  # then it is a Kineto trace without traceEvents
    (lambda d: d["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"].clear(), "no kernel_dispatch"),
    (lambda d: d["rocprofiler-sdk-tool"][0].pop("agents"), r"rocprofiler-sdk-tool\[0\] has no agents list"),
    (lambda d: d["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][1].update(end_timestamp=250),
     r"kernel_dispatch\[1\] has start_timestamp=300, end_timestamp=250"),
    (lambda d: d["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][0]["dispatch_info"].update(
        agent_id={"handle": 1}), r"kernel_dispatch\[0\] has dispatch_info.agent_id.handle=1, which is no GPU"),
    (lambda d: d["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][0]["dispatch_info"].update(
        kernel_id=9), r"kernel_id=9, which kernel_symbols does not name"),
    (lambda d: d["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][0]["dispatch_info"]["grid_size"]
     .update(x=2.5), r"kernel_dispatch\[0\] has dispatch_info.grid_size.x=2.5; expected an integer"),
    (lambda d: d["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][0].pop("start_timestamp"),
     r"kernel_dispatch\[0\] has no start_timestamp"),
])
def test_malformed_rocprofv3_json_is_refused_by_field(tmp_path, edit, message):
    path = _edited_json(tmp_path, edit)
    with pytest.raises(TraceFormatError, match=message or "no traceEvents"):
        read_trace(path)
    if message is not None:
        with pytest.raises(TraceFormatError, match=rf"trace='.*bad_results\.json': .*{message}"):
            read_rocprof_kernel_trace(path)


def _rocpd(tmp_path, name="r.db") -> str:
    return write_rocprof_trace(tmp_path / name, ["a", "b"], [(64, 1, 1)] * 2, [(64, 1, 1)] * 2, [100, 300],
                               [200, 400], output_format="rocpd", device=[1, 0], stream=[3, 3], correlation=[7, 9])


@pytest.mark.parametrize(("sql", "message"), [
    ("UPDATE rocpd_info_agent SET type = 'CPU' WHERE type_index = 1",
     r"rocpd_kernel_dispatch id 1 has agent_id=3, which rocpd_info_agent does not give as a GPU with a type_index "
     r"\(type='CPU'"),
    ("DROP VIEW rocpd_info_kernel_symbol", r"no table or view 'rocpd_info_kernel_symbol'; not a rocpd database"),
    # An earlier development layout kept the times in rocpd_timestamp rows: refused by the column.
    ("ALTER TABLE rocpd_kernel_dispatch RENAME COLUMN \"start\" TO start_id",
     r"rocpd_kernel_dispatch has no column 'start'"),
    ("DELETE FROM rocpd_info_kernel_symbol WHERE kernel_name = 'b'",
     r"rocpd_kernel_dispatch id 2 has kernel_id=2, which rocpd_info_kernel_symbol does not name"),
    ("UPDATE rocpd_kernel_dispatch SET \"end\" = 50 WHERE id = 1", r"rocpd_kernel_dispatch id 1 has start=100, end=50"),
    ("UPDATE rocpd_kernel_dispatch SET grid_size_x = 'wide' WHERE id = 2", r"rocpd_kernel_dispatch id 2 has grid_size_x='wide'; expected an integer"),
    ("DELETE FROM rocpd_kernel_dispatch", "no kernel dispatches"),
])
def test_a_rocpd_database_is_read_through_its_views_and_damage_is_named(tmp_path, sql, message):
    kt = read_rocprof_kernel_trace(_rocpd(tmp_path))
    assert kt.device.tolist() == [1, 0] and kt.stream.tolist() == [3, 3] and kt.correlation.tolist() == [7, 9]
    assert kt.signatures["name"].tolist() == ["a", "b"] and kt.clock == "CLOCK_BOOTTIME"
    p = _rocpd(tmp_path, "damaged.db")
    with sqlite3.connect(p) as conn:
        # A view is not written through (nor renamed): the statement goes to the table behind it.
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if not sql.startswith("DROP VIEW"):
            view = sql.split()[2] if sql.startswith(("DELETE", "ALTER")) else sql.split()[1]
            sql = sql.replace(view, '"' + next(t for t in tables if t.rsplit("_", 5)[0] == view) + '"', 1)
        conn.execute(sql)
    conn.close()
    with pytest.raises(TraceFormatError, match=rf"trace='.*damaged\.db': {message}"):
        read_rocprof_kernel_trace(p)


def test_a_database_that_is_not_rocpd_is_named(tmp_path):
    (tmp_path / "x.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(TraceFormatError, match=r"trace='.*x\.db': .*rocpd"):
        read_trace(tmp_path / "x.db")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (a)")
    conn.close()
    with pytest.raises(TraceFormatError, match=r"no table or view 'rocpd_kernel_dispatch'; not a rocpd database"):
        read_trace(other)


def test_read_trace_tells_the_formats_apart_by_content(loop, session, tmp_path):
    paths, _, _ = session
    # A name says nothing: a rocpd database or a rocprofv3 JSON under any name is read as what it is.
    for fmt, path in paths.items():
        if fmt == "csv":
            continue
        renamed = tmp_path / f"looks_like.{'csv' if fmt == 'json' else 'json'}"
        with open(path, "rb") as f:
            renamed.write_bytes(f.read())
        assert len(read_trace(renamed)) == len(loop.executions)
    kineto = read_trace(loop.write_trace(tmp_path / "t.json"))
    assert kineto.clock == "unix-epoch"
    assert os.path.basename(paths["csv"]).endswith("kernel_trace.csv")


SYNTH = os.path.join(os.path.dirname(__file__), "..", "data", "traces", "rocprofv3", "synth")


def test_the_synthesized_outputs_of_one_run_read_alike_with_gpu_ordinals():
    # tests/data/traces/synth_rocprofv3.py wrote one run three ways with the standard library only (a
    # second implementation of the layout, not fingrav_native's writer): two CPU agents, then GPUs on
    # KFD nodes 2 and 4 (logical 2 and 3), six dispatches on two streams. Synthesized, not recorded.
    traces = [read_trace(os.path.join(SYNTH, f"7301_{name}")) for name in
              ("kernel_trace.csv", "results.json", "results.db")]
    first = traces[0]
    assert len(first) == 6 and first.clock == "CLOCK_BOOTTIME" and first.origin_ns == 276_543_210_987_654
    # In start order: node 2 is GPU 0 and node 4 GPU 1, never agent numbers.
    assert first.device.tolist() == [0, 1, 0, 1, 0, 0] and first.device_numbering == "GPU ordinal"
    assert first.stream.tolist() == [1, 2, 1, 2, 2, 1] and first.correlation.tolist() == [11, 13, 12, 15, 14, 16]
    assert (first.executions["end_ns"] - first.executions["start_ns"]).astype(int).tolist() == [
        48_000, 48_400, 4_160, 4_100, 1_224, 48_321]
    assert sorted(set(first.signatures["name"].tolist()))[0] == "elementwise_add(float*, float const*, int)"
    for kt in traces[1:]:
        assert np.array_equal(kt.executions, first.executions) and np.array_equal(kt.signatures, first.signatures)
        assert kt.device.tolist() == first.device.tolist() and kt.stream.tolist() == first.stream.tolist()
        assert kt.correlation.tolist() == first.correlation.tolist() and kt.origin_ns == first.origin_ns


def test_the_energy_counter_closes_on_the_rocprofv3_traces_clock(loop, session, tmp_path):
    # The closure maps the capture's energy counter onto the trace's clock as it maps the logs:
    # onto CLOCK_BOOTTIME for rocprofv3. Mapped onto CLOCK_REALTIME (what the counter's map did before the
    # two branches met) it falls decades away from the kernels and the closure has nothing to close over.
    paths, _, _ = session
    with_counter = loop.capture(energy_counter=True).save(tmp_path / "power.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an EnergyClosureWarning would fail here
        tp = profile_trace(paths["csv"], load_capture(with_counter), min_executions=50)
    c = tp.closure
    assert c is not None and abs(c.difference_j) <= c.half_width_j
    assert c.counter_j > 0 and c.end_ns > c.start_ns


def _dispatch0(d):
    return d["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][0]


@pytest.mark.parametrize(("edit", "message"), [
    # A stream id that is not an object was read as no stream, and the queue's taken in its place.
    (lambda d: _dispatch0(d).update(stream_id="7"), r"kernel_dispatch\[0\] has stream_id='7'; expected an object"),
    (lambda d: _dispatch0(d).update(stream_id=7), r"kernel_dispatch\[0\] has stream_id=7; expected an object"),
    # A symbol of another type, or a kernel id that is not an integer, was skipped: its kernels unnamed.
    (lambda d: d["rocprofiler-sdk-tool"][0]["kernel_symbols"].append("gemm"), r"kernel_symbols\[\d+\], is 'gemm'"),
    (lambda d: d["rocprofiler-sdk-tool"][0]["kernel_symbols"][1].update(kernel_id="1"),
     r"kernel_symbols\[1\], has kernel_id='1'; expected an integer"),
    (lambda d: d["rocprofiler-sdk-tool"][0]["kernel_symbols"][1].update(formatted_kernel_name=5),
     r"kernel_symbols\[1\], has formatted_kernel_name=5; expected a string"),
    # Two symbols of one id: which kernel ran was the later one's guess.
    (lambda d: d["rocprofiler-sdk-tool"][0]["kernel_symbols"].append(
        {**d["rocprofiler-sdk-tool"][0]["kernel_symbols"][1], "formatted_kernel_name": "other"}),
     r"names kernel_id=1 'other', which an earlier symbol named 'a'"),
])
def test_silently_wrong_rocprofv3_json_field_of_another_type_is_refused_not_defaulted(tmp_path, edit, message):
    path = _edited_json(tmp_path, edit)
    with pytest.raises(TraceFormatError, match=rf"trace='.*bad_results\.json': .*{message}"):
        read_rocprof_kernel_trace(path)


@pytest.mark.parametrize("value", ["'three'", "3.5", "x'03'"])
def test_silently_wrong_rocpd_stream_id_of_another_type_is_refused_not_read_as_the_queue(tmp_path, value):
    # SQLite keeps any type in any column: a text stream id was read as none, and the queue taken for it.
    p = _rocpd(tmp_path, "damaged.db")
    with sqlite3.connect(p) as conn:
        table = next(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                     if r[0].rsplit("_", 5)[0] == "rocpd_kernel_dispatch")
        conn.execute(f'UPDATE "{table}" SET stream_id = {value} WHERE id = 1')
    conn.close()
    with pytest.raises(TraceFormatError, match=r"rocpd_kernel_dispatch id 1 has stream_id=.*; expected an integer"):
        read_rocprof_kernel_trace(p)
