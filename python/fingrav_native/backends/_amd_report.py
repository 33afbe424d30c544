"""What the AMD backend finds on this machine (``fingrav devices``), and why anything is missing."""

from __future__ import annotations

import os
import warnings
from typing import Any

from fingrav_native import _core
from fingrav_native.backends import _amd_sysfs as amd_sysfs
from fingrav_native.backends._amd import KFD_PATH, gpus_in_hip_order
from fingrav_native.backends._amd_sensors import AMD_SENSORS, DEFAULT_SENSOR, power_semantics
from fingrav_native.backends._report import BackendReport, Component, DeviceEntry
from fingrav_native.sensors._semantics import SensorSemantics


def report(sysfs_root: str = "/sys", kfd_path: str = KFD_PATH) -> BackendReport:
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
        gpus = gpus_in_hip_order(sysfs_root)
        comps.append(Component("amdgpu GPUs in sysfs", bool(gpus),
                               f"{len(gpus)} under {sysfs_root}/class/drm" if gpus else
                               f"no AMD GPU bound to amdgpu with a KFD node under {sysfs_root}"))
    except ImportError as exc:
        comps.append(Component("fingrav_native.backends", False, f"not importable: {exc}"))
    if not gpus:
        reasons.append("no AMD GPU found")

    if os.path.exists(kfd_path):
        ok = os.access(kfd_path, os.R_OK | os.W_OK)
        comps.append(Component(kfd_path, ok, "present, read/write" if ok else
                               "present but not writable by this user: join the 'render' group"))
    else:
        comps.append(Component(kfd_path, False, "absent: the amdgpu driver (KFD) is not loaded or there is no AMD GPU"))

    hip_devices = _hip_components(comps, reasons)

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


def _hip_components(comps: list[Component], reasons: list[str]) -> int:
    """The HIP runtime and hiprtc, each appended to ``comps`` (why one is missing to ``reasons``); HIP's devices."""
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
    return hip_devices


def _power_mode_of(gpu: Any) -> str:
    """The power mode the backend would open on this GPU (default arguments), or why none opens."""
    try:
        with warnings.catch_warnings():
            # A gpu_metrics table of an unknown revision falls back to hwmon
            # with a warning: the report names the mode instead.
            warnings.simplefilter("ignore", RuntimeWarning)
            return power_semantics(amd_sysfs.power_source(gpu)).mode
    except (_core.DeviceUnavailableError, _core.GpuMetricsFormatError) as exc:
        return f"none ({str(exc).splitlines()[0]})"


def _report_sensors(in_use: SensorSemantics | None) -> tuple[SensorSemantics, ...]:
    """Every AMD power mode, the one in use (else the default) first."""
    first = in_use or AMD_SENSORS[DEFAULT_SENSOR]
    return (first, *(s for s in AMD_SENSORS.values() if s.mode != first.mode))
