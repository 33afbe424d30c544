"""The NVIDIA runtime side: CUDA driver loader, %globaltimer probe, markers, NvidiaBackend.

No NVIDIA GPU is needed. Three kinds of check:

* the loader against absent libraries and this machine (clear errors);
* a stand-in libcuda (tests/cpp/fake_libcuda.cpp, built here with the system
  compiler) that keeps the driver's contract where we could break it
  (contexts pushed, host-mapped flags, JIT log options) and "runs" the probe
  on the host, so the clock source, the marker probe and the backend's run
  loop execute for real. Each runs in a subprocess: the driver is loaded
  once per process;
* the declared prototypes and constants against a real cuda.h, and the probe
  PTX through a real ptxas (from the toolkit or the PyPI wheels
  nvidia-cuda-runtime-cu12 / nvidia-cuda-nvcc-cu12). Under CI (CI set) a
  missing header or ptxas fails instead of skipping.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fingrav_native import _core
from fingrav_native.backends import NVML_MODES, NvidiaBackend, Workload, match_nvml_device
from fingrav_native.backends._nvidia_report import report

REPO = Path(__file__).resolve().parents[2]
FAKE_SRC = REPO / "tests" / "cpp" / "fake_libcuda.cpp"
IN_CI = bool(os.environ.get("CI"))


def _missing(what: str) -> None:
    msg = f"{what} not found; install nvidia-cuda-runtime-cu12 and nvidia-cuda-nvcc-cu12 (see .ci/run)"
    if IN_CI:
        pytest.fail(msg)
    pytest.skip(msg)


def _site_dirs() -> list[str]:
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return [d for d in dict.fromkeys(dirs + [p for p in sys.path if p.endswith("-packages")]) if os.path.isdir(d)]


def _find(rel_in_site: list[str], toolkit_rel: str) -> str | None:
    for d in _site_dirs():
        for rel in rel_in_site:
            hits = sorted(glob.glob(os.path.join(d, rel)))
            if hits:
                return hits[0]
    for root in filter(None, [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]):
        p = os.path.join(root, toolkit_rel)
        if os.path.exists(p):
            return p
    return None


def _cuda_header() -> str:
    h = _find(["nvidia/cuda_runtime/include/cuda.h", "nvidia/cu*/include/cuda.h"], "include/cuda.h")
    if h is None:
        _missing("cuda.h")
    assert h is not None
    return h


def _ptxas() -> str:
    p = _find(["nvidia/cuda_nvcc/bin/ptxas", "nvidia/cu*/bin/ptxas"], "bin/ptxas") or shutil.which("ptxas")
    if p is None:
        _missing("ptxas")
    assert p is not None
    return p


@pytest.fixture(scope="module")
def fake_nvml(tmp_path_factory) -> str:
    """tests/fakes/fake_nvml.c built here; paired with fake_libcuda's device 0 by fake_nvml_set_identity."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    assert cc, "no C compiler: the package itself needs one to build"
    out = tmp_path_factory.mktemp("fakenvml") / "libnvidia-ml-fake.so"
    subprocess.run([cc, "-std=c99", "-shared", "-fPIC", "-O1", "-pthread", "-o", str(out),
                    str(REPO / "tests" / "fakes" / "fake_nvml.c")], check=True)
    return str(out)


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory) -> str:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    assert cxx, "no C++ compiler: the package itself needs one to build"
    out = tmp_path_factory.mktemp("fakecuda") / "libcuda.so.1"
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", str(FAKE_SRC), "-o", str(out)], check=True)
    return str(out)


CATCH = """
import json
from fingrav_native import _core
def attempt(fn):
    try:
        fn()
        return {"ok": True}
    except Exception as e:
        return {"ok": False, "type": type(e).__name__, "msg": str(e)}
"""


def run_py(code: str, env: dict | None = None) -> dict:
    """Runs CATCH + code in a fresh interpreter; it prints one JSON object as its last line."""
    full_env = dict(os.environ)
    full_env.pop("FINGRAV_CUDA_LIBRARY", None)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", CATCH + textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])




# ---------------------------------------------------------------- absent libraries


def test_override_to_a_missing_path_names_it_and_what_to_install(monkeypatch):
    monkeypatch.setenv("FINGRAV_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
    with pytest.raises(_core.LibraryNotFoundError) as e:
        _core.cuda_library_path()
    msg = str(e.value)
    assert "/nonexistent/libcuda.so.1" in msg
    assert "the CUDA driver (libcuda)" in msg
    assert "Install the NVIDIA driver (it ships libcuda.so.1)" in msg
    assert "FINGRAV_CUDA_LIBRARY" in msg
    # An explicit path is not silently replaced by a search.
    assert "libcuda.so:" not in msg
    with pytest.raises(_core.LibraryNotFoundError):
        _core.cuda_devices()


def _gpu_present() -> bool:
    try:
        return len(_core.cuda_devices()) > 0
    except RuntimeError:
        return False


def test_backend_without_a_gpu_says_what_it_looked_for(monkeypatch):
    monkeypatch.delenv("FINGRAV_CUDA_LIBRARY", raising=False)
    if _gpu_present():
        pytest.skip("an NVIDIA GPU is present; the hardware path is exercised by bench/nvidia_validate.py")
    with pytest.raises((_core.LibraryNotFoundError, _core.DeviceUnavailableError)) as e:
        NvidiaBackend()
    assert "libcuda" in str(e.value) or "cuInit" in str(e.value)


def test_report_without_a_gpu_lists_each_component(monkeypatch):
    monkeypatch.delenv("FINGRAV_CUDA_LIBRARY", raising=False)
    if _gpu_present():
        pytest.skip("an NVIDIA GPU is present")
    r = report()
    assert r.backend == "nvidia" and not r.available and r.reason
    names = [c.name for c in r.components]
    assert names[0] == "CUDA driver (libcuda)"
    assert any(n.startswith("NVML") for n in names)
    assert r.as_dict()["backend"] == "nvidia"
    assert "not yet verified" in r.verified_on


@pytest.mark.optional
def test_stub_libcuda_from_a_toolkit_is_named_as_the_stub():
    stubs = sorted(glob.glob("/usr/local/cuda*/lib64/stubs/libcuda.so") +
                   glob.glob("/usr/local/cuda*/targets/*/lib/stubs/libcuda.so") +
                   [p for d in _site_dirs() for p in glob.glob(os.path.join(d, "nvidia/*/lib/stubs/libcuda.so"))])
    if not stubs:
        pytest.skip("no CUDA toolkit stub libcuda.so on this machine (the fake-driver test covers the message)")
    out = run_py("print(json.dumps(attempt(_core.cuda_devices)))", {"FINGRAV_CUDA_LIBRARY": stubs[0]})
    assert not out["ok"] and out["type"] == "DeviceUnavailableError", out
    assert "stub" in out["msg"]


# ---------------------------------------------------------------- the fake driver


@pytest.mark.parametrize("code, words", [
    (34, ["CUDA_ERROR_STUB_LIBRARY (34)", "link-time stub", "FINGRAV_CUDA_LIBRARY"]),
    (100, ["CUDA_ERROR_NO_DEVICE (100)", "CUDA_VISIBLE_DEVICES", "--gpus"]),
    (803, ["CUDA error 803", "update the NVIDIA"]),
])
@pytest.mark.slow
def test_cuinit_failures_become_device_unavailable_with_their_meaning(fake_libcuda, code, words):
    out = run_py("print(json.dumps(attempt(_core.cuda_devices)))",
                 {"FINGRAV_CUDA_LIBRARY": fake_libcuda, "FAKE_CUDA_INIT_RESULT": str(code)})
    assert not out["ok"] and out["type"] == "DeviceUnavailableError", out
    assert "cuInit failed for " + fake_libcuda in out["msg"]
    for w in words:
        assert w in out["msg"], (w, out["msg"])


@pytest.mark.slow
def test_jit_failure_reports_the_drivers_error_log(fake_libcuda):
    out = run_py("print(json.dumps(attempt(lambda: _core.GlobaltimerSource(0))))",
                 {"FINGRAV_CUDA_LIBRARY": fake_libcuda, "FAKE_CUDA_JIT_FAIL": "1"})
    assert not out["ok"], out
    assert "CUDA_ERROR_INVALID_PTX (218)" in out["msg"]
    assert "JIT error log:\nptxas fatal   : fake JIT failure for the test" in out["msg"]


@pytest.mark.slow
def test_device_out_of_range_names_the_count(fake_libcuda):
    out = run_py("print(json.dumps(attempt(lambda: _core.CudaMarkerProbe(3))))",
                 {"FINGRAV_CUDA_LIBRARY": fake_libcuda, "FAKE_CUDA_DEVICES": "2"})
    assert out["type"] == "DeviceUnavailableError" and "device=3" in out["msg"] and "sees 2" in out["msg"]


@pytest.mark.slow
def test_fake_driver_devices_clock_probe_and_events(fake_libcuda):
    out = run_py("""
        import numpy as np
        devs = _core.cuda_devices()
        src = _core.GlobaltimerSource(0)
        b = _core.measure_brackets(src, 32)
        probe = _core.CudaMarkerProbe(0, 8)
        before = probe.values().tolist()
        probe.stamp(0, 1); probe.stamp(0, 5)
        v = probe.values().tolist()
        tail = probe.values(6).tolist()
        bad_slot = attempt(lambda: probe.stamp(0, 8))
        bad_first = attempt(lambda: probe.values(9))
        probe.reset()
        after_reset = probe.values().tolist()
        ev = _core.CudaEventTimer(0, 3)
        ev.record(0, 0); ev.record(0, 2); ev.synchronize(2)
        ms = ev.elapsed_ms(0, 2)
        unrecorded = attempt(lambda: ev.elapsed_ms(0, 1))
        bad_ev = attempt(lambda: ev.record(0, 3))
        print(json.dumps({"devs": devs, "b": b.tolist(), "domain": src.clock_domain, "tick": src.nominal_tick_ns,
                          "steps": src.measure_steps(5).tolist(), "before": before, "v": v, "tail": tail,
                          "bad_slot": bad_slot, "bad_first": bad_first, "after_reset": after_reset, "ms": ms,
                          "unrecorded": unrecorded, "bad_ev": bad_ev, "ver": _core.cuda_driver_version(),
                          "path": _core.cuda_library_path(), "unwritten": _core.CUDA_PROBE_UNWRITTEN}))
    """, {"FINGRAV_CUDA_LIBRARY": fake_libcuda, "FAKE_CUDA_DEVICES": "2"})
    (d0, d1) = out["devs"]
    assert d0["name"] == "Fake NVIDIA H100 0" and d1["index"] == 1
    assert d0["pci_bus_id"] == "0000:18:00.0" and d1["pci_bus_id"] == "0000:19:00.0"
    assert d0["uuid"] == "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"
    assert d0["compute_capability"] == [9, 0] and d0["multiprocessors"] == 132 and d0["can_map_host_memory"]
    assert out["ver"] == 12040 and out["path"] == fake_libcuda
    b = np.array(out["b"], dtype=np.int64)
    assert b.shape == (32, 3) and np.all(b[:, 0] <= b[:, 2])
    # The fake GPU clock is host CLOCK_MONOTONIC_RAW + 1000 s, read inside the bracket.
    offset = b[:, 1] - 10**12
    assert np.all((b[:, 0] <= offset) & (offset <= b[:, 2]))
    assert out["domain"] == "nvidia-globaltimer" and out["tick"] == 1.0
    assert out["steps"] == [32] * 5
    u = out["unwritten"]
    assert u == 2**64 - 1 and out["before"] == [u] * 8 and out["after_reset"] == [u] * 8
    v = out["v"]
    assert [i for i, x in enumerate(v) if x != u] == [1, 5] and v[1] <= v[5]
    assert out["tail"] == [u, u]
    assert out["bad_slot"]["type"] == "IndexError" and "slot=8" in out["bad_slot"]["msg"]
    assert out["bad_first"]["type"] == "IndexError" and "first=9" in out["bad_first"]["msg"]
    assert out["ms"] >= 0
    assert not out["unrecorded"]["ok"] and "cuEventElapsedTime" in out["unrecorded"]["msg"]
    assert out["bad_ev"]["type"] == "IndexError" and "index=3" in out["bad_ev"]["msg"]


@pytest.mark.slow
def test_backend_run_on_the_fake_driver_with_an_external_power_source(fake_libcuda):
    out = run_py("""
        import numpy as np
        from fingrav_native.backends import NvidiaBackend
        from fingrav_native.backends import Workload
        from fingrav_native.backends._base import Backend, MARKER_RECORD_DTYPE
        launches = []
        w = Workload("noop", launch=lambda: launches.append(_core.host_time_ns()), stream=lambda: 0,
                     meta={"what": "test"})
        src = _core.SyntheticSource(period_ns=1_000_000)
        be = NvidiaBackend(0, power_source=src, max_idle_ns=20_000_000, marker_slots=8)
        caps = be.capabilities
        rec = be.execute_run(w, 10, be.new_run_id())   # more executions than slots: the probe grows
        rec2 = be.execute_run(w, 3, be.new_run_id())
        m = rec.markers
        waited = be.wait_idle()
        errs = {
            "kernel": attempt(lambda: be.execute_run("noop", 1, 0)),
            "executions": attempt(lambda: be.execute_run(w, 0, 0)),
            "name": attempt(lambda: be.kernel_name(3)),
        }
        print(json.dumps({
            "protocol": isinstance(be, Backend), "dtype": m.dtype == MARKER_RECORD_DTYPE,
            "caps": [caps.name, caps.logger_clock, caps.device_tick_ns, caps.gpu_markers, caps.marker_err_ns,
                     caps.logger_period_ns, list(caps.channels), caps.virtual_time],
            "begin": m["begin_ticks"].tolist(), "end": m["end_ticks"].tolist(), "run": m["run"].tolist(),
            "index": m["index"].tolist(), "launch": m["host_launch_ns"].tolist(),
            "sync": m["host_sync_ns"].tolist(), "launches": launches, "brackets": rec.brackets.shape,
            "samples": len(rec.samples), "meta": sorted(rec.meta), "event_ms": rec.meta["event_run_ms"],
            "runs": [rec.run, rec2.run], "n2": rec2.executions, "name": be.kernel_name(w),
            "waited": waited, "errs": errs, "read": be.read_clocks(4).shape}))
    """, {"FINGRAV_CUDA_LIBRARY": fake_libcuda})
    assert out["protocol"] and out["dtype"]
    name, clock, tick, gpu_markers, err, period, channels, virtual = out["caps"]
    assert (name, clock, tick, gpu_markers, virtual) == ("nvidia", "synthetic-ns", 1.0, True, False)
    assert err > 0 and period == 1_000_000 and channels == ["total", "compute", "io", "memory"]
    begin, end = np.array(out["begin"]), np.array(out["end"])
    assert len(begin) == 10 and np.all(begin <= end) and np.all(end[:-1] <= begin[1:])
    # The fake probe runs when stamped: each launch lies between its two markers.
    launches = np.array(out["launches"][:10]) + 10**12
    assert np.all((begin <= launches) & (launches <= end))
    assert out["run"] == [0] * 10 and out["index"] == list(range(10)) and out["runs"] == [0, 1]
    assert out["sync"][:-1] == [-1] * 9 and out["sync"][-1] >= out["launch"][-1]
    assert out["brackets"] == [16, 3] and out["read"] == [4, 3] and out["samples"] > 0
    assert {"sampler", "event_run_ms", "probe_run_ns", "stream"} <= set(out["meta"]) and out["event_ms"] >= 0
    assert out["n2"] == 3 and out["name"] == "noop" and out["waited"] > 0
    assert out["errs"]["kernel"]["type"] == "ValueError" and "kernel=" in out["errs"]["kernel"]["msg"]
    assert out["errs"]["executions"]["type"] == "ValueError" and "executions=0" in out["errs"]["executions"]["msg"]
    assert out["errs"]["name"]["type"] == "ValueError"


@pytest.mark.slow
def test_backend_needs_nvml_when_no_power_source_is_given(fake_libcuda):
    out = run_py("""
        from fingrav_native.backends import NvidiaBackend
        print(json.dumps(attempt(lambda: NvidiaBackend(0, power="instant"))))
    """, {"FINGRAV_CUDA_LIBRARY": fake_libcuda, "FINGRAV_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
    assert not out["ok"]
    if hasattr(_core, "NvmlPowerSource"):
        assert out["type"] in ("LibraryNotFoundError", "DeviceUnavailableError"), out
    else:
        assert out["type"] == "RuntimeError" and "no NVML support" in out["msg"], out


@pytest.mark.slow
def test_report_on_the_fake_driver_lists_its_devices(fake_libcuda):
    out = run_py("""
        from fingrav_native.backends._nvidia_report import report
        print(json.dumps(report().as_dict()))
    """, {"FINGRAV_CUDA_LIBRARY": fake_libcuda, "FAKE_CUDA_DEVICES": "2",
          "FINGRAV_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
    comps = {c["name"]: c for c in out["components"]}
    assert comps["CUDA driver (libcuda)"]["found"] and comps["CUDA driver (libcuda)"]["detail"] == fake_libcuda
    assert comps["CUDA devices"]["found"] and "2 device(s), driver CUDA 12.4" in comps["CUDA devices"]["detail"]
    assert [d["name"] for d in out["devices"]] == ["Fake NVIDIA H100 0", "Fake NVIDIA H100 1"]
    assert out["devices"][0]["compute_capability"] == "9.0"
    # Without NVML there are no power logs: not available, and the reason says so.
    assert not out["available"] and "NVML" in out["reason"]


# ---------------------------------------------------------------- argument checks (no driver needed)


@pytest.mark.parametrize("kwargs, word", [
    ({"device": -1}, "device=-1"),
    ({"device": 1.5}, "device=1.5"),
    ({"power": "watts"}, "power='watts'"),
    ({"brackets_per_run": 1}, "brackets_per_run=1"),
    ({"idle_tolerance": 0.0}, "idle_tolerance=0.0"),
    ({"max_idle_ns": 0}, "max_idle_ns=0"),
    ({"period_ns": 1}, "period_ns=1"),
    ({"marker_slots": 1}, "marker_slots=1"),
    ({"power_source": "nvml"}, "power_source='nvml'"),
    ({"power_scope": "board"}, "power_scope='board'"),
])
def test_backend_arguments_are_checked_before_the_driver(kwargs, word, monkeypatch):
    monkeypatch.setenv("FINGRAV_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
    with pytest.raises(ValueError, match=re.escape(word)):
        NvidiaBackend(**kwargs)


def test_nvml_modes():
    assert NVML_MODES == ("samples", "instant", "average", "energy", "usage")


def test_match_nvml_device_by_uuid_then_pci_address_never_index():
    cuda = {"index": 0, "name": "H100", "uuid": "GPU-AAAA", "pci_bus_id": "0000:3b:00.0"}
    nvml = [{"index": 0, "uuid": "GPU-zzzz", "pci_bus_id": "00000000:18:00.0"},
            {"index": 1, "uuid": "GPU-aaaa", "pci_bus_id": "00000000:3B:00.0"}]
    assert match_nvml_device(cuda, nvml) == 1
    # No UUID from an old driver: the PCI address, spelled either way, decides.
    assert match_nvml_device(dict(cuda, uuid=""), [dict(nvml[1], uuid="")]) == 1
    assert match_nvml_device(dict(cuda, uuid="", pci_bus_id="0000:18:00.0"), nvml) == 0
    with pytest.raises(_core.DeviceUnavailableError, match="NVML sees: 0: 00000000:18:00.0"):
        match_nvml_device(dict(cuda, uuid="GPU-none", pci_bus_id="0000:af:00.0"), nvml[:1])


def test_workload_validation():
    with pytest.raises(ValueError, match="name="):
        Workload("", launch=lambda: None)
    with pytest.raises(ValueError, match="launch="):
        Workload("w", launch=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stream="):
        Workload("w", launch=lambda: None, stream=0)  # type: ignore[arg-type]


@pytest.mark.optional
def test_torch_gemm_without_a_gpu_is_a_clear_error():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed in the test environment")
    from fingrav_native.backends import torch_gemm

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(_core.DeviceUnavailableError, match="torch.cuda.is_available"):
        torch_gemm(64, 64, 64)


# ---------------------------------------------------------------- against the vendor's own tools


@pytest.mark.optional
def test_probe_ptx_assembles_with_ptxas(tmp_path):
    ptxas = _ptxas()
    ptx = tmp_path / "probe.ptx"
    ptx.write_text(_core.cuda_probe_ptx())
    for arch in ("sm_80", "sm_90"):  # Ampere and Hopper (the lent H100/H200)
        out = tmp_path / f"probe_{arch}.cubin"
        proc = subprocess.run([ptxas, f"-arch={arch}", "-v", str(ptx), "-o", str(out)], capture_output=True,
                              text=True)
        assert proc.returncode == 0, f"ptxas -arch={arch}:\n{proc.stderr}"
        assert out.stat().st_size > 0
        # Both kernels made it, with no spill to local memory.
        assert "fingrav_stamp" in proc.stderr and "fingrav_timer_step" in proc.stderr
        assert "bytes spill" not in proc.stderr or "0 bytes spill stores" in proc.stderr
    text = _core.cuda_probe_ptx()
    assert "%globaltimer" in text and "membar.sys" in text and "st.volatile.global.u64" in text


def _norm_type(t: str) -> str:
    t = re.sub(r"\s+", " ", t.strip())
    return re.sub(r"\s*\*\s*", "*", t)


def _param_types(decl: str) -> str:
    types = []
    for p in decl.split(","):
        p = re.sub(r"\s+", " ", p.strip())
        m = re.fullmatch(r"(.*?[\s*])(\w+)", p)
        assert m and m.group(1).strip(), f"cannot split {p!r}"
        types.append(_norm_type(m.group(1)))
    return ", ".join(types)


@pytest.mark.optional
def test_declared_prototypes_and_symbol_versions_match_cuda_h():
    text = Path(_cuda_header()).read_text(encoding="utf-8", errors="replace")
    # What the header maps an API name to: `#define cuX cuX_v2` or the
    # per-thread-stream wrapper `__CUDA_API_PTSZ(cuX)` (the name itself here).
    mapping = {a: b for a, b in re.findall(r"^\s*#define\s+(cu\w+)\s+(cu\w+)\s*$", text, re.M)}
    for a, b in re.findall(r"^\s*#define\s+(cu\w+)\s+__CUDA_API_PT[SD]Z?\((cu\w+)\)", text, re.M):
        mapping.setdefault(a, b)

    def declared(name: str) -> str | None:
        m = re.search(r"CUresult CUDAAPI " + re.escape(name) + r"\((.*?)\);", text, re.S)
        return _param_types(m.group(1)) if m else None

    table = _core._cuda_prototypes()
    assert len(table) >= 30
    for api, symbols, params in table:
        ours = ", ".join(_norm_type(t) for t in params.split(","))
        assert declared(api) == ours, f"{api}: cuda.h declares ({declared(api)}), we declare ({ours})"
        target = mapping.get(api, api)
        # We call what a program compiled against this header calls (or a newer version of it).
        assert target in symbols, f"{api}: cuda.h maps it to {target}, we try {symbols}"
        for s in symbols:
            assert s == target or declared(s) in (None, ours), f"{s}: different parameters in cuda.h"
            assert s == target or declared(s) is not None or mapping.get(api) == s or s == api, s
    assert re.search(r"typedef unsigned long long CUdeviceptr_v2;", text), "CUdeviceptr is no longer 64-bit"


@pytest.mark.optional
def test_declared_constants_match_cuda_h():
    text = Path(_cuda_header()).read_text(encoding="utf-8", errors="replace")
    consts = _core._cuda_constants()
    assert len(consts) >= 30
    for name, value in consts.items():
        m = re.search(r"\b" + name + r"\s*=\s*(0x[0-9a-fA-F]+|\d+)", text) or re.search(
            r"#define\s+" + name + r"\s+(0x[0-9a-fA-F]+|\d+)", text)
        assert m, f"{name}: not in cuda.h"
        assert int(m.group(1), 0) == value, f"{name}: cuda.h says {m.group(1)}, we declare {value}"


@pytest.mark.slow
def test_validation_bench_stops_with_a_clear_message_without_a_gpu():
    if _gpu_present():
        pytest.skip("an NVIDIA GPU is present: run the bench itself")
    env = dict(os.environ, FINGRAV_CUDA_LIBRARY="/nonexistent/libcuda.so.1")
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "nvidia_validate.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "nvidia_validate: no usable NVIDIA GPU: could not load the CUDA driver" in proc.stderr
    assert not (REPO / "bench" / "results" / "nvidia_validate.json").exists()


@pytest.mark.parametrize(("mode", "period", "window", "documented", "kind", "window_out", "source"), [
    ("instant", 100e6, 25e6, True, "window", 25e6, "documented"),      # A100/H100, Yang et al.: 25 ms of every 100 ms
    ("instant", 100e6, 0.0, False, "instant", 0.0, "assumed"),         # other GPUs: nothing published
    ("average", 100e6, 1e9, True, "window", 1e9, "documented"),
    ("usage", 100e6, 1e9, True, "window", 1e9, "documented"),          # Ampere and newer, not GA100
    ("usage", 20e6, 0.0, True, "instant", 0.0, "documented"),          # GA100 and older: instantaneous
    ("energy", 20e6, 0.0, True, "counter", 0.0, "documented"),
    ("samples", 20e6, 0.0, False, "instant", 0.0, "assumed"),          # nvml.h says nothing: characterise
])
def test_each_nvml_mode_declares_its_sensor(mode, period, window, documented, kind, window_out, source):
    from fingrav_native.backends import nvml_sensor

    s = nvml_sensor(mode, period, window, documented)
    assert (s.kind, s.window_ns, s.source) == (kind, window_out, source)
    assert s.period_ns == period
    with pytest.raises(ValueError, match="mode='bogus'"):
        nvml_sensor("bogus", period, window, documented)


# ---------------------------------------------------------------- what the backend measures and declares

# The fake NVML as fake_libcuda's device 0 (same UUID and PCI bus), with every
# value refreshed every 50 ms at 300 W, in a GPU of the given compute capability.
PAIRED = """
import ctypes, os, warnings
fake = ctypes.CDLL(os.environ["FINGRAV_NVML_LIBRARY"])
fake.fake_nvml_set_identity.argtypes = [ctypes.c_uint, ctypes.c_char_p, ctypes.c_uint]
fake.fake_nvml_set_identity(0, b"GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf", 0x18)
fake.fake_nvml_set_refresh.argtypes = [ctypes.c_uint, ctypes.c_ulonglong, ctypes.c_uint]
fake.fake_nvml_set_refresh(0, 50_000, 300_000)
fake.fake_nvml_set_arch.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_int]
fake.fake_nvml_set_arch(0, ARCH, CC[0], CC[1])
fake.fake_nvml_set_name.argtypes = [ctypes.c_uint, ctypes.c_char_p]
fake.fake_nvml_set_name(0, BOARD_NAME)
from fingrav_native.backends import NvidiaBackend, UnknownSensorWindowWarning
def caps_of(be):
    c = be.capabilities
    return {"period": c.logger_period_ns, "window": c.logger_window_ns, "provenance": c.provenance,
            "semantics": c.sensor_semantics, "figures": c.describe_figures(), "resolution": c.device_resolution_ticks,
            "sensor": None if c.sensor is None else [c.sensor.name, c.sensor.kind, c.sensor.window_ns,
                                                     c.sensor.period_ns, c.sensor.source],
            "baseline": be._baseline_w}
def build(**kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        be = NvidiaBackend(0, max_idle_ns=5_000_000_000, **kw)
    return be, [str(x.message) for x in w if issubclass(x.category, UnknownSensorWindowWarning)]
"""


def _paired(fake_libcuda: str, fake_nvml: str, code: str, arch: int = 9, cc: tuple[int, int] = (9, 0),
            step_ns: int = 0, name: str = "NVIDIA H100 PCIe") -> dict:
    env = {"FINGRAV_CUDA_LIBRARY": fake_libcuda, "FINGRAV_NVML_LIBRARY": fake_nvml}
    if step_ns:
        env["FAKE_CUDA_TIMER_STEP_NS"] = str(step_ns)
    prelude = PAIRED.replace("ARCH", str(arch)).replace("CC", repr(cc)).replace("BOARD_NAME", repr(name.encode()))
    return run_py(prelude + textwrap.dedent(code), env)


@pytest.mark.slow
def test_backend_measures_the_globaltimer_step_and_maps_markers_with_it(fake_libcuda):
    # The backend assumed a 1 ns %globaltimer step; on GPUs
    # whose timer moves once a microsecond the clock map's bound missed half a
    # step. Here the fake timer moves every 1000 ns.
    out = run_py("""
        import numpy as np
        from fingrav_native.backends import NvidiaBackend
        from fingrav_native.backends import Workload
        from fingrav_native.clocks._runs import fit_device_map
        be = NvidiaBackend(0, power_source=_core.SyntheticSource(period_ns=1_000_000), max_idle_ns=20_000_000)
        caps = be.capabilities
        import time
        rec = be.execute_run(Workload("sleep", launch=lambda: time.sleep(0.002), stream=lambda: 0), 20, be.new_run_id())
        # As timeline_of fits it (test_timeline_fits_the_device_map_with_the_timer_step checks that it does).
        m = fit_device_map(rec.brackets, caps.device_tick_ns, caps.device_resolution_ticks)
        ticks = rec.markers["begin_ticks"]
        # The fake timer is host time + 1000 s, moved in whole microseconds: a
        # read N happened in [N - 1e12, N - 1e12 + 1000) host ns, and to_host(N) is its start.
        host = np.asarray(m.to_host(ticks), dtype=np.float64)
        err = np.abs(host - (ticks - 10**12).astype(np.float64))
        bound = np.asarray(m.error_bound_at(host), dtype=np.float64)
        print(json.dumps({"resolution": caps.device_resolution_ticks, "provenance": caps.provenance,
                          "measured": be.timer_resolution, "median_err": float(np.median(err)),
                          "covered": bool(np.all(err <= bound)), "figures": caps.describe_figures(),
                          "ticks": (ticks % 1000).tolist()}))
    """, {"FINGRAV_CUDA_LIBRARY": fake_libcuda, "FAKE_CUDA_TIMER_STEP_NS": "1000"})
    assert out["measured"]["median_ns"] == 1000 and out["measured"]["frozen"] == 0
    assert out["resolution"] == 1000.0
    # Read N is taken at N + half a step: no half-step (500 ns) bias, and the bound covers the truth.
    assert out["median_err"] < 250 and out["covered"], out
    assert out["provenance"]["tick"] == "measured" and "tick 1 us (measured)" in out["figures"]
    assert out["ticks"] == [0] * 20  # the fake timer really moves in whole microseconds


def test_timeline_fits_the_device_map_with_the_timer_step():
    # The step the backend measured reaches the clock map.
    from fingrav_native.backends import MARKER_RECORD_DTYPE
    from fingrav_native.clocks import fit_clock_map, timeline_of
    from fingrav_native.records import Capabilities, RunRecord

    rng = np.random.default_rng(3)
    host = np.sort(rng.integers(10**12, 10**12 + 10**9, 64))
    true = host + 60 + rng.integers(0, 40, 64)  # the timer read, inside a 160 ns bracket
    dev = (true + 10**12) // 1000 * 1000         # a ns timer that moves once a microsecond
    brackets = np.stack([host, dev, host + 160], axis=1).astype(np.int64)
    markers = np.zeros(2, dtype=MARKER_RECORD_DTYPE)
    markers["begin_ticks"], markers["end_ticks"] = dev[10], dev[20]
    caps = Capabilities("nvidia", "test", 1e8, 0.0, "device", 1.0, True, 100.0, ("total",), False,
                        device_resolution_ticks=1000.0)
    rec = RunRecord(0, 2, np.zeros(0, dtype=_core.SAMPLE_DTYPE), markers, brackets)
    tl = timeline_of([rec], caps)
    want = fit_clock_map(brackets, tick_ns=1.0, resolution_ticks=1000.0)
    naive = fit_clock_map(brackets, tick_ns=1.0)
    assert tl.device_map.offset_ns == want.offset_ns
    # A 1 ns step puts every read half a step (500 ns) late; the measured step does not.
    truth = (dev - 10**12).astype(np.float64)  # to_host(N): the start of [N, N + step)
    assert np.median(np.abs(np.asarray(want.to_host(dev), dtype=np.float64) - truth)) < 100
    assert np.median(np.abs(np.asarray(naive.to_host(dev), dtype=np.float64) - truth)) > 300


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["usage", "energy", "instant", "average"])
def test_backend_logger_period_is_the_drivers_refresh_not_the_poll(fake_libcuda, fake_nvml, mode):
    # NVML refreshes every 50 ms here while the
    # sampler polls every 1 ms. The period was measured as the poll period
    # (usage: every poll stamped and kept; energy: 0 W then a spike).
    out = _paired(fake_libcuda, fake_nvml, f"""
        be, warned = build(power="{mode}")
        waited = be.wait_idle()
        print(json.dumps(dict(caps_of(be), warned=warned, waited=waited)))
    """)
    assert 45e6 <= out["period"] <= 55e6, out["period"]
    assert abs(out["baseline"] - 300.0) < 15, out["baseline"]
    assert out["warned"] == []  # H100 PCIe: every one of these windows is documented or measured
    # nvml.h documents the 1 s averages and the counter; SC'24 measured the instant field on H100 PCIe.
    given = "measured" if mode == "instant" else "documented"
    assert out["provenance"] == {"period": "measured", "window": given, "delay": "assumed", "tick": "measured"}
    # An energy counter's log averages over its interval: the window in the error budget is the period.
    window, words = {"usage": (1e9, "1 s average"), "average": (1e9, "1 s average"),
                     "energy": (out["period"], "energy counter"), "instant": (25e6, "25 ms of every 100 ms")}[mode]
    assert out["window"] == window and words in out["semantics"]
    assert out["sensor"][3] == out["period"] and out["sensor"][4] == given
    # Idle after the first chunk of 20 periods (the change-only logs are the idle power), plus a random phase.
    assert out["waited"] <= 21 * out["period"]


@pytest.mark.slow
def test_unknown_window_warns_and_a_characterisation_replaces_it(fake_libcuda, fake_nvml):
    # On a GPU for which no window is published (here an
    # RTX-class GA10x, compute capability 8.6) the instant field's window is
    # assumed 0: say so, and take a characterisation's figures instead.
    out = _paired(fake_libcuda, fake_nvml, """
        from fingrav_native.sensors import SensorModel
        be, warned = build(power="instant")
        measured = SensorModel("mine", "window", period_ns=1e8, window_ns=2e7, delay_ns=3e6, source="characterised")
        be2, warned2 = build(power="instant", sensor=measured)
        bad = attempt(lambda: NvidiaBackend(0, power="instant", sensor="part-time-100ms"))
        print(json.dumps({"a": dict(caps_of(be), warned=warned), "b": dict(caps_of(be2), warned=warned2), "bad": bad}))
    """, arch=7, cc=(8, 6), name="NVIDIA GeForce RTX 3090")
    a, b = out["a"], out["b"]
    assert len(a["warned"]) == 1 and "window of NVML mode 'instant'" in a["warned"][0]
    assert "is assumed, 0 ms (no window published or measured" in a["warned"][0]
    assert "characterize(NvidiaBackend(power='instant'))" in a["warned"][0]
    assert a["window"] == 0 and a["provenance"]["window"] == "assumed" and a["sensor"][4] == "assumed"
    assert "no window published for this GPU" in a["semantics"]
    assert b["warned"] == [] and b["window"] == 2e7 and b["sensor"][:3] == ["mine", "window", 2e7]
    assert b["provenance"] == {"period": "measured", "window": "measured", "delay": "measured", "tick": "measured"}
    assert "delay 3 ms (measured)" in b["figures"] and "from a characterisation" in b["semantics"]
    assert out["bad"]["type"] == "ValueError" and "sensor='part-time-100ms'" in out["bad"]["msg"]


@pytest.mark.slow
def test_grace_hopper_logs_the_module_unless_the_gpu_alone_is_asked(fake_libcuda, fake_nvml):
    # The power fields always read GPU scope; on Grace Hopper Zeus reads the module
    # (NVML_POWER_SCOPE_MODULE where nvmlDeviceGetC2cModeInfoV says C2C is on). Here the module
    # draws 150 W over the GPU's 300 W.
    out = _paired(fake_libcuda, fake_nvml, """
        fake.fake_nvml_set_c2c.argtypes = [ctypes.c_uint, ctypes.c_int, ctypes.c_uint]
        fake.fake_nvml_set_c2c(0, 1, 150_000)
        from fingrav_native.backends._nvidia_report import report
        module, _ = build(power="instant")
        gpu, _ = build(power="instant", power_scope="gpu")
        energy, _ = build(power="energy")
        d = report().as_dict()["devices"][0]
        print(json.dumps({"module": [*module.power_scope, caps_of(module)["baseline"], caps_of(module)["semantics"]],
                          "gpu": [*gpu.power_scope, caps_of(gpu)["baseline"]], "energy": list(energy.power_scope),
                          "details": d}))
    """, name="NVIDIA GH200 480GB")
    scope, why, baseline, semantics = out["module"]
    assert scope == "module" and "Grace Hopper" in why and abs(baseline - 450.0) < 25, out["module"]
    assert "scope: module (GPU, Grace CPU and memory)" in semantics
    assert out["gpu"][0] == "gpu" and abs(out["gpu"][2] - 300.0) < 25, out["gpu"]
    assert out["energy"][0] == "gpu" and "no scope argument" in out["energy"][1]
    assert out["details"]["c2c_enabled"] is True
    assert out["details"]["power_scopes"] == {"instant": ["gpu", "module"], "average": ["gpu", "module"]}


@pytest.mark.slow
def test_report_states_each_modes_semantics_for_the_gpu_found(fake_libcuda, fake_nvml):
    out = _paired(fake_libcuda, fake_nvml, """
        from fingrav_native.backends._nvidia_report import report
        from fingrav_native.backends import format_reports
        r = report()
        print(json.dumps({"d": r.as_dict(), "text": format_reports([r], verbose=True)}))
    """, arch=7, cc=(8, 0), name="NVIDIA A100-SXM4-80GB")
    d = out["d"]
    assert d["available"] and d["devices"][0]["nvml_index"] == 0
    sensors = {s["mode"]: s for s in d["sensors"]}
    assert list(sensors) == ["nvml samples", "nvml instant", "nvml average", "nvml energy", "nvml usage"]
    assert "A100 averages 25 ms of every 100 ms in both fields" in sensors["nvml instant"]["semantics"]
    assert sensors["nvml instant"]["figures"]["window"] == {"provenance": "measured", "detail": "25 ms"}
    # nvml.h calls usage instantaneous on GA100; SC'24 measured the instant field's 25 ms window there.
    assert sensors["nvml usage"]["figures"]["window"] == {"provenance": "measured", "detail": "25 ms"}
    assert sensors["nvml samples"]["figures"]["window"] == {"provenance": "assumed", "detail": "0"}
    assert sensors["nvml samples"]["figures"]["tick"] == {"provenance": "measured",
                                                          "detail": "the %globaltimer step, at start"}
    assert "  also: nvml usage: nvmlDeviceGetPowerUsage" in out["text"]


def test_semantics_and_provenance_of_each_mode_without_a_gpu():
    from fingrav_native.backends import nvml_provenance, nvml_semantics
    from fingrav_native.sensors import SensorModel

    # No GPU: the rule every GPU gets; a GPU: what its source declares.
    assert "25 ms average every 100 ms on A100/H100" in nvml_semantics("instant")
    assert "no window published for this GPU" in nvml_semantics("instant", 0.0, False)
    assert "on this A100/H100" in nvml_semantics("instant", 25e6, True)
    assert "1 s average on Ampere and newer but GA100" in nvml_semantics("usage")
    assert "1 s average on this GPU" in nvml_semantics("usage", 1e9, True)
    assert "instantaneous on this GPU" in nvml_semantics("usage", 0.0, True)
    assert "architecture unknown" in nvml_semantics("usage", 0.0, False)
    assert "logged when the value changes" in nvml_semantics("average", 1e9, True)
    assert "nothing is kept until it moves" in nvml_semantics("energy", 0.0, True)
    assert "from the newest at start on" in nvml_semantics("samples", 0.0, False)
    with pytest.raises(ValueError, match="mode='power'"):
        nvml_semantics("power")
    assert nvml_provenance(True) == {"period": "measured", "window": "documented", "delay": "assumed",
                                     "tick": "measured"}
    assert nvml_provenance(False)["window"] == "assumed" and nvml_provenance(None)["window"] == "assumed"
    measured = SensorModel("m", "window", period_ns=1e8, window_ns=2e7, source="characterised")
    assert nvml_provenance(False, measured) == {"period": "measured", "window": "measured", "delay": "measured",
                                                "tick": "measured"}
    # A preset given instead keeps its own source: documented, not measured on this GPU.
    preset = dataclasses.replace(measured, source="documented")
    assert nvml_provenance(False, preset) == {"period": "measured", "window": "documented", "delay": "documented",
                                              "tick": "measured"}


def test_unknown_window_warning_is_a_user_warning():
    from fingrav_native.backends import UnknownSensorWindowWarning

    assert issubclass(UnknownSensorWindowWarning, UserWarning)


@pytest.mark.parametrize(("mode", "name", "cc", "ampere", "window", "provenance"), [
    # SC'24 (Yang, Adamek, Armour) measured these boards; nvml.h documents the 1 s averages.
    ("instant", "NVIDIA A100-SXM4-80GB", (8, 0), True, 25e6, "measured"),
    ("usage", "NVIDIA A100-PCIE-40GB", (8, 0), True, 25e6, "measured"),      # nvml.h: "instantaneous" on GA100
    ("instant", "NVIDIA H100 PCIe", (9, 0), True, 25e6, "measured"),
    ("instant", "NVIDIA H100 80GB HBM3", (9, 0), True, 25e6, "assumed"),    # SXM: not measured, the family's
    ("instant", "NVIDIA GH200 480GB", (9, 0), True, 25e6, "assumed"),
    ("instant", "NVIDIA A30", (8, 0), True, 25e6, "assumed"),               # GA100 sibling, not measured
    ("usage", "Tesla V100-SXM2-16GB", (7, 0), False, 10e6, "measured"),
    ("usage", "Quadro RTX 8000", (7, 5), False, 20e6, "measured"),
    ("usage", "Tesla T4", (7, 5), False, 20e6, "assumed"),                  # Turing sibling of the RTX 8000
    ("usage", "Tesla P100-PCIE-16GB", (6, 0), False, 0.0, "assumed"),       # older, none measured
    ("usage", "NVIDIA H100 PCIe", (9, 0), True, 1e9, "documented"),         # nvml.h: 1 s from Ampere but GA100
    ("usage", "NVIDIA GeForce RTX 3090", (8, 6), True, 1e9, "documented"),
    ("usage", "Fake", None, None, 0.0, "assumed"),                          # architecture unknown
    ("average", "anything", (9, 0), True, 1e9, "documented"),
    ("instant", "NVIDIA GeForce RTX 3090", (8, 6), True, 0.0, "assumed"),
    ("samples", "NVIDIA H100 PCIe", (9, 0), True, 0.0, "assumed"),
])
def test_each_boards_window_follows_the_published_measurements(mode, name, cc, ampere, window, provenance):
    from fingrav_native.backends._nvidia_sensors import published_window

    pw = published_window(mode, name, cc, ampere, 20e6)
    assert (pw.window_ns, pw.provenance) == (window, provenance), pw.reference
    if provenance == "assumed" and window:
        assert "not measured" in pw.reference


def test_an_energy_counters_window_is_its_measured_interval():
    from fingrav_native.backends._nvidia_sensors import published_window

    assert published_window("energy", "NVIDIA H100 PCIe", (9, 0), True, 20e6).window_ns == 20e6
    assert published_window("energy", "NVIDIA H100 PCIe", (9, 0), True, 0.0).provenance == "assumed"
    with pytest.raises(ValueError, match="mode='power'"):
        published_window("power", "x", None, None)  # type: ignore[arg-type]
