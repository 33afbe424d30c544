#!/usr/bin/env python3
"""profile_trace before and after a change: the same tables, curves, warnings and placed logs, field for field.

Profiles five real traces of the real-data folder (tests/real_data.py; the synthetic logs of
tests/insitu/test_real_traces.py), simulated loops under an instantaneous logger (with and without an
all-reduce) and a 1 ms average, and, where given, a trace written by bench/insitu_scale.py (its logs beside
it), then saves what each profile says or compares it with a saved run.

Run:  PYTHONPATH=<old checkout>/python python bench/insitu_same_tables.py save /tmp/old.pkl [TRACE]
      PYTHONPATH=python python bench/insitu_same_tables.py compare /tmp/old.pkl [TRACE]
Each case prints whether its stitched rows (table and curves) are IDENTICAL, then whether all it says is, or their
first differences (with their relative size); coarse rows ([c]: signatures too rare to stitch, one level each) are
counted, not compared, since a version without them lists those signatures as not profiled instead (and the
stitched rows' share of all kernels' energy, which counts theirs, is left out of that comparison).
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import sys
import time
import warnings
from typing import Any, Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, os.pardir, "tests"), os.path.join(HERE, os.pardir, "tests", "insitu")]

from test_real_traces import _synthetic_logs  # noqa: E402

import fingrav_native as fg  # noqa: E402
from fingrav_native.files import read_trace  # noqa: E402
from fingrav_native.sim import (  # noqa: E402
    EpochIdentity,
    Identity,
    logged_loop,  # noqa: E402
)
from real_data import require  # noqa: E402

REAL = ("hta/nccl_data.ProfilerStep5.json.gz", "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz",
        "hta/sampled_rank-0.json.gz", "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "kineto/gpu_metrics_input.json")


def _stitched(tp: Any) -> list[int]:
    """The rows with a stitched (or jointly fitted) curve: coarse rows ([c], one level) are compared apart, since a
    version without them lists their signatures as not profiled instead."""
    return [i for i, ep in enumerate(tp.profiles)
            if not ep.energy.get("total", None) or not ep.energy["total"].note.startswith("coarse attribution")]


def digest(tp: Any, caught: list[warnings.WarningMessage]) -> dict[str, Any]:
    """What a TraceProfile says, as plain values: its tables, warnings, each stitched profile's curves and placed logs
    (coarse rows, which one level describes, in ``coarse``)."""
    keep = _stitched(tp)
    d: dict[str, Any] = {"kernels": tp.kernels[keep].tolist(),
                         "coarse": len(tp.kernels) - len(keep), "skipped": dict(tp.skipped), "warnings": list(tp.warnings),
                         "summary": str(tp.summary), "iterations": tp.iterations.tolist(),
                         "alignment": str(tp.alignment), "caught": sorted(str(w.message) for w in caught),
                         "curves": []}
    for ep in (tp.profiles[i] for i in keep):
        for c in ep.stitched.channels:
            d["curves"].append((ep.label, c.name, np.asarray(c.fit_y).tolist(), np.asarray(c.fit_low).tolist(),
                                np.asarray(c.fit_high).tolist(), np.asarray(c.mean).tolist(), float(c.fit_span)))
        d["curves"].append((ep.label, int(ep.golden.count), hashlib.sha1(ep.lois.tobytes()).hexdigest()))
    return d


def cases(trace: str | None) -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {}
    for name in REAL:
        kt = read_trace(require(f"traces/{name}"))
        out[name] = lambda kt=kt: fg.profile_trace(kt, _synthetic_logs(kt), EpochIdentity(),
                                                    device=int(np.unique(kt.device)[0]))
    instant = fg.SensorModel("instant 100 us", "instant", period_ns=100_000.0)
    average = fg.sensor_preset("amd-1ms-average")
    for label, sensor, seed, comm in (("instant", instant, 1, 0.0), ("instant", instant, 3, 0.0),
                                      ("instant, all-reduce", instant, 5, 60.0),
                                      ("1 ms average, all-reduce", average, 1, 60.0)):
        lp = logged_loop(sensor, seed=seed, iterations=300, communication_w=comm)
        out[f"loop {label}, seed {seed}"] = lambda lp=lp, s=sensor: fg.profile_trace(lp.trace, lp.samples, Identity(),
                                                                                     sensor=s)
    if trace:
        kt, logs = read_trace(trace), np.load(trace + ".logs.npy")
        out[os.path.basename(trace)] = lambda: fg.profile_trace(kt, logs, EpochIdentity())
    return out


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two digests differ (floats exactly, NaN equal to NaN)."""
    a, b = (x.tolist() if isinstance(x, np.ndarray) else x.item() if isinstance(x, np.generic) else x for x in (a, b))
    if isinstance(a, float) and isinstance(b, float):
        if a == b or (math.isnan(a) and math.isnan(b)):
            return []
        return [f"{path}: {a!r} vs {b!r} (relative {abs(a - b) / max(abs(a), abs(b)):.1e})"]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} entries"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys differ"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    return [] if a == b else [f"{path}: {str(a)[:200]!r} vs {str(b)[:200]!r}"]


def main() -> None:
    mode, saved = sys.argv[1], sys.argv[2]
    got = {}
    for name, run in cases(sys.argv[3] if len(sys.argv) > 3 else None).items():
        t0 = time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got[name] = digest(run(), caught)
        print(f"{name}: {time.process_time() - t0:.2f} s CPU", flush=True)
    if mode == "save":
        with open(saved, "wb") as f:
            pickle.dump(got, f)
        return
    with open(saved, "rb") as f:
        old = pickle.load(f)
    for name in got:
        # A saved run from before coarse rows has none: every row it lists is a stitched one.
        old[name].setdefault("coarse", 0)
        # A stitched row's share of all kernels' energy (field 10) counts the coarse rows' energy too: not compared.
        diffs = differences(*({"kernels": [r[:10] + r[11:] for r in d["kernels"]], "curves": d["curves"]}
                              for d in (old[name], got[name])), name)
        print(name, "stitched rows IDENTICAL" if not diffs else f"stitched rows: {len(diffs)} differences")
        for d in diffs[:8]:
            print("   ", d)
        diffs = differences(old[name], got[name], name)
        print(name, "IDENTICAL" if not diffs else f"{len(diffs)} differences")
        for d in diffs[:8]:
            print("   ", d)


if __name__ == "__main__":
    main()
