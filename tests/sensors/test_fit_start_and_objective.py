"""The step fitters move every parameter from its start, and fit what the returned model predicts.

Two regressions: a delay started at exactly 0 never moved (scipy's finite-difference step is
relative to the parameter, ~1.5e-8 ns at 0, below the log times' resolution: a zero derivative), and
the meter fit chose window and delay with a drift term the returned model does not carry. The records
are closed forms: a boxcar or a first-order filter of a known square-wave load, logged at random times
~5-15 s into the record (float64 times there resolve ~2e-6 ns), with the scale 100 ms, so the coarse
scan's delay cells are 25 ms apart and the best of them is the start at 0.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fingrav_native.sensors import fit_load_response, fit_meter_response, fit_step_response

LIGHT, EXCESS, NOISE, SCALE = 100.0, 200.0, 1.0, 100e6


def _load(rng: np.random.Generator) -> np.ndarray:
    """100 on/off intervals of 30-130 ms each, from 5 s on."""
    return (np.cumsum(rng.uniform(30e6, 130e6, 200)) + 5e9).reshape(-1, 2)


def _boxcar_on(load: np.ndarray, t: np.ndarray, window: float, delay: float) -> np.ndarray:
    """Closed form: the share of [t - delay - window, t - delay] the load is on."""
    b = t - delay
    out = np.zeros(len(t))
    for s, e in load:
        out += np.clip(np.minimum(b, e) - np.maximum(b - window, s), 0.0, None)
    return out / window


def _filter_on(load: np.ndarray, t: np.ndarray, tau: float, delay: float) -> np.ndarray:
    """Closed form: a first-order filter (time constant ``tau``) of the load, read ``delay`` late."""
    x = t - delay
    out = np.zeros(len(t))
    for s, e in load:
        rise = np.where(x > s, -np.expm1(-np.clip(x - s, 0.0, None) / tau), 0.0)
        fall = np.where(x > e, -np.expm1(-np.clip(x - e, 0.0, None) / tau), 0.0)
        out += rise - fall
    return out


def _record(shape: str, delay: float, seed: int = 0,
            drift_w_per_s: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    load = _load(rng)
    t = np.sort(rng.uniform(4e9, load[-1, 1] + 300e6, 600))
    on = _boxcar_on(load, t, 20e6, delay) if shape == "boxcar" else _filter_on(load, t, 20e6, delay)
    drift = drift_w_per_s * (t - np.median(t)) * 1e-9
    return t, LIGHT + EXCESS * on + drift + rng.normal(0.0, NOISE, len(t)), load


def _meter(load: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The board's power sampled every 0.2 ms (a point sample of the square wave)."""
    tm = np.arange(3.5e9, load[-1, 1] + 400e6, 0.2e6)
    idx = np.searchsorted(load[:, 0], tm, side="right") - 1
    on = (idx >= 0) & (tm < load[np.maximum(idx, 0), 1])
    return tm, LIGHT + EXCESS * on


@pytest.mark.parametrize("shape", ["boxcar", "first_order"])
@pytest.mark.parametrize("delay", [3e6, -2e6])
def test_load_fit_moves_a_delay_started_at_zero(shape: str, delay: float) -> None:
    # Before: the boxcar stayed at delay exactly 0 and traded the window for it (24.8 ms for +3 ms).
    t, p, load = _record(shape, delay)
    st = fit_load_response(t, p, load, scale_ns=SCALE, min_delay_ns=-4 * SCALE)
    assert st.shape == shape
    assert 0 < st.delay_err_ns < 0.5e6
    assert abs(st.delay_ns - delay) <= 3 * st.delay_err_ns, (st.delay_ns, st.delay_err_ns)
    length, err = (st.window_ns, st.window_err_ns) if shape == "boxcar" else (st.tau_ns, st.tau_err_ns)
    assert abs(length - 20e6) <= 3 * err, (length, err)


@pytest.mark.parametrize("delay", [3e6, -2e6])
def test_meter_fit_moves_a_delay_started_at_zero(delay: float) -> None:
    t, p, load = _record("boxcar", delay)
    tm, pm = _meter(load)
    st = fit_meter_response(t, p, tm, pm, scale_ns=SCALE)
    assert st.shape == "boxcar"
    assert 0 < st.delay_err_ns < 0.5e6
    assert abs(st.delay_ns - delay) <= 3 * st.delay_err_ns, (st.delay_ns, st.delay_err_ns)
    assert abs(st.window_ns - 20e6) <= 3 * st.window_err_ns, (st.window_ns, st.window_err_ns)
    assert st.gain == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("delay", [3e6, -2e6])
def test_step_fit_moves_a_delay_started_at_zero(delay: float) -> None:
    # Offsets from the step: a 20 ms ramp after the delay, logs every ~0.5 ms around it.
    rng = np.random.default_rng(5)
    u = np.sort(rng.uniform(-200e6, 400e6, 1200))
    y = LIGHT + EXCESS * np.clip((u - delay) / 20e6, 0.0, 1.0) + rng.normal(0.0, NOISE, len(u))
    st = fit_step_response(u, y, scale_ns=SCALE)
    assert st.shape == "boxcar"
    assert abs(st.delay_ns - delay) <= 3 * st.delay_err_ns + 1e3, (st.delay_ns, st.delay_err_ns)
    assert abs(st.window_ns - 20e6) <= 3 * st.window_err_ns + 1e3, (st.window_ns, st.window_err_ns)


def test_meter_fit_reports_the_residual_of_the_model_it_returns() -> None:
    # The field drifts against the meter (0.3 W/s, ~1.5 W RMS over the record). The model predicts
    # gain * (boxcar * meter) + offset and nothing else; the fit must choose window and delay by that,
    # and say so: its residual is the returned model's own. Before, the fit carried a drift the model
    # drops: 1.05 W reported, 1.88 W predicted by the model it returned. (Seed 1: a record whose delay
    # the old fitter did move, so this fails on the drift alone.)
    t, p, load = _record("boxcar", 3e6, seed=1, drift_w_per_s=0.3)
    tm, pm = _meter(load)
    st = fit_meter_response(t, p, tm, pm, scale_ns=SCALE)
    pred = st.offset_w + st.gain * (LIGHT + EXCESS * _boxcar_on(load, t, st.window_ns, st.delay_ns))
    own = math.sqrt(float(np.mean((pred - p) ** 2)))
    # Within 3 %: the fit reads a meter sampled every 0.2 ms, the closed form the square wave itself.
    assert st.residual_w == pytest.approx(own, rel=0.03), (st.residual_w, own)
    assert own > 1.5  # the drift is in it: the model cannot carry it
    assert st.drift_w_per_s == 0.0


def test_load_fit_reports_the_drift_it_carried() -> None:
    # Against the load's square wave the drift is the GPU's power drifting (a nuisance of the power's
    # model, not the sensor's): estimated beside the step and reported, levels at the logs' median time.
    t, p, load = _record("boxcar", 3e6, drift_w_per_s=1.0)
    st = fit_load_response(t, p, load, scale_ns=SCALE, min_delay_ns=-4 * SCALE)
    assert st.drift_w_per_s == pytest.approx(1.0, abs=0.05)
    assert st.low_w == pytest.approx(LIGHT, abs=0.3) and st.high_w == pytest.approx(LIGHT + EXCESS, abs=0.5)
    assert st.residual_w == pytest.approx(NOISE, rel=0.15)


@pytest.mark.parametrize("where", ["meter", "logs"])
def test_unclear_a_stamp_far_off_the_others_is_refused_by_name_not_run_out_of_memory(where: str) -> None:
    # One corrupted stamp ~2.9 centuries from the others asked the meter's filter grid for 46e12 points
    # (a MemoryError of 336 TiB); the meter and the logs are refused by name instead.
    t, p, load = _record("first_order", 0.0)
    tm, pm = _meter(load)
    tm, t = tm.copy(), t.copy()
    if where == "meter":
        tm[-1] = 9.2e18
    else:
        t[0] = -9.2e18
    with pytest.raises(ValueError, match=r"^t_ns, meter_t_ns: .*a stamp far from the others"):
        fit_meter_response(t, p, tm, pm, scale_ns=SCALE)
