"""Reading a power capture back: the saved ``.npz`` and the journal of a recording that did not end.

:func:`load_capture` reads what :meth:`~fingrav_native.files.PowerCapture.save`
wrote, member by member through the loaders' guards (:mod:`fingrav_native.files._safe`);
:func:`recover_capture` rebuilds the capture of a recording whose process was
killed from its journal (:mod:`fingrav_native.files._journal`), saying how much
it recovered. The capture itself, its clock maps and its writer are in
:mod:`fingrav_native.files._capture`.
"""

from __future__ import annotations

import datetime
import json
import os
import warnings
from typing import Any, Callable, Optional, Union

import numpy as np

from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native._version import __version__
from fingrav_native.clocks._epoch import BRACKETED_CLOCKS
from fingrav_native.files._capture import (
    CAPTURE_FORMAT,
    CAPTURE_VERSION,
    JOURNAL_FORMAT,
    JOURNAL_VERSION,
    OTHER_CLOCK_MEMBERS,
    CaptureFormatError,
    PowerCapture,
    check_sensor_fields,
    check_source,
    clock_offsets,
)
from fingrav_native.files._capture_counter import COUNTER_MEMBER, counter_from_file
from fingrav_native.files._journal import RecoveredCaptureWarning, is_journal, journal_path, read_journal
from fingrav_native.files._safe import (
    MAX_JSON_BYTES,
    check_archive,
    file_problem,
    loads_json,
    open_zip,
    read_member,
    read_npy,
    short_repr,
)
from fingrav_native.sensors._model import SensorModel


def load_capture(path: Union[str, os.PathLike[str]]) -> PowerCapture:
    """Read a capture written by :meth:`PowerCapture.save`.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    PowerCapture

    Raises
    ------
    CaptureFormatError
        Naming the path: a directory or other non-file, not a readable
        ``.npz`` (truncated, damaged: the member is named), a file of another
        format, a newer format version (with the version found), more data
        than a capture holds (a zip bomb, an array header declaring more
        than its bytes), a header nested too deep, or missing or malformed
        arrays or header fields (named).
    FileNotFoundError
        No such file.
    ValueError
        ``path`` is not a path.

    Notes
    -----
    The ``.npz`` is read member by member with the size caps and ``.npy``
    header checks of the profile loader (:mod:`fingrav_native.files._safe`),
    never with pickle.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    path = os.fspath(path)
    journal = journal_path(path)
    if not os.path.lexists(path):
        if os.path.lexists(journal):  # the recording's process was killed: the journal is all there is
            return recover_capture(journal, shown=path)
        raise FileNotFoundError(f"{path}: no such power capture file")

    def bad(what: str) -> CaptureFormatError:
        return CaptureFormatError(f"{path}: {what}")

    problem = file_problem(path)
    if problem is not None:
        raise bad(f"{problem}; a power capture is an .npz file")
    if is_journal(path):
        return recover_capture(path, shown=path)
    arrays = _read_arrays(path, bad)
    header = _read_header(arrays["header"], bad)
    capture = _capture_of(header, arrays, bad)
    if os.path.lexists(journal):
        _warn_journal_beside(capture, path, journal)
    return capture


def _capture_of(header: dict[str, Any], arrays: dict[str, np.ndarray], bad: _Bad) -> PowerCapture:
    """The capture a checked header (of this format and a version read) and its arrays hold."""
    _check_contents(header, arrays, bad)
    sensor = _sensor_of(header, bad)
    others = _other_clocks(header, arrays, bad)
    counter = counter_from_file(header, arrays, bad)
    try:
        return PowerCapture(samples=arrays["samples"], epoch_brackets=arrays["epoch_brackets"],
                            source=header["source"], sensor=sensor, period_ns=header["period_ns"],
                            stats=header["stats"], meta=header["meta"], clock_brackets=others, counter=counter)
    except (ValueError, TypeError) as exc:
        raise bad(str(exc)) from exc


def _journal_id(journal: str) -> Optional[str]:
    """The recording id a journal's header names (None: unreadable, or none)."""
    try:
        head = read_journal(journal, CaptureFormatError).json[b"HEAD"]
        rid = head["header"]["meta"]["recording_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return rid if isinstance(rid, str) else None


def _warn_journal_beside(capture: PowerCapture, path: str, journal: str) -> None:
    """A journal beside a whole capture: the same recording (removed but for a kill), or a later one that did not end."""
    if _journal_id(journal) is not None and _journal_id(journal) == capture.meta.get("recording_id"):
        return  # this capture is that recording, written whole; the journal was about to be removed
    warnings.warn(f"{path}: beside it lies {journal}, the journal of another recording to this name that did "
                  f"not end (its process was killed); this is the earlier capture. load({journal!r}) reads "
                  "what the later one recorded", RecoveredCaptureWarning, stacklevel=3)


def recover_capture(journal: str, *, shown: Optional[str] = None) -> PowerCapture:
    """Rebuild the capture of a recording that did not end from its journal, saying how much was recovered.

    Parameters
    ----------
    journal : str
        The journal (``CAPTURE.npz.journal``, files/_journal.py).
    shown : str, optional
        How messages name the capture (default the journal's path).

    Returns
    -------
    PowerCapture
        Every log, counter reading and clock bracket the recorder had
        flushed; ``meta["recovered"]`` (also :attr:`PowerCapture.recovered`)
        says what: the journal, the logs and their span, the bytes of a torn
        last record dropped and why.

    Raises
    ------
    CaptureFormatError
        Not a journal, or one whose header record is not whole or not of
        this format (named).

    Warns
    -----
    RecoveredCaptureWarning
        Always: the span recovered, and that what the recording logged
        after its last flush (at most a second) is missing.
    """
    shown = shown or journal

    def bad(what: str) -> CaptureFormatError:
        return CaptureFormatError(f"{shown}: the journal {journal}: {what}")

    problem = file_problem(journal)
    if problem is not None:
        raise bad(f"{problem}; a journal is a regular file")
    contents = read_journal(journal, bad)
    head = contents.json[b"HEAD"]
    if head.get("format") != JOURNAL_FORMAT or head.get("version") != JOURNAL_VERSION \
            or not isinstance(head.get("header"), dict):
        raise bad(f"its header is not a {JOURNAL_FORMAT} of version {JOURNAL_VERSION}")
    header = dict(head["header"])
    if header.get("format") != CAPTURE_FORMAT or header.get("version") != CAPTURE_VERSION:
        raise bad(f"it journals a {short_repr(header.get('format'))} of version {short_repr(header.get('version'))}, "
                  f"not a {CAPTURE_FORMAT} of version {CAPTURE_VERSION}")
    listed = header.get("clocks")
    clocks: list[Any] = listed if isinstance(listed, list) else []
    # Each clock's brackets are their own record: a journal cut between those of the first burst has no
    # bracketed clock for a clock the header promises, which is a recording that had not started.
    needed = ["epoch_brackets"] + [OTHER_CLOCK_MEMBERS[c] for c in clocks if c in OTHER_CLOCK_MEMBERS]
    if any(m not in contents.arrays for m in needed):
        raise bad(f"it ends before its first clock brackets are whole ({contents.torn_reason or 'none written'}): "
                  "the recording had not started; nothing to recover")
    arrays = _journal_arrays(contents.arrays, header, bad)
    last = contents.json
    meta = {**header.get("meta", {}), **last.get(b"META", {})} if isinstance(header.get("meta"), dict) else \
        header.get("meta")
    stats = last.get(b"STAT", {})
    header.update(stats=stats.get("stats", {}), meta=meta)
    if b"SENS" in last:
        header["sensor"] = last[b"SENS"].get("sensor")
    if isinstance(header.get("counter"), dict):
        header["counter"] = {**header["counter"], "stats": stats.get("counter_stats", {})}
    capture = _capture_of(header, arrays, bad)
    recovered = _recovered(capture, journal, contents)
    capture.meta.update(stopped_epoch_ns=int(capture.epoch_brackets[-1, 1]), recovered=recovered,
                        clock_offsets=clock_offsets({c: capture.brackets(c) for c in capture.clocks}))
    warnings.warn(f"{shown}: {_recovered_words(capture, recovered)}", RecoveredCaptureWarning, stacklevel=3)
    return capture


def _journal_arrays(parts: dict[str, list[np.ndarray]], header: dict[str, Any], bad: _Bad) -> dict[str, np.ndarray]:
    """The journal's array records joined per capture member (a member with no record yet: empty)."""
    arrays: dict[str, np.ndarray] = {}
    for name, chunks in parts.items():
        try:
            arrays[name] = np.concatenate(chunks)
        except ValueError as exc:
            raise bad(f"its {name} records do not join ({exc})") from None
    arrays.setdefault("samples", np.empty(0, dtype=SAMPLE_DTYPE))
    counter = header.get("counter")
    if isinstance(counter, dict) and counter.get("of_logs") is False:
        arrays.setdefault(COUNTER_MEMBER, np.empty(0, dtype=SAMPLE_DTYPE))
    return arrays


def _recovered(capture: PowerCapture, journal: str, contents: Any) -> dict[str, Any]:
    """What :func:`recover_capture` says it recovered (``meta["recovered"]``)."""
    host = np.asarray(capture.samples["host_ns"], dtype=np.int64)
    out: dict[str, Any] = {"journal": os.path.basename(journal), "complete": False, "records": int(contents.records),
                           "logs": len(capture), "first_log_host_ns": int(host.min()) if host.size else None,
                           "last_log_host_ns": int(host.max()) if host.size else None,
                           "span_s": float(host.max() - host.min()) / 1e9 if host.size else 0.0,
                           "first_log_epoch_ns": None, "last_log_epoch_ns": None,
                           "dropped_bytes": int(contents.torn_bytes), "dropped_reason": contents.torn_reason}
    if host.size:
        try:
            ends = capture.epoch_map().to_host_ns(np.array([host.min(), host.max()], dtype=np.int64))
            out.update(first_log_epoch_ns=int(ends[0]), last_log_epoch_ns=int(ends[1]))
        except ValueError:
            pass  # too few brackets to map: the host times still say the span
    return out


def _recovered_words(capture: PowerCapture, r: dict[str, Any]) -> str:
    """The recovery warning's text."""
    def utc(ns: Optional[int]) -> str:
        if ns is None:
            return "?"
        return datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    span = (f"{r['logs']} logs over {r['span_s']:.3f} s, from {utc(r['first_log_epoch_ns'])} to "
            f"{utc(r['last_log_epoch_ns'])} UTC" if r["logs"] else "no logs (the recorder had flushed none)")
    torn = (f"; a last record of {r['dropped_bytes']} bytes, written in part when the process ended, was dropped "
            f"({r['dropped_reason']})" if r["dropped_bytes"] else "")
    return (f"the recording did not end (its process was killed or lost power), rebuilt from its journal "
            f"{r['journal']}: {span}{torn}. What it logged after its last flush (up to a second) is missing; "
            "save() writes the recovered capture whole")


#: Makes the loader's error for a fault (the message names the file).
_Bad = Callable[[str], CaptureFormatError]


def _read_arrays(path: str, bad: _Bad) -> dict[str, np.ndarray]:
    """The ``header``, ``samples`` and bracket members present, through the loaders' guards."""
    zf = open_zip(path, lambda what: bad(f"not a readable {CAPTURE_FORMAT} file (.npz): {what}"))
    with zf:
        budget = check_archive(zf, os.path.getsize(path), bad, max_members=64)
        names = {n[: -len(".npy")] for n in zf.namelist() if n.endswith(".npy")}
        if "header" not in names:
            raise bad(f"not a {CAPTURE_FORMAT} file (no 'header' array; found {sorted(names)[:8]})")
        arrays: dict[str, np.ndarray] = {}
        for key in ("header", "samples", "epoch_brackets", *OTHER_CLOCK_MEMBERS.values(), COUNTER_MEMBER):
            if key in names:
                # The header is a few kB of JSON; only the arrays may be large.
                data = read_member(zf, f"{key}.npy", bad, budget, limit=MAX_JSON_BYTES if key == "header" else None)
                arrays[key] = read_npy(data, bad, f"the array {key!r}")
    return arrays


def _read_header(header_text: np.ndarray, bad: _Bad) -> dict[str, Any]:
    """The header's JSON object, of this format and a version this reader reads."""
    if header_text.ndim != 0 or header_text.dtype.kind != "U":
        raise bad(f"the header is not a string (dtype {header_text.dtype}, shape {header_text.shape})")
    header = loads_json(str(header_text[()]), bad, "the header")
    if not isinstance(header, dict):
        raise bad(f"the header is a {type(header).__name__}, not a JSON object")
    fmt = header.get("format")
    if fmt != CAPTURE_FORMAT:
        raise bad(f"format {short_repr(fmt)}, not {CAPTURE_FORMAT!r}")
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise bad(f"format version {short_repr(version)} is not a version number")
    if version > CAPTURE_VERSION:
        raise bad(f"format version {version} is newer than this fingrav_native ({__version__}) reads "
                  f"(up to {CAPTURE_VERSION}); upgrade fingrav_native")
    return header


def _check_contents(header: dict[str, Any], arrays: dict[str, np.ndarray], bad: _Bad) -> None:
    """Both arrays and every header field present; the source and the dict fields well formed."""
    for key in ("samples", "epoch_brackets"):
        if key not in arrays:
            raise bad(f"the array {key!r} is missing")
    for key in ("source", "period_ns", "stats", "meta"):
        if key not in header:
            raise bad(f"the header field {key!r} is missing")
    problem = check_source(header["source"])
    if problem is not None:
        raise bad(problem)
    for key in ("stats", "meta"):
        if not isinstance(header[key], dict):
            raise bad(f"{key}: expected an object, got {short_repr(header[key])}")


def _other_clocks(header: dict[str, Any], arrays: dict[str, np.ndarray], bad: _Bad) -> dict[str, np.ndarray]:
    """The brackets of the clocks beside CLOCK_REALTIME the header lists (none before version 2)."""
    if header["version"] < 2:
        return {}
    clocks = header.get("clocks")
    if not isinstance(clocks, list) or "CLOCK_REALTIME" not in clocks or \
            any(c not in BRACKETED_CLOCKS for c in clocks) or len(set(clocks)) != len(clocks):
        shown = json.dumps(clocks)[:200] if isinstance(clocks, list) else short_repr(clocks)
        raise bad(f"the header field 'clocks' is {shown}; expected a list of distinct clocks among "
                  f"{', '.join(BRACKETED_CLOCKS)} with CLOCK_REALTIME")
    out: dict[str, np.ndarray] = {}
    for clock in clocks:
        if clock == "CLOCK_REALTIME":
            continue
        member = OTHER_CLOCK_MEMBERS[clock]
        if member not in arrays:
            raise bad(f"the header lists {clock} but the array {member!r} is missing")
        b = arrays[member]
        if b.dtype != np.int64 or b.ndim != 2 or b.shape[1] != 3:
            raise bad(f"the array {member!r} must be (n, 3) int64; it is {b.dtype} of shape {b.shape}")
        out[clock] = b
    return out


def _sensor_of(header: dict[str, Any], bad: _Bad) -> Optional[SensorModel]:
    """The header's sensor model, None when it has none."""
    if header.get("sensor") is None:
        return None
    if not isinstance(header["sensor"], dict):
        raise bad(f"sensor: expected an object, got {type(header['sensor']).__name__}")
    problem = check_sensor_fields(header["sensor"])
    if problem is not None:
        raise bad(problem)
    try:
        return SensorModel.from_dict(header["sensor"])
    except (TypeError, ValueError, KeyError) as exc:
        raise bad(f"sensor: {exc}") from exc
