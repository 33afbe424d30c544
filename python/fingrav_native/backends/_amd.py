"""The AMD backend: FinGraV on a real AMD GPU (ROCm), loaded at run time.

Three things make a FinGraV run (paper Section IV-A): a power logger, GPU-side
markers of each execution, and a map from the GPU's clock to host time.

* power: the firmware's ``gpu_metrics`` table, or hwmon, sampled by the C++
  :class:`~fingrav_native.Sampler` thread
  (:mod:`fingrav_native.backends.amd_sysfs`). The firmware refreshes its
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

import dataclasses
import os
import time
import warnings
from typing import Any, Sequence, Union

import numpy as np

from fingrav_native import _core
from fingrav_native.backends import _amd_sysfs as amd_sysfs
from fingrav_native.backends._base import HostRelease, LivePower, drain_all, marker_records, wait_for_idle
from fingrav_native.backends._report import BackendReport, Component, DeviceEntry
from fingrav_native.backends._workloads import Workload
from fingrav_native.records._recording import Capabilities, RunRecord
from fingrav_native.sensors._semantics import SensorSemantics

#: A workload (or its name or id on the backend), or a sequence of (kernel, count).
AmdKernelSpec = Union[Workload, str, int, Sequence[tuple[Union[Workload, str, int], int]]]


_KFD = "/dev/kfd"


_VISIBILITY_VARS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


def _amd_sysfs() -> Any:
    # amd_sysfs holds the power side (gpu_metrics / hwmon discovery); imported
    # lazily so this module's clocks and markers do not depend on it.
    return amd_sysfs


def _gpus_in_hip_order(sysfs_root: str) -> list[Any]:
    """AMD GPUs in KFD topology node order: the order ROCr (and so HIP) enumerates them."""
    gpus = [g for g in _amd_sysfs().find_amd_gpus(sysfs_root) if g.kfd_node is not None]
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


# ------------------------------------------------------------ what a log is
# Each power mode the backend can use, what one of its logs is, and where each
# logger figure comes from. The kernel sources named are
# drivers/gpu/drm/amd/include/kgd_pp_interface.h (the gpu_metrics fields) and
# drivers/gpu/drm/amd/pm/amdgpu_pm.c (the hwmon files); the cache interval is
# SMU_GPU_METRICS_CACHE_INTERVAL (amd-gfx, "drm/amd/pm: Use driver table
# structure in smuv11", December 2025: "The default cache interval is set at
# 5ms").
_PERIOD_GPU_METRICS = ("period", "measured",
                       "at start, from the gaps between distinct firmware timestamps while the GPU idles (the "
                       "driver caches the table 5 ms by default, SMU_GPU_METRICS_CACHE_INTERVAL; older drivers "
                       "not at all)")


_PERIOD_BOOTTIME = ("period", "measured",
                    "at start, from the gaps between tables whose accumulators moved while the GPU idles")


_PERIOD_HWMON = ("period", "measured", "at start, from the gaps between value changes while the GPU idles")


_WINDOW_ENERGY = ("window", "measured",
                  "= the period: a log is the exact average over the gap since the previous table, "
                  "which it carries as its own window")


_TICK_FIRMWARE = ("tick", "documented",
                  "10 ns: firmware_timestamp, 'PMFW attached timestamp (10ns resolution)' (kgd_pp_interface.h; "
                  "a 1.9 table states it in the field's unit, AMDGPU_METRICS_UNIT_TIME_2)")


_TICK_BOOTTIME = ("tick", "documented", "1 ns: system_clock_counter, 'Driver attached timestamp (in ns)'")


_TICK_HOST = ("tick", "documented", "1 ns: host CLOCK_MONOTONIC_RAW, read when a new value is first seen")


_DELAY_FIRMWARE = ("delay", "assumed",
                   "0: the firmware is taken to stamp a table when it samples the accumulators (undocumented)")


_DELAY_HWMON = ("delay", "assumed",
                "0, but a value is stamped at the first poll that sees it, up to one poll late, after an "
                "undocumented firmware lag")


#: The power modes of the AMD backend, by name: what one log is and where each figure comes from.
AMD_SENSORS: dict[str, SensorSemantics] = {s.mode: s for s in (
    SensorSemantics(
        "gpu_metrics energy",
        "total power = energy_accumulator difference (2^-16 J) / firmware_timestamp difference between "
        "consecutive distinct gpu_metrics tables",
        (_PERIOD_GPU_METRICS, _WINDOW_ENERGY, _DELAY_FIRMWARE, _TICK_FIRMWARE)),
    SensorSemantics(
        "gpu_metrics energy (boottime clock)",
        "total power = energy_accumulator difference (2^-16 J) / system_clock_counter difference between "
        "consecutive tables whose accumulators moved (this firmware leaves firmware_timestamp unset)",
        (_PERIOD_BOOTTIME, _WINDOW_ENERGY,
         ("delay", "assumed", "0: the driver stamps a table when it builds it, an undocumented lag after the "
                              "firmware sampled it"),
         _TICK_BOOTTIME)),
    SensorSemantics(
        "gpu_metrics socket",
        "curr_socket_power: the firmware's socket power in integer watts, stamped with firmware_timestamp",
        (_PERIOD_GPU_METRICS,
         ("window", "assumed", "0: the kernel documents the field only as 'Power (Watts)', its averaging is "
                               "undocumented; characterise it (fingrav characterize) before trusting detail "
                               "finer than the period"),
         _DELAY_FIRMWARE, _TICK_FIRMWARE)),
    SensorSemantics(
        "gpu_metrics socket (boottime clock)",
        "curr_socket_power: the firmware's socket power in integer watts, stamped with the driver's "
        "system_clock_counter (this firmware leaves firmware_timestamp unset)",
        (_PERIOD_BOOTTIME,
         ("window", "assumed", "0: the kernel documents the field only as 'Power (Watts)', its averaging is "
                               "undocumented"),
         ("delay", "assumed", "0: the driver stamps a table when it builds it, an undocumented lag after the "
                              "firmware sampled it"),
         _TICK_BOOTTIME)),
    SensorSemantics(
        "hwmon power1_average",
        "'average power used by the SoC in microWatts' (amdgpu_pm.c), stamped with host time",
        (_PERIOD_HWMON,
         ("window", "assumed", "0: the averaging window is not documented; characterise it (fingrav "
                               "characterize) before trusting detail finer than a second"),
         _DELAY_HWMON, _TICK_HOST)),
    SensorSemantics(
        "hwmon power1_input",
        "'instantaneous power used by the SoC in microWatts' (amdgpu_pm.c), stamped with host time",
        (_PERIOD_HWMON,
         ("window", "documented", "0: 'instantaneous power' (amdgpu_pm.c)"),
         _DELAY_HWMON, _TICK_HOST)),
)}


#: The mode the backend uses by default (channel='energy' on a firmware that stamps its tables).
DEFAULT_SENSOR = "gpu_metrics energy"


def power_semantics(power: _core.PowerSource) -> SensorSemantics:
    """What the logs of one AMD power source are, and where each logger figure comes from.

    Parameters
    ----------
    power : PowerSource
        A :class:`~fingrav_native._core.GpuMetricsSource` or
        :class:`~fingrav_native._core.HwmonPowerSource`.

    Returns
    -------
    SensorSemantics
        One of :data:`AMD_SENSORS`.

    Notes
    -----
    The gpu_metrics fields are those of the kernel's
    ``drivers/gpu/drm/amd/include/kgd_pp_interface.h``; the hwmon files are
    documented in ``drivers/gpu/drm/amd/pm/amdgpu_pm.c``. A window or delay
    nobody documented is marked ``assumed``: paper Section VI names the
    logger as what limits FinGraV, and an averaging sensor taken for an
    instantaneous one is a silent error.
    """
    if isinstance(power, _core.GpuMetricsSource):
        mode = f"gpu_metrics {power.channel}" + (" (boottime clock)" if power.clock == "boottime" else "")
        if power.clock == "firmware" and power.info.tick_ns == 1.0:
            # A 1.9 table whose firmware_timestamp says ns (AMDGPU_METRICS_UNIT_TIME_1), not the 10 ns of 1.4-1.8.
            sem = AMD_SENSORS[mode]
            tick = ("tick", "documented",
                    "1 ns: firmware_timestamp's unit in this 1.9 table (AMDGPU_METRICS_UNIT_TIME_1)")
            return dataclasses.replace(sem, figures=tuple(tick if f[0] == "tick" else f for f in sem.figures))
    elif isinstance(power, _core.HwmonPowerSource):
        mode = "hwmon power1_average" if power.averaged else "hwmon power1_input"
    else:
        raise ValueError(f"power={power!r}: must be a GpuMetricsSource or HwmonPowerSource")
    return AMD_SENSORS[mode]


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
        channel: str = "energy",
        prefer: str = "gpu_metrics",
        clock: str = "auto",
        period_ns: int = 100_000,
        brackets_per_run: int = 16,
        idle_tolerance: float = 0.01,
        max_idle_ns: int = 2_000_000_000,
        marker_err_ns: float = 5_000.0,
        sysfs_root: str = "/sys",
        kfd_path: str = _KFD,
    ) -> None:
        if isinstance(device, bool) or not isinstance(device, int) or device < 0:
            raise ValueError(f"device={device!r}: must be an integer >= 0")
        if clock not in ("auto", "kfd", "hip"):
            raise ValueError(f"clock={clock!r}: must be 'auto', 'kfd' or 'hip'")
        if not _core.MIN_PERIOD_NS <= period_ns <= _core.MAX_PERIOD_NS:
            raise ValueError(f"period_ns={period_ns}: must be in [{_core.MIN_PERIOD_NS}, {_core.MAX_PERIOD_NS}]")
        if brackets_per_run < 2:
            raise ValueError(f"brackets_per_run={brackets_per_run}: must be >= 2")
        if not 0 < idle_tolerance < 1:
            raise ValueError(f"idle_tolerance={idle_tolerance}: must be in (0, 1)")
        if max_idle_ns <= 0:
            raise ValueError(f"max_idle_ns={max_idle_ns}: must be > 0")
        if not marker_err_ns >= 0:
            raise ValueError(f"marker_err_ns={marker_err_ns}: must be >= 0")

        gpus = _gpus_in_hip_order(sysfs_root)
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
        self.gpu = gpu
        self.device = device
        self.arch = _core.gfx_arch_from_target_version(gpu.gfx_target_version)
        narrowed = [v for v in _VISIBILITY_VARS if os.environ.get(v)]

        self._power = _amd_sysfs().power_source(gpu, prefer=prefer, channel=channel)
        info = _core.hip_runtime_info()
        if info["device_count"] != len(gpus):
            raise _core.DeviceUnavailableError(
                f"HIP ({info['library_path']}) sees {info['device_count']} device(s) but sysfs has {len(gpus)} "
                f"AMD GPU(s){' (' + ', '.join(narrowed) + ' set)' if narrowed else ''}; "
                f"{info['init_error'] or 'device indices cannot be matched'}. Unset the visibility variables.")
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
        # An energy log averages over the gap since the previous table: the
        # measured period. Other modes declare their own (0 where undocumented).
        energy = self.sensor_semantics.mode.startswith("gpu_metrics energy")
        window = self._logger_period if energy else float(p.window_ns)
        self._caps = Capabilities(
            name="amd",
            device=f"{gpu.name} ({self.arch}, {gpu.pci_address})",
            logger_period_ns=self._logger_period,
            logger_window_ns=window,
            logger_clock=p.clock_domain,
            device_tick_ns=float(tick),
            gpu_markers=True,
            marker_err_ns=float(marker_err_ns),
            channels=tuple(c for i, c in enumerate(_core.CHANNELS) if p.channel_mask & (1 << i)),
            virtual_time=False,
            logger_tick_ns=float(p.tick_ns),
            sensor_semantics=f"{self.sensor_semantics.mode}: {self.sensor_semantics.semantics}",
            provenance=self.sensor_semantics.provenance,
        )

    # ------------------------------------------------------------ clocks
    def _choose_clock(self, clock: str, kfd_path: str, rate_khz: int) -> tuple[_core.TimestampSource, dict[str, Any]]:
        tick = 1e6 / rate_khz if rate_khz > 0 else 10.0
        if clock == "hip":
            return _core.HipTimestampSource(self.device, arch=self.arch), {"source": "hip"}
        try:
            kfd = _core.KfdClockSource(self.gpu.kfd_gpu_id, device_path=kfd_path, nominal_tick_ns=tick)
        except _core.DeviceUnavailableError as exc:
            if clock == "kfd":
                raise
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
            raise ValueError(f"workload={workload!r}: must be a Workload (see fingrav_native.backends.workloads)")
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


def report(sysfs_root: str = "/sys", kfd_path: str = _KFD) -> BackendReport:
    """What the AMD backend finds on this machine, and why anything is missing.

    Parameters
    ----------
    sysfs_root : str
        Where sysfs is mounted.
    kfd_path : str
        The KFD device node.

    Returns
    -------
    BackendReport

    Notes
    -----
    Lists each part FinGraV needs (paper Section IV-A): the power files per
    GPU, ``/dev/kfd`` for the clock, the HIP runtime and hiprtc for markers;
    and the power modes (``sensors``, the one in use first): what a log is
    and whether each figure is documented, measured (the period, always, at
    start) or assumed. Without a GPU the mode in use is the default one,
    ``gpu_metrics energy``; with one, the mode the first GPU's power files
    open in (each device's ``power`` detail names its own).
    """
    comps: list[Component] = []
    devices: list[DeviceEntry] = []
    reasons: list[str] = []

    gpus: list[Any] = []
    try:
        gpus = _gpus_in_hip_order(sysfs_root)
        comps.append(Component("amdgpu GPUs in sysfs", bool(gpus),
                               f"{len(gpus)} under {sysfs_root}/class/drm" if gpus else
                               f"no AMD GPU bound to amdgpu with a KFD node under {sysfs_root}"))
    except ImportError as exc:
        comps.append(Component("fingrav_native.backends.amd_sysfs", False, f"not importable: {exc}"))
    if not gpus:
        reasons.append("no AMD GPU found")

    if os.path.exists(kfd_path):
        ok = os.access(kfd_path, os.R_OK | os.W_OK)
        comps.append(Component(kfd_path, ok, "present, read/write" if ok else
                               "present but not writable by this user: join the 'render' group"))
    else:
        comps.append(Component(kfd_path, False, "absent: the amdgpu driver (KFD) is not loaded or there is no AMD GPU"))

    hip_devices = 0
    try:
        info = _core.hip_runtime_info()
        hip_devices = int(info["device_count"])
        detail = f"{info['library_path']} (HIP {info['runtime_version']}), {hip_devices} device(s)"
        if info["init_error"]:
            detail += f"; {info['init_error']}"
        comps.append(Component("HIP runtime (libamdhip64)", True, detail))
    except _core.LibraryNotFoundError as exc:
        comps.append(Component("HIP runtime (libamdhip64)", False, str(exc)))
        reasons.append("the HIP runtime is not installed")

    # gfx90a, not the device's own target: every hiprtc since ROCm 4.3 knows
    # it, while ROCm 5.2's hiprtc corrupts its heap and aborts the process
    # when asked for a target newer than itself (gfx942, gfx1100), and a
    # report must never crash. The backend compiles for the device's target
    # only after HIP has shown it supports that device.
    arch = "gfx90a"
    try:
        code = _core.hiprtc_compile_probe(arch)
        comps.append(Component("hiprtc (marker probe)", True, f"compiled the probe for {arch} ({len(code)} bytes)"))
    except (_core.LibraryNotFoundError, _core.SymbolNotFoundError, RuntimeError) as exc:
        comps.append(Component("hiprtc (marker probe)", False, str(exc)))
        reasons.append("hiprtc cannot compile the marker probe")

    in_use: SensorSemantics | None = None
    for i, g in enumerate(gpus):
        comps.append(Component(f"card{g.card} gpu_metrics", g.gpu_metrics is not None,
                               g.gpu_metrics or "not exposed by the driver", required=False))
        comps.append(Component(f"card{g.card} hwmon power", g.hwmon_power is not None,
                               g.hwmon_power or "no power1_average / power1_input", required=False))
        details: dict[str, Any] = {"pci": g.pci_address, "kfd_gpu_id": g.kfd_gpu_id}
        if g.gfx_target_version:
            try:
                details["arch"] = _core.gfx_arch_from_target_version(g.gfx_target_version)
            except ValueError:
                details["gfx_target_version"] = g.gfx_target_version
        if g.gpu_metrics is None and g.hwmon_power is None:
            reasons.append(f"card{g.card} has no power file")
        else:
            mode = _power_mode_of(g)
            details["power"] = mode
            if in_use is None and mode in AMD_SENSORS:
                in_use = AMD_SENSORS[mode]
        devices.append(DeviceEntry(i, g.name, details))
    if gpus and hip_devices != len(gpus):
        reasons.append(f"HIP sees {hip_devices} device(s), sysfs {len(gpus)}")
    available = bool(devices) and not reasons
    return BackendReport(
        backend="amd", available=available, devices=tuple(devices), components=tuple(comps),
        reason="; ".join(reasons),
        verified_on="not verified on AMD hardware (loaders, parsers and hiprtc probe compilation tested without a "
                    "GPU; gpu_metrics layouts and the 1.9 encoding checked against the kernel headers only)",
        sensors=_report_sensors(in_use),
    )


def _power_mode_of(gpu: Any) -> str:
    """The power mode the backend would open on this GPU (default arguments), or why none opens."""
    try:
        with warnings.catch_warnings():
            # A gpu_metrics table of an unknown revision falls back to hwmon
            # with a warning: the report names the mode instead.
            warnings.simplefilter("ignore", RuntimeWarning)
            return power_semantics(_amd_sysfs().power_source(gpu)).mode
    except (_core.DeviceUnavailableError, _core.GpuMetricsFormatError) as exc:
        return f"none ({str(exc).splitlines()[0]})"


def _report_sensors(in_use: SensorSemantics | None) -> tuple[SensorSemantics, ...]:
    """Every AMD power mode, the one in use (else the default) first."""
    first = in_use or AMD_SENSORS[DEFAULT_SENSOR]
    return (first, *(s for s in AMD_SENSORS.values() if s.mode != first.mode))
