"""The launch-capture tool libraries: found where the wheel installs them, and the ROCm one run end to end.

The end-to-end case drives the stand-in rocprofiler-sdk (ctypes, in a child
process: a runtime configures its tools once per process) with dispatches whose
truth is known, and reads the journal the real tool library wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fingrav_native import native
from fingrav_native.files import read_launches
from fingrav_native.sim import standin_library


def _libraries() -> tuple[str, str]:
    try:
        return native.tool_library("rocm"), standin_library("rocm")
    except FileNotFoundError as exc:
        pytest.skip(f"the ROCm tool library or its stand-in runtime is not built here: {exc}")


def test_unclear_missing_tool_library_names_file_and_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(native.TOOL_LIBRARIES, "rocm", "libfingrav_rocprofiler_tool_absent.so")
    with pytest.raises(FileNotFoundError, match=r"libfingrav_rocprofiler_tool_absent\.so.*fingrav_rocprofiler_tool"):
        native.tool_library("rocm")
    with pytest.raises(ValueError, match="vendor='intel'"):
        native.tool_library("intel")
    with pytest.raises(ValueError, match="vendor='intel'"):
        standin_library("intel")


_CHILD = textwrap.dedent("""
    import ctypes, os, sys, time
    lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
    u3 = ctypes.c_uint32 * 3
    assert lib.fingrav_standin_init() == 0
    names = [b"gemm", b"reduce", b"copy"]
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    for i in range(int(sys.argv[2])):
        rc = lib.fingrav_standin_dispatch(names[i % 3], ctypes.c_int64(t0 + 10_000 * i),
                                          ctypes.c_int64(t0 + 10_000 * i + 4_000 + i % 5), ctypes.c_int32(i % 2),
                                          ctypes.c_uint64(40 + i % 4), u3(64 * (1 + i % 3), 1, 1), u3(64, 1, 1))
        assert rc == 0, rc
    lib.fingrav_standin_fini()
    off = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    print(t0, off)
""")


def test_silently_wrong_rocm_tool_end_to_end_on_the_standin(tmp_path: Path) -> None:
    """Every dispatch arrives with its name, ordinal, queue, grid and its time moved onto CLOCK_BOOTTIME."""
    tool, standin = _libraries()
    n = 3000
    env = {**os.environ, "FINGRAV_LAUNCH_DIR": str(tmp_path), "ROCP_TOOL_LIBRARIES": tool}
    out = subprocess.run([sys.executable, "-c", _CHILD, standin, str(n)], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    t0, offset = (int(v) for v in out.stdout.split())
    assert out.stderr == ""
    log = read_launches(tmp_path)
    assert len(log.records) == n and log.closed and log.dropped == 0 and log.torn_bytes == 0
    r = log.records[np.argsort(log.records["correlation_id"])]
    i = np.arange(n)
    assert [log.names[s] for s in r["symbol"][:3]] == ["gemm", "reduce", "copy"] and len(log.names) == 3
    np.testing.assert_array_equal(r["device"], i % 2)
    np.testing.assert_array_equal(r["queue"], 40 + i % 4)
    np.testing.assert_array_equal(r["grid"][:, 0], 64 * (1 + i % 3))
    np.testing.assert_array_equal(r["end_ns"] - r["start_ns"], 4_000 + i % 5)
    # CLOCK_BOOTTIME - CLOCK_MONOTONIC_RAW moves only with suspend and NTP's rate slew: a few us in a second.
    assert np.all(np.abs(r["start_ns"] - (t0 + 10_000 * i) - offset) < 200_000)
    trace = log.to_trace()
    assert trace.clock == "CLOCK_BOOTTIME" and len(trace.executions) == n
