"""Profile files: versioned, self-describing, no pickle.

A profile file is a zip archive (``.fgprof`` by convention) holding

* ``fingrav.json``: the format name and version, the package versions, and the
  whole :class:`~fingrav_native.method.results.Profile` as a JSON tree. Dataclasses
  are ``{"__class__": name, "fields": {...}}`` with ``name`` one of a fixed
  list of this package's result types (never an import path, so loading a
  file can never run code); arrays are ``{"__array__": key}``; tuples are
  ``{"__tuple__": [...]}``; non-finite floats are ``{"__float__": "nan"}``
  (or ``"inf"``, ``"-inf"``) so the JSON is standard.
* ``arrays/<key>.npy``: each array in NumPy's own ``.npy`` format, written
  and read with ``allow_pickle=False`` (structured dtypes are fine, object
  arrays are refused).

Any tool that reads zip, JSON and ``.npy`` can read a profile without this
package. :func:`load_profile` checks the format name and version first, so a
truncated or foreign file gives :class:`ProfileFormatError` saying which and
why, never a half-built object.
"""

from __future__ import annotations

import dataclasses
import importlib
import io as _io
import json
import math
import os
import zipfile
from typing import Any, Union

import numpy as np

from fingrav_native._version import __version__
from fingrav_native.backends.base import Capabilities
from fingrav_native.method.golden import GoldenSelection
from fingrav_native.method.guidance import Guidance, GuidanceRow
from fingrav_native.method.results import (
    CampaignTimeline,
    ErrorBudget,
    ExecutionProfile,
    InterleavedProfile,
    Profile,
)
from fingrav_native.method.steady import PowerMeasurement, SspSearch, SspStep
from fingrav_native.method.stitch import EnergyEstimate, StitchedChannel, StitchedProfile, WholeRunView
from fingrav_native.multi.results import NodeProfile, NodeView, SteadyCheck
from fingrav_native.sensors.deconvolve import Deconvolution, DeconvolvedChannel
from fingrav_native.sensors.model import SensorModel

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "ProfileFormatError", "save_profile", "load_profile", "export_parquet"]

FORMAT_NAME = "fingrav-profile"
#: Bumped on any change a reader of the previous version would misread.
FORMAT_VERSION = 1
_META = "fingrav.json"

# The only classes a file may name. A name outside this table is an error.
_CLASSES: dict[str, type] = {
    c.__name__: c
    for c in (Profile, CampaignTimeline, ExecutionProfile, InterleavedProfile, ErrorBudget, Capabilities, Guidance, GuidanceRow,
              GoldenSelection, StitchedProfile, StitchedChannel, EnergyEstimate, WholeRunView, SspSearch, SspStep,
              PowerMeasurement, NodeProfile, NodeView, SteadyCheck, Deconvolution, DeconvolvedChannel,
              SensorModel)
}

PathLike = Union[str, "os.PathLike[str]"]


class ProfileFormatError(ValueError):
    """A file is not a readable fingrav profile (truncated, foreign, newer format)."""


class _Writer:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def encode(self, obj: Any, path: str) -> Any:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            name = type(obj).__name__
            if _CLASSES.get(name) is not type(obj):
                raise TypeError(f"{path}: {type(obj).__qualname__} is not a type a profile file may hold")
            return {"__class__": name,
                    "fields": {f.name: self.encode(getattr(obj, f.name), f"{path}.{f.name}")
                               for f in dataclasses.fields(obj)}}
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                raise TypeError(f"{path}: object arrays cannot be stored without pickle")
            key = f"a{len(self.arrays):04d}"
            self.arrays[key] = obj
            return {"__array__": key}
        if isinstance(obj, tuple):
            return {"__tuple__": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if not isinstance(k, str):
                    raise TypeError(f"{path}: dict key {k!r} is not a string")
                out[k] = self.encode(v, f"{path}[{k!r}]")
            return out
        if isinstance(obj, (bool, np.bool_)):
            return bool(obj)
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            v = float(obj)
            if math.isfinite(v):
                return v
            return {"__float__": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
        if obj is None or isinstance(obj, str):
            return obj
        raise TypeError(f"{path}: cannot store a {type(obj).__qualname__}")


_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class _Reader:
    def __init__(self, zf: zipfile.ZipFile, where: str) -> None:
        self.zf = zf
        self.where = where

    def array(self, key: str) -> np.ndarray:
        name = f"arrays/{key}.npy"
        try:
            with self.zf.open(name) as f:
                return np.lib.format.read_array(_io.BytesIO(f.read()), allow_pickle=False)
        except KeyError:
            raise ProfileFormatError(f"{self.where}: array {name} is missing (file truncated or edited)") from None
        except (ValueError, zipfile.BadZipFile, EOFError, OSError) as exc:
            raise ProfileFormatError(f"{self.where}: array {name} is unreadable: {exc}") from exc

    def decode(self, node: Any, float_field: bool = False) -> Any:
        if isinstance(node, dict):
            if "__class__" in node:
                cls = _CLASSES.get(node["__class__"])
                if cls is None:
                    raise ProfileFormatError(f"{self.where}: unknown type {node['__class__']!r} in the file")
                fields = node.get("fields")
                if not isinstance(fields, dict):
                    raise ProfileFormatError(f"{self.where}: {node['__class__']} has no fields")
                names = {f.name for f in dataclasses.fields(cls)}
                # Fields added since a file was written have defaults: an older file lacks them.
                required = {f.name for f in dataclasses.fields(cls)
                            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
                if not required <= set(fields) <= names:
                    raise ProfileFormatError(
                        f"{self.where}: {cls.__name__} fields {sorted(fields)} differ from {sorted(names)}")
                return cls(**{k: self.decode(v) for k, v in fields.items()})
            if "__array__" in node:
                return self.array(str(node["__array__"]))
            if "__float__" in node:
                if node["__float__"] not in _NONFINITE:
                    raise ProfileFormatError(f"{self.where}: bad float {node['__float__']!r}")
                return _NONFINITE[node["__float__"]]
            if "__tuple__" in node:
                return tuple(self.decode(v) for v in node["__tuple__"])
            return {k: self.decode(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        return node


def save_profile(profile: Union[Profile, InterleavedProfile, NodeProfile], path: PathLike) -> str:
    """Write a profile to a versioned, pickle-free file.

    Parameters
    ----------
    profile : Profile, InterleavedProfile or NodeProfile
        A result of :func:`~fingrav_native.profile`,
        :func:`~fingrav_native.profile_interleaved` or the multi-GPU
        drivers (:mod:`fingrav_native.multi.node`).
    path : str or os.PathLike
        Where to write; the file is written to a temporary name beside it and
        renamed, so a crash never leaves a half-written profile under ``path``.

    Returns
    -------
    str
        The path written.

    Notes
    -----
    The file records every setting, the clock-map parameters and the error
    budget with the curves (paper Section IV-B steps 5-8 outputs), so a saved
    profile can be re-plotted or re-exported without the device.
    """
    if not isinstance(profile, (Profile, InterleavedProfile, NodeProfile)):
        raise ValueError(
            f"profile: expected a Profile, InterleavedProfile or NodeProfile, got {type(profile).__name__}")
    w = _Writer()
    tree = w.encode(profile, "profile")
    meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "fingrav_native": __version__,
            "numpy": np.__version__, "root": tree}
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(_META, json.dumps(meta, indent=1, allow_nan=False))
            for key, arr in w.arrays.items():
                buf = _io.BytesIO()
                np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
                zf.writestr(f"arrays/{key}.npy", buf.getvalue())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load_profile(path: PathLike) -> Union[Profile, InterleavedProfile, NodeProfile]:
    """Read a profile written by :func:`save_profile`.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    Profile, InterleavedProfile or NodeProfile

    Raises
    ------
    ProfileFormatError
        The file is truncated, not a fingrav profile, or of a newer format
        version; the message says which.
    FileNotFoundError
        No such file.

    Notes
    -----
    Nothing in the file is executed: types are looked up in a fixed table and
    arrays are read with ``allow_pickle=False`` (paper Section IV-B's results
    are plain arrays and numbers).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"path={path!r}: no such file")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ProfileFormatError(f"{path}: not a fingrav profile (not a zip archive, or truncated): {exc}") from exc
    with zf:
        try:
            raw = zf.read(_META)
        except KeyError:
            raise ProfileFormatError(f"{path}: not a fingrav profile (no {_META} inside)") from None
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise ProfileFormatError(f"{path}: {_META} is unreadable (truncated?): {exc}") from exc
        try:
            meta = json.loads(raw)
        except ValueError as exc:
            raise ProfileFormatError(f"{path}: {_META} is not valid JSON: {exc}") from exc
        if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
            got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise ProfileFormatError(f"{path}: format {got!r} is not {FORMAT_NAME!r}")
        version = meta.get("format_version")
        if not isinstance(version, int) or version < 1:
            raise ProfileFormatError(f"{path}: format_version {version!r} is not a positive integer")
        if version > FORMAT_VERSION:
            raise ProfileFormatError(
                f"{path}: format version {version} is newer than this fingrav-native reads ({FORMAT_VERSION}); "
                f"written by fingrav-native {meta.get('fingrav_native')}: upgrade to read it")
        result = _Reader(zf, path).decode(meta.get("root"))
    if not isinstance(result, (Profile, InterleavedProfile, NodeProfile)):
        raise ProfileFormatError(f"{path}: the file holds a {type(result).__name__}, not a profile")
    return result


def _table_columns(arr: np.ndarray) -> dict[str, np.ndarray]:
    return {name: np.ascontiguousarray(arr[name]) for name in arr.dtype.names or ()}


def export_parquet(profile: Union[Profile, InterleavedProfile], directory: PathLike) -> list[str]:
    """Write a profile's tables as Parquet files (needs pyarrow).

    Parameters
    ----------
    profile : Profile or InterleavedProfile
    directory : str or os.PathLike
        Created if missing. Files: ``lois_<label>.parquet`` (one row per log
        of interest), ``curve_<label>.parquet`` (binned means, intervals and
        the fit's grid, per channel), ``executions.parquet`` and
        ``logs.parquet`` (the campaign on host time).

    Returns
    -------
    list of str
        Paths written.

    Notes
    -----
    The tables are paper Section IV-B's step 6 (LOIs) and step 8 (stitched
    profile) outputs, for analysis in pandas, Polars or Spark.
    """
    try:
        # Through importlib: pyarrow ships no type information, and it is optional.
        pa = importlib.import_module("pyarrow")
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError as exc:
        raise ImportError("Parquet export needs pyarrow: pip install pyarrow") from exc
    if isinstance(profile, InterleavedProfile):
        profiles = dict(profile.reference.profiles, interleaved=profile.scenario)
        timeline = profile.reference.timeline
        kernel = profile.reference.kernel
    elif isinstance(profile, Profile):
        profiles, timeline, kernel = profile.profiles, profile.timeline, profile.kernel
    else:
        raise ValueError(f"profile: expected a Profile or InterleavedProfile, got {type(profile).__name__}")
    out = os.fspath(directory)
    os.makedirs(out, exist_ok=True)
    meta = {b"fingrav.kernel": kernel.encode(), b"fingrav.format_version": str(FORMAT_VERSION).encode()}
    written: list[str] = []

    def put(name: str, cols: dict[str, Any]) -> None:
        table = pa.table(cols).replace_schema_metadata(meta)
        path = os.path.join(out, f"{name}.parquet")
        pq.write_table(table, path)
        written.append(path)

    for label, ep in profiles.items():
        put(f"lois_{label}", _table_columns(ep.lois))
        columns = ("channel", "kind", "x", "mean", "sd", "ci_low", "ci_high", "count")
        rows: dict[str, list[Any]] = {k: [] for k in columns}
        for ch in ep.stitched.channels:
            n = len(ch.bin_centres)
            rows["channel"] += [ch.name] * n
            rows["kind"] += ["bin"] * n
            rows["x"] += list(map(float, ch.bin_centres))
            rows["mean"] += list(map(float, ch.mean))
            rows["sd"] += list(map(float, ch.sd))
            rows["ci_low"] += list(map(float, ch.ci_low))
            rows["ci_high"] += list(map(float, ch.ci_high))
            rows["count"] += list(map(int, ch.count))
            m = len(ch.fit_x)
            rows["channel"] += [ch.name] * m
            rows["kind"] += ["fit"] * m
            rows["x"] += list(map(float, ch.fit_x))
            rows["mean"] += list(map(float, ch.fit_y))
            for k in ("sd", "ci_low", "ci_high"):
                rows[k] += [float("nan")] * m
            rows["count"] += [0] * m
        put(f"curve_{label}", rows)
    if timeline is not None:
        put("executions", _table_columns(timeline.executions))
        put("logs", _table_columns(timeline.logs))
    return written
