"""The simulated GPU: a physically motivated MI300X-class device that knows the truth.

No GPU is needed to run, test or demo fingrav-native: the simulated device
behaves the way the FinGraV paper's observations depend on (Sections III and
V of Singhania et al., ISPASS 2025) and records exactly what really happened,
so every method can be scored against the truth.

What it models (the physics lives in the C++ core, ``csrc/fingrav/sim``):

* a device clock with a large offset, tens of ppm of skew that wanders
  slowly, and host reads that cost a round trip with jitter, rare long
  outliers and a configurable request/return asymmetry;
* kernels (the paper's GEMM, GEMV and collective cases, or your own) whose
  execution time depends on the clock through a frequency sensitivity,
  varies run to run (allocation modes) and execution to execution, has rare
  outliers and slower first executions from idle;
* per-component power (compute dies, IO die + cache, HBM) following each
  kernel's activity shape through a first-order lag; compute leakage that
  grows with the compute dies' temperature, which follows their own power
  within milliseconds (and the package's, over hundreds); and a firmware
  loop (~1 ms) that boosts clocks by compute activity and cuts them when a
  lagging power average exceeds the cap;
* a power logger with a period, its own clock if asked, and a publication
  delay, that can be any of the real sensors (``sensor=``, a preset of
  :data:`~fingrav_native.sensors.SENSOR_PRESETS`): instantaneous, a
  boxcar window (longer than the period too: a sliding average), a
  first-order filter, a reporting delay, gain/offset, noise and a quantum,
  or an energy counter whose consecutive reads are exact window averages;
* virtual time (deterministic from a seed, instant) and real time (the
  device follows the host clock; a :class:`~fingrav_native.Sampler` can poll
  it live through :meth:`SimGPU.power_source`).

Absolute watts are plausible for a 750 W board, not measured: the paper
reports relative power only. Every parameter, its default and the physical
reason for it are listed by :func:`parameters`.

Execution time against power (paper Sections IV-A and V-C1, Figures 5-7).
The SSE is the first execution after the warm-ups beyond which execution
time no longer falls, and "all executions between SSE and SSP have similar
execution times" while power still changes. The device reproduces that:

* CB-4K GEMM: the firmware takes the clock from its parked value to f_max
  at its first loop tick with work (~1 ms, within the three warm-ups), so
  the SSE's duration is the SSP's (within ~1%); power then rises ~5% at that
  clock, over ~12 executions, as the compute dies heat and leak more. It
  stays under the power cap.
* CB-2K GEMM: power starts low and rises considerably (~20%) to an SSP near
  the 40th execution. Its clock climbs in DPM steps (compute-light work sits
  near the busy set point) while the dies heat, but its duration barely
  follows: its math hides under the K loop's operand loads (frequency
  sensitivity 0.02), so SSE and SSP durations agree within ~2%.
* CB-8K GEMM, the one kernel over the cap: power rises over the first
  executions at f_max, the firmware cuts the clock once its lagging average
  crosses the cap (with an undershoot, so the SSE is at the bottom), then
  power creeps back up ~4% to an SSP near the 11th execution. Where the sim
  departs from the paper: the warm-ups before the cut run at the boosted
  clock and are a few percent faster than the SSE, whereas the paper finds
  the best time from the SSE on (Figure 6). A warm-up that is power-hungry
  but not faster (a voltage, not a clock, effect) would need a model the
  paper gives no data for.

Examples
--------
>>> from fingrav_native import sim
>>> gpu = sim.SimGPU(seed=1)
>>> run = gpu.run("cb-4k-gemm", executions=8)
>>> len(run.executions)
8
>>> bool(run.executions["mean_total_w"][-1] > run.executions["mean_total_w"][0])
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import (
    check_power,
    finite_array,
    flag,
    fraction,
    integer_in,
    positive_number,
    real_number,
    structured,
)
from fingrav_native.records._layouts import MARKER_RECORD_DTYPE
from fingrav_native.records._log_layouts import SIM_EXEC_DTYPE, SIM_FIRMWARE_DTYPE, SIM_LOG_DTYPE
from fingrav_native.sensors._model import SensorModel, as_sensor

#: The simulated device's record layouts, under their old names: aliases of ``records.SIM_EXEC_DTYPE``,
#: ``records.SIM_LOG_DTYPE`` (a raw device log, not ``method.LOG_DTYPE``) and ``records.SIM_FIRMWARE_DTYPE``.
EXEC_DTYPE = SIM_EXEC_DTYPE
LOG_DTYPE = SIM_LOG_DTYPE
FIRMWARE_DTYPE = SIM_FIRMWARE_DTYPE


@dataclass(frozen=True)
class Parameter:
    """One simulator parameter: its name, default value and physical reason."""

    name: str
    default: float
    doc: str


def parameters() -> list[Parameter]:
    """List every simulator parameter with its default and the reason for it.

    Returns
    -------
    list of Parameter
        In the order the C++ core declares them.
    """
    return [Parameter(n, d, doc) for n, d, doc in _core.sim_parameters()]


def kernel_presets() -> list[dict[str, Any]]:
    """The built-in kernels: the paper's cases (Section V-A).

    Compute-bound GEMMs ``cb-8k-gemm``, ``cb-4k-gemm``, ``cb-2k-gemm``;
    memory-bound GEMVs ``mb-8k-gemv``, ``mb-4k-gemv``, ``mb-2k-gemv``;
    latency-bound collectives ``allgather-64k``, ``allgather-128k``,
    ``allreduce-64k``, ``allreduce-128k``; bandwidth-bound collectives
    ``allgather-512m``, ``allgather-1g``, ``allreduce-512m``,
    ``allreduce-1g``.

    Returns
    -------
    list of dict
        Each kernel's fields (name, kind, duration_ns, freq_sensitivity,
        shape as (end, compute, io, memory) segments, variation settings).
    """
    return list(_core.sim_kernel_presets())


KERNEL_PRESETS: tuple[str, ...] = tuple(k["name"] for k in _core.sim_kernel_presets())


@dataclass(frozen=True)
class RunResult:
    """What one run did: its executions, and the logs a sampler saw meanwhile.

    Attributes
    ----------
    run : int
        The run id.
    host_begin_ns, host_end_ns : int
        Host time when the run's first launch was issued and when the host
        saw the last execution finish (the window a sampler would cover).
    executions : numpy.ndarray
        EXEC_DTYPE records of the run, true start/end included.
    samples : numpy.ndarray
        SAMPLE_DTYPE records of the logs observed in the window (virtual
        time; empty in real time, where a Sampler does the observing).
    """

    run: int
    host_begin_ns: int
    host_end_ns: int
    executions: np.ndarray
    samples: np.ndarray


def sensor_params(sensor: SensorModel | str) -> dict[str, float]:
    """The logger parameters that make the simulated logger behave as ``sensor``.

    Parameters
    ----------
    sensor : SensorModel or str
        A sensor, or the name of one of
        :data:`~fingrav_native.sensors.SENSOR_PRESETS`.

    Returns
    -------
    dict
        ``logger_*`` parameters for :class:`SimGPU` (every one the sensor
        sets, so a sensor fully replaces the default logger).

    Notes
    -----
    A window sensor is a boxcar of ``window_ns`` every ``period_ns`` (a
    window longer than the period is a sliding average, NVIDIA's 1 s power
    reading; Yang et al., SC'24, measured the A100/H100 "instant" field as
    25 ms of every 100 ms); a first-order filter its time constant; a counter
    an energy accumulator with the sensor's ``quantum`` in joules (AMD MI300
    ``energy_accumulator``: 2^-16 J every ~1 ms). Delay, gain and offset map
    one to one; a power sensor's ``quantum`` is in watts.

    Examples
    --------
    >>> sensor_params("part-time-100ms")["logger_window_ns"]
    25000000.0
    """
    model = as_sensor(sensor)
    if model is None:
        raise ValueError("sensor=None: must be a SensorModel or a preset name")
    counter = model.kind == "counter"
    return {
        "logger_period_ns": float(model.period_ns),
        "logger_window_ns": 0.0 if counter or model.shape == "first_order" else float(model.window_ns),
        "logger_tau_ns": float(model.tau_ns) if model.shape == "first_order" else 0.0,
        "logger_delay_ns": float(model.delay_ns),
        "logger_gain": float(model.gain),
        "logger_offset_w": float(model.offset_w),
        "logger_quantum_w": 0.0 if counter else float(model.quantum),
        "logger_counter": 1.0 if counter else 0.0,
        "logger_counter_quantum_j": float(model.quantum) if counter else 0.0,
    }


def sensor_of_params(params: dict[str, float]) -> SensorModel:
    # The sensor a parameter set simulates, for a device made without
    # sensor=: a preset when the parameters are exactly one, else a
    # description of them.
    from fingrav_native.sensors._model import SENSOR_PRESETS

    mine = {k: float(params[k]) for k in sensor_params(SENSOR_PRESETS["instant-1ms"])}
    for preset in SENSOR_PRESETS.values():
        if sensor_params(preset) == mine:
            return preset
    if mine["logger_counter"]:
        return SensorModel("sim counter", "counter", period_ns=mine["logger_period_ns"],
                           delay_ns=mine["logger_delay_ns"], gain=mine["logger_gain"],
                           offset_w=mine["logger_offset_w"], quantum=mine["logger_counter_quantum_j"],
                           source="documented", notes="the simulator's logger parameters")
    if mine["logger_tau_ns"] > 0:
        return SensorModel("sim filter", "window", period_ns=mine["logger_period_ns"], shape="first_order",
                           tau_ns=mine["logger_tau_ns"], delay_ns=mine["logger_delay_ns"], gain=mine["logger_gain"],
                           offset_w=mine["logger_offset_w"], quantum=mine["logger_quantum_w"],
                           notes="the simulator's logger parameters")
    return SensorModel("sim logger", "window" if mine["logger_window_ns"] > 0 else "instant",
                       period_ns=mine["logger_period_ns"], window_ns=mine["logger_window_ns"],
                       delay_ns=mine["logger_delay_ns"], gain=mine["logger_gain"], offset_w=mine["logger_offset_w"],
                       quantum=mine["logger_quantum_w"], notes="the simulator's logger parameters")


def device_params(seed: int, sensor: SensorModel | str | None, params: dict[str, Any]) -> dict[str, float]:
    """The parameter dict a simulated device is made with: ``params``, the sensor's logger parameters, the seed.

    Raises ValueError naming a parameter that is not a number, or a ``logger_*``
    parameter given together with ``sensor`` (the C++ device names an unknown one).
    """
    merged = {k: real_number(v, k) for k, v in params.items()}
    if sensor is not None:
        sp = sensor_params(sensor)
        clash = sorted(set(sp) & set(params))
        if clash:
            raise ValueError(f"{clash[0]}: set by sensor={sensor if isinstance(sensor, str) else sensor.name!r}; "
                             "pass the sensor or the logger parameters, not both")
        merged.update(sp)
    merged["seed"] = float(seed)
    return merged


class SimGPU:
    """A simulated GPU, in virtual or real time.

    Parameters
    ----------
    seed : int
        Seed of every random stream; the same seed gives the same campaign.
    realtime : bool
        False (default): virtual time, deterministic and instant. True: the
        device follows the host clock, kernels take real wall time, and a
        Sampler can poll :meth:`power_source` live.
    sensor : SensorModel or str, optional
        The power sensor the logger simulates: a
        :data:`~fingrav_native.sensors.SENSOR_PRESETS` name
        (``"amd-1ms-average"``, ``"part-time-100ms"``, ...) or a model; its
        logger parameters come from :func:`sensor_params`. Default: the
        paper's instantaneous 1 ms logger (or whatever ``logger_*``
        parameters say).
    cached_poll_ns : float, optional
        Virtual time only: a host tool polls the logger's cached value every
        ``cached_poll_ns`` instead of draining each log once; :meth:`run`,
        :meth:`sequence` and :meth:`samples` return
        :meth:`polled_samples` (SimBackend and SimNode still drain).
    **params : float
        Overrides of any parameter listed by :func:`parameters`, e.g.
        ``cap_w=700`` or ``logger_window_ns=1e6``.

    Raises
    ------
    ValueError
        An unknown or invalid parameter, named in the message; a
        ``logger_*`` parameter given together with ``sensor``.
    """

    def __init__(self, *, seed: int = 0, realtime: bool = False, sensor: SensorModel | str | None = None,
                 cached_poll_ns: float | None = None, **params: float) -> None:
        seed = integer_in(seed, "seed", 0)
        realtime = flag(realtime, "realtime")
        if cached_poll_ns is not None and (realtime or not positive_number(cached_poll_ns, "cached_poll_ns") >= 1.0):
            raise ValueError(f"cached_poll_ns={cached_poll_ns!r}: a poll period >= 1 ns, in virtual time only")
        self._cached_poll_ns = cached_poll_ns
        merged = device_params(seed, sensor, params)
        self._dev = _core.SimDevice(merged, realtime=bool(realtime))
        given = as_sensor(sensor)
        self._sensor = given if given is not None else sensor_of_params(dict(self._dev.params))
        self._next_run = 0

    # ------------------------------------------------------------------ setup
    @property
    def device(self) -> _core.SimDevice:
        """The underlying C++ device (for tool builders)."""
        return self._dev

    @property
    def realtime(self) -> bool:
        """Whether the device follows the host clock."""
        return bool(self._dev.realtime)

    @property
    def params(self) -> dict[str, float]:
        """Every parameter's value on this device."""
        return dict(self._dev.params)

    @property
    def sensor(self) -> SensorModel:
        """The sensor the logger simulates (the one given, or the one its parameters describe)."""
        return self._sensor

    def kernel_id(self, kernel: str | int) -> int:
        """Resolve a kernel name (or id) to its id.

        Raises
        ------
        ValueError
            Unknown kernel; the message lists the known ones.
        """
        if isinstance(kernel, (int, np.integer)):
            n = len(self._dev.kernels())
            if not 0 <= int(kernel) < n:
                raise ValueError(f"kernel={kernel}: no such kernel id (0..{n - 1})")
            return int(kernel)
        return int(self._dev.kernel_id(str(kernel)))

    def kernel_names(self) -> list[str]:
        """Names of the kernels this device knows, by id."""
        return [k["name"] for k in self._dev.kernels()]

    def add_kernel(
        self,
        name: str,
        *,
        duration_ns: float,
        freq_sensitivity: float = 0.8,
        shape: Sequence[tuple[float, float, float, float]] = ((1.0, 0.8, 0.3, 0.3),),
        **options: float,
    ) -> int:
        """Register a user-defined kernel.

        Parameters
        ----------
        name : str
            Unique name.
        duration_ns : float
            Warm execution time at full clock, 1 us to 1 s.
        freq_sensitivity : float
            Share of the time that scales with 1/clock (compute-bound ~0.85,
            memory-bound ~0.05).
        shape : sequence of (end, compute, io, memory)
            Activity of each component (0..1.5) over pieces of the kernel's
            progress; ``end`` values increase strictly and the last is 1.
        **options : float
            ``exec_cv``, ``run_cv``, ``outlier_prob``, ``outlier_factor``,
            ``cold_factor``, ``cold_decay``, ``launch_gap_ns``,
            ``slow_mode_prob``, ``slow_mode_min``, ``slow_mode_max``.

        Returns
        -------
        int
            The new kernel's id.
        """
        spec: dict[str, Any] = {
            "name": name,
            "duration_ns": duration_ns,
            "freq_sensitivity": freq_sensitivity,
            "shape": [tuple(float(v) for v in seg) for seg in shape],
        }
        spec.update(options)
        return int(self._dev.add_kernel(spec))

    # ------------------------------------------------------------------ work
    def now(self) -> int:
        """Host time on the device's timeline (virtual or real), ns."""
        return int(self._dev.now())

    def idle(self, ns: float) -> None:
        """Let ``ns`` of host time pass (virtual time: instantly; real: sleeping)."""
        if ns < 0:
            raise ValueError(f"ns={ns}: must be >= 0")
        if self.realtime:
            import time

            end = self._dev.now() + int(ns)
            while self._dev.now() < end:
                time.sleep(min(0.01, max(0.0, (end - self._dev.now()) / 1e9)))
        else:
            self._dev.advance(int(ns))

    def run(self, kernel: str | int, executions: int, *, run: int | None = None) -> RunResult:
        """Launch ``executions`` back-to-back executions of one kernel and wait.

        One run in the paper's sense (Section IV-B step 4).
        """
        return self.sequence([(kernel, executions)], run=run)

    def sequence(self, items: Iterable[tuple[str | int, int]], *, run: int | None = None) -> RunResult:
        """Launch kernels back to back, in order, as one run, and wait.

        Parameters
        ----------
        items : iterable of (kernel, count)
            E.g. ``[("mb-4k-gemv", 40), ("cb-2k-gemm", 1)]`` for the paper's
            interleaved case MB->2K (Section V-C3).
        run : int, optional
            Run id; by default the next unused one.

        Returns
        -------
        RunResult
        """
        begin, end, ex = self._launch_and_wait(items, run)
        if self.realtime:
            samples = np.empty(0, dtype=_core.SAMPLE_DTYPE)
        elif self._cached_poll_ns is not None:
            samples = self.polled_samples(self._cached_poll_ns, begin_ns=begin, end_ns=end)
        else:
            # A log observed at or after `begin` was published at most one
            # poll period earlier.
            samples = self._dev.observed_samples(begin - int(self._dev.params["poll_period_ns"]))
            samples = samples[(samples["host_ns"] >= begin) & (samples["host_ns"] <= end)]
        return RunResult(int(ex["run"][0]), begin, end, ex, samples)

    def _launch_and_wait(
        self, items: Iterable[tuple[str | int, int]], run: int | None
    ) -> tuple[int, int, np.ndarray]:
        """Launch a run and wait for it: (host begin, host end, its EXEC_DTYPE records)."""
        plan = []
        for item in items:
            kernel, count = item
            if not isinstance(count, (int, np.integer)) or count < 1:
                raise ValueError(f"count={count!r} for kernel {kernel!r}: must be an integer >= 1")
            plan.append((self.kernel_id(kernel), int(count)))
        if not plan:
            raise ValueError("items: at least one (kernel, count) is needed")
        if run is None:
            run = self._next_run
        if run < 0:
            raise ValueError(f"run={run}: must be >= 0")
        self._next_run = max(self._next_run, run + 1)
        begin = self.now()
        # Fetch only what this run adds, so a long campaign costs the same per run.
        first = self._dev.execution_count()
        for kid, count in plan:
            self._dev.launch(kid, count, run)
        end = int(self._dev.synchronize())
        ex = self._dev.executions(first)
        return begin, end, ex[ex["run"] == run]

    # ------------------------------------------------------------------ records
    def executions(self) -> np.ndarray:
        """Every execution so far (EXEC_DTYPE): the truth about each one."""
        return self._dev.executions()

    def logs(self) -> np.ndarray:
        """Every power log the logger produced (LOG_DTYPE), with its true time."""
        return self._dev.logs()

    def samples(self) -> np.ndarray:
        """The logs as a sampler polling every ``poll_period_ns`` drained them (SAMPLE_DTYPE).

        With ``cached_poll_ns``, as a cached-value poller saw them (:meth:`polled_samples`).
        """
        if self._cached_poll_ns is not None:
            return self.polled_samples(self._cached_poll_ns)
        return self._dev.observed_samples()

    def polled_samples(self, poll_ns: float, *, phase_ns: float = 0.0, begin_ns: int | None = None,
                       end_ns: int | None = None) -> np.ndarray:
        """The logs as a host tool polling the logger's cached value saw them (SAMPLE_DTYPE).

        Parameters
        ----------
        poll_ns : float
            Poll period: polls at ``phase_ns + k * poll_ns`` host ns.
        phase_ns : float
            Phase of the polls on the host timeline.
        begin_ns, end_ns : int, optional
            Host window of the polls (default: the logs' publication span).

        Returns
        -------
        numpy.ndarray
            SAMPLE_DTYPE, one row per poll that found a log: the latest log
            published at or before the poll, stamped with the poll
            (``host_ns`` and ``host_poll_begin_ns`` the poll's host time,
            ``source_ts`` the logger clock's ticks at the poll); ``source_seq``
            is the log's sequence number (repeats show a re-read value), ``seq``
            the poll's.

        Notes
        -----
        ``nvidia-smi``, NVML's power queries and ``amd-smi`` return the
        firmware's latest value, not a queue of logs: a change is seen up to
        one logger period late, at the poll's own time, and a poll faster than
        the logger repeats values (kept, as such pollers produce them). The
        drained view (:meth:`samples`) keeps each log's own timestamp instead.
        """
        if not poll_ns >= 1.0:
            raise ValueError(f"poll_ns={poll_ns!r}: must be >= 1 ns")
        logs = self.logs()
        logs = logs[np.argsort(logs["publish_ns"], kind="stable")]
        out = np.zeros(0, dtype=_core.SAMPLE_DTYPE)
        if len(logs) == 0:
            return out
        lo = float(logs["publish_ns"][0] if begin_ns is None else begin_ns)
        hi = float(logs["publish_ns"][-1] if end_ns is None else end_ns)
        k0 = np.ceil((lo - phase_ns) / poll_ns)
        polls = np.round(phase_ns + poll_ns * np.arange(k0, np.floor((hi - phase_ns) / poll_ns) + 1)).astype(np.int64)
        idx = np.searchsorted(logs["publish_ns"], polls, side="right") - 1
        polls, got = polls[idx >= 0], logs[idx[idx >= 0]]
        out = np.zeros(len(polls), dtype=_core.SAMPLE_DTYPE)
        out["host_ns"] = polls
        out["host_poll_begin_ns"] = polls
        out["source_ts"] = self.logger_ticks_at(polls)
        out["source_seq"] = got["seq"]
        out["seq"] = np.arange(len(polls))
        for name in ("total", "compute", "io", "memory", "window_ns"):
            out[name] = got[name]
        return out

    def firmware(self) -> np.ndarray:
        """Every firmware loop decision (FIRMWARE_DTYPE): power seen, clock chosen, temperature."""
        return self._dev.firmware()

    def clear_records(self) -> None:
        """Free recorded executions, firmware decisions and the truth trace."""
        self._dev.clear_records()

    # ------------------------------------------------------------------ truth
    def truth_power(self, host_ns: np.ndarray | Sequence[int]) -> np.ndarray:
        """Exact power at host times: an (n, 4) array of total, compute, io, memory (W).

        NaN outside the recorded trace.
        """
        return self._dev.truth_power(np.asarray(host_ns, dtype=np.int64).ravel())

    def truth_trace(self, t0_ns: int, t1_ns: int, step_ns: int = 1000) -> tuple[np.ndarray, np.ndarray]:
        """The exact power trace on a regular grid: (times, (n, 4) powers)."""
        if step_ns <= 0:
            raise ValueError(f"step_ns={step_ns}: must be > 0")
        if t1_ns <= t0_ns:
            raise ValueError(f"t1_ns={t1_ns}: must be after t0_ns={t0_ns}")
        t = np.arange(int(t0_ns), int(t1_ns), int(step_ns), dtype=np.int64)
        return t, self.truth_power(t)

    def device_ticks_at(self, host_ns: np.ndarray | Sequence[int]) -> np.ndarray:
        """True device-clock ticks at host times."""
        return self._dev.device_ticks_at(np.asarray(host_ns, dtype=np.int64).ravel())

    def host_at_device_ticks(self, ticks: np.ndarray | Sequence[float]) -> np.ndarray:
        """True host time (float ns) at which the device clock reads ``ticks``."""
        return np.asarray(self._dev.host_at_device_ticks(np.asarray(ticks, dtype=np.float64)))

    def logger_ticks_at(self, host_ns: np.ndarray | Sequence[int]) -> np.ndarray:
        """True logger-clock ticks at host times."""
        return self._dev.logger_ticks_at(np.asarray(host_ns, dtype=np.int64).ravel())

    def host_at_logger_ticks(self, ticks: np.ndarray | Sequence[float]) -> np.ndarray:
        """True host time (float ns) at which the logger clock reads ``ticks``."""
        return np.asarray(self._dev.host_at_logger_ticks(np.asarray(ticks, dtype=np.float64)))

    def read_clocks(self, n: int) -> np.ndarray:
        """A burst of ``n`` bracketed device-clock reads: (n, 3) of (host_before, ticks, host_after)."""
        return self._dev.read_clocks(int(n))

    # ------------------------------------------------------------------ live
    def power_source(self, depth: int = 1) -> _core.SimPowerSource:
        """This device's logger as a PowerSource for a live Sampler (real time only).

        ``depth=1`` returns only the newest log per poll, like AMD's
        ``gpu_metrics`` file; larger depths behave like a sample buffer.
        """
        return _core.SimPowerSource(self._dev, depth=depth)

    def timestamp_source(self) -> _core.SimTimestampSource:
        """This device's clock as a TimestampSource for live clock sync (real time only).

        Each read really costs the simulated round trip. In virtual time, use
        :meth:`read_clocks`, whose brackets are in virtual host time.
        """
        return _core.SimTimestampSource(self._dev)


def steady_state_index(
    power: np.ndarray | Sequence[float], *, start: int = 3, tolerance: float = 0.01, tail: int = 10
) -> int:
    """The first execution from which per-execution power stays at its final level.

    The truth-side counterpart of the paper's SSP (Section IV-A): the
    smallest index ``i >= start`` such that every execution from ``i`` on is
    within ``tolerance`` (relative) of the mean of the last ``tail``
    executions.

    Parameters
    ----------
    power : array_like
        Mean power of each execution of one run, in order.
    start : int
        Earliest index considered (3: the SSE execution, after three warm-up
        executions).
    tolerance : float
        Relative band, in (0, 1).
    tail : int
        How many final executions define the steady level.

    Returns
    -------
    int
        The steady-state execution index.

    Raises
    ------
    ValueError
        Too few executions, or bad tolerance.
    """
    p = check_power(finite_array(power, "power"), "power").ravel()
    fraction(tolerance, "tolerance")
    start = integer_in(start, "start", 0)
    tail = integer_in(tail, "tail", 1)
    if p.size < start + tail + 1:
        raise ValueError(f"power: need at least start + tail + 1 = {start + tail + 1} executions, got {p.size}")
    final = p[-tail:].mean()
    outside = np.abs(p - final) > tolerance * abs(final)
    outside[:start] = True
    bad = np.nonzero(outside)[0]
    return int(bad[-1] + 1)


def sim_markers(ex: np.ndarray) -> np.ndarray:
    """The GPU-side markers of simulated executions as MARKER_RECORD_DTYPE.

    Parameters
    ----------
    ex : numpy.ndarray
        Executions as the simulator returns them (its EXEC_DTYPE).

    Returns
    -------
    numpy.ndarray
        MARKER_RECORD_DTYPE, device ticks as the markers of Section IV-A.
    """
    structured(ex, "ex", ("run", "index", "kernel_id", "begin_marker_ticks", "end_marker_ticks", "host_launch_ns",
                          "host_sync_ns"), "the simulator's executions (EXEC_DTYPE)")
    markers = np.zeros(len(ex), dtype=MARKER_RECORD_DTYPE)
    for name, src in (("run", "run"), ("index", "index"), ("kernel_id", "kernel_id"),
                      ("begin_ticks", "begin_marker_ticks"), ("end_ticks", "end_marker_ticks"),
                      ("host_launch_ns", "host_launch_ns"), ("host_sync_ns", "host_sync_ns")):
        markers[name] = ex[src]
    return markers
