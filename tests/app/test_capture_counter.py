"""The energy counter a capture records beside the logs (for the energy closure): recorder, file, loader.

The counter is polled by a second sampler on its own power source in energy mode; on a fake MI300X
(tests/fakes/fake_amd.py: a caching driver's gpu_metrics at a constant 120 W) its readings must integrate to
120 W; a capture file keeps it bit for bit, old captures (no counter) still load, and every damaged form is
refused by name.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fakes import fake_amd
from fingrav_native import _core
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.app import PowerRecorder
from fingrav_native.backends import _amd_sysfs as amd_sysfs
from fingrav_native.files import CapturedCounter, CaptureFormatError, PowerCapture, load_capture
from fingrav_native.sensors import EnergyCounter
from fingrav_native.sim import SimGPU


def _steps(n: int = 200, power_w: float = 250.0, window_ns: int = 2_000_000, t0: int = 5_000_000_000) -> np.ndarray:
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["source_ts"] = t0 + window_ns * np.arange(1, n + 1)
    s["host_ns"] = s["source_ts"] + 30_000
    s["seq"] = np.arange(n)
    s["total"] = power_w
    s["window_ns"] = window_ns
    return s


def _capture(counter: CapturedCounter | None, logs: np.ndarray | None = None) -> PowerCapture:
    logs = _steps(power_w=240.0, window_ns=1_000_000, n=400) if logs is None else logs
    # Host-stamped logs (hwmon-like): the epoch map alone maps them.
    host0 = int(logs["host_ns"][0]) - 10_000_000
    b = np.array([(host0 + k * 50_000_000, 1_700_000_000_000_000_000 + k * 50_000_000 + 40, host0 + k * 50_000_000 + 80)
                  for k in range(12)], dtype=np.int64)
    return PowerCapture(samples=logs, epoch_brackets=b,
                        source={"name": "test", "clock_domain": "host-monotonic-raw", "tick_ns": 1.0,
                                "native_period_ns": 1_000_000, "window_ns": 1_000_000, "channels": ["total"]},
                        sensor=None, period_ns=1_000_000, stats={}, meta={}, counter=counter)


def _counter(**kw) -> CapturedCounter:
    source = {"name": "counter", "clock_domain": "host-monotonic-raw", "tick_ns": 1.0, "native_period_ns": 0,
              "window_ns": 0, "channels": ["total"]}
    return CapturedCounter(**{**dict(samples=_steps(), source=source, quantum_j=2.0 ** -16, stale_ns=0.0,
                                     scope="socket", period_ns=2_000_000, stats={"drops": 0}), **kw})


def test_a_counter_round_trips_and_rebuilds_exactly(tmp_path) -> None:
    c = _capture(_counter())
    back = load_capture(c.save(tmp_path / "power.npz"))
    assert back.counter is not None and np.array_equal(back.counter.samples, c.counter.samples)
    assert back.counter.header() == c.counter.header()
    counter, cmap = back.energy_counter()
    assert isinstance(counter, EnergyCounter) and counter.scope == "socket" and counter.quantum_j == 2.0 ** -16
    # 200 chained 2 ms steps at 250 W: 201 readings, 0.1 J apart, one segment.
    assert len(counter) == 201 and set(counter.segment.tolist()) == {0}
    np.testing.assert_allclose(np.diff(counter.energy_j), 0.5, rtol=1e-6)
    assert cmap.to_host_ns(counter.t[:1])[0] > 1_700_000_000_000_000_000  # onto the epoch


def test_logs_that_are_the_counter_store_no_second_copy(tmp_path) -> None:
    of_logs = CapturedCounter(samples=None, source=None, quantum_j=1e-3, stale_ns=2e6, scope="gpu")
    c = _capture(of_logs)
    path = c.save(tmp_path / "power.npz")
    with np.load(path, allow_pickle=False) as z:
        assert "counter_samples" not in z.files
        assert json.loads(str(z["header"][()]))["counter"]["of_logs"] is True
    counter, _ = load_capture(path).energy_counter()
    # 400 chained 1 ms steps at 240 W: 0.24 J each, stale by the poll period (host-stamped reads).
    assert len(counter) == 401 and counter.stale_ns == 2e6
    np.testing.assert_allclose(np.diff(counter.energy_j), 0.24, rtol=1e-6)


def test_a_capture_without_a_counter_loads_as_before(tmp_path) -> None:
    c = _capture(None)
    path = c.save(tmp_path / "power.npz")
    with np.load(path, allow_pickle=False) as z:
        assert "counter" not in json.loads(str(z["header"][()])) and "counter_samples" not in z.files
    back = load_capture(path)
    assert back.counter is None and back.energy_counter() is None


def _rewrite(path, tmp_path, name, *, header=None, **arrays):
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    h = json.loads(str(members["header"][()]))
    if header is not None:
        header(h)
    members["header"] = np.array(json.dumps(h))
    for k, v in arrays.items():
        if v is None:
            members.pop(k, None)
        else:
            members[k] = v
    out = tmp_path / name
    with open(out, "wb") as f:
        np.savez(f, **members)
    return out


def test_a_damaged_counter_is_refused_by_name(tmp_path) -> None:
    good = _capture(_counter()).save(tmp_path / "good.npz")
    cases = [
        (dict(header=lambda h: h["counter"].pop("quantum_j")), r"counter: missing \['quantum_j'\]"),
        (dict(header=lambda h: h["counter"].update(quantum_j=-1)), "counter.quantum_j: expected a finite number"),
        (dict(header=lambda h: h["counter"].update(of_logs="yes")), "counter.of_logs: expected true or false"),
        (dict(header=lambda h: h["counter"].update(of_logs=True)), "counter.of_logs is true but the array"),
        (dict(counter_samples=None), "counter.of_logs is false but the array 'counter_samples' is missing"),
        (dict(counter_samples=np.zeros(3)), "counter.samples: must be a 1-D SAMPLE_DTYPE array"),
        (dict(header=lambda h: h.pop("counter")), "'counter_samples' is there but the header has no 'counter'"),
        (dict(header=lambda h: h["counter"]["source"].pop("tick_ns")), r"counter.source: .*missing \['tick_ns'\]"),
    ]
    for i, (kw, match) in enumerate(cases):
        with pytest.raises(CaptureFormatError, match=match):
            load_capture(_rewrite(good, tmp_path, f"bad{i}.npz", **kw))
    with pytest.raises(ValueError, match="counter=dict: must be a CapturedCounter"):
        _capture({"of_logs": True})  # type: ignore[arg-type]


def test_the_recorder_polls_a_counter_source_beside_the_logs(tmp_path) -> None:
    gpu = SimGPU(realtime=True, seed=1)
    counter = _core.SyntheticSource(period_ns=1_000_000, window_ns=1_000_000, base_w=100.0, amplitude_w=0.0)
    with PowerRecorder(gpu, tmp_path / "power.npz", brackets_every_s=0.05, counter=counter,
                       counter_period_ns=500_000) as rec:
        gpu.idle(3e8)
    c = rec.capture
    assert c.counter is not None and len(c.counter.samples) > 50
    assert c.counter.source["name"] == "synthetic" and c.counter.period_ns == 500_000
    assert c.counter.stats["drained"] == len(c.counter.samples)
    back = load_capture(tmp_path / "power.npz")
    assert np.array_equal(back.counter.samples, c.counter.samples)
    ec, _ = back.energy_counter()
    # The synthetic source logs 100 W over each 1 ms step: the rebuilt counter grows 0.1 J a step.
    np.testing.assert_allclose(np.diff(ec.energy_j)[np.diff(ec.segment) == 0], 0.1, rtol=1e-6)
    # The simulator has no counter of its own; "auto" records none, and None asks for none.
    with PowerRecorder(SimGPU(realtime=True, seed=2)) as rec2:
        pass
    assert rec2.capture.counter is None
    with pytest.raises(ValueError, match="counter='yes'"):
        PowerRecorder(SimGPU(realtime=True, seed=3), counter="yes")
    with pytest.raises(ValueError, match="counter_period_ns"):
        PowerRecorder(SimGPU(realtime=True, seed=3), counter_period_ns=1)


@pytest.fixture
def fake_mi300(tmp_path, monkeypatch):
    """One MI300X in a fake sysfs whose gpu_metrics a 5 ms caching driver refreshes at a constant 120 W."""
    root = tmp_path / "sys"
    gm = fake_amd.make_sysfs(root, fake_amd.build_v19(fake_amd.SMU_13_0_6_ROCM, {}))
    find = amd_sysfs.find_amd_gpus
    monkeypatch.setattr(amd_sysfs, "find_amd_gpus", lambda sysfs_root="/sys": find(str(root)))
    with fake_amd.CachedGpuMetricsFile(gm, cache_ns=5_000_000, power_w=120.0):
        yield root


def test_amd_socket_power_records_the_energy_accumulator_beside_it(fake_mi300, tmp_path, wait_for) -> None:
    with PowerRecorder("amd:0:socket", tmp_path / "power.npz", brackets_every_s=0.05) as rec:
        # Twice the 16 logs the logger map is fitted from, and counter readings to integrate, however loaded the
        # machine (a fixed sleep got fewer on a busy one).
        wait_for(lambda: rec._sampler.stats().samples >= 32 and rec._counter.stats()["samples"] >= 8,
                 "32 power logs and 8 counter readings")
    c = rec.capture
    assert c.counter is not None and not c.counter.of_logs
    assert c.counter.scope == "socket" and c.counter.quantum_j == 2.0 ** -16 and c.counter.stale_ns == 0.0
    assert c.counter.source["clock_domain"] == c.source["clock_domain"]  # the firmware's clock: the logs' map
    counter, _ = load_capture(tmp_path / "power.npz").energy_counter()
    seg = counter.segment == counter.segment[0]
    e, t = counter.energy_j[seg], counter.t[seg]
    # The accumulator integrates 120 W on the firmware's 10 ns clock, quantised to 2^-16 J.
    assert (e[-1] - e[0]) / ((t[-1] - t[0]) * 10e-9) == pytest.approx(120.0, abs=0.01)


def test_amd_energy_channel_logs_are_the_counter(fake_mi300, wait_for) -> None:
    with PowerRecorder("amd:0", brackets_every_s=0.05) as rec:
        wait_for(lambda: rec._sampler.stats().samples >= 32, "32 logs")
    c = rec.capture
    assert c.counter is not None and c.counter.of_logs and c.counter.scope == "socket"
    counter, _ = c.energy_counter()
    assert (counter.energy_j[-1] - counter.energy_j[0]) > 0


def test_unclear_a_glitched_counter_step_is_flagged_by_the_capture_not_refused(tmp_path) -> None:
    # A counter on its own clock (its map fitted from its readings): the capture checked its steps as power
    # logs and refused the whole counter for one negative step ("samples: total has 1 of 200 values that are
    # not a power"). The step is the counter's glitch: its segments either side stay, the logs untouched.
    source = {"name": "counter", "clock_domain": "counter-firmware", "tick_ns": 1.0, "native_period_ns": 0,
              "window_ns": 0, "channels": ["total"]}
    steps = _steps()
    steps["total"][100] = -40.0
    path = _capture(_counter(samples=steps, source=source)).save(tmp_path / "power.npz")
    back = load_capture(path)
    assert back.counter is not None and np.array_equal(back.counter.samples, steps)
    counter, cmap = back.energy_counter()
    assert [b[1] for b in counter.breaks] == ["glitch"] and "a glitched reading" in counter.breaks[0][2]
    assert sorted(set(counter.segment.tolist())) == [0, 1]
    np.testing.assert_allclose(np.diff(counter.energy_j)[np.diff(counter.segment) == 0], 0.5, rtol=1e-6)
    assert cmap.to_host_ns(counter.t[:1])[0] > 1_700_000_000_000_000_000
