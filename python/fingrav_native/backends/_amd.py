"""The AMD backend: FinGraV on a real AMD GPU (ROCm), loaded at run time.

Three things make a FinGraV run (paper Section IV-A): a power logger, GPU-side
markers of each execution, and a map from the GPU's clock to host time.

* power: the firmware's ``gpu_metrics`` table, or hwmon, sampled by the C++
  :class:`~fingrav_native.Sampler` thread
  (:func:`~fingrav_native.backends.power_source`). The firmware refreshes its
  metrics about every 1 ms on MI300X (paper Section III), but what a reader
  sees is the driver's: drivers since December 2025 serve one cached table
  for 5 ms by default, older ones build one per read. So the logger period
  is measured when the backend starts (:func:`measure_logger_period`), and
  idle waits and the post-run tail follow the measured value;
* markers: a probe kernel compiled at run time with hiprtc writes the GPU
  wall clock (``s_memrealtime`` on gfx9) into host-mapped memory before and
  after every execution, on the workload's own stream
  (:class:`~fingrav_native._core.HipMarkerProbe`); HIP events around the
  same executions are recorded as a cross-check;
* clocks: bracketed reads of the GPU counter through the KFD clock-counter
  ioctl on ``/dev/kfd`` (:class:`~fingrav_native._core.KfdClockSource`), or
  through the probe itself where ``/dev/kfd`` cannot be used
  (:class:`~fingrav_native._core.HipTimestampSource`). The logger's own
  firmware clock is fitted one-sidedly from the logs by the orchestrator.

Nothing here is needed to import the package: every library is opened when a
backend is built, and a missing one is reported by name with what to install.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from typing import Any, Literal, Sequence, Union, get_args

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import choice, fraction, integer_in, positive_number
from fingrav_native.backends import _amd_sysfs as amd_sysfs
from fingrav_native.backends._amd_sensors import power_semantics
from fingrav_native.backends._amd_sysfs import AmdChannel, AmdPrefer
from fingrav_native.backends._base import HostRelease, LivePower, drain_all, marker_records, wait_for_idle
from fingrav_native.backends._workloads import Workload
from fingrav_native.records._recording import Capabilities, RunRecord

logger = logging.getLogger(__name__)

#: A workload (or its name or id on the backend), or a sequence of (kernel, count).
AmdKernelSpec = Union[Workload, str, int, Sequence[tuple[Union[Workload, str, int], int]]]


#: Device clock for bracketed reads: KFD's ioctl, the marker probe's clock, or KFD when it agrees with the probe.
AmdClock = Literal["auto", "kfd", "hip"]


#: The KFD device node (the clock-counter ioctl).
KFD_PATH = "/dev/kfd"


_VISIBILITY_VARS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


def gpus_in_hip_order(sysfs_root: str) -> list[Any]:
    """AMD GPUs in KFD topology node order: the order ROCr (and so HIP) enumerates them."""
    gpus = [g for g in amd_sysfs.find_amd_gpus(sysfs_root) if g.kfd_node is not None]
    return sorted(gpus, key=lambda g: g.kfd_node)


def _tightest(brackets: np.ndarray) -> tuple[float, int]:
    """Host midpoint and device ticks of the narrowest bracket."""
    i = int(np.argmin(brackets[:, 2] - brackets[:, 0]))
    return 0.5 * float(brackets[i, 0] + brackets[i, 2]), int(brackets[i, 1])


def measure_tick_ns(clock: _core.TimestampSource, *, gap_ns: int = 50_000_000, burst: int = 32) -> float:
    """Measure a device clock's tick length from two bursts of bracketed reads.

    Parameters
    ----------
    clock : TimestampSource
        The device clock.
    gap_ns : int
        Host time between the two bursts (longer is more precise).
    burst : int
        Reads per burst; the narrowest bracket of each is used.

    Returns
    -------
    float
        Nanoseconds per tick.

    Notes
    -----
    Used when the runtime does not report the wall-clock rate (HIP before
    ROCm 6 lacks ``hipDeviceAttributeWallClockRate``): the clock map's fit
    (paper Section IV-B, step 2) only refines a nominal tick, so the nominal
    one must be close. 1. Burst, 2. wait ``gap_ns``, 3. burst, 4. tick =
    host span / tick span between the two narrowest brackets.
    """
    if gap_ns < 1_000_000:
        raise ValueError(f"gap_ns={gap_ns}: must be >= 1 ms")
    if burst < 2:
        raise ValueError(f"burst={burst}: must be >= 2")
    h0, d0 = _tightest(_core.measure_brackets(clock, burst))
    time.sleep(gap_ns / 1e9)
    h1, d1 = _tightest(_core.measure_brackets(clock, burst))
    if d1 <= d0:
        raise RuntimeError(f"{clock.name}: the device clock did not advance ({d0} then {d1})")
    return (h1 - h0) / (d1 - d0)


def measure_logger_period(power: _core.PowerSource, *, poll_ns: int = 100_000, min_logs: int = 8,
                          span_ns: int = 200_000_000, max_span_ns: int = 2_000_000_000) -> tuple[float, np.ndarray]:
    """Measure a power logger's period from the distinct logs it publishes while the GPU idles.

    Parameters
    ----------
    power : PowerSource
        The logger (a gpu_metrics or hwmon source), not polled by anything else.
    poll_ns : int
        Sampler period: how often the file is read.
    min_logs : int
        Distinct logs wanted (>= 3); sampling stops once this many are in
        and ``span_ns`` has passed.
    span_ns : int
        Shortest sampling time.
    max_span_ns : int
        Longest sampling time, for loggers that change rarely.

    Returns
    -------
    period_ns : float
        The median gap between consecutive distinct log timestamps, in ns.
    samples : numpy.ndarray
        The SAMPLE_DTYPE logs seen (the idle baseline's data).

    Raises
    ------
    RuntimeError
        Fewer than three distinct logs in ``max_span_ns``: the period cannot
        be told.

    Notes
    -----
    The period of paper Section IV-A is what limits FinGraV (Section VI), and
    on AMD it is the driver's, not the firmware's: since December 2025 the
    amdgpu driver serves one cached gpu_metrics table for
    SMU_GPU_METRICS_CACHE_INTERVAL (5 ms, counted in jiffies, so longer at
    a low HZ), older drivers build one per read. So it is measured, as the
    NVIDIA backend does: the Sampler keeps one log per distinct timestamp
    (a repeated table is a duplicate), and the median step between them, in
    the logger's own ticks times ``info.tick_ns``, is the period.
    """
    for value, name, low in ((poll_ns, "poll_ns", _core.MIN_PERIOD_NS), (min_logs, "min_logs", 3),
                             (span_ns, "span_ns", 1_000_000), (max_span_ns, "max_span_ns", 1_000_000)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name}={value!r}: must be an integer >= {low}")
    if poll_ns > _core.MAX_PERIOD_NS:
        raise ValueError(f"poll_ns={poll_ns}: must be <= {_core.MAX_PERIOD_NS}")
    if max_span_ns < span_ns:
        raise ValueError(f"max_span_ns={max_span_ns}: must be >= span_ns ({span_ns})")
    chunks: list[np.ndarray] = []
    distinct = 0
    with _core.Sampler(power, period_ns=int(poll_ns)) as sampler:
        t0 = _core.host_time_ns()
        deadline = t0 + int(span_ns)
        while True:
            _core.wait_until_ns(deadline)
            chunks.append(sampler.drain())
            distinct = len(np.unique(np.concatenate([c["source_ts"] for c in chunks])))
            now = _core.host_time_ns()
            if distinct >= min_logs or now - t0 >= max_span_ns:
                break
            # Rare logs: keep sampling, in steps of span_ns, up to max_span_ns.
            deadline = min(now + int(span_ns), t0 + int(max_span_ns))
        elapsed = _core.host_time_ns() - t0
    chunks.append(drain_all(sampler))
    samples = np.concatenate(chunks)
    ts = np.unique(samples["source_ts"].astype(np.int64))
    if len(ts) < 3:
        raise RuntimeError(
            f"{power.info.name}: {len(ts)} distinct log(s) in {elapsed / 1e6:.0f} ms of idle, too few to tell the "
            "logger period; check that the power file changes (read it twice, a second apart) and that the GPU "
            "is otherwise idle")
    return float(np.median(np.diff(ts)) * float(power.info.tick_ns)), samples


def _check_arguments(device: int, clock: str, period_ns: int, brackets_per_run: int, idle_tolerance: float,
                     max_idle_ns: int, marker_err_ns: float) -> None:
    """The backend's arguments, checked before anything is opened."""
    integer_in(device, "device", 0)
    choice(clock, "clock", ("auto", "kfd", "hip"))
    integer_in(period_ns, "period_ns", _core.MIN_PERIOD_NS, _core.MAX_PERIOD_NS)
    integer_in(brackets_per_run, "brackets_per_run", 2, 100_000)
    fraction(idle_tolerance, "idle_tolerance")
    integer_in(max_idle_ns, "max_idle_ns", 1)
    positive_number(marker_err_ns, "marker_err_ns", allow_zero=True)


def _pick_gpu(gpus: list[Any], device: int, sysfs_root: str) -> Any:
    """GPU ``device`` of those found, or why there is none with what a backend needs."""
    if not gpus:
        raise _core.DeviceUnavailableError(
            f"no AMD GPU with a KFD node under {sysfs_root}: looked for {sysfs_root}/class/drm/card*/device "
            f"with vendor 0x1002 bound to amdgpu, matched to {sysfs_root}/class/kfd/kfd/topology/nodes/*; "
            "load the amdgpu driver on a machine with an AMD GPU")
    if device >= len(gpus):
        raise _core.DeviceUnavailableError(f"device={device}: this machine has {len(gpus)} AMD GPU(s)")
    gpu = gpus[device]
    if gpu.gfx_target_version is None or gpu.kfd_gpu_id is None:
        raise _core.DeviceUnavailableError(
            f"card{gpu.card} ({gpu.pci_address}): its KFD node lacks gfx_target_version or gpu_id")
    return gpu


def _check_hip_sees(n_gpus: int) -> None:
    """HIP must see every GPU sysfs has, or device indices cannot be matched between the two."""
    narrowed = [v for v in _VISIBILITY_VARS if os.environ.get(v)]
    info = _core.hip_runtime_info()
    if info["device_count"] != n_gpus:
        raise _core.DeviceUnavailableError(
            f"HIP ({info['library_path']}) sees {info['device_count']} device(s) but sysfs has {n_gpus} "
            f"AMD GPU(s){' (' + ', '.join(narrowed) + ' set)' if narrowed else ''}; "
            f"{info['init_error'] or 'device indices cannot be matched'}. Unset the visibility variables.")


class AmdBackend(HostRelease, LivePower):
    """One AMD GPU as a FinGraV backend (paper Section IV).

    Parameters
    ----------
    device : int
        Index of the GPU in HIP's order (KFD topology node order, which HIP
        follows when no ``HIP_VISIBLE_DEVICES``-style variable narrows it).
    channel : {"energy", "socket"}
        ``gpu_metrics`` power channel: derived from the energy accumulator
        (finer), or the firmware's socket power.
    prefer : {"gpu_metrics", "hwmon"}
        Which power file to try first.
    clock : {"auto", "kfd", "hip"}
        Device clock for bracketed reads: the KFD ioctl (tight brackets,
        ~1 us), the probe on a private stream (wider, but the very counter the
        markers read), or ``auto``: KFD when it opens and agrees with the
        probe's clock, else the probe.
    period_ns : int
        Sampler period (default 100 us: at least ten polls per log, so a
        host-stamped hwmon value is stamped within 100 us of appearing).
    brackets_per_run : int
        Bracketed clock reads per run (half before, half after).
    idle_tolerance : float
        Relative excess over the idle baseline below which the GPU counts as idle.
    max_idle_ns : int
        Longest wait for idle.
    marker_err_ns : float
        Half-width of a marker's placement error: the probe writes the clock
        when it runs, up to its own duration plus a dispatch before the
        kernel starts (estimate; see the report on verification).
    sysfs_root : str
        Where sysfs is mounted (tests pass a fake tree).
    kfd_path : str
        The KFD device node.

    Raises
    ------
    DeviceUnavailableError
        No AMD GPU, no usable power file, no HIP device; the message says
        what was looked for.
    LibraryNotFoundError
        libamdhip64 or hiprtc is missing; the message lists the paths tried.
    """

    def __init__(
        self,
        device: int = 0,
        *,
        channel: AmdChannel = "energy",
        prefer: AmdPrefer = "gpu_metrics",
        clock: AmdClock = "auto",
        period_ns: int = 100_000,
        brackets_per_run: int = 16,
        idle_tolerance: float = 0.01,
        max_idle_ns: int = 2_000_000_000,
        marker_err_ns: float = 5_000.0,
        sysfs_root: str = "/sys",
        kfd_path: str = KFD_PATH,
    ) -> None:
        _check_arguments(device, clock, period_ns, brackets_per_run, idle_tolerance, max_idle_ns, marker_err_ns)
        # Named before the device is looked for: a wrong option is the usage's fault on any machine.
        choice(channel, "channel", get_args(AmdChannel))
        choice(prefer, "prefer", get_args(AmdPrefer))
        gpus = gpus_in_hip_order(sysfs_root)
        self.gpu = _pick_gpu(gpus, device, sysfs_root)
        self.device = device
        self.arch = _core.gfx_arch_from_target_version(self.gpu.gfx_target_version)

        self._power = amd_sysfs.power_source(self.gpu, prefer=prefer, channel=channel)
        _check_hip_sees(len(gpus))
        self._probe = _core.HipMarkerProbe(device, 64, arch=self.arch)
        self._events = _core.HipEventTimer(device, 64)
        rate_khz = self._probe.wall_clock_rate_khz

        self._clock, self._clock_check = self._choose_clock(clock, kfd_path, rate_khz)
        tick = 1e6 / rate_khz if rate_khz > 0 else measure_tick_ns(self._clock)
        self._period_ns = int(period_ns)
        self._brackets_per_run = int(brackets_per_run)
        self._idle_tol = float(idle_tolerance)
        self._max_idle_ns = int(max_idle_ns)
        self._next_run_id = 0
        self._workloads: list[Workload] = []
        p = self._power.info
        # The period is the driver's (a cached table, or one per read), so it
        # is measured on the idle GPU, never assumed; the same logs give the
        # idle baseline that wait_idle compares against.
        self._logger_period, idle = measure_logger_period(self._power, poll_ns=self._period_ns)
        self._baseline_w = float(np.nanmean(idle["total"])) if len(idle) else float("nan")
        if not np.isfinite(self._baseline_w):
            raise RuntimeError(f"{p.name}: no power value in the idle logs; the power file reports no data")
        #: What a log is and where each logger figure comes from (``fingrav devices``, profiles).
        self.sensor_semantics = power_semantics(self._power)
        self._caps = self._capabilities(float(tick), float(marker_err_ns))

    def _capabilities(self, tick: float, marker_err_ns: float) -> Capabilities:
        """The logger, clock and markers as measured at start."""
        p = self._power.info
        # An energy log averages over the gap since the previous table: the
        # measured period. Other modes declare their own (0 where undocumented).
        energy = self.sensor_semantics.mode.startswith("gpu_metrics energy")
        window = self._logger_period if energy else float(p.window_ns)
        return Capabilities(
            name="amd",
            device=f"{self.gpu.name} ({self.arch}, {self.gpu.pci_address})",
            logger_period_ns=self._logger_period,
            logger_window_ns=window,
            logger_clock=p.clock_domain,
            device_tick_ns=tick,
            gpu_markers=True,
            marker_err_ns=marker_err_ns,
            channels=tuple(c for i, c in enumerate(_core.CHANNELS) if p.channel_mask & (1 << i)),
            virtual_time=False,
            logger_tick_ns=float(p.tick_ns),
            sensor_semantics=f"{self.sensor_semantics.mode}: {self.sensor_semantics.semantics}",
            provenance=self.sensor_semantics.provenance,
        )

    # ------------------------------------------------------------ clocks
    def _choose_clock(self, clock: AmdClock, kfd_path: str, rate_khz: int) -> tuple[_core.TimestampSource, dict[str, Any]]:
        tick = 1e6 / rate_khz if rate_khz > 0 else 10.0
        if clock == "hip":
            return _core.HipTimestampSource(self.device, arch=self.arch), {"source": "hip"}
        try:
            kfd = _core.KfdClockSource(self.gpu.kfd_gpu_id, device_path=kfd_path, nominal_tick_ns=tick)
        except _core.DeviceUnavailableError as exc:
            if clock == "kfd":
                raise
            logger.debug("KFD clock unavailable (%s); brackets read the probe's clock", exc)
            return _core.HipTimestampSource(self.device, arch=self.arch), {"source": "hip", "kfd_error": str(exc)}
        hip = _core.HipTimestampSource(self.device, arch=self.arch)
        check = compare_clocks(kfd, hip)
        check["source"] = "kfd"
        if not check["same_counter"]:
            if clock == "kfd":
                raise _core.DeviceUnavailableError(
                    f"the KFD GPU counter and the probe's wall clock differ by {check['offset_ns']:.0f} ns "
                    "(more than the brackets allow): markers cannot be mapped with KFD reads; use clock='hip'")
            warnings.warn(f"KFD GPU counter and the probe's wall clock disagree by {check['offset_ns']:.0f} ns; "
                          "using the probe's clock for brackets", RuntimeWarning, stacklevel=3)
            check["source"] = "hip"
            return hip, check
        return kfd, check

    @property
    def clock_check(self) -> dict[str, Any]:
        """Which clock the brackets read, and how it compared with the markers' clock."""
        return dict(self._clock_check)

    def read_clocks(self, n: int) -> np.ndarray:
        """``n`` bracketed reads of the GPU clock (paper Section IV-B, step 2)."""
        return _core.measure_brackets(self._clock, int(n))

    # ------------------------------------------------------------ protocol
    @property
    def capabilities(self) -> Capabilities:
        """The GPU's logger, clocks and markers."""
        return self._caps

    def add_workload(self, workload: Workload) -> int:
        """Register a workload; returns its kernel id (its name works as well)."""
        if not isinstance(workload, Workload):
            raise ValueError(f"workload={workload!r}: must be a Workload (see fingrav_native.backends)")
        for i, w in enumerate(self._workloads):
            if w is workload:
                return i
            if w.name == workload.name:
                raise ValueError(f"workload: another workload is already named {workload.name!r}")
        self._workloads.append(workload)
        return len(self._workloads) - 1

    def _resolve(self, kernel: Union[Workload, str, int]) -> tuple[Workload, int]:
        if isinstance(kernel, Workload):
            return kernel, self.add_workload(kernel)
        if isinstance(kernel, str):
            for i, w in enumerate(self._workloads):
                if w.name == kernel:
                    return w, i
            raise ValueError(f"kernel={kernel!r}: no workload of that name; add it with add_workload()")
        if isinstance(kernel, (int, np.integer)) and not isinstance(kernel, bool):
            if 0 <= int(kernel) < len(self._workloads):
                return self._workloads[int(kernel)], int(kernel)
            raise ValueError(f"kernel={kernel}: {len(self._workloads)} workload(s) registered")
        raise ValueError(f"kernel={kernel!r}: must be a Workload, its name or its id")

    def kernel_name(self, kernel: Union[Workload, str, int]) -> str:
        """The name of a workload given as itself, its name or its id."""
        return self._resolve(kernel)[0].name

    def new_run_id(self) -> int:
        """A run id never used on this backend before."""
        self._next_run_id += 1
        return self._next_run_id - 1

    def _idle_level(self, ns: int) -> float:
        with _core.Sampler(self._power, period_ns=self._period_ns) as sampler:
            time.sleep(ns / 1e9)
        s = drain_all(sampler)
        # No log in a chunk (NaN) counts as not idle yet: wait_for_idle keeps waiting.
        return float(np.nanmean(s["total"])) if len(s) else float("nan")

    def wait_idle(self) -> int:
        """Sample the idle GPU until its logged power is back near the idle baseline.

        Returns
        -------
        int
            Nanoseconds waited.

        Notes
        -----
        Chunks of 20 logger periods (the period measured at construction)
        until one's mean power is within ``idle_tolerance`` of the baseline
        measured with it (or ``max_idle_ns`` passed). Launches then fall at
        random phases of the free-running logger, which FinGraV relies on
        (paper Section IV-A).
        """
        return wait_for_idle(self._idle_level, self._baseline_w, self._idle_tol, self._logger_period,
                             self._max_idle_ns)

    def _plan(self, kernel: AmdKernelSpec, executions: int) -> list[tuple[Workload, int]]:
        if isinstance(executions, bool) or not isinstance(executions, (int, np.integer)) or executions < 1:
            raise ValueError(f"executions={executions!r}: must be an integer >= 1")
        if isinstance(kernel, (Workload, str, int, np.integer)):
            w, kid = self._resolve(kernel)
            return [(w, kid)] * int(executions)
        plan: list[tuple[Workload, int]] = []
        for k, count in kernel:
            plan.extend([self._resolve(k)] * int(count))
        if len(plan) != executions:
            raise ValueError(f"executions={executions}: the sequence has {len(plan)} executions in all")
        return plan

    def _ensure_slots(self, n: int) -> None:
        if len(self._probe) < n:
            size = max(n, 2 * len(self._probe))
            self._probe = _core.HipMarkerProbe(self.device, size, arch=self.arch)
            self._events = _core.HipEventTimer(self.device, size)

    def execute_run(self, kernel: AmdKernelSpec, executions: int, run: int) -> RunRecord:
        """Launch one run with the sampler polling; return its raw record.

        Parameters
        ----------
        kernel : Workload, str, int, or sequence of (kernel, count)
            One workload run ``executions`` times back to back, or a sequence
            run back to back as one run.
        executions : int
            Executions in the run.
        run : int
            Run id.

        Notes
        -----
        Paper Section IV-B, steps 2 and 4: bracketed clock reads before and
        after; executions back to back on the workload's stream, each between
        two probe launches on that same stream (so the probe runs exactly
        when the execution starts and ends in the GPU's queue) and two HIP
        events; the sampler polls the logger throughout and for two logger
        periods after (the measured period), as logs are published after
        they are sampled.
        """
        plan = self._plan(kernel, executions)
        n = len(plan)
        self._ensure_slots(2 * n)
        probe, events = self._probe, self._events
        probe.reset()
        launch_ns = np.empty(n, dtype=np.int64)
        half = self._brackets_per_run // 2
        before = _core.measure_brackets(self._clock, half)
        with _core.Sampler(self._power, period_ns=self._period_ns) as sampler:
            # Phase steering: launch at the armed release (HostRelease), after the setup above.
            late = self._released()
            for i, (w, _) in enumerate(plan):
                stream = int(w.stream())
                launch_ns[i] = _core.host_time_ns()
                probe.stamp(stream, 2 * i)
                events.record(stream, 2 * i)
                w.launch()
                probe.stamp(stream, 2 * i + 1)
                events.record(stream, 2 * i + 1)
            for w in {id(w): w for w, _ in plan}.values():
                if w.synchronize is not None:
                    w.synchronize()
            events.synchronize(2 * n - 1)
            sync_ns = _core.host_time_ns()
            time.sleep(2 * self._logger_period / 1e9)
        samples = drain_all(sampler)
        after = _core.measure_brackets(self._clock, self._brackets_per_run - half)

        slots = probe.slots()[: 2 * n].astype(np.int64)
        if np.any(slots == 0):
            missing = int(np.count_nonzero(slots == 0))
            raise RuntimeError(f"run {run}: {missing} of {2 * n} marker probes never wrote the wall clock "
                               "(a workload changed streams without waiting for them?)")
        markers = marker_records(run, [kid for _, kid in plan], slots, launch_ns, sync_ns)
        event_ns = np.array([events.elapsed_ms(2 * i, 2 * i + 1) * 1e6 for i in range(n)])
        stats = sampler.stats()
        return RunRecord(
            run=run, executions=n, samples=samples, markers=markers,
            brackets=np.concatenate([before, after]),
            meta={"event_duration_ns": event_ns, "sampler": stats.as_dict(), "clock": self._clock.clock_domain,
                  **({"release_late_ns": float(late)} if late is not None else {})},
        )

    def __repr__(self) -> str:
        return f"AmdBackend(device={self.device}, {self._caps.device}, clock={self._clock.name!r})"


def compare_clocks(kfd: _core.TimestampSource, hip: _core.TimestampSource, *, reads: int = 32) -> dict[str, Any]:
    """Check that two device clocks are one counter: map the same instant through each.

    Parameters
    ----------
    kfd, hip : TimestampSource
        The KFD counter and the probe's wall clock.
    reads : int
        Interleaved bursts of bracketed reads from each.

    Returns
    -------
    dict
        ``offset_ns`` (host-time difference between the two clocks' readings
        of one instant, assuming equal ticks), ``tolerance_ns`` (the two
        narrowest half-brackets plus 1 us), and ``same_counter``.

    Notes
    -----
    The markers read the wall clock (``s_memrealtime``); brackets are only
    useful if they read the same counter (paper Section IV-B, step 2). AMD
    documents both as the GPU's constant-rate reference counter on gfx9,
    but this checks it on the device at hand rather than assuming it.
    """
    if reads < 2:
        raise ValueError(f"reads={reads}: must be >= 2")
    a = _core.measure_brackets(kfd, reads)
    b = _core.measure_brackets(hip, reads)
    ha, da = _tightest(a)
    hb, db = _tightest(b)
    tick = kfd.nominal_tick_ns
    # Where clock A would put the instant of B's reading, against B's own host time.
    offset = (ha + (db - da) * tick) - hb
    half = 0.5 * float(np.min(a[:, 2] - a[:, 0])) + 0.5 * float(np.min(b[:, 2] - b[:, 0]))
    tol = half + 1_000.0
    return {"offset_ns": float(offset), "tolerance_ns": float(tol), "same_counter": bool(abs(offset) <= tol)}
