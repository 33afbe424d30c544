"""What the NVIDIA backend finds on this machine (``fingrav devices``): libraries, devices, power modes.

Never raises for a missing GPU or library: each component says what was found or why it is
missing, and each power mode what one of its logs is and where each figure comes from.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional, cast

from fingrav_native import _core
from fingrav_native.backends._nvidia import match_nvml_device, nvml_attr
from fingrav_native.backends._nvidia_sensors import (
    NVML_ARCH_AMPERE,
    NVML_MODES,
    NvmlMode,
    mode_semantics,
    published_window,
)
from fingrav_native.backends._report import BackendReport, Component, DeviceEntry
from fingrav_native.sensors._semantics import SensorSemantics

_VERIFIED_ON = ("not yet verified on NVIDIA hardware: built to nvml.h and cuda.h and tested on fakes "
                "(run bench/nvidia_validate.py on one)")


def _brief(exc: Exception) -> str:
    """The first line of a loader's error: the reason line keeps it, the component keeps the paths tried."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return first[: -len("; tried:")] if first.endswith("; tried:") else first


def _device_sensors(nvml_index: int, modes: list[str], dev: dict[str, Any]) -> tuple[SensorSemantics, ...]:
    """Per supported mode of one NVML device, what is known of it (a source is opened for each)."""
    out: list[SensorSemantics] = []
    arch = dev.get("architecture")
    for mode in modes:
        try:
            src = nvml_attr("NvmlPowerSource")(nvml_index, mode)
            # The modes come from the NVML source itself, so they are NVML modes; the window is the board
            # family's table's (documented, measured on that board, or assumed).
            pw = published_window(cast(NvmlMode, mode), str(dev.get("name", "")), dev.get("compute_capability"),
                                  None if arch is None else int(arch) >= NVML_ARCH_AMPERE,
                                  float(src.info.native_period_ns))
            out.append(mode_semantics(cast(NvmlMode, mode), pw.window_ns, pw.provenance != "assumed", pw))
            del src
        except RuntimeError as exc:  # the mode failed between the probe and now: say so
            out.append(SensorSemantics(mode=f"nvml {mode}", semantics=f"could not open: {exc}"))
    return tuple(out)


#: What the memory channel is, and how far it is verified.
MEMORY_UNVERIFIED = "unverified on hardware: tested on the fake NVML only"


def memory_power_line(nvml_device: dict[str, Any]) -> str:
    """Whether one NVML device's power logs carry GPU memory power, said once for the device.

    Parameters
    ----------
    nvml_device : dict
        One entry of ``nvml_devices()`` (``memory_modes``, ``memory_unsupported``).

    Returns
    -------
    str
        The field modes that read ``NVML_POWER_SCOPE_MEMORY`` beside the total (the profiles' memory and
        rest curves, CompPow's compute / memory split), or why the channel is absent: NVML's own answer
        (a driver older than the scope, a GPU without it). A build whose NVML layer predates the scope
        says so.
    """
    if "memory_modes" not in nvml_device:
        return "absent: this build of fingrav_native does not read NVML's memory scope"
    modes = [str(m) for m in nvml_device.get("memory_modes", ())]
    if modes:
        return (f"GPU memory (NVML_POWER_SCOPE_MEMORY) beside the total in mode(s) {', '.join(modes)}; "
                f"profiles carry memory and rest (total minus memory); {MEMORY_UNVERIFIED}")
    # The two power fields answer alike at one scope: their reasons differ by the field's name only.
    why = sorted({re.sub(r"NVML_FI_DEV_POWER_(INSTANT|AVERAGE)", "NVML_FI_DEV_POWER_INSTANT/AVERAGE", str(w))
                  for w in dict(nvml_device.get("memory_unsupported", {})).values() if w})
    return "absent (no memory channel, never zeros): " + ("; ".join(why) or "NVML gave no reason")


def _cuda_side(components: list[Component], reasons: list[str]) -> list[dict[str, Any]]:
    """The CUDA driver library and its devices, as components; returns the devices."""
    cuda_devs: list[dict[str, Any]] = []
    try:
        components.append(Component("CUDA driver (libcuda)", True, _core.cuda_library_path()))
        try:
            cuda_devs = [dict(d) for d in _core.cuda_devices()]
            version = _core.cuda_driver_version()
            components.append(Component("CUDA devices", bool(cuda_devs),
                                        f"{len(cuda_devs)} device(s), driver CUDA {version // 1000}.{version % 1000 // 10}"))
            if not cuda_devs:
                reasons.append("the CUDA driver sees no device")
        except RuntimeError as exc:
            components.append(Component("CUDA devices", False, str(exc)))
            reasons.append(f"CUDA: {exc}")
    except RuntimeError as exc:
        components.append(Component("CUDA driver (libcuda)", False, str(exc)))
        reasons.append(f"CUDA: {_brief(exc)}")
    return cuda_devs


def _nvml_side(components: list[Component], reasons: list[str]) -> list[dict[str, Any]]:
    """The NVML library and its devices, as components; returns the devices."""
    nvml_devs: list[dict[str, Any]] = []
    nvml_path = getattr(_core, "nvml_library_path", None)
    if nvml_path is None:
        components.append(Component("NVML (libnvidia-ml)", False,
                                    "this build of fingrav_native has no NVML support"))
        reasons.append("no NVML support in this build")
        return nvml_devs
    try:
        components.append(Component("NVML (libnvidia-ml)", True, str(nvml_path())))
        try:
            nvml_devs = list(nvml_attr("nvml_devices")())
            components.append(Component("NVML devices", bool(nvml_devs), f"{len(nvml_devs)} device(s)"))
        except RuntimeError as exc:
            components.append(Component("NVML devices", False, str(exc)))
            reasons.append(f"NVML: {exc}")
    except RuntimeError as exc:
        components.append(Component("NVML (libnvidia-ml)", False, str(exc)))
        reasons.append(f"NVML: {_brief(exc)}")
    return nvml_devs


def _device_entry(d: dict[str, Any], nvml_devs: list[dict[str, Any]],
                  per_device: dict[int, tuple[SensorSemantics, ...]]) -> tuple[DeviceEntry, bool]:
    """One CUDA device with its NVML match and power modes (recorded in ``per_device``); and whether it is usable."""
    details: dict[str, Any] = {k: d[k] for k in ("pci_bus_id", "uuid", "multiprocessors", "total_memory")}
    details["compute_capability"] = "{}.{}".format(*d["compute_capability"])
    idx: Optional[int]
    try:
        idx = match_nvml_device(d, nvml_devs) if nvml_devs else None
    except RuntimeError as exc:
        idx = None
        details["nvml"] = str(exc)
    if idx is not None:
        details["nvml_index"] = idx
        modes = next((n.get("modes") for n in nvml_devs if int(n["index"]) == idx), None)
        if modes is not None:
            details["power_modes"] = list(modes)
            nd = next(n for n in nvml_devs if int(n["index"]) == idx)
            # Grace Hopper: the field modes read the module (GPU, Grace CPU, memory) unless told otherwise.
            if "c2c_enabled" in nd:
                details["c2c_enabled"] = nd["c2c_enabled"]
                details["power_scopes"] = {k: list(v) for k, v in dict(nd.get("field_scopes", {})).items()}
            details["memory_power"] = memory_power_line(nd)
            per_device[int(d["index"])] = _device_sensors(idx, [str(m) for m in modes], nd)
    return DeviceEntry(int(d["index"]), str(d["name"]), details), idx is not None


def _report_sensors(per_device: dict[int, tuple[SensorSemantics, ...]]) -> tuple[SensorSemantics, ...]:
    """Per mode, what a log is and whether each figure is documented, measured or assumed.

    One set when every GPU agrees (the usual node), else one per device; without a GPU, the
    rules a GPU would get.
    """
    if len(set(per_device.values())) == 1:
        return next(iter(per_device.values()))
    if per_device:
        return tuple(dataclasses.replace(m, mode=f"{m.mode} on [{i}]") for i, v in per_device.items() for m in v)
    return tuple(mode_semantics(mode, None, None) for mode in NVML_MODES)


def report() -> BackendReport:
    """What the NVIDIA backend finds on this machine (``fingrav devices``).

    Returns
    -------
    BackendReport
        Components: the CUDA driver library, its devices, NVML and its
        devices, each with the path found or the reason it is missing.

    Notes
    -----
    Never raises for a missing GPU or library: the report says why (paper
    Section IV-B needs power logs and GPU-side timestamps; both must be here).
    """
    components: list[Component] = []
    reasons: list[str] = []
    cuda_devs = _cuda_side(components, reasons)
    nvml_devs = _nvml_side(components, reasons)
    entries: list[DeviceEntry] = []
    per_device: dict[int, tuple[SensorSemantics, ...]] = {}
    usable = 0
    for d in cuda_devs:
        entry, matched = _device_entry(d, nvml_devs, per_device)
        entries.append(entry)
        usable += matched
    if cuda_devs and nvml_devs and not usable:
        reasons.append("no CUDA device matched an NVML device")
    available = usable > 0
    return BackendReport(
        backend="nvidia",
        available=available,
        devices=tuple(entries),
        components=tuple(components),
        reason="" if available else "; ".join(reasons) or "no usable NVIDIA GPU",
        verified_on=_VERIFIED_ON,
        sensors=_report_sensors(per_device),
    )
