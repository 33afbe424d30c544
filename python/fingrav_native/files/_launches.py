"""Launch journals: the kernel executions a native tool library captured inside an application.

The tool libraries (``libfingrav_rocprofiler_tool.so`` for rocprofiler-sdk,
``libfingrav_cupti_tool.so`` for CUPTI) write, through the C++ core's
``fingrav::launch::LaunchCapture``, one ``launches.<pid>.journal`` per process
into ``FINGRAV_LAUNCH_DIR``. The framing is that of a recording's journal
(:mod:`fingrav_native.files._journal`): 8 magic bytes, then records of a tag,
a length, a CRC-32 and the payload:

``HEAD``
    JSON ``{"format": "fingrav-launches", "version": 1, "vendor", "record_clock", "pid", "tool",
    "tool_version", "runtime_version" (when known), "capacity"}``, first.
``SYMB``
    JSON ``{"first": k, "names": [...]}``: kernel names for symbol ids ``k, k+1, ...``, in order.
``LNCH``
    One ``.npy`` of :data:`~fingrav_native.records.LAUNCH_DTYPE` per drain of the ring.
``BRBT`` / ``BRRT``
    ``.npy`` int64 ``(n, 3)``: ``(CLOCK_MONOTONIC_RAW before, record clock, CLOCK_MONOTONIC_RAW after)``.
``NOTE``
    JSON ``{"key", "text"}`` (e.g. another profiling client in the way).
``STAT``
    JSON ``{"records", "dropped", "vendor_dropped", "closed"}`` after each drain; the last wins.

As for every journal, a record cut short or whose checksum fails (the
process killed in the middle of a write) ends the file: it and what follows
are counted (:attr:`LaunchLog.torn_bytes`), never read.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from fingrav_native._checks import file_path
from fingrav_native._errors import FingravError
from fingrav_native.files._journal import FRAME as _FRAME
from fingrav_native.files._journal import JOURNAL_MAGIC
from fingrav_native.files._journal import MAX_RECORD_BYTES as _MAX_RECORD_BYTES
from fingrav_native.files._safe import file_problem, loads_json, read_npy
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.records._layouts import LAUNCH_DTYPE

__all__ = ["LAUNCHES_FORMAT", "LaunchFormatError", "LaunchLog", "read_launches"]

#: HEAD's ``format``.
LAUNCHES_FORMAT = "fingrav-launches"
_VERSION = 1
_JSON_TAGS = (b"HEAD", b"SYMB", b"NOTE", b"STAT")
_BRACKET_TAGS = {b"BRBT": "CLOCK_BOOTTIME", b"BRRT": "CLOCK_REALTIME"}
_ARRAY_TAGS = (b"LNCH", *_BRACKET_TAGS)
#: The trace clock each record clock stands as (Kineto's name for CLOCK_REALTIME, as its traces say).
_TRACE_CLOCK = {"CLOCK_BOOTTIME": "CLOCK_BOOTTIME", "CLOCK_REALTIME": "unix-epoch"}


class LaunchFormatError(ValueError, FingravError):
    """The file is not a readable launch journal (the message names the file and what is wrong)."""


@dataclass
class LaunchLog:
    """What one launch journal (or a folder of them) holds.

    Attributes
    ----------
    records : numpy.ndarray
        :data:`~fingrav_native.records.LAUNCH_DTYPE`, in file order; ``symbol`` indexes :attr:`names`.
    names : list of str
        Kernel names by symbol id (a folder's journals share one table, their ids renumbered into it).
    clock : str
        The records' clock: ``"CLOCK_BOOTTIME"`` (rocprofiler-sdk) or ``"CLOCK_REALTIME"`` (CUPTI).
    brackets : numpy.ndarray
        int64 ``(n, 3)``: ``(CLOCK_MONOTONIC_RAW before, clock, CLOCK_MONOTONIC_RAW after)``.
    dropped, vendor_dropped : int
        Records the ring had no room for; records the vendor runtime said it lost.
    notes : list of dict
        ``{"key", "text"}`` in file order.
    closed : bool
        Every journal was closed by its tool (False: the process ended without the tool's finalize).
    pid : int
        The process that wrote it (a folder: the first journal's; all in :attr:`pids`).
    vendor : str
        ``"rocm"`` or ``"cuda"``.
    """

    records: np.ndarray
    names: list[str]
    clock: str
    brackets: np.ndarray
    dropped: int = 0
    vendor_dropped: int = 0
    notes: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = True
    pid: int = -1
    vendor: str = ""
    pids: tuple[int, ...] = ()
    paths: tuple[str, ...] = ()
    heads: tuple[dict[str, Any], ...] = ()
    torn_bytes: int = 0
    torn_reason: str = ""

    def to_trace(self, *, err_ns: float = 1000.0) -> KernelTrace:
        """The records as a :class:`~fingrav_native.insitu.KernelTrace` on their own clock.

        Parameters
        ----------
        err_ns : float
            Placement error of each start and end (the vendor's stamps; rocprofiler-sdk's are
            clamped between packet rewrite and completion).

        Returns
        -------
        KernelTrace
            Clock ``"CLOCK_BOOTTIME"`` for ROCm, ``"unix-epoch"`` for CLOCK_REALTIME (as Kineto's).

        Raises
        ------
        LaunchFormatError
            No records, or a record whose symbol, queue or correlation id cannot be represented.
        """
        r = self.records
        where = ", ".join(self.paths) or "the launch log"
        if len(r) == 0:
            raise LaunchFormatError(f"{where}: no kernel launch records to make a trace of "
                                    f"({self.dropped} dropped, {self.vendor_dropped} lost by the runtime)")
        if int(r["symbol"].max()) >= len(self.names):
            raise LaunchFormatError(f"{where}: a record names symbol {int(r['symbol'].max())} but the journal "
                                    f"holds {len(self.names)} kernel names")
        limit = np.iinfo(np.int64).max
        for column in ("queue", "correlation_id"):
            if int(r[column].max()) > limit:
                raise LaunchFormatError(f"{where}: a record's {column} {int(r[column].max())} is past int64")
        names = [self.names[i] for i in r["symbol"].tolist()]
        return KernelTrace.from_rows(
            r["start_ns"], r["end_ns"], names, r["grid"], r["block"],
            clock=_TRACE_CLOCK[self.clock], source=f"fingrav native launch capture ({self.vendor})",
            device=r["device"].astype(np.int64), stream=r["queue"].astype(np.int64),
            correlation=r["correlation_id"].astype(np.int64), err_ns=err_ns)


@dataclass
class _One:
    head: dict[str, Any]
    records: list[np.ndarray] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    brackets: list[np.ndarray] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    stat: dict[str, Any] = field(default_factory=dict)
    torn_bytes: int = 0
    torn_reason: str = ""


def read_launches(path: str | os.PathLike[str]) -> LaunchLog:
    """Read a launch journal, or every ``launches.*.journal`` in a folder.

    Parameters
    ----------
    path : str or os.PathLike
        A journal written by a tool library, or the ``FINGRAV_LAUNCH_DIR`` folder.

    Returns
    -------
    LaunchLog
        Records, kernel names, clock brackets and counts. A torn or damaged
        tail (a killed process) ends a journal and is counted in
        ``torn_bytes``; every whole record before it is kept.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    LaunchFormatError
        Not a launch journal, its header not whole, a record of the wrong
        layout (named), symbol ids out of order, or a folder's journals on
        different clocks or vendors.
    ValueError
        ``path`` is not a path.
    """
    path = file_path(path, "path")
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path)
                       if n.startswith("launches.") and n.endswith(".journal"))
        if not files:
            raise LaunchFormatError(f"{path}: a folder with no launches.*.journal files")
    else:
        if not os.path.lexists(path):
            raise FileNotFoundError(f"{path}: no launch journal there")
        files = [path]
    return _merge([(f, _read_one(f)) for f in files])


def _read_one(path: str) -> _One:
    def bad(message: str) -> LaunchFormatError:
        return LaunchFormatError(f"{path}: {message}")

    try:
        problem = file_problem(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no launch journal there") from None
    if problem is not None:
        raise bad(problem)
    with open(path, "rb") as f:
        if f.read(len(JOURNAL_MAGIC)) != JOURNAL_MAGIC:
            raise bad("not a launch journal (no journal magic at its start)")
        size = os.fstat(f.fileno()).st_size
        pos = len(JOURNAL_MAGIC)
        one: _One | None = None
        while pos < size:
            got = _next_record(f, size - pos)
            if isinstance(got, str):
                if one is None:
                    raise bad(f"the journal's header record is not whole ({got})")
                one.torn_bytes, one.torn_reason = size - pos, got
                break
            tag, payload = got
            if one is None:
                one = _One(head=_head(tag, payload, bad))
            else:
                _take(one, tag, payload, bad)
            pos = f.tell()
    if one is None:
        raise bad("the journal's header record is missing")
    return one


def _next_record(f: BinaryIO, left: int) -> tuple[bytes, bytes] | str:
    """The next whole record, or why there is none (the journal ends there)."""
    if left < _FRAME.size:
        return f"a record's frame cut short ({left} bytes)"
    try:
        tag, length, crc = _FRAME.unpack(f.read(_FRAME.size))
    except struct.error as exc:
        return f"a record's frame unreadable ({exc})"
    if tag not in _JSON_TAGS and tag not in _ARRAY_TAGS:
        return f"an unknown record tag {tag!r}"
    name = tag.decode()
    if length > min(left - _FRAME.size, _MAX_RECORD_BYTES):
        return f"a {name} record cut short ({left - _FRAME.size} of its {length} bytes)"
    payload = f.read(length)
    if zlib.crc32(payload) != crc:
        return f"a {name} record whose checksum does not match (written in part)"
    return tag, payload


def _head(tag: bytes, payload: bytes, bad: Any) -> dict[str, Any]:
    if tag != b"HEAD":
        raise bad(f"the first record is {tag.decode()}, not the HEAD a launch journal starts with")
    head = loads_json(payload, bad, "the journal's HEAD record")
    if not isinstance(head, dict) or head.get("format") != LAUNCHES_FORMAT:
        raise bad(f"not a launch journal (HEAD's format is {head.get('format') if isinstance(head, dict) else head!r}, "
                  f"not {LAUNCHES_FORMAT!r}); a recording's journal is read by load_capture")
    if head.get("version") != _VERSION:
        raise bad(f"launch journal version {head.get('version')!r}; this reader takes version {_VERSION}")
    if head.get("record_clock") not in _TRACE_CLOCK:
        raise bad(f"HEAD's record_clock {head.get('record_clock')!r} is not one of {sorted(_TRACE_CLOCK)}")
    if head.get("vendor") not in ("rocm", "cuda"):
        raise bad(f"HEAD's vendor {head.get('vendor')!r} is not 'rocm' or 'cuda'")
    return head


def _take(one: _One, tag: bytes, payload: bytes, bad: Any) -> None:
    name = tag.decode()
    if tag in _JSON_TAGS:
        value = loads_json(payload, bad, f"the journal's {name} record")
        if not isinstance(value, dict):
            raise bad(f"a {name} record that is not a JSON object")
        if tag == b"SYMB":
            names = value.get("names")
            if value.get("first") != len(one.names) or not isinstance(names, list) \
                    or not all(isinstance(n, str) for n in names):
                raise bad(f"a SYMB record for ids from {value.get('first')!r} where {len(one.names)} came next "
                          "(or whose names are not strings)")
            one.names.extend(names)
        elif tag == b"NOTE":
            one.notes.append(value)
        elif tag == b"STAT":
            one.stat = value
        else:
            raise bad("a second HEAD record")
        return
    array = read_npy(payload, bad, f"the journal's {name} record")
    if tag == b"LNCH":
        if array.dtype != LAUNCH_DTYPE or array.ndim != 1:
            raise bad(f"a LNCH record of dtype {array.dtype} shape {array.shape}, not LAUNCH_DTYPE rows "
                      f"({LAUNCH_DTYPE})")
        one.records.append(array)
        return
    if _BRACKET_TAGS[tag] != one.head["record_clock"]:
        raise bad(f"{name} brackets ({_BRACKET_TAGS[tag]}) in a journal whose record clock is "
                  f"{one.head['record_clock']}")
    if array.dtype != np.dtype("<i8") or array.ndim != 2 or array.shape[1] != 3:
        raise bad(f"a {name} record of dtype {array.dtype} shape {array.shape}, not int64 (n, 3) brackets")
    one.brackets.append(array)


def _count(stat: dict[str, Any], key: str, path: str) -> int:
    value = stat.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise LaunchFormatError(f"{path}: STAT's {key} is {value!r}, not a count")
    return value


def _merge(parts: list[tuple[str, _One]]) -> LaunchLog:
    first_path, first = parts[0]
    clock, vendor = first.head["record_clock"], first.head["vendor"]
    records: list[np.ndarray] = []
    names: list[str] = []
    index: dict[str, int] = {}
    out = LaunchLog(records=np.zeros(0, LAUNCH_DTYPE), names=names, clock=clock,
                    brackets=np.zeros((0, 3), np.int64), vendor=vendor)
    brackets: list[np.ndarray] = []
    pids: list[int] = []
    for path, one in parts:
        if (one.head["record_clock"], one.head["vendor"]) != (clock, vendor):
            raise LaunchFormatError(f"{path}: {one.head['vendor']} records on {one.head['record_clock']} beside "
                                    f"{first_path}'s {vendor} records on {clock}: read them apart")
        # Each journal numbers its own symbols: renumber into one table.
        remap = np.array([index.setdefault(n, len(index)) for n in one.names], dtype=np.uint32)
        for chunk in one.records:
            chunk = chunk.copy()
            if len(chunk) and int(chunk["symbol"].max()) >= len(remap):
                raise LaunchFormatError(f"{path}: a record names symbol {int(chunk['symbol'].max())} but the "
                                        f"journal holds {len(remap)} kernel names")
            chunk["symbol"] = remap[chunk["symbol"]] if len(chunk) else chunk["symbol"]
            records.append(chunk)
        brackets.extend(one.brackets)
        out.notes.extend(one.notes)
        out.dropped += _count(one.stat, "dropped", path)
        out.vendor_dropped += _count(one.stat, "vendor_dropped", path)
        out.closed = out.closed and one.stat.get("closed") is True
        out.torn_bytes += one.torn_bytes
        if one.torn_reason:
            out.torn_reason = f"{path}: {one.torn_reason}"
        pid = one.head.get("pid")
        pids.append(pid if isinstance(pid, int) else -1)
    names.extend(index)
    if records:
        out.records = np.concatenate(records)
    if brackets:
        out.brackets = np.concatenate(brackets)
    out.pid, out.pids = pids[0], tuple(pids)
    out.paths = tuple(p for p, _ in parts)
    out.heads = tuple(one.head for _, one in parts)
    return out
