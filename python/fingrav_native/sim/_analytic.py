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

By default the device shares the attribution method's assumptions (a launch
gap holds the end-of-execution power; every execution draws one curve; no
drift; one cooling curve; exact boxcar sensors). Each can be broken on its
own, with the truth kept (:func:`simulate_runs`): gaps that draw their own
power, per-execution shapes, drift, per-run cooling, and any
:class:`~fingrav_native.sensors.SensorModel` through :func:`observe`
(first-order filters, delays of either sign, gain and offset, quanta,
energy counters, a host tool polling a cached value).
:mod:`fingrav_native.sim._analytic_loop` builds an in-situ training loop
from the same pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import numpy.typing as npt
import scipy.signal

from fingrav_native.records._layouts import make_executions
from fingrav_native.records._log_layouts import ANALYTIC_LOG_DTYPE as ANALYTIC_LOG_DTYPE  # re-exported on the sim face
from fingrav_native.sensors._counter import counter_to_logs
from fingrav_native.sensors._model import SensorModel

DURATION_NS = 366_000.0  # cb-4k-gemm's SSP execution, so the sensor study matches the simulated kernel


#: Time constant (ns) with which a launch gap's power falls when ``gap_w`` is given: compute
#: units go idle within microseconds while clocks and voltage stay up.
GAP_TAU_NS = 2_000.0


def shape(f: np.ndarray, dip: Any = 0.25) -> np.ndarray:
    """Power (W) over execution progress ``f`` in [0, 1]: a ramp with a ``dip`` mid-kernel.

    The closed-form kernel curve of :func:`logged_runs` and :func:`simulate_runs`: 600 W rising to
    700 W, with a Gaussian dip (width 0.06 of the execution) at its middle, so a method that smooths or
    misplaces the logs misses a known feature.

    Parameters
    ----------
    f : numpy.ndarray
        Execution progress, 0 at the start and 1 at the end.
    dip : float or numpy.ndarray
        Relative depth of the dip; an array is broadcast against ``f`` (one depth per execution).

    Returns
    -------
    numpy.ndarray
        The power (W) at each ``f``.
    """
    f = np.asarray(f, dtype=np.float64)
    out: np.ndarray = (600.0 + 100.0 * f) * (1.0 - dip * np.exp(-0.5 * ((f - 0.5) / 0.06) ** 2))
    return out


def relax(dt_ns: np.ndarray, from_w: Any, to_w: Any, tau_ns: float) -> np.ndarray:
    """First-order relaxation from ``from_w`` toward ``to_w`` after ``dt_ns`` (how idle power falls)."""
    out: np.ndarray = to_w + (from_w - to_w) * np.exp(-np.asarray(dt_ns, dtype=np.float64) / tau_ns)
    return out


# ---------------------------------------------------------------------------- sensors


def _first_order_at(t_grid: np.ndarray, p_grid: np.ndarray, tau_ns: float, e: np.ndarray) -> np.ndarray:
    # The exact response of exp(-u/tau)/tau to a piecewise-constant power (p_k held on
    # [t_k, t_k+1)), started settled at p_0: y_{k+1} = a y_k + (1 - a) p_k on the grid (a linear
    # recurrence, one lfilter pass), then the part of a step from the grid point below e.
    dt = float(t_grid[1] - t_grid[0])
    a = float(np.exp(-dt / tau_ns))
    z, _ = scipy.signal.lfilter([1.0 - a], [1.0, -a], p_grid, zi=[a * p_grid[0]])
    y = np.concatenate([[p_grid[0]], z[:-1]])
    k = np.clip(np.searchsorted(t_grid, e, side="right") - 1, 0, len(t_grid) - 1)
    w = np.exp(-(e - t_grid[k]) / tau_ns)
    return np.asarray(y[k] * w + p_grid[k] * (1.0 - w), dtype=np.float64)


def cumulative_energy(t_grid: np.ndarray, p_grid: np.ndarray) -> np.ndarray:
    """Energy (W ns) from the grid's start at each grid point, exact for power held from each point to the next."""
    return np.concatenate([[0.0], np.cumsum(p_grid[:-1] * np.diff(t_grid))])


def _check_grid(t_grid: np.ndarray, p_grid: np.ndarray, sensor: SensorModel, e: np.ndarray, slack: float) -> None:
    if t_grid.ndim != 1 or t_grid.shape != p_grid.shape or len(t_grid) < 2:
        raise ValueError(f"t_grid, p_grid: 1-D of one length >= 2, got {t_grid.shape} and {p_grid.shape}")
    step = np.diff(t_grid)
    if not (step > 0).all():
        raise ValueError("t_grid: must increase")
    if sensor.shape == "first_order" and np.ptp(step) > 1e-6 * step[0]:
        raise ValueError("t_grid: a first-order filter needs a uniform grid")
    reach = sensor.window_ns if sensor.kind == "window" and sensor.shape == "boxcar" else 0.0
    if len(e) and (e.min() - reach < t_grid[0] - slack or e.max() > t_grid[-1] + slack):
        raise ValueError(f"t_grid: [{t_grid[0]:.0f}, {t_grid[-1]:.0f}] ns does not cover the responses "
                         f"[{e.min() - reach:.0f}, {e.max():.0f}] ns (updates minus delay_ns, and the window)")


def _poll(u: np.ndarray, values: np.ndarray, windows: np.ndarray, poll_ns: float, phase: float, start: float,
          stop: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # A host tool reading a cached value: each poll returns the latest update stamped at or before
    # it, stamped with the poll's time; polls before the first update return nothing.
    order = np.argsort(u, kind="stable")
    u, values, windows = u[order], values[order], windows[order]
    w = start + phase + np.arange(0.0, stop - start - phase, poll_ns)
    idx = np.searchsorted(u, w, side="right") - 1
    ok = idx >= 0
    return w[ok], values[idx[ok]], windows[idx[ok]]


def _counter_reads(t_grid: np.ndarray, p_grid: np.ndarray, sensor: SensorModel, e: np.ndarray, noise_w: float,
                   rng: np.random.Generator) -> np.ndarray:
    # Energy (J) the counter holds at each update: gain times the exact integral, plus the
    # offset's energy, plus the integral of a white sensing noise (a random walk whose step
    # over an interval averages to noise_w W), truncated to whole quanta as a counter counts.
    cum = np.interp(e, t_grid, cumulative_energy(t_grid, p_grid))
    dt = np.diff(np.concatenate([[e[0]], e])) if len(e) else e
    walk = np.cumsum(rng.normal(0.0, noise_w, len(e)) * dt)
    energy = (sensor.gain * cum + sensor.offset_w * (e - t_grid[0]) + walk) * 1e-9
    if sensor.quantum > 0:
        energy = np.floor(energy / sensor.quantum) * sensor.quantum
    return np.asarray(energy, dtype=np.float64)


def _as_logs(stamps: np.ndarray, values: np.ndarray, windows: np.ndarray) -> np.ndarray:
    out = np.zeros(len(stamps), dtype=ANALYTIC_LOG_DTYPE)
    out["source_ts"] = np.round(stamps)
    out["total"] = values
    out["window_ns"] = windows
    return out


def observe(t_grid: npt.ArrayLike, p_grid: npt.ArrayLike, sensor: SensorModel, *, rng: np.random.Generator,
            start_ns: float, stop_ns: float, noise_w: float = 0.0, poll_ns: Optional[float] = None,
            phase_ns: Optional[float] = None, poll_phase_ns: Optional[float] = None,
            jitter_ns: float = 0.0) -> np.ndarray:
    """What a sensor logs of a true power given on a fine grid, exactly.

    Parameters
    ----------
    t_grid, p_grid : array_like
        Times (ns, increasing; uniform for a first-order filter) and the
        true power (W) there, held from each grid point to the next.
    sensor : SensorModel
        Kind, shape, window, time constant, delay (either sign), gain,
        offset, quantum and update period.
    rng : numpy.random.Generator
        Draws the update phase, the update-time jitter, the noise and the
        poll phase, in that order.
    start_ns, stop_ns : float
        The sensor updates (stamps) fall in ``[start_ns, stop_ns)``; so do the polls.
    noise_w : float
        Gaussian noise of each value (W; a counter integrates it, so each
        difference carries noise of about ``noise_w`` over its interval).
    poll_ns : float, optional
        A host tool polls the sensor's cached value every ``poll_ns``.
    phase_ns, poll_phase_ns : float, optional
        Phases of the updates and the polls after ``start_ns``; drawn
        uniformly over a period when not given.
    jitter_ns : float
        Gaussian jitter of each update time (firmware timers wander).

    Returns
    -------
    numpy.ndarray
        ANALYTIC_LOG_DTYPE: ``source_ts`` (int64 ns), ``total`` (float32 W),
        ``window_ns`` (uint32: the boxcar or counter interval; 0 for instants
        and filters), in stamp order.

    Raises
    ------
    ValueError
        A grid that is not 1-D and increasing, or does not cover the
        responses (updates minus the delay, and a boxcar's window).

    Notes
    -----
    An update at ``u`` reports ``offset + gain * R(u - delay_ns)`` plus
    noise, rounded to ``quantum``, stamped ``u``: the forward model of
    :meth:`SensorModel.interval_weights`. ``R`` is exact for the grid's
    piecewise-constant power: an instant interpolates the grid; a boxcar
    differences the cumulative integral over ``window_ns``; a first-order
    filter runs ``y_{k+1} = y_k exp(-dt/tau) + p_k (1 - exp(-dt/tau))`` from
    ``y_0 = p_0`` (settled at the grid's first value) and steps exactly to
    the update. A counter's reads hold ``gain`` times the exact energy plus
    the offset's, truncated to whole quanta, and are differenced as
    :func:`~fingrav_native.sensors.counter_to_logs` does (a read that did not
    move is dropped). A poller (``poll_ns``) reads a cached value, as
    ``nvidia-smi`` or ``amd-smi`` queries do: each poll returns the latest
    update stamped at or before it and is stamped with the poll's own time,
    so a change is seen up to one update period late and values repeat when
    polls outpace updates (kept, as real pollers produce them).
    """
    t_grid = np.asarray(t_grid, dtype=np.float64)
    p_grid = np.asarray(p_grid, dtype=np.float64)
    period = sensor.period_ns
    phase = rng.uniform(0, period) if phase_ns is None else float(phase_ns)
    u = start_ns + phase + np.arange(0.0, stop_ns - start_ns - phase, period)
    if jitter_ns > 0:
        u = u + rng.normal(0.0, jitter_ns, len(u))
    e = u - sensor.delay_ns
    _check_grid(t_grid, p_grid, sensor, e, slack=4.0 * jitter_ns + float(t_grid[1] - t_grid[0]))
    if sensor.kind == "counter":
        values = _counter_reads(t_grid, p_grid, sensor, e, noise_w, rng)
        windows = np.zeros(len(u))
    else:
        values, windows = _power_values(t_grid, p_grid, sensor, e)
        values = sensor.offset_w + sensor.gain * values + rng.normal(0.0, noise_w, len(u))
        if sensor.quantum > 0:
            values = np.round(values / sensor.quantum) * sensor.quantum
    if poll_ns is not None:
        pp = rng.uniform(0, poll_ns) if poll_phase_ns is None else float(poll_phase_ns)
        u, values, windows = _poll(u, values, windows, float(poll_ns), pp, start_ns, stop_ns)
    if sensor.kind == "counter":
        # Jittered read times may cross: the reads in time order, as a real poller takes them.
        order = np.argsort(u, kind="stable")
        c = counter_to_logs(np.round(u[order]).astype(np.int64), values[order], quantum_j=sensor.quantum).samples
        return _as_logs(c["source_ts"], c["total"], c["window_ns"])
    return _as_logs(u, values, windows)


def _power_values(t_grid: np.ndarray, p_grid: np.ndarray, sensor: SensorModel,
                  e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # The true response ending at e, and each log's boxcar window (0 when it has none).
    window = sensor.window_ns
    if sensor.shape == "first_order":
        return _first_order_at(t_grid, p_grid, sensor.tau_ns, e), np.zeros(len(e))
    if window > 0:
        cum = cumulative_energy(t_grid, p_grid)
        return (np.interp(e, t_grid, cum) - np.interp(e - window, t_grid, cum)) / window, np.full(len(e), window)
    return np.interp(e, t_grid, p_grid), np.full(len(e), window)


# ---------------------------------------------------------------------------- campaign runs


@dataclass(frozen=True)
class RunsTruth:
    """The true power of :func:`simulate_runs`' runs.

    Attributes
    ----------
    starts, ends : numpy.ndarray
        (runs, executions) host ns of every execution.
    levels : numpy.ndarray
        (executions,) W added to :func:`shape` per execution index.
    dips : numpy.ndarray
        (runs, executions) dip depth of every execution.
    cool_tau_ns : numpy.ndarray
        (runs,) cooling time constant after each run.
    energy_j : numpy.ndarray
        (runs,) true energy of each run's execution of interest (the last),
        integrated on the grid the sensors saw.
    idle_w, gap_w, gap_tau_ns, drift_w_per_s : float or None
        The options the power was drawn with.
    """

    starts: np.ndarray
    ends: np.ndarray
    levels: np.ndarray
    dips: np.ndarray
    cool_tau_ns: np.ndarray
    energy_j: np.ndarray
    idle_w: float
    gap_w: Optional[float]
    gap_tau_ns: float
    drift_w_per_s: float

    def power(self, t_ns: npt.ArrayLike) -> np.ndarray:
        """True power (W) at host times (idle, drift included, before, between and after the runs)."""
        t = np.asarray(t_ns, dtype=np.float64)
        # Each run owns the time from its first start to the next run's first start; the first
        # run also owns the idle before it.
        owner = np.clip(np.searchsorted(self.starts[:, 0], t, side="right") - 1, 0, len(self.starts) - 1)
        out = np.empty_like(t)
        for r in np.unique(owner):
            m = owner == r
            out[m] = _run_power(t[m], self.starts[r], self.ends[r], self.levels, self.dips[r], self.idle_w,
                                float(self.cool_tau_ns[r]), self.gap_w, self.gap_tau_ns, self.drift_w_per_s)
        return out

    def curve(self, f: npt.ArrayLike) -> np.ndarray:
        """Mean true power (W) of the execution of interest over progress ``f``, across the runs."""
        f = np.asarray(f, dtype=np.float64)
        s, e = self.starts[:, -1:], self.ends[:, -1:]
        p = shape(f[None, :], self.dips[:, -1:]) + self.levels[-1]
        if self.drift_w_per_s:
            p = p + self.drift_w_per_s * 1e-9 * (s + f[None, :] * (e - s))
        return np.asarray(p.mean(axis=0), dtype=np.float64)


@dataclass(frozen=True)
class LoggedRuns:
    """Runs, their logs and their truth (:func:`simulate_runs`)."""

    samples: np.ndarray
    executions: np.ndarray
    truth: RunsTruth


def _run_power(t: np.ndarray, starts: np.ndarray, ends: np.ndarray, levels: np.ndarray, dips: np.ndarray,
               idle: float, tau: float, gap_w: Optional[float], gap_tau: float, drift: float) -> np.ndarray:
    p = np.full_like(t, idle)
    end_w = shape(np.ones(len(dips)), dips) + levels
    n = len(starts)
    # Each instant's execution is the last one started at or before it (the executions of a run follow each
    # other); inside it the kernel's curve, after it until the next start the gap, after the last the cooling.
    i = np.searchsorted(starts, t, side="right") - 1
    j = np.clip(i, 0, n - 1)
    s, e = starts[j], ends[j]
    inside = (i >= 0) & (t < e)
    k = j[inside]
    p[inside] = shape((t[inside] - s[inside]) / (e[inside] - s[inside]), dips[k]) + levels[k]
    gap = (i >= 0) & (i + 1 < n) & (t >= e)
    # None: the method's assumption, the gap holds the end of the execution; else the compute units go idle
    # and power falls toward gap_w until the next launch.
    if gap_w is None:
        p[gap] = end_w[j[gap]]
    else:
        p[gap] = relax(t[gap] - e[gap], end_w[j[gap]], gap_w, gap_tau)
    m = t >= ends[-1]
    p[m] = idle + (end_w[-1] - idle) * np.exp(-(t[m] - ends[-1]) / tau)
    if drift:
        p = p + drift * 1e-9 * t
    return p


class Identity:
    """A clock map for logs already stamped in host ns: ``to_host`` returns its input, with no error.

    The simulator's logs (:func:`logged_runs`, :func:`~fingrav_native.sim.logged_loop`) are stamped on the
    host's clock, so this map is the truth a fitted clock map approximates (``ClockMapLike``).
    """

    def to_host(self, t: Any) -> np.ndarray:
        """Host ns of logger timestamps (the same numbers)."""
        return np.asarray(t, dtype=np.float64)

    def error_bound_at(self, t: Any) -> np.ndarray:
        """No error: the logs are stamped in host time."""
        return np.zeros(np.shape(t))


class EpochIdentity(Identity):
    """:class:`Identity` for logs stamped in epoch ns (a trace's own clock): int64 all the way.

    A float64 at 1.8e18 ns resolves only 256 ns, so the profile paths map
    through :meth:`to_host_ns` where a map has one.
    """

    def to_host_ns(self, t: Any) -> np.ndarray:
        """Host ns of logger timestamps, exactly (int64)."""
        return np.asarray(t, dtype=np.int64)


def logged_runs(n_runs: int, sensor: SensorModel, *, seed: int = 0, executions: int = 15, dip: float = 0.25,
                noise_w: float = 2.0, idle_w: float = 100.0, tau_ns: float = 2e6, gap_ns: float = 3_000.0,
                duration_jitter: float = 0.004, duration_ns: float = DURATION_NS, gap_w: Optional[float] = None,
                gap_tau_ns: float = GAP_TAU_NS, shape_jitter: float = 0.0, drift_w_per_s: float = 0.0,
                cool_tau_jitter: float = 0.0, poll_ns: Optional[float] = None) -> tuple[np.ndarray, np.ndarray]:
    """Executions and a sensor's logs of ``n_runs`` runs of a kernel whose power curve is :func:`shape`.

    Parameters
    ----------
    n_runs : int
        Runs; each starts at a random phase against the sensor.
    sensor : SensorModel
        Any sensor model, logged through :func:`observe`.
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
    gap_w, gap_tau_ns, shape_jitter, drift_w_per_s, cool_tau_jitter, poll_ns
        Options that break the attribution method's assumptions, each off
        by default (:func:`simulate_runs`).

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
    :func:`simulate_runs` gives the same runs with their truth.
    """
    out = simulate_runs(n_runs, sensor, seed=seed, executions=executions, dip=dip, noise_w=noise_w, idle_w=idle_w,
                        tau_ns=tau_ns, gap_ns=gap_ns, duration_jitter=duration_jitter, duration_ns=duration_ns,
                        gap_w=gap_w, gap_tau_ns=gap_tau_ns, shape_jitter=shape_jitter, drift_w_per_s=drift_w_per_s,
                        cool_tau_jitter=cool_tau_jitter, poll_ns=poll_ns)
    return out.samples, out.executions


def simulate_runs(n_runs: int, sensor: SensorModel, *, seed: int = 0, executions: int = 15, dip: float = 0.25,
                  noise_w: float = 2.0, idle_w: float = 100.0, tau_ns: float = 2e6, gap_ns: float = 3_000.0,
                  duration_jitter: float = 0.004, duration_ns: float = DURATION_NS, gap_w: Optional[float] = None,
                  gap_tau_ns: float = GAP_TAU_NS, shape_jitter: float = 0.0, drift_w_per_s: float = 0.0,
                  cool_tau_jitter: float = 0.0, poll_ns: Optional[float] = None) -> LoggedRuns:
    """:func:`logged_runs` with options that break the attribution method's assumptions, and the truth.

    Parameters
    ----------
    n_runs, sensor, seed, executions, dip, noise_w, idle_w, tau_ns, gap_ns, duration_jitter, duration_ns
        As :func:`logged_runs`.
    gap_w : float, optional
        None: a launch gap holds the end-of-execution power (the method's
        assumption). A power: the gap draws its own, falling from the
        end-of-execution level toward ``gap_w`` with ``gap_tau_ns``, and the
        next execution starts on its curve.
    gap_tau_ns : float
        How fast a gap's power falls (on real GPUs within microseconds once
        compute units go idle, while clocks stay up).
    shape_jitter : float
        Relative spread of each execution's dip depth (breaks "executions
        share one curve").
    drift_w_per_s : float
        A linear drift of all power over the record (host time from 0;
        breaks "no drift": ambient or board temperature).
    cool_tau_jitter : float
        Log-normal spread of each run's cooling time constant (breaks "one
        cooling curve").
    poll_ns : float, optional
        A host tool polls the sensor's cached value (:func:`observe`).

    Returns
    -------
    LoggedRuns
        ``samples`` and ``executions`` as :func:`logged_runs`, and ``truth``
        (:class:`RunsTruth`).

    Notes
    -----
    The breaks draw from their own random stream, so the same seed gives
    the same runs, phases and noise with or without them: a test compares
    the method on paired data. With every break off the output is
    bit-identical to the original :func:`logged_runs`.
    """
    rng = np.random.default_rng(seed)
    brk = np.random.default_rng([seed, 1])
    window = sensor.window_ns
    n_ex = executions
    starts, ends = np.zeros((n_runs, n_ex)), np.zeros((n_runs, n_ex))
    dips, taus, energy = np.zeros((n_runs, n_ex)), np.zeros(n_runs), np.zeros(n_runs)
    levels = np.linspace(-60.0, 0.0, n_ex)
    logs = []
    t0 = 0.0
    for r in range(n_runs):
        t0 += max(40e6, 3 * window) + rng.uniform(0, sensor.period_ns)
        durs = duration_ns * (1 + duration_jitter * rng.standard_normal(n_ex))
        s = t0 + np.concatenate([[0.0], np.cumsum(durs[:-1] + gap_ns)])
        starts[r], ends[r] = s, s + durs
        # Every break's draws are made whatever the options, so one break does not move another's.
        dips[r] = np.clip(dip * (1 + shape_jitter * brk.standard_normal(n_ex)), 0.0, 0.95)
        taus[r] = tau_ns * np.exp(cool_tau_jitter * brk.standard_normal())
        poll_phase = brk.uniform(0, 1) * (poll_ns or 0.0)
        lo, hi = s[0] - window - 2e6, ends[r, -1] + 20e6
        # The grid reaches every response: back by the window (and a filter's memory) and the delay, either sign.
        pad = abs(sensor.delay_ns) + 10.0 * sensor.tau_ns + 1e3
        grid = np.arange(lo - window - pad, hi + pad, 500.0)
        p = _run_power(grid, s, ends[r], levels, dips[r], idle_w, float(taus[r]), gap_w, gap_tau_ns, drift_w_per_s)
        cum = cumulative_energy(grid, p)
        energy[r] = float(np.diff(np.interp([s[-1], ends[r, -1]], grid, cum))[0]) * 1e-9
        logs.append(observe(grid, p, sensor, rng=rng, start_ns=lo, stop_ns=hi, noise_w=noise_w, poll_ns=poll_ns,
                            poll_phase_ns=poll_phase, jitter_ns=1_000.0))
    ex = make_executions(np.repeat(np.arange(n_runs), n_ex), np.tile(np.arange(n_ex), n_runs),
                         np.zeros(n_runs * n_ex, dtype=int), starts.ravel(), ends.ravel())
    truth = RunsTruth(starts, ends, levels, dips, taus, energy, float(idle_w), gap_w, float(gap_tau_ns),
                      float(drift_w_per_s))
    return LoggedRuns(np.concatenate(logs) if logs else np.zeros(0, ANALYTIC_LOG_DTYPE), ex, truth)
