"""The module surface: constants, record layouts, SourceInfo, and that the
package re-exports the core."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fingrav_native
from fingrav_native import _core


def test_package_reexports_the_core():
    for name in fingrav_native.__all__:
        if name == "__version__":
            continue
        obj = getattr(fingrav_native, name)
        if hasattr(_core, name):
            assert obj is getattr(_core, name), name
        elif isinstance(obj, (np.dtype, int)):
            # Record layouts and constants of the analysis layer (records, steady).
            assert name.isupper(), name
        else:
            # The pure-Python steps (e.g. clocksync) are exported alongside the core.
            assert obj.__module__.startswith("fingrav_native."), name
    assert isinstance(fingrav_native.__version__, str) and fingrav_native.__version__


def test_constants():
    assert _core.CHANNELS == ("total", "compute", "io", "memory")
    assert _core.MIN_PERIOD_NS == 20_000
    assert _core.MAX_PERIOD_NS == 1_000_000_000
    assert _core.MIN_CAPACITY == 16
    assert _core.FLAG_SOURCE_GAP == 1 and _core.FLAG_DERIVED == 2
    assert _core.MARKER_HAS_DEVICE_TS == 1
    assert issubclass(_core.SamplerError, RuntimeError)


def _layout(dtype: np.dtype) -> list[tuple[str, str, int]]:
    assert dtype.fields is not None and dtype.names is not None
    return [(name, dtype.fields[name][0].str, dtype.fields[name][1]) for name in dtype.names]


def test_sample_dtype_mirrors_the_cpp_struct():
    dt = _core.SAMPLE_DTYPE
    assert dt.itemsize == 64  # one cache line
    assert _layout(dt) == [
        ("host_ns", "<i8", 0),
        ("host_poll_begin_ns", "<i8", 8),
        ("source_ts", "<i8", 16),
        ("source_seq", "<u8", 24),
        ("seq", "<u8", 32),
        ("total", "<f4", 40),
        ("compute", "<f4", 44),
        ("io", "<f4", 48),
        ("memory", "<f4", 52),
        ("flags", "<u4", 56),
        ("window_ns", "<u4", 60),
    ]


def test_reading_dtype_mirrors_the_cpp_struct():
    dt = _core.READING_DTYPE
    assert dt.itemsize == 40
    assert _layout(dt) == [
        ("source_ts", "<i8", 0),
        ("source_seq", "<u8", 8),
        ("total", "<f4", 16),
        ("compute", "<f4", 20),
        ("io", "<f4", 24),
        ("memory", "<f4", 28),
        ("flags", "<u4", 32),
        ("window_ns", "<u4", 36),
    ]


def test_marker_dtype_mirrors_the_cpp_struct():
    dt = _core.MARKER_DTYPE
    assert dt.itemsize == 32
    assert _layout(dt) == [
        ("host_ns", "<i8", 0),
        ("device_ts", "<i8", 8),
        ("run", "<i4", 16),
        ("execution", "<i4", 20),
        ("kernel_id", "<i4", 24),
        ("kind", "|u1", 28),
        ("flags", "|u1", 29),
    ]


def test_synthetic_source_info():
    src = _core.SyntheticSource(period_ns=250_000, channel_mask=0b1010, window_ns=77)
    info = src.info
    assert isinstance(src, _core.PowerSource)
    assert info.name == "synthetic"
    assert info.clock_domain == "synthetic-ns"
    assert info.channel_mask == 0b1010
    assert info.channels == ["compute", "memory"]
    assert info.native_period_ns == 250_000
    assert info.tick_ns == 1.0
    assert info.has_sequence is True
    assert info.window_ns == 77
    assert repr(info) == (
        "SourceInfo(name='synthetic', clock_domain='synthetic-ns', native_period_ns=250000, "
        "channels=['compute', 'memory'])"
    )
    assert src.in_use is False and src.polls == 0


@pytest.mark.parametrize("cls", ["HostClockInfo", "SourceInfo", "PowerSource", "SamplerStats", "TimestampSource"])
def test_classes_without_a_public_constructor(cls):
    with pytest.raises(TypeError, match="No constructor defined"):
        getattr(_core, cls)()


@pytest.mark.slow
def test_dropping_running_samplers_neither_hangs_nor_crashes():
    # In a subprocess: a crash or a hang must fail this test, not the run.
    script = textwrap.dedent(
        """
        import gc
        import fingrav_native.native as f

        def wait(pred):
            import time
            deadline = time.monotonic() + 20
            while not pred():
                assert time.monotonic() < deadline, "timed out"
                time.sleep(0.001)

        # Running, never stopped, dropped: the destructor stops and joins.
        s = f.Sampler(f.SyntheticSource(period_ns=100_000, depth=8), period_ns=50_000)
        s.start()
        wait(lambda: s.stats().polls >= 5)
        arr = s.drain()
        del s
        gc.collect()
        # The drained array outlives its sampler.
        assert arr["seq"].tolist() == list(range(len(arr)))

        # Failed on its own, never stopped, dropped.
        src = f.SyntheticSource(fatal_error_at_poll=2)
        s = f.Sampler(src, period_ns=50_000)
        s.start()
        wait(lambda: not s.running)
        del s
        gc.collect()
        assert not src.in_use  # the destructor released the source
        src.poll()

        # Sources dropped before their sampler: the sampler keeps them alive.
        s = f.Sampler(f.SyntheticSource(), period_ns=50_000)
        s.start()
        gc.collect()
        del s

        # Still running at interpreter exit, with a 1 s period.
        keep = f.Sampler(f.SyntheticSource(), period_ns=1_000_000_000)
        keep.start()
        wait(lambda: keep.stats().polls >= 1)
        print("ok", flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
