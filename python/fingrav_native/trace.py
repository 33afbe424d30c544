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

from .profile import InterleavedProfile, Profile

__all__ = ["trace_events", "export_trace"]

_PID = 1
_COUNTER_TID = 0  # counters and process-level events; runs use tid = run + 1


def _num(v: Any) -> Any:
    v = float(v)
    return v if math.isfinite(v) else None


def trace_events(profile: Union[Profile, InterleavedProfile]) -> dict:
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
    ex, logs = tl.executions, tl.logs
    if len(ex) == 0:
        raise ValueError("profile: its timeline holds no executions")
    origin = float(ex["start_ns"].min())
    golden = set(int(r) for r in tl.golden_runs)

    def us(t_ns: Any) -> float:
        return (float(t_ns) - origin) / 1e3

    events: list[dict] = [
        {"ph": "M", "pid": _PID, "tid": _COUNTER_TID, "name": "process_name",
         "args": {"name": f"fingrav: {profile.kernel} on {profile.backend.name}"}},
        {"ph": "M", "pid": _PID, "tid": _COUNTER_TID, "name": "thread_name", "args": {"name": "power"}},
    ]
    for run in np.unique(ex["run"]):
        tag = " (golden)" if int(run) in golden else ""
        events.append({"ph": "M", "pid": _PID, "tid": int(run) + 1, "name": "thread_name",
                       "args": {"name": f"run {int(run)}{tag}"}})
        events.append({"ph": "M", "pid": _PID, "tid": int(run) + 1, "name": "thread_sort_index",
                       "args": {"sort_index": int(run) + 1}})
    for e in ex:
        events.append({
            "ph": "X", "pid": _PID, "tid": int(e["run"]) + 1, "name": f"{profile.kernel} #{int(e['index'])}",
            "cat": "execution", "ts": us(e["start_ns"]), "dur": max(0.0, (e["end_ns"] - e["start_ns"]) / 1e3),
            "args": {"run": int(e["run"]), "index": int(e["index"]),
                     "start_err_ns": _num(e["start_err_ns"]), "end_err_ns": _num(e["end_err_ns"])},
        })
    for ch in ("total", "compute", "io", "memory"):
        vals = logs[ch]
        ok = np.isfinite(vals)
        if not ok.any():
            continue  # the logger has no such channel
        for t, v, w in zip(logs["host_ns"][ok], vals[ok], logs["window_ns"][ok]):
            events.append({"ph": "C", "pid": _PID, "tid": _COUNTER_TID, "name": f"power {ch} (W)",
                           "ts": us(t), "args": {ch: float(v)}, "cat": "power"})
    for label, ep in profile.profiles.items():
        for loi in ep.lois:
            events.append({
                "ph": "i", "s": "t", "pid": _PID, "tid": int(loi["run"]) + 1, "name": f"LOI {label}",
                "cat": "loi", "ts": us(loi["host_ns"]),
                "args": {"execution": int(loi["execution"]), "toi_ns": _num(loi["toi_ns"]),
                         "uncert_ns": _num(loi["uncert_ns"]), "total_w": _num(loi["total"]),
                         "window_ns": _num(loi["window_ns"])},
            })
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


def export_trace(profile: Union[Profile, InterleavedProfile], path: Union[str, "os.PathLike[str]"]) -> str:
    """Write a profile's trace as trace-event JSON (open in ui.perfetto.dev).

    Parameters
    ----------
    profile : Profile or InterleavedProfile
        See :func:`trace_events`.
    path : str or os.PathLike
        Output file (``.json``).

    Returns
    -------
    str
        The path written.

    Notes
    -----
    Paper Section IV-B, steps 2-6, as a timeline (see :func:`trace_events`).
    """
    doc = trace_events(profile)
    path = os.fspath(path)
    with open(path, "w") as f:
        json.dump(doc, f, allow_nan=False)
    return path
