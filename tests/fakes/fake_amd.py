"""Stand-ins for an AMD MI300X-class GPU, for tests on machines without one.

Three parts, each built from the vendor's own definitions and independent of
the package's parser:

* gpu_metrics 1.9 tables (:func:`build_v19`), packed as the amdgpu driver
  packs them: ``DECLARE_SMU_METRICS_CLASS`` in
  ``drivers/gpu/drm/amd/pm/swsmu/smu_cmn.h`` declares a ``__packed`` struct
  of the header, ``int attr_count``, then per field its encoding
  (``AMDGPU_METRICS_ENC_ATTR(unit, type, id, inst)``, ``kgd_pp_interface.h``)
  followed at once by the value(s), the whole table first filled with 0xFF.
  The encoding is a u64 since the helper patch's v4 ("Fix ftype as u64 to
  match encoding field", amd-gfx, 15 September 2025) and a u32 before.
  Two field lists: SMU 13.0.6 as ROCm/amdgpu has it
  (``smu_v13_0_6_ppt.h``, commit 4f7b3c09: U64 counters, HBM/AID/XCD
  temperatures) and as first posted ("[PATCH v2 3/7] drm/amd/pm: Use gpu
  metrics 1.9 for SMUv13.0.6", 8 September 2025: U32 counters), each with the
  encoding width of its time;
* :class:`CachedGpuMetricsFile`: a gpu_metrics file that changes the way a
  caching driver's does: the firmware's values move every millisecond, but
  the driver serves one table for ``cache_ns`` (5 ms by default,
  SMU_GPU_METRICS_CACHE_INTERVAL) before it builds the next;
* :func:`make_sysfs` and :func:`install_fake_hip`: the sysfs tree of one
  MI300X and a HIP runtime that sees it, so ``AmdBackend`` can be built.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence, Union

import numpy as np

# enum amdgpu_metrics_attr_type
U8, S8, U16, S16, U32, S32, U64, S64 = range(8)
TYPE_FORMAT = {U8: "B", S8: "b", U16: "H", S16: "h", U32: "I", S32: "i", U64: "Q", S64: "q"}

# enum amdgpu_metrics_attr_unit
(UNIT_NONE, UNIT_CLOCK_1, UNIT_TEMP_1, UNIT_POWER_1, UNIT_TIME_1, UNIT_TIME_2, UNIT_SPEED_1, UNIT_SPEED_2,
 UNIT_BW_1, UNIT_DATA_1, UNIT_PERCENT) = range(11)

# enum amdgpu_metrics_attr_id, in kernel order (ROCm/amdgpu 0ce779bf kgd_pp_interface.h; the first 48 are
# also torvalds/linux's, which numbers the later temperature ids differently).
ATTR_NAMES = [
    "TEMPERATURE_HOTSPOT", "TEMPERATURE_MEM", "TEMPERATURE_VRSOC", "CURR_SOCKET_POWER", "AVERAGE_GFX_ACTIVITY",
    "AVERAGE_UMC_ACTIVITY", "MEM_MAX_BANDWIDTH", "ENERGY_ACCUMULATOR", "SYSTEM_CLOCK_COUNTER",
    "ACCUMULATION_COUNTER", "PROCHOT_RESIDENCY_ACC", "PPT_RESIDENCY_ACC", "SOCKET_THM_RESIDENCY_ACC",
    "VR_THM_RESIDENCY_ACC", "HBM_THM_RESIDENCY_ACC", "GFXCLK_LOCK_STATUS", "PCIE_LINK_WIDTH", "PCIE_LINK_SPEED",
    "XGMI_LINK_WIDTH", "XGMI_LINK_SPEED", "GFX_ACTIVITY_ACC", "MEM_ACTIVITY_ACC", "PCIE_BANDWIDTH_ACC",
    "PCIE_BANDWIDTH_INST", "PCIE_L0_TO_RECOV_COUNT_ACC", "PCIE_REPLAY_COUNT_ACC", "PCIE_REPLAY_ROVER_COUNT_ACC",
    "PCIE_NAK_SENT_COUNT_ACC", "PCIE_NAK_RCVD_COUNT_ACC", "XGMI_READ_DATA_ACC", "XGMI_WRITE_DATA_ACC",
    "XGMI_LINK_STATUS", "FIRMWARE_TIMESTAMP", "CURRENT_GFXCLK", "CURRENT_SOCCLK", "CURRENT_VCLK0",
    "CURRENT_DCLK0", "CURRENT_UCLK", "NUM_PARTITION", "PCIE_LC_PERF_OTHER_END_RECOVERY", "GFX_BUSY_INST",
    "JPEG_BUSY", "VCN_BUSY", "GFX_BUSY_ACC", "GFX_BELOW_HOST_LIMIT_PPT_ACC", "GFX_BELOW_HOST_LIMIT_THM_ACC",
    "GFX_LOW_UTILIZATION_ACC", "GFX_BELOW_HOST_LIMIT_TOTAL_ACC", "TEMPERATURE_HBM", "TEMPERATURE_AID",
    "TEMPERATURE_XCD",
]
ATTR = {name: i for i, name in enumerate(ATTR_NAMES)}


def enc_attr(unit: int, type_: int, id_: int, inst: int) -> int:
    """AMDGPU_METRICS_ENC_ATTR(unit, type, id, inst): unit << 24 | type << 20 | id << 10 | inst."""
    return (unit << 24) | (type_ << 20) | (id_ << 10) | inst


# (attribute, unit, type, field name, instances): the SMU_13_0_6_METRICS_FIELDS lists.
Field = tuple[str, int, int, str, int]
_XGMI, _GFX_CLKS, _CLKS, _XCC, _VCN, _JPEG, _AID, _HBM = 8, 8, 4, 8, 4, 40, 4, 8


def _smu_13_0_6(counter: int, acc: int, nak: int, recovery: int, temps: bool) -> list[Field]:
    fields: list[Field] = [
        ("TEMPERATURE_HOTSPOT", UNIT_TEMP_1, U16, "temperature_hotspot", 1),
        ("TEMPERATURE_MEM", UNIT_TEMP_1, U16, "temperature_mem", 1),
        ("TEMPERATURE_VRSOC", UNIT_TEMP_1, U16, "temperature_vrsoc", 1),
        ("CURR_SOCKET_POWER", UNIT_POWER_1, U16, "curr_socket_power", 1),
        ("AVERAGE_GFX_ACTIVITY", UNIT_PERCENT, U16, "average_gfx_activity", 1),
        ("AVERAGE_UMC_ACTIVITY", UNIT_PERCENT, U16, "average_umc_activity", 1),
        ("MEM_MAX_BANDWIDTH", UNIT_BW_1, U64, "mem_max_bandwidth", 1),
        ("ENERGY_ACCUMULATOR", UNIT_NONE, U64, "energy_accumulator", 1),
        ("SYSTEM_CLOCK_COUNTER", UNIT_TIME_1, U64, "system_clock_counter", 1),
        ("ACCUMULATION_COUNTER", UNIT_NONE, counter, "accumulation_counter", 1),
        ("PROCHOT_RESIDENCY_ACC", UNIT_NONE, counter, "prochot_residency_acc", 1),
        ("PPT_RESIDENCY_ACC", UNIT_NONE, counter, "ppt_residency_acc", 1),
        ("SOCKET_THM_RESIDENCY_ACC", UNIT_NONE, counter, "socket_thm_residency_acc", 1),
        ("VR_THM_RESIDENCY_ACC", UNIT_NONE, counter, "vr_thm_residency_acc", 1),
        ("HBM_THM_RESIDENCY_ACC", UNIT_NONE, counter, "hbm_thm_residency_acc", 1),
        ("GFXCLK_LOCK_STATUS", UNIT_NONE, U32, "gfxclk_lock_status", 1),
        ("PCIE_LINK_WIDTH", UNIT_NONE, U16, "pcie_link_width", 1),
        ("PCIE_LINK_SPEED", UNIT_SPEED_2, U16, "pcie_link_speed", 1),
        ("XGMI_LINK_WIDTH", UNIT_NONE, U16, "xgmi_link_width", 1),
        ("XGMI_LINK_SPEED", UNIT_SPEED_1, U16, "xgmi_link_speed", 1),
        ("GFX_ACTIVITY_ACC", UNIT_PERCENT, acc, "gfx_activity_acc", 1),
        ("MEM_ACTIVITY_ACC", UNIT_PERCENT, acc, "mem_activity_acc", 1),
        ("PCIE_BANDWIDTH_ACC", UNIT_PERCENT, U64, "pcie_bandwidth_acc", 1),
        ("PCIE_BANDWIDTH_INST", UNIT_BW_1, U64, "pcie_bandwidth_inst", 1),
        ("PCIE_L0_TO_RECOV_COUNT_ACC", UNIT_NONE, U64, "pcie_l0_to_recov_count_acc", 1),
        ("PCIE_REPLAY_COUNT_ACC", UNIT_NONE, U64, "pcie_replay_count_acc", 1),
        ("PCIE_REPLAY_ROVER_COUNT_ACC", UNIT_NONE, U64, "pcie_replay_rover_count_acc", 1),
        ("PCIE_NAK_SENT_COUNT_ACC", UNIT_NONE, nak, "pcie_nak_sent_count_acc", 1),
        ("PCIE_NAK_RCVD_COUNT_ACC", UNIT_NONE, nak, "pcie_nak_rcvd_count_acc", 1),
        ("XGMI_READ_DATA_ACC", UNIT_DATA_1, U64, "xgmi_read_data_acc", _XGMI),
        ("XGMI_WRITE_DATA_ACC", UNIT_DATA_1, U64, "xgmi_write_data_acc", _XGMI),
        ("XGMI_LINK_STATUS", UNIT_NONE, U16, "xgmi_link_status", _XGMI),
        ("FIRMWARE_TIMESTAMP", UNIT_TIME_2, U64, "firmware_timestamp", 1),
        ("CURRENT_GFXCLK", UNIT_CLOCK_1, U16, "current_gfxclk", _GFX_CLKS),
        ("CURRENT_SOCCLK", UNIT_CLOCK_1, U16, "current_socclk", _CLKS),
        ("CURRENT_VCLK0", UNIT_CLOCK_1, U16, "current_vclk0", _CLKS),
        ("CURRENT_DCLK0", UNIT_CLOCK_1, U16, "current_dclk0", _CLKS),
        ("CURRENT_UCLK", UNIT_CLOCK_1, U16, "current_uclk", 1),
        ("PCIE_LC_PERF_OTHER_END_RECOVERY", UNIT_NONE, recovery, "pcie_lc_perf_other_end_recovery", 1),
        ("GFX_BUSY_INST", UNIT_PERCENT, U32, "gfx_busy_inst", _XCC),
        ("JPEG_BUSY", UNIT_PERCENT, U16, "jpeg_busy", _JPEG),
        ("VCN_BUSY", UNIT_PERCENT, U16, "vcn_busy", _VCN),
        ("GFX_BUSY_ACC", UNIT_NONE if temps else UNIT_PERCENT, U64, "gfx_busy_acc", _XCC),
        ("GFX_BELOW_HOST_LIMIT_PPT_ACC", UNIT_NONE, U64, "gfx_below_host_limit_ppt_acc", _XCC),
        ("GFX_BELOW_HOST_LIMIT_THM_ACC", UNIT_NONE, U64, "gfx_below_host_limit_thm_acc", _XCC),
        ("GFX_LOW_UTILIZATION_ACC", UNIT_NONE, U64, "gfx_low_utilization_acc", _XCC),
        ("GFX_BELOW_HOST_LIMIT_TOTAL_ACC", UNIT_NONE, U64, "gfx_below_host_limit_total_acc", _XCC),
    ]
    if temps:
        fields += [
            ("TEMPERATURE_HBM", UNIT_TEMP_1, U16, "temperature_hbm", _HBM),
            ("TEMPERATURE_AID", UNIT_TEMP_1, U16, "temperature_aid", _AID),
            ("TEMPERATURE_XCD", UNIT_TEMP_1, U16, "temperature_xcd", _XCC),
        ]
    return fields


#: SMU 13.0.6 in ROCm/amdgpu (smu_v13_0_6_ppt.h at 4f7b3c09), with 8-byte encodings.
SMU_13_0_6_ROCM = _smu_13_0_6(counter=U64, acc=U64, nak=U64, recovery=U64, temps=True)
#: SMU 13.0.6 as first posted ([PATCH v2 3/7], 8 September 2025), with that series' 4-byte encodings.
SMU_13_0_6_V2 = _smu_13_0_6(counter=U32, acc=U32, nak=U32, recovery=U32, temps=False)

Value = Union[int, Sequence[int]]


def build_v19(fields: Sequence[Field], values: dict[str, Value], *, tag_bytes: int = 8,
              content_revision: int = 9) -> bytes:
    """A gpu_metrics 1.9 table as the driver writes it.

    Parameters
    ----------
    fields : sequence of (attribute, unit, type, name, instances)
        The SOC's field list, in order.
    values : dict
        Field name -> value (or values, for arrays; the rest of an array stays 0xFF).
    tag_bytes : int
        Width of each encoding: 8 (u64 ftype, the merged helpers) or 4 (u32, as first posted).
    content_revision : int
        The header's content revision (9).

    Returns
    -------
    bytes
        Header (structure_size, format 1, content revision), ``int attr_count``, then per field the
        encoding and its value(s), packed, little-endian; every value not given is all ones (the
        ``CLASSNAME##_init`` memset of 0xFF).
    """
    unknown = set(values) - {f[3] for f in fields}
    if unknown:
        raise ValueError(f"values: {sorted(unknown)} are not in the field list")
    body = bytearray()
    for attr, unit, type_, name, inst in fields:
        enc = enc_attr(unit, type_, ATTR[attr], inst)
        body += struct.pack("<Q" if tag_bytes == 8 else "<I", enc)
        fmt = "<" + TYPE_FORMAT[type_]
        width = struct.calcsize(fmt)
        given = values.get(name)
        seq = [] if given is None else ([given] if isinstance(given, int) else list(given))
        for k in range(inst):
            body += struct.pack(fmt, seq[k]) if k < len(seq) else b"\xff" * width
    size = 8 + len(body)
    return struct.pack("<HBBi", size, 1, content_revision, len(fields)) + bytes(body)


def build_v18(values: dict[str, int]) -> bytes:
    """A gpu_metrics 1.8 table (struct gpu_metrics_v1_8, 3872 bytes) with the fields the backend reads.

    Parameters
    ----------
    values : dict
        Any of ``curr_socket_power``, ``energy_accumulator``,
        ``system_clock_counter``, ``accumulation_counter``, ``firmware_timestamp``.

    Returns
    -------
    bytes
        All 0xFF but the header and the given fields, at their offsets in the
        kernel's struct (kgd_pp_interface.h, natural alignment): socket power
        at 10, energy at 24, system clock at 32, accumulation counter at 40,
        firmware timestamp at 288.
    """
    offsets = {"curr_socket_power": (10, "<H"), "energy_accumulator": (24, "<Q"), "system_clock_counter": (32, "<Q"),
               "accumulation_counter": (40, "<I"), "firmware_timestamp": (288, "<Q")}
    b = bytearray(b"\xff" * 3872)
    struct.pack_into("<HBB", b, 0, 3872, 1, 8)
    for name, v in values.items():
        off, fmt = offsets[name]
        struct.pack_into(fmt, b, off, v)
    return bytes(b)


#: The values of the committed fixture tests/fixtures/gpu_metrics_v1_9_smu_13_0_6.bin.
FIXTURE_VALUES: dict[str, Value] = {
    "temperature_hotspot": 48, "temperature_mem": 41, "temperature_vrsoc": 39, "curr_socket_power": 162,
    "average_gfx_activity": 0, "average_umc_activity": 0, "mem_max_bandwidth": 5300,
    "energy_accumulator": 0x0000_01A2_B3C4_D5E6, "system_clock_counter": 987_654_321_012,
    "accumulation_counter": 5_000_000_000, "gfxclk_lock_status": 0, "pcie_link_width": 16,
    "pcie_link_speed": 320, "firmware_timestamp": 123_456_789_000,
    "current_gfxclk": [132, 133, 131, 132, 134, 132, 133, 131], "current_uclk": 900,
    "temperature_hbm": [40, 41, 40, 42, 41, 40, 41, 42],
}


# ---------------------------------------------------------------- a caching driver


class CachedGpuMetricsFile:
    """A gpu_metrics file that refreshes like a driver caching its table.

    The firmware's clock and energy counter run continuously (``power_w``
    constant, ``firmware_timestamp`` in 10 ns ticks since the start), but the
    file changes only every ``cache_ns``: a reader polling faster sees the
    same table, and distinct firmware timestamps are ``cache_ns`` apart (a
    multiple of it when the writer thread is late). A context manager; the
    file is written in place, as the source keeps its descriptor open.

    Parameters
    ----------
    path : str or Path
        The file to write.
    cache_ns : int
        How long one table is served (SMU_GPU_METRICS_CACHE_INTERVAL, 5 ms).
    power_w : float
        The constant power the energy accumulator integrates.
    fields, tag_bytes
        The 1.9 field list and encoding width (:func:`build_v19`).
    revision : {"1.9", "1.8"}
        The table format (1.8: :func:`build_v18`).
    """

    def __init__(self, path: Union[str, Path], *, cache_ns: int = 5_000_000, power_w: float = 100.0,
                 fields: Sequence[Field] = SMU_13_0_6_ROCM, tag_bytes: int = 8, revision: str = "1.9") -> None:
        self.path, self.cache_ns, self.power_w = str(path), int(cache_ns), float(power_w)
        self.fields, self.tag_bytes, self.revision = fields, tag_bytes, revision
        self.tables = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic_ns()
        self._write(0)

    def table(self, k: int) -> bytes:
        """The k-th table the driver serves (firmware time k * cache_ns)."""
        t_ns = k * self.cache_ns
        energy = int(round(self.power_w * t_ns * 1e-9 * 65536))  # 2^-16 J units
        values: dict[str, Value] = {
            "energy_accumulator": 1_000_000 + energy, "firmware_timestamp": 10**9 + t_ns // 10,
            "system_clock_counter": self._t0 + t_ns, "curr_socket_power": int(self.power_w),
            "accumulation_counter": 1000 + t_ns // 1_000_000}
        if self.revision == "1.8":
            return build_v18({k: int(v) for k, v in values.items() if isinstance(v, int)})
        return build_v19(self.fields, values, tag_bytes=self.tag_bytes)

    def _write(self, k: int) -> None:
        rewrite_in_place(self.path, self.table(k))
        self.tables += 1

    def _run(self) -> None:
        last = 0
        while not self._stop.is_set():
            k = (time.monotonic_ns() - self._t0) // self.cache_ns
            if k != last:
                self._write(k)
                last = k
            time.sleep(0.0005)

    def __enter__(self) -> CachedGpuMetricsFile:
        self._thread = threading.Thread(target=self._run, name="fake-amdgpu-cache", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


# ---------------------------------------------------------------- sysfs and HIP


def rewrite_in_place(path: Union[str, Path], data: bytes) -> None:
    """Rewrite a file in place, as the driver does: a reader holding it open sees the new table."""
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


@contextlib.contextmanager
def toggling_hwmon(path: Union[str, Path], base_uw: int, every_s: float = 0.02) -> Iterator[None]:
    """A hwmon power file whose value alternates by 1 W every ``every_s`` (no timestamp: its period is only seen)."""
    stop = threading.Event()

    def writer() -> None:
        k = 0
        while not stop.is_set():
            time.sleep(every_s)
            k += 1
            with open(path, "w") as f:
                f.write(f"{base_uw + k % 2 * 1_000_000}\n")

    th = threading.Thread(target=writer)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()


def _write(path: Path, data: Union[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


def make_sysfs(root: Path, gpu_metrics: bytes, hwmon_uw: int | None = 240_000_000) -> Path:
    """A sysfs tree with one MI300X (card0, gpu_metrics, hwmon) and its KFD node; returns the gpu_metrics path."""
    dev = root / "devices" / "pci0000:00" / "0000:c1:00.0"
    _write(dev / "vendor", "0x1002\n")
    _write(dev / "device", "0x74a1\n")
    _write(dev / "uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:c1:00.0\n")
    drv = root / "bus" / "pci" / "drivers" / "amdgpu"
    drv.mkdir(parents=True, exist_ok=True)
    os.symlink(drv, dev / "driver")
    _write(dev / "gpu_metrics", gpu_metrics)
    _write(dev / "product_name", "AMD Instinct MI300X\n")
    if hwmon_uw is not None:
        _write(dev / "hwmon" / "hwmon3" / "power1_average", f"{hwmon_uw}\n")
    card = root / "class" / "drm" / "card0"
    card.mkdir(parents=True)
    os.symlink(dev, card / "device")
    for n, gpu_id, loc, gfx in ((0, 0, 0, 0), (1, 53281, 0xC1 << 8, 90402)):
        node = root / "class" / "kfd" / "kfd" / "topology" / "nodes" / str(n)
        _write(node / "gpu_id", f"{gpu_id}\n")
        _write(node / "properties", f"simd_count 1216\nlocation_id {loc}\ndomain 0\ngfx_target_version {gfx}\n")
    return dev / "gpu_metrics"


class FakeHipMarkerProbe:
    """HipMarkerProbe's interface, writing a simulated GPU wall clock (100 MHz) into its slots."""

    wall_clock_rate_khz = 100_000

    def __init__(self, device: int, size: int, arch: str = "") -> None:
        self._slots = np.zeros(size, dtype=np.uint64)
        self._clock = _fake_clock()

    def __len__(self) -> int:
        return len(self._slots)

    def reset(self) -> None:
        self._slots[:] = 0

    def stamp(self, stream: int, slot: int) -> None:
        self._slots[slot] = int(self._clock.read_device_ticks())

    def slots(self) -> np.ndarray:
        return self._slots.copy()


class FakeHipEventTimer:
    """HipEventTimer's interface on host time."""

    def __init__(self, device: int, size: int) -> None:
        self._t = np.zeros(size, dtype=np.int64)

    def record(self, stream: int, i: int) -> None:
        self._t[i] = time.monotonic_ns()

    def synchronize(self, i: int) -> None:
        pass

    def elapsed_ms(self, a: int, b: int) -> float:
        return float(self._t[b] - self._t[a]) / 1e6


_CLOCK: dict[str, Any] = {}


def _fake_clock() -> Any:
    """One simulated GPU wall clock (10 ns ticks) shared by the probe and the bracket reads."""
    if "source" not in _CLOCK:
        from fingrav_native.sim import SimGPU

        _CLOCK["gpu"] = SimGPU(seed=7, realtime=True, device_tick_ns=10.0, device_skew_ppm=0.0)
        _CLOCK["source"] = _CLOCK["gpu"].timestamp_source()
    return _CLOCK["source"]


def install_fake_hip(monkeypatch: Any) -> None:
    """Make ``_core``'s HIP entry points see one MI300X (gfx942) backed by a simulated clock."""
    from fingrav_native import _core

    monkeypatch.setattr(_core, "hip_runtime_info", lambda: {
        "device_count": 1, "library_path": "fake-libamdhip64.so", "runtime_version": 60_000_000,
        "init_error": "", "devices": [{"name": "AMD Instinct MI300X", "gcn_arch": "gfx942"}]})
    monkeypatch.setattr(_core, "HipMarkerProbe", FakeHipMarkerProbe)
    monkeypatch.setattr(_core, "HipEventTimer", FakeHipEventTimer)
    monkeypatch.setattr(_core, "HipTimestampSource", lambda device, arch="": _fake_clock())
