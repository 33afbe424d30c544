"""Clock-sync measurement in C++: bracketed-read bursts and the periodic recorder."""

from __future__ import annotations

import time

import numpy as np
import pytest

import fingrav_native.native as fn
from fingrav_native.sim import _device as sim


@pytest.fixture
def live_gpu() -> sim.SimGPU:
    return sim.SimGPU(seed=3, realtime=True, read_rtt_ns=3000, read_outlier_prob=0.0)


def test_brackets_contain_the_true_device_sampling_instant(live_gpu: sim.SimGPU) -> None:
    src = live_gpu.timestamp_source()
    b = fn.measure_brackets(src, 300)
    assert b.shape == (300, 3) and b.dtype == np.int64
    hb, ticks, ha = b[:, 0], b[:, 1], b[:, 2]
    assert np.all(np.diff(hb) > 0) and np.all(np.diff(ticks) > 0)
    # Each read really takes its simulated round trip.
    assert np.all(ha - hb >= 3000)
    true_host = live_gpu.host_at_device_ticks(ticks.astype(np.float64))
    tick = live_gpu.params["device_tick_ns"]
    assert np.all(true_host >= hb - tick) and np.all(true_host <= ha + tick)


def test_measure_brackets_owns_its_buffer_and_checks_arguments(live_gpu: sim.SimGPU) -> None:
    b = fn.measure_brackets(live_gpu.timestamp_source(), 4)
    assert b.base is not None and not b.flags.owndata  # handed over from C++, not copied
    with pytest.raises(ValueError, match="n=0"):
        fn.measure_brackets(live_gpu.timestamp_source(), 0)


def test_virtual_device_has_no_live_timestamp_source() -> None:
    with pytest.raises(ValueError, match="real-time device"):
        sim.SimGPU().timestamp_source()


def test_recorder_takes_periodic_bursts_and_a_final_one(live_gpu: sim.SimGPU) -> None:
    rec = fn.ClockSyncRecorder(live_gpu.timestamp_source(), interval_ns=20_000_000, burst=8)
    with rec:
        time.sleep(0.15)
        assert rec.running
    assert not rec.running
    st = rec.stats()
    b = rec.drain()
    assert b.shape == (st.reads, 3) and st.reads == 8 * st.bursts
    assert st.bursts >= 3 and st.drops == 0
    # Bursts are spaced by the interval (loosely: a loaded box may delay one).
    starts = b[::8, 0]
    assert np.median(np.diff(starts)[:-1]) >= 15_000_000
    assert 0 <= st.cpu_time_ns <= st.wall_time_ns
    assert rec.error is None
    with pytest.raises(RuntimeError, match="already started"):
        rec.start()


@pytest.mark.parametrize(
    "kwargs,name",
    [({"interval_ns": 10}, "interval_ns"), ({"burst": 0}, "burst"), ({"capacity": 100}, "capacity"),
     ({"capacity": 8}, "capacity")],
)
def test_recorder_rejects_bad_arguments(live_gpu: sim.SimGPU, kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        fn.ClockSyncRecorder(live_gpu.timestamp_source(), **kwargs)
