"""The AMD runtime side without an AMD GPU: loaders against absent libraries,
KFD errors, gfx names, the hiprtc probe compiled for a gfx target, the
backend's errors and report, its clock helpers on the simulator, and the
backend itself on a fake MI300X (tests/fakes/fake_amd.py: a sysfs tree, a HIP
runtime that sees it, and a gpu_metrics file refreshed like a driver that
caches its table for 5 ms)."""

from __future__ import annotations

import os
import struct
import time
import types
from pathlib import Path

import numpy as np
import pytest

from fakes import fake_amd
from fingrav_native import _core
from fingrav_native.backends import Workload
from fingrav_native.backends import _amd as amd
from fingrav_native.backends import _amd_report as amd_report
from fingrav_native.backends import _amd_sensors as amd_sensors
from fingrav_native.backends import _devices as devices
from fingrav_native.sim import SimGPU

# ---------------------------------------------------------------- helpers


def _hip_state() -> str:
    """'absent', 'no-device' or 'device': what this machine's HIP runtime offers."""
    try:
        info = _core.hip_runtime_info()
    except _core.LibraryNotFoundError:
        return "absent"
    return "device" if info["device_count"] > 0 else "no-device"


def _elf_symbols(code: bytes) -> tuple[dict, set[str]]:
    """The ELF header fields we check and the names in every symbol table (ELF64 little-endian)."""
    assert code[:4] == b"\x7fELF", "not an ELF file"
    hdr = {"class": code[4], "data": code[5], "osabi": code[7], "abiversion": code[8]}
    e_type, e_machine, _, _, _, e_shoff, e_flags, _, _, _, e_shentsize, e_shnum, _ = struct.unpack_from(
        "<HHIQQQIHHHHHH", code, 16)
    hdr.update(type=e_type, machine=e_machine, flags=e_flags)
    sections = [struct.unpack_from("<IIQQQQIIQQ", code, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    names: set[str] = set()
    for _name, sh_type, _, _, off, size, link, _, _, entsize in sections:
        if sh_type not in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            continue
        str_off = sections[link][4]
        for k in range(size // entsize):
            st_name = struct.unpack_from("<I", code, off + k * entsize)[0]
            end = code.index(b"\0", str_off + st_name)
            names.add(code[str_off + st_name:end].decode())
    return hdr, names


def _gpu_metrics_v14() -> bytes:
    # gpu_metrics 1.4 (288 bytes; struct gpu_metrics_v1_4 in the kernel's
    # kgd_pp_interface.h): header, socket power at 10, energy at 24,
    # firmware_timestamp at 232; everything else "not provided" (0xff).
    b = bytearray(b"\xff" * 288)
    b[0:4] = (288).to_bytes(2, "little") + bytes([1, 4])
    b[10:12] = (350).to_bytes(2, "little")
    b[24:32] = (1000).to_bytes(8, "little")
    b[232:240] = (5_000_000).to_bytes(8, "little")
    return bytes(b)


@pytest.fixture
def mi300_sysfs(tmp_path: Path) -> Path:
    """A sysfs tree with one MI300X (card0, gpu_metrics, hwmon) and its KFD node."""
    root = tmp_path / "sys"
    fake_amd.make_sysfs(root, _gpu_metrics_v14())
    return root


# ---------------------------------------------------------------- loaders


def test_hip_loader_names_the_forced_path_and_what_to_install(monkeypatch):
    monkeypatch.setenv("FINGRAV_HIP_LIBRARY", "/nonexistent/libamdhip64.so")
    with pytest.raises(_core.LibraryNotFoundError) as e:
        _core.hip_runtime_info()
    msg = str(e.value)
    assert "/nonexistent/libamdhip64.so" in msg
    assert "libamdhip64-5" in msg and "FINGRAV_HIP_LIBRARY" in msg
    for make in (lambda: _core.HipEventTimer(0, 4), lambda: _core.HipMarkerProbe(0, 4, arch="gfx90a")):
        monkeypatch.setenv("FINGRAV_HIPRTC_LIBRARY", "/nonexistent/libhiprtc.so")
        with pytest.raises(_core.LibraryNotFoundError, match="nonexistent"):
            make()


def test_hiprtc_loader_names_the_forced_path(monkeypatch):
    monkeypatch.setenv("FINGRAV_HIPRTC_LIBRARY", "/nonexistent/libhiprtc.so")
    with pytest.raises(_core.LibraryNotFoundError) as e:
        _core.hiprtc_compile_probe("gfx90a")
    assert "/nonexistent/libhiprtc.so" in str(e.value)
    assert "FINGRAV_HIPRTC_LIBRARY" in str(e.value)


def test_hiprtc_fallback_lists_both_searches(monkeypatch):
    # No libhiprtc anywhere and libamdhip64 forced to a missing path: the
    # error lists the libhiprtc names and the libamdhip64 attempt.
    monkeypatch.setenv("FINGRAV_HIP_LIBRARY", "/nonexistent/libamdhip64.so")
    monkeypatch.setenv("ROCM_PATH", "/nonexistent-rocm")
    monkeypatch.delenv("HIP_PATH", raising=False)
    try:
        _core.hiprtc_compile_probe("gfx90a")
    except _core.LibraryNotFoundError as exc:
        msg = str(exc)
    else:
        pytest.skip("a libhiprtc.so is installed on this machine, so the fallback is not reached")
    assert "/nonexistent-rocm/lib/libhiprtc.so" in msg
    assert "/nonexistent/libamdhip64.so" in msg
    assert "libhiprtc.so.6" in msg


@pytest.mark.parametrize("arch", ["sm_90", "gfx", "gfx9", "gfx90a:xnack", "gfx90a;rm", "", "GFX90A"])
def test_probe_arch_is_checked_before_anything_loads(arch, monkeypatch):
    monkeypatch.setenv("FINGRAV_HIPRTC_LIBRARY", "/nonexistent/libhiprtc.so")
    with pytest.raises(ValueError, match="arch="):
        _core.hiprtc_compile_probe(arch)


def test_probe_source_reads_the_wall_clock():
    assert "wall_clock64()" in _core.HIP_PROBE_SOURCE
    assert _core.HIP_PROBE_KERNEL in _core.HIP_PROBE_SOURCE
    # hipDeviceAttributeAmdSpecificBegin (10000) + 17 in ROCm 6.x hip_runtime_api.h.
    assert _core.HIP_WALL_CLOCK_RATE_ATTRIBUTE == 10017


# EF_AMDGPU_MACH_* of the LLVM AMDGPU ELF ABI (llvm/BinaryFormat/ELF.h).
_MACH = {"gfx908": 0x030, "gfx90a": 0x03F}


@pytest.mark.parametrize("arch", sorted(_MACH))
@pytest.mark.optional
def test_hiprtc_compiles_the_probe_for_a_gfx_target(arch):
    """Needs hiprtc, not a GPU. CI installs Debian's ROCm 5.2 runtime and sets
    FINGRAV_EXPECT_HIPRTC=1, so a missing library fails there; elsewhere it skips."""
    try:
        code = _core.hiprtc_compile_probe(arch)
    except _core.LibraryNotFoundError as exc:
        if os.environ.get("FINGRAV_EXPECT_HIPRTC") == "1":
            raise
        pytest.skip(f"hiprtc is not installed (set FINGRAV_EXPECT_HIPRTC=1 to require it): {exc}")
    hdr, names = _elf_symbols(code)
    assert hdr["class"] == 2 and hdr["data"] == 1  # ELFCLASS64, little-endian
    assert hdr["osabi"] == 64                      # ELFOSABI_AMDGPU_HSA
    assert hdr["machine"] == 224                   # EM_AMDGPU
    assert hdr["type"] == 3                        # ET_DYN: a loadable code object
    assert hdr["flags"] & 0xFF == _MACH[arch]
    assert _core.HIP_PROBE_KERNEL in names
    assert _core.HIP_PROBE_KERNEL + ".kd" in names  # the kernel descriptor HIP launches through


# ---------------------------------------------------------------- KFD


def test_kfd_missing_device_names_path_and_driver(tmp_path):
    path = str(tmp_path / "kfd")
    with pytest.raises(_core.DeviceUnavailableError) as e:
        _core.KfdClockSource(1, device_path=path)
    assert path in str(e.value) and "amdgpu" in str(e.value)


@pytest.mark.parametrize("kind", ["devnull", "file"])
def test_kfd_on_something_that_is_not_kfd(kind, tmp_path):
    path = "/dev/null" if kind == "devnull" else str(tmp_path / "not-kfd")
    if kind == "file":
        Path(path).write_bytes(b"\0" * 64)
    with pytest.raises(_core.DeviceUnavailableError, match="AMDKFD_IOC_GET_VERSION"):
        _core.KfdClockSource(1, device_path=path)


@pytest.mark.parametrize("gpu_id", [0, -1, 2**32])
def test_kfd_gpu_id_is_checked(gpu_id):
    with pytest.raises(ValueError, match="gpu_id"):
        _core.KfdClockSource(gpu_id)


def test_kfd_nominal_tick_is_checked():
    with pytest.raises(ValueError, match="nominal_tick_ns"):
        _core.KfdClockSource(1, device_path="/dev/null", nominal_tick_ns=0.0)


@pytest.mark.parametrize("version, arch", [(90402, "gfx942"), (90010, "gfx90a"), (90008, "gfx908"),
                                           (90012, "gfx90c"), (100302, "gfx1032"), (110000, "gfx1100"),
                                           (120001, "gfx1201")])
def test_gfx_arch_from_target_version(version, arch):
    assert _core.gfx_arch_from_target_version(version) == arch


@pytest.mark.parametrize("version", [0, -1, 91600, 90016, 2**33])
def test_gfx_arch_rejects_what_is_not_a_gpu_version(version):
    with pytest.raises(ValueError):
        _core.gfx_arch_from_target_version(version)


# ---------------------------------------------------------------- HIP objects without a GPU


def test_hip_objects_without_a_gpu_say_why():
    state = _hip_state()
    if state == "device":
        pytest.skip("this machine has an AMD GPU")
    expected = _core.LibraryNotFoundError if state == "absent" else _core.DeviceUnavailableError
    for make in (lambda: _core.HipEventTimer(0, 4), lambda: _core.HipTimestampSource(0, arch="gfx90a")):
        with pytest.raises(expected) as e:
            make()
        if state == "no-device":
            assert "hipInit" in str(e.value) and "render" in str(e.value)


def test_hip_object_arguments_are_checked():
    with pytest.raises(ValueError, match="slots"):
        _core.HipMarkerProbe(0, 0, arch="gfx90a")
    with pytest.raises(ValueError, match="events"):
        _core.HipEventTimer(0, 1)
    with pytest.raises(ValueError, match="arch"):
        _core.HipMarkerProbe(0, 4, arch="sm_80")


@pytest.mark.optional
def test_hip_runtime_info_without_a_gpu():
    if _hip_state() != "no-device":
        pytest.skip("needs the HIP runtime installed on a machine without an AMD GPU")
    info = _core.hip_runtime_info()
    assert info["device_count"] == 0 and info["devices"] == []
    assert "hipInit" in info["init_error"] or "hipGetDeviceCount" in info["init_error"]
    assert "libamdhip64" in info["library_path"] and info["runtime_version"] > 0


# ---------------------------------------------------------------- the backend


def test_backend_without_an_amd_gpu_says_what_it_looked_for(tmp_path):
    empty = tmp_path / "sys"
    empty.mkdir()
    with pytest.raises(_core.DeviceUnavailableError) as e:
        amd.AmdBackend(sysfs_root=str(empty))
    assert "no AMD GPU" in str(e.value) and str(empty) in str(e.value) and "0x1002" in str(e.value)


def test_backend_on_this_machine():
    if _hip_state() == "device":
        pytest.skip("this machine has an AMD GPU")
    with pytest.raises(_core.DeviceUnavailableError, match="AMD GPU"):
        amd.AmdBackend()


def test_backend_with_a_gpu_in_sysfs_but_no_runtime(mi300_sysfs, monkeypatch):
    # The power file opens (a fake gpu_metrics), then the HIP runtime is looked for.
    monkeypatch.setenv("FINGRAV_HIP_LIBRARY", "/nonexistent/libamdhip64.so")
    with pytest.raises(_core.LibraryNotFoundError, match="/nonexistent/libamdhip64.so"):
        amd.AmdBackend(sysfs_root=str(mi300_sysfs))


@pytest.mark.optional
def test_backend_with_a_gpu_in_sysfs_that_hip_does_not_see(mi300_sysfs):
    if _hip_state() != "no-device":
        pytest.skip("needs the HIP runtime installed on a machine without an AMD GPU")
    with pytest.raises(_core.DeviceUnavailableError, match="sees 0 device"):
        amd.AmdBackend(sysfs_root=str(mi300_sysfs))


@pytest.mark.parametrize("kwargs, needle", [
    ({"device": -1}, "device"), ({"device": True}, "device"), ({"clock": "tsc"}, "clock"),
    ({"brackets_per_run": 1}, "brackets_per_run"), ({"idle_tolerance": 1.5}, "idle_tolerance"),
    ({"period_ns": 1}, "period_ns"), ({"max_idle_ns": 0}, "max_idle_ns"), ({"marker_err_ns": -1.0}, "marker_err_ns"),
])
def test_backend_arguments_are_checked(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        amd.AmdBackend(**kwargs)


def test_backend_device_index_beyond_the_gpus(mi300_sysfs):
    with pytest.raises(_core.DeviceUnavailableError, match="1 AMD GPU"):
        amd.AmdBackend(1, sysfs_root=str(mi300_sysfs))


# ---------------------------------------------------------------- report


def test_report_on_this_machine(tmp_path):
    r = amd_report.report(sysfs_root=str(tmp_path), kfd_path=str(tmp_path / "kfd"))
    assert r.backend == "amd" and not r.available and r.devices == ()
    names = {c.name: c for c in r.components}
    assert not names[str(tmp_path / "kfd")].found and "amdgpu" in names[str(tmp_path / "kfd")].detail
    hip = names["HIP runtime (libamdhip64)"]
    assert hip.found == (_hip_state() != "absent")
    assert "hiprtc (marker probe)" in names
    assert "no AMD GPU found" in r.reason
    assert "not verified" in r.verified_on
    text = devices.format_reports([r])
    assert text.startswith("amd: unavailable")


def test_report_with_a_fake_mi300(mi300_sysfs, tmp_path):
    kfd = tmp_path / "kfd"
    kfd.write_bytes(b"")
    r = amd_report.report(sysfs_root=str(mi300_sysfs), kfd_path=str(kfd))
    assert [d.name for d in r.devices] == ["AMD Instinct MI300X"]
    d = r.devices[0]
    assert d.details["arch"] == "gfx942" and d.details["kfd_gpu_id"] == 53281
    assert d.details["pci"] == "0000:c1:00.0"
    names = {c.name: c for c in r.components}
    assert names[str(kfd)].found
    assert names["card0 gpu_metrics"].found and names["card0 gpu_metrics"].detail.endswith("gpu_metrics")
    assert names["card0 hwmon power"].found
    if _hip_state() != "device":
        assert not r.available and "HIP" in r.reason
    # JSON form for `fingrav devices --json`.
    assert r.as_dict()["devices"][0]["arch"] == "gfx942"


def test_report_is_listed_by_devices():
    [r] = devices.list_backends(["amd"])
    assert r.backend == "amd"
    assert "failed to report" not in r.reason


# ---------------------------------------------------------------- clock helpers on the simulator


def test_measure_tick_ns_on_a_simulated_clock():
    gpu = SimGPU(seed=1, realtime=True, device_tick_ns=25.0, device_skew_ppm=0.0)
    tick = amd.measure_tick_ns(gpu.timestamp_source(), gap_ns=20_000_000)
    assert tick == pytest.approx(25.0, rel=2e-3)
    with pytest.raises(ValueError, match="gap_ns"):
        amd.measure_tick_ns(gpu.timestamp_source(), gap_ns=10)


def test_compare_clocks_tells_one_counter_from_two():
    a = SimGPU(seed=1, realtime=True)
    same = amd.compare_clocks(a.timestamp_source(), a.timestamp_source())
    assert same["same_counter"] and abs(same["offset_ns"]) <= same["tolerance_ns"]
    # Another counter 1 s (10^8 ticks) away from the first: far beyond any gap between the two devices'
    # creations on a loaded host (at 1 ms a 0.98 ms gap on a busy machine left 20 us, inside ten tolerances).
    b = SimGPU(seed=1, realtime=True,
               device_offset_ticks=float(a.params["device_offset_ticks"]) + 100_000_000.0)
    other = amd.compare_clocks(a.timestamp_source(), b.timestamp_source())
    assert not other["same_counter"]
    # (Each simulated device starts its clock at its own creation, so the
    # offset is 1 s less the creation gap: far outside the tolerance anyway.)
    assert abs(other["offset_ns"]) > 10 * other["tolerance_ns"]
    with pytest.raises(ValueError, match="reads"):
        amd.compare_clocks(a.timestamp_source(), a.timestamp_source(), reads=1)



# ---------------------------------------------------------------- the logger period, measured
# The driver serves one cached gpu_metrics table for 5 ms by default
# (SMU_GPU_METRICS_CACHE_INTERVAL) while the firmware refreshes every 1 ms:
# the backend must see the 5 ms the reader gets, not assume 1 ms.


def test_period_of_a_caching_driver_is_measured(tmp_path):
    path = tmp_path / "gpu_metrics"
    with fake_amd.CachedGpuMetricsFile(path, cache_ns=5_000_000, power_w=100.0) as f:
        src = _core.GpuMetricsSource(str(path))
        assert src.info.native_period_ns == 0  # unknown until measured
        period, samples = amd.measure_logger_period(src, span_ns=100_000_000)
    assert f.tables >= 20
    # Distinct firmware timestamps are 5 ms apart (a late writer skips to a
    # multiple): the median gap is the cache interval, in 10 ns ticks.
    assert period == 5_000_000.0
    steps = np.diff(samples["source_ts"].astype(np.int64)) * 10
    assert np.all(steps % 5_000_000 == 0) and np.median(steps) == 5_000_000
    assert np.median(samples["total"]) == pytest.approx(100.0, rel=1e-6)


def test_period_follows_the_driver_not_a_constant(tmp_path):
    # A driver that caches for 2 ms gives 2 ms: nothing is hard-coded.
    path = tmp_path / "gpu_metrics"
    with fake_amd.CachedGpuMetricsFile(path, cache_ns=2_000_000, tag_bytes=4, fields=fake_amd.SMU_13_0_6_V2):
        period, _ = amd.measure_logger_period(_core.GpuMetricsSource(str(path)), span_ns=100_000_000)
    assert period == 2_000_000.0


def test_period_of_hwmon_is_measured_from_value_changes(tmp_path):
    # hwmon's files carry no timestamp (native_period_ns 0); the period was
    # taken as 1 ms before. A value that changes every 20 ms gives about 20 ms.
    path = tmp_path / "power1_average"
    path.write_text("100000000\n")
    src = _core.HwmonPowerSource(str(path))
    assert src.info.native_period_ns == 0
    with fake_amd.toggling_hwmon(path, 100_000_000):
        period, _ = amd.measure_logger_period(src, span_ns=250_000_000)
    assert 15e6 < period < 40e6
    assert amd_sensors.power_semantics(src).provenance == {"period": "measured", "window": "assumed", "delay": "assumed",
                                                   "tick": "documented"}


def test_period_needs_distinct_logs(tmp_path):
    path = tmp_path / "gpu_metrics"
    path.write_bytes(fake_amd.build_v19(fake_amd.SMU_13_0_6_ROCM, {"energy_accumulator": 1, "firmware_timestamp": 2}))
    src = _core.GpuMetricsSource(str(path))
    with pytest.raises(RuntimeError, match=r"0 distinct log\(s\) in \d+ ms of idle, too few to tell the logger period"):
        amd.measure_logger_period(src, span_ns=20_000_000, max_span_ns=40_000_000)
    for kwargs, name in (({"poll_ns": 1}, "poll_ns"), ({"min_logs": 2}, "min_logs"), ({"span_ns": 10}, "span_ns"),
                         ({"span_ns": 10**8, "max_span_ns": 10**7}, "max_span_ns")):
        with pytest.raises(ValueError, match=name):
            amd.measure_logger_period(src, **kwargs)


def test_power_semantics_names_each_mode(tmp_path):
    path = tmp_path / "gpu_metrics"
    path.write_bytes(fake_amd.build_v19(fake_amd.SMU_13_0_6_ROCM, {"energy_accumulator": 1, "firmware_timestamp": 2,
                                                                 "curr_socket_power": 90}))
    energy = amd_sensors.power_semantics(_core.GpuMetricsSource(str(path)))
    assert energy.mode == "gpu_metrics energy" and energy.provenance["window"] == "measured"
    socket = amd_sensors.power_semantics(_core.GpuMetricsSource(str(path), channel="socket"))
    assert socket.mode == "gpu_metrics socket" and socket.provenance["window"] == "assumed"
    boot = amd_sensors.power_semantics(_core.GpuMetricsSource(str(path), clock="boottime"))
    assert boot.mode == "gpu_metrics energy (boottime clock)" and "1 ns" in dict(
        (f, d) for f, _, d in boot.figures)["tick"]
    ns = tmp_path / "gpu_metrics_ns"  # a 1.9 table whose firmware clock is in ns
    ns.write_bytes(struct.pack("<HBBiQQQQ", 40, 1, 9, 2, fake_amd.enc_attr(0, 6, 7, 1), 1,
                               fake_amd.enc_attr(fake_amd.UNIT_TIME_1, 6, 32, 1), 2))
    tick = dict((f, d) for f, _, d in amd_sensors.power_semantics(_core.GpuMetricsSource(str(ns))).figures)["tick"]
    assert tick.startswith("1 ns: firmware_timestamp's unit in this 1.9 table")
    inp = tmp_path / "power1_input"
    inp.write_text("5\n")
    assert amd_sensors.power_semantics(_core.HwmonPowerSource(str(inp))).provenance["window"] == "documented"
    with pytest.raises(ValueError, match="power="):
        amd_sensors.power_semantics(SimGPU(seed=1, realtime=True).power_source())
    # Every mode states all four figures.
    for sem in amd_sensors.AMD_SENSORS.values():
        assert [f for f, _, _ in sem.figures] == ["period", "window", "delay", "tick"]
        assert sem.provenance["period"] == "measured"


@pytest.fixture(params=["1.9", "1.8"])
def fake_mi300(request, tmp_path, monkeypatch):
    """A MI300X the backend can drive: sysfs, a HIP runtime that sees it, a 5 ms caching driver (1.9 or 1.8 tables)."""
    root = tmp_path / "sys"
    gm = fake_amd.make_sysfs(root, fake_amd.build_v19(fake_amd.SMU_13_0_6_ROCM, {}))
    fake_amd.install_fake_hip(monkeypatch)
    with fake_amd.CachedGpuMetricsFile(gm, cache_ns=5_000_000, power_w=120.0, revision=request.param):
        yield root


def test_backend_measures_the_period_and_follows_it(fake_mi300, monkeypatch):
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        time.sleep(s)

    monkeypatch.setattr(amd, "time", types.SimpleNamespace(sleep=sleep))
    backend = amd.AmdBackend(sysfs_root=str(fake_mi300), clock="hip", max_idle_ns=1_000_000_000)
    caps = backend.capabilities
    # Measured at start from distinct firmware timestamps (was a fixed 1 ms).
    assert caps.logger_period_ns == 5_000_000.0
    assert caps.logger_window_ns == 5_000_000.0  # an energy log averages over the gap between tables
    assert caps.logger_clock == "amd-pmfw-10ns" and caps.logger_tick_ns == 10.0
    assert caps.provenance == {"period": "measured", "window": "measured", "delay": "assumed", "tick": "documented"}
    assert caps.sensor_semantics.startswith("gpu_metrics energy: total power = energy_accumulator difference")
    assert caps.describe_figures() == ("period 5 ms (measured), window 5 ms (measured), delay 0 (assumed), "
                                       "tick 10 ns (documented)")
    assert backend.sensor_semantics is amd_sensors.AMD_SENSORS["gpu_metrics energy"]
    # Idle waits in chunks of 20 measured periods.
    slept.clear()
    backend.wait_idle()
    assert slept and slept[0] == pytest.approx(0.1)
    # The post-run tail is two measured periods.
    slept.clear()
    rec = backend.execute_run(Workload("noop", launch=lambda: None), 3, backend.new_run_id())
    assert slept == [pytest.approx(0.01)]
    assert len(rec.markers) == 3 and np.all(rec.markers["end_ticks"] >= rec.markers["begin_ticks"])
    assert np.all(rec.samples["window_ns"] % 5_000_000 == 0)


def test_backend_on_hwmon_measures_the_period(tmp_path, monkeypatch):
    # hwmon's files carry no period (0), which must be measured, not taken as 1 ms.
    root = tmp_path / "sys"
    gm = fake_amd.make_sysfs(root, b"")
    gm.unlink()
    hw = root / "devices" / "pci0000:00" / "0000:c1:00.0" / "hwmon" / "hwmon3" / "power1_average"
    fake_amd.install_fake_hip(monkeypatch)
    with fake_amd.toggling_hwmon(hw, 240_000_000):
        backend = amd.AmdBackend(sysfs_root=str(root), clock="hip")
    caps = backend.capabilities
    assert 15e6 < caps.logger_period_ns < 40e6
    assert caps.logger_window_ns == 0.0 and caps.logger_clock == "host-monotonic-raw"
    assert caps.provenance == {"period": "measured", "window": "assumed", "delay": "assumed", "tick": "documented"}
    assert caps.sensor_semantics.startswith("hwmon power1_average: 'average power used by the SoC in microWatts'")


def test_report_states_the_sensor_it_would_use_without_a_gpu(tmp_path):
    r = amd_report.report(sysfs_root=str(tmp_path), kfd_path=str(tmp_path / "kfd"))
    assert not r.available
    assert r.sensors[0].mode == "gpu_metrics energy"
    assert {s.mode for s in r.sensors} == set(amd_sensors.AMD_SENSORS)
    text = devices.format_reports([r])
    assert "  sensor: gpu_metrics energy: total power = energy_accumulator difference" in text
    assert "    period measured   at start, from the gaps between distinct firmware timestamps" in text
    assert "    window measured   = the period" in text
    assert "    delay  assumed    0" in text
    assert "    tick   documented 10 ns" in text
    assert "also: hwmon power1_average" not in text  # the other modes with --verbose
    verbose = devices.format_reports([r], verbose=True)
    assert "  also: hwmon power1_average" in verbose and "    window assumed    0: the averaging window" in verbose
    d = r.as_dict()["sensors"][0]
    assert d["mode"] == "gpu_metrics energy" and d["figures"]["period"]["provenance"] == "measured"


def test_report_states_the_sensor_of_the_gpu_found(fake_mi300, tmp_path):
    r = amd_report.report(sysfs_root=str(fake_mi300), kfd_path=str(tmp_path / "kfd"))
    assert r.devices[0].details["power"] == "gpu_metrics energy"
    assert r.sensors[0].mode == "gpu_metrics energy"


def test_report_states_hwmon_when_only_hwmon_is_there(tmp_path):
    root = tmp_path / "sys"
    gm = fake_amd.make_sysfs(root, b"")
    gm.unlink()
    r = amd_report.report(sysfs_root=str(root), kfd_path=str(tmp_path / "kfd"))
    assert r.devices[0].details["power"] == "hwmon power1_average"
    assert r.sensors[0].mode == "hwmon power1_average"
    assert "window assumed    0: the averaging window is not documented" in devices.format_reports([r])


# ---------------------------------------------------------------- hip-python and collective workloads


def test_hipblas_workload_arguments_are_checked_first():
    from fingrav_native.backends import _workloads as workloads

    with pytest.raises(ValueError, match="m="):
        workloads.hipblas_gemm(0, 4, 4)
    with pytest.raises(ValueError, match="k="):
        workloads.hipblas_gemv(4, -1)
    with pytest.raises(ValueError, match="dtype"):
        workloads.hipblas_gemm(4, 4, 4, dtype="float16")
    with pytest.raises(ValueError, match="device"):
        workloads.hipblas_gemv(4, 4, device=-1)


def test_hipblas_workload_without_hip_python_says_what_to_install():
    from fingrav_native.backends import _workloads as workloads

    try:
        import hip  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install hip-python"):
            workloads.hipblas_gemm(8, 8, 8)
    else:
        pytest.skip("hip-python is installed here")


def test_torch_collective_arguments_are_checked_first():
    from fingrav_native.backends import _workloads as workloads

    with pytest.raises(ValueError, match="op="):
        workloads.torch_collective("broadcast", 1024)
    with pytest.raises(ValueError, match="nbytes"):
        workloads.torch_collective("all_reduce", 0)
