"""Captures built from the simulator's loops for the in-situ tests (shared, so each test states only its case)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.files import PowerCapture
from fingrav_native.sensors import SensorModel
from fingrav_native.sim import LoggedLoop, logged_loop


@functools.lru_cache(maxsize=32)
def shared_loop(sensor: SensorModel, seed: int, iterations: int) -> LoggedLoop:
    """``logged_loop(sensor, seed=seed, iterations=iterations)``, built once per test process for every test that asks.

    The same loop is the case of several tests (parametrised over what they do to it); its logs and executions are
    read-only, so a test that changes them works on its own copy (``loop.samples.copy()``) and none sees another's.
    """
    loop = logged_loop(sensor, seed=seed, iterations=iterations)
    for a in (loop.samples, loop.executions, loop.trace.executions):
        a.setflags(write=False)
    return loop


def host_stamped_capture(loop: Any) -> PowerCapture:
    """The loop's logs stamped with the host clock itself: a map from bracketed reads only (bound ~0.1 us)."""
    logs = loop.gpu.logs()
    s = np.zeros(len(logs), dtype=SAMPLE_DTYPE)
    s["source_ts"] = s["host_ns"] = logs["sample_ns"]
    s["seq"] = np.arange(len(s))
    for c in ("total", "compute", "io", "memory"):
        s[c] = logs[c]
    return PowerCapture(samples=s, epoch_brackets=loop.epoch_brackets,
                        source={"name": "host-stamped", "clock_domain": "host-monotonic-raw", "tick_ns": 1.0,
                                "native_period_ns": 1_000_000, "window_ns": 0, "channels": ["total"]},
                        sensor=loop.sensor, period_ns=1_000_000, stats={}, meta={},
                        clock_brackets=loop.clock_brackets)


def synthetic_energy(kt: Any, a: Any, b: Any) -> np.ndarray:
    """The synthetic logs' true energy (J) over ``[a, b]`` (ns on the trace's timeline, arrays): 80 W idle plus
    150 W per kernel running (at most two), integrated exactly (the power is constant between kernel edges)."""
    ex = kt.executions
    s, e = np.sort(ex["start_ns"]).astype(np.float64), np.sort(ex["end_ns"]).astype(np.float64)
    edges = np.unique(np.concatenate([s, e]))
    running = np.searchsorted(s, edges, side="right") - np.searchsorted(e, edges, side="right")
    power = 80.0 + 150.0 * np.minimum(running[:-1], 2)
    cum = np.concatenate([[0.0], np.cumsum(power * np.diff(edges))])

    def at(t: np.ndarray) -> np.ndarray:
        # Idle (80 W) before the first kernel edge and after the last.
        return np.interp(t, edges, cum) + 80.0 * (np.minimum(t - edges[0], 0.0) + np.maximum(t - edges[-1], 0.0))

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out: np.ndarray = (at(b) - at(a)) * 1e-9
    return out


def synthetic_logs(kt: Any, period_ns: int = 100_000, window_ns: int = 0) -> np.ndarray:
    """Logs on the trace's clock of 80 W idle plus 150 W per kernel running (at most two), with 1 W of noise.

    ``window_ns=0``: instantaneous logs (the power at each log's instant); otherwise each log is the exact mean
    of that power over the ``window_ns`` before it (a boxcar averaging sensor, as NVML's and amd-smi's averages
    are; ``SensorModel(kind="window", window_ns=window_ns)``), its ``window_ns`` field declaring the window.
    """
    ex = kt.executions
    t = np.arange(int(ex["start_ns"].min()) - 2_000_000, int(ex["end_ns"].max()) + 2_000_000, period_ns)
    logs = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    logs["source_ts"] = t + kt.origin_ns
    noise = np.random.default_rng(0).normal(0, 1.0, len(t))
    if window_ns > 0:
        logs["total"] = synthetic_energy(kt, t - window_ns, t) / (window_ns * 1e-9) + noise
        logs["window_ns"] = window_ns
    else:
        s, e = np.sort(ex["start_ns"]), np.sort(ex["end_ns"])
        running = np.searchsorted(s, t, side="right") - np.searchsorted(e, t, side="right")
        logs["total"] = 80.0 + 150.0 * np.minimum(running, 2) + noise
    for ch in ("compute", "io", "memory"):
        if ch in (logs.dtype.names or ()):
            logs[ch] = np.nan
    return logs
