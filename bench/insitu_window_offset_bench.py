#!/usr/bin/env python3
"""Clock mismatches under averaging sensors: how often profile_trace warns, by seed, shift and window.

The simulator's closed-form training loop (``fingrav_native.sim``: five kernels, 400 to 25 us, seven to
an iteration with launch gaps and a 300 us host pause; 512 iterations, 0.75 s) logged through a 1 ms
and a 5 ms boxcar (2 W noise), the logs' stamps moved by 0 (exact clocks), 0.3, 1, 5 and 50 ms
(a trace from another host, an NTP step, a wrong ``baseTimeNanoseconds``), profiled with
``fg.profile_trace`` on an exact map. Counted per (window, shift): the runs that issued a
``ClockMismatchWarning`` (at 0: false alarms), the measured offset's error against the shift, and,
with ``--energies``, the default joint fit's worst per-kernel energy error (what an unwarned table
printed before the check existed).

The offset check does not depend on how the logs are attributed, so the count runs with
``attribution="instant"`` (seconds a run, not the joint fit's); ``--energies`` runs the default.

``--scale N`` times the check alone on a loop of N kernels (the closed-form schedule of
``bench/insitu_scale.py``, 40 signatures, 1 ms averages of its power as a busy-share model draws it):
its cost follows the logs it keeps (at most 20,000 in the finest fits), not the trace.

Run:  python bench/insitu_window_offset_bench.py              (20 seeds; ~6 min on 2 cores)
      python bench/insitu_window_offset_bench.py --seeds 3    (a quick look)
      python bench/insitu_window_offset_bench.py --energies   (adds the default joint fit per shift, seed 0)
      python bench/insitu_window_offset_bench.py --scale 1000000   (the check's CPU time at 10^6 kernels)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))

import fingrav_native as fg  # noqa: E402
from fingrav_native.insitu import ClockMismatchWarning  # noqa: E402
from fingrav_native.sim import (
    Identity,  # noqa: E402
    logged_loop,  # noqa: E402
)

SHIFTS_NS = (0, 300_000, 1_000_000, 5_000_000, 50_000_000)
SENSORS = {"1 ms": fg.sensor_preset("amd-1ms-average"),
           "5 ms": fg.SensorModel("avg-5ms", "window", period_ns=1e6, window_ns=5e6)}


def one(loop, sensor, shift: int, attribution: str) -> tuple[bool, float, float]:
    """(warned, measured offset + shift in us, worst per-kernel energy error) of one profile."""
    late = loop.samples.copy()
    late["source_ts"] += shift
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        tp = fg.profile_trace(loop.trace, late, Identity(), sensor=sensor, attribution=attribution)
    warned = any(issubclass(w.category, ClockMismatchWarning) for w in got)
    a = tp.alignment
    err = float(a.offset_ns + shift) / 1e3 if a is not None else float("nan")
    e = [abs(float(r["energy_j"] / loop.energy_j[s] - 1)) for r, s in zip(tp.kernels, tp.signature_rows)]
    return warned, err, float(np.nanmax(e)) if e else float("nan")


def busy_shares(starts: np.ndarray, ends: np.ndarray, sig: np.ndarray, t: np.ndarray, window_ns: float) -> np.ndarray:
    """Closed form: per signature, the share of each boxcar window ``[t - window_ns, t]`` it ran in.

    The union of each signature's intervals (times from the first kernel, as the package takes them),
    its busy time before ``x`` by the running sum of their lengths, and the window's share the
    difference of two of those.
    """
    ref = float(np.min(starts))
    out = np.empty((len(t), int(sig.max()) + 1))
    for g in range(out.shape[1]):
        a, b = starts[sig == g] - ref, ends[sig == g] - ref
        order = np.argsort(a, kind="stable")
        a, b = a[order], np.maximum.accumulate(b[order])
        first = np.flatnonzero(np.r_[True, a[1:] > b[:-1]])
        a, b = a[first], b[np.append(first[1:], len(a)) - 1]
        cum = np.concatenate([[0.0], np.cumsum(b - a)])

        def before(x: np.ndarray) -> np.ndarray:
            j = np.searchsorted(a, x, side="right")
            k = np.maximum(j - 1, 0)
            return np.where(j > 0, cum[j] - np.maximum(b[k] - x, 0.0), 0.0)

        x = t - ref
        out[:, g] = (before(x) - before(x - window_ns)) / window_ns
    return out


def scale(kernels: int) -> None:
    """CPU seconds of the windowed offset check on a loop of ``kernels`` kernels, exact and 5 ms late."""
    from fingrav_native.insitu import measure_window_offset
    from fingrav_native.sim import SEQUENCE, draw_schedule

    iterations = -(-kernels // len(SEQUENCE))
    rng = np.random.default_rng(0)
    starts, ends, sig, it, _, _, end = draw_schedule(rng, iterations, duration_jitter=0.005, pause_ns=300_000.0,
                                                 pause_jitter=0.1, warmup=0.04, warmup_iterations=iterations // 20,
                                                 lead_ns=2e6, gap_range_ns=(2_000.0, 8_000.0))
    kid = sig + 5 * (it % 8)  # eight layers of the five kernels: 40 signatures, as insitu_scale.py has
    sensor = SENSORS["1 ms"]
    t = np.arange(0.0, end, 1e6) + 3e5
    w = np.full(len(t), 1e6)
    shares = busy_shares(starts, ends, sig, t, sensor.window_ns)[:, :5]
    y = 150.0 + shares @ np.array([400.0, 250.0, 420.0, 300.0, 200.0]) + rng.normal(0.0, 2.0, len(t))
    for late in (0.0, 5e6):
        t0 = time.process_time()
        al, why = measure_window_offset(t + late, y, w, sensor, starts, ends, kid)
        assert al is not None and not why
        print(f"{len(starts)} kernels, {len(t)} logs, {late / 1e6:g} ms late: measured {al.offset_ns / 1e3:+.1f} us in "
              f"{time.process_time() - t0:.2f} s CPU")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--scale", type=int, help="time the check alone on a loop of this many kernels, and stop")
    ap.add_argument("--energies", action="store_true", help="the default joint fit per shift too (seed 0)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.scale:
        scale(args.scale)
        return
    t0 = time.time()
    out: dict[str, dict[str, object]] = {}
    for label, sensor in SENSORS.items():
        rows = {s: [] for s in SHIFTS_NS}
        for seed in range(args.seeds):
            loop = logged_loop(sensor, seed=seed, iterations=512)
            for shift in SHIFTS_NS:
                rows[shift].append(one(loop, sensor, shift, "instant")[:2])
        for shift in SHIFTS_NS:
            warned = sum(w for w, _ in rows[shift])
            errs = np.array([e for _, e in rows[shift]])
            key = f"{label} window, logs {shift / 1e6:g} ms late"
            out[key] = {"warned": warned, "runs": len(rows[shift]), "offset_error_us_median": float(np.median(errs)),
                        "offset_error_us_max_abs": float(np.max(np.abs(errs)))}
            if args.energies:
                loop = logged_loop(sensor, seed=0, iterations=512)
                out[key]["joint_fit_worst_energy_error"] = one(loop, sensor, shift, "auto")[2]
            print(f"{key:34s} warned {warned:2d}/{len(rows[shift])}  offset error median {np.median(errs):+6.1f} us, "
                  f"worst {np.max(np.abs(errs)):5.1f} us"
                  + (f"  joint fit's worst kernel {100 * out[key]['joint_fit_worst_energy_error']:.0f} % off"
                     if args.energies else ""), flush=True)
    print(f"({time.time() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
