"""A recording's journal: the capture streamed to disk as it is taken, so a killed recorder loses at most a second.

A :class:`~fingrav_native.app.PowerRecorder` that saves its capture to
``PATH`` appends, beside it, to ``PATH.journal`` everything the capture will
hold, as it is read: the header (source, sensor model, poll period, metadata,
the energy counter's description), each drain's samples and counter
readings, each burst of clock brackets (CLOCK_REALTIME, CLOCK_BOOTTIME,
CLOCK_MONOTONIC against CLOCK_MONOTONIC_RAW: the raw reads the clock maps
are fitted from) and the sampler's counters. Each drain is one ``write(2)``
to a file opened ``O_APPEND``, so once the call returns the bytes are the
kernel's: a SIGKILL or an out-of-memory kill of the process keeps them (a
power cut keeps what was last ``fsync``'d, at most a second before). When the
recording ends normally the capture is written whole, beside ``PATH`` and
renamed over it, and the journal removed.

Format: 8 magic bytes (:data:`JOURNAL_MAGIC`), then records of a 4-byte tag,
the payload's length (uint64, little-endian), its CRC-32 (uint32) and the
payload: ``HEAD`` / ``STAT`` / ``SENS`` / ``META`` a JSON object, the others
one ``.npy`` array (read without pickles, through the package's guarded
``.npy`` reader). A record cut short, or whose CRC does not match (the
process killed in the middle of a write), ends the journal: it and what
follows are dropped and counted, never read.
"""

from __future__ import annotations

import io
import json
import os
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from fingrav_native._errors import FingravWarning
from fingrav_native.files import _outputs
from fingrav_native.files._safe import loads_json, read_npy

__all__ = ["FRAME", "JOURNAL_MAGIC", "MAX_RECORD_BYTES", "JOURNAL_SUFFIX", "Journal", "JournalContents", "RecoveredCaptureWarning",
           "is_journal", "journal_path", "read_journal"]

#: The first bytes of every journal file (the output guard recognises a journal by them).
JOURNAL_MAGIC = _outputs.JOURNAL_MAGIC

#: What a journal's name adds to its capture's.
JOURNAL_SUFFIX = ".journal"

#: A record's framing: tag, payload length, payload CRC-32.
_FRAME = struct.Struct("<4sQI")

#: Tags whose payload is a JSON object (the last of each kind wins), and the array tags (concatenated in order).
JSON_TAGS = (b"HEAD", b"STAT", b"SENS", b"META")
ARRAY_TAGS = {b"SMPL": "samples", b"CNTR": "counter_samples", b"BRRT": "epoch_brackets",
              b"BRBT": "boottime_brackets", b"BRMO": "monotonic_brackets"}

#: The most one record may hold: far above a drain's (a second of a 1 MHz source is 64 MB).
_MAX_RECORD_BYTES = 1 << 31

#: The framing and the size cap, for the other journal formats (launch journals) that share them.
FRAME = _FRAME
MAX_RECORD_BYTES = _MAX_RECORD_BYTES

#: Data is fsync'd at most this often (s): the page cache already survives a killed process.
FSYNC_EVERY_S = 1.0


class RecoveredCaptureWarning(FingravWarning):
    """A capture was rebuilt from the journal of a recording that did not end: its end may be missing."""


def journal_path(path: str) -> str:
    """The journal beside the capture ``path``."""
    return os.fspath(path) + JOURNAL_SUFFIX


def is_journal(path: str) -> bool:
    """Whether the regular file at ``path`` starts as a journal does."""
    try:
        with open(path, "rb") as f:
            return f.read(len(JOURNAL_MAGIC)) == JOURNAL_MAGIC
    except OSError:
        return False


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def _frame(tag: bytes, payload: bytes) -> bytes:
    return _FRAME.pack(tag, len(payload), zlib.crc32(payload)) + payload


def encode_json(tag: bytes, value: dict[str, Any]) -> bytes:
    """One JSON record (``default`` turns numpy scalars into numbers)."""
    text = json.dumps(value, allow_nan=False, default=lambda v: v.item() if isinstance(v, np.generic) else str(v))
    return _frame(tag, text.encode())


def encode_array(tag: bytes, array: np.ndarray) -> bytes:
    """One array record."""
    return _frame(tag, _npy_bytes(array))


class Journal:
    """An open journal: append whole records, flush each batch, ``fsync`` at most once a second.

    Created with ``O_EXCL``: a journal already there (a recording that was
    killed and not yet read back) is never written over.
    """

    def __init__(self, path: str, header: dict[str, Any]) -> None:
        self.path = path
        self._fd: Optional[int] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
                                          | getattr(os, "O_CLOEXEC", 0), 0o666)
        self._last_sync = 0.0
        self.bytes = 0
        self.append([JOURNAL_MAGIC + encode_json(b"HEAD", header)], sync=True)

    def append(self, records: list[bytes], *, sync: bool = False) -> None:
        """Write ``records`` in one call (the kernel has them when it returns); ``fsync`` if due or asked."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the journal is closed")
        data = b"".join(records)
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.bytes += len(data)
        now = time.monotonic()
        if sync or now - self._last_sync >= FSYNC_EVERY_S:
            os.fsync(self._fd)
            self._last_sync = now

    def close(self) -> None:
        """Flush to disk and close (the file stays)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def remove(self) -> None:
        """Close and delete: the capture it journaled is written whole."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


@dataclass
class JournalContents:
    """What a journal holds: the last of each JSON record, the arrays concatenated, and what was dropped."""

    json: dict[bytes, dict[str, Any]] = field(default_factory=dict)
    arrays: dict[str, list[np.ndarray]] = field(default_factory=dict)
    records: int = 0
    read_bytes: int = 0
    torn_bytes: int = 0
    torn_reason: str = ""


def read_journal(path: str, bad: Callable[[str], Exception]) -> JournalContents:
    """Every whole record of the journal at ``path``; a torn or damaged tail is counted and dropped.

    Raises ``bad(...)`` for a file that is not a journal or whose first
    record (the header) is not whole.
    """
    out = JournalContents()
    with open(path, "rb") as f:
        if f.read(len(JOURNAL_MAGIC)) != JOURNAL_MAGIC:
            raise bad("not a fingrav capture journal (no journal magic at its start)")
        size = os.fstat(f.fileno()).st_size
        pos = len(JOURNAL_MAGIC)
        while pos < size:
            reason = _read_record(f, size - pos, out, bad)
            if reason:
                out.torn_bytes, out.torn_reason = size - pos, reason
                break
            pos = f.tell()
            out.records += 1
        out.read_bytes = pos
    if b"HEAD" not in out.json:
        raise bad(f"the journal's header record is not whole ({out.torn_reason or 'missing'}); nothing to recover")
    return out


def _read_record(f: Any, left: int, out: JournalContents, bad: Callable[[str], Exception]) -> str:
    """Read one record into ``out``; return why it cannot be read ("" when it was)."""
    if left < _FRAME.size:
        return f"a record's frame cut short ({left} bytes)"
    tag, length, crc = _FRAME.unpack(f.read(_FRAME.size))
    if tag not in JSON_TAGS and tag not in ARRAY_TAGS:
        return f"an unknown record tag {tag!r}"
    if length > min(left - _FRAME.size, _MAX_RECORD_BYTES):
        return f"a {tag.decode()} record cut short ({left - _FRAME.size} of its {length} bytes)"
    payload = f.read(length)
    if zlib.crc32(payload) != crc:
        return f"a {tag.decode()} record whose checksum does not match (written in part)"
    if tag in JSON_TAGS:
        value = loads_json(payload, bad, f"the journal's {tag.decode()} record")
        if not isinstance(value, dict):
            return f"a {tag.decode()} record that is not a JSON object"
        out.json[tag] = value
    else:
        array = read_npy(payload, bad, f"the journal's {tag.decode()} record")
        out.arrays.setdefault(ARRAY_TAGS[tag], []).append(array)
    return ""
