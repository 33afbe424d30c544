"""AMD GPUs as the amdgpu kernel driver shows them in sysfs.

Finds each GPU bound to amdgpu, its power files (the binary ``gpu_metrics``
table and the hwmon ``power1_*`` files) and its KFD topology node, and opens
the right power source for it. Everything is read from a sysfs root that
tests point at a fake tree.

The power logger is the one the FinGraV paper uses on MI300X (a 1 ms
firmware logger, paper Section III and Section IV-A); ``gpu_metrics`` is its
public face in the kernel driver, which since December 2025 serves one cached
table for 5 ms by default: the period a reader sees is the driver's, and the
backend measures it (:func:`fingrav_native.backends.measure_logger_period`).
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fingrav_native import _core
from fingrav_native._checks import file_path

logger = logging.getLogger(__name__)

AMD_VENDOR_ID = 0x1002


#: Which power file to try first.
AmdPrefer = Literal["gpu_metrics", "hwmon"]


#: A gpu_metrics power channel: derived from the energy accumulator, or the firmware's socket power.
AmdChannel = Literal["energy", "socket"]


_CARD_RE = re.compile(r"^card(\d+)$")


_PCI_RE = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


_NODE_RE = re.compile(r"^\d+$")


_HWMON_RE = re.compile(r"^hwmon(\d+)$")


@dataclass(frozen=True)
class AmdGpu:
    """One AMD GPU bound to the amdgpu driver.

    Attributes
    ----------
    card : int
        The DRM card number (``/sys/class/drm/card<N>``).
    pci_address : str
        PCI address, ``domain:bus:device.function`` (e.g. ``"0000:c1:00.0"``).
    device_id : int
        PCI device id (e.g. ``0x74a1`` for MI300X).
    gpu_metrics : str or None
        Path of the binary ``gpu_metrics`` file, if the driver exposes one.
    hwmon_power : str or None
        Path of hwmon ``power1_average`` (preferred) or ``power1_input``.
    kfd_node : int or None
        KFD topology node number of this GPU (the HSA agent order).
    kfd_gpu_id : int or None
        KFD ``gpu_id`` of that node (what the KFD clock-counter ioctl takes).
    gfx_target_version : int or None
        KFD ``gfx_target_version`` (e.g. ``90402`` for gfx942).
    name : str
        ``product_name`` where the driver provides it, else a name built from
        the device id.
    """

    card: int
    pci_address: str
    device_id: int
    gpu_metrics: str | None
    hwmon_power: str | None
    kfd_node: int | None
    kfd_gpu_id: int | None
    gfx_target_version: int | None
    name: str


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _read_int(path: Path, base: int = 0) -> int | None:
    text = _read_text(path)
    if text is None or text == "":
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def _pci_address(device: Path) -> str | None:
    # uevent's PCI_SLOT_NAME is the driver core's own statement of the
    # address; the symlink target's name is the same where uevent is absent.
    uevent = _read_text(device / "uevent")
    if uevent is not None:
        for line in uevent.splitlines():
            if line.startswith("PCI_SLOT_NAME="):
                slot = line.split("=", 1)[1].strip()
                if _PCI_RE.match(slot):
                    return slot.lower()
    name = os.path.basename(os.path.realpath(device))
    return name.lower() if _PCI_RE.match(name) else None


def _hwmon_power(device: Path) -> str | None:
    hwmon = device / "hwmon"
    try:
        entries = sorted(
            (int(m.group(1)), e) for e in os.listdir(hwmon) if (m := _HWMON_RE.match(e)) is not None
        )
    except OSError:
        return None
    # amdgpu exposes power1_average (firmware-averaged) on most GPUs and
    # power1_input (instantaneous) on newer ones; the average is preferred
    # wherever it exists (the file most GPUs have), power1_input only where it is missing.
    for filename in ("power1_average", "power1_input"):
        for _, entry in entries:
            candidate = hwmon / entry / filename
            if candidate.is_file():
                return str(candidate)
    return None


def _kfd_nodes(sysfs_root: Path) -> list[tuple[int, dict[str, int], int | None]]:
    nodes_dir = sysfs_root / "class" / "kfd" / "kfd" / "topology" / "nodes"
    try:
        names = sorted((n for n in os.listdir(nodes_dir) if _NODE_RE.match(n)), key=int)
    except OSError:
        return []
    out = []
    for n in names:
        text = _read_text(nodes_dir / n / "properties")
        if text is None:
            continue
        props: dict[str, int] = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                try:
                    props[parts[0]] = int(parts[1])
                except ValueError:
                    continue
        out.append((int(n), props, _read_int(nodes_dir / n / "gpu_id", 10)))
    return out


def find_amd_gpus(sysfs_root: str = "/sys") -> list[AmdGpu]:
    """List the AMD GPUs bound to the amdgpu driver, with their power files.

    Parameters
    ----------
    sysfs_root : str
        Where sysfs is mounted; tests pass a fake tree.

    Returns
    -------
    list of AmdGpu
        Sorted by card number; empty when there is none (not an error: the
        caller decides whether a missing GPU is one).

    Notes
    -----
    1. Every ``<root>/class/drm/card<N>/device`` whose ``vendor`` is 0x1002
       and whose ``driver`` link names ``amdgpu`` is one GPU (connectors such
       as ``card0-DP-1`` and other vendors' cards are skipped).
    2. Its power files: ``device/gpu_metrics`` and the first hwmon folder's
       ``power1_average`` (else ``power1_input``).
    3. Its KFD node: the ``<root>/class/kfd/kfd/topology/nodes/<n>`` whose
       ``properties`` carry the same PCI ``domain`` and
       ``location_id = bus << 8 | device << 3 | function``; ``gpu_id`` and
       ``gfx_target_version`` come from that node. The KFD numbering is the
       order the runtime's GPU agents follow, which the clock sync of paper
       Section IV-A needs to read the right GPU's counter.
    """
    root = Path(file_path(sysfs_root, "sysfs_root"))
    drm = root / "class" / "drm"
    try:
        entries = os.listdir(drm)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise ValueError(f"sysfs_root={os.fspath(sysfs_root)!r}: not a directory (where sysfs is mounted)") from None
    kfd = _kfd_nodes(root)
    gpus = []
    for entry in entries:
        m = _CARD_RE.match(entry)
        if m is None:
            continue
        device = drm / entry / "device"
        if _read_int(device / "vendor", 16) != AMD_VENDOR_ID:
            continue
        try:
            driver = os.path.basename(os.readlink(device / "driver"))
        except OSError:
            logger.debug("%s: an AMD device bound to no driver, skipped", entry)
            continue
        if driver != "amdgpu":
            logger.debug("%s: an AMD device bound to %s, not amdgpu, skipped", entry, driver)
            continue
        pci = _pci_address(device)
        device_id = _read_int(device / "device", 16)
        if pci is None or device_id is None:
            logger.debug("%s: no readable PCI address or device id, skipped", entry)
            continue
        gm = device / "gpu_metrics"
        kfd_node = kfd_gpu_id = gfx = None
        pm = _PCI_RE.match(pci)
        assert pm is not None  # _pci_address only returns matching names
        domain = int(pm.group(1), 16)
        location = (int(pm.group(2), 16) << 8) | (int(pm.group(3), 16) << 3) | int(pm.group(4))
        for node, props, gpu_id in kfd:
            if props.get("location_id") == location and props.get("domain", 0) == domain and gpu_id:
                kfd_node, kfd_gpu_id = node, gpu_id
                gfx = props.get("gfx_target_version")
                break
        product = _read_text(device / "product_name")
        gpus.append(
            AmdGpu(
                card=int(m.group(1)),
                pci_address=pci,
                device_id=device_id,
                gpu_metrics=str(gm) if gm.is_file() else None,
                hwmon_power=_hwmon_power(device),
                kfd_node=kfd_node,
                kfd_gpu_id=kfd_gpu_id,
                gfx_target_version=gfx,
                name=product if product else f"AMD GPU {device_id:#06x}",
            )
        )
    gpus.sort(key=lambda g: g.card)
    return gpus


def read_gpu_metrics(path: str) -> dict[str, Any]:
    """Read and parse one ``gpu_metrics`` table.

    Parameters
    ----------
    path : str
        A ``gpu_metrics`` file (``/sys/class/drm/card<N>/device/gpu_metrics``).

    Returns
    -------
    dict
        As :func:`fingrav_native._core.parse_gpu_metrics` returns it: socket
        power (W), energy accumulator (raw and J), ``firmware_timestamp``
        (``firmware_tick_ns`` ticks: 10 ns), ``system_clock_counter_ns``
        (boottime), per-XCC gfxclk; None where the firmware leaves a field
        unset. Formats 1.4 to 1.8 are the kernel's fixed structs; 1.9 is
        decoded by its attribute encodings (``attribute_count``,
        ``encoding_bytes``).

    Raises
    ------
    DeviceUnavailableError
        The file is missing or unreadable.
    GpuMetricsFormatError
        The table is of a revision or size this parser does not know, or a
        1.9 table whose attributes are malformed.

    Notes
    -----
    The table carries the firmware's own timestamp, which is what lets power
    logs be placed on the host timeline (paper Section IV-A). The layouts
    are those of ``drivers/gpu/drm/amd/include/kgd_pp_interface.h``
    (``struct gpu_metrics_v1_4`` .. ``v1_8``, ``AMDGPU_METRICS_ENC_ATTR``)
    and, for 1.9, of the driver's ``DECLARE_SMU_METRICS_CLASS``
    (``drivers/gpu/drm/amd/pm/swsmu/smu_cmn.h``).
    """
    path = file_path(path, "path")
    try:
        with open(path, "rb", buffering=0) as f:
            data = f.read(65536)
    except OSError as e:
        raise _core.DeviceUnavailableError(
            f"{path}: {e.strerror}. The amdgpu kernel driver must be loaded and bound to the GPU, "
            "and the file readable by this user."
        ) from e
    return dict(_core.parse_gpu_metrics(data))


def power_source(gpu: AmdGpu, prefer: AmdPrefer = "gpu_metrics", channel: AmdChannel = "energy") -> _core.PowerSource:
    """Open the power source for one GPU.

    Parameters
    ----------
    gpu : AmdGpu
        From :func:`find_amd_gpus`.
    prefer : {"gpu_metrics", "hwmon"}
        Which file to try first; the other is the fallback.
    channel : {"energy", "socket"}
        For ``gpu_metrics``: power derived from the energy accumulator
        (finer than the integer-watt socket power), or that socket power.

    Returns
    -------
    PowerSource
        A :class:`GpuMetricsSource` or a :class:`HwmonPowerSource`, ready for a
        :class:`Sampler`.

    Raises
    ------
    DeviceUnavailableError
        Neither file exists or opens; the message lists what was looked for.
    GpuMetricsFormatError
        ``gpu_metrics`` has an unknown layout and there is no hwmon fallback.

    Notes
    -----
    1. Try the preferred file, then the other.
    2. A ``gpu_metrics`` table of an unsupported revision falls back to hwmon
       with a RuntimeWarning that names the revision (never a misread).

    The energy channel exists because the paper's profiles resolve power
    differences between sub-millisecond kernels (paper Section IV-A) that
    integer watts would round away.
    """
    if not isinstance(gpu, AmdGpu):
        raise ValueError(f"gpu={gpu!r}: must be an AmdGpu from find_amd_gpus()")
    if prefer not in ("gpu_metrics", "hwmon"):
        raise ValueError(f"prefer={prefer!r}: must be 'gpu_metrics' or 'hwmon'")
    if channel not in ("energy", "socket"):
        raise ValueError(f"channel={channel!r}: must be 'energy' or 'socket'")
    order = ["gpu_metrics", "hwmon"] if prefer == "gpu_metrics" else ["hwmon", "gpu_metrics"]
    tried: list[str] = []
    format_error: Exception | None = None
    for kind in order:
        if kind == "gpu_metrics":
            if gpu.gpu_metrics is None:
                tried.append(f"gpu_metrics: no file in /sys/class/drm/card{gpu.card}/device")
                continue
            try:
                return _core.GpuMetricsSource(gpu.gpu_metrics, channel)
            except _core.GpuMetricsFormatError as e:
                format_error = e
                tried.append(f"gpu_metrics: {e}")
            except _core.DeviceUnavailableError as e:
                tried.append(f"gpu_metrics: {e}")
        else:
            if gpu.hwmon_power is None:
                tried.append(f"hwmon: no power1_average or power1_input under card{gpu.card}/device/hwmon/hwmon*")
                continue
            try:
                src = _core.HwmonPowerSource(gpu.hwmon_power)
            except _core.DeviceUnavailableError as e:
                tried.append(f"hwmon: {e}")
                continue
            if format_error is not None:
                warnings.warn(
                    f"{gpu.gpu_metrics}: {format_error}; using {gpu.hwmon_power} (coarser, host-stamped) instead",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return src
    if format_error is not None:
        raise format_error
    raise _core.DeviceUnavailableError(
        f"no power source for {gpu.name} (card{gpu.card}, {gpu.pci_address}): " + "; ".join(tried)
        + ". The amdgpu driver provides gpu_metrics on MI200/MI300-class GPUs and hwmon power files on most others."
    )
