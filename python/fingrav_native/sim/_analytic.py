"""A known power curve seen through a known sensor model, in closed form: ground truth for attribution.

The event-driven simulator (:mod:`fingrav_native.sim`) is the ground
truth for the whole method; this is a smaller one for the attribution step
alone (:mod:`fingrav_native.method`), where the truth must be a
formula: the tests and ``bench/sensor_bench.py`` score a deconvolved curve
against it at any window-to-kernel ratio.

Runs of back-to-back executions of one kernel whose power over execution
progress is ``shape(f)`` (a ramp with a 25 % dip in the middle), each
execution at its own level (power creeping up toward the SSP, as the paper's
Figure 7), a GPU idle at ``idle_w`` before each run and cooling back to it
exponentially after. Each log's value is the exact average of that power over
its window (a cumulative integral on a 0.5 us grid), plus noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fingrav_native.records._layouts import make_executions
from fingrav_native.sensors._model import SensorModel

DURATION_NS = 366_000.0  # cb-4k-gemm's SSP execution, so the sensor study matches the simulated kernel


def shape(f: np.ndarray, dip: float = 0.25) -> np.ndarray:
    """Power (W) over execution progress ``f`` in [0, 1]: a ramp with a ``dip`` mid-kernel."""
    f = np.asarray(f, dtype=np.float64)
    return (600.0 + 100.0 * f) * (1.0 - dip * np.exp(-0.5 * ((f - 0.5) / 0.06) ** 2))


def _power(t: np.ndarray, starts: np.ndarray, ends: np.ndarray, levels: np.ndarray, idle: float, tau: float,
           dip: float) -> np.ndarray:
    p = np.full_like(t, idle)
    for i, (s, e, lv) in enumerate(zip(starts, ends, levels)):
        m = (t >= s) & (t < e)
        p[m] = shape((t[m] - s) / (e - s), dip) + lv
        nxt = starts[i + 1] if i + 1 < len(starts) else None
        if nxt is not None:  # a launch gap: the GPU holds the end of the execution
            p[(t >= e) & (t < nxt)] = shape(np.array([1.0]), dip)[0] + lv
    end_w = shape(np.array([1.0]), dip)[0] + levels[-1]
    m = t >= ends[-1]
    p[m] = idle + (end_w - idle) * np.exp(-(t[m] - ends[-1]) / tau)
    return p


class Identity:
    """A clock map for logs already stamped in host ns."""

    def to_host(self, t: Any) -> np.ndarray:
        """Host ns of logger timestamps (the same numbers)."""
        return np.asarray(t, dtype=np.float64)

    def error_bound_at(self, t: Any) -> np.ndarray:
        """No error: the logs are stamped in host time."""
        return np.zeros(np.shape(t))


def logged_runs(n_runs: int, sensor: SensorModel, *, seed: int = 0, executions: int = 15, dip: float = 0.25,
                noise_w: float = 2.0, idle_w: float = 100.0, tau_ns: float = 2e6, gap_ns: float = 3_000.0,
                duration_jitter: float = 0.004, duration_ns: float = DURATION_NS) -> tuple[np.ndarray, np.ndarray]:
    """Executions and a sensor's logs of ``n_runs`` runs of a kernel whose power curve is :func:`shape`.

    Parameters
    ----------
    n_runs : int
        Runs; each starts at a random phase against the sensor.
    sensor : SensorModel
        Boxcar window (``window_ns``, 0 = instantaneous) and period used to log.
    seed : int
    executions : int
        Back-to-back executions per run; the execution of interest is the
        last (an SSP-like run, paper Section IV-B step 3).
    dip : float
        Depth of the mid-kernel dip.
    noise_w : float
        Gaussian noise of each log (W).
    idle_w, tau_ns : float
        Idle power, and the cooling time constant after a run.
    gap_ns : float
        Launch gap between executions.
    duration_jitter : float
        Relative spread of execution times.
    duration_ns : float
        Execution time of the kernel.

    Returns
    -------
    (samples, executions)
        Logs (``source_ts`` in host ns, ``total``, ``window_ns``) and
        EXECUTION_DTYPE records.

    Notes
    -----
    Each execution ``i`` draws ``shape(f) + level_i`` over its progress
    ``f`` (levels rise 60 W to the last, as power creeps toward SSP, paper
    Figure 7); a gap holds the end of the execution before it; after the
    run the GPU cools exponentially to ``idle_w``. A log's value is the
    exact average over its window (cumulative integral on a 0.5 us grid).
    """
    rng = np.random.default_rng(seed)
    cols: dict[str, list[float]] = {k: [] for k in ("run", "index", "start", "end")}
    log_t: list[np.ndarray] = []
    log_v: list[np.ndarray] = []
    log_w: list[np.ndarray] = []
    window = sensor.window_ns
    t0 = 0.0
    for r in range(n_runs):
        t0 += max(40e6, 3 * window) + rng.uniform(0, sensor.period_ns)
        durs = duration_ns * (1 + duration_jitter * rng.standard_normal(executions))
        s = t0 + np.concatenate([[0.0], np.cumsum(durs[:-1] + gap_ns)])
        e = s + durs
        levels = np.linspace(-60.0, 0.0, executions)
        cols["run"] += [r] * executions
        cols["index"] += list(range(executions))
        cols["start"] += list(s)
        cols["end"] += list(e)
        lo, hi = s[0] - window - 2e6, e[-1] + 20e6
        phase = rng.uniform(0, sensor.period_ns)
        t = lo + phase + np.arange(0.0, hi - lo - phase, sensor.period_ns)
        t = t + rng.normal(0.0, 1_000.0, len(t))
        grid = np.arange(lo - window - 1e3, hi + 1e3, 500.0)
        p = _power(grid, s, e, levels, idle_w, tau_ns, dip)
        cum = np.concatenate([[0.0], np.cumsum(p[:-1] * np.diff(grid))])
        if window > 0:
            v = (np.interp(t, grid, cum) - np.interp(t - window, grid, cum)) / window
        else:
            v = np.interp(t, grid, p)
        log_t.append(t)
        log_v.append(v + rng.normal(0.0, noise_w, len(t)))
        log_w.append(np.full(len(t), window))
    ex = make_executions(np.array(cols["run"], dtype=int), np.array(cols["index"], dtype=int),
                         np.zeros(len(cols["run"]), dtype=int), np.array(cols["start"]), np.array(cols["end"]))
    t_all = np.concatenate(log_t)
    samples = np.zeros(len(t_all), dtype=[("source_ts", "<i8"), ("total", "<f4"), ("window_ns", "<u4")])
    samples["source_ts"] = np.round(t_all)
    samples["total"] = np.concatenate(log_v)
    samples["window_ns"] = np.concatenate(log_w)
    return samples, ex
