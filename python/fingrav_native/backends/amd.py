"""The AMD backend: FinGraV on a real AMD GPU (ROCm), loaded at run time.

Three things make a FinGraV run (paper Section IV-A): a power logger, GPU-side
markers of each execution, and a map from the GPU's clock to host time.

* power: the firmware's ``gpu_metrics`` table (1 ms logger on MI300X), or
  hwmon, sampled by the C++ :class:`~fingrav_native.Sampler` thread
  (:mod:`fingrav_native.backends.amd_sysfs`);
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

import os
import time
import warnings
from typing import Any, Sequence, Union

import numpy as np

from fingrav_native import _core
from fingrav_native.backends import amd_sysfs
from fingrav_native.backends.base import (
    Capabilities,
    HostRelease,
    LivePower,
    RunRecord,
    drain_all,
    marker_records,
    wait_for_idle,
)
from fingrav_native.backends.report import BackendReport, Component, DeviceEntry
from fingrav_native.backends.workloads import Workload

__all__ = ["AmdBackend", "report", "AmdKernelSpec"]

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
        Sampler period (default 100 us: ten polls per 1 ms log).
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
        self._logger_period = float(p.native_period_ns or 1_000_000)
        self._caps = Capabilities(
            name="amd",
            device=f"{gpu.name} ({self.arch}, {gpu.pci_address})",
            logger_period_ns=self._logger_period,
            logger_window_ns=float(p.window_ns),
            logger_clock=p.clock_domain,
            device_tick_ns=float(tick),
            gpu_markers=True,
            marker_err_ns=float(marker_err_ns),
            channels=tuple(c for i, c in enumerate(_core.CHANNELS) if p.channel_mask & (1 << i)),
            virtual_time=False,
            logger_tick_ns=float(p.tick_ns),
        )
        self._baseline_w = self._idle_level(50_000_000)

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
        if len(s) == 0:
            raise RuntimeError(f"{self._power.info.name}: no power logs in {ns / 1e6:.0f} ms of idle")
        return float(np.nanmean(s["total"]))

    def wait_idle(self) -> int:
        """Sample the idle GPU until its logged power is back near the idle baseline.

        Returns
        -------
        int
            Nanoseconds waited.

        Notes
        -----
        Chunks of 20 logger periods until one's mean power is within
        ``idle_tolerance`` of the baseline measured at construction (or
        ``max_idle_ns`` passed). Launches then fall at random phases of the
        free-running logger, which FinGraV relies on (paper Section IV-A).
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
        periods after, as logs are published after they are sampled.
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
    GPU, ``/dev/kfd`` for the clock, the HIP runtime and hiprtc for markers.
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
        devices.append(DeviceEntry(i, g.name, details))
    if gpus and hip_devices != len(gpus):
        reasons.append(f"HIP sees {hip_devices} device(s), sysfs {len(gpus)}")
    available = bool(devices) and not reasons
    return BackendReport(
        backend="amd", available=available, devices=tuple(devices), components=tuple(comps),
        reason="; ".join(reasons),
        verified_on="not verified on AMD hardware (loaders, parsers and hiprtc probe compilation tested without a GPU)",
    )
