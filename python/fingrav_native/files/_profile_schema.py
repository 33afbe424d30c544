"""What a profile file may hold: the classes it may name, and what each must satisfy beyond its field types.

The loader decodes every field against its class's annotations; the checks here are the
invariants the annotations cannot state (lengths that agree, run ids among the golden runs,
record layouts of older files converted), each naming the field's path in its message.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from fingrav_native.files._safe import short_repr
from fingrav_native.insitu._align import LogAlignment
from fingrav_native.insitu._closure import EnergyClosure
from fingrav_native.insitu._concurrent import ConcurrentEnergy
from fingrav_native.insitu._results import IterationSummary, SpanEnergy, TraceProfile
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.method._deconvolved import Deconvolution, DeconvolvedChannel
from fingrav_native.method._engine_check import ModelCheck
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
from fingrav_native.method._stitched import EnergyEstimate, StitchedChannel, StitchedProfile
from fingrav_native.method._whole_run import WholeRunView
from fingrav_native.multi._results import NodeProfile, NodeView, SteadyCheck
from fingrav_native.records._layouts import LOI_DTYPE, validate_executions
from fingrav_native.records._recording import Capabilities
from fingrav_native.sensors._model import SensorModel

# The only classes a file may name. A name outside this table is an error.
CLASSES: dict[str, type] = {
    c.__name__: c
    for c in (Profile, CampaignTimeline, ExecutionProfile, InterleavedProfile, ErrorBudget, Capabilities, Guidance, GuidanceRow,
              GoldenSelection, StitchedProfile, StitchedChannel, EnergyEstimate, WholeRunView, SspSearch, SspStep,
              PowerMeasurement, NodeProfile, NodeView, SteadyCheck, Deconvolution, DeconvolvedChannel,
              SensorModel, TraceProfile, KernelTrace, LogAlignment, IterationSummary, ModelCheck, EnergyClosure,
              SpanEnergy, ConcurrentEnergy)
}


#: The result types a file's root may be.
PROFILE_TYPES = (Profile, InterleavedProfile, NodeProfile, TraceProfile)


_MODES = ("sse", "ssp", "both")


#: How a check reports a fault: (the field's path below the object, what is wrong) -> the error to raise.
Fail = Callable[[str, str], Exception]


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
INVARIANTS: dict[type, Callable[..., None]] = {
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
