"""Sizes the compiled core refuses by name before allocating.

An absurd size unchecked ends in ``std::bad_alloc`` (a MemoryError naming
nothing), in the OOM killer, or in pybind11's "incompatible function
arguments". Each is one line naming the argument and its limit; where
memory really runs out below the limit, the MemoryError names the argument
too (checked in a child process with a small address-space limit).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fingrav_native import _core
from fingrav_native.backends import SimBackend, execution_plan
from fingrav_native.sim import SimNode

LIMIT = _core.SIM_MAX_PENDING_EXECUTIONS


def test_the_limits_are_documented_constants():
    assert _core.MAX_CAPACITY == 2**26  # 4 GiB of 64-byte samples
    assert _core.MAX_MARKERS == 2**26  # 2 GiB of 32-byte markers
    assert LIMIT == 2**20


# ---------------------------------------------------------------- simulator launches


@pytest.mark.parametrize("count", [LIMIT + 1, 100_000_000, 2**31, 2**40, 2**64])
def test_sim_launch_refuses_absurd_counts_by_name(count):
    dev = _core.SimDevice()
    with pytest.raises(ValueError, match=rf"^count={count}: must be in \[1, 2\^20 = {LIMIT}\] executions per launch"):
        dev.launch(0, count, 0)
    assert not dev.busy() and dev.execution_count() == 0


@pytest.mark.parametrize(
    "kernel, count, run, match",
    [
        (-1, 1, 0, r"^kernel=-1: must be a kernel id >= 0"),
        (2**40, 1, 0, r"^kernel=1099511627776: must be a kernel id >= 0"),
        (10_000, 1, 0, r"^kernel=10000: no such kernel id"),
        (0, 0, 0, rf"^count=0: must be in \[1, 2\^20 = {LIMIT}\]"),
        (0, 1, -1, r"^run=-1: must be in \[0, 2\^31 - 1 = 2147483647\]"),
        (0, 1, 2**31, r"^run=2147483648: must be in \[0, 2\^31 - 1 = 2147483647\]"),
    ],
)
def test_sim_launch_names_each_argument_out_of_range(kernel, count, run, match):
    with pytest.raises(ValueError, match=match):
        _core.SimDevice().launch(kernel, count, run)


@pytest.mark.parametrize("count", [1.0, "1", None, True])
def test_sim_launch_refuses_non_integers_by_name(count):
    with pytest.raises(TypeError, match=r"^count=.*: must be an integer"):
        _core.SimDevice().launch(0, count, 0)


def test_sim_launch_bounds_what_waits_in_the_queue():
    dev = _core.SimDevice()
    dev.launch(0, LIMIT, 0)  # the first starts at once; LIMIT - 1 wait
    dev.launch(0, 1, 0)  # LIMIT wait: the most allowed
    with pytest.raises(ValueError, match=rf"^count=1: {LIMIT} executions are still queued, and at most 2\^20 = "
                                         rf"{LIMIT} may wait at once; synchronize\(\) before launching more"):
        dev.launch(0, 1, 0)


def test_sim_launch_takes_numpy_integers():
    dev = _core.SimDevice()
    dev.launch(np.int64(0), np.uint16(3), np.int32(5))
    dev.synchronize()
    ex = dev.executions()
    assert ex["run"].tolist() == [5, 5, 5] and ex["index"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("n", [2**24 + 1, 2**40, 2**64])
def test_sim_read_clocks_refuses_absurd_bursts_by_name(n):
    with pytest.raises(ValueError, match=rf"^n={n}: must be in \[1, 2\^24\]"):
        _core.SimDevice().read_clocks(n)


# ---------------------------------------------------------------- backends (profile --executions)


def test_sim_backend_names_executions_not_count():
    # `fingrav profile --executions 100000000` reached SimDevice.launch and
    # ended in std::bad_alloc (or the OOM killer): refused here, by name,
    # before anything is launched.
    backend = SimBackend(seed=0)
    with pytest.raises(ValueError, match=rf"^executions=100000000: at most {LIMIT} per run on the simulated device"):
        backend.execute_run("cb-2k-gemm", 100_000_000, backend.new_run_id())
    assert not backend.gpu.device.busy()
    rec = backend.execute_run("cb-2k-gemm", 3, backend.new_run_id())  # the device is still usable
    assert rec.executions == 3


def test_execution_plan_bounds_a_sequence_by_its_total():
    plan = [("cb-2k-gemm", LIMIT), ("mb-2k-gemv", 1)]
    with pytest.raises(ValueError, match=rf"^executions={LIMIT + 1}: at most {LIMIT} per run on the device"):
        execution_plan(plan, LIMIT + 1, limit=LIMIT)
    assert execution_plan(plan, LIMIT + 1) == plan  # no limit given: only the total is checked
    assert execution_plan("cb-2k-gemm", LIMIT, limit=LIMIT) == [("cb-2k-gemm", LIMIT)]


def test_sim_node_names_executions():
    node = SimNode(devices=2, seed=1)
    with pytest.raises(ValueError, match=rf"^executions={2**31}: at most {LIMIT} per run on a simulated device"):
        node.run("cb-2k-gemm", 2**31)


# ---------------------------------------------------------------- clock-sync recorder


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"capacity": 2**27}, r"^capacity=134217728: must be a power of two in \[16, 2\^26 = 67108864\]"),
        ({"capacity": 2**64}, r"^capacity=18446744073709551616: must be a power of two in \[16, 2\^26"),
        ({"burst": 2**40}, r"^burst=1099511627776: must be in \[1, 4096\]"),
        ({"interval_ns": 2**63}, r"^interval_ns=9223372036854775808: must be in \[1000000, 3600000000000\] ns"),
    ],
)
def test_clock_sync_recorder_names_absurd_sizes(kwargs, match):
    src = _core.SimTimestampSource(_core.SimDevice(realtime=True))
    with pytest.raises(ValueError, match=match):
        _core.ClockSyncRecorder(src, **kwargs)


# ---------------------------------------------------------------- memory that runs out below the limits


def _run_with_little_memory(body: str) -> list[str]:
    """Runs ``body`` in a child process whose address space may grow by only
    256 MiB; returns the lines it printed."""
    code = textwrap.dedent("""
        import os, resource
        from fingrav_native import _core
        def attempt(make):
            try:
                make()
                print("ok")
            except MemoryError as e:
                print(f"MemoryError: {e}")
        pages = int(open("/proc/self/statm").read().split()[0])
        used = pages * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + (256 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
    """) + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_memory_errors_name_the_argument():
    # One child process for every case (starting one costs seconds).
    lines = _run_with_little_memory("""
        attempt(lambda: _core.Sampler(_core.SyntheticSource(), capacity=_core.MAX_CAPACITY))
        attempt(lambda: _core.EventLog(_core.MAX_MARKERS))
        attempt(lambda: _core.ClockSyncRecorder(_core.SimTimestampSource(_core.SimDevice(realtime=True)),
                                                capacity=2**26))
        attempt(lambda: _core.Sampler(_core.SyntheticSource(), capacity=1024))
        # clear() with a view alive needs a new buffer; when none can be had,
        # the log is left as it was and the MemoryError names the capacity.
        log = _core.EventLog(5 << 20)  # 160 MiB, touched: fits
        log.mark(_core.MarkerKind.RUN_BEGIN, 4, host_ns=1)
        view = log.markers()
        attempt(log.clear)  # a second 160 MiB buffer: it does not fit
        print(len(log), log.markers()["run"].tolist(), view["run"].tolist())
        del view
        attempt(log.clear)  # nobody holds the buffer now: reused, nothing allocated
        print(len(log))
    """)
    assert lines == [
        "MemoryError: capacity=67108864: cannot allocate 4.0 GiB for the ring (64 bytes per slot); "
        "pass a smaller capacity",
        "MemoryError: capacity=67108864: cannot allocate 2.0 GiB for the markers (32 bytes each); "
        "pass a smaller capacity",
        "MemoryError: capacity=67108864: cannot allocate 1.5 GiB for the ring (24 bytes per slot); "
        "pass a smaller capacity",
        "ok",
        "MemoryError: capacity=5242880: cannot allocate 160.0 MiB for the markers (32 bytes each); "
        "pass a smaller capacity",
        "1 [4] [4]",
        "ok",
        "0",
    ]
