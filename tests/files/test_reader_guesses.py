"""Trace readers refuse what they would have to guess, and bound the work a file can cost.

Each case is a mutated copy (in tmp_path) of the synthesized rocprofv3 outputs
(tests/data/traces/rocprofv3/synth, written by synth_rocprofv3.py from
ROCprofiler-SDK's layout): a field every release writes is removed or given
the wrong type, and the reader must name the file, the record and the field
rather than fill in a default.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from fingrav_native.files import read_rocprof_kernel_trace, read_trace
from fingrav_native.insitu import TraceFormatError

SYNTH = os.path.join(os.path.dirname(__file__), os.pardir, "data", "traces", "rocprofv3", "synth")
CSV, JSON, DB = (os.path.join(SYNTH, f"7301_{n}") for n in ("kernel_trace.csv", "results.json", "results.db"))


def _rows() -> tuple[list[str], list[dict[str, str]]]:
    with open(CSV, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _write_csv(path: Path, fields: list[str], rows: list[dict[str, str]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, quoting=csv.QUOTE_NONNUMERIC, extrasaction="ignore",
                       lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return str(path)


def test_silently_wrong_two_gemm_shapes_without_grid_columns_are_refused_not_merged(tmp_path: Path) -> None:
    # Two shapes of one GEMM: with the grid, two signatures; without the grid columns the reader had
    # filled in -1 for every row and merged them into one row of the profile.
    fields, rows = _rows()
    gemm = [r for r in rows if r["Kernel_Name"].startswith("void gemm_kernel")]
    assert len(gemm) >= 2
    gemm[1]["Grid_Size_X"] = str(2 * int(gemm[1]["Grid_Size_X"]))
    whole = read_rocprof_kernel_trace(_write_csv(tmp_path / "a_kernel_trace.csv", fields, rows))
    assert sum(str(n).startswith("void gemm_kernel") for n in whole.signatures["name"]) == 2
    for drop in (("Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"), ("Workgroup_Size_X",)):
        kept = [f for f in fields if f not in drop]
        path = _write_csv(tmp_path / "b_kernel_trace.csv", kept, rows)
        with pytest.raises(TraceFormatError, match=rf"b_kernel_trace.csv.*no columns? {drop[0]}"):
            read_trace(path)


@pytest.mark.parametrize("field", ["Grid_Size_Y", "Workgroup_Size_Z", "Correlation_Id", "Queue_Id", "Agent_Id"])
def test_silently_wrong_an_empty_cell_of_a_written_field_is_refused_by_row_and_field(tmp_path: Path,
                                                                                      field: str) -> None:
    fields, rows = _rows()
    rows[2][field] = ""
    if field == "Queue_Id":
        rows[2]["Stream_Id"] = ""  # the queue is read where the stream is not given
    path = _write_csv(tmp_path / "c_kernel_trace.csv", fields, rows)
    with pytest.raises(TraceFormatError, match=rf"c_kernel_trace.csv.*row 2 has no {field}"):
        read_trace(path)


def test_silently_wrong_a_missing_correlation_or_queue_column_is_refused(tmp_path: Path) -> None:
    fields, rows = _rows()
    for drop in ("Correlation_Id", "Agent_Id", "Queue_Id"):
        path = _write_csv(tmp_path / "d_kernel_trace.csv", [f for f in fields if f != drop], rows)
        with pytest.raises(TraceFormatError, match=rf"no column {drop}"):
            read_trace(path)
    # Stream_Id is written only by releases that record HIP streams: without it, the queue (as documented).
    with_streams = read_trace(_write_csv(tmp_path / "e_kernel_trace.csv", fields, rows)).stream
    for r in rows:
        r["Queue_Id"] = str(int(r["Stream_Id"]) + 10)
    path = _write_csv(tmp_path / "e_kernel_trace.csv", [f for f in fields if f != "Stream_Id"], rows)
    assert read_trace(path).stream.tolist() == (with_streams + 10).tolist()


def _json() -> dict:
    with open(JSON, encoding="utf-8") as f:
        doc: dict = json.load(f)
    return doc


def _dispatches(doc: dict) -> list[dict]:
    out: list[dict] = doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]
    return out


@pytest.mark.parametrize("path, value", [("correlation_id", None), ("correlation_id.internal", None),
                                         ("correlation_id.internal", "11"), ("stream_id.handle", "1"),
                                         ("stream_id.handle", 1.5)])
def test_silently_wrong_a_json_dispatch_field_missing_or_of_another_type_is_refused(tmp_path: Path, path: str,
                                                                                    value: object) -> None:
    doc = _json()
    rec = _dispatches(doc)[1]
    *parents, leaf = path.split(".")
    obj = rec
    for part in parents:
        obj = obj[part]
    if value is None:
        del obj[leaf]
    else:
        obj[leaf] = value
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=rf"kernel_dispatch\[1\] has (no )?{path.split('.')[0]}"):
        read_trace(str(p))


def _db(tmp_path: Path) -> str:
    path = str(tmp_path / "r.db")
    shutil.copy(DB, path)
    return path


def _view(path: str, name: str, select: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(f'DROP VIEW "{name}"')
        conn.execute(f'CREATE VIEW "{name}" AS {select}')
        conn.commit()
    finally:
        conn.close()


#: The guid suffix of the synthesized database's tables (synth_rocprofv3.py's GUID).
SUFFIX = "_0198c1a2_5b3e_7f00_8d2c_3a4b5c6d7e8f"


def _table(name: str) -> str:
    """The table behind view ``name`` (rocprofv3 suffixes each with its run's guid)."""
    return name + SUFFIX


def test_silently_wrong_a_rocpd_dispatch_without_its_event_or_queue_is_refused(tmp_path: Path) -> None:
    # The event (the correlation id) dropped: the reader had filled in -1.
    path = _db(tmp_path)
    conn = sqlite3.connect(path)
    try:
        conn.execute(f'UPDATE "{_table("rocpd_kernel_dispatch")}" SET event_id = 99999 WHERE id = 2')
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(TraceFormatError, match=r"rocpd_kernel_dispatch id 2 has event_id=99999, which rocpd_event "
                                               r"does not hold"):
        read_trace(path)
    path = _db(tmp_path)
    conn = sqlite3.connect(path)
    try:
        conn.execute(f'UPDATE "{_table("rocpd_kernel_dispatch")}" SET stream_id = 0, queue_id = \'q\' '
                     'WHERE id = 3')
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(TraceFormatError, match=r"rocpd_kernel_dispatch id 3 has queue_id='q'"):
        read_trace(path)


def test_hang_a_rocpd_dispatch_view_that_never_ends_is_stopped_by_its_limits(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINGRAV_ROCPD_MAX_S", "0.5")
    path = _db(tmp_path)
    # An endless recursive query as the dispatch view: every row's columns, counted up without end.
    table = _table("rocpd_kernel_dispatch")
    _view(path, "rocpd_kernel_dispatch",
          f'WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n) SELECT K.* FROM n, "{table}" K '
          'WHERE n.i >= 0 AND n.i < -1 OR K.id < 0')
    # The query runs in this process: its CPU time shows it stopped, however loaded the machine's wall clock is.
    t0 = time.process_time()
    with pytest.raises(TraceFormatError, match=r"r.db.*longer than 0.5 s.*FINGRAV_ROCPD_MAX_S"):
        read_trace(path)
    assert time.process_time() - t0 < 5.0
    # A join of 10^10 rows and more (the view repeats every dispatch 10^10 times).
    monkeypatch.setenv("FINGRAV_ROCPD_MAX_S", "60")
    monkeypatch.setenv("FINGRAV_ROCPD_MAX_DISPATCHES", "1000")
    _view(path, "rocpd_kernel_dispatch",
          f'WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 10000000000) '
          f'SELECT K.* FROM n CROSS JOIN "{table}" K')
    t0 = time.process_time()
    with pytest.raises(TraceFormatError, match=r"r.db.*more than 1000 dispatches.*FINGRAV_ROCPD_MAX_DISPATCHES"):
        read_trace(path)
    assert time.process_time() - t0 < 5.0


@pytest.mark.parametrize("cell", ["", "abc", "0x10", "1_000", "12 W"])
def test_silently_wrong_a_malformed_cell_of_a_logs_csv_is_refused_by_file_line_and_column(tmp_path: Path,
                                                                                         cell: str) -> None:
    # numpy's genfromtxt had read an empty cell as -1 and 0x10 as 16: a log the recorder never took.
    from fingrav_native.files._characterisation import read_logs_csv

    path = tmp_path / "logs.csv"
    path.write_text("t_ns,power_w\n1000,101.5\n2000,102\n3000," + cell + "\n4000,99\n")
    with pytest.raises(ValueError, match=rf"--logs='.*logs.csv': line 4, column 'power_w' holds '{cell}', which "
                                         "is not a number"):
        read_logs_csv(path, ("t_ns", "power_w"), "--logs")
    path.write_text("t_ns,power_w\n1000,101.5\n2000\n")
    with pytest.raises(ValueError, match=r"line 3 has 1 cells for the header's 2 columns"):
        read_logs_csv(path, ("t_ns", "power_w"), "--logs")


def test_a_logs_csv_keeps_integer_stamps_exact_and_reads_numbers_as_written(tmp_path: Path) -> None:
    from fingrav_native.files._characterisation import read_logs_csv

    path = tmp_path / "logs.csv"
    path.write_text("# t_ns,power_w\n1732000000000000001,1e2\n\n1732000000000000002,-.5E1\n")
    t, p = read_logs_csv(path, ("t_ns", "power_w"), "logs")
    assert t.dtype == np.int64 and t.tolist() == [1732000000000000001, 1732000000000000002]
    assert p.tolist() == [100.0, -5.0]


@pytest.mark.parametrize("kwargs, named", [
    ({"path": 123}, "path"),
    ({"columns": "t_ns"}, "columns"),  # one name, not its characters
    ({"columns": ("t_ns", 5)}, "columns"),
    ({"what": None}, "what"),
])
def test_unclear_a_wrong_argument_of_read_logs_csv_is_named(tmp_path: Path, kwargs: dict[str, object],
                                                            named: str) -> None:
    from fingrav_native.files import read_logs_csv

    path = tmp_path / "logs.csv"
    path.write_text("t_ns,power_w\n1000,101.5\n2000,102\n")
    call: dict[str, object] = {"path": path, "columns": ("t_ns", "power_w"), "what": "path", **kwargs}
    with pytest.raises(ValueError, match=rf"^{named}="):
        read_logs_csv(**call)
    t, w = read_logs_csv(path)  # the default columns: power logs
    assert t.tolist() == [1000, 2000] and w.tolist() == [101.5, 102.0]


def test_unclear_a_malformed_cell_given_to_fingrav_characterize_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fingrav_native.app import _cli as cli

    logs, load = tmp_path / "logs.csv", tmp_path / "load.csv"
    logs.write_text("t_ns,power_w\n" + "".join(f"{i * 1000},{100 + i % 7}\n" for i in range(40)) + "41000,n/a\n")
    load.write_text("start_ns,end_ns\n5000,9000\n")
    assert cli.main(["characterize", "--logs", str(logs), "--load", str(load)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "line 42, column 'power_w' holds 'n/a'" in err and "Traceback" not in err
