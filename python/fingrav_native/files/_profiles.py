"""Profile files: versioned, self-describing, no pickle.

A profile file is a zip archive (``.fgprof`` by convention) holding

* ``fingrav.json``: the format name and version, the package versions, and the
  whole :class:`~fingrav_native.method.Profile` as a JSON tree. Dataclasses
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
why, never a half-built object. It then refuses, with the same error naming
the file, anything a damaged or hostile file can do to a reader: a member
whose data does not match its CRC or whose stream is damaged, members that
expand past 8 GiB or 200 times the file's size (a zip bomb), ``.npy``
headers whose shape does not match their bytes, JSON nested deeper than 64
levels, and any field whose value does not have its annotated type, shape
or the invariants of its result type (the field's path is named:
``profile.profiles['sse'].golden.run_ids``). The limits and why they are
what they are: :mod:`fingrav_native.files._safe`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import io as _io
import json
import math
import os
import re
import types
import typing
import zipfile
from typing import Any, Callable, Sequence, Union

import numpy as np

from fingrav_native._version import __version__
from fingrav_native.files._safe import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    ArchiveBudget,
    check_archive,
    file_problem,
    json_too_deep,
    loads_json,
    open_zip,
    read_member,
    read_npy,
    short_repr,
)
from fingrav_native.method._deconvolve import Deconvolution, DeconvolvedChannel
from fingrav_native.method._golden import GoldenSelection
from fingrav_native.method._guidance import Guidance, GuidanceRow
from fingrav_native.method._results import (
    LOG_DTYPE,
    CampaignTimeline,
    ErrorBudget,
    ExecutionProfile,
    InterleavedProfile,
    Profile,
)
from fingrav_native.method._steady import PowerMeasurement, SspSearch, SspStep
from fingrav_native.method._stitch import EnergyEstimate, StitchedChannel, StitchedProfile, WholeRunView
from fingrav_native.multi._results import NodeProfile, NodeView, SteadyCheck
from fingrav_native.records._layouts import LOI_DTYPE, validate_executions
from fingrav_native.records._recording import Capabilities
from fingrav_native.sensors._model import SensorModel

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


_SPECIAL = ("__class__", "__array__", "__tuple__", "__float__")


# Array keys as the writer makes them (a0000, a0001, ...).
_ARRAY_KEY = re.compile(r"a[0-9]{4,9}")


_MODES = ("sse", "ssp", "both")


_PROFILE_TYPES = (Profile, InterleavedProfile, NodeProfile)


@functools.lru_cache(maxsize=None)
def _schema(cls: type) -> tuple[dict[str, Any], frozenset[str], tuple[str, ...]]:
    """A class's field annotations (resolved), its required fields and all field names in order."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    # Fields added since a file was written have defaults: an older file lacks them.
    required = frozenset(f.name for f in fields
                         if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    return {f.name: hints[f.name] for f in fields}, required, tuple(f.name for f in fields)


def _special(node: Any, key: str) -> bool:
    """``node`` is the writer's encoding of an array, tuple or non-finite float (``key``)."""
    return isinstance(node, dict) and key in node


def _kind(node: Any) -> str:
    """What a JSON node is, for messages."""
    if node is None:
        return "null"
    if isinstance(node, bool):
        return f"a bool ({node})"
    if isinstance(node, int):
        return f"an integer ({short_repr(node)})"
    if isinstance(node, float):
        return f"a number ({node!r})"
    if isinstance(node, str):
        return f"a string ({short_repr(node)})"
    if isinstance(node, list):
        return f"a list of {len(node)} items"
    if isinstance(node, dict):
        if "__class__" in node:
            return f"a {short_repr(node['__class__'])} object"
        for key, what in (("__array__", "an array"), ("__tuple__", "a tuple"), ("__float__", "a non-finite number")):
            if key in node:
                return what
        return f"an object of {len(node)} keys"
    return f"a {type(node).__name__}"


def _describe(tp: Any) -> str:
    """An annotation in words, for messages."""
    if tp is Any:
        return "any value"
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if tp is np.ndarray or origin is np.ndarray:
        return "an array"
    if origin is tuple:
        return "a tuple"
    if origin is list:
        return "a list"
    if origin is dict:
        return "an object (a dict)"
    if isinstance(tp, type):
        article = "an" if tp.__name__[0] in "aeiouAEIOU" else "a"
        return f"{article} {tp.__name__}"
    return str(tp)


def _fits(node: Any, tp: Any) -> bool:
    """Whether ``node`` has the JSON form of ``tp`` (to choose an alternative of a Union)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if tp is type(None):
        return node is None
    if tp is bool:
        return isinstance(node, bool)
    if tp is int:
        return type(node) is int
    if tp is float:
        return type(node) in (int, float) or _special(node, "__float__")
    if tp is str:
        return isinstance(node, str)
    if tp is np.ndarray or origin is np.ndarray:
        return _special(node, "__array__")
    if origin is tuple:
        return _special(node, "__tuple__")
    if origin is list:
        return isinstance(node, list)
    if origin is dict:
        return isinstance(node, dict) and not any(k in node for k in _SPECIAL)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return isinstance(node, dict) and node.get("__class__") == tp.__name__
    return False


Fail = Callable[[str, str], ProfileFormatError]


def _numbers(v: dict[str, Any], name: str, kind: str, ndim: int, fail: Fail) -> np.ndarray:
    """Check that field ``name`` is a plain ``ndim``-D array of ``kind`` numbers."""
    return _numbers_of(v[name], f".{name}", kind, ndim, fail)


def _numbers_of(a: Any, where: str, kind: str, ndim: int, fail: Fail) -> np.ndarray:
    # Real-valued fields take integers too (times may be int64 ns); empty arrays carry no wrong value.
    kinds = {"real": "fiu", "int": "iu", "bool": "b"}[kind]
    if not isinstance(a, np.ndarray):
        raise fail(where, f"expected an array, got a {type(a).__name__}")
    if a.dtype.names is not None or a.dtype.subdtype is not None or (
            a.dtype.kind not in kinds and not (a.size == 0 and a.dtype.kind in "biuf")):
        raise fail(where, f"must hold {kind} values, got dtype {a.dtype}")
    if a.ndim != ndim:
        raise fail(where, f"must be {ndim}-D, got shape {a.shape}")
    return a


def _records(a: np.ndarray, dtype: np.dtype, what: str, where: str, fail: Fail) -> np.ndarray:
    """``a`` as ``dtype`` records: as is, or an older layout (same fields) converted (float ns rounded)."""
    if a.ndim != 1:
        raise fail(where, f"must be a 1-D {what} array, got shape {a.shape}")
    if a.dtype == dtype:
        return a
    names = dtype.names or ()
    if a.dtype.names is None or set(a.dtype.names) != set(names):
        raise fail(where, f"must be a {what} record array with fields {list(names)}, got dtype {a.dtype}")
    out = np.zeros(len(a), dtype=dtype)
    for n in names:
        src, dst = a.dtype[n], dtype[n]
        col = a[n]
        if src.shape != dst.shape:
            raise fail(where, f"field {n!r} has shape {src.shape}, not {dst.shape}")
        if np.can_cast(src, dst, "safe"):
            out[n] = col
            continue
        if src.kind in "iuf" and dst.kind in "iu":
            # Older files held times as float64 ns: rounded to the ns, as the current writer does.
            info = np.iinfo(dst)
            vals = np.rint(col) if src.kind == "f" else col
            if src.kind == "f" and not np.all(np.isfinite(vals)):
                raise fail(where, f"field {n!r} holds non-finite values, which {dst} cannot")
            if vals.size and (vals.min() < info.min or vals.max() > info.max):
                raise fail(where, f"field {n!r} holds values outside {dst}'s range")
            out[n] = vals.astype(dst)
            continue
        if src.kind in "iuf" and dst.kind == "f":
            out[n] = col
            continue
        raise fail(where, f"field {n!r} is {src}, which does not convert to {dst}")
    return out


def _count(v: dict[str, Any], name: str, fail: Fail, low: int = 0) -> None:
    if v[name] < low:
        raise fail(f".{name}", f"must be >= {low}, got {v[name]}")


def _unique_ids(a: np.ndarray, where: str, fail: Fail) -> None:
    if len(np.unique(a)) != len(a):
        raise fail(where, "holds a run id more than once")


def _subset(a: np.ndarray, of: np.ndarray, where: str, what: str, fail: Fail) -> None:
    extra = np.setdiff1d(a, of)
    if extra.size:
        raise fail(where, f"run {int(extra[0])} is not among {what}")


def _same_length(v: dict[str, Any], names: Sequence[str], n: int, what: str, fail: Fail) -> None:
    for name in names:
        if len(v[name]) != n:
            raise fail(f".{name}", f"has {len(v[name])} values for {n} {what}")


def _check_profile(v: dict[str, Any], fail: Fail) -> None:
    if not v["kernel"].strip():
        raise fail(".kernel", "is empty; a profile names its kernel")
    if v["mode"] not in _MODES:
        raise fail(".mode", f"{short_repr(v['mode'])} is not one of {_MODES}")
    if not v["profiles"]:
        raise fail(".profiles", "is empty; a profile holds at least one execution of interest")
    if not all(label.strip() for label in v["profiles"]):
        raise fail(".profiles", "has an empty label")
    _count(v, "runs", fail)


def _check_timeline(v: dict[str, Any], fail: Fail) -> None:
    try:
        v["executions"] = validate_executions(v["executions"], "executions")
    except ValueError as exc:
        msg = str(exc)
        raise fail(".executions", msg.removeprefix("executions: ")) from None
    v["logs"] = _records(v["logs"], LOG_DTYPE, "LOG_DTYPE", ".logs", fail)
    _numbers(v, "golden_runs", "int", 1, fail)
    _unique_ids(v["golden_runs"], ".golden_runs", fail)
    _subset(v["golden_runs"], v["executions"]["run"], ".golden_runs", "the runs in executions", fail)


def _check_execution_profile(v: dict[str, Any], fail: Fail) -> None:
    v["lois"] = _records(v["lois"], LOI_DTYPE, "LOI_DTYPE", ".lois", fail)
    _count(v, "executions_per_run", fail, low=1)
    _count(v, "loi_target", fail)
    _count(v, "top_up_runs", fail)
    golden = v["golden"].run_ids
    if golden is not None:
        # LOIs are logs of the golden runs (paper Section IV-B step 6).
        _subset(v["lois"]["run"], golden, ".lois['run']", "the golden runs (golden.run_ids)", fail)
        _subset(v["stitched"].runs, golden, ".stitched.runs", "the golden runs (golden.run_ids)", fail)


def _check_golden(v: dict[str, Any], fail: Fail) -> None:
    mask = _numbers(v, "mask", "bool", 1, fail)
    if v["total"] != len(mask):
        raise fail(".total", f"is {v['total']} but mask has {len(mask)} entries")
    if v["count"] != int(np.count_nonzero(mask)):
        raise fail(".count", f"is {v['count']} but mask selects {int(np.count_nonzero(mask))}")
    _count(v, "tied_windows", fail)
    if v["run_ids"] is not None:
        ids = _numbers(v, "run_ids", "int", 1, fail)
        if len(ids) != v["count"]:
            raise fail(".run_ids", f"has {len(ids)} runs for count {v['count']}")
        _unique_ids(ids, ".run_ids", fail)


def _check_stitched(v: dict[str, Any], fail: Fail) -> None:
    _unique_ids(_numbers(v, "runs", "int", 1, fail), ".runs", fail)
    _count(v, "n_lois", fail)


def _check_channel(v: dict[str, Any], fail: Fail) -> None:
    for name in ("bin_edges", "bin_centres", "mean", "sd", "ci_low", "ci_high", "fit_x", "fit_y"):
        _numbers(v, name, "real", 1, fail)
    for name in ("fit_low", "fit_high"):
        if name in v:
            _numbers(v, name, "real", 1, fail)
    count = _numbers(v, "count", "int", 1, fail)
    n = len(v["bin_centres"])
    if len(v["bin_edges"]) != n + 1 and not (n == 0 and len(v["bin_edges"]) == 0):
        raise fail(".bin_edges", f"has {len(v['bin_edges'])} edges for {n} bins")
    _same_length(v, ("count", "mean", "sd", "ci_low", "ci_high"), n, "bins", fail)
    if count.size and count.min() < 0:
        raise fail(".count", "holds a negative count")
    _same_length(v, ("fit_y",), len(v["fit_x"]), "fit_x points", fail)
    for name in ("fit_low", "fit_high"):
        # Empty in files written before the band existed.
        if name in v and len(v[name]) not in (0, len(v["fit_x"])):
            raise fail(f".{name}", f"has {len(v[name])} values for {len(v['fit_x'])} fit_x points")
    _count(v, "n_lois", fail)


def _check_whole_run(v: dict[str, Any], fail: Fail) -> None:
    for name in ("t_ns", "value", "boundary_start_ns", "boundary_end_ns"):
        _numbers(v, name, "real", 1, fail)
    for name in ("run", "execution", "execution_index", "runs"):
        _numbers(v, name, "int", 1, fail)
    _same_length(v, ("value", "run", "execution"), len(v["t_ns"]), "logs (t_ns)", fail)
    _same_length(v, ("boundary_start_ns", "boundary_end_ns"), len(v["execution_index"]), "boundaries", fail)


def _check_deconvolution(v: dict[str, Any], fail: Fail) -> None:
    edges = _numbers(v, "bin_edges", "real", 1, fail)
    n = max(len(edges) - 1, 0)
    _numbers(v, "resolution_ns_per_bin", "real", 1, fail)
    _numbers(v, "logs_per_bin", "real", 1, fail)
    _numbers(v, "run_ids", "int", 1, fail)
    _same_length(v, ("resolution_ns_per_bin", "logs_per_bin"), n, "bins", fail)
    for i, ch in enumerate(v["channels"]):
        for name in ("curve", "low", "high", "sd"):
            if len(getattr(ch, name)) != n:
                raise fail(f".channels[{i}].{name}", f"has {len(getattr(ch, name))} values for {n} bins")
    for name in ("n_logs", "n_runs", "edge_logs", "dropped_logs"):
        _count(v, name, fail)


def _check_deconvolved_channel(v: dict[str, Any], fail: Fail) -> None:
    for name in ("curve", "low", "high", "sd"):
        _numbers(v, name, "real", 1, fail)


def _check_node_profile(v: dict[str, Any], fail: Fail) -> None:
    n = len(v["ranks"])
    if n == 0:
        raise fail(".ranks", "is empty; a node profile holds at least one rank")
    _same_length(v, ("alignments", "shares_host_clock", "timelines", "lois", "steady"), n, "ranks", fail)
    if not 0 <= v["root"] < n:
        raise fail(".root", f"{v['root']} is not a rank (0 to {n - 1})")
    _numbers(v, "alignment_bound_ns", "real", 1, fail)
    _same_length(v, ("alignment_bound_ns",), n, "ranks", fail)
    lois = []
    for i, a in enumerate(v["lois"]):
        lois.append(_records(a, LOI_DTYPE, "LOI_DTYPE", f".lois[{i}]", fail))
    v["lois"] = tuple(lois)
    for label, view in v["node"].items():
        m = len(view.fraction)
        for c, a in view.per_rank.items():
            if a.shape != (n, m):
                raise fail(f".node[{label!r}].per_rank[{c!r}]", f"has shape {a.shape}, not ({n} ranks, {m} points)")
        if len(view.duration_ns) != n:
            raise fail(f".node[{label!r}].duration_ns", f"has {len(view.duration_ns)} values for {n} ranks")


def _check_node_view(v: dict[str, Any], fail: Fail) -> None:
    m = len(_numbers(v, "fraction", "real", 1, fail))
    _numbers(v, "duration_ns", "real", 1, fail)
    for c, a in v["per_rank"].items():
        _numbers_of(a, f".per_rank[{c!r}]", "real", 2, fail)
    for c, a in v["total"].items():
        if len(_numbers_of(a, f".total[{c!r}]", "real", 1, fail)) != m:
            raise fail(f".total[{c!r}]", f"has {len(a)} values for {m} points of fraction")


def _check_interleaved(v: dict[str, Any], fail: Fail) -> None:
    for i, (label, count) in enumerate(v["preceded_by"]):
        if not label or count < 0:
            raise fail(f".preceded_by[{i}]", f"({short_repr(label)}, {count}) is not a kernel and a count >= 0")


# What each class must satisfy beyond its field types (a checker may convert fields: old record layouts).
_INVARIANTS: dict[type, Callable[..., None]] = {
    Profile: _check_profile,
    CampaignTimeline: _check_timeline,
    ExecutionProfile: _check_execution_profile,
    GoldenSelection: _check_golden,
    StitchedProfile: _check_stitched,
    StitchedChannel: _check_channel,
    WholeRunView: _check_whole_run,
    Deconvolution: _check_deconvolution,
    DeconvolvedChannel: _check_deconvolved_channel,
    NodeProfile: _check_node_profile,
    NodeView: _check_node_view,
    InterleavedProfile: _check_interleaved,
}


class _Reader:
    """Decodes the JSON tree against the dataclasses' annotations, naming the field path of any fault."""

    def __init__(self, zf: zipfile.ZipFile, where: str, budget: ArchiveBudget) -> None:
        self.zf = zf
        self.where = where
        self.budget = budget
        self.keys: set[str] = set()

    def fail(self, path: str, what: str) -> ProfileFormatError:
        return ProfileFormatError(f"{self.where}: {path}: {what}")

    def array(self, node: dict[str, Any], path: str) -> np.ndarray:
        key = node["__array__"]
        if len(node) != 1 or not isinstance(key, str) or not _ARRAY_KEY.fullmatch(key):
            raise self.fail(path, f"malformed array reference {short_repr(node)}")
        if key in self.keys:
            # The writer stores every array once; a second reference would make one array count twice.
            raise self.fail(path, f"array {key} is referenced twice")
        self.keys.add(key)
        name = f"arrays/{key}.npy"

        def bad(what: str) -> ProfileFormatError:
            return self.fail(path, what)

        try:
            data = read_member(self.zf, name, bad, self.budget)
        except KeyError:
            raise self.fail(path, f"array {name} is missing (file truncated or edited)") from None
        return read_npy(data, bad, f"array {name}")

    def nonfinite(self, node: dict[str, Any], path: str) -> float:
        word = node["__float__"]
        if len(node) != 1 or not isinstance(word, str) or word not in _NONFINITE:
            raise self.fail(path, f"bad float {short_repr(word)}")
        return _NONFINITE[word]

    def decode(self, node: Any, tp: Any, path: str) -> Any:
        """``node`` as a value of annotation ``tp``, or ProfileFormatError naming ``path``."""
        if tp is Any:
            return self.any(node, path)
        origin = typing.get_origin(tp)
        if origin in (Union, types.UnionType):
            return self.union(node, typing.get_args(tp), path)
        if not _fits(node, tp):
            if isinstance(tp, type) and dataclasses.is_dataclass(tp):
                return self.dataclass(node, (tp,), path)  # it says which class was found instead
            raise self.fail(path, f"expected {_describe(tp)}, got {_kind(node)}")
        if tp is float and isinstance(node, dict):
            return self.nonfinite(node, path)
        if tp in (type(None), bool, int, float, str):
            return node
        if tp is np.ndarray or origin is np.ndarray:
            return self.array(node, path)
        args = typing.get_args(tp)
        if origin is tuple:
            items = node["__tuple__"]
            if len(node) != 1 or not isinstance(items, list):
                raise self.fail(path, f"malformed tuple {_kind(items)}")
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(self.decode(x, args[0], f"{path}[{i}]") for i, x in enumerate(items))
            if len(items) != len(args):
                raise self.fail(path, f"expected a tuple of {len(args)} items, got {len(items)}")
            return tuple(self.decode(x, a, f"{path}[{i}]") for i, (x, a) in enumerate(zip(items, args)))
        if origin is list:
            return [self.decode(x, args[0], f"{path}[{i}]") for i, x in enumerate(node)]
        if origin is dict:
            return {k: self.decode(x, args[1], f"{path}[{k!r}]") for k, x in node.items()}
        return self.dataclass(node, (tp,), path)

    def union(self, node: Any, args: tuple[Any, ...], path: str) -> Any:
        if node is None and type(None) in args:
            return None
        alts = [a for a in args if a is not type(None)]
        if all(isinstance(a, type) and dataclasses.is_dataclass(a) for a in alts):
            return self.dataclass(node, tuple(alts), path, optional=len(alts) < len(args))
        for a in alts:
            if _fits(node, a):
                return self.decode(node, a, path)
        raise self.fail(path, f"expected {_describe(Union[args])}, got {_kind(node)}")

    def dataclass(self, node: Any, classes: tuple[type, ...], path: str, *, optional: bool = False) -> Any:
        expected = " or ".join(c.__name__ for c in classes) + (" or null" if optional else "")
        if not isinstance(node, dict) or "__class__" not in node:
            raise self.fail(path, f"expected a {expected}, got {_kind(node)}")
        name = node["__class__"]
        cls = _CLASSES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise self.fail(path, f"unknown type {short_repr(name)} in the file")
        if cls not in classes:
            raise self.fail(path, f"expected a {expected}, got a {name}")
        fields = node.get("fields")
        if not isinstance(fields, dict) or set(node) != {"__class__", "fields"}:
            raise self.fail(path, f"{name} has no fields object")
        hints, required, order = _schema(cls)
        if not required <= set(fields) <= set(order):
            missing = sorted(required - set(fields))
            unknown = sorted(set(fields) - set(order))
            raise self.fail(path, f"{name} fields {sorted(fields)} differ from {sorted(order)} "
                                  f"(missing {missing}, unknown {unknown})")
        values = {k: self.decode(fields[k], hints[k], f"{path}.{k}") for k in order if k in fields}

        def fail(sub: str, what: str) -> ProfileFormatError:
            return self.fail(f"{path}{sub}", what)

        check = _INVARIANTS.get(cls)
        if check is not None:
            check(values, fail)
        try:
            return cls(**values)
        except (ValueError, TypeError) as exc:
            raise self.fail(path, f"{name}: {exc}") from None

    def any(self, node: Any, path: str) -> Any:
        """A value of a field annotated Any (settings, clock maps): JSON as written, special forms decoded."""
        if isinstance(node, dict):
            if "__class__" in node:
                return self.dataclass(node, tuple(_CLASSES.values()), path)
            if "__array__" in node:
                return self.array(node, path)
            if "__float__" in node:
                return self.nonfinite(node, path)
            if "__tuple__" in node:
                items = node["__tuple__"]
                if len(node) != 1 or not isinstance(items, list):
                    raise self.fail(path, f"malformed tuple {_kind(items)}")
                return tuple(self.any(x, f"{path}[{i}]") for i, x in enumerate(items))
            return {k: self.any(x, f"{path}[{k!r}]") for k, x in node.items()}
        if isinstance(node, list):
            return [self.any(x, f"{path}[{i}]") for i, x in enumerate(node)]
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

    Raises
    ------
    ValueError
        ``profile`` is not a profile, or ``path`` is not a path or is a
        directory.
    TypeError
        The profile holds a value the format cannot store (an object array).

    Notes
    -----
    The file records every setting, the clock-map parameters and the error
    budget with the curves (paper Section IV-B steps 5-8 outputs), so a saved
    profile can be re-plotted or re-exported without the device.
    """
    if not isinstance(profile, (Profile, InterleavedProfile, NodeProfile)):
        raise ValueError(
            f"profile: expected a Profile, InterleavedProfile or NodeProfile, got {type(profile).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    if os.path.isdir(path):
        raise ValueError(f"path={os.fspath(path)!r}: is a directory; give a file name, e.g. "
                         f"{os.path.join(os.fspath(path), 'profile.fgprof')!r}")
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


def _field_path(meta: Any, keys: Sequence[Any]) -> str:
    """The field path (``profile.settings['phase']``) of the JSON node at ``keys`` in the document."""
    if not keys or keys[0] != "root":
        return _META + "".join(f"[{short_repr(k, 40)}]" for k in keys)
    out, node, i = "profile", meta["root"], 1
    while i < len(keys):
        k = keys[i]
        if isinstance(node, dict) and "__class__" in node and k == "fields" and i + 1 < len(keys):
            node, out, i = node["fields"][keys[i + 1]], f"{out}.{keys[i + 1]}", i + 2
        elif isinstance(node, dict) and "__tuple__" in node and k == "__tuple__" and i + 1 < len(keys):
            node, out, i = node["__tuple__"][keys[i + 1]], f"{out}[{keys[i + 1]}]", i + 2
        else:
            node, out, i = node[k], f"{out}[{short_repr(k, 40)}]", i + 1
        if len(out) > 160:
            return out[:160] + "..."
    return out


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
        The file cannot be read as a profile, and the message, which names
        the file, says why: a directory or other non-file, not a zip archive,
        truncated or damaged (a member named), a newer format version, more
        expanded data than a profile holds (a zip bomb), an array header
        that does not match its data, JSON nested too deep, or a field of
        the wrong type, shape or consistency (its path named, e.g.
        ``profile.profiles['sse'].golden.run_ids``).
    FileNotFoundError
        No such file.
    ValueError
        ``path`` is not a path.

    Notes
    -----
    Nothing in the file is executed: types are looked up in a fixed table and
    arrays are read with ``allow_pickle=False`` (paper Section IV-B's results
    are plain arrays and numbers). The whole document is checked against
    the result types' annotations and invariants before anything is built,
    so a damaged or edited file is refused here rather than plotted or
    exported wrong. Records in the layouts before int64 times load as
    today's: executions through
    :func:`~fingrav_native.records.validate_executions` (exact), LOIs
    and logs field by field (float64 ns rounded to the ns, as the writer
    now rounds). The limits (8 GiB expanded, 200 times the file's size past
    256 MiB, 64 MiB of JSON nested at most 64 deep) are
    :mod:`fingrav_native.files._safe`'s.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"path={path!r}: no such file")
    problem = file_problem(path)
    if problem is not None:
        hint = ""
        inside = os.path.join(path, "profile.fgprof")
        if os.path.isdir(path) and os.path.isfile(inside):
            hint = f"; the campaign's profile in it is {inside!r}"
        raise ProfileFormatError(f"path={path!r}: {problem}; a profile is a .fgprof file{hint}")

    def bad(what: str) -> ProfileFormatError:
        return ProfileFormatError(f"{path}: {what}")

    zf = open_zip(path, lambda what: bad(f"not a fingrav profile ({what})"))
    with zf:
        budget = check_archive(zf, os.path.getsize(path), bad)
        try:
            raw = read_member(zf, _META, bad, budget, limit=MAX_JSON_BYTES)
        except KeyError:
            raise bad(f"not a fingrav profile (no {_META} inside)") from None
        meta = loads_json(raw, bad, _META, depth=None)
        deep = json_too_deep(meta, MAX_JSON_DEPTH)
        if deep is not None:
            # Refused before decoding (which recurses), naming the field the nesting is in.
            raise bad(f"{_field_path(meta, deep)}: nests deeper than the {MAX_JSON_DEPTH} levels a profile "
                      "file may have")
        if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
            got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise bad(f"format {short_repr(got)} is not {FORMAT_NAME!r}")
        version = meta.get("format_version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise bad(f"format_version {short_repr(version)} is not a positive integer")
        if version > FORMAT_VERSION:
            raise bad(f"format version {version} is newer than this fingrav-native reads ({FORMAT_VERSION}); "
                      f"written by fingrav-native {short_repr(meta.get('fingrav_native'))}: upgrade to read it")
        result = _Reader(zf, path, budget).union(meta.get("root"), _PROFILE_TYPES, "profile")
    assert isinstance(result, _PROFILE_TYPES)
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

    Raises
    ------
    ValueError
        ``profile`` is not a Profile or InterleavedProfile; ``directory`` is
        not a path, is an existing file, or cannot be created because a file
        is in the way.
    ImportError
        pyarrow is not installed.

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
    if not isinstance(directory, (str, os.PathLike)):
        raise ValueError(f"directory={directory!r}: must be a folder path")
    out = os.fspath(directory)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"directory={out!r}: is an existing file, not a folder; give a folder for the Parquet files")
    try:
        os.makedirs(out, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        # A file where a parent folder should be.
        raise ValueError(f"directory={out!r}: cannot be created, a file is in the way ({exc.strerror})") from None
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
