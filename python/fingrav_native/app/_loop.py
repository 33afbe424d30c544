"""A training loop on the simulated GPU, seen as a user sees a real one: a profiler trace and a power capture.

In-situ profiling reads an application's own executions: every
iteration of a training loop is one of FinGraV's runs, at a random phase
against the free-running power logger (paper Section IV-A). This module
runs such a loop on :class:`~fingrav_native.sim.SimGPU` and writes
what a real session leaves behind: a torch.profiler (Kineto) Chrome trace on
the Unix-epoch clock (kernels, their launches, ``ProfilerStep#N``
iterations), or the rocprofv3 kernel trace of the same run on CLOCK_BOOTTIME
(CSV, JSON or rocpd), and the power logs stamped in the logger's own clock,
with the brackets that tie the host's raw monotonic clock to the epoch clock,
CLOCK_BOOTTIME and CLOCK_MONOTONIC. The
simulator knows the truth of every execution, so every in-situ method is
scored against it.

The loop is built to contain what makes real loops hard: several kernels
with different power curves, one kernel name launched with two grids (two
signatures that must stay apart), host gaps between kernels, a data-loading
pause every few iterations (the device cools, the next executions are cold
and slow: outliers the golden binning must leave out), a warm-up from idle
(power climbs over the first iterations), and the simulator's own rare slow
executions and slow runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import numpy as np

from fingrav_native._checks import instance_of, integer_in, real_number, short_repr
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.files._capture import PowerCapture
from fingrav_native.files._capture_counter import CapturedCounter
from fingrav_native.files._kineto import write_kineto_trace
from fingrav_native.files._outputs import check_output_path
from fingrav_native.files._rocprof_write import write_rocprof_trace
from fingrav_native.sensors._model import SensorModel
from fingrav_native.sim._device import SimGPU

#: An epoch time (ns) for the simulator's host zero: late 2025, where a float64 resolves only 256 ns.
SIM_EPOCH_NS = 1_763_900_000_123_456_789


#: CLOCK_BOOTTIME at the simulator's host zero: a host up for 3 days 4 h 17 min (far from the epoch
#: clock, and from the raw clock).
SIM_BOOT_NS = 274_632_345_678_901


#: How long the simulated host was suspended before the run: CLOCK_BOOTTIME - CLOCK_MONOTONIC.
SIM_SUSPENDED_NS = 2_823_250_000_000


@dataclass(frozen=True)
class LoopKernel:
    """One kernel of the loop: the simulator preset that runs, and how the trace names it."""

    preset: str
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int] = (256, 1, 1)

    def __post_init__(self) -> None:
        instance_of(self.preset, "preset", str, "a simulator kernel preset's name (a str)")
        instance_of(self.name, "name", str, "the kernel's name in the trace (a str)")
        for what in ("grid", "block"):
            v = getattr(self, what)
            if not isinstance(v, (tuple, list)) or len(v) != 3:
                raise ValueError(f"{what}={short_repr(v)}: must be three integers")
            object.__setattr__(self, what, tuple(integer_in(x, what, 1, 2**31 - 1) for x in v))


#: The default loop's kernels: one GEMM name launched with two grids (two shapes), and a GEMV.
LOOP_KERNELS = (
    LoopKernel("cb-4k-gemm", "gemm", (128, 1, 1)),
    LoopKernel("cb-2k-gemm", "gemm", (32, 1, 1)),
    LoopKernel("mb-4k-gemv", "gemv", (64, 1, 1)),
)


#: One iteration: phases of back-to-back kernels (preset, count), separated by host gaps.
DEFAULT_PHASES: tuple[tuple[tuple[str, int], ...], ...] = (
    (("cb-4k-gemm", 1), ("mb-4k-gemv", 2)),   # forward
    (("cb-2k-gemm", 2), ("cb-4k-gemm", 1)),   # backward
    (("mb-4k-gemv", 1),),                      # optimizer step
)


@dataclass(frozen=True)
class SimTrainingLoop:
    """A simulated training loop, its truth, and what a profiling session of it recorded.

    Attributes
    ----------
    gpu : SimGPU
        The device (its truth: ``truth_power``, ``executions``).
    executions : numpy.ndarray
        The simulator's EXEC_DTYPE records, in start order (host ns): the
        truth about each execution (``energy_j``, ``mean_total_w``).
    signature : numpy.ndarray
        Per execution, the index into ``kernels`` of its signature.
    kernels : tuple of LoopKernel
    iterations : numpy.ndarray
        (n, 2) int64: each iteration's CPU span (host ns), as ``prof.step()`` marks it.
    epoch_brackets : numpy.ndarray
        (m, 3) int64 (monotonic before, epoch, monotonic after): bracketed
        reads of the epoch clock taken through the session.
    epoch_offset_ns : int
        Epoch minus host time at host zero; the epoch clock also drifts
        against the host by ``epoch_slew_ppm`` (NTP slewing).
    epoch_slew_ppm : float
        NTP's slew, which CLOCK_BOOTTIME and CLOCK_MONOTONIC follow too.
    boot_offset_ns : int
        CLOCK_BOOTTIME minus host time at host zero.
    suspended_ns : int
        CLOCK_BOOTTIME minus CLOCK_MONOTONIC (time spent suspended).
    clock_brackets : dict of str to numpy.ndarray
        Bracketed reads of CLOCK_BOOTTIME and CLOCK_MONOTONIC, in the bursts
        of ``epoch_brackets``.
    """

    gpu: SimGPU
    executions: np.ndarray
    signature: np.ndarray
    kernels: tuple[LoopKernel, ...]
    iterations: np.ndarray
    epoch_brackets: np.ndarray
    epoch_offset_ns: int
    epoch_slew_ppm: float
    meta: dict[str, Any] = field(default_factory=dict)
    boot_offset_ns: int = SIM_BOOT_NS
    suspended_ns: int = SIM_SUSPENDED_NS
    clock_brackets: dict[str, np.ndarray] = field(default_factory=dict)

    def to_epoch(self, host_ns: Any) -> np.ndarray:
        """The true epoch time (int64 ns) at host times (exact integer arithmetic)."""
        return self.to_clock(host_ns, "CLOCK_REALTIME")

    def to_clock(self, host_ns: Any, clock: str) -> np.ndarray:
        """The true time (int64 ns) of host clock ``clock`` at host times (exact integer arithmetic).

        ``clock`` is ``"CLOCK_REALTIME"``, ``"CLOCK_BOOTTIME"`` or
        ``"CLOCK_MONOTONIC"``: each the host time plus its offset, slewed
        alike by NTP.
        """
        offsets = {"CLOCK_REALTIME": self.epoch_offset_ns, "CLOCK_BOOTTIME": self.boot_offset_ns,
                   "CLOCK_MONOTONIC": self.boot_offset_ns - self.suspended_ns}
        if clock not in offsets:
            raise ValueError(f"clock={clock!r}: must be one of {', '.join(offsets)}")
        h = np.asarray(host_ns, dtype=np.int64)
        # The slew term is small (ppm x seconds): float64 is exact enough there; the large part stays int64.
        return h + offsets[clock] + np.rint(self.epoch_slew_ppm * 1e-6 * h.astype(np.float64)).astype(np.int64)

    def samples(self) -> np.ndarray:
        """The power logs as a sampler drained them (SAMPLE_DTYPE: ``source_ts`` in the logger's clock)."""
        return self.gpu.samples()

    @property
    def sensor(self) -> SensorModel:
        """What each log measures."""
        return self.gpu.sensor

    def write_trace(self, path: Union[str, os.PathLike[str]]) -> str:
        """Write the loop as torch.profiler would export it (Kineto Chrome trace, epoch clock, exact ns)."""
        ex = self.executions
        k = [self.kernels[i] for i in self.signature]
        start, end = self.to_epoch(ex["start_ns"]), self.to_epoch(ex["end_ns"])
        # Launch calls of one phase follow each other on the CPU by a few microseconds, never after the kernel.
        launch = np.minimum(self.to_epoch(ex["host_launch_ns"]) + 3_000 * ex["index"].astype(np.int64), start)
        return write_kineto_trace(path, [x.name for x in k], [x.grid for x in k], [x.block for x in k], start, end,
                                  base_time_ns=int(self.to_epoch(np.array([0]))[0]) // 1_000_000_000 * 1_000_000_000,
                                  launch_ns=launch, steps=self.to_epoch(self.iterations))

    def write_rocprof_trace(self, path: Union[str, os.PathLike[str]], output_format: str = "csv") -> str:
        """Write the loop as ``rocprofv3 --kernel-trace`` would (CLOCK_BOOTTIME, exact ns): CSV, JSON or rocpd.

        Parameters
        ----------
        path : str or path-like
            ``<prefix>kernel_trace.csv`` (its ``agent_info.csv`` beside it),
            or the ``.json`` / ``.db`` file.
        output_format : {"csv", "json", "rocpd"}

        Returns
        -------
        str
            The path written (:func:`~fingrav_native.files.write_rocprof_trace`;
            the GPU is ordinal 0 behind two CPU agents, so agent 2).
        """
        ex = self.executions
        k = [self.kernels[i] for i in self.signature]
        return write_rocprof_trace(path, [x.name for x in k], [x.grid for x in k], [x.block for x in k],
                                   self.to_clock(ex["start_ns"], "CLOCK_BOOTTIME"),
                                   self.to_clock(ex["end_ns"], "CLOCK_BOOTTIME"), output_format=output_format)

    def capture(self, energy_counter: bool = False) -> PowerCapture:
        """The power logs as a :class:`~fingrav_native.app.PowerRecorder` would have saved them.

        The logs are stamped in the logger's own clock (``source_ts``), seen
        by the sampler at host (monotonic) times; the epoch brackets tie the
        host clock to the trace's epoch clock, drift included, and the
        CLOCK_BOOTTIME and CLOCK_MONOTONIC brackets to those clocks. With
        ``energy_counter``, an accumulator of the true power too
        (:meth:`energy_counter`), as a recorder records a GPU's counter.
        """
        p = self.gpu.params
        own = bool(p.get("logger_own_clock", 0.0))
        return PowerCapture(
            samples=np.ascontiguousarray(self.gpu.samples(), dtype=SAMPLE_DTYPE),
            epoch_brackets=np.ascontiguousarray(self.epoch_brackets, dtype=np.int64),
            source={"name": "simulated logger", "clock_domain": "sim-logger" if own else "sim-device",
                    "tick_ns": float(p["logger_tick_ns"] if own else p.get("device_tick_ns", 10.0)),
                    "native_period_ns": int(p["logger_period_ns"]), "window_ns": int(p["logger_window_ns"]),
                    "channels": ["total", "compute", "io", "memory"]},
            sensor=self.gpu.sensor, period_ns=int(p["poll_period_ns"]),
            stats={"drops": 0, "source_missed": 0}, counter=self.energy_counter() if energy_counter else None,
            meta={"device": "simulated GPU (virtual time)", "hostname": "simulator", "pid": 0,
                  "started_epoch_ns": int(self.to_epoch(np.array([0]))[0]),
                  "stopped_epoch_ns": int(self.to_epoch(np.array([self.gpu.now()]))[0]), **self.meta},
            clock_brackets={c: np.ascontiguousarray(b, dtype=np.int64) for c, b in self.clock_brackets.items()})

    def energy_counter(self, every_ns: int = 2_000_000, grid_ns: int = 1_000) -> CapturedCounter:
        """An energy accumulator of the device's true power, as a recorder would have polled it.

        The simulator's true total power integrated on a ``grid_ns`` grid
        (midpoints), read every ``every_ns`` on the host's clock and
        quantised to 2^-16 J (AMD's ``energy_accumulator``): a counter
        consistent with the power, for the energy closure of
        :func:`~fingrav_native.profile_trace`.
        """
        start = int(np.min(self.gpu.samples()["host_ns"])) if len(self.gpu.samples()) else 0
        t = np.arange(start, self.gpu.now(), grid_ns, dtype=np.int64)
        p = np.asarray(self.gpu.truth_power(t + grid_ns // 2)[:, 0], dtype=np.float64)
        quantum = 2.0 ** -16
        cum = np.floor(np.concatenate([[0.0], np.cumsum(p) * grid_ns * 1e-9]) / quantum) * quantum
        k = np.arange(0, len(t) + 1, max(every_ns // grid_ns, 1))
        steps = np.zeros(len(k) - 1, dtype=SAMPLE_DTYPE)
        steps["source_ts"] = steps["host_ns"] = start + k[1:] * grid_ns
        steps["seq"] = np.arange(len(steps))
        steps["window_ns"] = np.diff(k) * grid_ns
        steps["total"] = np.diff(cum[k]) / (np.diff(k) * grid_ns * 1e-9)
        return CapturedCounter(samples=steps, source={"name": "simulated energy accumulator (true power)",
                                                      "clock_domain": "host-monotonic-raw", "tick_ns": 1.0,
                                                      "native_period_ns": every_ns, "window_ns": 0,
                                                      "channels": ["total"]},
                               quantum_j=quantum, stale_ns=0.0, scope="gpu", period_ns=every_ns)

    def save(self, folder: Union[str, os.PathLike[str]], energy_counter: bool = False) -> tuple[str, str]:
        """Write ``trace.json.gz`` and ``power.npz`` into ``folder`` (what a recorded session leaves).

        With ``energy_counter`` the capture holds an accumulator of the true power (:meth:`capture`).
        """
        folder = check_output_path(folder, "folder", folder=True)
        os.makedirs(folder, exist_ok=True)
        return (self.write_trace(os.path.join(folder, "trace.json.gz")),
                self.capture(energy_counter).save(os.path.join(folder, "power.npz")))

    def truth_energy_j(self, rows: Any) -> float:
        """Mean true energy (J) of the executions ``rows`` (indices into :attr:`executions`)."""
        return float(np.mean(self.executions["energy_j"][np.asarray(rows, dtype=np.int64)]))


#: Bounds of a simulated loop: beyond them a value is a mistake, not a loop (minutes of simulation, GBs).
_MAX_ITERATIONS = 1_000_000
_MAX_IDLE_NS = 3_600 * 10**9  # an hour of virtual idle (3.6 million 1 ms logs)
_MAX_GAP_NS = 10**9


def _check_loop(iterations: Any, gap_ns: Any, iteration_gap_ns: Any, pause_every: Any, pause_ns: Any,
                idle_before_ns: Any, brackets_every_ns: Any, epoch_slew_ppm: Any) -> None:
    """:func:`simulate_training_loop`'s numbers, each named when it is wrong or absurd."""
    integer_in(iterations, "iterations", 1, _MAX_ITERATIONS)
    for name, rng_ in (("gap_ns", gap_ns), ("iteration_gap_ns", iteration_gap_ns)):
        if not isinstance(rng_, (tuple, list)) or len(rng_) != 2:
            raise ValueError(f"{name}={short_repr(rng_)}: must be (low, high) with 0 <= low <= high")
        lo, hi = (integer_in(x, name, 0, _MAX_GAP_NS) for x in rng_)
        if lo > hi:
            raise ValueError(f"{name}={rng_!r}: must be (low, high) with 0 <= low <= high")
    integer_in(pause_every, "pause_every", 0)
    integer_in(pause_ns, "pause_ns", 0, _MAX_IDLE_NS)
    integer_in(idle_before_ns, "idle_before_ns", 0, _MAX_IDLE_NS)
    # A burst of 8 reads per interval: 1 ms at least, or the brackets outnumber the logs.
    integer_in(brackets_every_ns, "brackets_every_ns", 1_000_000)
    real_number(epoch_slew_ppm, "epoch_slew_ppm", low=-1e4, high=1e4)


def _loop_kernels(kernels: Any) -> list[LoopKernel]:
    if isinstance(kernels, (str, bytes, dict)) or not hasattr(kernels, "__iter__"):
        raise ValueError(f"kernels={short_repr(kernels)}: must be a sequence of LoopKernel")
    out = list(kernels)
    bad = [k for k in out if not isinstance(k, LoopKernel)]
    if bad or not out:
        raise ValueError(f"kernels: must be a non-empty sequence of LoopKernel, got {short_repr(bad[0] if bad else out)}")
    return out


def _phases(phases: Any) -> list[list[tuple[str, int]]]:
    """The iteration's phases: sequences of (preset, count), counts of at least 1."""
    try:
        out = [[(str(p), int(n)) for p, n in ph] for ph in phases]
        ok = all(isinstance(p, str) and isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1
                 for ph in phases for p, n in ph)
    except (TypeError, ValueError):
        ok = False
    if not ok or not out:
        raise ValueError(f"phases={short_repr(phases)}: must be sequences of (preset, count >= 1) pairs")
    return out


def simulate_training_loop(
    iterations: int = 2000,
    *,
    seed: int = 0,
    sensor: Union[SensorModel, str, None] = None,
    kernels: Sequence[LoopKernel] = LOOP_KERNELS,
    phases: Sequence[Sequence[tuple[str, int]]] = DEFAULT_PHASES,
    gap_ns: tuple[int, int] = (10_000, 60_000),
    iteration_gap_ns: tuple[int, int] = (20_000, 200_000),
    pause_every: int = 50,
    pause_ns: int = 3_000_000,
    idle_before_ns: int = 50_000_000,
    epoch_slew_ppm: float = 25.0,
    brackets_every_ns: int = 500_000_000,
    **params: float,
) -> SimTrainingLoop:
    """Run a training loop on the simulated GPU in virtual time.

    Parameters
    ----------
    iterations : int
        Iterations of the loop.
    seed : int
        Seeds the device and the loop's own gaps.
    sensor : SensorModel or str, optional
        The logger's sensor (a preset name such as ``"amd-1ms-average"``);
        default the paper's instantaneous 1 ms logger.
    kernels : sequence of LoopKernel
        Every preset the phases run, with its trace name, grid and block.
    phases : sequence of sequences of (preset, count)
        One iteration: phases of back-to-back kernels separated by host gaps.
    gap_ns, iteration_gap_ns : (int, int)
        Uniform ranges of the host gap between phases and between iterations.
    pause_every, pause_ns : int
        A data-loading pause of ``pause_ns`` after every ``pause_every``
        iterations (0: none).
    idle_before_ns : int
        Idle before the loop (the warm-up then starts from a cold device).
    epoch_slew_ppm : float
        Drift of the epoch clock against the host's monotonic clock.
    brackets_every_ns : int
        Interval of the epoch-clock bracket bursts.
    **params : float
        :class:`SimGPU` parameters. Defaults here: ``logger_own_clock=1``
        (the logger stamps with its own firmware clock) and
        ``sync_poll_ns=0`` (the host sees each phase end at once, as a
        loop's event-driven waits do; campaigns keep the harness's 1 ms
        polls).

    Returns
    -------
    SimTrainingLoop

    Raises
    ------
    ValueError
        A bad argument, named.
    """
    _check_loop(iterations, gap_ns, iteration_gap_ns, pause_every, pause_ns, idle_before_ns, brackets_every_ns,
                epoch_slew_ppm)
    by_preset = {k.preset: i for i, k in enumerate(_loop_kernels(kernels))}
    missing = sorted({p for ph in _phases(phases) for p, _ in ph} - set(by_preset))
    if missing:
        raise ValueError(f"phases: presets {missing} have no entry in kernels")
    params.setdefault("logger_own_clock", 1.0)
    params.setdefault("sync_poll_ns", 0.0)  # a training loop waits on events, not in 1 ms polls
    gpu = SimGPU(seed=seed, realtime=False, sensor=sensor, **params)
    rng = np.random.default_rng([seed, 17])
    gpu.idle(idle_before_ns)
    steps = np.empty((iterations, 2), dtype=np.int64)
    for it in range(iterations):
        steps[it, 0] = gpu.now()
        for j, phase in enumerate(phases):
            gpu.sequence(list(phase))
            if j + 1 < len(phases):
                gpu.idle(int(rng.integers(gap_ns[0], gap_ns[1] + 1)))
        gpu.idle(int(rng.integers(iteration_gap_ns[0], iteration_gap_ns[1] + 1)))
        if pause_every and it % pause_every == pause_every - 1:
            gpu.idle(pause_ns)  # the data loader
        steps[it, 1] = gpu.now()
    gpu.idle(5_000_000)  # logs that cover the last iteration
    ex = gpu.executions()
    ex = ex[np.argsort(ex["start_ns"], kind="stable")]
    names = gpu.kernel_names()
    sig = np.array([by_preset[names[k]] for k in ex["kernel_id"]], dtype=np.int64)
    loop = SimTrainingLoop(gpu=gpu, executions=ex, signature=sig, kernels=tuple(kernels), iterations=steps,
                           epoch_brackets=np.empty((0, 3), dtype=np.int64), epoch_offset_ns=SIM_EPOCH_NS,
                           epoch_slew_ppm=float(epoch_slew_ppm),
                           meta={"seed": seed, "iterations": iterations, "sensor": gpu.sensor.name})
    # Bracketed reads of each host clock, as a recorder takes them: a read between two raw monotonic reads.
    t = np.arange(0, gpu.now() + brackets_every_ns, brackets_every_ns, dtype=np.int64)
    t = np.repeat(t, 8) + np.tile(np.arange(8, dtype=np.int64) * 1_000, len(t))
    brackets = {}
    for clock in ("CLOCK_REALTIME", "CLOCK_BOOTTIME", "CLOCK_MONOTONIC"):
        d1 = rng.integers(20, 120, len(t))
        d2 = rng.integers(20, 120, len(t))
        wide = rng.random(len(t)) < 0.05  # a read preempted now and then
        d2[wide] += rng.integers(2_000, 20_000, int(wide.sum()))
        brackets[clock] = np.stack([t, loop.to_clock(t + d1, clock), t + d1 + d2], axis=1)
    object.__setattr__(loop, "epoch_brackets", brackets.pop("CLOCK_REALTIME"))
    object.__setattr__(loop, "clock_brackets", brackets)
    return loop
