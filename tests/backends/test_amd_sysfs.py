"""AMD GPU discovery on a fake sysfs tree, and the choice of power source."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from fingrav_native import _core
from fingrav_native.backends import AmdGpu, find_amd_gpus, power_source, read_gpu_metrics


def _v14_table(energy: int = 1000, ts: int = 5_000_000) -> bytes:
    # A minimal gpu_metrics 1.4 table (288 bytes) written by byte offsets from
    # the kernel's struct gpu_metrics_v1_4: header, curr_socket_power at 10,
    # energy_accumulator at 24, firmware_timestamp at 232.
    b = bytearray(b"\xff" * 288)
    b[0:4] = (288).to_bytes(2, "little") + bytes([1, 4])
    b[10:12] = (350).to_bytes(2, "little")
    b[24:32] = energy.to_bytes(8, "little")
    b[232:240] = ts.to_bytes(8, "little")
    return bytes(b)


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def _pci_device(root: Path, address: str, vendor: int, device: int, driver: str | None) -> Path:
    dev = root / "devices" / "pci0000:00" / address
    _write(dev / "vendor", f"{vendor:#06x}\n")
    _write(dev / "device", f"{device:#06x}\n")
    _write(dev / "uevent", f"DRIVER={driver or ''}\nPCI_CLASS=38000\nPCI_SLOT_NAME={address}\n")
    if driver is not None:
        drv = root / "bus" / "pci" / "drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        os.symlink(drv, dev / "driver")
    return dev


def _card(root: Path, n: int, dev: Path) -> None:
    card = root / "class" / "drm" / f"card{n}"
    card.mkdir(parents=True, exist_ok=True)
    os.symlink(dev, card / "device")


def _kfd_node(root: Path, n: int, gpu_id: int, domain: int, location_id: int, gfx: int) -> None:
    node = root / "class" / "kfd" / "kfd" / "topology" / "nodes" / str(n)
    _write(node / "gpu_id", f"{gpu_id}\n")
    _write(
        node / "properties",
        f"cpu_cores_count 0\nsimd_count 1216\nvendor_id 4098\ndevice_id 29857\nlocation_id {location_id}\n"
        f"domain {domain}\ngfx_target_version {gfx}\ndrm_render_minor 128\n",
    )


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> Path:
    root = tmp_path / "sys"
    # card0: an MI300X with gpu_metrics and both hwmon files.
    mi300 = _pci_device(root, "0000:c1:00.0", 0x1002, 0x74A1, "amdgpu")
    _write(mi300 / "gpu_metrics", _v14_table())
    _write(mi300 / "product_name", "AMD Instinct MI300X\n")
    _write(mi300 / "hwmon" / "hwmon3" / "power1_input", "250000000\n")
    _write(mi300 / "hwmon" / "hwmon3" / "power1_average", "240000000\n")
    _card(root, 0, mi300)
    # card1: a non-AMD card (bound to another driver).
    other = _pci_device(root, "0000:02:00.0", 0x10DE, 0x2330, "nvidia")
    _card(root, 1, other)
    # card2: an AMD GPU without gpu_metrics, hwmon power1_input only, no product_name.
    navi = _pci_device(root, "0001:0a:01.2", 0x1002, 0x744C, "amdgpu")
    _write(navi / "hwmon" / "hwmon5" / "power1_input", "100000000\n")
    _write(navi / "hwmon" / "hwmon5" / "temp1_input", "45000\n")
    _card(root, 2, navi)
    # card3: AMD but not bound to any driver; card4: AMD bound to vfio.
    _card(root, 3, _pci_device(root, "0000:03:00.0", 0x1002, 0x74A1, None))
    _card(root, 4, _pci_device(root, "0000:04:00.0", 0x1002, 0x74A1, "vfio-pci"))
    # A connector and a render node next to the cards: not GPUs.
    (root / "class" / "drm" / "card0-DP-1").mkdir(parents=True)
    (root / "class" / "drm" / "renderD128").mkdir(parents=True)
    # KFD: node 0 is the CPU, node 1 is card2 (listed first on purpose), node 2 is card0.
    _kfd_node(root, 0, 0, 0, 0, 0)
    _kfd_node(root, 1, 17, 1, (0x0A << 8) | (1 << 3) | 2, 110000)
    _kfd_node(root, 2, 53281, 0, 0xC1 << 8, 90402)
    return root


def test_find_amd_gpus(fake_sysfs: Path):
    gpus = find_amd_gpus(str(fake_sysfs))
    assert [g.card for g in gpus] == [0, 2]
    mi300, navi = gpus
    dev0 = fake_sysfs / "class" / "drm" / "card0" / "device"
    assert mi300 == AmdGpu(
        card=0,
        pci_address="0000:c1:00.0",
        device_id=0x74A1,
        gpu_metrics=str(dev0 / "gpu_metrics"),
        hwmon_power=str(dev0 / "hwmon" / "hwmon3" / "power1_average"),
        kfd_node=2,
        kfd_gpu_id=53281,
        gfx_target_version=90402,
        name="AMD Instinct MI300X",
    )
    dev2 = fake_sysfs / "class" / "drm" / "card2" / "device"
    assert navi.pci_address == "0001:0a:01.2"
    assert navi.gpu_metrics is None
    assert navi.hwmon_power == str(dev2 / "hwmon" / "hwmon5" / "power1_input")
    assert (navi.kfd_node, navi.kfd_gpu_id, navi.gfx_target_version) == (1, 17, 110000)
    assert navi.name == "AMD GPU 0x744c"


def test_kfd_match_needs_the_same_domain(fake_sysfs: Path):
    # Same bus/devfn as card2 but in domain 0: must not match card2 (domain 1).
    node1 = fake_sysfs / "class" / "kfd" / "kfd" / "topology" / "nodes" / "1" / "properties"
    node1.write_text(node1.read_text().replace("domain 1", "domain 0"))
    navi = find_amd_gpus(str(fake_sysfs))[1]
    assert navi.kfd_node is None and navi.kfd_gpu_id is None and navi.gfx_target_version is None


def test_pci_address_from_the_link_when_uevent_is_missing(fake_sysfs: Path):
    (fake_sysfs / "devices" / "pci0000:00" / "0000:c1:00.0" / "uevent").unlink()
    assert find_amd_gpus(str(fake_sysfs))[0].pci_address == "0000:c1:00.0"


def test_no_drm_class_means_no_gpus(tmp_path: Path):
    assert find_amd_gpus(str(tmp_path)) == []


def test_find_amd_gpus_bad_argument():
    with pytest.raises(ValueError, match="sysfs_root"):
        find_amd_gpus(42)  # type: ignore[arg-type]


def test_amd_gpu_is_frozen(fake_sysfs: Path):
    gpu = find_amd_gpus(str(fake_sysfs))[0]
    with pytest.raises(AttributeError):
        gpu.card = 3  # type: ignore[misc]


def test_read_gpu_metrics(fake_sysfs: Path):
    gpu = find_amd_gpus(str(fake_sysfs))[0]
    assert gpu.gpu_metrics is not None
    d = read_gpu_metrics(gpu.gpu_metrics)
    assert d["layout"] == "1.4" and d["curr_socket_power_w"] == 350 and d["energy_accumulator"] == 1000
    with pytest.raises(_core.DeviceUnavailableError, match="amdgpu kernel driver"):
        read_gpu_metrics(str(fake_sysfs / "missing"))
    with pytest.raises(ValueError, match="path"):
        read_gpu_metrics("")


def test_power_source_prefers_gpu_metrics(fake_sysfs: Path):
    mi300, navi = find_amd_gpus(str(fake_sysfs))
    src = power_source(mi300)
    assert isinstance(src, _core.GpuMetricsSource) and src.channel == "energy"
    assert isinstance(power_source(mi300, channel="socket"), _core.GpuMetricsSource)
    hw = power_source(mi300, prefer="hwmon")
    assert isinstance(hw, _core.HwmonPowerSource) and hw.averaged
    # No gpu_metrics: hwmon without a word.
    assert isinstance(power_source(navi), _core.HwmonPowerSource)


def test_power_source_unknown_layout_falls_back_with_a_warning(fake_sysfs: Path):
    mi300 = find_amd_gpus(str(fake_sysfs))[0]
    assert mi300.gpu_metrics is not None
    data = bytearray(_v14_table())
    data[3] = 3  # revision 1.3: not supported
    Path(mi300.gpu_metrics).write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match=r"revision 1\.3.*using .*power1_average"):
        src = power_source(mi300)
    assert isinstance(src, _core.HwmonPowerSource)
    # Without hwmon the format error itself is raised.
    no_hwmon = AmdGpu(**{**mi300.__dict__, "hwmon_power": None})
    with pytest.raises(_core.GpuMetricsFormatError, match=r"revision 1\.3"):
        power_source(no_hwmon)


def test_power_source_nothing_found(fake_sysfs: Path):
    navi = find_amd_gpus(str(fake_sysfs))[1]
    bare = AmdGpu(**{**navi.__dict__, "hwmon_power": None})
    with pytest.raises(_core.DeviceUnavailableError, match=r"card2.*gpu_metrics: no file.*hwmon: no power1_average"):
        power_source(bare)


def test_power_source_bad_arguments(fake_sysfs: Path):
    gpu = find_amd_gpus(str(fake_sysfs))[0]
    with pytest.raises(ValueError, match="prefer"):
        power_source(gpu, prefer="nvml")
    with pytest.raises(ValueError, match="channel"):
        power_source(gpu, channel="volts")
    with pytest.raises(ValueError, match="gpu"):
        power_source("card0")  # type: ignore[arg-type]


def test_fixture_offsets_match_the_kernel_struct():
    # The byte offsets _v14_table writes, checked against a ctypes mirror of
    # gpu_metrics_v1_4's leading fields, so this file's fixture is not a guess.
    u16, u64 = ctypes.c_uint16, ctypes.c_uint64

    class Lead(ctypes.Structure):
        _fields_ = [
            ("hdr", ctypes.c_uint8 * 4),
            ("temperature_hotspot", u16),
            ("temperature_mem", u16),
            ("temperature_vrsoc", u16),
            ("curr_socket_power", u16),
            ("average_gfx_activity", u16),
            ("average_umc_activity", u16),
            ("vcn_activity", u16 * 4),
            ("energy_accumulator", u64),
        ]

    assert Lead.curr_socket_power.offset == 10 and Lead.energy_accumulator.offset == 24
