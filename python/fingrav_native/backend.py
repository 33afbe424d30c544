"""Backends: what the FinGraV orchestrator needs from a device, and the simulated one.

The orchestrator (:func:`fingrav_native.profile.profile`) runs the paper's
eight steps (Section IV-B) against this small interface, so it cannot tell a
simulated GPU from a real one except through declared capabilities:

* ``execute_run`` launches one run (a kernel, or a sequence of kernels, back
  to back) and returns its :class:`RunRecord`: the raw power logs seen while
  it ran (SAMPLE_DTYPE, timestamps in the logger's clock), GPU-side begin/end
  markers of every execution in device-clock ticks, and bracketed clock reads
  taken around it;
* ``wait_idle`` lets the device return to idle between runs, measured from
  the power logs rather than a fixed sleep;
* ``capabilities`` says what the logger and markers are (period, averaging
  window, which clock stamps the logs).

Markers stay in device ticks until the whole campaign's clock reads are
fitted (:mod:`fingrav_native.clocksync`), so a drifting clock is mapped by the
map fitted around each run, not by one offset taken at the start.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, Union, runtime_checkable

import numpy as np

from . import _core
from .sim import SimGPU

__all__ = [
    "MARKER_RECORD_DTYPE",
    "Backend",
    "BackendWrapper",
    "Capabilities",
    "RunRecord",
    "SimBackend",
    "LiveSimBackend",
    "KernelSpec",
    "wait_for_idle",
    "drain_all",
    "marker_records",
]

#: A kernel, or a sequence of (kernel, executions) run back to back.
KernelSpec = Union[str, int, Sequence[tuple[Union[str, int], int]]]

#: GPU-side markers of one execution, in device-clock ticks.
MARKER_RECORD_DTYPE = np.dtype(
    [
        ("run", "<i4"),
        ("index", "<i4"),
        ("kernel_id", "<i4"),
        ("begin_ticks", "<i8"),
        ("end_ticks", "<i8"),
        ("host_launch_ns", "<i8"),  # host time of the launch call (host-side marker)
        ("host_sync_ns", "<i8"),    # host time completion was seen (last of a launch), else -1
    ]
)


@dataclass(frozen=True)
class Capabilities:
    """What a backend's logger, clocks and markers are.

    Attributes
    ----------
    name : str
        Backend name (``sim``, ``amd``, ``nvidia``).
    device : str
        Which device, in words.
    logger_period_ns : float
        Nominal period of the power logger.
    logger_window_ns : float
        Averaging window of a log (0 = instantaneous).
    logger_clock : str
        ``"device"`` when logs are stamped with the device clock the markers
        use, else the name of the logger's own clock (fitted one-sidedly).
    device_tick_ns : float
        Nominal device-clock tick.
    gpu_markers : bool
        Whether execution begin/end come from GPU-side timestamps (else host
        brackets around launches, a larger localisation error).
    marker_err_ns : float
        Half-width of a marker's own placement error (probe-kernel write
        latency), before clock-map error.
    channels : tuple of str
        Power channels the logger provides.
    virtual_time : bool
        True when the device runs in simulated (virtual) time.
    logger_tick_ns : float
        Length of one tick of the logs' timestamps (``Sample.source_ts``);
        0 means the device tick (loggers stamped by the device clock).
    """

    name: str
    device: str
    logger_period_ns: float
    logger_window_ns: float
    logger_clock: str
    device_tick_ns: float
    gpu_markers: bool
    marker_err_ns: float
    channels: tuple[str, ...]
    virtual_time: bool
    logger_tick_ns: float = 0.0


@dataclass(frozen=True)
class RunRecord:
    """Everything one run produced, raw (paper Section IV-B steps 2 and 4).

    Attributes
    ----------
    run : int
        Run id.
    executions : int
        Executions in the run.
    samples : numpy.ndarray
        SAMPLE_DTYPE power logs seen while the run was under way.
    markers : numpy.ndarray
        MARKER_RECORD_DTYPE GPU-side markers, one per execution.
    brackets : numpy.ndarray
        (n, 3) int64 bracketed clock reads taken around the run.
    idle_wait_ns : int
        How long the backend waited for idle before the run.
    """

    run: int
    executions: int
    samples: np.ndarray
    markers: np.ndarray
    brackets: np.ndarray
    idle_wait_ns: int = 0
    meta: dict = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """The interface the orchestrator drives (see the module docstring)."""

    @property
    def capabilities(self) -> Capabilities: ...

    def kernel_name(self, kernel: str | int) -> str: ...

    def new_run_id(self) -> int: ...

    def wait_idle(self) -> int: ...

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord: ...

    def read_clocks(self, n: int) -> np.ndarray: ...


class _SimCommon(abc.ABC):
    """What the virtual-time and the live simulated backends share."""

    _realtime: bool

    def _setup(self, gpu: SimGPU | None, seed: int, brackets_per_run: int, idle_tolerance: float,
               max_idle_ns: int, params: dict) -> None:
        kind = "real-time" if self._realtime else "virtual-time"
        if gpu is None:
            gpu = SimGPU(seed=seed, realtime=self._realtime, **params)
        elif params:
            raise ValueError(f"{sorted(params)[0]}: simulator parameters go to SimGPU when a gpu is given")
        if gpu.realtime != self._realtime:
            raise ValueError(f"gpu: {type(self).__name__} drives a {kind} device; "
                             f"use realtime={self._realtime}")
        if brackets_per_run < 2:
            raise ValueError(f"brackets_per_run={brackets_per_run}: must be >= 2")
        if not 0 < idle_tolerance < 1:
            raise ValueError(f"idle_tolerance={idle_tolerance}: must be in (0, 1)")
        self.gpu = gpu
        self._rng = np.random.default_rng(seed)
        self._brackets_per_run = int(brackets_per_run)
        self._idle_tol = float(idle_tolerance)
        self._max_idle_ns = int(max_idle_ns)
        self._next_run_id = 0
        p = gpu.params
        self._logger_period = float(p["logger_period_ns"])
        self._caps = Capabilities(
            name="sim-live" if self._realtime else "sim",
            device=f"simulated MI300X-class GPU ({'real' if self._realtime else 'virtual'} time)",
            logger_period_ns=self._logger_period,
            logger_window_ns=float(p["logger_window_ns"]),
            logger_clock="sim-logger" if bool(p["logger_own_clock"]) else "device",
            device_tick_ns=float(p["device_tick_ns"]),
            gpu_markers=True,
            marker_err_ns=float(p["marker_offset_ns"]) + 3 * float(p["marker_jitter_ns"]),
            channels=tuple(_core.CHANNELS),
            virtual_time=not self._realtime,
            logger_tick_ns=float(p["logger_tick_ns"]) if bool(p["logger_own_clock"]) else float(p["device_tick_ns"]),
        )
        self._baseline_w = self._idle_level(50_000_000)

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
        return wait_for_idle(self._idle_level, self._baseline_w, self._idle_tol, self._logger_period,
                             self._max_idle_ns)


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
        Simulator parameters (see :func:`fingrav_native.sim.parameters`).
    """

    def __init__(
        self,
        gpu: SimGPU | None = None,
        *,
        seed: int = 0,
        brackets_per_run: int = 16,
        idle_tolerance: float = 0.01,
        max_idle_ns: int = 2_000_000_000,
        **params: float,
    ) -> None:
        self._realtime = False
        self._setup(gpu, seed, brackets_per_run, idle_tolerance, max_idle_ns, params)

    def _idle_level(self, ns: int) -> float:
        start = self.gpu.now()
        self.gpu.idle(ns)
        s = self.gpu.device.observed_samples(start)
        s = s[s["host_ns"] >= start]
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
        plan = _plan(kernel, executions)
        before = self.gpu.read_clocks(self._brackets_per_run // 2)
        begin = self.gpu.now()
        # The run's logs are taken below over a longer window than
        # sequence() would take them: launch without that extraction.
        _, _, ex = self.gpu._launch_and_wait(plan, run)
        # Logs published up to a few periods after the end still belong to
        # the run's window (publication lags sampling).
        self.gpu.idle(int(2 * self._logger_period))
        after = self.gpu.read_clocks(self._brackets_per_run - self._brackets_per_run // 2)
        s = self.gpu.device.observed_samples(begin - int(self._logger_period))
        s = s[(s["host_ns"] >= begin) & (s["host_ns"] <= self.gpu.now())]
        return RunRecord(
            run=run,
            executions=len(ex),
            samples=s,
            markers=_markers(ex),
            brackets=np.concatenate([before, after]),
            meta={"truth_start_ns": ex["start_ns"].copy(), "truth_end_ns": ex["end_ns"].copy()},
        )


class BackendWrapper:
    """A backend that delegates every call to another: subclass to record, lock or time its calls.

    The four calls that drive the device go through :meth:`_around`, so a
    wrapper that treats them alike (a lock shared by the ranks of a node, a
    timer of the simulator's cost) overrides one method; one that needs a
    call's result (keeping each run's clock reads) overrides that call.
    Anything else (``advance_to``, ``gpu``, ...) is the wrapped backend's own.

    Parameters
    ----------
    inner : Backend
        The backend wrapped.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    def _around(self, call: Callable[..., Any], *args: Any) -> Any:
        """Run one of the four device calls; the default just calls it."""
        return call(*args)

    @property
    def capabilities(self) -> Capabilities:
        """The wrapped backend's capabilities."""
        return self.inner.capabilities

    def kernel_name(self, kernel: str | int) -> str:
        """The wrapped backend's name of ``kernel``."""
        return self.inner.kernel_name(kernel)

    def new_run_id(self) -> int:
        """A run id from the wrapped backend."""
        return int(self._around(self.inner.new_run_id))

    def wait_idle(self) -> int:
        """The wrapped backend's wait for idle."""
        return int(self._around(self.inner.wait_idle))

    def read_clocks(self, n: int) -> np.ndarray:
        """The wrapped backend's bracketed clock reads."""
        return np.asarray(self._around(self.inner.read_clocks, n))

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        """One run on the wrapped backend."""
        rec: RunRecord = self._around(self.inner.execute_run, kernel, executions, run)
        return rec

    def __getattr__(self, name: str) -> Any:
        # Only reached for what this class does not define.
        if name == "inner":  # not set yet (copy/unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


def wait_for_idle(idle_level: Callable[[int], float], baseline_w: float, tolerance: float,
                  logger_period_ns: float, max_idle_ns: int) -> int:
    """Wait in chunks of 20 logger periods until one chunk's mean power is back near idle.

    Parameters
    ----------
    idle_level : callable
        ``idle_level(ns)`` lets ``ns`` pass and returns the mean logged total
        power over it (NaN when no log arrived, which counts as not idle).
    baseline_w : float
        Idle power measured when the backend was made.
    tolerance : float
        Relative excess over ``baseline_w`` that still counts as idle.
    logger_period_ns : float
        The logger's period.
    max_idle_ns : int
        Longest wait; a device still warm after it is used anyway.

    Returns
    -------
    int
        Nanoseconds waited.

    Notes
    -----
    Paper Section IV-B: every run starts from idle, so that runs share one
    power history and their logs can be stitched. Every backend waits this way.
    """
    chunk = int(20 * logger_period_ns)
    waited = 0
    while waited < max_idle_ns:
        level = idle_level(chunk)
        waited += chunk
        if level <= baseline_w * (1 + tolerance):  # NaN compares False: keep waiting
            break
    return waited


def drain_all(sampler: "_core.Sampler") -> np.ndarray:
    """Everything a stopped sampler kept (an empty SAMPLE_DTYPE array when it kept nothing)."""
    return sampler.drain() if sampler.available else np.zeros(0, dtype=_core.SAMPLE_DTYPE)


def marker_records(run: int, kernel_id: "int | Sequence[int]", ticks: np.ndarray, host_launch_ns: np.ndarray,
                   host_sync_ns: int) -> np.ndarray:
    """MARKER_RECORD_DTYPE rows from a probe's slots, as the hardware backends write them.

    Parameters
    ----------
    run : int
        Run id.
    kernel_id : int or sequence of int
        Kernel id of every execution (or one for all).
    ticks : numpy.ndarray
        Device-clock slots: begin of execution i at ``2 i``, its end at ``2 i + 1``.
    host_launch_ns : numpy.ndarray
        Host time of each execution's launch call.
    host_sync_ns : int
        Host time the run's completion was seen (recorded on the last execution).

    Returns
    -------
    numpy.ndarray

    Notes
    -----
    Paper Section IV-B step 2: GPU-side start and end of every execution.
    """
    n = len(host_launch_ns)
    markers = np.zeros(n, dtype=MARKER_RECORD_DTYPE)
    markers["run"] = run
    markers["index"] = np.arange(n)
    markers["kernel_id"] = kernel_id
    markers["begin_ticks"] = ticks[0:2 * n:2]
    markers["end_ticks"] = ticks[1:2 * n:2]
    markers["host_launch_ns"] = host_launch_ns
    markers["host_sync_ns"] = -1
    if n:
        markers["host_sync_ns"][-1] = host_sync_ns
    return markers


def _markers(ex: np.ndarray) -> np.ndarray:
    """The GPU-side markers of simulated executions (EXEC_DTYPE) as MARKER_RECORD_DTYPE."""
    markers = np.zeros(len(ex), dtype=MARKER_RECORD_DTYPE)
    for name, src in (("run", "run"), ("index", "index"), ("kernel_id", "kernel_id"),
                      ("begin_ticks", "begin_marker_ticks"), ("end_ticks", "end_marker_ticks"),
                      ("host_launch_ns", "host_launch_ns"), ("host_sync_ns", "host_sync_ns")):
        markers[name] = ex[src]
    return markers


def _plan(kernel: KernelSpec, executions: int) -> list[tuple[str | int, int]]:
    if isinstance(executions, bool) or not isinstance(executions, (int, np.integer)) or executions < 1:
        raise ValueError(f"executions={executions!r}: must be an integer >= 1")
    if isinstance(kernel, (str, int, np.integer)):
        return [(kernel, int(executions))]
    plan = [(k, int(c)) for k, c in kernel]
    total = sum(c for _, c in plan)
    if total != executions:
        raise ValueError(f"executions={executions}: the sequence has {total} executions in all")
    return plan


class LiveSimBackend(_SimCommon):
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
        **params: float,
    ) -> None:
        self._realtime = True
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
        with _core.Sampler(self._power, period_ns=self._period_ns) as sampler:
            self.gpu.idle(ns)
        s = drain_all(sampler)
        if len(s) == 0:
            raise RuntimeError("the simulated logger produced no logs while idle; check logger_period_ns")
        return float(np.mean(s["total"]))

    def wait_idle(self) -> int:
        """Sample the idle device until its logged power is back near the idle baseline."""
        return self._wait_for_baseline()

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        """Launch one run with the sampler polling live; return its raw record."""
        plan = _plan(kernel, executions)
        before = _core.measure_brackets(self._clock, self._brackets_per_run // 2)
        with _core.Sampler(self._power, period_ns=self._period_ns) as sampler:
            result = self.gpu.sequence(plan, run=run)
            # Logs are published a little after they are sampled.
            self.gpu.idle(int(2 * self._logger_period))
        samples = drain_all(sampler)
        after = _core.measure_brackets(self._clock, self._brackets_per_run - self._brackets_per_run // 2)
        ex = result.executions
        stats = sampler.stats()
        return RunRecord(
            run=run, executions=len(ex), samples=samples, markers=_markers(ex),
            brackets=np.concatenate([before, after]),
            meta={"truth_start_ns": ex["start_ns"].copy(), "truth_end_ns": ex["end_ns"].copy(),
                  "sampler": stats.as_dict()},
        )
