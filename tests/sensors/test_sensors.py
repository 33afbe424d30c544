"""Sensor models, energy counters and window-aware deconvolution, scored against a known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fingrav_native import stitch_logs
from fingrav_native.files import load_characterisation, load_profile, save_characterisation, save_profile
from fingrav_native.method import SensorResolutionWarning, deconvolve, needs_deconvolution, runs_needed
from fingrav_native.sensors import (
    SENSOR_PRESETS,
    Characterisation,
    CounterDiscontinuityWarning,
    SensorModel,
    counter_resolution,
    counter_to_logs,
    estimate_period,
    fit_step_response,
    sensor_preset,
)
from fingrav_native.sim import DURATION_NS, Identity, logged_runs, shape

# ---------------------------------------------------------------- the model


@pytest.mark.parametrize("name", sorted(SENSOR_PRESETS))
def test_weights_of_a_partition_sum_to_one(name):
    m = sensor_preset(name)
    if m.kind == "counter":
        m = SensorModel("c", "window", period_ns=m.period_ns, window_ns=m.period_ns)
    t = 5e9
    edges = np.concatenate([[-np.inf], np.linspace(t - 3e9, t + 1e6, 2001), [np.inf]])
    w = m.interval_weights(t, edges[:-1], edges[1:])
    assert w.sum() == pytest.approx(1.0, abs=1e-9)
    assert (w >= 0).all()


def test_boxcar_first_order_instant_and_delay():
    box = SensorModel("b", "window", period_ns=1e6, window_ns=1e6, delay_ns=2e5)
    # The window ends at t - delay: [0.8e6 - 1e6, 0.8e6] overlaps [0, 1e6] by 0.8e6.
    assert float(box.interval_weights(1e6, 0.0, 1e6)) == pytest.approx(0.8)
    filt = SensorModel("f", "window", period_ns=1e6, shape="first_order", tau_ns=1e5)
    assert float(filt.interval_weights(1e6, 1e6 - 1e5, 2e6)) == pytest.approx(1 - math.exp(-1))
    inst = SensorModel("i", "instant", period_ns=1e6)
    assert inst.interval_weights(5.0, np.array([0, 5, 6]), np.array([5, 6, 9])).tolist() == [0, 1, 0]


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"kind": "smoothed"}, "kind"), ({"shape": "gauss"}, "shape"), ({"period_ns": 0}, "period_ns"),
    ({"window_ns": -1}, "window_ns"), ({"gain": 0}, "gain"), ({"shape": "first_order"}, "tau_ns"),
    ({"kind": "instant", "window_ns": 5}, "instant"),
])
def test_bad_models_name_the_field(kwargs, name):
    base = {"name": "x", "kind": "window", "period_ns": 1e6}
    with pytest.raises(ValueError, match=name):
        SensorModel(**{**base, **kwargs})


def test_presets_round_trip_and_unknown_names():
    for m in SENSOR_PRESETS.values():
        assert SensorModel.from_dict(m.as_dict()) == m
    assert sensor_preset("part-time-100ms").window_ns == 25e6
    with pytest.raises(ValueError, match="name='nvidia-instant'.*choose from"):
        sensor_preset("nvidia-instant")
    with pytest.raises(ValueError, match="unknown fields"):
        SensorModel.from_dict({**SENSOR_PRESETS["instant-1ms"].as_dict(), "colour": 1})


# ---------------------------------------------------------------- counters


def test_counter_stuck_wrap_reset_and_quantum():
    q = 2.0 ** -16
    wrap = 2.0 ** 32 * q
    t = np.array([0, 1, 2, 3, 4, 5], dtype=np.int64) * 1_000_000
    e = np.array([wrap - 0.1, wrap - 0.1, 0.2, 0.5, 0.8, 1.1])  # stuck, then a wrap
    logs = counter_to_logs(t, e, quantum_j=q, wrap_j=wrap)
    assert logs.stuck == 1 and logs.wraps == 1 and logs.resets == 0
    # The stuck read's interval is merged into the next window: 0.3 J over 2 ms.
    assert logs.samples["window_ns"][0] == 2_000_000
    assert logs.samples["total"][0] == pytest.approx(0.3 / 2e-3)
    assert logs.max_quantum_w == pytest.approx(q / 1e-3)
    # A fall to 0.1 J is no wrap: it would be 65,536 J in 1 ms (65 MW). A reset: dropped with the steps
    # beside it (it had been counted as a wrap, a 65 MW log), and without a wrap range the same.
    e[4:] = [0.1, 0.4]
    with pytest.warns(CounterDiscontinuityWarning, match="no wrap explains"):
        reset = counter_to_logs(t, e, quantum_j=q, wrap_j=wrap)
    assert (reset.wraps, reset.resets) == (1, 1)
    assert reset.samples["total"].tolist() == [pytest.approx(150.0)]  # only the wrap's step is left
    with pytest.warns(CounterDiscontinuityWarning, match="2 falls of the counter"):
        plain = counter_to_logs(t, e, quantum_j=q)  # no range known: every fall is a reset
    assert (plain.wraps, plain.resets, len(plain.samples)) == (0, 2, 0)


def test_counter_rejects_bad_reads():
    with pytest.raises(ValueError, match="timestamps_ns"):
        counter_to_logs([0.5, 1.5], [0, 1])
    with pytest.raises(ValueError, match="energy_j"):
        counter_to_logs([0, 1], [0, np.nan])
    with pytest.raises(ValueError, match="one length"):
        counter_to_logs([0, 1, 2], [0, 1])


# ---------------------------------------------------------------- deconvolution


def _score(dec, dip=0.25):
    c = dec["total"]
    f = dec.bin_centres
    truth = shape(f, dip)
    rmse = float(np.sqrt(np.mean((c.curve - truth) ** 2)) / np.mean(truth))
    bias = float(np.mean(c.curve) / np.mean(truth) - 1)
    return c, f, truth, rmse, bias


@pytest.mark.slow
def test_a_1ms_average_recovers_a_mid_kernel_dip():
    # The criterion: a few-hundred-us kernel with a 25 % mid-kernel dip,
    # logged by a 1 ms averaging sensor with the window declared per log.
    sensor = sensor_preset("amd-1ms-average")
    samples, ex = logged_runs(400, sensor, seed=1)
    dec = deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(400),
                     channels=("total",), resolution_ns=10_000)
    c, f, truth, rmse, bias = _score(dec)
    assert rmse <= 0.03
    assert abs(bias) <= 0.01
    assert abs(f[np.argmin(c.curve)] - 0.5) <= 0.05
    ramp = 600 + 100 * f[np.argmin(c.curve)]
    assert 1 - c.curve.min() / ramp == pytest.approx(0.25, abs=0.06)
    assert np.mean((truth >= c.low) & (truth <= c.high)) >= 0.7
    assert dec.edge_logs > 2000 and dec.dropped_logs == 0  # edges in all 15 executions share the shape
    # Energy per execution: the curve's integral, within 1 %.
    assert c.energy_j == pytest.approx(np.mean(truth) * DURATION_NS * 1e-9, rel=0.01)


@pytest.mark.slow
def test_placing_the_same_windowed_logs_at_one_instant_smears_the_dip():
    # The old attribution (window centre, value unchanged) against the truth:
    # what the deconvolution is for.
    from fingrav_native.method import place_logs

    sensor = sensor_preset("amd-1ms-average")
    samples, ex = logged_runs(400, sensor, seed=1)
    lois = place_logs(samples, ex, Identity(), execution_of_interest=-1, min_overlap=0.0)
    f = lois["toi_frac"]
    rmse_old = float(np.sqrt(np.mean((lois["total"] - shape(f)) ** 2)) / np.mean(shape(f)))
    dec = deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(400),
                     channels=("total",))
    assert _score(dec)[3] < rmse_old / 3


@pytest.mark.slow
def test_instantaneous_logs_deconvolve_to_the_curve():
    sensor = sensor_preset("instant-1ms")
    samples, ex = logged_runs(200, sensor, seed=2)
    dec = deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(200),
                     channels=("total",))
    assert _score(dec)[3] <= 0.02


@pytest.mark.slow
def test_a_part_time_sensor_says_it_cannot_resolve_the_kernel():
    sensor = sensor_preset("part-time-100ms")
    samples, ex = logged_runs(200, sensor, seed=3)
    # 30 logs hold 9 window edges inside the executions: fewer than one bin needs (EDGES_PER_BIN).
    with pytest.raises(ValueError, match=r"logs cannot determine .* 9 window edges .* about \d+ runs would give the "
                                         r"40 bins asked"):
        deconvolve(samples[:30], ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(200))
    dec = deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(200),
                     channels=("total",), resolution_ns=10_000, bootstrap=50)
    assert any("window edge" in w for w in dec.warnings)
    assert any("runs would give 74 bins, 20 window edges each" in w for w in dec.warnings)
    assert any("energy per execution is not determined" in w for w in dec.warnings)
    assert dec.resolution_ns > 3 * 10_000


def test_only_golden_runs_are_used_and_arguments_are_checked():
    sensor = sensor_preset("amd-1ms-average")
    samples, ex = logged_runs(40, sensor, seed=4)
    dec = deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(20),
                     channels=("total",), bootstrap=0)
    assert dec.n_runs == 20 and np.isnan(dec["total"].low).all()
    with pytest.raises(ValueError, match="runs: no golden run"):
        deconvolve(samples, ex, Identity(), sensor, execution_of_interest=99, runs=np.arange(20))
    with pytest.raises(ValueError, match="bins"):
        deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(20), bins=1)
    with pytest.raises(ValueError, match="sensor"):
        deconvolve(samples, ex, Identity(), "amd-1ms-average", execution_of_interest=-1,  # type: ignore[arg-type]
                   runs=np.arange(20))
    with pytest.raises(ValueError, match="channels"):
        deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(20),
                   channels=("memory",))


def test_when_to_deconvolve_and_how_many_runs():
    logs = np.zeros(3, dtype=[("source_ts", "<i8"), ("total", "<f4"), ("window_ns", "<u4")])
    assert not needs_deconvolution(logs, None, 366_000, 10_000)
    assert needs_deconvolution(logs, sensor_preset("amd-1ms-average"), 366_000, 10_000)
    logs["window_ns"] = 2_000
    assert not needs_deconvolution(logs, None, 366_000, 10_000)
    logs["window_ns"] = 8_000
    assert needs_deconvolution(logs, None, 366_000, 10_000)
    # 40 bins x 20 edges, 2 edges of a 1 ms window per run, a 366 us kernel: 0.732 edges per run.
    assert runs_needed(sensor_preset("amd-1ms-average"), 366_000, 40) == math.ceil(800 / 0.732)
    assert runs_needed(sensor_preset("part-time-100ms"), 366_000, 40) == math.ceil(800 / (2 * 0.00366))


# ---------------------------------------------------------------- characterisation



@pytest.mark.parametrize(("shape_name", "length", "delay"), [("boxcar", 1e6, 1e5), ("first_order", 3e5, 2e5),
                                                           ("boxcar", 25e6, 0.0)])
def test_a_step_response_gives_back_the_sensor(shape_name, length, delay):
    rng = np.random.default_rng(5)
    u = rng.uniform(-3 * length, 6 * length, 3000)
    resp = (np.clip((u - delay) / length, 0, 1) if shape_name == "boxcar"
            else np.where(u > delay, -np.expm1(-(u - delay) / length), 0.0))
    fit = fit_step_response(u, 100 + 500 * resp + rng.normal(0, 3, len(u)))
    assert fit.shape == shape_name
    got = fit.window_ns if shape_name == "boxcar" else fit.tau_ns
    assert got == pytest.approx(length, rel=0.05)
    assert fit.delay_ns == pytest.approx(delay, abs=0.05 * length)
    assert fit.residual_w < fit.other_residual_w
    with pytest.raises(ValueError, match="at least 8"):
        fit_step_response(u[:5], u[:5])


def test_period_from_repeated_and_missed_updates():
    # A sensor updates on its own timer (a fixed grid); a host tool polls the cached value every 13 ms,
    # so each update is seen at the first poll after it (late by up to one poll) and polled again until
    # the next; some polls are lost. The truth is the grid's period.
    rng = np.random.default_rng(6)
    period, poll = 100e6, 13e6
    errs, ses = [], []
    for _ in range(20):
        updates = rng.uniform(0, period) + period * np.arange(300)
        polls = np.cumsum(rng.normal(poll, 0.3e6, int(300 * period / poll)))
        polls = np.delete(polls, rng.choice(len(polls), len(polls) // 20, replace=False))
        idx = np.searchsorted(updates, polls, side="right") - 1
        ok = idx >= 0
        values = 200.0 + 10.0 * np.sin(idx[ok].astype(float))  # every update a new reading
        est = estimate_period(polls[ok], values)
        errs.append(est.period_ns - period)
        ses.append(est.uncertainty_ns)
    errs_a, ses_a = np.asarray(errs), np.asarray(ses)
    # The median of intervals would be off by the poll grid's quantisation; the slope is not.
    assert np.max(np.abs(errs_a)) < 1e-3 * period
    # Honest: the errors sit within their stated 3 standard errors, and those are not padded tenfold.
    assert np.mean(np.abs(errs_a) <= 3 * ses_a) >= 0.9
    assert np.median(ses_a) < 10 * np.sqrt(np.mean(errs_a ** 2))
    # Lateness uniform over one poll: a robust spread near poll / 4 x 1.48.
    assert est.jitter_ns == pytest.approx(1.4826 * poll / 4, rel=0.3)
    with pytest.raises(ValueError, match="3 distinct"):
        estimate_period([1, 1, 2])


def _sparse_updates(rng: np.random.Generator, period: float, poll: float, seconds: float,
                    off_grid: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Polls (ms-stamped, as nvidia-smi writes them) of a field updated on a fixed grid whose value changes
    only now and then: busy stretches change it at every update, idle ones leave it for up to seconds."""
    updates = rng.uniform(0, period) + period * np.arange(int(seconds * 1e9 / period))
    busy = (np.floor(updates / 1.7e9) % 2 == 0) | (rng.random(len(updates)) < 0.02)
    level = np.cumsum(np.where(busy, rng.normal(0, 20, len(updates)), 0.0)) + 300.0
    polls = np.cumsum(rng.uniform(0.55 * poll, 1.1 * poll, int(seconds * 1e9 / poll)))
    idx = np.searchsorted(updates, polls, side="right") - 1
    ok = idx >= 0
    t, v = np.round(polls[ok] / 1e6) * 1e6, level[idx[ok]]
    if off_grid:  # values that changed between updates (a restart, a driver hiccup): stamps off the grid
        at = rng.choice(len(t) - 1, off_grid, replace=False)
        v = v.copy()
        v[at] += 1000.0 + rng.normal(0, 1, off_grid)
    return t, v


def test_period_across_idle_stretches_of_unchanged_values():
    # On the K40m record the value stays unchanged for seconds at idle; counting periods
    # interval by interval (round(interval / period)) then miscounts the long gaps by a period or more,
    # and both counts fit: 15.40 ms from the record's first half, 15.16 from its whole. The coherent
    # period (epoch folding) indexes every update from one grid.
    rng = np.random.default_rng(27)
    errs, ses = [], []
    for _ in range(12):
        t, v = _sparse_updates(rng, 15.16e6, 9e6, 12.0)
        est = estimate_period(t, v)
        errs.append(est.period_ns / 15.16e6 - 1)
        ses.append(est.uncertainty_ns / 15.16e6)
    e, se = np.abs(errs), np.asarray(ses)
    assert np.max(e) < 1e-3, errs
    assert np.mean(e <= 3 * se) >= 0.9, (errs, ses)


def test_stamps_off_the_update_grid_are_left_out_and_counted():
    # The RTX 3090 and A5000 records hold a few changes between updates (phase 0.4 cycle off the
    # others); indexed as updates they shifted every later index, and the first half's period came
    # out 2 % off.
    rng = np.random.default_rng(28)
    t, v = _sparse_updates(rng, 100e6, 7e6, 8.0, off_grid=4)
    est = estimate_period(t, v)
    assert est.period_ns == pytest.approx(100e6, rel=1e-3)
    assert 1 <= est.off_grid <= 8  # each odd value is one change off the grid, and the change back one more


def test_counter_quantum_and_file_round_trip(tmp_path):
    rng = np.random.default_rng(7)
    e = np.cumsum(rng.integers(0, 40, 200)) * 2.0 ** -16
    assert counter_resolution(e) == pytest.approx(2.0 ** -16)
    assert math.isnan(counter_resolution([1.0, 1.0]))
    c = Characterisation(sensor_preset("amd-1ms-average"), estimate_period(np.arange(10) * 1e6), None,
                         0.0, "test", "synthetic")
    path = save_characterisation(c, tmp_path / "s.json")
    assert load_characterisation(path) == c
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="bad.json.*not a fingrav sensor"):
        load_characterisation(tmp_path / "bad.json")


# ---------------------------------------------------------------- through stitch_logs



@pytest.mark.slow
def test_stitch_logs_deconvolves_declared_windows_and_keeps_the_instant_path():
    # The criterion through the public entry point: the window declared per log.
    samples, ex = logged_runs(400, sensor_preset("amd-1ms-average"), seed=1)
    with pytest.warns(SensorResolutionWarning) as got:
        ep = stitch_logs(samples, ex, Identity(), execution_of_interest=-1, margin=0.05, x="fraction")
    text = " | ".join(str(w.message) for w in got)
    assert "resolve features of about" in text and "coarser than the 10.0 us" in text
    # Bins follow the resolution: no more unknowns than the noise lets the logs determine.
    assert "the noise limits the resolution" in text
    assert ep.deconvolution is not None
    assert len(ep.deconvolution.bin_edges) - 1 <= 2 * ep.deconvolution.duration_ns / ep.deconvolution.resolution_ns + 1
    assert ep.deconvolution is not None and ep.stitched.smoother == "deconvolution"
    ch = ep.stitched["total"]
    truth = shape(ch.bin_centres)
    rmse = np.sqrt(np.mean((ch.mean - truth) ** 2)) / np.mean(truth)
    assert rmse <= 0.03
    assert abs(ch.bin_centres[np.argmin(ch.mean)] - 0.5) <= 0.05
    assert ep.energy["total"].energy_j == pytest.approx(np.mean(truth) * DURATION_NS * 1e-9, rel=0.01)
    # The instantaneous path is still there, and is what the paper does with such logs: smeared.
    old = stitch_logs(samples, ex, Identity(), execution_of_interest=-1, margin=0.05, x="fraction",
                      attribution="instant")
    assert old.deconvolution is None and old.stitched.smoother == "local"
    # Logs without windows take the instantaneous path by default, unchanged.
    inst, ex2 = logged_runs(100, sensor_preset("instant-1ms"), seed=2)
    plain = stitch_logs(inst[["source_ts", "total"]], ex2, Identity(), execution_of_interest=-1, margin=0.05)
    assert plain.deconvolution is None


@pytest.mark.slow
def test_a_deconvolved_profile_round_trips_through_a_file(tmp_path):
    import dataclasses

    from fingrav_native.method import Profile

    samples, ex = logged_runs(120, sensor_preset("amd-1ms-average"), seed=8)
    with pytest.warns(SensorResolutionWarning):
        ep = stitch_logs(samples, ex, Identity(), execution_of_interest=-1, margin=0.05, sensor="amd-1ms-average")
    assert ep.deconvolution is not None and ep.deconvolution.sensor.name == "amd-1ms-average"
    from fingrav_native import profile as run_profile

    base = run_profile("cb-4k-gemm", mode="sse", runs=12, top_up=False)
    prof = dataclasses.replace(base, profiles={"custom": ep})
    assert isinstance(prof, Profile)
    back = load_profile(save_profile(prof, tmp_path / "p.fgprof"))
    d = back.profiles["custom"].deconvolution
    assert d is not None and d.sensor == ep.deconvolution.sensor
    np.testing.assert_array_equal(d["total"].curve, ep.deconvolution["total"].curve)


@pytest.mark.slow
def test_what_the_sensor_cannot_resolve_is_said():
    samples, ex = logged_runs(200, sensor_preset("part-time-100ms"), seed=3)
    with pytest.warns(SensorResolutionWarning) as got:
        stitch_logs(samples, ex, Identity(), execution_of_interest=-1, margin=0.05)
    text = " | ".join(str(w.message) for w in got)
    assert "only 15 logs have a window edge" in text and "20 window edges each" in text
    assert "coarser than the 10.0 us asked for" in text
    with pytest.raises(ValueError, match="attribution='centre'"):
        stitch_logs(samples, ex, Identity(), execution_of_interest=-1, margin=0.05, attribution="centre")
    with pytest.raises(ValueError, match="name='nope'"):
        stitch_logs(samples, ex, Identity(), execution_of_interest=-1, margin=0.05, sensor="nope")


@pytest.mark.parametrize("model", [
    SensorModel("b", "window", period_ns=1e6, window_ns=1e6, delay_ns=1e5),
    SensorModel("f", "window", period_ns=1e6, shape="first_order", tau_ns=3e5, delay_ns=5e4),
], ids=["boxcar", "first_order"])
def test_a_known_load_pattern_gives_back_the_sensor(model):
    # Heavy pulses of 0.4-2 ms on a light background that switches sharply, logged at random times.
    from fingrav_native.sensors import fit_load_response

    rng = np.random.default_rng(9)
    starts = np.cumsum(rng.uniform(6e6, 9e6, 60))
    busy = np.column_stack([starts, starts + rng.uniform(4e5, 2e6, 60)])
    t = np.sort(rng.uniform(0, starts[-1] + 5e6, 4000))
    load = sum(model.interval_weights(t, s, e) for s, e in busy)
    y = 300 + 150 * load + 0.5e-9 * (t - t.mean()) + rng.normal(0, 2, len(t))
    fit = fit_load_response(t, y, busy, scale_ns=5e5)
    assert fit.shape == model.shape
    length = fit.window_ns if model.shape == "boxcar" else fit.tau_ns
    assert length == pytest.approx(model.window_ns or model.tau_ns, rel=0.05)
    assert fit.delay_ns == pytest.approx(model.delay_ns, abs=0.05 * length)
    assert fit.high_w - fit.low_w == pytest.approx(150, rel=0.05)


#: A simulated GPU whose power follows activity within tau_power (15 us): clocks pinned, no
#: leakage creep, no cap. Characterising a sensor needs power that switches sharply with the
#: load; the default physics adds ms-scale clock ramps and heating, which a step cannot tell
#: from the sensor's own window (docs/explanation/deconvolution.md).
SHARP_GPU = {"f_park": 1.0, "f_min": 1.0, "r_fast_k_per_w": 0.0, "r_slow_k_per_w": 0.0, "cap_w": 3000.0}


@pytest.mark.parametrize("window_ns", [500_000.0, 1_000_000.0])
@pytest.mark.slow
def test_characterize_recovers_the_simulated_sensor(window_ns):
    from fingrav_native.app import characterize
    from fingrav_native.backends import SimBackend

    backend = SimBackend(seed=1, logger_window_ns=window_ns, **SHARP_GPU)
    c = characterize(backend, kernel="cb-8k-gemm", half_period_ns=3e6)
    assert c.sensor.source == "characterised" and c.sensor.shape == "boxcar"
    assert c.period.period_ns == pytest.approx(1e6, rel=0.01)
    assert c.sensor.window_ns == pytest.approx(window_ns, rel=0.05)
    assert c.sensor.delay_ns == pytest.approx(0.0, abs=0.05 * window_ns)  # the sim stamps at the window's end


def test_fingrav_characterize_writes_a_sensor_file_profiles_can_use(tmp_path, capsys):
    from fingrav_native.app import _cli as cli
    from fingrav_native.files import load_characterisation

    out = tmp_path / "sensor.json"
    assert cli.main(["characterize", "--runs", "6", "--cycles", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "period 1000.0 us" in text and "written to" in text
    c = load_characterisation(out)
    assert c.sensor.source == "characterised" and c.period.period_ns == pytest.approx(1e6, rel=0.01)
    with pytest.raises(SystemExit) as bad:  # out of range: refused by argparse
        cli.main(["characterize", "--runs", "1"])
    assert bad.value.code == 2
    assert "argument --runs: '1' is out of range; must be an integer in [2, 100000]" in capsys.readouterr().err


def test_a_window_of_whole_executions_is_said_to_hide_the_shape():
    # 330 us kernels 3.33 us apart: a 1 ms window spans exactly 3 executions, every phase alike
    # (a zero of the boxcar's sinc response): found on the simulator with cb-4k-gemm's SSP.
    sensor = sensor_preset("amd-1ms-average")
    samples, ex = logged_runs(60, sensor, seed=11, duration_ns=330_000.0, gap_ns=3_333.3, duration_jitter=0.0)
    dec = deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(60),
                     channels=("total",), bootstrap=20)
    assert any("spans 3.00 execution periods" in w for w in dec.warnings)
    samples, ex = logged_runs(60, sensor, seed=11)  # 366 us + 3 us: 2.71 executions per window
    dec = deconvolve(samples, ex, Identity(), sensor, execution_of_interest=-1, runs=np.arange(60),
                     channels=("total",), bootstrap=20)
    assert not any("execution periods" in w for w in dec.warnings)
