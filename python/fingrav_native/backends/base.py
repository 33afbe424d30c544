"""The backend protocol: what the FinGraV orchestrator needs from a device, and helpers every backend shares.

The orchestrator (:func:`fingrav_native.method.profile.profile`) runs the paper's
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
  window, which clock stamps the logs);
* optionally, ``wait_until(host_ns) -> int`` releases the next launch at a
  chosen host time and returns the host time reached (a target already past
  returns at once: ``wait_until(0)`` reads the time). Phase-steered
  campaigns (:mod:`fingrav_native.method.phase`) need it, and fall back to
  random phase, saying so, on a backend without it.

Markers stay in device ticks until the whole campaign's clock reads are
fitted (:mod:`fingrav_native.clocks.maps`), so a drifting clock is mapped by the
map fitted around each run, not by one offset taken at the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence, Union, runtime_checkable

import numpy as np

from fingrav_native import _core
from fingrav_native.sensors.model import SensorModel
from fingrav_native.sensors.semantics import FIGURES, PROVENANCES

__all__ = [
    "FIGURES",
    "PROVENANCES",
    "MARKER_RECORD_DTYPE",
    "Backend",
    "BackendWrapper",
    "Capabilities",
    "RunRecord",
    "KernelSpec",
    "HostRelease",
    "LivePower",
    "wait_for_idle",
    "drain_all",
    "marker_records",
    "execution_plan",
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


# FIGURES (the logger figures whose source a backend records) and
# PROVENANCES (where a figure comes from) live with the sensor semantics that
# fill Capabilities.provenance; re-exported here.


def _ns_words(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns" if ns else "0"


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
    sensor : SensorModel, optional
        What each log measures (window, filter, delay, counter; DESIGN.md,
        "Sensors are part of the measurement"), as far as the backend knows
        it; a characterisation can replace it. ``profile`` attributes by
        deconvolution when it averages over more than the resolution asked
        for. None (profiles saved before sensors were modelled): the logs'
        own ``window_ns`` fields say.
    sensor_semantics : str
        What one log is, in words, for the mode in use (e.g. "NVML power
        usage: a 1 s average, refreshed about every 100 ms"); empty in
        profiles saved before it was recorded.
    provenance : dict of str to str
        For each figure the backend reports (``"period"``, ``"window"``,
        ``"delay"``, ``"tick"``), where it comes from: ``"documented"`` (a
        vendor header or manual), ``"measured"`` (on this device, at start)
        or ``"assumed"`` (neither: characterise the sensor before trusting
        it). See :data:`PROVENANCES`. ``"tick"`` is the device clock's
        update step (``device_tick_ns * device_resolution_ticks``).
    device_resolution_ticks : float
        How many device ticks the device clock advances per update (1: every
        tick). NVIDIA's %globaltimer counts ns but may move once a
        microsecond (1000); the clock map widens its bound by half a step
        (:func:`~fingrav_native.clocks.maps.fit_clock_map`,
        ``resolution_ticks``). 1 in profiles saved before it was recorded.
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
    sensor: Optional[SensorModel] = None
    sensor_semantics: str = ""
    provenance: dict[str, str] = field(default_factory=dict)
    device_resolution_ticks: float = 1.0

    def __post_init__(self) -> None:
        r = self.device_resolution_ticks
        if isinstance(r, bool) or not (isinstance(r, (int, float)) and np.isfinite(r) and r >= 1):
            raise ValueError(f"device_resolution_ticks={self.device_resolution_ticks!r}: must be a number >= 1 "
                             "(device ticks per clock update)")
        bad = {k: v for k, v in self.provenance.items() if k not in FIGURES or v not in PROVENANCES}
        if bad:
            raise ValueError(f"provenance: {bad} is not a map of {FIGURES} to one of {PROVENANCES}")

    def describe_figures(self) -> str:
        """The logger's figures with where each comes from, in one line (``fingrav devices``, profiles).

        Returns
        -------
        str
            E.g. ``"period 100 ms (measured), window 25 ms (documented), delay 0 (assumed), tick 1 ns
            (measured)"``; figures without a recorded provenance are left out.

        Notes
        -----
        Paper Section VI names the logger's period as what limits the
        method; a window or delay nobody measured is the silent error an
        averaging sensor brings (DESIGN.md, "Sensors are part of the
        measurement").
        """
        values = {"period": self.logger_period_ns, "window": self.logger_window_ns,
                  "delay": self.sensor.delay_ns if self.sensor is not None else 0.0,
                  "tick": self.device_tick_ns * self.device_resolution_ticks}
        parts = [f"{k} {_ns_words(values[k])} ({self.provenance[k]})" for k in FIGURES if k in self.provenance]
        return ", ".join(parts)


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
    meta: dict[str, Any] = field(default_factory=dict)


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


class HostRelease:
    """Phase-steered launches on the host clock: the release that hardware (and live) backends share.

    A backend that mixes this in offers ``wait_until`` (the campaign reads
    the time with ``wait_until(0)``) and ``release_at``: the next
    ``execute_run`` does its own setup (sampler started, clock reads taken),
    then calls :meth:`_released` right before its first launch, which sleeps
    then spins (:func:`fingrav_native._core.wait_until_ns`, GIL released)
    until the armed host time. The setup's jitter stays out of the launch
    time (equivalent-time sampling, :mod:`fingrav_native.method.phase`).
    """

    _release_ns: Optional[float] = None

    def wait_until(self, host_ns: float) -> int:
        """Wait until host time (CLOCK_MONOTONIC_RAW ns) ``host_ns``; return the host time at wake-up."""
        return int(_core.wait_until_ns(int(np.ceil(float(host_ns)))))

    def release_at(self, host_ns: float) -> None:
        """Arm the next ``execute_run`` to release its first launch at host time ``host_ns``."""
        self._release_ns = float(host_ns)

    def _released(self) -> Optional[float]:
        """Inside ``execute_run``, right before the first launch: wait for an armed release.

        Returns
        -------
        float or None
            How late the release was (ns; the setup outlasted the steerer's
            lead), or None when none was armed.
        """
        release, self._release_ns = self._release_ns, None
        if release is None:
            return None
        return float(self.wait_until(release) - release)


class LivePower:
    """A backend whose runs poll a live power source (``self._power``) lends it out, read-only.

    For recording power while an application runs
    (:class:`~fingrav_native.insitu.capture.PowerRecorder`): a second
    Sampler may poll it while no run is in progress; its logs are stamped in
    the clock the backend's ``capabilities`` name (``logger_clock``).
    """

    _power: _core.PowerSource

    @property
    def power_source(self) -> _core.PowerSource:
        """The power source each run's Sampler polls."""
        return self._power


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
    return sampler.drain()


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


def execution_plan(kernel: KernelSpec, executions: int, *, limit: int | None = None,
                   device: str = "the device") -> list[tuple[str | int, int]]:
    """A run's kernels as (kernel, executions) pairs, checked against the run's total.

    Parameters
    ----------
    kernel : KernelSpec
        One kernel, or a sequence of (kernel, executions) run back to back.
    executions : int
        Executions in the run (Section IV-B step 3); for a sequence, its total.
    limit : int, optional
        Most executions one run may have on this device (the simulator's is
        ``_core.SIM_MAX_PENDING_EXECUTIONS``): a larger run is refused here,
        by the argument's name, before anything is allocated or launched.
    device : str
        What the limit belongs to, for the message.

    Returns
    -------
    list of (str or int, int)
    """
    if isinstance(executions, bool) or not isinstance(executions, (int, np.integer)) or executions < 1:
        raise ValueError(f"executions={executions!r}: must be an integer >= 1")
    if limit is not None and executions > limit:
        raise ValueError(f"executions={executions}: at most {limit} per run on {device} "
                         "(each execution is queued, simulated and recorded); run fewer")
    if isinstance(kernel, (str, int, np.integer)):
        return [(kernel, int(executions))]
    plan = [(k, int(c)) for k, c in kernel]
    total = sum(c for _, c in plan)
    if total != executions:
        raise ValueError(f"executions={executions}: the sequence has {total} executions in all")
    return plan
