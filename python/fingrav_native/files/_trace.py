"""Trace export for ui.perfetto.dev and chrome://tracing (trace-event JSON).

One process per profile. Each run is a thread whose slices are the
executions (placed on host time through the device-clock map); each power
channel is a counter track at the logs' host times (through the logger-clock
map); every log of interest is an instant event on its run's thread, named
after the execution of interest it describes. Times are microseconds from
the campaign's first execution (the trace-event format's unit); the host
time of that origin is in the trace's metadata, so events can be matched
with other host-clock traces.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Union

import numpy as np

from fingrav_native.files._outputs import check_output_path, write_text
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.method._results import InterleavedProfile, Profile
from fingrav_native.multi._results import NodeProfile

_PID = 1


_COUNTER_TID = 0  # counters and process-level events; runs use tid = run + 1


def _num(v: Any) -> Any:
    v = float(v)
    return v if math.isfinite(v) else None


def _process_events(process: str, kernel: str, tl: Any, lois: dict[str, np.ndarray], pid: int,
                    origin: float, sort_index: int = 0) -> list[dict[str, Any]]:
    """One trace process: runs as threads of execution slices, power counters, LOI instants."""
    ex, logs = tl.executions, tl.logs
    golden = set(int(r) for r in tl.golden_runs)

    def us(t_ns: Any) -> float:
        return (float(t_ns) - origin) / 1e3

    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "tid": _COUNTER_TID, "name": "process_name", "args": {"name": process}},
        {"ph": "M", "pid": pid, "tid": _COUNTER_TID, "name": "process_sort_index",
         "args": {"sort_index": sort_index}},
        {"ph": "M", "pid": pid, "tid": _COUNTER_TID, "name": "thread_name", "args": {"name": "power"}},
    ]
    for run in np.unique(ex["run"]):
        tag = " (golden)" if int(run) in golden else ""
        events.append({"ph": "M", "pid": pid, "tid": int(run) + 1, "name": "thread_name",
                       "args": {"name": f"run {int(run)}{tag}"}})
        events.append({"ph": "M", "pid": pid, "tid": int(run) + 1, "name": "thread_sort_index",
                       "args": {"sort_index": int(run) + 1}})
    for e in ex:
        events.append({
            "ph": "X", "pid": pid, "tid": int(e["run"]) + 1, "name": f"{kernel} #{int(e['index'])}",
            "cat": "execution", "ts": us(e["start_ns"]), "dur": max(0.0, (e["end_ns"] - e["start_ns"]) / 1e3),
            "args": {"run": int(e["run"]), "index": int(e["index"]),
                     "start_err_ns": _num(e["start_err_ns"]), "end_err_ns": _num(e["end_err_ns"])},
        })
    for ch in ("total", "compute", "io", "memory"):
        vals = logs[ch]
        ok = np.isfinite(vals)
        if not ok.any():
            continue  # the logger has no such channel
        for t, v in zip(logs["host_ns"][ok], vals[ok]):
            events.append({"ph": "C", "pid": pid, "tid": _COUNTER_TID, "name": f"power {ch} (W)",
                           "ts": us(t), "args": {ch: float(v)}, "cat": "power"})
    for label, arr in lois.items():
        for loi in arr:
            events.append({
                "ph": "i", "s": "t", "pid": pid, "tid": int(loi["run"]) + 1, "name": f"LOI {label}",
                "cat": "loi", "ts": us(loi["host_ns"]),
                "args": {"execution": int(loi["execution"]), "toi_ns": _num(loi["toi_ns"]),
                         "uncert_ns": _num(loi["uncert_ns"]), "total_w": _num(loi["total"]),
                         "window_ns": _num(loi["window_ns"])},
            })
    return events


def node_trace_events(node: NodeProfile) -> dict[str, Any]:
    """The trace-event document of a multi-GPU profile: one process (track group) per rank.

    Parameters
    ----------
    node : NodeProfile
        From :mod:`fingrav_native.multi`.

    Returns
    -------
    dict
        As :func:`trace_events`; every rank's runs, power counters and LOIs
        on the root's host clock, process ``r + 1`` for rank ``r``.

    Notes
    -----
    Section V-D: the ranks of one collective side by side. Each execution's
    ``start_err_ns``/``end_err_ns`` include the rank's alignment bound, so
    two ranks' slices are comparable to within the sum of theirs.
    """
    if not isinstance(node, NodeProfile):
        raise ValueError(f"node: expected a NodeProfile, got {type(node).__name__}")
    origin = float(min(tl.executions["start_ns"].min() for tl in node.timelines))
    events: list[dict[str, Any]] = []
    for r, (prof, tl, lois) in enumerate(zip(node.ranks, node.timelines, node.lois)):
        al = node.alignments[r]
        basis = "root" if r == node.root else ("shared host clock" if node.shares_host_clock[r] else
                                               f"aligned +-{node.alignment_bound_ns[r] / 1e3:.1f} us")
        by_label: dict[str, np.ndarray] = {}
        for label in prof.profiles:
            idx = prof.profiles[label].execution_index
            by_label[label] = lois[lois["execution"] == idx]
        events += _process_events(f"rank {r}: {node.kernel} on {prof.backend.name} ({basis})", node.kernel, tl,
                                  by_label, r + 1, origin, sort_index=r)
        events.append({"ph": "M", "pid": r + 1, "tid": _COUNTER_TID, "name": "process_labels",
                       "args": {"labels": f"{al.get('hostname') or ''}".strip() or f"rank {r}"}})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "fingrav-native",
            "kernel": node.kernel,
            "ranks": len(node.ranks),
            "root": node.root,
            "host_clock": "CLOCK_MONOTONIC_RAW of the root rank",
            "origin_host_ns": origin,
            "alignment_bound_ns": [float(b) for b in node.alignment_bound_ns],
            "shares_host_clock": [bool(x) for x in node.shares_host_clock],
        },
    }


def trace_events(profile: Union[Profile, InterleavedProfile]) -> dict[str, Any]:
    """The trace-event document of a profile, as a dict ready for ``json.dump``.

    Parameters
    ----------
    profile : Profile or InterleavedProfile
        A profile that kept its timeline (any made by
        :func:`~fingrav_native.profile`; for an interleaved profile its
        reference profile's campaign is shown).

    Returns
    -------
    dict
        ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}``.

    Notes
    -----
    Shows the raw material of the paper's Section IV-B: the runs (step 4),
    the logs on the host timeline through the clock maps (step 2), which
    runs are golden (step 5), and the LOIs (step 6).
    """
    if isinstance(profile, InterleavedProfile):
        profile = profile.reference
    if not isinstance(profile, Profile):
        raise ValueError(f"profile: expected a Profile, got {type(profile).__name__}")
    tl = profile.timeline
    if tl is None:
        raise ValueError("profile: it carries no timeline (saved by an older version?); re-run to export a trace")
    if len(tl.executions) == 0:
        raise ValueError("profile: its timeline holds no executions")
    origin = float(tl.executions["start_ns"].min())
    lois = {label: ep.lois for label, ep in profile.profiles.items()}
    events = _process_events(f"fingrav: {profile.kernel} on {profile.backend.name}", profile.kernel, tl, lois,
                             _PID, origin)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "fingrav-native",
            "kernel": profile.kernel,
            "backend": profile.backend.name,
            "device": profile.backend.device,
            "host_clock": "CLOCK_MONOTONIC_RAW",
            "origin_host_ns": origin,
            "error_budget_ns": _num(profile.error_budget.total_ns),
            "versions": profile.versions,
        },
    }


def _device_tracks(kt: KernelTrace) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """A process per GPU of the trace and a thread per stream (their metadata events), and each GPU's process id."""
    events: list[dict[str, Any]] = []
    pid_of: dict[int, int] = {}
    for dev in np.unique(kt.device):
        pid = 10 + len(pid_of)
        pid_of[int(dev)] = pid
        events.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": f"GPU {int(dev)}"}})
        for st in np.unique(kt.stream[kt.device == dev]):
            events.append({"ph": "M", "pid": pid, "tid": int(st) + 1, "name": "thread_name",
                           "args": {"name": f"stream {int(st)}"}})
    return events, pid_of


def insitu_trace_events(tp: TraceProfile) -> dict[str, Any]:
    """The trace-event document of an in-situ profile: power counter tracks over the kernel slices.

    Parameters
    ----------
    tp : TraceProfile
        From :func:`~fingrav_native.profile_trace`.

    Returns
    -------
    dict
        One process per GPU (a thread per stream, a slice per kernel
        execution with its signature's power and energy per execution, and
        whether it was golden or warm-up), one ``power`` process with a
        counter track per channel, and an ``iterations`` thread with a slice
        per ``ProfilerStep#N`` and its energy. Times are microseconds from
        the trace's first kernel; that origin's epoch time is in
        ``otherData`` (``baseTimeNanoseconds`` too, so tools that read
        Kineto's field find it).

    Notes
    -----
    The paper's Section IV-B steps 2-6 on an application's own timeline:
    each log is drawn at the middle of what it measures (its window and
    delay, from the sensor model), so an averaging sensor's counters line
    up with the kernels they describe.
    """
    if not isinstance(tp, TraceProfile):
        raise ValueError(f"tp: expected a TraceProfile, got {type(tp).__name__}")
    kt = tp.trace
    ex = kt.executions
    row_of = {int(sid): i for i, sid in enumerate(tp.signature_rows)}
    golden: dict[int, set[int]] = {}
    for i, ep in enumerate(tp.profiles):
        golden[i] = set(int(r) for r in (ep.golden.run_ids if ep.golden.run_ids is not None else ()))
    warm_before: dict[int, float] = {}
    conc = kt.concurrent()
    for sid, i in row_of.items():
        mine = np.flatnonzero((ex["kernel_id"] == sid) & ~conc)
        mine = mine[np.argsort(ex["start_ns"][mine], kind="stable")]
        w = int(tp.kernels["warmup"][i])
        warm_before[sid] = float(ex["start_ns"][mine[w]]) if w < len(mine) else math.inf
    events, pid_of = _device_tracks(kt)
    for j, e in enumerate(ex):
        sid = int(e["kernel_id"])
        sig = kt.signatures[sid]
        row = row_of.get(sid)
        args: dict[str, Any] = {"grid": [int(g) for g in sig["grid"]], "block": [int(b) for b in sig["block"]],
                                "correlation": int(kt.correlation[j])}
        if row is not None:
            r = tp.kernels[row]
            args.update({"row": row, "signature_power_w": _num(r["power_w"]),
                         "signature_energy_mj": _num(1e3 * r["energy_j"]), "golden": int(e["run"]) in golden[row],
                         "warmup": bool(e["start_ns"] < warm_before[sid])})
        if conc[j]:
            args["concurrent"] = True
        events.append({"ph": "X", "pid": pid_of[int(kt.device[j])], "tid": int(kt.stream[j]) + 1,
                       "name": str(sig["name"]), "cat": "kernel", "ts": float(e["start_ns"]) / 1e3,
                       "dur": max(0.0, float(e["end_ns"] - e["start_ns"]) / 1e3), "args": args})
    events.append({"ph": "M", "pid": _PID, "tid": _COUNTER_TID, "name": "process_name", "args": {"name": "power"}})
    for ch in ("total", "compute", "io", "memory"):
        vals = tp.logs[ch]
        ok = np.isfinite(vals)
        events += [{"ph": "C", "pid": _PID, "tid": _COUNTER_TID, "name": f"power {ch} (W)", "cat": "power",
                    "ts": float(t) / 1e3, "args": {ch: float(v)}} for t, v in zip(tp.logs["t_ns"][ok], vals[ok])]
    if len(tp.iterations):
        events.append({"ph": "M", "pid": _PID, "tid": 1, "name": "thread_name", "args": {"name": "iterations"}})
        events += [{"ph": "X", "pid": _PID, "tid": 1, "name": f"ProfilerStep#{int(r['step'])}", "cat": "iteration",
                    "ts": float(r["start_ns"]) / 1e3, "dur": float(r["end_ns"] - r["start_ns"]) / 1e3,
                    "args": {"energy_mj_from_its_logs": _num(1e3 * r["energy_j"]), "logs": int(r["logs"]),
                             "kernel_energy_mj": _num(1e3 * r["kernel_energy_j"]), "steady": bool(r["steady"])}}
                   for r in tp.iterations]
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": int(kt.origin_ns),
        "otherData": {"generator": "fingrav-native", "source": kt.source, "clock": kt.clock,
                      "origin_ns": str(int(kt.origin_ns)), "sensor": tp.sensor,
                      "power_counters_at": "the middle of what each log measures (window and delay)"},
    }


def export_trace(profile: Union[Profile, InterleavedProfile, NodeProfile, TraceProfile],
                 path: Union[str, "os.PathLike[str]"]) -> str:
    """Write a profile's trace as trace-event JSON (open in ui.perfetto.dev).

    Parameters
    ----------
    profile : Profile, InterleavedProfile, NodeProfile or TraceProfile
        See :func:`trace_events` (a NodeProfile: :func:`node_trace_events`,
        one track group per rank; a TraceProfile: :func:`insitu_trace_events`).
    path : str or os.PathLike
        Output file (``.json``, or ``.json.gz`` gzipped).

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ValueError
        ``path`` names no file that can be written (see
        :func:`~fingrav_native.files._outputs.check_output_path`: a
        directory, a missing folder, a saved profile or capture, a
        campaign's files), checked before the trace is built.

    Notes
    -----
    Paper Section IV-B, steps 2-6, as a timeline (see :func:`trace_events`).
    Written to a temporary name beside ``path`` and renamed, so a crash or
    a full disk never leaves half a trace under its name.
    """
    path = check_output_path(path, "path", writes="trace")
    if isinstance(profile, NodeProfile):
        doc = node_trace_events(profile)
    elif isinstance(profile, TraceProfile):
        doc = insitu_trace_events(profile)
    else:
        doc = trace_events(profile)
    return write_text(path, json.dumps(doc, allow_nan=False))
