"""Launch files as the native launch-capture tool writes them, for the tests of ``fingrav run`` and its folder.

The format is the shared contract's: the journal framing of
``files/_journal.py`` (8 magic bytes, then records ``<4sQI`` tag, length,
CRC-32, payload): ``HEAD`` JSON first, ``SYMB`` JSON name tables, ``LNCH``
one ``.npy`` of launch records per drain, ``BRBT`` / ``BRRT`` ``.npy``
(n, 3) int64 clock brackets, ``NOTE`` JSON, ``STAT`` JSON last. Written here
by their own code, never by the reader's, so the two are checked against
each other.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from typing import Any, Optional, Sequence

import numpy as np

from fingrav_native.files._journal import JOURNAL_MAGIC

#: The launch record's layout, field for field as the contract names them (``records.LAUNCH_DTYPE`` mirrors it).
LAUNCH_FIELDS = [("start_ns", "<i8"), ("end_ns", "<i8"), ("correlation_id", "<u8"), ("queue", "<u8"),
                 ("symbol", "<u4"), ("device", "<i4"), ("grid", "<u4", (3,)), ("block", "<u4", (3,)),
                 ("flags", "<u4"), ("reserved", "<u4")]


def launch_dtype() -> np.dtype:
    """The package's LAUNCH_DTYPE where it has one, else the contract's layout."""
    try:
        from fingrav_native.records import LAUNCH_DTYPE

        return np.dtype(LAUNCH_DTYPE)
    except ImportError:
        return np.dtype(LAUNCH_FIELDS)


def _frame(tag: bytes, payload: bytes) -> bytes:
    return struct.pack("<4sQI", tag, len(payload), zlib.crc32(payload)) + payload


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def _json(tag: bytes, value: dict[str, Any]) -> bytes:
    return _frame(tag, json.dumps(value).encode())


def launch_records(names: Sequence[str], start_ns: Any, end_ns: Any, grid: Any, block: Any,
                   device: int = 0) -> tuple[np.ndarray, list[str]]:
    """Launch records of the executions given, with their symbol table (names interned in order of appearance)."""
    table: dict[str, int] = {}
    symbols = [table.setdefault(str(n), len(table)) for n in names]
    rec = np.zeros(len(symbols), dtype=launch_dtype())
    rec["start_ns"], rec["end_ns"] = start_ns, end_ns
    rec["correlation_id"] = np.arange(1, len(rec) + 1)
    rec["queue"] = 1
    rec["symbol"] = symbols
    rec["device"] = device
    rec["grid"], rec["block"] = np.asarray(grid).reshape(-1, 3), np.asarray(block).reshape(-1, 3)
    return rec, list(table)


def write_launch_file(folder: str, records: np.ndarray, names: Sequence[str], brackets: Optional[np.ndarray], *,
                      pid: int = 4242, clock: str = "CLOCK_BOOTTIME", vendor: str = "rocm", dropped: int = 0,
                      vendor_dropped: int = 0, notes: Sequence[tuple[str, str]] = (), closed: bool = True,
                      capacity: int = 1 << 16, drains: int = 2) -> str:
    """Write ``launches.<pid>.journal`` in ``folder`` as the tool does (records in ``drains`` LNCH records)."""
    path = os.path.join(folder, f"launches.{pid}.journal")
    head = {"format": "fingrav-launches", "version": 1, "vendor": vendor, "record_clock": clock, "pid": pid,
            "tool": "fingrav-test", "tool_version": "0", "capacity": capacity}
    parts = [JOURNAL_MAGIC, _json(b"HEAD", head)]
    half = len(names) // 2
    parts += [_json(b"SYMB", {"first": 0, "names": list(names[:half])}),
              _json(b"SYMB", {"first": half, "names": list(names[half:])})]
    for chunk in np.array_split(records, max(1, drains)):
        parts.append(_frame(b"LNCH", _npy(chunk)))
        parts.append(_json(b"STAT", {"records": int(len(records)), "dropped": dropped,
                                     "vendor_dropped": vendor_dropped, "closed": False}))
    if brackets is not None:
        parts.append(_frame(b"BRBT" if clock == "CLOCK_BOOTTIME" else b"BRRT", _npy(np.asarray(brackets, np.int64))))
    parts += [_json(b"NOTE", {"key": k, "text": t}) for k, t in notes]
    parts.append(_json(b"STAT", {"records": int(len(records)), "dropped": dropped, "vendor_dropped": vendor_dropped,
                                 "closed": closed}))
    with open(path, "wb") as f:
        f.write(b"".join(parts))
    return path


def write_run_folder(folder: str, loop: Any, *, shift_launch_clock_ns: int = 0, **launch_options: Any) -> str:
    """A ``fingrav run`` folder of a simulated training loop: its capture and its kernels as launch records.

    ``shift_launch_clock_ns`` moves the launch file's record clock (its
    records and its own brackets alike) against the capture's brackets of
    the same clock: a clock mismatch between the two processes' reads.
    """
    os.makedirs(os.path.join(folder, "launches"), exist_ok=True)
    loop.capture().save(os.path.join(folder, "power.npz"))
    ex = loop.executions
    k = [loop.kernels[i] for i in loop.signature]
    start = loop.to_clock(ex["start_ns"], "CLOCK_BOOTTIME") + shift_launch_clock_ns
    end = loop.to_clock(ex["end_ns"], "CLOCK_BOOTTIME") + shift_launch_clock_ns
    records, names = launch_records([x.name for x in k], start, end, [x.grid for x in k], [x.block for x in k])
    brackets = np.array(loop.clock_brackets["CLOCK_BOOTTIME"], dtype=np.int64)
    brackets[:, 1] += shift_launch_clock_ns
    write_launch_file(os.path.join(folder, "launches"), records, names, brackets, **launch_options)
    return folder
