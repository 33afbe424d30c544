"""An in-situ training loop in closed form: kernels of several signatures, gaps, pauses, warm-up, drift.

In situ (``insitu``, ``method._joint``) the profiler sees a loop, not a
campaign: every iteration launches the same few kernels back to back with
launch gaps of a few microseconds, then the host pauses (data loading, the
optimiser's CPU work) and the GPU relaxes toward idle. This device builds such
a loop on a fine grid whose power is a formula, logs it through any
:class:`~fingrav_native.sensors.SensorModel` with
:func:`~fingrav_native.sim._analytic.observe`, and keeps the truth: each
signature's energy per execution and curve, and each iteration's energy with
its gaps and pause. None of the attribution method's conveniences hold:
gaps and pauses draw their own power, the first iterations run cooler (a
warm-up a profiler must leave out), and power may drift.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt

from fingrav_native.insitu._trace import STEP_DTYPE, KernelTrace
from fingrav_native.records._layouts import make_executions
from fingrav_native.sensors._model import SensorModel
from fingrav_native.sim._analytic import GAP_TAU_NS, cumulative_energy, observe, relax

#: Per signature (its id is its index, in order of first launch in an iteration): name, duration
#: (ns), base and ramp power (W at progress 0 and added by its end), dip depth, dip position and
#: width, and the share missing at launch (power rises over the first ~3 % as work fills the CUs).
SIGNATURES = (
    ("gemm_bf16_4096x4096", 400_000.0, 430.0, 120.0, 0.0, 0.5, 0.1, 0.20),      # compute-bound, heats up
    ("elementwise_add_f32", 60_000.0, 280.0, 30.0, 0.0, 0.5, 0.1, 0.0),          # memory-bound, flat
    ("attention_fwd_h128", 150_000.0, 480.0, 60.0, 0.30, 0.6, 0.08, 0.10),       # a softmax dip
    ("gemv_fp16_4096", 40_000.0, 330.0, -20.0, 0.10, 0.3, 0.1, 0.0),             # bandwidth-bound
    ("layernorm_small", 25_000.0, 230.0, 20.0, 0.0, 0.5, 0.1, 0.0),              # too short to fill the GPU
)

#: The signatures one iteration launches, in order (some twice: a forward and a backward GEMM).
SEQUENCE = (0, 1, 2, 3, 0, 4, 1)

#: With ``communication_w``: a DDP all-reduce on its own stream, one an iteration, from the start of the
#: second kernel of :data:`SEQUENCE` to the end of the sixth (it overlaps five of the seven, as 37-75 % of
#: compute executions overlap one on real DDP/FSDP traces).
COMMUNICATION = ("ncclKernel_AllReduce_RING_LL_Sum_float", 1, 5)

#: With ``communication_exposed``: the all-reduce runs alone in the host's pause instead, starting this long
#: after the iteration's last kernel ends and lasting this long (ns): a gradient bucket synchronised after
#: the backward pass, with no compute beside it (DDP's last bucket, a pipeline's send).
EXPOSED_COMMUNICATION_NS = (10_000.0, 150_000.0)

#: With ``concurrent_w``: a kernel on a second compute stream, one an iteration: its name, its start after the
#: iteration's first kernel starts (even iterations: inside that 400 us GEMM, beside it) or after the
#: iteration's last kernel ends (odd iterations: alone in the host's pause), and its duration (ns).
CONCURRENT = ("copy_transpose_aux_stream_f16", 100_000.0, 20_000.0, 60_000.0)


def kernel_curve(sig: int, f: npt.ArrayLike) -> np.ndarray:
    """Steady power (W) of signature ``sig`` over execution progress ``f`` in [0, 1].

    Parameters
    ----------
    sig : int
        Index into :data:`SIGNATURES`.
    f : array_like
        Progress through the execution.

    Returns
    -------
    numpy.ndarray
        ``(base + ramp f)(1 - dip exp(-(f - at)^2 / 2 width^2))(1 - lead exp(-f / 0.03))``.
    """
    _, _, base, ramp, dip, at, width, lead = SIGNATURES[sig]
    f = np.asarray(f, dtype=np.float64)
    out: np.ndarray = ((base + ramp * f) * (1.0 - dip * np.exp(-0.5 * ((f - at) / width) ** 2))
                       * (1.0 - lead * np.exp(-f / 0.03)))
    return out


@dataclass(frozen=True)
class LoopSchedule:
    """When every execution ran and what power the loop drew: the truth as a function of time.

    Attributes
    ----------
    starts, ends : numpy.ndarray
        Per execution, host ns (float).
    sig : numpy.ndarray
        Per execution, its signature id.
    iteration : numpy.ndarray
        Per execution, its iteration.
    level : numpy.ndarray
        Per execution, its power relative to steady (below 1 in the warm-up).
    pause_after : numpy.ndarray
        Per execution, whether the host pauses after it (the iteration's last kernel).
    record_end_ns : float
        End of the last pause.
    idle_w, gap_w, gap_tau_ns, pause_tau_ns, drift_w_per_s, max_power_w : float
        How gaps, pauses and drift draw power; the board limit power is held under.
    comm_starts, comm_ends : numpy.ndarray
        Communication kernels (NCCL/RCCL collectives on their own stream), host ns; none by default.
    comm_w : float
        What a communication kernel adds while it runs, whatever else does (links and copy engines).
    aux_starts, aux_ends : numpy.ndarray
        A second compute stream's kernels (:data:`CONCURRENT`), host ns; none by default.
    aux_w : float
        What a second stream's kernel adds while it runs, whatever else does.
    """

    starts: np.ndarray
    ends: np.ndarray
    sig: np.ndarray
    iteration: np.ndarray
    level: np.ndarray
    pause_after: np.ndarray
    record_end_ns: float
    idle_w: float
    gap_w: float
    gap_tau_ns: float
    pause_tau_ns: float
    drift_w_per_s: float
    max_power_w: float
    comm_starts: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    comm_ends: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    comm_w: float = 0.0
    aux_starts: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    aux_ends: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    aux_w: float = 0.0

    def power(self, t_ns: npt.ArrayLike) -> np.ndarray:
        """True power (W) at host times.

        Notes
        -----
        Before the first launch the GPU idles. An execution draws
        ``level * kernel_curve(sig, f)``; after it the compute units go idle
        and power relaxes from its end value toward ``gap_w`` with
        ``gap_tau_ns`` (launch gaps), or toward ``idle_w`` with
        ``pause_tau_ns`` (the host's pause: clocks and voltage fall too), until
        the next launch. Drift adds ``drift_w_per_s`` per second of host time,
        a running communication kernel ``comm_w``, a running second stream's
        kernel ``aux_w``; the board limit caps the sum (the firmware's power
        cap).
        """
        shape = np.shape(t_ns)
        t = np.asarray(t_ns, dtype=np.float64).ravel()
        # In time order (a grid already is) the times inside each execution, and after it until the next launch,
        # are runs of positions: found by one search per execution, not one per time, and each signature's
        # curve evaluated on its own runs alone. Every time's power is the same arithmetic in any order.
        order = None if bool(np.all(t[1:] >= t[:-1])) else np.argsort(t, kind="stable")
        if order is not None:
            t = t[order]
        first = np.searchsorted(t, self.starts, side="left")  # the first time at or after each launch
        nxt = np.append(first[1:], len(t))
        done = np.clip(np.searchsorted(t, self.ends, side="left"), first, nxt)  # the first after it ends
        p = np.full(t.shape, self.idle_w)
        dur = self.ends - self.starts
        for s in range(len(SIGNATURES)):
            ks = np.flatnonzero(self.sig == s)
            at, kr = _runs(first[ks], done[ks] - first[ks], ks)
            p[at] = self.level[kr] * kernel_curve(s, (t[at] - self.starts[kr]) / dur[kr])
        end_w = self.level * np.array([float(kernel_curve(s, 1.0)) for s in range(len(SIGNATURES))])[self.sig]
        at, ka = _runs(done, nxt - done, np.arange(len(done)))
        since = t[at] - self.ends[ka]
        pause = self.pause_after[ka]
        p[at] = np.where(pause, relax(since, end_w[ka], self.idle_w, self.pause_tau_ns),
                         relax(since, end_w[ka], self.gap_w, self.gap_tau_ns))
        if self.drift_w_per_s:
            p = p + self.drift_w_per_s * 1e-9 * t
        if len(self.comm_starts):
            # Communication kernels do not overlap one another here: one searchsorted says which runs.
            c = np.searchsorted(self.comm_starts, t, side="right") - 1
            p = p + self.comm_w * ((c >= 0) & (t < self.comm_ends[np.clip(c, 0, None)]))
        if len(self.aux_starts):
            c = np.searchsorted(self.aux_starts, t, side="right") - 1
            p = p + self.aux_w * ((c >= 0) & (t < self.aux_ends[np.clip(c, 0, None)]))
        p = np.minimum(p, self.max_power_w)
        if order is not None:
            p[order] = p.copy()
        return np.asarray(p.reshape(shape), dtype=np.float64)


def _runs(start: np.ndarray, length: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the runs ``[start, start + length)`` one after another, and each position's run's owner."""
    length = np.maximum(length, 0)
    ends = np.cumsum(length)
    return np.arange(ends[-1] if len(ends) else 0) - np.repeat(ends - length - start, length), np.repeat(owner, length)


@dataclass(frozen=True)
class LoggedLoop:
    """A training loop's logs, its kernel trace and its true energies (:func:`logged_loop`).

    Attributes
    ----------
    samples : numpy.ndarray
        ANALYTIC_LOG_DTYPE logs (host ns, from 0 at the record's start).
    executions : numpy.ndarray
        EXECUTION_DTYPE: ``run`` the execution's number, ``index`` 0,
        ``kernel_id`` the signature id, host ns.
    names : tuple of str
        Kernel name per signature id.
    trace : KernelTrace
        The executions as a profiler trace (times relative to its
        ``origin_ns``, the first launch), each iteration a step.
    energy_j : numpy.ndarray
        Per signature, the mean true energy (J) per execution over the
        steady iterations.
    iteration_energy_j, gap_energy_j, pause_energy_j : float
        Mean true energy per steady iteration: in all, in its launch gaps,
        in its host pause.
    counts : numpy.ndarray
        Per signature, executions per iteration.
    iterations, warmup_iterations : int
        Iterations in the record; the first ``warmup_iterations`` run cooler.
    max_power_w : float
        The board limit.
    schedule : LoopSchedule
        The whole truth, as a function of time.
    span_energy_j : float
        With ``concurrent_w``: the mean true energy (J) of the steady spans
        in which the second stream's kernel runs beside a GEMM (the span is
        the GEMM's execution, which holds it); NaN without.
    spans : int
        With ``concurrent_w``: the steady spans behind ``span_energy_j``.
    """

    samples: np.ndarray
    executions: np.ndarray
    names: tuple[str, ...]
    trace: KernelTrace
    energy_j: np.ndarray
    iteration_energy_j: float
    gap_energy_j: float
    pause_energy_j: float
    counts: np.ndarray
    iterations: int
    warmup_iterations: int
    max_power_w: float
    schedule: LoopSchedule
    span_energy_j: float = math.nan
    spans: int = 0

    def power(self, t_ns: npt.ArrayLike) -> np.ndarray:
        """True power (W) at host times (:meth:`LoopSchedule.power`)."""
        return self.schedule.power(t_ns)

    def curve(self, sig: int, f: npt.ArrayLike) -> np.ndarray:
        """Mean true power (W) of signature ``sig`` over progress ``f``, across its steady executions."""
        sc = self.schedule
        f = np.atleast_1d(np.asarray(f, dtype=np.float64))
        k = np.flatnonzero((sc.sig == sig) & (sc.iteration >= self.warmup_iterations))
        t = sc.starts[k, None] + f[None, :] * (sc.ends[k] - sc.starts[k])[:, None]
        p = sc.level[k, None] * kernel_curve(sig, f)[None, :] + sc.drift_w_per_s * 1e-9 * t
        return np.asarray(np.minimum(p, sc.max_power_w).mean(axis=0), dtype=np.float64)


def draw_schedule(rng: np.random.Generator, iterations: int, *, duration_jitter: float, pause_ns: float,
                  pause_jitter: float, warmup: float, warmup_iterations: int, lead_ns: float,
                  gap_range_ns: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                              np.ndarray, np.ndarray, float]:
    """When each execution of :func:`logged_loop`'s loop runs, and how far its power has warmed up.

    The loop's kernels (:data:`SIGNATURES`) run in :data:`SEQUENCE` every
    iteration, each with a launch gap after it and the host's pause after the
    iteration's last; the truth :func:`logged_loop` logs, drawn alone so a
    bench or test can build its own power or trace on the same timeline.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the durations' jitter, the gaps and the pauses.
    iterations : int
        Iterations of the loop.
    duration_jitter : float
        Relative standard deviation of each execution's duration.
    pause_ns : float
        The host's median pause after each iteration (ns).
    pause_jitter : float
        Standard deviation of the pause's logarithm.
    warmup : float
        Relative power deficit at the first iteration (0: none).
    warmup_iterations : int
        Iterations the warm-up lasts; its level rises with a time constant of a fifth of them.
    lead_ns : float
        Time before the first execution (ns).
    gap_range_ns : (float, float)
        Uniform range of the launch gap after each kernel (ns).

    Returns
    -------
    tuple
        ``(starts, ends, signature, iteration, level, pause_after, end_ns)``: each execution's start and
        end (ns), its index into :data:`SIGNATURES`, its iteration, its warm-up level (1 when steady) and
        whether the host's pause follows it; and when the last gap ends.
    """
    # Launch times: each kernel's duration jittered, a launch gap after each, the host's pause
    # after the last of an iteration; warm-up levels rise to 1 with a time constant of a fifth of
    # the warm-up, so what is left at its end (e^-5 of it) is below 0.1 % of steady.
    per = len(SEQUENCE)
    n = iterations * per
    sig = np.tile(np.array(SEQUENCE), iterations)
    dur = np.array([SIGNATURES[s][1] for s in SEQUENCE])[np.tile(np.arange(per), iterations)]
    dur = dur * (1.0 + duration_jitter * rng.standard_normal(n))
    gap = rng.uniform(gap_range_ns[0], gap_range_ns[1], n)
    pause_after = np.tile(np.arange(per) == per - 1, iterations)
    gap[pause_after] = pause_ns * np.exp(pause_jitter * rng.standard_normal(iterations))
    starts = lead_ns + np.concatenate([[0.0], np.cumsum(dur + gap)[:-1]])
    it = np.repeat(np.arange(iterations), per)
    level = 1.0 - warmup * np.exp(-it / max(warmup_iterations / 5.0, 1e-9))
    return starts, starts + dur, sig, it, level, pause_after, float(starts[-1] + dur[-1] + gap[-1])


def _energies(sc: LoopSchedule, cum_at: np.ndarray, warmup_iterations: int, iterations: int,
              alone: Optional[np.ndarray] = None) -> tuple[np.ndarray, float, float, float]:
    # Per-signature energy per execution (over the executions ``alone``, where given), and per-iteration
    # energy in all, in gaps and in pauses, each a mean over the steady iterations; cum_at(t) is the grid's
    # exact cumulative energy (J).
    def between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(np.interp(b, cum_at[0], cum_at[1]) - np.interp(a, cum_at[0], cum_at[1]))

    steady = (sc.iteration >= warmup_iterations) & (True if alone is None else alone)
    e_ex = between(sc.starts, sc.ends)
    energy = np.array([e_ex[steady & (sc.sig == s)].mean() for s in range(len(SIGNATURES))])
    steady = sc.iteration >= warmup_iterations
    nxt = np.append(sc.starts[1:], sc.record_end_ns)
    e_after = between(sc.ends, nxt)
    n_steady = iterations - warmup_iterations
    gap = float(e_after[steady & ~sc.pause_after].sum()) / n_steady
    pause = float(e_after[steady & sc.pause_after].sum()) / n_steady
    first = sc.starts[sc.iteration == warmup_iterations][0]
    total = float(between(np.array([first]), np.array([sc.record_end_ns]))[0]) / n_steady
    return energy, total, gap, pause


def logged_loop(sensor: SensorModel, *, seed: int = 0, iterations: int = 1024, noise_w: float = 2.0,
                poll_ns: Optional[float] = None, gap_w: float = 180.0, gap_tau_ns: float = GAP_TAU_NS,
                pause_ns: float = 300_000.0, pause_tau_ns: float = 50_000.0, idle_w: float = 120.0,
                drift_w_per_s: float = 0.0, warmup: float = 0.04, warmup_fraction: float = 0.05,
                duration_jitter: float = 0.005, pause_jitter: float = 0.1, max_power_w: float = 750.0,
                grid_ns: float = 500.0, communication_w: float = 0.0,
                communication_exposed: bool = False, concurrent_w: float = 0.0) -> LoggedLoop:
    """A training loop of several kernels, logged by ``sensor``, with its truth.

    Parameters
    ----------
    sensor : SensorModel
        Any sensor (:func:`~fingrav_native.sim.observe`).
    seed : int
        Draws the schedule; the sensor's phases and noise draw from their
        own stream, so one seed gives one loop whatever the sensor.
    iterations : int
        Iterations; the default gives about 1.5 s of loop (1.47 ms each).
    noise_w : float
        Gaussian noise of each log (W).
    poll_ns : float, optional
        A host tool polls the sensor's cached value.
    gap_w, gap_tau_ns : float
        Launch gaps (2-8 us) relax toward ``gap_w`` with ``gap_tau_ns``:
        compute units idle within microseconds, clocks stay up.
    pause_ns, pause_tau_ns, idle_w : float
        The host's pause per iteration (jittered by ``pause_jitter``,
        log-normal), during which power relaxes toward ``idle_w`` with
        ``pause_tau_ns`` (clocks and voltage come down too).
    drift_w_per_s : float
        A linear drift of all power over host time.
    warmup, warmup_fraction : float
        The first iteration runs ``warmup`` below steady power and the
        deficit decays over the first ``warmup_fraction`` of iterations
        (leakage grows as the dies heat): a profiler must leave it out.
    duration_jitter : float
        Relative spread of execution times.
    max_power_w : float
        The board limit; power above it is capped.
    grid_ns : float
        Step of the power grid (sampled at each step's midpoint, so gaps'
        fast exponentials integrate to within 1e-5 of their closed form).
    communication_w : float
        Above 0: a communication kernel per iteration (:data:`COMMUNICATION`,
        the last signature id) adds this much while it runs; the compute
        signatures' energies stay their own draw, the last one is its.
    communication_exposed : bool
        The communication kernel runs alone in the host's pause
        (:data:`EXPOSED_COMMUNICATION_NS`) instead of beside the compute
        kernels. Its energy is then what any kernel's is, the whole power
        over its executions; beside compute it is its additive level over its
        own executions (the compute kernels' draw is theirs).
    concurrent_w : float
        Above 0: a kernel on a second compute stream per iteration
        (:data:`CONCURRENT`, the signature id after the compute ones) adds
        this much while it runs, whatever else does; in even iterations it
        runs beside the first GEMM, in odd ones alone in the host's pause.
        Every compute signature's energy is then its mean over the steady
        executions that ran alone (as a profiler fits it), and
        ``span_energy_j`` the mean energy of a steady GEMM that ran with it.

    Returns
    -------
    LoggedLoop

    Notes
    -----
    Each iteration launches :data:`SEQUENCE` (seven kernels of the five
    :data:`SIGNATURES`: 400, 60, 150, 40 and 25 us, 230-560 W on a 750 W
    board). The truth's energies integrate the very grid the sensor saw.
    """
    if iterations < 2:
        raise ValueError(f"iterations={iterations!r}: at least 2")
    rng = np.random.default_rng(seed)
    n_warm = min(int(math.ceil(warmup_fraction * iterations)), iterations - 1)
    starts, ends, sig, it, level, pause_after, end = draw_schedule(
        rng, iterations, duration_jitter=duration_jitter, pause_ns=pause_ns, pause_jitter=pause_jitter, warmup=warmup,
        warmup_iterations=n_warm, lead_ns=2e6, gap_range_ns=(2_000.0, 8_000.0))
    sc = LoopSchedule(starts, ends, sig, it, level, pause_after, record_end_ns=float(end), idle_w=idle_w, gap_w=gap_w,
                      gap_tau_ns=gap_tau_ns, pause_tau_ns=pause_tau_ns, drift_w_per_s=drift_w_per_s,
                      max_power_w=max_power_w)
    sc = _with_side_work(sc, concurrent_w, communication_w, communication_exposed)
    # The grid reaches back a window (a boxcar's memory) and past either delay, idle before the loop.
    reach = sensor.window_ns + abs(sensor.delay_ns) + 20 * grid_ns
    t = np.arange(-reach, sc.record_end_ns + reach, grid_ns)
    p = sc.power(t + grid_ns / 2)
    cum = cumulative_energy(t, p) * 1e-9
    alone = _alone(sc) if concurrent_w else None
    energy, total, gap, pause = _energies(sc, np.vstack([t, cum]), n_warm, iterations, alone)
    samples = observe(t, p, sensor, rng=np.random.default_rng([seed, 2]), start_ns=0.0, stop_ns=sc.record_end_ns,
                      noise_w=noise_w, poll_ns=poll_ns)
    ex = make_executions(np.arange(len(sc.sig)), np.zeros(len(sc.sig), dtype=int), sc.sig, sc.starts, sc.ends)
    names = tuple(s[0] for s in SIGNATURES)
    kt = _trace(ex, names, sc)
    counts = np.bincount(np.array(SEQUENCE), minlength=len(SIGNATURES))
    span_j, spans = math.nan, 0
    if alone is not None:
        # The aux kernel's truth over its runs alone; a span's over the GEMM that holds it.
        own = cumulative_energy(t, dataclasses.replace(sc, comm_w=0.0).power(t + grid_ns / 2)) * 1e-9
        whole = np.interp(sc.aux_ends, t, own) - np.interp(sc.aux_starts, t, own)
        steady = np.arange(len(sc.aux_starts)) >= n_warm
        energy = np.append(energy, float(np.mean(whole[steady & (np.arange(len(whole)) % 2 == 1)])))
        held = np.flatnonzero(~alone & (sc.iteration >= n_warm))
        span = np.interp(sc.ends[held], t, own) - np.interp(sc.starts[held], t, own)
        span_j, spans = float(np.mean(span)), len(held)
        ex, names, kt = _with_kernels(ex, names, kt, sc.aux_starts, sc.aux_ends, CONCURRENT[0])
        counts = np.append(counts, 1)
    if communication_w:
        # The compute kernels' own draw (the communication's level left out), and the communication's.
        own = cumulative_energy(t, dataclasses.replace(sc, comm_w=0.0).power(t + grid_ns / 2)) * 1e-9
        if communication_exposed:
            # Alone on the device: the whole power over its executions, as every kernel's energy is.
            whole = np.interp(sc.comm_ends, t, cum) - np.interp(sc.comm_starts, t, cum)
            comm_j = float(np.mean(whole[n_warm:]))
        else:
            comm_j = communication_w * 1e-9 * float(np.mean((sc.comm_ends - sc.comm_starts)[n_warm:]))
        compute = _energies(sc, np.vstack([t, own]), n_warm, iterations, alone)[0]
        energy = np.append(np.concatenate([compute, energy[len(SIGNATURES):]]), comm_j)
        ex, names, kt = _with_kernels(ex, names, kt, sc.comm_starts, sc.comm_ends, COMMUNICATION[0])
        counts = np.append(counts, 1)
    return LoggedLoop(samples, ex, names, kt, energy, total, gap, pause, counts, iterations, n_warm,
                      float(max_power_w), sc, span_j, spans)


def _with_side_work(sc: LoopSchedule, concurrent_w: float, communication_w: float,
                    communication_exposed: bool) -> LoopSchedule:
    """The schedule with a second stream's kernel (``concurrent_w``) or communication (``communication_w``: beside
    the compute kernels, or ``communication_exposed`` in the host's pause) added."""
    if concurrent_w:
        if communication_exposed:
            raise ValueError("concurrent_w: the second stream's kernel runs in the host's pause, as the exposed "
                             "communication does; use one of them")
        sc = _with_second_stream(sc, float(concurrent_w))
    if communication_w and communication_exposed:
        c0 = sc.ends[len(SEQUENCE) - 1::len(SEQUENCE)] + EXPOSED_COMMUNICATION_NS[0]
        sc = dataclasses.replace(sc, comm_starts=c0, comm_ends=c0 + EXPOSED_COMMUNICATION_NS[1],
                                 comm_w=float(communication_w))
    elif communication_w:
        sc = dataclasses.replace(sc, comm_starts=sc.starts[COMMUNICATION[1]::len(SEQUENCE)],
                                 comm_ends=sc.ends[COMMUNICATION[2]::len(SEQUENCE)], comm_w=float(communication_w))
    return sc


def _with_second_stream(sc: LoopSchedule, aux_w: float) -> LoopSchedule:
    """The schedule with a second stream's kernel per iteration (:data:`CONCURRENT`): beside the first GEMM in even
    iterations, alone in the host's pause in odd ones."""
    per = len(SEQUENCE)
    first, last = sc.starts[::per], sc.ends[per - 1::per]
    it = np.arange(len(first))
    a = np.where(it % 2 == 0, first + CONCURRENT[1], last + CONCURRENT[2])
    return dataclasses.replace(sc, aux_starts=a, aux_ends=a + CONCURRENT[3], aux_w=aux_w)


def _alone(sc: LoopSchedule) -> np.ndarray:
    """Per execution of the main stream, whether no second stream's kernel runs beside it."""
    k = np.searchsorted(sc.aux_starts, sc.ends, side="left") - np.searchsorted(sc.aux_ends, sc.starts, side="right")
    return np.asarray(k <= 0)


def _with_kernels(ex: np.ndarray, names: tuple[str, ...], kt: KernelTrace, starts: np.ndarray, ends: np.ndarray,
                  name: str) -> tuple[np.ndarray, tuple[str, ...], KernelTrace]:
    """The executions, names and trace with kernels of another stream added (in start order, the next id)."""
    more = make_executions(len(ex) + np.arange(len(starts)), np.zeros(len(starts), dtype=int),
                           np.full(len(starts), len(names)), starts, ends)
    both = np.concatenate([ex, more])
    both = both[np.argsort(both["start_ns"], kind="stable")]
    both["run"] = np.arange(len(both))
    names = names + (name,)
    full = KernelTrace.from_executions(both, [names[s] for s in both["kernel_id"]])
    assert full.origin_ns == kt.origin_ns  # the first kernel is still the first compute kernel
    return both, names, dataclasses.replace(full, steps=kt.steps)


def _trace(ex: np.ndarray, names: tuple[str, ...], sc: LoopSchedule) -> KernelTrace:
    # from_executions takes no steps; each iteration becomes one (ProfilerStep#i) from its first
    # launch to the next iteration's.
    kt = KernelTrace.from_executions(ex, [names[s] for s in ex["kernel_id"]])
    first = ex["start_ns"][sc.iteration == 0][0]
    bounds = np.append(ex["start_ns"][np.flatnonzero(np.diff(sc.iteration, prepend=-1))], round(sc.record_end_ns))
    steps = np.zeros(len(bounds) - 1, dtype=STEP_DTYPE)
    steps["step"] = np.arange(len(steps))
    steps["start_ns"] = bounds[:-1] - first
    steps["end_ns"] = bounds[1:] - first
    return dataclasses.replace(kt, steps=steps)
