"""The closed-form device (sim.observe, sim.simulate_runs): exact sensors, and runs that break the method's assumptions."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav_native.records import make_executions
from fingrav_native.sensors import SensorModel, sensor_preset
from fingrav_native.sim import logged_runs, observe, shape, simulate_runs

STEP = 500.0


def _grid(t0=0.0, t1=20e6):
    return np.arange(t0, t1, STEP)


def _step(t, at=8e6, lo=100.0, hi=400.0):
    return np.where(t >= at, hi, lo)


# ---------------------------------------------------------------- observe(): each sensor, exactly


@pytest.mark.parametrize("sensor", [
    SensorModel("i", "instant", period_ns=1e6, gain=1.1, offset_w=7.0, quantum=0.5),
    SensorModel("b", "window", period_ns=1e6, window_ns=2.5e6, gain=1.1, offset_w=7.0, quantum=0.5, delay_ns=3e5),
    SensorModel("f", "window", period_ns=1e6, shape="first_order", tau_ns=4e5, gain=1.1, offset_w=7.0, quantum=0.5,
                delay_ns=-2e5),
    SensorModel("c", "counter", period_ns=1e6, gain=1.1, offset_w=7.0, quantum=1e-6, delay_ns=1e5),
], ids=lambda s: s.name)
def test_a_constant_power_reads_offset_plus_gain_times_it_through_every_kind(sensor):
    t = _grid()
    logs = observe(t, np.full(len(t), 300.0), sensor, rng=np.random.default_rng(0), start_ns=4e6, stop_ns=15e6)
    assert len(logs) >= 9 and (np.diff(logs["source_ts"]) > 0).all()
    want = 7.0 + 1.1 * 300.0
    if sensor.kind == "counter":
        # Whole quanta of energy: a window's power is off by less than one quantum over the window.
        assert np.abs(logs["total"] - want).max() <= 1e-6 / 1e-3 + 1e-3
        assert (logs["window_ns"] > 0).all()
    else:
        np.testing.assert_array_equal(logs["total"], np.float32(np.round(want / 0.5) * 0.5))
        assert (logs["window_ns"] == sensor.window_ns).all()


@pytest.mark.parametrize("delay", [0.0, 3.3e5, -4.1e5])
def test_a_boxcar_of_a_step_is_the_exact_ramp(delay):
    t = _grid()
    sensor = SensorModel("b", "window", period_ns=1e5, window_ns=1e6, delay_ns=delay)
    logs = observe(t, _step(t), sensor, rng=np.random.default_rng(1), start_ns=5e6, stop_ns=12e6)
    u = logs["source_ts"].astype(float)
    phase_err = np.abs(u - np.round(u))  # stamps are rounded to the ns: the ramp moves 300 W / 1e6 ns per ns
    want = 100.0 + 300.0 * np.clip((u - delay - 8e6) / 1e6, 0.0, 1.0)
    np.testing.assert_allclose(logs["total"], want, rtol=2e-6, atol=1e-3 + phase_err.max())
    assert ((logs["total"] > 101) & (logs["total"] < 399)).sum() >= 8  # the ramp itself is sampled


@pytest.mark.parametrize("delay", [0.0, 2.2e5, -3.7e5])
def test_a_first_order_filter_of_a_step_is_one_minus_exp_shifted_by_the_delay(delay):
    t = _grid()
    tau = 4e5
    sensor = SensorModel("f", "window", period_ns=5e4, shape="first_order", tau_ns=tau, delay_ns=delay)
    logs = observe(t, _step(t), sensor, rng=np.random.default_rng(2), start_ns=6e6, stop_ns=12e6, phase_ns=1234.5)
    u = 6e6 + 1234.5 + np.arange(len(logs)) * 5e4
    np.testing.assert_array_equal(logs["source_ts"], np.round(u))
    since = np.clip(u - delay - 8e6, 0.0, None)
    want = 100.0 + 300.0 * (1.0 - np.exp(-since / tau))
    np.testing.assert_allclose(logs["total"], want, rtol=2e-7, atol=1e-4)
    assert logs["total"][u - delay < 8e6].max() == pytest.approx(100.0)


def test_counter_windows_tile_time_and_their_energies_sum_to_the_exact_integral():
    t = _grid(0.0, 40e6)
    p = 300.0 + 150.0 * np.sin(t / 1.3e6) + _step(t)
    sensor = SensorModel("c", "counter", period_ns=1e6, quantum=2.0**-16)
    logs = observe(t, p, sensor, rng=np.random.default_rng(3), start_ns=2e6, stop_ns=38e6, jitter_ns=20_000.0)
    ts, w = logs["source_ts"], logs["window_ns"].astype(np.int64)
    np.testing.assert_array_equal((ts - w)[1:], ts[:-1])  # each window starts where the one before ended
    a, b = float(ts[0] - w[0]), float(ts[-1])
    cum = np.concatenate([[0.0], np.cumsum(p[:-1] * STEP)])
    exact = (np.interp(b, t, cum) - np.interp(a, t, cum)) * 1e-9
    got = float(np.sum(logs["total"].astype(float) * w) * 1e-9)
    # Whole quanta at both ends, stamps rounded to the ns, values in float32.
    assert got == pytest.approx(exact, rel=2e-6, abs=2 * 2.0**-16)


def test_a_poller_reads_the_latest_update_at_or_before_its_stamp_and_lags_at_most_one_period():
    t = _grid()
    p = 200.0 + 0.01 * (t / 1e3)  # every update differs
    sensor = SensorModel("i", "instant", period_ns=1e6)
    kw = {"start_ns": 1e6, "stop_ns": 19e6, "phase_ns": 3.21e5}
    updates = observe(t, p, sensor, rng=np.random.default_rng(4), **kw)
    polls = observe(t, p, sensor, rng=np.random.default_rng(4), poll_ns=3e5, poll_phase_ns=1.7e5, **kw)
    assert len(polls) == len(np.arange(1e6 + 1.7e5, 19e6, 3e5)) - 1  # the first poll precedes the first update
    k = np.searchsorted(updates["total"], polls["total"])
    np.testing.assert_array_equal(updates["total"][k], polls["total"])  # every value is an update's
    lag = polls["source_ts"] - updates["source_ts"][k]
    assert (lag >= 0).all() and (lag < 1e6).all() and lag.max() > 0.9e6
    assert (np.diff(polls["total"]) == 0).sum() >= len(polls) // 2  # repeats kept, as real pollers give them


def test_observe_refuses_a_grid_that_does_not_cover_the_responses():
    t = _grid(0.0, 5e6)
    with pytest.raises(ValueError, match="t_grid.*does not cover"):
        observe(t, np.ones(len(t)), SensorModel("b", "window", period_ns=1e6, window_ns=2e6),
                rng=np.random.default_rng(0), start_ns=1e6, stop_ns=4e6)
    with pytest.raises(ValueError, match="uniform"):
        observe(np.array([0.0, 1.0, 3.0]), np.ones(3), SensorModel("f", "window", period_ns=1, shape="first_order",
                tau_ns=1.0), rng=np.random.default_rng(0), start_ns=0.0, stop_ns=2.0)


# ---------------------------------------------------------------- campaign runs


def _legacy_logged_runs(n_runs, sensor, *, seed=0, executions=15, dip=0.25, noise_w=2.0, idle_w=100.0, tau_ns=2e6,
                        gap_ns=3_000.0, duration_jitter=0.004, duration_ns=366_000.0):
    # logged_runs as it was before the assumption breaks (commit 175a787), kept verbatim as the reference.
    def power(t, starts, ends, levels):
        p = np.full_like(t, idle_w)
        for i, (s, e, lv) in enumerate(zip(starts, ends, levels)):
            m = (t >= s) & (t < e)
            p[m] = shape((t[m] - s) / (e - s), dip) + lv
            if i + 1 < len(starts):
                p[(t >= e) & (t < starts[i + 1])] = shape(np.array([1.0]), dip)[0] + lv
        end_w = shape(np.array([1.0]), dip)[0] + levels[-1]
        m = t >= ends[-1]
        p[m] = idle_w + (end_w - idle_w) * np.exp(-(t[m] - ends[-1]) / tau_ns)
        return p

    rng = np.random.default_rng(seed)
    cols = {k: [] for k in ("run", "index", "start", "end")}
    log_t, log_v, log_w = [], [], []
    window = sensor.window_ns
    t0 = 0.0
    for r in range(n_runs):
        t0 += max(40e6, 3 * window) + rng.uniform(0, sensor.period_ns)
        durs = duration_ns * (1 + duration_jitter * rng.standard_normal(executions))
        s = t0 + np.concatenate([[0.0], np.cumsum(durs[:-1] + gap_ns)])
        e = s + durs
        levels = np.linspace(-60.0, 0.0, executions)
        cols["run"] += [r] * executions
        cols["index"] += list(range(executions))
        cols["start"] += list(s)
        cols["end"] += list(e)
        lo, hi = s[0] - window - 2e6, e[-1] + 20e6
        phase = rng.uniform(0, sensor.period_ns)
        t = lo + phase + np.arange(0.0, hi - lo - phase, sensor.period_ns)
        t = t + rng.normal(0.0, 1_000.0, len(t))
        grid = np.arange(lo - window - 1e3, hi + 1e3, 500.0)
        p = power(grid, s, e, levels)
        cum = np.concatenate([[0.0], np.cumsum(p[:-1] * np.diff(grid))])
        if window > 0:
            v = (np.interp(t, grid, cum) - np.interp(t - window, grid, cum)) / window
        else:
            v = np.interp(t, grid, p)
        log_t.append(t)
        log_v.append(v + rng.normal(0.0, noise_w, len(t)))
        log_w.append(np.full(len(t), window))
    ex = make_executions(np.array(cols["run"], dtype=int), np.array(cols["index"], dtype=int),
                         np.zeros(len(cols["run"]), dtype=int), np.array(cols["start"]), np.array(cols["end"]))
    t_all = np.concatenate(log_t)
    samples = np.zeros(len(t_all), dtype=[("source_ts", "<i8"), ("total", "<f4"), ("window_ns", "<u4")])
    samples["source_ts"] = np.round(t_all)
    samples["total"] = np.concatenate(log_v)
    samples["window_ns"] = np.concatenate(log_w)
    return samples, ex


@pytest.mark.parametrize(("name", "kw"), [
    ("amd-1ms-average", {}), ("instant-1ms", {"noise_w": 0.0}), ("part-time-100ms", {"executions": 4}),
    ("amd-1ms-average", {"seed": 11, "duration_ns": 330_000.0, "gap_ns": 3_333.3, "duration_jitter": 0.0}),
])
def test_logged_runs_without_breaks_is_bit_identical_to_the_original(name, kw):
    kw = {"seed": 7, **kw}
    samples, ex = logged_runs(3, sensor_preset(name), **kw)
    old_samples, old_ex = _legacy_logged_runs(3, sensor_preset(name), **kw)
    assert samples.tobytes() == old_samples.tobytes() and samples.dtype == old_samples.dtype
    assert ex.tobytes() == old_ex.tobytes()


def test_logged_runs_reproduces_values_captured_from_the_original():
    # Captured from the implementation before the breaks were added (seed 7, three runs).
    samples, ex = logged_runs(3, sensor_preset("amd-1ms-average"), seed=7)
    assert len(samples) == 85 and len(ex) == 45
    assert samples["source_ts"][[0, 5, -1]].tolist() == [38620138, 43619328, 146367891]
    assert samples["total"][[0, 5, 42, 65, 66]].tolist() == [96.90570831298828, 595.0687255859375,
                                                           146.6200714111328, 639.5476684570312, 542.9794921875]
    assert ex["start_ns"][[0, -1]].tolist() == [40625095, 126869627] and ex["end_ns"][-1] == 127233499
    inst, _ = logged_runs(3, sensor_preset("instant-1ms"), seed=7, noise_w=0.0)
    assert inst["total"][[0, 5, -1]].tolist() == [100.0, 666.4754028320312, 100.03841400146484]


def test_a_gap_that_draws_its_own_power_falls_below_the_end_of_execution_as_the_closed_form_says():
    sensor = sensor_preset("instant-1ms")
    held = simulate_runs(2, sensor, seed=3, gap_w=None, noise_w=0.0)
    own = simulate_runs(2, sensor, seed=3, gap_w=150.0, gap_tau_ns=2_000.0, gap_ns=6_000.0, noise_w=0.0)
    tr = own.truth
    for i in (0, 6, 13):
        e, nxt = tr.ends[1, i], tr.starts[1, i + 1]
        t = np.linspace(e, nxt, 20001)[:-1] + (nxt - e) / 40000  # midpoints
        mean = float(tr.power(t).mean())
        end_w = float(shape(np.array([1.0]))[0] + tr.levels[i])
        g = nxt - e
        closed = 150.0 + (end_w - 150.0) * 2_000.0 / g * (1 - np.exp(-g / 2_000.0))
        assert mean == pytest.approx(closed, rel=1e-5)
        assert mean < end_w - 100
    # Inside the executions the curve is the method's; the truth's energy of interest hardly moves.
    s, e = tr.starts[1, -1], tr.ends[1, -1]
    mid = np.linspace(s, e, 101)[1:-1]
    np.testing.assert_allclose(tr.power(mid), held.truth.power(mid + (held.truth.starts[1, -1] - s)), rtol=1e-3)


def test_the_breaks_keep_the_runs_and_move_only_what_they_break():
    sensor = sensor_preset("amd-1ms-average")
    base = simulate_runs(4, sensor, seed=5)
    broken = simulate_runs(4, sensor, seed=5, shape_jitter=0.3, drift_w_per_s=20.0, cool_tau_jitter=0.5)
    assert base.executions.tobytes() == broken.executions.tobytes()  # paired: same runs and phases
    np.testing.assert_array_equal(base.samples["source_ts"], broken.samples["source_ts"])
    assert np.ptp(broken.truth.dips) > 0.05 and np.ptp(base.truth.dips) == 0
    assert np.ptp(broken.truth.cool_tau_ns) > 0.2e6 and np.ptp(base.truth.cool_tau_ns) == 0
    assert not np.allclose(base.truth.energy_j, broken.truth.energy_j, rtol=1e-3)
    # The truth's energy is its curve's integral, drift included.
    f = (np.arange(4000) + 0.5) / 4000
    dur = np.mean(broken.truth.ends[:, -1] - broken.truth.starts[:, -1])
    assert broken.truth.energy_j.mean() == pytest.approx(broken.truth.curve(f).mean() * dur * 1e-9, rel=2e-3)
    polled = simulate_runs(4, SensorModel("i", "instant", period_ns=1e6), seed=5, poll_ns=1e5)
    assert np.diff(polled.samples["source_ts"]).min() >= 99_999
    # Any sensor through logged_runs: a counter's logs are windows of about its period.
    counted, _ = logged_runs(2, sensor_preset("amd-energy-accumulator"), seed=5, gap_w=150.0)
    assert np.median(counted["window_ns"]) == pytest.approx(1e6, rel=0.01)


# ---------------------------------------------------------------- the training loop


@pytest.fixture(scope="module")
def loop():
    from fingrav_native.sim import logged_loop

    return logged_loop(SensorModel("i", "instant", period_ns=37_000.0), seed=4, iterations=300)


def test_the_loops_energies_add_up_to_an_independent_integral(loop):
    per_iteration = float((loop.counts * loop.energy_j).sum()) + loop.gap_energy_j + loop.pause_energy_j
    assert per_iteration == pytest.approx(loop.iteration_energy_j, rel=1e-9)
    sc = loop.schedule
    a = sc.starts[sc.iteration == loop.warmup_iterations][0]
    step = 100.0  # finer than the loop's grid, and midpoints of it: the integral of the formula itself
    t = np.arange(a, sc.record_end_ns, step) + step / 2
    energy = float(loop.power(t).sum()) * step * 1e-9
    assert energy == pytest.approx(loop.iteration_energy_j * (loop.iterations - loop.warmup_iterations), rel=1e-3)
    assert loop.gap_energy_j > 0 and loop.pause_energy_j > 0.03  # 300 us relaxing toward 120 W
    assert loop.max_power_w == 750.0 and loop.power(t).max() < 750.0


def test_the_loop_is_deterministic_per_seed_and_one_schedule_whatever_the_sensor():
    from fingrav_native.sim import logged_loop

    a = logged_loop(sensor_preset("amd-1ms-average"), seed=2, iterations=60)
    b = logged_loop(sensor_preset("amd-1ms-average"), seed=2, iterations=60)
    c = logged_loop(sensor_preset("amd-energy-accumulator"), seed=2, iterations=60, poll_ns=2.5e5)
    d = logged_loop(sensor_preset("amd-1ms-average"), seed=3, iterations=60)
    assert a.samples.tobytes() == b.samples.tobytes() and a.executions.tobytes() == b.executions.tobytes()
    assert a.executions.tobytes() == c.executions.tobytes()
    assert a.executions.tobytes() != d.executions.tobytes()
    # The polled counter's logs tile the record and carry its energy (to a quantum and the noise).
    cum = c.samples["total"].astype(float) * c.samples["window_ns"] * 1e-9
    t0, t1 = float(c.samples["source_ts"][0] - c.samples["window_ns"][0]), float(c.samples["source_ts"][-1])
    tt = np.arange(t0, t1, 100.0) + 50.0
    assert cum.sum() == pytest.approx(float(c.power(tt).sum()) * 100e-9, rel=2e-3)


def test_instant_logs_inside_each_signature_recover_its_energy(loop):
    ex = loop.executions
    steady = loop.schedule.iteration >= loop.warmup_iterations
    ts = loop.samples["source_ts"]
    k = np.searchsorted(ex["start_ns"], ts, side="right") - 1
    inside = (k >= 0) & (ts < ex["end_ns"][np.clip(k, 0, None)]) & steady[np.clip(k, 0, None)]
    for sig in range(len(loop.names)):
        mine = inside & (ex["kernel_id"][np.clip(k, 0, None)] == sig)
        dur = np.mean((ex["end_ns"] - ex["start_ns"])[steady & (ex["kernel_id"] == sig)]) * 1e-9
        assert mine.sum() >= 100
        assert float(loop.samples["total"][mine].mean()) * dur == pytest.approx(loop.energy_j[sig], rel=0.03)


def test_the_loops_trace_warm_up_gaps_and_curves(loop):
    tr = loop.trace
    assert len(tr) == len(loop.executions) == 7 * loop.iterations
    np.testing.assert_array_equal(tr.executions["kernel_id"], loop.executions["kernel_id"])
    assert tuple(tr.signatures["name"]) == loop.names and len(tr.steps) == loop.iterations
    np.testing.assert_array_equal(tr.iteration(), loop.schedule.iteration)
    durations = [np.median((loop.executions["end_ns"] - loop.executions["start_ns"])[loop.executions["kernel_id"] == s])
                 for s in range(5)]
    assert len(set(np.round(np.array(durations), -3))) == 5  # distinct durations
    # The warm-up: the first iteration runs ~4 % cooler than steady.
    sc = loop.schedule
    first = (sc.iteration == 0) & (sc.sig == 0)
    assert sc.level[first].max() == pytest.approx(0.96, abs=0.002) and sc.level[~first].max() == pytest.approx(1.0)
    # A launch gap draws less than the end of the execution before it.
    k = np.flatnonzero(~sc.pause_after & (sc.iteration == 100))[0]
    gap = np.linspace(sc.ends[k], sc.starts[k + 1], 200)[1:-1]
    assert loop.power(gap).mean() < loop.power([sc.ends[k] - 1.0])[0] - 50
    # The steady curve is what the steady executions draw, on average.
    f = np.array([0.1, 0.6, 0.9])
    k = np.flatnonzero((sc.sig == 2) & (sc.iteration >= loop.warmup_iterations))
    direct = np.mean([loop.power(sc.starts[i] + f * (sc.ends[i] - sc.starts[i])) for i in k], axis=0)
    np.testing.assert_allclose(loop.curve(2, f), direct, rtol=1e-9)
    assert loop.curve(2, 0.6)[0] < 0.8 * loop.curve(2, 0.9)[0]  # the attention kernel's dip
