"""The simulated GPU as a backend: in virtual time (:class:`SimBackend`) and in real time (:class:`LiveSimBackend`).

Both drive :class:`fingrav_native.sim.SimGPU` through the same
:class:`~fingrav_native.backends.Backend` protocol a hardware backend
implements, so the orchestrator cannot tell them from a real GPU except by
declared capabilities.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import fraction, integer_in, short_repr
from fingrav_native.backends._base import (
    HostRelease,
    KernelSpec,
    LivePower,
    drain_all,
    execution_plan,
    wait_for_idle,
)
from fingrav_native.backends._report import BackendReport, Component, DeviceEntry
from fingrav_native.records._recording import Capabilities, RunRecord
from fingrav_native.sim._device import SimGPU
from fingrav_native.sim._device import sim_markers as sim_markers  # re-exported (the backends face)


class _SimCommon(HostRelease, abc.ABC):
    """What the virtual-time and the live simulated backends share (the release of steered launches included:
    the virtual-time backend's ``wait_until`` idles the device instead of sleeping)."""

    _realtime: bool

    def _setup(self, gpu: SimGPU | None, seed: int, brackets_per_run: int, idle_tolerance: float,
               max_idle_ns: int, params: dict[str, Any]) -> None:
        kind = "real-time" if self._realtime else "virtual-time"
        # Checked before the device is built: a count of 2**62 reads is a mistake, not a run to start.
        integer_in(brackets_per_run, "brackets_per_run", 2, 100_000)
        fraction(idle_tolerance, "idle_tolerance")
        integer_in(max_idle_ns, "max_idle_ns", 1, 3_600 * 10**9)
        if gpu is not None and not isinstance(gpu, SimGPU):
            raise ValueError(f"gpu={short_repr(gpu)}: must be a SimGPU or None")
        if gpu is None:
            gpu = SimGPU(seed=seed, realtime=self._realtime, **params)
        elif params:
            raise ValueError(f"{sorted(params)[0]}: simulator parameters go to SimGPU when a gpu is given")
        if gpu.realtime != self._realtime:
            raise ValueError(f"gpu: {type(self).__name__} drives a {kind} device; "
                             f"use realtime={self._realtime}")
        self.gpu = gpu
        self._rng = np.random.default_rng(seed)
        self._brackets_per_run = int(brackets_per_run)
        self._idle_tol = float(idle_tolerance)
        self._max_idle_ns = int(max_idle_ns)
        self._next_run_id = 0
        p = gpu.params
        self._logger_period = float(p["logger_period_ns"])
        sensor = gpu.sensor
        # How long after power changes until a log describes only the new
        # level: the window (a counter's is one period), the reporting delay
        # and five filter time constants (e^-5 < 1%). Zero for the paper's
        # instantaneous logger, which describes the new level at once.
        self._settle_ns = int(float(p["logger_window_ns"]) + float(p["logger_delay_ns"])
                              + 5 * float(p["logger_tau_ns"])
                              + (self._logger_period if bool(p["logger_counter"]) else 0.0))
        self._caps = Capabilities(
            name="sim-live" if self._realtime else "sim",
            device=f"simulated MI300X-class GPU ({'real' if self._realtime else 'virtual'} time)",
            logger_period_ns=self._logger_period,
            logger_window_ns=float(p["logger_period_ns"] if bool(p["logger_counter"]) else p["logger_window_ns"]),
            logger_clock="sim-logger" if bool(p["logger_own_clock"]) else "device",
            device_tick_ns=float(p["device_tick_ns"]),
            gpu_markers=True,
            marker_err_ns=float(p["marker_offset_ns"]) + 3 * float(p["marker_jitter_ns"]),
            channels=tuple(_core.CHANNELS),
            virtual_time=not self._realtime,
            logger_tick_ns=float(p["logger_tick_ns"]) if bool(p["logger_own_clock"]) else float(p["device_tick_ns"]),
            sensor=sensor,
            sensor_semantics=f"simulated {sensor.name} sensor ({sensor.kind}): {sensor.notes or 'its parameters'}",
            # The simulator's figures are its own parameters: known exactly, as documentation would give them.
            provenance={"period": "documented", "window": "documented", "delay": "documented", "tick": "documented"},
        )
        # The idle baseline over at least three of the sensor's full
        # responses (50 ms for the paper's 1 ms logger, as before).
        self._baseline_w = self._idle_level(max(50_000_000, 3 * (int(self._logger_period) + self._settle_ns)))

    @abc.abstractmethod
    def _idle_level(self, ns: int) -> float:
        """Mean logged total power over ``ns`` of idle."""

    @property
    def capabilities(self) -> Capabilities:
        """The simulated logger, clocks and markers."""
        return self._caps

    def kernel_name(self, kernel: str | int) -> str:
        """The name of a kernel given by name or id."""
        return self.gpu.kernel_names()[self.gpu.kernel_id(kernel)]

    def new_run_id(self) -> int:
        """A run id never used on this device before."""
        self._next_run_id += 1
        return self._next_run_id - 1

    def _wait_for_baseline(self) -> int:
        # Chunks of 20 periods, or longer when a log's response is: each
        # chunk's level must come from logs that saw idle only.
        chunk_period = max(self._logger_period, self._settle_ns / 10)
        return wait_for_idle(self._idle_level, self._baseline_w, self._idle_tol, chunk_period,
                             self._max_idle_ns)

    def _after_run_ns(self) -> int:
        # Logs published up to a few periods after the end still belong to
        # the run (publication lags sampling), and so does every log whose
        # window, delay or filter memory still reaches into the run.
        return int(2 * self._logger_period) + self._settle_ns


class SimBackend(_SimCommon):
    """The simulated GPU as a backend, in virtual time (deterministic, instant).

    Parameters
    ----------
    gpu : SimGPU, optional
        The device; by default ``SimGPU(seed=seed, **params)``.
    seed : int
        Seed for the device and for the host-side jitter of run start times.
    brackets_per_run : int
        Bracketed clock reads taken before and after each run (the periodic
        re-measurement of the clock-sync step).
    idle_tolerance : float
        Relative excess over the idle baseline below which the device counts
        as idle again (``wait_idle``).
    max_idle_ns : int
        Longest wait for idle; a device still warm after it is used anyway
        and the residual is recorded.
    **params : float
        Simulator parameters (see :func:`fingrav_native.sim.parameters`),
        or ``sensor=`` a preset name or SensorModel
        (:func:`fingrav_native.sim.sensor_params`): the simulated
        sensor, reported as ``capabilities.sensor``; the idle baseline, the
        idle wait and the idle after each run scale with its response.
    """

    def __init__(
        self,
        gpu: SimGPU | None = None,
        *,
        seed: int = 0,
        brackets_per_run: int = 16,
        idle_tolerance: float = 0.01,
        max_idle_ns: int = 2_000_000_000,
        **params: Any,
    ) -> None:
        self._realtime = False
        self._setup(gpu, seed, brackets_per_run, idle_tolerance, max_idle_ns, params)

    def _idle_level(self, ns: int) -> float:
        start = self.gpu.now()
        self.gpu.idle(ns)
        s = self.gpu.device.observed_samples(start)
        # Only logs whose whole response lies in this idle stretch: a window
        # reaching back into the run would read as "not idle yet" (or, for a
        # 1 s average, long after the device is idle).
        s = s[s["host_ns"] >= start + min(self._settle_ns, ns // 2)]
        if len(s) == 0:
            raise RuntimeError("the simulated logger produced no logs while idle; check logger_period_ns")
        return float(np.mean(s["total"]))

    def wait_idle(self) -> int:
        """Idle until the logged power is back near the idle baseline.

        Waits in chunks of 20 logger periods until the chunk's mean logged
        power is within ``idle_tolerance`` of the baseline measured at
        construction (or ``max_idle_ns`` has passed), then a random extra
        of up to one logger period: on real hosts, launch times fall at
        random phases of the free-running logger, and FinGraV relies on that
        to place logs at different times of interest (Section IV-A); in
        virtual time the phase must be randomised explicitly.

        Returns
        -------
        int
            Nanoseconds waited.
        """
        waited = self._wait_for_baseline()
        extra = int(self._rng.integers(0, int(self._logger_period)))
        self.gpu.idle(extra)
        return waited + extra

    def read_clocks(self, n: int) -> np.ndarray:
        """``n`` bracketed device-clock reads at the current (virtual) time."""
        return self.gpu.read_clocks(n)

    def advance_to(self, host_ns: int) -> None:
        """Idle the device until host time ``host_ns`` (no-op if already past it).

        A resumed campaign (``profile(resume=True)``) continues on a fresh
        simulated device whose virtual time starts at zero; its clocks are
        functions of host time, so idling it past the last run on disk puts
        the new runs on the same timeline as the replayed ones, after a
        pause as long as a real device would have sat idle.
        """
        gap = int(host_ns) - self.gpu.now()
        if gap > 0:
            self.gpu.idle(gap)

    def wait_until(self, host_ns: float) -> int:
        """Idle the device until host time ``host_ns``; return the host time reached.

        The launch of a phase-steered run (:mod:`fingrav_native.method`)
        is released here. In virtual time the release is exact; the launch
        path after it (clock reads, launch overhead) keeps its simulated
        jitter, which the steerer measures.
        """
        gap = int(math.ceil(float(host_ns))) - self.gpu.now()
        if gap > 0:
            self.gpu.idle(gap)
        return self.gpu.now()

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        """Launch one run and return its raw record.

        Parameters
        ----------
        kernel : str, int, or sequence of (kernel, count)
            One kernel (run ``executions`` times), or a sequence run back to
            back as one run (then ``executions`` must equal the total count).
        executions : int
            Executions in the run.
        run : int
            Run id.
        """
        plan = execution_plan(kernel, executions, limit=_core.SIM_MAX_PENDING_EXECUTIONS,
                              device="the simulated device")
        before = self.gpu.read_clocks(self._brackets_per_run // 2)
        # Phase steering: the armed release (HostRelease), in virtual time through wait_until below.
        late = self._released()
        begin = self.gpu.now()
        # The run's logs are taken below over a longer window than
        # sequence() would take them: launch without that extraction.
        _, _, ex = self.gpu._launch_and_wait(plan, run)
        self.gpu.idle(self._after_run_ns())
        after = self.gpu.read_clocks(self._brackets_per_run - self._brackets_per_run // 2)
        s = self.gpu.device.observed_samples(begin - int(self._logger_period))
        s = s[(s["host_ns"] >= begin) & (s["host_ns"] <= self.gpu.now())]
        return RunRecord(
            run=run,
            executions=len(ex),
            samples=s,
            markers=sim_markers(ex),
            brackets=np.concatenate([before, after]),
            meta={"truth_start_ns": ex["start_ns"].copy(), "truth_end_ns": ex["end_ns"].copy(),
                  **({"release_late_ns": float(late)} if late is not None else {})},
        )


class LiveSimBackend(_SimCommon, LivePower):
    """The simulated GPU in real time, driven the way a hardware backend is.

    Each run starts the C++ :class:`~fingrav_native.Sampler` on the device's
    power logger and takes bracketed clock reads through the live timestamp
    source (:func:`~fingrav_native.measure_brackets`) before and after the
    launch: the same code path a real GPU backend takes, with real threads,
    real latencies and the simulator's truth still available for scoring.

    Parameters
    ----------
    gpu : SimGPU, optional
        A real-time device; by default ``SimGPU(seed=seed, realtime=True, **params)``.
    seed : int
        Seed of the default device.
    period_ns : int
        Sampler period (default 100 us: ten polls per 1 ms log).
    depth : int
        Logs returned per poll (the logger buffer the source exposes).
    brackets_per_run : int
        Bracketed clock reads around each run (half before, half after).
    idle_tolerance, max_idle_ns
        As for :class:`SimBackend`.
    """

    def __init__(
        self,
        gpu: SimGPU | None = None,
        *,
        seed: int = 0,
        period_ns: int = 100_000,
        depth: int = 8,
        brackets_per_run: int = 16,
        idle_tolerance: float = 0.01,
        max_idle_ns: int = 1_000_000_000,
        **params: Any,
    ) -> None:
        self._realtime = True
        if gpu is not None and not isinstance(gpu, SimGPU):
            raise ValueError(f"gpu={short_repr(gpu)}: must be a SimGPU or None")
        integer_in(period_ns, "period_ns", 1_000, 10**10)
        integer_in(depth, "depth", 1, 1 << 20)
        if gpu is not None and not gpu.realtime:
            raise ValueError("gpu: LiveSimBackend drives a real-time device; use realtime=True")
        # The live sources must exist before _setup measures the idle level.
        live = gpu if gpu is not None else SimGPU(seed=seed, realtime=True, **params)
        self._power = live.power_source(depth=depth)
        self._clock = live.timestamp_source()
        self._period_ns = int(period_ns)
        self._setup(live, seed, brackets_per_run, idle_tolerance, max_idle_ns, {} if gpu is None else params)

    def read_clocks(self, n: int) -> np.ndarray:
        """``n`` live bracketed reads of the device clock."""
        return _core.measure_brackets(self._clock, int(n))

    def _idle_level(self, ns: int) -> float:
        start = self.gpu.now()
        with _core.Sampler(self._power, period_ns=self._period_ns) as sampler:
            self.gpu.idle(ns)
        s = drain_all(sampler)
        if self._settle_ns:
            # As in SimBackend: only logs whose response lies in this idle stretch.
            s = s[s["host_ns"] >= start + min(self._settle_ns, ns // 2)]
        if len(s) == 0:
            raise RuntimeError("the simulated logger produced no logs while idle; check logger_period_ns")
        return float(np.mean(s["total"]))

    def wait_idle(self) -> int:
        """Sample the idle device until its logged power is back near the idle baseline."""
        return self._wait_for_baseline()

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        """Launch one run with the sampler polling live; return its raw record."""
        plan = execution_plan(kernel, executions, limit=_core.SIM_MAX_PENDING_EXECUTIONS,
                              device="the simulated device")
        before = _core.measure_brackets(self._clock, self._brackets_per_run // 2)
        with _core.Sampler(self._power, period_ns=self._period_ns) as sampler:
            # Phase steering: launch at the armed release (HostRelease), after the sampler started.
            late = self._released()
            result = self.gpu.sequence(plan, run=run)
            # Logs are published a little after they are sampled.
            self.gpu.idle(self._after_run_ns())
        samples = drain_all(sampler)
        after = _core.measure_brackets(self._clock, self._brackets_per_run - self._brackets_per_run // 2)
        ex = result.executions
        stats = sampler.stats()
        return RunRecord(
            run=run, executions=len(ex), samples=samples, markers=sim_markers(ex),
            brackets=np.concatenate([before, after]),
            meta={"truth_start_ns": ex["start_ns"].copy(), "truth_end_ns": ex["end_ns"].copy(),
                  "sampler": stats.as_dict(), **({"release_late_ns": float(late)} if late is not None else {})},
        )


def report() -> BackendReport:
    """The simulated device's report: always available.

    Returns
    -------
    BackendReport

    Notes
    -----
    The simulator stands in for the paper's MI300X (Section V) wherever no
    GPU is present; it needs nothing beyond the package itself.
    """
    gpu = SimGPU(seed=0)
    p = gpu.params
    return BackendReport(
        backend="sim",
        available=True,
        devices=(DeviceEntry(0, "simulated MI300X-class GPU", {
            "logger_period_us": float(p["logger_period_ns"]) / 1e3,
            "kernels": len(gpu.kernel_names()),
        }),),
        components=(Component("fingrav_native._core (simulator)", True, "built in"),),
        verified_on="simulated device (ground truth for every test)",
    )
