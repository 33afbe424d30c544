"""One save and one load for everything the package writes (``fingrav_native.save`` / ``load``).

Every format is a member of one family: a zip archive (profiles: ``fingrav.json``
beside ``arrays/*.npy``; captures and recordings: numpy ``.npz`` with a JSON
``header``) or a JSON document (sensor characterisations), each naming its
``format`` and ``version``. :func:`load` sniffs which and hands the file to
that format's guarded reader (size caps, regular files only, JSON depth,
.npy headers: ``files/_safe.py``); files of earlier versions still load.
"""

from __future__ import annotations

import json
import os
from typing import Any, Union

import numpy as np

from fingrav_native._errors import FingravError
from fingrav_native.files._capture import PowerCapture
from fingrav_native.files._capture_read import load_capture
from fingrav_native.files._characterisation import load_characterisation, save_characterisation
from fingrav_native.files._journal import JOURNAL_MAGIC, journal_path
from fingrav_native.files._outputs import check_output_path, json_problem, json_scalar
from fingrav_native.files._profiles import ProfileFormatError, load_profile, save_profile
from fingrav_native.files._safe import (
    MAX_JSON_DEPTH,
    check_archive,
    file_problem,
    loads_json,
    open_zip,
    read_member,
    read_npy,
    save_npz_atomically,
)
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.method._results import InterleavedProfile, Profile
from fingrav_native.multi._results import NodeProfile
from fingrav_native.records._recording import Recording
from fingrav_native.sensors._characterize import Characterisation
from fingrav_native.sensors._model import SensorModel

__all__ = ["RECORDING_FORMAT", "RecordingFormatError", "load", "load_recording", "save", "save_recording"]

PathLike = Union[str, "os.PathLike[str]"]

#: The ``format`` a recording file's header names; bumped ``version`` on any change an older reader would misread.
RECORDING_FORMAT = "fingrav-recording"
RECORDING_VERSION = 1


class RecordingFormatError(ValueError, FingravError):
    """A recording file that is damaged, of another format or of a newer version."""


def _path(path: Any) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    return os.fspath(path)


def save_recording(recording: Recording, path: PathLike) -> str:
    """Write a :class:`Recording` atomically as ``.npz`` (arrays) with a JSON header; return the path.

    Parameters
    ----------
    recording : Recording
    path : str or path-like

    Returns
    -------
    str
    """
    if not isinstance(recording, Recording):
        raise ValueError(f"recording: must be a Recording, got {type(recording).__name__}")
    p = _path(path)
    domains = sorted(recording.clocks)
    # Arrays in the provenance (a simulator's truth per execution, say) travel as members of their own,
    # exact in dtype and value; the rest is JSON.
    bad_key = next((k for k in recording.provenance if not isinstance(k, str)), None)
    if bad_key is not None:
        raise ValueError(f"recording: provenance key {bad_key!r} is not a string; nothing was written")
    array_keys = sorted(k for k, v in recording.provenance.items() if isinstance(v, np.ndarray))
    prov = {k: v for k, v in recording.provenance.items() if k not in array_keys}
    header = {"format": RECORDING_FORMAT, "version": RECORDING_VERSION, "clock_domains": domains,
              "has_executions": recording.executions is not None, "has_markers": recording.markers is not None,
              "sensor": None if recording.sensor is None else recording.sensor.as_dict(),
              "source": recording.source, "provenance": prov, "array_provenance": array_keys}
    # What load_recording would refuse or read back changed (a NaN, a key 1 read as "1") is refused now.
    problem = json_problem(header, "recording", MAX_JSON_DEPTH)
    if problem is not None:
        raise ValueError(f"{problem}: its source and provenance must be JSON-ready and finite; nothing was written")
    try:
        text = json.dumps(header, allow_nan=False, default=json_scalar)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"recording: its source and provenance must be JSON-ready and finite ({exc})") from None
    arrays: dict[str, np.ndarray] = {"samples": np.ascontiguousarray(recording.samples), "header": np.array(text)}
    if recording.executions is not None:
        arrays["executions"] = np.ascontiguousarray(recording.executions)
    if recording.markers is not None:
        arrays["markers"] = np.ascontiguousarray(recording.markers)
    for i, d in enumerate(domains):
        arrays[f"clock{i}"] = np.ascontiguousarray(recording.clocks[d])
    for i, k in enumerate(array_keys):
        if recording.provenance[k].dtype.hasobject:
            raise ValueError(f"recording: provenance[{k!r}] holds Python objects; only plain arrays are saved")
        arrays[f"prov{i}"] = np.asarray(recording.provenance[k], order="C")  # 0-d stays 0-d
    return save_npz_atomically(check_output_path(p, "path", writes="recording"), arrays, "recording")


def load_recording(path: PathLike) -> Recording:
    """Read a file written by :func:`save_recording`, through the package's guarded reader.

    Raises
    ------
    RecordingFormatError
        Naming the file and the field that is wrong (or that it is not a
        regular file).
    FileNotFoundError
        No such file.
    """
    p = _path(path)
    if not os.path.lexists(p):
        raise FileNotFoundError(f"path={p!r}: no such recording file")

    def bad(msg: str) -> RecordingFormatError:
        return RecordingFormatError(f"{p}: {msg}")

    # A regular file only, as every loader: a FIFO would block the open, a device never end.
    problem = file_problem(p)
    if problem is not None:
        raise bad(f"{problem}; a recording is an .npz file")
    with open_zip(p, bad) as zf:
        budget = check_archive(zf, os.path.getsize(p), bad, max_members=64)
        names = set(zf.namelist())
        if "header.npy" not in names or "samples.npy" not in names:
            raise bad("not a fingrav recording (no header.npy and samples.npy members)")

        def member(name: str) -> np.ndarray:
            return read_npy(read_member(zf, name + ".npy", bad, budget), bad, name)

        raw = member("header")
        if raw.dtype.kind != "U" or raw.ndim != 0:
            raise bad("header: must be a JSON string")
        header = loads_json(str(raw[()]), bad, "header")
        if not isinstance(header, dict) or header.get("format") != RECORDING_FORMAT:
            raise bad(f"header.format: must be {RECORDING_FORMAT!r}")
        if not isinstance(header.get("version"), int) or not 1 <= header["version"] <= RECORDING_VERSION:
            raise bad(f"header.version: {header.get('version')!r} is not one this version reads (1..{RECORDING_VERSION})")
        domains = header.get("clock_domains")
        if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
            raise bad("header.clock_domains: must be a list of names")
        array_keys = header.get("array_provenance", [])
        prov = header.get("provenance") or {}
        if not isinstance(array_keys, list) or not all(isinstance(k, str) for k in array_keys) \
                or not isinstance(prov, dict):
            raise bad("header.provenance / header.array_provenance: must be an object and a list of names")
        try:
            sensor = None if header.get("sensor") is None else SensorModel.from_dict(header["sensor"])
            return Recording(samples=member("samples"),
                             executions=member("executions") if header.get("has_executions") else None,
                             markers=member("markers") if header.get("has_markers") else None,
                             clocks={d: member(f"clock{i}") for i, d in enumerate(domains)},
                             sensor=sensor, source=header.get("source") or {},
                             provenance={**prov, **{k: member(f"prov{i}") for i, k in enumerate(array_keys)}})
        except (ValueError, TypeError, KeyError) as exc:
            raise bad(f"malformed recording: {exc}") from None


def save(obj: Any, path: PathLike) -> str:
    """Save any result or recording of the package; :func:`load` reads it back.

    Parameters
    ----------
    obj : Profile, InterleavedProfile, NodeProfile, TraceProfile, Recording, PowerCapture or Characterisation
    path : str or path-like

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ValueError
        ``obj`` is of a type the package does not save.
    """
    if isinstance(obj, (Profile, InterleavedProfile, NodeProfile, TraceProfile)):
        return save_profile(obj, path)
    if isinstance(obj, Recording):
        return save_recording(obj, path)
    if isinstance(obj, PowerCapture):
        return obj.save(_path(path))
    if isinstance(obj, Characterisation):
        return save_characterisation(obj, _path(path))
    raise ValueError(f"obj: cannot save a {type(obj).__name__}; save takes a Profile, InterleavedProfile, "
                     "NodeProfile, TraceProfile, Recording, PowerCapture or Characterisation")


def load(path: PathLike) -> Any:
    """Load any file :func:`save` wrote: the format is read from the file, not its name.

    Returns
    -------
    Profile, InterleavedProfile, NodeProfile, TraceProfile, Recording, PowerCapture or Characterisation
        A capture whose recorder was killed (``PATH`` missing, ``PATH.journal``
        beside it, or the journal itself) is rebuilt from the journal with a
        :class:`~fingrav_native.files.RecoveredCaptureWarning` saying how much
        (:func:`~fingrav_native.files.load_capture`).

    Raises
    ------
    ValueError
        The file is none of those (its format error names the file and what is wrong:
        :class:`ProfileFormatError`, :class:`CaptureFormatError`, ...).
    FileNotFoundError
        No such file (named).
    """
    p = _path(path)
    if not os.path.lexists(p) and os.path.lexists(journal_path(p)):
        return load_capture(p)  # a recording whose process was killed: rebuilt from its journal, with a warning
    if not os.path.lexists(p):
        raise FileNotFoundError(f"path={p!r}: no such file")
    problem = file_problem(p)
    if problem is not None:
        raise ValueError(f"path={p!r}: {problem}")
    with open(p, "rb") as f:
        head = f.read(64)
    if head.startswith(JOURNAL_MAGIC):
        return load_capture(p)
    if head.startswith(b"PK"):
        def bad(msg: str) -> ProfileFormatError:
            return ProfileFormatError(f"{p}: {msg}")

        with open_zip(p, bad) as zf:
            names = set(zf.namelist())
        if "fingrav.json" in names:
            return load_profile(p)
        if "epoch_brackets.npy" in names:
            return load_capture(p)
        if "header.npy" in names:
            return load_recording(p)
        raise ValueError(f"path={p!r}: a zip archive of no fingrav format (no fingrav.json or header.npy member)")
    if head.lstrip()[:1] == b"{":
        return load_characterisation(p)
    raise ValueError(f"path={p!r}: not a file of fingrav-native (neither a zip archive nor a JSON document)")
