"""One way to open a device: :func:`open_device` (campaigns, the CLI) and the recorder's sources.

A device is named by one string everywhere, as zeus's ``get_gpus`` and
pyvisa's ``open_resource`` do: ``"sim"`` (the simulated GPU in virtual time),
``"sim-live"`` (in real time), ``"nvidia:N"`` or ``"nvidia:N:MODE"`` (CUDA
device N, an NVML power mode), ``"amd:N"`` or ``"amd:N:CHANNEL"`` (HIP device
N, ``energy`` or ``socket``): the kinds of the device registry
(``backends/_registry.py``), whose :func:`parse_device` reads such a string.
:func:`open_device` builds the backend a campaign drives, through the kind's
entry; the recorder opens only the power source of the same device
(:func:`resolve_device`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, cast

from fingrav_native import _core
from fingrav_native.app._counter_recorder import AMD_COUNTER_QUANTUM_J, NVML_COUNTER_QUANTUM_J, CounterSpec
from fingrav_native.backends import _amd_sysfs as amd_sysfs
from fingrav_native.backends._amd_sysfs import AmdChannel
from fingrav_native.backends._base import Backend, LivePower, is_backend, protocol_members
from fingrav_native.backends._nvidia import match_nvml_device
from fingrav_native.backends._nvidia_sensors import NvmlMode, nvml_sensor
from fingrav_native.backends._registry import DEVICES, device_forms
from fingrav_native.backends._registry import DeviceSpec as DeviceSpec  # re-exported: what parse_device returns
from fingrav_native.backends._registry import parse_device as parse_device  # re-exported: the drivers read it here
from fingrav_native.backends._sim import SimBackend
from fingrav_native.sensors._model import SensorModel
from fingrav_native.sim._device import SimGPU
from fingrav_native.sim._shared import SharedSimGPU


@dataclass(frozen=True)
class _Resolved:
    source: _core.PowerSource
    sensor: Optional[SensorModel]
    # Builds the sensor once the period is measured (NVML reports none for some modes).
    sensor_for_period: Optional[Callable[[float], SensorModel]]
    description: str
    # The device's energy counter, where it has one (for the energy closure).
    counter: Optional[CounterSpec] = None


def open_device(device: Any = "sim", *, seed: Optional[int] = None, **options: Any) -> Backend:
    """Open a device for a campaign: the one resolver the CLI, :func:`profile` and the recorder share.

    Parameters
    ----------
    device : str or Backend
        A device string of a kind in the device registry
        (:func:`~fingrav_native.backends._registry.parse_device`: ``"sim"``,
        ``"sim-live"``, ``"nvidia:0"``, ``"nvidia:0:instant"``, ``"amd:0"``,
        ``"amd:0:socket"``), or a backend already made, returned as it is.
    seed : int, optional
        The simulator's seed (simulated kinds only; default the string's
        number, else 0).
    **options
        Passed to the backend's constructor (``period_ns``, ``sensor``, ...).

    Returns
    -------
    Backend
        What the kind's entry opens:
        :class:`~fingrav_native.backends.SimBackend`,
        :class:`~fingrav_native.backends.LiveSimBackend`,
        :class:`~fingrav_native.backends.NvidiaBackend`,
        :class:`~fingrav_native.backends.AmdBackend`, or a registered one.

    Raises
    ------
    ValueError
        An unknown device string or a negative seed.
    LibraryNotFoundError, DeviceUnavailableError
        The vendor library or the device is missing (the message names which
        and how to get it).

    Notes
    -----
    FinGraV needs, per device, a power logger, a device clock and GPU-side
    execution markers (paper Section IV-A); a backend provides the three.
    """
    if not isinstance(device, str):
        if is_backend(device):
            return device
        missing = [name for name in protocol_members(Backend) if not hasattr(device, name)]
        if len(missing) < len(protocol_members(Backend)):
            # Part of the protocol is there: name what a backend would still need.
            raise ValueError(f"device={device!r}: a backend must offer every member of the Backend protocol; "
                             f"lacks {', '.join(missing)}")
        raise ValueError(f"device={device!r}: must be a backend or a device string; one of {device_forms()}")
    spec = parse_device(device)
    kind = DEVICES[spec.vendor]
    if kind.simulated:
        s = spec.index if seed is None else seed
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ValueError(f"seed={seed!r}: must be an int >= 0")
        return kind.open(s, None, **options)
    if seed is not None:
        raise ValueError(f"seed={seed!r}: only a simulated device takes a seed (device={device!r})")
    return kind.open(spec.index, spec.mode, **options)


def _nvml_device(index: int, mode: str) -> _Resolved:
    """NVML power for CUDA device ``index`` (as torch numbers it), as NvidiaBackend opens it."""
    # ``mode`` was checked by parse_device, the only way here.
    for name in ("cuda_devices", "nvml_devices", "NvmlPowerSource"):
        if not hasattr(_core, name):
            raise RuntimeError(f"device='nvidia:{index}': this build of fingrav_native has no NVML support "
                               f"(_core.{name} is missing); rebuild from a source tree that includes it")
    # CUDA's numbering (CUDA_VISIBLE_DEVICES, what torch calls cuda:N) is
    # matched to NVML's by UUID: NVML numbers every GPU in PCI order.
    cuda = _core.cuda_devices()
    if index >= len(cuda):
        raise _core.DeviceUnavailableError(f"device='nvidia:{index}': the CUDA driver sees {len(cuda)} device(s) "
                                           "(indices follow CUDA_VISIBLE_DEVICES)")
    nvml_index = match_nvml_device(dict(cuda[index]), [dict(d) for d in _core.nvml_devices()])
    source = _core.NvmlPowerSource(nvml_index, mode)
    info = source.info
    documented = bool(source.window_documented)

    def sensor(period_ns: float) -> SensorModel:
        return nvml_sensor(cast(NvmlMode, mode), period_ns, float(info.window_ns), documented)

    return _Resolved(source, None, sensor,
                     f"{cuda[index]['name']} (CUDA {index}, NVML {nvml_index}, PCI {cuda[index]['pci_bus_id']}, "
                     f"NVML {mode})", _nvml_counter(nvml_index, mode, source))


def _nvml_counter(nvml_index: int, mode: str, source: Any) -> Optional[CounterSpec]:
    """NVML's total-energy counter (mJ; stamped by NVML where its field API answers), where the GPU has one."""
    info = dict(source.device_info)
    if "energy" not in info.get("modes", ()):
        return None
    stamped = bool(info.get("energy_from_field"))
    if mode == "energy":  # the logs are the counter's steps
        return CounterSpec(None, NVML_COUNTER_QUANTUM_J, str(source.scope), stamped)
    try:
        counter = _core.NvmlPowerSource(nvml_index, "energy")
    except (RuntimeError, ValueError):
        return None  # the closure needs it; the recording does not
    return CounterSpec(counter, NVML_COUNTER_QUANTUM_J, str(counter.scope), stamped)


def counter_of_source(source: _core.PowerSource) -> Optional[CounterSpec]:
    """The energy counter of the GPU a backend's power source reads (NVML's, AMD's), None for any other source."""
    nvml = getattr(_core, "NvmlPowerSource", None)
    if nvml is not None and isinstance(source, nvml):
        return _nvml_counter(int(source.device), str(source.mode), source)
    return amd_counter(source)


def amd_counter(source: _core.PowerSource) -> Optional[CounterSpec]:
    """The ``energy_accumulator`` of the GPU a ``gpu_metrics`` source reads (2^-16 J, firmware-stamped).

    None for hwmon, which has no counter. With the energy channel the logs
    are the counter's steps; with socket power a second source reads it.
    """
    if not isinstance(source, _core.GpuMetricsSource):
        return None
    if source.channel == "energy":
        return CounterSpec(None, AMD_COUNTER_QUANTUM_J, "socket", True)
    try:
        counter = _core.GpuMetricsSource(source.path, "energy", source.clock)
    except (RuntimeError, ValueError):
        return None
    return CounterSpec(counter, AMD_COUNTER_QUANTUM_J, "socket", True)


def _amd_device(index: int, mode: Optional[str]) -> _Resolved:
    """``gpu_metrics`` (else hwmon) power of AMD GPU ``index`` in HIP's order, as AmdBackend opens it."""
    # HIP (and torch on ROCm) numbers GPUs in KFD topology order, as AmdBackend does.
    gpus = sorted((g for g in amd_sysfs.find_amd_gpus() if g.kfd_node is not None), key=lambda g: int(g.kfd_node or 0))
    if not gpus:
        raise _core.DeviceUnavailableError(
            f"device='amd:{index}': no AMD GPU bound to amdgpu with a KFD node under /sys; load the amdgpu "
            "driver (ROCm) on a machine with an AMD GPU")
    if index >= len(gpus):
        raise _core.DeviceUnavailableError(f"device='amd:{index}': this machine has {len(gpus)} AMD GPU(s)")
    gpu = gpus[index]
    source = amd_sysfs.power_source(gpu, channel=cast(AmdChannel, mode or "energy"))  # checked above
    # AmdBackend declares no sensor model either: characterise it before deconvolving.
    return _Resolved(source, None, None, f"{gpu.name} (HIP {index}, {gpu.pci_address})", amd_counter(source))


def resolve_device(device: Any) -> _Resolved:
    if isinstance(device, _core.PowerSource):
        return _Resolved(device, None, None, f"{device.info.name} ({device.info.clock_domain})")
    if isinstance(device, SimGPU):
        if not device.realtime:
            raise ValueError("device: a virtual-time SimGPU cannot be recorded live (its clock does not follow "
                             "the host's); create it with SimGPU(realtime=True)")
        # depth 8: a drain stall of up to 8 logger periods loses no log.
        return _Resolved(device.power_source(depth=8), device.sensor, None,
                         f"SimGPU (real time, seed {int(device.params['seed'])})")
    if isinstance(device, SharedSimGPU):
        # The GPU a simulated application runs on in another process (fingrav run --device sim).
        return _Resolved(device.power_source(), device.sensor, None, f"SharedSimGPU ({device.path})")
    if isinstance(device, LivePower):  # LiveSimBackend, NvidiaBackend, AmdBackend
        caps = getattr(device, "capabilities")
        return _Resolved(device.power_source, caps.sensor, None, str(caps.device), counter_of_source(device.power_source))
    if isinstance(device, SimBackend):
        raise ValueError("device: a virtual-time SimBackend cannot be recorded live; use LiveSimBackend "
                         "or SimGPU(realtime=True)")
    if isinstance(device, str):
        return _resolve_string(device)
    raise ValueError(f"device={device!r}: must be a PowerSource, a real-time SimGPU, a SharedSimGPU, a "
                     f"backend with a live power source, or a device string: "
                     f"{device_forms(lambda k: k.live != 'none')}")


#: The kinds (device registry, ``live="source"``) whose power the recorder opens without the backend, so no
#: compute context is made: the vendor's power source, with what it says of its sensor and energy counter.
_SOURCE_OPENERS: dict[str, Callable[[int, Optional[str]], _Resolved]] = {
    "nvidia": lambda index, mode: _nvml_device(index, mode or "samples"),
    "amd": _amd_device,
}


def _resolve_string(device: str) -> _Resolved:
    """What the recorder reads for a device string, as its kind's registry entry says."""
    spec = parse_device(device)
    kind = DEVICES[spec.vendor]
    if kind.live == "none":
        raise ValueError(f"device={device!r}: {kind.not_live}")
    if kind.live == "backend" or spec.vendor not in _SOURCE_OPENERS:
        # The backend opened, its live power source read, as for a backend passed in (LiveSimBackend).
        return resolve_device(open_device(device))
    try:
        return _SOURCE_OPENERS[spec.vendor](spec.index, spec.mode)
    except (_core.LibraryNotFoundError, _core.DeviceUnavailableError) as exc:
        # Same type, with which device string led here; the loader's text
        # already names the library paths tried and what to install.
        raise type(exc)(f"device={device!r}: {exc}") from exc
