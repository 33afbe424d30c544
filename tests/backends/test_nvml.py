"""The NVML power source against a fake libnvidia-ml built at test time.

No NVIDIA GPU is needed: tests/fakes/fake_nvml.c implements the NVML
functions fingrav resolves, with the behaviour nvml.h documents, over a state
the tests set through its fake_nvml_* control functions. ctypes opens the
same file the core opens, so both share one copy of that state.
"""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from fingrav_native import _core
from fingrav_native.native import FLAG_DERIVED, FLAG_SOURCE_GAP, Sampler

FAKE_SOURCE = Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.c"

# fake_nvml_set_supported bits and fake_nvml_fail_next function ids (fake_nvml.c).
SUP_SAMPLES, SUP_INSTANT, SUP_AVERAGE, SUP_ENERGY_FIELD, SUP_ENERGY_FN, SUP_USAGE, SUP_MODULE = 1, 2, 4, 8, 16, 32, 64
SUP_ALL = 127
FN_SAMPLES, FN_FIELDS, FN_ENERGY, FN_USAGE = 0, 1, 2, 3
# nvmlReturn_t values (nvml.h).
NOT_SUPPORTED, NOT_FOUND, DRIVER_NOT_LOADED, GPU_IS_LOST, UNKNOWN = 3, 6, 9, 15, 999
FI_ENERGY, FI_AVERAGE, FI_INSTANT = 83, 185, 186


def watts(mw: np.ndarray) -> np.ndarray:
    """NVML's milliwatts as the float32 watts a Reading holds."""
    return (np.asarray(mw, dtype=np.float64) / 1000.0).astype(np.float32)


def c_compiler() -> str:
    """The system C compiler; a failure, not a skip, when there is none (the package needs one)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.fail("no C compiler (cc, gcc or clang) found: the NVML tests build a fake libnvidia-ml with it")
    return cc


@pytest.fixture(scope="session")
def fake_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fake_nvml") / "libnvidia-ml-fake.so"
    subprocess.run(
        [c_compiler(), "-std=c99", "-shared", "-fPIC", "-O1", "-pthread", "-o", str(out), str(FAKE_SOURCE)],
        check=True,
    )
    return out


class Fake:
    """ctypes handle on the fake library, with typed control functions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        lib = ctypes.CDLL(str(path))
        u, ull, ll, i = ctypes.c_uint, ctypes.c_ulonglong, ctypes.c_longlong, ctypes.c_int
        sigs = {
            "fake_nvml_reset": [],
            "fake_nvml_set_device_count": [u],
            "fake_nvml_set_init_result": [i],
            "fake_nvml_set_supported": [u, u],
            "fake_nvml_set_arch": [u, u, i, i],
            "fake_nvml_set_sample_capacity": [u, u],
            "fake_nvml_set_sample_format": [u, i, i],
            "fake_nvml_push_sample": [u, ull, u],
            "fake_nvml_overwritten": [u],
            "fake_nvml_set_field": [u, u, ll, ull],
            "fake_nvml_set_usage": [u, u],
            "fake_nvml_set_identity": [u, ctypes.c_char_p, u],
            "fake_nvml_set_refresh": [u, ull, u],
            "fake_nvml_set_c2c": [u, i, u],
            "fake_nvml_set_memory": [u, i, u],
            "fake_nvml_fail_next": [i, i, i],
            "fake_nvml_fail_after": [i, i, i, i],
            "fake_nvml_init_calls": [],
            "fake_nvml_shutdown_calls": [],
            "fake_nvml_samples_calls": [],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = ull if name in ("fake_nvml_overwritten", "fake_nvml_samples_calls") else i
            setattr(self, name[len("fake_nvml_"):], fn)
        self.lib = lib

    def push(self, ts_us: int, mw: int, dev: int = 0) -> None:
        self.push_sample(dev, ts_us, mw)  # type: ignore[attr-defined]


@pytest.fixture
def fake(fake_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    # Sources from an earlier test must be gone, so NVML is loaded afresh
    # (the core keeps one NVML per process only while something uses it).
    gc.collect()
    monkeypatch.setenv("FINGRAV_NVML_LIBRARY", str(fake_path))
    f = Fake(fake_path)
    f.reset()  # type: ignore[attr-defined]
    yield f
    gc.collect()


# ---------------------------------------------------------------- loading


def test_absent_library_names_every_path_tried_and_what_to_install(tmp_path, monkeypatch):
    missing = tmp_path / "no-such-libnvidia-ml.so.1"
    monkeypatch.setenv("FINGRAV_NVML_LIBRARY", str(missing))
    with pytest.raises(_core.LibraryNotFoundError) as e:
        _core.nvml_library_path()
    msg = str(e.value)
    assert "NVML (libnvidia-ml)" in msg and str(missing) in msg
    assert "Install the NVIDIA driver (it ships libnvidia-ml.so.1)" in msg
    assert "FINGRAV_NVML_LIBRARY" in msg
    for call in (_core.nvml_devices, lambda: _core.NvmlPowerSource(0, "samples")):
        with pytest.raises(_core.LibraryNotFoundError):
            call()


def test_default_search_tries_unversioned_then_versioned_names_in_driver_folders(monkeypatch):
    monkeypatch.delenv("FINGRAV_NVML_LIBRARY", raising=False)
    try:
        path = _core.nvml_library_path()
    except _core.LibraryNotFoundError as e:
        msg = str(e)
        assert msg.index("libnvidia-ml.so:") < msg.index("libnvidia-ml.so.1:")
        for d in ("/usr/lib/x86_64-linux-gnu/", "/usr/local/nvidia/lib64/", "/usr/lib/wsl/lib/"):
            assert d + "libnvidia-ml.so.1" in msg
    else:  # a machine with the NVIDIA driver
        assert "libnvidia-ml" in path


def test_library_path_is_the_override(fake):
    assert _core.nvml_library_path() == str(fake.path)


def test_library_without_nvml_symbols_is_a_symbol_error(tmp_path, monkeypatch):
    empty = tmp_path / "libempty.so"
    src = tmp_path / "empty.c"
    src.write_text("int fake_unrelated(void) { return 0; }\n")
    subprocess.run([c_compiler(), "-shared", "-fPIC", "-o", str(empty), str(src)], check=True)
    monkeypatch.setenv("FINGRAV_NVML_LIBRARY", str(empty))
    with pytest.raises(_core.SymbolNotFoundError, match="nvmlInit_v2"):
        _core.nvml_devices()


def test_failed_init_is_device_unavailable_with_nvml_reason(fake):
    fake.set_init_result(DRIVER_NOT_LOADED)
    with pytest.raises(_core.DeviceUnavailableError, match=r"Driver Not Loaded \(NVML error 9\).*not loaded"):
        _core.nvml_devices()


def test_no_device_lists_nothing_and_a_source_is_unavailable(fake):
    fake.set_device_count(0)
    assert _core.nvml_devices() == []
    with pytest.raises(_core.DeviceUnavailableError, match="sees 0 GPU"):
        _core.NvmlPowerSource(0)


def test_init_and_shutdown_are_balanced_and_shared(fake):
    init0, shut0 = fake.init_calls(), fake.shutdown_calls()
    a = _core.NvmlPowerSource(0, "usage")
    b = _core.NvmlPowerSource(0, "instant")
    _core.nvml_devices()
    # One nvmlInit for everything alive at once; shutdown when the last goes.
    assert fake.init_calls() - init0 == 1 and fake.shutdown_calls() - shut0 == 0
    del a, b
    gc.collect()
    assert fake.init_calls() - init0 == 1 and fake.shutdown_calls() - shut0 == 1
    _core.nvml_devices()
    assert fake.init_calls() - init0 == 2 and fake.shutdown_calls() - shut0 == 2


# ---------------------------------------------------------------- enumeration


def test_devices_enumerated_with_probed_modes(fake):
    fake.set_device_count(2)
    fake.set_supported(1, SUP_ENERGY_FN | SUP_USAGE)
    devs = _core.nvml_devices()
    assert [d["index"] for d in devs] == [0, 1]
    d0, d1 = devs
    assert d0["name"] == "Fake GPU 0" and d1["name"] == "Fake GPU 1"
    assert d0["uuid"].startswith("GPU-") and d0["uuid"] != d1["uuid"]
    assert d0["pci_bus_id"] == "00000000:41:00.0" and d1["pci_bus_id"] == "00000000:42:00.0"
    assert d0["power_limit_w"] == 700.0
    assert d0["architecture"] == 9 and d0["compute_capability"] == (9, 0)
    assert d0["modes"] == ["samples", "instant", "average", "energy", "usage"] and d0["unsupported"] == {}
    assert d0["energy_from_field"] is True and d0["sample_buffer"] == 100
    assert d0["driver_version"] == "999.99.99" and d0["library_path"] == str(fake.path)
    # Device 1: only the energy function and power usage work.
    assert d1["modes"] == ["energy", "usage"] and d1["energy_from_field"] is False
    assert set(d1["unsupported"]) == {"samples", "instant", "average"}
    assert "nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES): Not Supported (NVML error 3)" in d1["unsupported"]["samples"]
    assert "NVML_FI_DEV_POWER_INSTANT" in d1["unsupported"]["instant"]
    assert _core.NVML_MODES == ("samples", "instant", "average", "energy", "usage")


def test_unsupported_mode_names_the_mode_and_what_the_gpu_supports(fake):
    fake.set_supported(0, SUP_INSTANT | SUP_USAGE)
    with pytest.raises(_core.DeviceUnavailableError) as e:
        _core.NvmlPowerSource(0, "samples")
    msg = str(e.value)
    assert "does not support mode 'samples'" in msg and "Not Supported" in msg
    assert "Modes it supports: 'instant', 'usage'" in msg


def test_bad_arguments_are_value_errors(fake):
    with pytest.raises(ValueError, match="mode='power'"):
        _core.NvmlPowerSource(0, "power")
    with pytest.raises(ValueError, match="device=-1"):
        _core.NvmlPowerSource(-1)
    with pytest.raises(_core.DeviceUnavailableError, match="no device 3"):
        _core.NvmlPowerSource(3)


# ---------------------------------------------------------------- samples mode


def test_samples_mode_declares_clock_and_units(fake):
    for k in range(5):
        fake.push(1_000_000 + 20_000 * k, 300_000 + k)
    src = _core.NvmlPowerSource()
    info = src.info
    assert src.mode == "samples" and src.device == 0 and src.library_path == str(fake.path)
    assert info.clock_domain == "nvml-host-us" and info.tick_ns == 1000.0
    assert info.channels == ["total"] and not info.has_sequence
    # Nothing in nvml.h says what a power sample averages over.
    assert info.window_ns == 0 and src.window_documented is False and src.window_reference == ""
    # The period measured from the buffer at construction: 20 ms.
    assert info.native_period_ns == 20_000_000
    for k in range(5, 10):
        fake.push(1_000_000 + 20_000 * k, 300_000 + k)
    r = src.poll()
    np.testing.assert_array_equal(r["source_ts"], 1_000_000 + 20_000 * np.arange(5, 10))
    np.testing.assert_array_equal(r["total"], watts(300_000 + np.arange(5, 10)))
    assert np.all(np.isnan(r["compute"])) and np.all(np.isnan(r["memory"]))
    assert np.all(r["flags"] == 0) and np.all(r["window_ns"] == 0)


def test_first_fetch_starts_after_the_drivers_history(fake):
    # LastSeenTimeStamp 0 returns the driver's whole buffer
    # (nvml.h, nvmlDeviceGetSamples), here a busy minute before the source
    # existed; an idle baseline taken from the first poll would include it.
    for k in range(40):
        fake.push(1_000_000 + 20_000 * k, 650_000)  # old, busy
    src = _core.NvmlPowerSource()
    assert src.info.native_period_ns == 20_000_000  # the history still gives the driver's period
    assert len(src.poll()) == 0
    for k in range(40, 50):
        fake.push(1_000_000 + 20_000 * k, 90_000)  # idle, after the source started
    r = src.poll()
    np.testing.assert_array_equal(r["source_ts"], 1_000_000 + 20_000 * np.arange(40, 50))
    assert np.all(r["total"] == np.float32(90.0))


def test_a_failed_history_fetch_starts_from_now_not_from_the_whole_history(fake):
    # When the constructor's history fetch fails, lastSeenTimeStamp stayed 0 and the first
    # poll returned the driver's whole buffer again (a busy minute before the source existed).
    now_us = time.time_ns() // 1000
    for k in range(40):
        fake.push(now_us - 60_000_000 + 20_000 * k, 650_000)  # old, busy, stamped in CPU microseconds
    fake.fail_after(FN_SAMPLES, 1, UNKNOWN, 1)  # the probe succeeds, the history fetch fails
    src = _core.NvmlPowerSource()
    later = time.time_ns() // 1000 + 1_000
    for k in range(5):
        fake.push(later + 20_000 * k, 90_000)  # idle, after the source started
    r = src.poll()
    np.testing.assert_array_equal(r["source_ts"], later + 20_000 * np.arange(5))
    assert np.all(r["total"] == np.float32(90.0))


def test_samples_only_new_ones_each_poll_and_not_found_is_empty(fake):
    src = _core.NvmlPowerSource()
    fake.push(10, 1000)
    fake.push(20, 2000)
    assert list(src.poll()["source_ts"]) == [10, 20]
    calls = fake.samples_calls()
    # No sample newer than the last seen: NVML_ERROR_NOT_FOUND, an empty poll, not an error.
    assert len(src.poll()) == 0
    assert fake.samples_calls() == calls + 1
    fake.push(30, 3000)
    fake.push(40, 4000)
    r = src.poll()
    assert list(r["source_ts"]) == [30, 40] and list(r["total"]) == [3.0, 4.0]


def test_samples_sorted_oldest_first_whatever_order_nvml_returns(fake):
    fake.set_sample_format(0, 0, 1)  # doubles, newest first
    fake.push(4, 4000)
    src = _core.NvmlPowerSource()
    for ts in (5, 6, 7, 8):
        fake.push(ts, ts * 1000)
    r = src.poll()
    assert list(r["source_ts"]) == [5, 6, 7, 8]
    assert list(r["total"]) == [5.0, 6.0, 7.0, 8.0]


def test_more_samples_than_one_poll_returns_are_handed_out_over_polls(fake):
    fake.set_sample_capacity(0, 1000)
    n = 300
    src = _core.NvmlPowerSource()
    assert src.sample_capacity == 1000
    for k in range(n):
        fake.push(1000 + k, 100_000 + k)
    got = []
    while True:
        r = src.poll()
        assert len(r) <= 128  # kMaxReadingsPerPoll
        if len(r) == 0:
            break
        got.append(r)
    all_ = np.concatenate(got)
    assert len(got) == 3
    np.testing.assert_array_equal(all_["source_ts"], 1000 + np.arange(n))
    np.testing.assert_array_equal(all_["total"], watts(100_000 + np.arange(n)))
    assert src.possible_overruns == 0


def test_a_wrapped_driver_buffer_is_flagged(fake):
    fake.set_sample_capacity(0, 128)  # as small as our fetch buffer
    src = _core.NvmlPowerSource()
    assert src.sample_capacity == 128
    fake.push(1, 1000)
    assert len(src.poll()) == 1
    for k in range(200):  # more than the ring holds: 73 overwritten
        fake.push(2 + k, 1000)
    assert fake.overwritten(0) == 73
    r = src.poll()
    assert len(r) == 128 and r["source_ts"][0] == 2 + 72
    assert r["flags"][0] == FLAG_SOURCE_GAP and np.all(r["flags"][1:] == 0)
    assert src.possible_overruns == 1


def test_samples_errors_transient_and_fatal(fake):
    src = _core.NvmlPowerSource()
    fake.push(1, 1000)
    fake.fail_next(FN_SAMPLES, UNKNOWN, 1)
    with pytest.raises(RuntimeError, match=r"transient error: nvmlDeviceGetSamples: Unknown Error \(NVML error 999\)"):
        src.poll()
    assert len(src.poll()) == 1
    fake.fail_next(FN_SAMPLES, GPU_IS_LOST, 1)
    with pytest.raises(RuntimeError, match="fatal error: nvmlDeviceGetSamples: GPU is lost"):
        src.poll()


# ---------------------------------------------------------------- field values


@pytest.mark.parametrize("mode,field,window", [("instant", FI_INSTANT, 25_000_000), ("average", FI_AVERAGE, 1_000_000_000)])
def test_field_modes_carry_nvml_timestamps_and_windows(fake, mode, field, window):
    fake.set_field(0, field, 1_700_000_000_000_001, 412_345)
    src = _core.NvmlPowerSource(0, mode)  # the fake is an H100 (compute capability 9.0)
    assert src.info.window_ns == window
    # "average": nvml.h's 1 s average; "instant" on H100: 25 ms of every 100 ms (SC'24).
    assert src.window_documented is True
    assert ("nvml.h" if mode == "average" else "SC'24") in src.window_reference
    # The first value only sets the baseline: when it appeared is unknown.
    assert len(src.poll()) == 0
    fake.set_field(0, field, 1_700_000_000_100_001, 412_346)
    r = src.poll()
    assert len(r) == 1 and r["source_ts"][0] == 1_700_000_000_100_001
    assert r["total"][0] == np.float32(412.346) and r["window_ns"][0] == window and r["flags"][0] == 0
    fake.set_field(0, field, 1_700_000_000_200_500, 100_000)
    r = src.poll()
    assert r["source_ts"][0] == 1_700_000_000_200_500 and r["total"][0] == 100.0


@pytest.mark.parametrize("cc,window,documented", [
    ((9, 0), 25_000_000, True),   # H100/H200 (GH100): 25 ms of every 100 ms, Yang et al. SC'24
    ((8, 0), 25_000_000, True),   # A100 (GA100): the same
    ((8, 6), 0, False),           # GA10x: nothing published
    ((10, 0), 0, False),          # Blackwell: nothing published
    ((-1, -1), 0, False),         # unknown
])
def test_instant_window_is_the_published_one_on_a100_and_h100_only(fake, cc, window, documented):
    # The window was passed as 0, so the error budget ignored
    # the 25 ms the instant field averages on A100/H100.
    fake.set_arch(0, 9 if cc[0] >= 9 else 7, *cc)
    src = _core.NvmlPowerSource(0, "instant")
    assert src.info.window_ns == window and src.window_documented is documented
    assert bool(src.window_reference) is documented


@pytest.mark.parametrize("mode,field", [("instant", FI_INSTANT), ("average", FI_AVERAGE)])
def test_field_value_repeated_under_new_query_timestamps_is_not_a_new_log(fake, mode, field):
    # Nvml.h calls the field's timestamp the "CPU Timestamp
    # of this value"; a driver that stamps the query gives a new stamp to the
    # same cached value on every poll. Deduplicating on the stamp alone kept each.
    src = _core.NvmlPowerSource(0, mode)
    fake.set_field(0, field, 1_000_000, 300_000)
    assert len(src.poll()) == 0
    for k in range(1, 40):
        fake.set_field(0, field, 1_000_000 + 1_000 * k, 300_000)  # polled every 1 ms, refreshed every 100 ms
        assert len(src.poll()) == 0
    assert src.unchanged_polls == 39
    fake.set_field(0, field, 1_100_000, 305_000)
    r = src.poll()
    assert len(r) == 1 and r["source_ts"][0] == 1_100_000 and r["total"][0] == 305.0
    # A new value under a stamp that did not advance is kept, stamped when seen.
    fake.set_field(0, field, 1_100_000, 306_000)
    before = time.time_ns() // 1000
    r = src.poll()
    assert len(r) == 1 and r["total"][0] == 306.0 and int(r["source_ts"][0]) >= before
    assert src.restamped == 1


def test_a_failing_field_value_is_reported_with_its_own_code(fake):
    src = _core.NvmlPowerSource(0, "instant")
    fake.set_supported(0, SUP_ALL & ~SUP_INSTANT)
    with pytest.raises(RuntimeError, match=r"fatal error: nvmlDeviceGetFieldValues \(field value\): Not Supported"):
        src.poll()


# ---------------------------------------------------------------- power scope (Grace Hopper)


def _first_change(src, fake, field: int, mw: int) -> float:
    """The watts of the first change a field source logs (its first read is only a baseline)."""
    fake.set_field(0, field, 1_000_000, mw)
    assert len(src.poll()) == 0
    fake.set_field(0, field, 1_100_000, mw + 1_000)
    r = src.poll()
    assert len(r) == 1
    return float(r["total"][0])


def test_a_discrete_board_reads_the_gpu_and_refuses_module_scope_saying_why(fake):
    # The fake's default: the C2C query answers NOT_SUPPORTED, as on a PCIe or SXM board.
    dev = _core.nvml_devices()[0]
    assert dev["c2c_enabled"] is None
    assert dev["field_scopes"] == {"instant": ["gpu"], "average": ["gpu"]}
    src = _core.NvmlPowerSource(0, "instant")
    assert src.scope == "gpu" and "not a Grace Hopper" in src.scope_reference
    assert not src.info.name.endswith(":module")
    with pytest.raises(_core.DeviceUnavailableError, match=r"cannot read scope 'module'.*Grace Hopper.*C2C"):
        _core.NvmlPowerSource(0, "instant", scope="module")
    fake.set_c2c(0, 0, 0)  # the query works, C2C off
    assert _core.nvml_devices()[0]["c2c_enabled"] is False
    with pytest.raises(_core.DeviceUnavailableError, match="C2C is not enabled"):
        _core.NvmlPowerSource(0, "average", scope="module")


@pytest.mark.parametrize("mode,field", [("instant", FI_INSTANT), ("average", FI_AVERAGE)])
def test_grace_hopper_reads_the_module_by_default_as_zeus_does(fake, mode, field):
    # The power fields always read GPU scope; Zeus (zeus/device/gpu/nvidia.py) reads
    # NVML_POWER_SCOPE_MODULE wherever nvmlDeviceGetC2cModeInfoV says C2C is enabled.
    fake.set_c2c(0, 1, 150_000)  # the Grace CPU and its memory draw 150 W more than the GPU alone
    dev = _core.nvml_devices()[0]
    assert dev["c2c_enabled"] is True and dev["field_scopes"][mode] == ["gpu", "module"]
    module = _core.NvmlPowerSource(0, mode)
    assert module.scope == "module" and "Zeus" in module.scope_reference
    assert module.info.name == f"nvml:0:{mode}:module"
    assert _first_change(module, fake, field, 300_000) == 451.0
    del module
    gpu = _core.NvmlPowerSource(0, mode, scope="gpu")
    assert gpu.scope == "gpu" and gpu.info.name == f"nvml:0:{mode}"
    assert _first_change(gpu, fake, field, 300_000) == 301.0


def test_grace_hopper_falls_back_to_the_gpu_when_the_module_field_fails_and_says_so(fake):
    fake.set_c2c(0, 1, 150_000)
    fake.set_supported(0, SUP_ALL & ~SUP_MODULE)
    src = _core.NvmlPowerSource(0, "instant")
    assert src.scope == "gpu" and "module's field fails" in src.scope_reference
    assert "NVML_POWER_SCOPE_MODULE" in src.scope_reference and "Not Supported" in src.scope_reference
    with pytest.raises(_core.DeviceUnavailableError, match="cannot read scope 'module'"):
        _core.NvmlPowerSource(0, "instant", scope="module")


def test_a_module_only_field_works_and_gpu_scope_is_refused_naming_the_one_that_works(fake):
    fake.set_c2c(0, 1, 100_000)
    fake.set_supported(0, SUP_ALL & ~SUP_INSTANT)
    dev = _core.nvml_devices()[0]
    assert "instant" in dev["modes"] and dev["field_scopes"]["instant"] == ["module"]
    assert _core.NvmlPowerSource(0, "instant").scope == "module"
    with pytest.raises(_core.DeviceUnavailableError, match=r"cannot read scope 'gpu'.*scope 'module' works"):
        _core.NvmlPowerSource(0, "instant", scope="gpu")


def test_scope_is_checked_by_name(fake):
    with pytest.raises(ValueError, match="scope='board'"):
        _core.NvmlPowerSource(0, "instant", scope="board")
    with pytest.raises(ValueError, match="scope='module': only the field modes"):
        _core.NvmlPowerSource(0, "energy", scope="module")
    fake.set_c2c(0, 1, 100_000)
    src = _core.NvmlPowerSource(0, "energy")  # no scope argument in nvml.h: the GPU, said so
    assert src.scope == "gpu" and "no scope argument" in src.scope_reference


# ---------------------------------------------------------------- energy


def test_energy_field_power_is_exact_difference_quotient(fake):
    fake.set_field(0, FI_ENERGY, 5_000_000, 1_000_000)
    src = _core.NvmlPowerSource(0, "energy")
    assert src.window_documented is True
    assert len(src.poll()) == 0  # the first read is only a baseline
    # The first move anchors the baseline (the first value's age is unknown).
    fake.set_field(0, FI_ENERGY, 5_050_000, 1_010_000)
    assert len(src.poll()) == 0
    # 30 J over 100 ms = 300 W
    fake.set_field(0, FI_ENERGY, 5_150_000, 1_040_000)
    r = src.poll()
    assert len(r) == 1 and r["source_ts"][0] == 5_150_000
    assert r["total"][0] == 300.0 and r["flags"][0] == FLAG_DERIVED and r["window_ns"][0] == 100_000_000
    assert len(src.poll()) == 0  # same timestamp, same counter: nothing new
    # 1 mJ over 3 us = 333.33 W
    fake.set_field(0, FI_ENERGY, 5_150_003, 1_040_001)
    r = src.poll()
    assert r["total"][0] == np.float32(1000.0 / 3.0) and r["window_ns"][0] == 3000
    # The counter going back (driver reload) re-baselines instead of a negative power.
    fake.set_field(0, FI_ENERGY, 5_200_000, 10)
    assert len(src.poll()) == 0 and src.energy_resets == 1
    fake.set_field(0, FI_ENERGY, 5_250_000, 5_010)
    assert len(src.poll()) == 0  # anchored again
    fake.set_field(0, FI_ENERGY, 5_350_000, 25_010)
    assert src.poll()["total"][0] == 200.0


def test_slow_refreshing_energy_counter_gives_no_zero_then_spike(fake):
    # The counter refreshes every 50 ms here while it is
    # polled every 1 ms and its timestamp advances on every poll. Differencing
    # each poll gave 0 W, 0 W, ..., then 50x the power at the refresh.
    fake.set_field(0, FI_ENERGY, 0, 1_000)
    src = _core.NvmlPowerSource(0, "energy")
    got = []
    t, energy = 1_000, 1_000
    for refresh in range(4):
        for _ in range(49):  # polls between refreshes: the cached counter under a new query stamp
            t += 1_000
            fake.set_field(0, FI_ENERGY, t, energy)
            got.append(src.poll())
        t += 1_000
        energy += 15_000  # 15 J per 50 ms = 300 W
        fake.set_field(0, FI_ENERGY, t, energy)
        got.append(src.poll())
    r = np.concatenate(got)
    # Baseline, first move (anchor), then one exact reading per move.
    assert len(r) == 3
    np.testing.assert_array_equal(r["total"], np.float32(300.0))
    np.testing.assert_array_equal(r["window_ns"], 50_000_000)
    assert src.unchanged_polls == 4 * 49 - 1 and np.all(r["flags"] == FLAG_DERIVED)  # the first poll: baseline


def test_energy_function_fallback_is_stamped_on_the_host_realtime_clock(fake):
    fake.set_supported(0, SUP_ALL & ~SUP_ENERGY_FIELD)
    fake.set_field(0, FI_ENERGY, 0, 1_000)
    src = _core.NvmlPowerSource(0, "energy")
    assert src.device_info["energy_from_field"] is False
    assert len(src.poll()) == 0
    assert len(src.poll()) == 0  # unmoved: nothing, however late the stamp
    fake.set_field(0, FI_ENERGY, 0, 2_000)
    before = time.time_ns() // 1000
    assert len(src.poll()) == 0  # the first move anchors
    fake.set_field(0, FI_ENERGY, 0, 7_000)
    time.sleep(0.002)
    r = src.poll()
    after = time.time_ns() // 1000
    ts = int(r["source_ts"][0])
    assert before <= ts <= after
    window_us = r["window_ns"][0] / 1000
    assert window_us >= 2000
    np.testing.assert_allclose(r["total"][0], 5_000 * 1000 / window_us, rtol=1e-3)
    assert r["flags"][0] == FLAG_DERIVED


# ---------------------------------------------------------------- usage


@pytest.mark.parametrize(
    "arch,cc,window,documented",
    [
        (9, (9, 0), 1_000_000_000, True),  # Hopper: 1 s average
        (7, (8, 6), 1_000_000_000, True),  # Ampere GA10x: 1 s average
        (7, (8, 0), 0, True),  # GA100 (A100): instantaneous
        (5, (7, 0), 0, True),  # Volta: instantaneous
        (7, (-1, -1), 0, False),  # Ampere, GA100 or not unknown
        (0xFFFFFFFF, (9, 0), 0, False),  # architecture unknown
    ],
)
def test_usage_window_follows_the_documented_architecture_rule(fake, arch, cc, window, documented):
    fake.set_arch(0, arch, *cc)
    fake.set_usage(0, 250_000)
    src = _core.NvmlPowerSource(0, "usage")
    assert src.info.window_ns == window and src.window_documented is documented
    assert len(src.poll()) == 0  # baseline
    fake.set_usage(0, 250_500)
    r = src.poll()
    assert r["total"][0] == 250.5 and r["window_ns"][0] == window


def test_usage_keeps_a_reading_only_when_the_1s_average_changes(fake):
    # On Ampere and newer the value is a 1 s average that
    # the driver refreshes every ~100 ms (nvml.h, nvmlDeviceGetPowerUsage);
    # stamping and keeping every poll made the logger period the poll period.
    fake.set_usage(0, 300_000)
    src = _core.NvmlPowerSource(0, "usage")
    assert src.info.native_period_ns == 0  # measured from changes, by the backend
    for _ in range(60):  # the same average, repeated over many polls
        assert len(src.poll()) == 0
    assert src.unchanged_polls == 59
    fake.set_usage(0, 300_250)
    r = src.poll()
    assert len(r) == 1 and r["total"][0] == np.float32(300.25) and r["window_ns"][0] == 1_000_000_000


@pytest.mark.parametrize("mode", ["usage", "instant", "average", "energy"])
def test_logger_period_under_the_sampler_is_the_refresh_not_the_poll(fake, mode):
    # The fake refreshes every value (and the energy counter) every 50 ms,
    # stamps fields with the query time, and is polled every 1 ms: the logs'
    # intervals must show the 50 ms refresh, and the
    # energy mode 300 W throughout, never 0 W then a spike.
    fake.set_refresh(0, 50_000, 300_000)
    src = _core.NvmlPowerSource(0, mode)
    with Sampler(src, period_ns=1_000_000) as sampler:
        time.sleep(0.65)
    logs = sampler.drain()
    steps_ms = np.diff(logs["source_ts"].astype(np.float64)) / 1e3
    assert 8 <= len(logs) <= 20, len(logs)  # ~13 refreshes in 0.65 s, not ~650 polls
    assert 45 <= float(np.median(steps_ms)) <= 55, steps_ms
    if mode == "energy":
        # Each log is the counter's move over the interval between the polls that saw it move (its window): a
        # whole number of 15 J refreshes (300 W x 50 ms), never none (0 W) and never a spike's fraction. How
        # late a busy machine's poll sees a move changes that log's interval and so its watts, not the joules:
        # the logs' power over their whole span is 300 W.
        joules = logs["total"].astype(np.float64) * logs["window_ns"] * 1e-9
        refreshes = joules / 15.0
        assert np.all(np.abs(refreshes - np.round(refreshes)) < 1e-3) and np.all(np.round(refreshes) >= 1), joules
        assert joules.sum() / (logs["window_ns"].sum() * 1e-9) == pytest.approx(300.0, rel=0.1), logs["total"]
    else:
        assert np.all((logs["total"] >= 300.0) & (logs["total"] <= 300.04))


# ---------------------------------------------------------------- under the sampler


def test_samples_through_the_sampler_thread_arrive_once_in_order(fake, wait_for):
    fake.set_sample_capacity(0, 400)
    src = _core.NvmlPowerSource()
    for k in range(150):
        fake.push(1_000 + 10 * k, 200_000 + k)
    got = []
    with Sampler(src, period_ns=500_000) as sampler:
        wait_for(lambda: sampler.stats().samples >= 150, "the buffered samples")
        for k in range(150, 400):
            fake.push(1_000 + 10 * k, 200_000 + k)
        wait_for(lambda: sampler.stats().samples >= 400 or not sampler.running, "the pushed samples")
        got.append(sampler.drain())
    got.append(sampler.drain())  # what the final poll brought, if anything
    s = np.concatenate(got)
    st = sampler.stats()
    assert len(s) == 400 and st.read_errors == 0 and st.drops == 0
    np.testing.assert_array_equal(s["source_ts"], 1_000 + 10 * np.arange(400))
    np.testing.assert_array_equal(s["total"], watts(200_000 + np.arange(400)))
    # host_ns is CLOCK_MONOTONIC_RAW after the poll that returned the reading.
    assert np.all(np.diff(s["host_ns"]) >= 0)


def test_sampler_stops_with_the_nvml_error_when_the_gpu_is_lost(fake, wait_for):
    src = _core.NvmlPowerSource()
    fake.push(1, 1000)
    sampler = Sampler(src, period_ns=500_000)
    sampler.start()
    wait_for(lambda: sampler.stats().samples >= 1, "the first sample")
    fake.fail_next(FN_SAMPLES, GPU_IS_LOST, 1)
    wait_for(lambda: not sampler.running, "the sampler to stop on the fatal error")
    with pytest.raises(_core.SamplerError, match="GPU is lost"):
        sampler.stop()


def test_usage_is_stamped_on_the_host_realtime_clock(fake):
    fake.set_usage(0, 1)
    src = _core.NvmlPowerSource(0, "usage")
    assert len(src.poll()) == 0
    fake.set_usage(0, 0)
    before = time.time_ns() // 1000
    r = src.poll()
    after = time.time_ns() // 1000
    assert r["total"][0] == 0.0 and before <= int(r["source_ts"][0]) <= after
    fake.fail_next(FN_USAGE, UNKNOWN, 1)
    with pytest.raises(RuntimeError, match="transient error: nvmlDeviceGetPowerUsage: Unknown Error"):
        src.poll()


# ---------------------------------------------------------------- the recorder's energy counter


def test_the_recorder_finds_nvmls_energy_counter_beside_each_mode(fake):
    from fingrav_native.app._open import _nvml_counter

    fake.set_field(0, FI_ENERGY, 0, 1_000)
    # Samples mode: a second source in energy mode reads the counter, stamped by NVML's field (mJ quantum).
    spec = _nvml_counter(0, "samples", _core.NvmlPowerSource(0, "samples"))
    assert spec is not None and spec.source is not None and spec.source.info.name == "nvml:0:energy"
    assert spec.quantum_j == 1e-3 and spec.stamped and spec.scope == "gpu"
    # Energy mode: the logs are the counter's steps; nothing more to poll.
    spec = _nvml_counter(0, "energy", _core.NvmlPowerSource(0, "energy"))
    assert spec is not None and spec.source is None and spec.quantum_j == 1e-3
    # The function fallback stamps the read, so a value may be a poll period stale.
    fake.set_supported(0, SUP_ALL & ~SUP_ENERGY_FIELD)
    spec = _nvml_counter(0, "instant", _core.NvmlPowerSource(0, "instant"))
    assert spec is not None and not spec.stamped
    # A backend's own source (an NvidiaBackend passed to the recorder) finds it the same way.
    from fingrav_native.app._open import counter_of_source

    spec = counter_of_source(_core.NvmlPowerSource(0, "instant"))
    assert spec is not None and spec.source is not None and spec.source.info.name == "nvml:0:energy"
    # No counter at all: none.
    fake.set_supported(0, SUP_ALL & ~SUP_ENERGY_FIELD & ~SUP_ENERGY_FN)
    assert _nvml_counter(0, "instant", _core.NvmlPowerSource(0, "instant")) is None


# ---------------------------------------------------------------- memory scope (Hopper)


def test_data_loss_memory_scope_is_read_beside_the_total_on_a_fake_hopper(fake):
    # A Hopper whose driver answers NVML_POWER_SCOPE_MEMORY: the field modes read it in the same call as the
    # total, as the memory channel (GPU memory power, a part of the total).
    fake.set_memory(0, 1, 90_000)
    fake.set_field(0, FI_INSTANT, 1_000, 400_000)
    dev = _core.nvml_devices()[0]
    assert dev["memory_modes"] == ["instant", "average"] and dev["memory_unsupported"] == {}
    src = _core.NvmlPowerSource(0, "instant", "gpu")
    assert src.memory_channel and "NVML_POWER_SCOPE_MEMORY" in src.memory_reference
    assert src.info.channel_mask == (1 << 0) | (1 << 3)
    assert len(src.poll()) == 0  # baseline
    fake.set_memory(0, 1, 120_000)  # memory alone moved: a new log all the same
    fake.set_field(0, FI_INSTANT, 2_000, 400_000)
    r = src.poll()
    assert len(r) == 1 and r["total"][0] == 400.0 and r["memory"][0] == 120.0
    assert np.isnan(r["compute"][0]) and np.isnan(r["io"][0])
    fake.set_field(0, FI_INSTANT, 3_000, 410_000)
    r = src.poll()
    assert r["total"][0] == 410.0 and r["memory"][0] == 120.0 and src.memory_missing == 0


@pytest.mark.parametrize("on, mw, words", [
    (0, 0, "Not Supported"),  # a driver older than the scope refuses it
    (1, 0, "answered 0"),     # a GPU without the memory rail answers SUCCESS with 0 W (Zeus sees this on A40)
])
def test_silently_wrong_memory_channel_without_the_scope_is_absent_never_zero(fake, on, mw, words):
    from fingrav_native.backends._nvidia_report import memory_power_line

    fake.set_memory(0, on, mw)
    fake.set_field(0, FI_INSTANT, 1_000, 400_000)
    dev = _core.nvml_devices()[0]
    assert dev["memory_modes"] == [] and words in dev["memory_unsupported"]["instant"]
    line = memory_power_line(dev)
    assert line.startswith("absent") and words in line and line.count(words) == 1  # said once for the device
    src = _core.NvmlPowerSource(0, "instant")
    assert not src.memory_channel and words in src.memory_reference
    assert src.info.channel_mask == 1
    src.poll()
    fake.set_field(0, FI_INSTANT, 2_000, 410_000)
    r = src.poll()
    assert len(r) == 1 and r["total"][0] == 410.0 and np.isnan(r["memory"][0])


def test_silently_wrong_modes_without_a_scope_argument_carry_no_memory_channel(fake):
    fake.set_memory(0, 1, 90_000)
    src = _core.NvmlPowerSource(0, "usage")
    assert not src.memory_channel and "no scope argument" in src.memory_reference


def test_unclear_device_report_says_once_where_memory_power_is_and_that_it_is_unverified(fake):
    from fingrav_native.backends._nvidia_report import memory_power_line

    fake.set_memory(0, 1, 90_000)
    line = memory_power_line(_core.nvml_devices()[0])
    assert "NVML_POWER_SCOPE_MEMORY" in line and "instant, average" in line
    assert "unverified on hardware: tested on the fake NVML only" in line
    # A build whose NVML layer predates the scope says so rather than nothing.
    assert "does not read" in memory_power_line({"modes": ["samples"]})


def test_data_loss_memory_channel_round_trips_through_a_capture(fake, tmp_path):
    from fingrav_native.app import PowerRecorder
    from fingrav_native.files import load_capture

    # Every value refreshed every 20 ms; memory a quarter of the board plus a ripple of its own.
    fake.set_memory(0, 1, 75_000)
    fake.set_refresh(0, 20_000, 300_000)
    src = _core.NvmlPowerSource(0, "instant")
    with PowerRecorder(src, tmp_path / "power.npz", brackets_every_s=0.05):
        time.sleep(0.3)
    c = load_capture(tmp_path / "power.npz")
    s = c.samples
    assert len(s) >= 5
    mem = s["memory"].astype(np.float64)
    assert np.all(np.isfinite(mem)) and np.all((mem >= 75.0) & (mem <= 75.0 + 0.018))
    assert np.all(mem < s["total"])
    assert np.all(np.isnan(s["compute"])) and np.all(np.isnan(s["io"]))
