"""The simulated device expresses the real sensors, and profile() runs end to end on each.

Sensors are part of the measurement: the sim's logger takes the
presets of :data:`fingrav_native.sensors.SENSOR_PRESETS`; the
criterion compares a 1 ms averaging sensor's SSP
profile with the instantaneous logger's at the same runs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fingrav_native.app import profile
from fingrav_native.backends import SimBackend
from fingrav_native.method import SensorResolutionWarning
from fingrav_native.sensors import SENSOR_PRESETS
from fingrav_native.sim import SimGPU, sensor_params


@pytest.mark.parametrize("name", sorted(SENSOR_PRESETS))
def test_sim_gpu_takes_every_preset_and_reports_it(name: str) -> None:
    gpu = SimGPU(seed=1, sensor=name)
    assert gpu.sensor == SENSOR_PRESETS[name]
    for key, value in sensor_params(name).items():
        assert gpu.params[key] == value, key
    caps = SimBackend(gpu).capabilities
    assert caps.sensor == SENSOR_PRESETS[name]
    preset = SENSOR_PRESETS[name]
    assert caps.logger_window_ns == (preset.period_ns if preset.kind == "counter" else preset.window_ns)


def test_default_device_is_the_papers_instant_logger() -> None:
    assert SimGPU(seed=0).sensor.name == "instant-1ms"
    assert SimBackend(seed=0).capabilities.sensor == SENSOR_PRESETS["instant-1ms"]


def test_sensor_and_logger_parameters_clash_by_name() -> None:
    with pytest.raises(ValueError, match="logger_window_ns"):
        SimGPU(sensor="amd-1ms-average", logger_window_ns=2e6)
    with pytest.raises(ValueError, match="preset"):
        SimGPU(sensor="no-such-sensor")


def test_sliding_window_logs_are_the_true_window_average() -> None:
    # A 1 s average every 100 ms (NVIDIA's power reading): each log is the
    # mean of the truth over the second before it.
    gpu = SimGPU(seed=3, sensor="nvidia-average-1s")
    gpu.idle(1_200_000_000)
    gpu.run("cb-4k-gemm", 200)
    gpu.idle(300_000_000)
    logs = gpu.logs()
    logs = logs[logs["sample_ns"] > logs["sample_ns"][0] + 1_100_000_000]
    assert len(logs) >= 3
    for log in logs[-4:]:
        t = np.arange(log["sample_ns"] - 1_000_000_000 + 500, log["sample_ns"], 1000, dtype=np.int64)
        truth = float(np.mean(gpu.truth_power(t)[:, 0]))
        assert log["window_ns"] == 1_000_000_000
        assert abs(float(log["total"]) / truth - 1) < 1e-4


def test_counter_logs_tile_time_and_carry_their_interval() -> None:
    gpu = SimGPU(seed=4, sensor="amd-energy-accumulator")
    gpu.run("cb-4k-gemm", 50)
    logs = gpu.logs()
    assert np.array_equal(logs["window_ns"][1:].astype(np.int64), np.diff(logs["sample_ns"]))


def _fidelity(preset: str, runs: int, seed: int = 1, kernel: str = "cb-4k-gemm",
              executions: int | None = None) -> dict[str, float]:
    """SSP profile against the sim's truth (as bench/method_bench.py scores it)."""
    b = SimBackend(seed=seed, sensor=preset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SensorResolutionWarning)
        p = profile(kernel, b, mode="ssp", runs=runs, top_up=False, executions=executions, phase="random")
    ep = p.profiles["ssp"]
    ch = next(c for c in ep.stitched.channels if c.name == "total")
    ex = b.gpu.executions()
    bw = float(np.median(np.diff(ch.bin_centres)))
    offs = np.linspace(-bw / 2, bw / 2, 9)
    vals = []
    assert ep.golden.run_ids is not None
    for r in ep.golden.run_ids:
        e = ex[(ex["run"] == r) & (ex["index"] == ep.execution_index)]
        t = (e["start_ns"][0] + ch.bin_centres[:, None] + offs[None, :]).astype(np.int64)
        vals.append(b.gpu.truth_power(t.ravel())[:, 0].reshape(t.shape).mean(axis=1))
    truth = np.nanmean(vals, axis=0)
    # The profile a user reads: its smooth fit at the bin centres (held at
    # its end values beyond the outermost LOIs), as bench/phase_bench.py scores.
    if ch.fit_x is not None and ch.fit_y is not None and np.isfinite(ch.fit_y).sum() >= 2:
        good = np.isfinite(ch.fit_x) & np.isfinite(ch.fit_y)
        order = np.argsort(ch.fit_x[good])
        est = np.interp(ch.bin_centres, ch.fit_x[good][order], ch.fit_y[good][order])
    else:
        est = np.asarray(ch.mean, dtype=np.float64)
    ok = np.isfinite(est) & np.isfinite(truth)
    return {"rmse": float(np.sqrt(np.mean((est[ok] - truth[ok]) ** 2)) / np.mean(truth[ok])),
            "bias": float(np.mean(est[ok]) / np.mean(truth[ok]) - 1), "runs": float(p.runs)}


@pytest.mark.slow
def test_one_ms_average_is_within_1_5x_of_instant_and_unbiased() -> None:
    # The criterion, on cb-8k-gemm's SSP execution (2.5 ms: the 1 ms
    # window is 0.4 of it), 200 runs, mean over three seeds: measured 2.1 %
    # (instant) against 2.9 % (deconvolved 1 ms average), bias < 0.1 %.
    inst = [_fidelity("instant-1ms", 200, seed=s, kernel="cb-8k-gemm", executions=12) for s in (1, 2, 3)]
    avg = [_fidelity("amd-1ms-average", 200, seed=s, kernel="cb-8k-gemm", executions=12) for s in (1, 2, 3)]
    rmse_inst = float(np.mean([f["rmse"] for f in inst]))
    rmse_avg = float(np.mean([f["rmse"] for f in avg]))
    assert rmse_avg <= 1.5 * rmse_inst, (avg, inst)
    assert all(abs(f["bias"]) <= 0.01 for f in avg), avg


@pytest.mark.slow
def test_a_window_spanning_whole_executions_is_named_and_not_resolved() -> None:
    # cb-4k-gemm's SSP executions are 335 us apart: the 1 ms window spans
    # 2.98 of them, a zero of the boxcar's sinc response at every harmonic,
    # so windows inside the run carry the level and not the shape; only the
    # run's two ends do. The profile says so, and is coarser than the
    # instant sensor's (measured 11-15 % RMSE at 200 runs against 0.4-2 %).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profile("cb-4k-gemm", SimBackend(seed=1, sensor="amd-1ms-average"), mode="ssp", runs=40, top_up=False,
                executions=64, phase="random")
    said = [str(w.message) for w in caught if issubclass(w.category, SensorResolutionWarning)]
    assert any("window spans 2.9" in m for m in said), said
    assert any("coarser than" in m or "noisy" in m for m in said), said


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SENSOR_PRESETS))
def test_profile_runs_end_to_end_on_every_preset(name: str) -> None:
    # Bounded search and top-ups keep the slow sensors (100 ms periods) to a
    # minute; what is checked is that every step works, and that a sensor
    # that cannot resolve the kernel says so.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = profile("cb-4k-gemm", SimBackend(seed=1, sensor=name), mode="ssp", runs=20, probe_lois=20,
                    max_executions=64, max_top_up_runs=10)
    assert p.backend.sensor == SENSOR_PRESETS[name]
    ep = p.profiles["ssp"]
    assert np.isfinite(ep.stitched.channels[0].mean).any()
    if SENSOR_PRESETS[name].averages:
        assert any(issubclass(w.category, SensorResolutionWarning) for w in caught)


def test_a_cached_poller_reads_the_latest_published_log_stamped_at_its_own_time() -> None:
    gpu = SimGPU(seed=5, cached_poll_ns=300_000.0)
    run = gpu.run("cb-4k-gemm", 30)
    logs = gpu.logs()
    s = run.samples
    assert len(s) >= 30 and (np.diff(s["host_ns"]) == 300_000).all()
    assert (s["host_ns"] >= run.host_begin_ns).all() and (s["host_ns"] <= run.host_end_ns).all()
    by_seq = {int(q): i for i, q in enumerate(logs["seq"])}
    for row in s:
        log = logs[by_seq[int(row["source_seq"])]]
        assert row["total"] == log["total"] and log["publish_ns"] <= row["host_ns"]
        # The latest one: the next log was not yet published, so the lag is about a logger period at most.
        nxt = by_seq.get(int(row["source_seq"]) + 1)
        assert nxt is None or logs["publish_ns"][nxt] > row["host_ns"]
        assert row["host_ns"] - log["publish_ns"] < 1.2 * gpu.params["logger_period_ns"]  # its period wanders
    assert (np.diff(s["source_seq"].astype(np.int64)) == 0).sum() >= len(s) // 2  # repeats kept
    np.testing.assert_array_equal(s["source_ts"], gpu.logger_ticks_at(s["host_ns"]))
    with pytest.raises(ValueError, match="cached_poll_ns"):
        SimGPU(seed=5, realtime=True, cached_poll_ns=1e5)
