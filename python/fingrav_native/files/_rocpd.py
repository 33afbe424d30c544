"""GPU kernels from a rocpd database (rocprofv3 ``--output-format rocpd``, ``<pid>_results.db``; SQLite3).

The schema, from ROCprofiler-SDK's ``source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql``
and ``rocpd_views.sql`` and its writer ``source/lib/output/generateRocpd.cpp`` (at the
commit :mod:`._rocprof_agents` names): each table is created as
``rocpd_<name>_<uuid>`` with a view ``rocpd_<name>`` over it, and every row carries
the ``guid`` of the run that wrote it (a merged database holds several). The
reader joins the views::

    rocpd_kernel_dispatch K   "start", "end" (CLOCK_BOOTTIME ns), agent_id, kernel_id,
                              queue_id, stream_id, grid_size_{x,y,z},
                              workgroup_size_{x,y,z}, event_id
    rocpd_info_kernel_symbol  id = K.kernel_id: display_name (the formatted kernel
                              name, the CSV's Kernel_Name), kernel_name
    rocpd_info_agent          id = K.agent_id: "type" ('CPU'/'GPU'), type_index
                              (= logical_node_type_id: the GPU ordinal)
    rocpd_event               id = K.event_id: stack_id (the internal correlation id,
                              the CSV's Correlation_Id)

each on the same ``guid``. The documented ``kernels`` view joins the same
tables, but its inner joins drop a dispatch whose thread, queue or region name
is missing, and its columns changed names between releases; the tables did not.
A database of an earlier development layout (dispatch times in ``rocpd_timestamp``
rows, no ``start`` column) is refused by name.

No database recorded by rocprofv3 exists in the upstream repository (tests/data
holds one synthesized from this schema; its README says so).
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
import urllib.parse
from typing import Any, Union

from fingrav_native.files._rocprof_agents import ROCPROF_CLOCK
from fingrav_native.files._safe import file_problem, short_repr
from fingrav_native.insitu._trace import INT64_MAX, INT64_MIN, KernelTrace, TraceFormatError, missing_trace

#: The first 16 bytes of every SQLite 3 database (sqlite.org/fileformat.html, section 1.3.1).
SQLITE_MAGIC = b"SQLite format 3\x00"


#: Per table (view), the columns the reader uses.
_COLUMNS = {
    "rocpd_kernel_dispatch": ("id", "guid", "agent_id", "kernel_id", "queue_id", "stream_id", "start", "end", "event_id",
                              "grid_size_x", "grid_size_y", "grid_size_z", "workgroup_size_x", "workgroup_size_y",
                              "workgroup_size_z"),
    "rocpd_info_kernel_symbol": ("id", "guid", "kernel_name", "display_name"),
    "rocpd_info_agent": ("id", "guid", "type", "type_index"),
    "rocpd_event": ("id", "guid", "stack_id"),
}


_QUERY = """
SELECT K."start", K."end", COALESCE(S.display_name, S.kernel_name), K.kernel_id,
       K.grid_size_x, K.grid_size_y, K.grid_size_z,
       K.workgroup_size_x, K.workgroup_size_y, K.workgroup_size_z,
       K.agent_id, A."type", A.type_index, K.stream_id, K.queue_id, E.stack_id, K.id, K.event_id, E.id
FROM rocpd_kernel_dispatch K
LEFT JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
LEFT JOIN rocpd_info_agent A ON A.id = K.agent_id AND A.guid = K.guid
LEFT JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid
ORDER BY K.guid, K.id
"""


#: Longest a database's dispatch query may run (s): a view can be any query (an endless recursive one, a
#: join of 10^10 rows), and a trace's join of millions of dispatches takes seconds. The environment variable
#: :data:`MAX_QUERY_ENV` raises it.
MAX_QUERY_S = 300.0
MAX_QUERY_ENV = "FINGRAV_ROCPD_MAX_S"

#: Most dispatches a database may hold (what a Kineto trace's reader keeps within its memory cap); the
#: environment variable :data:`MAX_DISPATCHES_ENV` raises it.
MAX_DISPATCHES = 60_000_000
MAX_DISPATCHES_ENV = "FINGRAV_ROCPD_MAX_DISPATCHES"

#: SQLite virtual-machine instructions between two checks of the clock.
_PROGRESS_STEPS = 10_000


def _limit(env: str, default: float, where: str) -> float:
    """A limit from the environment variable ``env`` (a positive number), else ``default``."""
    raw = os.environ.get(env)
    if raw is None or raw == "":
        return default
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise TraceFormatError(f"{where}: {env}={short_repr(raw)} is not a positive number")
    return v


def _bounded(conn: sqlite3.Connection, where: str) -> list[tuple[Any, ...]]:
    """The dispatch rows, read within a time limit (a progress handler ends the query) and a row limit
    (counted first, on a query that stops one row past it)."""
    max_s = _limit(MAX_QUERY_ENV, MAX_QUERY_S, where)
    max_rows = int(_limit(MAX_DISPATCHES_ENV, MAX_DISPATCHES, where))
    deadline = time.monotonic() + max_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
    try:
        (count,) = conn.execute("SELECT COUNT(*) FROM (SELECT 1 FROM rocpd_kernel_dispatch LIMIT ?)",
                                (max_rows + 1,)).fetchone()
        if count > max_rows:
            raise TraceFormatError(f"{where}: rocpd_kernel_dispatch holds more than {max_rows} dispatches, more than "
                                   f"the reader takes (set {MAX_DISPATCHES_ENV} to raise the limit)")
        return conn.execute(_QUERY).fetchall()
    except sqlite3.OperationalError:
        if time.monotonic() > deadline:
            raise TraceFormatError(f"{where}: reading its dispatches took longer than {max_s:g} s, more than the "
                                   f"reader allows (a view that never ends? set {MAX_QUERY_ENV} to raise the "
                                   "limit)") from None
        raise
    finally:
        conn.set_progress_handler(None, 0)


def _connect(p: str, where: str) -> sqlite3.Connection:
    """The database opened read-only (nothing is written, no journal is created beside it)."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(p)) + "?mode=ro"
    try:
        return sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{where}: cannot open it as a rocpd database ({exc})") from None


def _check_schema(conn: sqlite3.Connection, where: str) -> None:
    """Every view the query joins, with every column it reads; what is missing is named."""
    for table, cols in _COLUMNS.items():
        have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
        if not have:
            raise TraceFormatError(f"{where}: no table or view {table!r}; not a rocpd database (rocprofv3 "
                                   "--output-format rocpd)")
        missing = [c for c in cols if c not in have]
        if missing:
            raise TraceFormatError(f"{where}: {table} has no column {missing[0]!r} (a rocpd schema other than "
                                   "rocprofiler-sdk's released one: its dispatches cannot be read)")


def _row(r: tuple[Any, ...], where: str) -> tuple[Any, ...]:
    """One dispatch checked: integers in int64, times ordered, a named kernel on a GPU."""
    w = f"{where}: rocpd_kernel_dispatch id {short_repr(r[16])}"
    for j, col in ((0, "start"), (1, "end"), (4, "grid_size_x"), (5, "grid_size_y"), (6, "grid_size_z"),
                   (7, "workgroup_size_x"), (8, "workgroup_size_y"), (9, "workgroup_size_z")):
        if isinstance(r[j], bool) or not isinstance(r[j], int) or not INT64_MIN <= r[j] <= INT64_MAX:
            raise TraceFormatError(f"{w} has {col}={short_repr(r[j])}; expected an integer")
    if r[0] < 0 or r[1] < r[0]:
        raise TraceFormatError(f"{w} has start={r[0]}, end={r[1]}")
    if not isinstance(r[2], str) or not r[2]:
        raise TraceFormatError(f"{w} has kernel_id={short_repr(r[3])}, which rocpd_info_kernel_symbol does not name")
    if r[11] != "GPU" or not isinstance(r[12], int) or r[12] < 0:
        raise TraceFormatError(f"{w} has agent_id={short_repr(r[10])}, which rocpd_info_agent does not give as a "
                               f"GPU with a type_index (type={short_repr(r[11])}, type_index={short_repr(r[12])})")
    # A stream of 0 is the null stream, NULL none recorded: its queue, as the CSV's reader takes it. SQLite
    # keeps any type in any column: a stream id of text or a float is refused, not read as no stream.
    if r[13] is not None and (isinstance(r[13], bool) or not isinstance(r[13], int)
                              or not INT64_MIN <= r[13] <= INT64_MAX):
        raise TraceFormatError(f"{w} has stream_id={short_repr(r[13])}; expected an integer (or NULL)")
    use_queue = r[13] is None or r[13] <= 0
    stream = r[14] if use_queue else r[13]
    if isinstance(stream, bool) or not isinstance(stream, int) or not INT64_MIN <= stream <= INT64_MAX:
        raise TraceFormatError(f"{w} has queue_id={short_repr(r[14])} (and stream_id={short_repr(r[13])}); "
                               "expected an integer")
    # The correlation id is the event's stack_id: a dispatch whose event is missing has none to give.
    if r[18] is None:
        raise TraceFormatError(f"{w} has event_id={short_repr(r[17])}, which rocpd_event does not hold: its "
                               "correlation id is not in the database")
    corr = r[15]
    if isinstance(corr, bool) or not isinstance(corr, int) or not INT64_MIN <= corr <= INT64_MAX:
        raise TraceFormatError(f"{w} has an event whose stack_id={short_repr(corr)}; expected an integer (the "
                               "correlation id)")
    return (r[0], r[1], r[2], (r[4], r[5], r[6]), (r[7], r[8], r[9]), r[12], stream, corr)


def read_rocpd(trace: Union[str, os.PathLike[str]]) -> KernelTrace:
    """Read the kernel dispatches of a rocpd database.

    Parameters
    ----------
    trace : str or path
        A ``<pid>_results.db`` rocprofv3 wrote with ``--output-format rocpd``
        (the default output format since ROCm 7.0), or a merged database.

    Returns
    -------
    KernelTrace
        ``clock="CLOCK_BOOTTIME"``; devices by GPU ordinal (the agent's
        ``type_index``); streams by HIP stream id (queue id where 0).

    Raises
    ------
    TraceFormatError
        Naming the file: not a readable SQLite database, a view or column
        the reader needs missing (named), no dispatch, a dispatch with a
        malformed value, no kernel symbol, no event (its correlation id), no
        integer stream or queue, or an agent that is not a GPU (the
        dispatch's id is named); a dispatch query that runs past
        :data:`MAX_QUERY_S` or holds more than :data:`MAX_DISPATCHES` rows
        (the views are queries a database may make endless; the environment
        variables ``FINGRAV_ROCPD_MAX_S`` and
        ``FINGRAV_ROCPD_MAX_DISPATCHES`` raise the limits).
    ValueError
        ``trace`` is not a path.
    """
    if not isinstance(trace, (str, os.PathLike)):
        raise ValueError(f"trace={trace!r}: must be a file path")
    p = os.fspath(trace)
    where = f"trace={p!r}"
    if not os.path.lexists(p):
        raise missing_trace(where)
    problem = file_problem(p)
    if problem is not None:
        raise TraceFormatError(f"{where}: {problem}")
    conn = _connect(p, where)
    try:
        _check_schema(conn, where)
        raw = _bounded(conn, where)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{where}: not a readable rocpd database ({exc})") from None
    finally:
        conn.close()
    if not raw:
        raise TraceFormatError(f"{where}: no kernel dispatches in rocpd_kernel_dispatch; was rocprofv3 run with "
                               "--kernel-trace?")
    rows = [_row(r, where) for r in raw]
    try:
        return KernelTrace.from_rows(
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
            [r[4] for r in rows], clock=ROCPROF_CLOCK, source=p, device=[r[5] for r in rows],
            stream=[r[6] for r in rows], correlation=[r[7] for r in rows], err_ns=1000.0)
    except (ValueError, OverflowError) as exc:
        raise TraceFormatError(f"{where}: {exc}") from None
