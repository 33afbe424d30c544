"""The CUPTI Activity consumer end to end from Python: a child process drives the stand-in libcupti, which
loads the tool through CUDA_INJECTION64_PATH as the CUDA driver does; read_launches reads what it wrote.

Optional: the consumer and the stand-in are built only where the CUPTI headers were found (the test-full
extra's nvidia wheels). The installed libraries are used, else those of the CMake build folder that
FINGRAV_CUPTI_BUILD_DIR names (``cmake -S . -B build/dev -DFINGRAV_BUILD_TESTS=ON ...``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fingrav_native.files import read_launches
from fingrav_native.native import tool_library
from fingrav_native.sim import standin_library

pytestmark = pytest.mark.optional

_KERNELS = ("gemm<float>", "softmax", "_Z6reduceILi256EEvPKfPf")

#: The simulated application: n kernels at known CLOCK_MONOTONIC_RAW times, i-th lasting 1000 + 10 i ns.
_APP = textwrap.dedent("""
    import ctypes, sys, time
    lib = ctypes.CDLL(sys.argv[1])
    if sys.argv[3] == "conflict":  # another CUPTI client (torch.profiler, Nsight) subscribed first
        handle = ctypes.c_void_p()
        assert lib.cuptiSubscribe(ctypes.byref(handle), None, None) == 0
    assert lib.fingrav_standin_init() == 0
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    print(t0, flush=True)
    names = {kernels!r}
    grid = (ctypes.c_uint32 * 3)(40, 2, 1)
    block = (ctypes.c_uint32 * 3)(128, 1, 1)
    for i in range(int(sys.argv[2])):
        start = t0 + i * 5000
        rc = lib.fingrav_standin_dispatch(names[i % 3].encode(), ctypes.c_int64(start),
                                          ctypes.c_int64(start + 1000 + 10 * i), ctypes.c_int32(i % 2),
                                          ctypes.c_uint64(3 + i % 4), grid, block)
        assert rc == 0, rc
    lib.fingrav_standin_fini()
""").format(kernels=_KERNELS)


def _libraries() -> tuple[str, str]:
    build = Path(os.environ.get("FINGRAV_CUPTI_BUILD_DIR", "/nonexistent"))
    if (build / "libfingrav_cupti_tool.so").is_file() and (build / "libfingrav_standin_cupti.so").is_file():
        return str(build / "libfingrav_cupti_tool.so"), str(build / "libfingrav_standin_cupti.so")
    try:
        return tool_library("cuda"), standin_library("cuda")
    except FileNotFoundError as e:
        pytest.skip(f"the CUPTI consumer is not built (nor in FINGRAV_CUPTI_BUILD_DIR): {e}")


def _run(tmp_path: Path, n: int, mode: str = "plain") -> tuple[int, str]:
    tool, standin = _libraries()
    env = {"FINGRAV_LAUNCH_DIR": str(tmp_path), "CUDA_INJECTION64_PATH": tool, "FINGRAV_CUPTI_LIBRARY": standin,
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", _APP, standin, str(n), mode], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[0]), done.stderr


def test_data_loss_none_through_the_stand_in_cupti(tmp_path: Path) -> None:
    n = 3000
    t0, err = _run(tmp_path, n)
    log = read_launches(tmp_path)
    assert err == ""
    assert (log.vendor, log.clock, log.closed) == ("cuda", "CLOCK_REALTIME", True)
    assert (len(log.records), log.dropped, log.vendor_dropped) == (n, 0, 0)
    assert sorted(log.names) == sorted(_KERNELS)
    r = np.sort(log.records, order="correlation_id")
    i = np.arange(n)
    assert np.array_equal(r["correlation_id"], i + 1)
    assert np.array_equal(r["end_ns"] - r["start_ns"], 1000 + 10 * i)  # one clock offset per record: exact
    assert [log.names[s] for s in r["symbol"][:3]] == list(_KERNELS)
    assert np.array_equal(r["queue"], 3 + i % 4) and np.array_equal(r["device"], i % 2)
    assert np.array_equal(r["grid"], np.tile([40, 2, 1], (n, 1)))
    assert np.array_equal(r["block"], np.tile([128, 1, 1], (n, 1)))
    # Back on CLOCK_MONOTONIC_RAW through the file's own CLOCK_REALTIME brackets (raw_before, realtime, raw_after).
    b = log.brackets
    offset = np.median(b[:, 1] - (b[:, 0] + b[:, 2]) // 2)
    error = r["start_ns"] - offset - (t0 + 5000 * i)
    assert np.max(np.abs(error)) < 20e6, np.max(np.abs(error))  # a wrong clock or unit: seconds off
    trace = log.to_trace()
    assert trace.clock == "unix-epoch"


def test_unclear_subscriber_conflict_is_noted_not_an_empty_capture(tmp_path: Path) -> None:
    _, err = _run(tmp_path, 20, "conflict")
    log = read_launches(tmp_path)
    assert len(log.records) == 0 and log.closed
    assert "subscriber_conflict" in [note["key"] for note in log.notes]
    assert err.count("\n") == 1 and "one subscriber per process" in err
