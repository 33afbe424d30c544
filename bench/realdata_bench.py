"""Sensors characterised from public hardware records, checked against the records' own meters.

The records (Yang, Adamek and Armour, SC'24; GPU_Power_Benchmark at commit
4b5c944c, MIT; RTX 3090, 4090, A5000, K40m) are read from ``yang_sc24/`` of the
real-data folder: ``$FINGRAV_REAL_DATA``, by default ``../shared/data/public``
beside the repository (tests/real_data.py; they are not in the repository). They hold nvidia-smi's power fields polled every
~8 ms, the load's on-intervals, and a PMD meter at ~4.8 kHz on the board's
power inputs. Per record and field, split at the middle of the record:

1. ``fg.characterize_logs`` on the first half only (logs and load clipped
   to it): period, shape, window or time constant, delay.
2. The period against the change times over the whole record (first to
   last change over the whole number of periods between them).
3. Prediction of the field from the meter on the second half: the
   characterised model applied to the meter's power, with a gain and offset
   fitted on the first half; beside it the best boxcar found by brute-force
   search over window and delay on the first half, and the best on the
   second half itself (an oracle no method can beat). Then the reverse
   fold (characterised and searched on the second half, scored on the
   first; the meter from the record's start as the reference), the
   two folds' mean difference with a block-bootstrap SE drawn jointly over
   both held-out halves, and in-sample checks of the fitter (each half,
   and the whole record characterised and searched on all of it).
4. Energy per on-period in the second half through the package's
   sensor-aware path (``fg.method.fit_timeline`` with the characterised
   model), raw and after a gain calibrated on the first half (the meter's
   steady levels against the field's), against the meter; or what the
   result says it cannot resolve.
5. The on-period's shape through the same path (up to 64 bins): curve
   RMSE, 10-90 % rise and plateau flatness against the meter in the same
   bins, and how many bins' 95 % bands hold the meter; beside it the
   paper's point attribution and the meter at 1 ms (what bins of a few
   hundred milliseconds cannot show).

The A100 records of the same repository are held back for an independent
check and are not read here.

Run: ``FINGRAV_REAL_DATA=/path/to/public python bench/realdata_bench.py`` (writes bench/results/realdata.json,
realdata_<gpu>.png and the README section).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
import warnings
from datetime import datetime, timezone
from typing import Any

import numpy as np
import scipy.signal

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))  # real_data: where the records are

import fingrav_native as fg  # noqa: E402
from fingrav_native.files import read_logs_csv  # noqa: E402
from fingrav_native.method import fit_timeline  # noqa: E402
from fingrav_native.sensors import fit_meter_response  # noqa: E402
from real_data import MissingRealData  # noqa: E402
from real_data import path as real_data_path  # noqa: E402

RESULTS = os.path.join(HERE, "results")
#: (record, field) pairs with a meter and a load.
CASES = (("3090_5050", "power.draw.instant"), ("3090_transient", "power.draw.instant"),
         ("3090_transient", "power.draw"), ("4090_transient", "power.draw"), ("A5000_transient", "power.draw"),
         ("K40m_transient", "power.draw"))
WINDOWS_MS = (1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1000)
DELAYS_MS = tuple(np.arange(-100.0, 100.1, 2.5))


def load_case(rec: str, field: str) -> dict[str, np.ndarray]:
    d = real_data_path(f"yang_sc24/{rec}")
    t, p = read_logs_csv(os.path.join(d, f"{field}.csv.gz"), ("t_ns", "power_w"), "logs")
    s, e = read_logs_csv(os.path.join(d, "load.csv"), ("start_ns", "end_ns"), "load")
    tm, pm = read_logs_csv(os.path.join(d, "meter.csv.gz"), ("t_ns", "power_w"), "meter")
    t0 = int(min(t.min(), s.min(), tm.min()))
    f = np.concatenate([[True], p[1:] != p[:-1]])  # the first poll of each reading
    # The board idles before the meter starts: its first half second's level, 10 s back, so that a long
    # response reaching before the meter's first sample sees the idle board, not nothing.
    lead = float(np.median(pm[tm < tm[0] + 500_000_000]))
    pad_t = np.linspace(tm[0] - 10_000_000_000, tm[0] - 1_000_000, 200).astype(tm.dtype)
    tm, pm = np.concatenate([pad_t, tm]), np.concatenate([np.full(len(pad_t), lead), pm])
    return {"t": (t[f] - t0).astype(float), "p": p[f].astype(float), "load": np.column_stack([s - t0, e - t0]).astype(float),
            "tm": (tm - t0).astype(float), "pm": pm.astype(float), "t_all": (t - t0).astype(float)}


def cumulative(tm: np.ndarray, pm: np.ndarray) -> np.ndarray:
    """The meter's energy from its start (J), trapezoids."""
    return np.concatenate([[0.0], np.cumsum(0.5 * (pm[1:] + pm[:-1]) * np.diff(tm))]) * 1e-9


def predict(model: fg.SensorModel, t: np.ndarray, tm: np.ndarray, pm: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """The field the model would log at ``t`` from the meter's power: a boxcar exactly, by the meter's
    cumulative energy; a first-order filter as a recursive filter on the meter's sample grid."""
    e = t - model.delay_ns
    outside = e > tm[-1]  # past the meter's last sample: no prediction (before its start it is padded)
    if model.shape != "first_order":
        w = max(model.window_ns, 1.0)
        return np.where(outside, np.nan, (np.interp(e, tm, cum) - np.interp(e - w, tm, cum)) * 1e9 / w)
    return np.where(outside, np.nan, filtered(model.tau_ns, t, e, tm, pm))


def filtered(tau_ns: float, t: np.ndarray, e: np.ndarray, tm: np.ndarray, pm: np.ndarray) -> np.ndarray:
    """A first-order filter (time constant ``tau_ns``) of the meter's power, read at ``e`` (logs ``t``, less the delay).

    The meter's power is taken as the mean over each step ``dt`` (its median spacing) of its trapezoid
    integral, held at its first level from 60 x 20 steps before the first log or sample (the board idle before
    a test; far back enough for any filter the fits try), and filtered exactly for power held over each
    step: ``y_{k+1} = a y_k + (1 - a) p_k`` with ``a = exp(-dt / tau)``, settled at the first level.
    """
    dt = float(np.median(np.diff(tm)))
    start = float(np.min(t, initial=tm[0])) - 60.0 * 20.0 * dt
    if start < tm[0]:
        tm, pm = np.concatenate([[start], tm]), np.concatenate([[pm[0]], pm])
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (pm[1:] + pm[:-1]) * np.diff(tm))])
    grid = np.arange(tm[0], tm[-1], dt)
    power = np.diff(np.interp(grid, tm, cum)) / dt
    a = math.exp(-dt / tau_ns)
    out = scipy.signal.lfilter([1.0 - a], [1.0, -a], power, zi=[a * power[0]])[0]
    return np.asarray(np.interp(e, grid[1:], out))


def affine(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    ok = np.isfinite(x) & np.isfinite(y)
    g, o = np.polyfit(x[ok], y[ok], 1)
    return float(g), float(o)


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    return float(np.sqrt(np.mean((a[ok] - b[ok]) ** 2)))


def brute_boxcar(t: np.ndarray, y: np.ndarray, tm: np.ndarray, cum: np.ndarray) -> tuple[float, float, float, float]:
    """The (window, delay, gain, offset) boxcar that predicts ``y`` best (least RMSE after its own affine fit)."""
    best = (math.inf, 0.0, 0.0, 1.0, 0.0)
    for w in WINDOWS_MS:
        for d in DELAYS_MS:
            m = fg.SensorModel("bf", "window", period_ns=1.0, window_ns=w * 1e6, delay_ns=d * 1e6)
            x = predict(m, t, tm, np.zeros(0), cum)
            g, o = affine(x, y)
            r = rmse(g * x + o, y)
            if r < best[0]:
                best = (r, w * 1e6, d * 1e6, g, o)
    return best[1], best[2], best[3], best[4]


def paired_rmse_difference(ra: np.ndarray, rb: np.ndarray, blocks: int = 20, draws: int = 2000) -> tuple[float, float]:
    """RMSE(ra) - RMSE(rb) and its standard error by a moving-block bootstrap over contiguous stretches
    (neighbouring residuals of an averaging sensor are correlated, so logs are not resampled one by one)."""
    return folds_rmse_difference([(ra, rb)], blocks, draws)


def folds_rmse_difference(folds: list[tuple[np.ndarray, np.ndarray]], blocks: int = 20,
                          draws: int = 2000) -> tuple[float, float]:
    """The mean over folds of RMSE(ra) - RMSE(rb), each fold scored on its own held-out stretch, and its
    standard error by the same block bootstrap drawn jointly: every draw resamples each fold's blocks within
    that fold (the folds' test stretches are disjoint) and averages the folds' differences. One fold is
    :func:`paired_rmse_difference` exactly (same draws). The models are not refitted inside a draw, so the
    spread of the fit itself is not in it."""
    sq = []
    for ra, rb in folds:
        ok = np.isfinite(ra) & np.isfinite(rb)
        sq.append((ra[ok] ** 2, rb[ok] ** 2, np.array_split(np.arange(int(ok.sum())), blocks)))
    diff = float(np.mean([np.sqrt(a2.mean()) - np.sqrt(b2.mean()) for a2, b2, _ in sq]))
    rng = np.random.default_rng(0)
    got = []
    for _ in range(draws):
        one = []
        for a2, b2, parts in sq:
            idx = np.concatenate([parts[k] for k in rng.integers(0, blocks, blocks)])
            one.append(np.sqrt(a2[idx].mean()) - np.sqrt(b2[idx].mean()))
        got.append(np.mean(one))
    return diff, float(np.std(got, ddof=1))


def on_energy(load: np.ndarray, tm: np.ndarray, cum: np.ndarray) -> np.ndarray:
    return np.interp(load[:, 1], tm, cum) - np.interp(load[:, 0], tm, cum)


def coherent_period_ms(t: np.ndarray) -> float:
    """The period (ms) at which change times fold most coherently: max of |sum exp(2 pi i t / P)| on a grid."""
    d = np.diff(t)
    one = float(np.median(d[d <= 1.5 * np.percentile(d, 10)]))
    tt = (t - t[0]).astype(np.float64)
    step = one * one / (40.0 * np.pi * float(tt[-1]))  # a twentieth of the peak's half-width
    best, best_z = one, -1.0
    for chunk in np.array_split(np.arange(0.9 * one, 1.1 * one, step), 64):
        ph = 2.0 * np.pi * tt[None, :] / chunk[:, None]
        z = np.hypot(np.cos(ph).sum(axis=1), np.sin(ph).sum(axis=1))
        k = int(np.argmax(z))
        if z[k] > best_z:
            best, best_z = float(chunk[k]), float(z[k])
    return best / 1e6


def clip_load(load: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The load's on-intervals that overlap [lo, hi), cut to it (a half's logs see only its own load)."""
    out = load[(load[:, 1] > lo) & (load[:, 0] < hi)].copy()
    out[:, 0] = np.maximum(out[:, 0], lo)
    out[:, 1] = np.minimum(out[:, 1], hi)
    return out


def model_fold(c: dict[str, np.ndarray], cum: np.ndarray, train: np.ndarray, lo: float, hi: float,
               meter: np.ndarray) -> tuple[fg.Characterisation, list[str], np.ndarray, float, float]:
    """Characterise on the logs in ``train`` (load cut to [lo, hi), the meter's samples in ``meter`` as the
    reference) and the model's prediction of the field over the whole record, with the gain and offset
    fitted on ``train`` alone. Raises what ``characterize_logs`` raises."""
    t, p, tm, pm = c["t"], c["p"], c["tm"], c["pm"]
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        ch = fg.characterize_logs(t[train], p[train], clip_load(c["load"], lo, hi), reference=(tm[meter], pm[meter]))
    x = predict(ch.sensor, t, tm, pm, cum)
    g, o = affine(x[train], p[train])
    return ch, [str(w.message)[:160] for w in ws], g * x + o, g, o


def boxcar_fold(c: dict[str, np.ndarray], cum: np.ndarray, train: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
    """The brute-force grid's best boxcar on the logs in ``train`` and its prediction over the whole record
    (gain and offset its own, fitted on ``train``)."""
    t, p, tm, pm = c["t"], c["p"], c["tm"], c["pm"]
    w, d, g, o = brute_boxcar(t[train], p[train], tm, cum)
    bx = fg.SensorModel("bf", "window", period_ns=1.0, window_ns=w, delay_ns=d)
    return {"window_ms": w / 1e6, "delay_ms": d / 1e6}, g * predict(bx, t, tm, pm, cum) + o


def compare(model: np.ndarray, boxcar: np.ndarray, p: np.ndarray, sel: np.ndarray) -> dict[str, float]:
    """Model against boxcar on the logs in ``sel``: each RMSE, the difference and its block-bootstrap SE."""
    d, se = paired_rmse_difference(model[sel] - p[sel], boxcar[sel] - p[sel])
    return {"model_rmse_w": rmse(model[sel], p[sel]), "boxcar_rmse_w": rmse(boxcar[sel], p[sel]), "diff_w": d,
            "se_w": se}


def fitted(ch: fg.Characterisation, notes: list[str]) -> dict[str, Any]:
    st = ch.step
    assert st is not None
    return {"shape": st.shape, "length_ms": (st.window_ns if st.shape == "boxcar" else st.tau_ns) / 1e6,
            "length_err_ms": (st.window_err_ns if st.shape == "boxcar" else st.tau_err_ns) / 1e6,
            "delay_ms": st.delay_ns / 1e6, "delay_err_ms": st.delay_err_ns / 1e6, "split_warnings": notes}


def meter_fit_fold(c: dict[str, np.ndarray], cum: np.ndarray, train: np.ndarray,
                   meter: np.ndarray, period: float | None = None) -> tuple[fg.SensorModel, np.ndarray]:
    """The fit ``characterize_logs`` runs with a reference, without its gate that several logs fall while the
    load is on and several while it is off: the update period from the half's updates, the step fit against
    the meter (scale the period, delays from -4 periods), the model built as it builds it. For a half that
    gate refuses; where it does not, the bench checks that this gives the same model."""
    t, p, tm, pm = c["t"], c["p"], c["tm"], c["pm"]
    if period is None:  # a resample (the refit bootstrap) passes its half's: repeated stamps have no period
        period = fg.sensors.estimate_period(t[train]).period_ns
    scale = max(period, 1e6)
    st = fit_meter_response(t[train], p[train], tm[meter], pm[meter], scale_ns=scale, min_delay_ns=-4.0 * scale,
                            period_ns=period)
    windowed = st.shape == "first_order" or st.window_ns > 0.02 * period
    sm = fg.SensorModel("meter fit", "window" if windowed else "instant", period_ns=period,
                        window_ns=st.window_ns if (st.shape == "boxcar" and windowed) else 0.0, shape=st.shape,
                        tau_ns=st.tau_ns, delay_ns=st.delay_ns, gain=st.gain, offset_w=st.offset_w)
    x = predict(sm, t, tm, pm, cum)
    g, o = affine(x[train], p[train])
    return sm, g * x + o


def reverse_fold(c: dict[str, np.ndarray], cum: np.ndarray, mid: float,
                 boxcar: tuple[dict[str, float], np.ndarray]) -> tuple[dict[str, Any], np.ndarray]:
    """Characterised on the second half, scored on the first, beside the grid's best boxcar on the second.

    The reference is the meter from the record's start: the meter is the input, not what is held out (the
    field is), and a response reaching back before the half's first log must see the board's real power, not
    the meter's first level held back (the package's own half-fits take the whole reference too). Where
    ``characterize_logs`` refuses the half, the prediction is the same meter fit without its load gate
    (:func:`meter_fit_fold`), said in ``"ungated"``."""
    t, p = c["t"], c["p"]
    first, second, meter = t < mid, t >= mid, np.ones(len(c["tm"]), bool)
    sm, ungated = meter_fit_fold(c, cum, second, meter)
    out: dict[str, Any] = {"boxcar": boxcar[0], "ungated_fit": {
        "shape": sm.shape, "length_ms": (sm.window_ns if sm.shape == "boxcar" else sm.tau_ns) / 1e6,
        "delay_ms": sm.delay_ns / 1e6}}
    try:
        ch, notes, rev, _, _ = model_fold(c, cum, second, mid, math.inf, meter)
    except ValueError as exc:
        # What the half holds, in the gate's terms (logs stamped inside an on-interval; it needs 3 and 3).
        lh = clip_load(c["load"], mid, math.inf)
        idx = np.searchsorted(lh[:, 0], t[second], side="right") - 1
        on = int(np.sum((idx >= 0) & (t[second] < lh[np.maximum(idx, 0), 1]))) if len(lh) else 0
        out.update(refused=str(exc), half_load_intervals=len(lh), half_logs_on=on,
                   half_logs_off=int(second.sum()) - on, ungated=True, **compare(ungated, boxcar[1], p, first))
        return out, ungated
    # The ungated path is the same fit where the gate lets the half through (else its figures mean nothing).
    assert np.allclose(rev, ungated, equal_nan=True, atol=1e-6), "meter_fit_fold no longer matches characterize_logs"
    out.update(ungated=False, fit=fitted(ch, notes), **compare(rev, boxcar[1], p, first))
    return out, rev


#: Draws of the refit bootstrap (``--refit-draws``): each refits both the model and the grid's boxcar.
REFIT_DRAWS = 60


def refit_spread(c: dict[str, np.ndarray], cum: np.ndarray, train: np.ndarray, test: np.ndarray,
                 meter: np.ndarray, draws: int, blocks: int = 20) -> dict[str, Any]:
    """The held-out RMSE difference (model minus grid boxcar) with the spread of *fitting* in it.

    :func:`paired_rmse_difference` holds both fits fixed and resamples the held-out logs: it asks whether
    these two fitted models differ on that stretch, not whether the method does. Here every draw
    resamples the training logs in contiguous blocks (a pairs bootstrap: each log keeps its time and
    reading, so the meter seen through the sensor is the same), refits the model (the meter fit
    ``characterize_logs`` runs, :func:`meter_fit_fold`, on the training half's update period) and
    searches the grid again on the same draw, then scores both on a block resample of the held-out logs.
    A draw whose resample leaves the response undetermined (the fit refuses it) is counted, not used.
    """
    t, p, tm, pm = c["t"], c["p"], c["tm"], c["pm"]
    period = fg.sensors.estimate_period(t[train]).period_ns
    tr_idx, te_idx = np.flatnonzero(train), np.flatnonzero(test)
    tr_parts, te_parts = np.array_split(tr_idx, blocks), np.array_split(te_idx, blocks)
    rng = np.random.default_rng(1)
    diffs, refused = [], 0
    for _ in range(draws):
        tr = np.concatenate([tr_parts[k] for k in rng.integers(0, blocks, blocks)])
        te = np.concatenate([te_parts[k] for k in rng.integers(0, blocks, blocks)])
        try:
            _, xm = meter_fit_fold(c, cum, tr, meter, period=period)
        except ValueError:
            refused += 1
            continue
        w, d, g, o = brute_boxcar(t[tr], p[tr], tm, cum)
        xb = g * predict(fg.SensorModel("bf", "window", period_ns=1.0, window_ns=w, delay_ns=d), t, tm, pm, cum) + o
        diffs.append(rmse(xm[te], p[te]) - rmse(xb[te], p[te]))
    a = np.asarray(diffs)
    if len(a) < 10:
        return {"draws": draws, "refused": refused}
    lo, hi = np.percentile(a, [2.5, 97.5])
    return {"draws": draws, "refused": refused, "mean_w": float(a.mean()), "se_w": float(a.std(ddof=1)),
            "ci95_w": [float(lo), float(hi)], "share_model_worse": float(np.mean(a > 0))}


def cross_validation(c: dict[str, np.ndarray], cum: np.ndarray, mid: float, fwd: tuple[np.ndarray, np.ndarray],
                     rev_boxcar: tuple[dict[str, float], np.ndarray]) -> dict[str, Any]:
    """Two-fold cross-validation of the model against the boxcar grid, and the whole record in sample.

    ``fwd`` holds the forward fold's predictions over the whole record (characterised and searched on the
    first half), ``rev_boxcar`` the grid's best on the second half and its prediction. The two-fold mean
    difference's SE is the block bootstrap drawn jointly over both folds' held-out halves
    (:func:`folds_rmse_difference`); the two folds' SEs combined in quadrature are kept beside it."""
    t, p = c["t"], c["p"]
    first, second, whole = t < mid, t >= mid, np.ones(len(t), bool)
    out: dict[str, Any] = {"forward": compare(*fwd, p, second)}
    out["reverse"], rev = reverse_fold(c, cum, mid, rev_boxcar)
    box_r = rev_boxcar[1]
    d, se = folds_rmse_difference([(fwd[0][second] - p[second], fwd[1][second] - p[second]),
                                   (rev[first] - p[first], box_r[first] - p[first])])
    out["two_fold"] = {"diff_w": d, "se_w": se, "ungated": out["reverse"]["ungated"],
                       "se_quadrature_w": 0.5 * math.hypot(out["forward"]["se_w"], out["reverse"]["se_w"])}
    out["in_sample"] = {"first_half": compare(*fwd, p, first),
                        "second_half": {**compare(rev, box_r, p, second), "ungated": out["reverse"]["ungated"]}}
    box_w = boxcar_fold(c, cum, whole)
    try:
        ch, notes, mw, _, _ = model_fold(c, cum, whole, -math.inf, math.inf, np.ones(len(c["tm"]), bool))
    except ValueError as exc:
        out["in_sample"]["whole"] = {"refused": str(exc)}
    else:
        out["in_sample"]["whole"] = {**compare(mw, box_w[1], p, whole), "fit": fitted(ch, notes),
                                     "boxcar": box_w[0]}
    return out


def load_fit(c: dict[str, np.ndarray], cum: np.ndarray, lf: np.ndarray, first: np.ndarray,
             second: np.ndarray) -> dict[str, Any]:
    """The model fitted against the load's square wave alone (no meter), first half, scored on the second:
    what a user without a meter gets."""
    t, p, tm, pm = c["t"], c["p"], c["tm"], c["pm"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chl = fg.characterize_logs(t[first], p[first], lf)
    except ValueError as exc:
        return {"refused": str(exc)[:120]}
    xl = predict(chl.sensor, t, tm, pm, cum)
    gl, ol = affine(xl[first], p[first])
    return {"shape": chl.sensor.shape, "length_ms": (chl.sensor.window_ns if chl.sensor.shape == "boxcar" else
                                                     chl.sensor.tau_ns) / 1e6,
            "delay_ms": chl.sensor.delay_ns / 1e6, "rmse_w": rmse(gl * xl[second] + ol, p[second])}


def case(rec: str, field: str) -> dict[str, Any]:
    c = load_case(rec, field)
    t, p, load, tm = c["t"], c["p"], c["load"], c["tm"]
    cum = cumulative(tm, c["pm"])
    mid = float(np.median(t))
    first, second = t < mid, t >= mid
    out: dict[str, Any] = {"record": rec, "field": field, "logs": int(len(c["t_all"])), "updates": int(len(t)),
                           "load_intervals": int(len(load))}
    # The period over the whole record, from change times (the truth the issue names): the period at which
    # all the change times fold most coherently (the Rayleigh statistic's maximum, epoch folding), searched
    # on a fine grid within 10 % of the median short interval. Counting whole periods interval by interval
    # is not a truth here: values stay unchanged for seconds at idle, and a 1 % error in the period
    # miscounts those gaps (the K40m's gave 15.16 ms against 15.41 from folding).
    out["period_truth_ms"] = coherent_period_ms(t)
    # 1. Characterise on the first half (load and meter clipped to it); gain and offset fitted on it.
    try:
        ch, notes, pred, g, o = model_fold(c, cum, first, -math.inf, mid, tm < mid)
    except ValueError as exc:
        out["refused"] = str(exc)
        return out
    out["load_fit"] = load_fit(c, cum, clip_load(load, -math.inf, mid), first, second)
    out.update(period_ms=ch.period.period_ns / 1e6, period_err_ms=ch.period.uncertainty_ns / 1e6,
               **fitted(ch, notes))
    # 3. Predict the field from the meter on the second half, beside the grid's best boxcar on the first half
    # (in sample: the first half, where both were fitted) and the oracle (the grid's best on the second).
    box1, box2 = boxcar_fold(c, cum, first), boxcar_fold(c, cum, second)
    out["model_rmse_w"] = rmse(pred[second], p[second])
    out["boxcar_first_half"] = {**box1[0], "rmse_w": rmse(box1[1][second], p[second])}
    out["in_sample_w"] = (rmse(pred[first], p[first]), rmse(box1[1][first], p[first]))
    out["model_minus_boxcar_w"] = paired_rmse_difference(pred[second] - p[second], box1[1][second] - p[second])
    out["boxcar_oracle"] = {**box2[0], "rmse_w": rmse(box2[1][second], p[second])}
    out["gain"] = g
    # The same the other way round (characterised and searched on the second half, scored on the first), the
    # two folds' mean, and the whole record in sample.
    out["cross_validation"] = cross_validation(c, cum, mid, (pred, box1[1]), box2)
    # The same two folds with the spread of fitting in the SE (both refitted on every draw).
    if REFIT_DRAWS > 0:
        out["refit"] = {"forward": refit_spread(c, cum, first, second, tm < mid, REFIT_DRAWS),
                        "reverse": refit_spread(c, cum, second, first, np.ones(len(tm), bool), REFIT_DRAWS)}
    # 4. Energy per on-period through the sensor-aware path.
    out["energy"] = energy_case(t, p, load, tm, cum, ch.sensor, g, o, second)
    # 5. The on-period's shape through the same path: curve, rise, plateau, against the meter.
    out["curve"] = curve_case(t, p, load, tm, cum, ch.sensor, g, o, second)
    out["figure"] = {"t": t.tolist(), "p": p.tolist(), "pred": pred.tolist(), "mid": mid}
    out["least_w"] = least_values(out, pred)
    return out


def least_values(r: dict[str, Any], pred: np.ndarray) -> dict[str, float]:
    """The least power (W) or energy (J) each output of a record holds: the done-when's "no negative power
    anywhere", checked on everything the bench reports rather than assumed from the solver's bounds."""
    en, cv = r["energy"], r["curve"]
    vals = {"predicted field, W": float(np.nanmin(pred)),
            "on-period curve, W": cv.get("min_w", {}).get("curve", math.nan),
            "curve band's lower end, W": cv.get("min_w", {}).get("band_low", math.nan),
            "energy raw / calibrated, J": min(en.get("energy_j", math.nan), en.get("energy_cal_j", math.nan)),
            "energy interval's lower end, J": en.get("low_j", math.nan)}
    return {k: v for k, v in vals.items() if math.isfinite(v)}


def energy_case(t: np.ndarray, p: np.ndarray, load: np.ndarray, tm: np.ndarray, cum: np.ndarray,
                sm: fg.SensorModel, g: float, o: float, second: np.ndarray) -> dict[str, Any]:
    """Energy per on-period from the logs (fit_timeline, the characterised model), against the meter."""
    mid = float(t[second][0])
    sel = load[:, 0] >= mid if np.sum(load[:, 0] >= mid) >= 1 and len(load) > 1 else np.ones(len(load), bool)
    lo = load[sel]
    truth = float(np.mean(on_energy(lo, tm, cum)))
    use = second if len(load) > 1 else np.ones(len(t), bool)
    res: dict[str, Any] = {"on_periods": int(len(lo)), "meter_j": truth, "logs": "second half" if len(load) > 1
                           else "whole record (one on-period)"}
    dur = float(np.median(lo[:, 1] - lo[:, 0])) * 1e-9
    # Raw: the model without its gain and offset; calibrated: with those the first half's meter gave
    # (fit_timeline undoes a model's calibration before it solves).
    fits = {}
    try:
        for key, model in (("raw", dataclasses.replace(sm, gain=1.0, offset_w=0.0)), ("cal", sm)):
            with warnings.catch_warnings(record=True) as ws:
                warnings.simplefilter("always")
                fits[key] = fit_timeline(model, t[use], {"total": p[use]}, lo[:, 0], lo[:, 1],
                                         np.zeros(len(lo), dtype=np.int64), [8], bootstrap=50, max_power_w=1000.0)
    except ValueError as exc:
        res["refused"] = str(exc)
        return res
    fit = fits["cal"]
    e = float(fits["raw"].energy_j["total"][0])
    e_cal = float(fit.energy_j["total"][0])
    res.update(energy_j=e, energy_cal_j=e_cal, low_j=float(fit.energy_low_j["total"][0]),
               high_j=float(fit.energy_high_j["total"][0]),
               err_pct=100 * (e / truth - 1) if np.isfinite(e) else math.nan,
               err_cal_pct=100 * (e_cal / truth - 1) if np.isfinite(e_cal) else math.nan,
               warnings=[w[:160] for w in fit.warnings] + [str(w.message)[:160] for w in ws])
    # The paper's point attribution: the mean of logs stamped inside on-periods, times the duration.
    idx = np.searchsorted(lo[:, 0], t[use], side="right") - 1
    inside = (idx >= 0) & (t[use] < lo[np.maximum(idx, 0), 1])
    pt = float(np.mean(p[use][inside])) * dur if inside.any() else math.nan
    res.update(point_j=pt, point_err_pct=100 * (pt / truth - 1) if np.isfinite(pt) else math.nan,
               point_cal_pct=100 * (((pt - o * dur) / g) / truth - 1) if np.isfinite(pt) else math.nan)
    return res


#: Curve bins asked of the sensor-aware path for the on-period's shape (it gives fewer where the logs hold
#: fewer window edges: about ten per bin).
CURVE_BINS = 64


def _binned_meter(lo: np.ndarray, tm: np.ndarray, cum: np.ndarray, k: int) -> np.ndarray:
    """The meter's mean power in each of ``k`` equal bins of every on-period (bins scale with each period's
    own length, as the sensor-aware path's do), averaged over the on-periods."""
    frac = np.linspace(0.0, 1.0, k + 1)
    edges = lo[:, :1] + frac[None, :] * (lo[:, 1:] - lo[:, :1])
    e = np.interp(edges, tm, cum)
    return np.asarray(np.mean(np.diff(e, axis=1) * 1e9 / np.diff(edges, axis=1), axis=0))


def _crossings(curve: np.ndarray, dur_ms: float, base: float) -> tuple[float, float, float]:
    """The 10 % and 90 % crossings (ms from the on-period's start) of a binned curve rising from ``base``
    (the level before the load) to its plateau (the median of the bins in the on-period's second half), by
    linear interpolation between bin centres (the base placed at the start); and the plateau. NaN where the
    curve never crosses, or has a single bin (no shape)."""
    k = len(curve)
    plateau = float(np.median(curve[k // 2:]))
    if k < 2 or not np.all(np.isfinite(curve)) or abs(plateau - base) <= 0:
        return math.nan, math.nan, plateau
    x = np.concatenate([[0.0], (np.arange(k) + 0.5) * dur_ms / k])
    y = (np.concatenate([[base], curve]) - base) / (plateau - base)
    out = []
    for level in (0.1, 0.9):
        j = int(np.argmax(y >= level)) if np.any(y >= level) else -1
        out.append(math.nan if j <= 0 else float(x[j - 1] + (level - y[j - 1]) * (x[j] - x[j - 1]) / (y[j] - y[j - 1])))
    return out[0], out[1], plateau


def _shape(curve: np.ndarray, meter: np.ndarray, dur_ms: float, base: float) -> dict[str, float]:
    """A binned on-period curve against the meter in the same bins: RMSE (all bins with a value, and the
    plateau's), the 10-90 % rise and the plateau's flatness (SD of the second half's bins)."""
    ok = np.isfinite(curve)
    k = len(curve)
    t10, t90, plateau = _crossings(curve, dur_ms, base)
    late = np.arange(k) >= k // 2
    return {"rmse_w": float(np.sqrt(np.mean((curve[ok] - meter[ok]) ** 2))) if ok.any() else math.nan,
            "plateau_rmse_w": (float(np.sqrt(np.mean((curve[ok & late] - meter[ok & late]) ** 2)))
                               if (ok & late).any() else math.nan),
            "t10_ms": t10, "t90_ms": t90, "rise_ms": t90 - t10, "plateau_w": plateau,
            "flatness_sd_w": float(np.std(curve[late & ok], ddof=1)) if (late & ok).sum() > 1 else math.nan,
            "bins_with_value": int(ok.sum())}


def curve_case(t: np.ndarray, p: np.ndarray, load: np.ndarray, tm: np.ndarray, cum: np.ndarray,
               sm: fg.SensorModel, g: float, o: float, second: np.ndarray) -> dict[str, Any]:
    """The on-period's power curve from the logs through the sensor-aware path (``fit_timeline`` with the
    calibrated characterised model, up to :data:`CURVE_BINS` bins), against the meter in the same bins:
    curve RMSE, 10-90 % rise, plateau flatness, and how many bins' 95 % bands hold the meter; beside it the
    paper's point attribution (each calibrated log placed at its stamp's offset in its on-period, averaged
    per bin) and the meter's own curve at 1 ms bins (what the bins cannot show). Logs as ``energy_case``
    takes them: the second half where there are on-periods in both halves, else the whole record."""
    mid = float(t[second][0])
    several = len(load) > 1
    lo = load[load[:, 0] >= mid] if several else load
    use = second if several else np.ones(len(t), bool)
    dur_ms = float(np.median(lo[:, 1] - lo[:, 0])) / 1e6
    # The level before the load, as the meter saw it (the board idle, or the square wave's off phase): the
    # meter's mean over the 50 ms (or the gap, if shorter) before each on-period.
    before = np.minimum(50e6, np.concatenate([[50e6], lo[1:, 0] - load[np.searchsorted(load[:, 0], lo[1:, 0]) - 1, 1]]))
    base = float(np.mean((np.interp(lo[:, 0], tm, cum) - np.interp(lo[:, 0] - before, tm, cum)) * 1e9 / before))
    res: dict[str, Any] = {"on_periods": int(len(lo)), "duration_ms": dur_ms, "base_w": base}
    fine = _binned_meter(lo, tm, cum, max(2, int(round(dur_ms))))  # 1 ms bins
    res["meter_fine"] = _shape(fine, fine, dur_ms, base)
    try:
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            fit = fit_timeline(sm, t[use], {"total": p[use]}, lo[:, 0], lo[:, 1], np.zeros(len(lo), dtype=np.int64),
                               [CURVE_BINS], bootstrap=100, max_power_w=1000.0)
    except ValueError as exc:
        res["refused"] = str(exc)
        return res
    k = int(fit.bins[0])
    curve = np.asarray(fit.curves["total"][0], float)
    # The path's own band (the energy's too): NaN without a bootstrap, and for an on-period the logs do not
    # determine (its level is the bounds' and the smoothing's, not a measurement).
    c_lo = np.asarray(fit.curve_low_w["total"][0], float)
    c_hi = np.asarray(fit.curve_high_w["total"][0], float)
    meter = _binned_meter(lo, tm, cum, k)
    # The paper's point attribution: each log, calibrated, at its stamp's offset within its on-period.
    idx = np.searchsorted(lo[:, 0], t[use], side="right") - 1
    inside = (idx >= 0) & (t[use] < lo[np.maximum(idx, 0), 1])
    frac = (t[use][inside] - lo[idx[inside], 0]) / (lo[idx[inside], 1] - lo[idx[inside], 0])
    b = np.minimum((frac * k).astype(int), k - 1)
    vals = (p[use][inside] - o) / g
    n_pt = np.bincount(b, minlength=k)
    point = np.where(n_pt > 0, np.bincount(b, weights=vals, minlength=k) / np.maximum(n_pt, 1), np.nan)
    band = np.isfinite(c_lo) & np.isfinite(c_hi)
    res.update(bins=k, bins_asked=CURVE_BINS, bin_ms=dur_ms / k, meter_binned=_shape(meter, meter, dur_ms, base),
               model=_shape(curve, meter, dur_ms, base), point=_shape(point, meter, dur_ms, base),
               identifiable=bool(fit.identifiable[0]), info_share=float(fit.info_share[0]),
               # Interval coverage, not only point error: bins whose 95 % band holds the meter's mean in that bin.
               covered=int(np.sum(band & (c_lo <= meter) & (meter <= c_hi))), with_band=int(band.sum()),
               band_half_width_w=float(np.median(0.5 * (c_hi - c_lo)[band])) if band.any() else math.nan,
               min_w={"curve": float(np.nanmin(curve)), "band_low": float(np.nanmin(c_lo)) if band.any() else math.nan},
               warnings=[w[:160] for w in fit.warnings] + [str(w.message)[:160] for w in ws],
               plot={"edges_ms": (np.arange(k + 1) * dur_ms / k).tolist(), "curve": curve.tolist(),
                     "low": c_lo.tolist(), "high": c_hi.tolist(), "point": point.tolist(), "fine": fine.tolist()})
    return res


def figure(rows: list[dict[str, Any]]) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    by_gpu: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if "figure" in r:
            by_gpu.setdefault(r["record"].split("_")[0], []).append(r)
    for gpu, rs in by_gpu.items():
        fig, axes = plt.subplots(len(rs), 2, figsize=(13, 2.6 * len(rs)), squeeze=False,
                                 gridspec_kw={"width_ratios": [3, 2]})
        for ax, r in zip(axes[:, 1], rs):
            cv = r.get("curve", {}).get("plot")
            if cv is None:
                ax.set_axis_off()
                continue
            edges = np.asarray(cv["edges_ms"])
            fine = np.asarray(cv["fine"])
            ax.plot(np.linspace(0, edges[-1], len(fine) + 1)[:-1], fine, "-", color="0.6", lw=0.6,
                    label="meter, 1 ms")
            curve, c_lo, c_hi = (np.asarray(cv[k], float) for k in ("curve", "low", "high"))
            resolved = "" if r["curve"]["identifiable"] else ", level not determined"
            ax.stairs(curve, edges, baseline=None, color="C3", lw=1.5,
                      label=f"sensor-aware path ({len(curve)} bins{resolved})")
            if np.all(np.isfinite(c_lo) & np.isfinite(c_hi)):
                ax.stairs(c_hi, edges, baseline=c_lo, fill=True, color="C3", alpha=0.25, label="its 95 % band")
            ax.stairs(np.asarray(cv["point"], float), edges, baseline=None, color="C0", lw=1, ls="--",
                      label="point attribution")
            ax.set_title(f"{r['field']}: the on-period's curve", fontsize=9)
            ax.set_xlabel("ms into the on-period", fontsize=8)
            ax.legend(fontsize=7)
        for ax, r in zip(axes[:, 0], rs):
            f = r["figure"]
            t0 = f["t"][0]
            ax.plot((np.asarray(f["t"]) - t0) / 1e9, f["p"], ".", ms=3, label=f"{r['field']} (logged)")
            ax.plot((np.asarray(f["t"]) - t0) / 1e9, f["pred"], "-", lw=1, label="characterised model on the meter")
            ax.axvline((f["mid"] - t0) / 1e9, color="k", lw=0.5, ls="--")
            ax.set_title(f"{r['record']}: characterised on the left half, scored on the right", fontsize=9)
            ax.set_ylabel("W")
            ax.legend(fontsize=7)
        axes[-1, 0].set_xlabel("s")
        fig.tight_layout()
        path = os.path.join(RESULTS, f"realdata_{gpu}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _f(v: Any, fmt: str = ".1f") -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _cmp(x: dict[str, Any]) -> str:
    """One comparison: model / boxcar RMSE, their difference, its block-bootstrap SE and the difference in SEs."""
    return (f"{x['model_rmse_w']:.2f} / {x['boxcar_rmse_w']:.2f} W, {x['diff_w']:+.3f} +- {x['se_w']:.3f} W "
            f"({x['diff_w'] / x['se_w']:+.1f} SE)")


def cv_table(rows: list[dict[str, Any]]) -> list[str]:
    """The two-fold cross-validation and the in-sample checks, per record (model minus boxcar: + is worse)."""
    lines = ["Two-fold cross-validation, model minus the grid's best boxcar (RMSE of the predicted field; + is the "
             "model worse; SE from the paired block bootstrap, 20 contiguous blocks per half, 2000 draws; the "
             "two-fold mean's SE draws both held-out halves' blocks jointly). \"Ungated\": `characterize_logs` "
             "refuses that half (reason given) and the figure is the same meter fit run without its load check "
             "(`fit_meter_response` with the scale and delay bound it would use), not the package's answer.", "",
             "| record | field | in sample, whole record (model / boxcar, difference) | in sample, 1st half | "
             "in sample, 2nd half | 1st half -> 2nd (the split above) | 2nd half -> 1st | two-fold mean |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        cv = r.get("cross_validation")
        if cv is None:
            continue
        ins, rv, tf = cv["in_sample"], cv["reverse"], cv["two_fold"]
        whole = _cmp(ins["whole"]) if "refused" not in ins["whole"] else "refused: " + ins["whole"]["refused"][:80]
        tag = "ungated: " if rv["ungated"] else ""
        rev = (f"refused (the half holds {rv['half_load_intervals']} load intervals, {rv['half_logs_on']} logs while "
               f"it is on, {rv['half_logs_off']} while off); " if rv["ungated"] else "") + tag + _cmp(rv)
        two = (f"{tag}{tf['diff_w']:+.3f} +- {tf['se_w']:.3f} W ({tf['diff_w'] / tf['se_w']:+.1f} SE; "
               f"quadrature {tf['se_quadrature_w']:.3f})")
        lines.append(f"| {r['record']} | {r['field']} | {whole} | {_cmp(ins['first_half'])} | "
                     f"{tag}{_cmp(ins['second_half'])} | {_cmp(cv['forward'])} | {rev} | {two} |")
    # A delay of exactly 0 was the start cell the optimiser never left while its finite-difference step was
    # relative to the parameter (~1.5e-8 ns at 0, below float64's resolution of log times near 1e10 ns: a zero
    # derivative). The fitter's steps are now absolute in the scale; say so if a fit shows it again.
    pinned = [f"{r['record']} {r['field']}" for r in rows if "cross_validation" in r
              and r["cross_validation"]["reverse"]["ungated"]
              and r["cross_validation"]["reverse"]["ungated_fit"]["delay_ms"] == 0.0]
    if pinned:
        lines += ["", f"The ungated fits' delay is exactly 0 ({', '.join(pinned)}): the fitter's start cell, "
                  "suspect of a finite-difference step that does not move the delay (a zero derivative): check "
                  "those fits before reading them as optima."]
    return lines


def refit_table(rows: list[dict[str, Any]]) -> list[str]:
    """The single split's comparison with the fit's own spread (:func:`refit_spread`)."""
    lines = ["The same comparison with the spread of fitting in it: each draw resamples the training half's logs "
             "in 20 contiguous blocks, refits the model and searches the grid again, and scores both on a block "
             "resample of the held-out half (`refit_spread`). The SE above holds the two fits fixed; this one "
             "asks whether the *method* predicts worse than the grid, which the record must resolve.", "",
             "| record | field | 1st -> 2nd: observed, mean of draws +- SD, 95 % interval, draws the model is "
             "worse | 2nd -> 1st: the same |", "| --- | --- | --- | --- |"]

    def one(x: dict[str, Any], cmp: dict[str, Any]) -> str:
        if "se_w" not in x:
            return f"{x['draws'] - x['refused']} usable draws of {x['draws']}: too few for a spread"
        lo, hi = x["ci95_w"]
        return (f"{cmp['diff_w']:+.3f} W; {x['mean_w']:+.2f} +- {x['se_w']:.2f} W, [{lo:+.2f}, {hi:+.2f}] W, "
                f"{100 * x['share_model_worse']:.0f} % ({x['draws'] - x['refused']} draws"
                + (f", {x['refused']} refused)" if x["refused"] else ")"))
    for r in rows:
        if "refit" not in r:
            continue
        cv = r["cross_validation"]
        lines.append(f"| {r['record']} | {r['field']} | {one(r['refit']['forward'], cv['forward'])} | "
                     f"{one(r['refit']['reverse'], cv['reverse'])} |")
    return lines


def curve_table(rows: list[dict[str, Any]]) -> list[str]:
    """The on-period's shape from the logs against the meter (curve_case), a row per record and field."""
    lines = ["The on-period's shape through the sensor-aware path (`fit_timeline`, the calibrated model, "
             f"{CURVE_BINS} bins asked; it gives about one per ten window edges), against the meter in the same "
             "bins; beside it the paper's point attribution (each calibrated log at its stamp's offset in its "
             "on-period, averaged per bin) and the meter's own curve at 1 ms. Rise: 10 % and 90 % crossings "
             "from the level before the load to the plateau (median of the on-period's second half), "
             "interpolated between bin centres; a rise inside the first bin is not resolved by the bins, and "
             "the meter in the same bins shows what a perfect reconstruction at that resolution would. "
             "Flatness: SD of the second half's bins. Coverage: bins whose 95 % band (the path's own, "
             "`TimelineFit.curve_low_w`/`curve_high_w`: the bootstrap's percentiles joined with Student's t on its "
             "deviation for the blocks it had, widened over the smoothings cross-validation cannot tell apart; none "
             "for an on-period the logs do not determine) holds the meter's mean in that bin, and the band's median "
             "half-width.", "",
             "| record | field | on-periods, bins (width) | curve RMSE vs meter, W: model / point (plateau: model / point) "
             "| 10-90 % rise, ms: meter at 1 ms / meter in the bins / model / point | plateau SD, W: meter at 1 ms "
             "/ meter in the bins / model / point | bins whose 95 % band holds the meter |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        cv = r.get("curve")
        if cv is None:
            continue
        head = f"| {r['record']} | {r['field']} | "
        if "refused" in cv or "model" not in cv:
            lines.append(head + f"{cv.get('on_periods', 0)} | refused: {cv.get('refused', '')[:100]} | | | |")
            continue
        m, pt, mb, mf = cv["model"], cv["point"], cv["meter_binned"], cv["meter_fine"]
        if cv["with_band"]:
            band = f"{cv['covered']} of {cv['with_band']} (half-width {_f(cv['band_half_width_w'])} W)"
        elif not cv["identifiable"]:
            band = (f"no band: the logs do not determine the on-period's level (they supply "
                    f"{100 * cv['info_share']:.0f} % of its precision)")
        else:
            band = "no band: " + next((w.split(" (")[0] for w in cv["warnings"] if "blocks" in w), "no bootstrap")
        if cv["bins"] < 2:
            lines.append(head + f"{cv['on_periods']}, 1 bin ({cv['bin_ms']:.0f} ms) | {_f(m['rmse_w'])} / "
                         f"{_f(pt['rmse_w'])} (level only) | not resolved: "
                         f"{(cv['warnings'][0] if cv['warnings'] else '')[:90]} (meter: {_f(mf['rise_ms'])} ms) | "
                         f"n/a (meter {_f(mf['flatness_sd_w'])} W) | {band} |")
            continue
        lines.append(
            head + f"{cv['on_periods']}, {cv['bins']} ({cv['bin_ms']:.0f} ms) | {_f(m['rmse_w'])} / {_f(pt['rmse_w'])} "
            f"({_f(m['plateau_rmse_w'])} / {_f(pt['plateau_rmse_w'])}) | {_f(mf['rise_ms'], '.0f')} / "
            f"{_f(mb['rise_ms'], '.0f')} / {_f(m['rise_ms'], '.0f')} / {_f(pt['rise_ms'], '.0f')} | "
            f"{_f(mf['flatness_sd_w'])} / {_f(mb['flatness_sd_w'])} / {_f(m['flatness_sd_w'])} / "
            f"{_f(pt['flatness_sd_w'])} | {band} |")
    return lines


def readme(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = ["## Validated on real data", "",
             "`python bench/realdata_bench.py` "
             f"({meta['date']}, {meta['machine']}, {meta['wall_s']:.0f} s). Public records of Yang, Adamek and "
             "Armour (SC'24; GPU_Power_Benchmark at commit 4b5c944c, MIT; trimmed, read from `yang_sc24/` of the "
             "folder `$FINGRAV_REAL_DATA` names, as the README's real-data section says): nvidia-smi's fields polled every ~8 ms, the "
             "load's on-intervals, a PMD meter at ~4.8 kHz on the board's inputs. Each record is split at its "
             "middle: the sensor is characterised (`fg.characterize_logs` with the meter as `reference`) on the first "
             "half only; the field is "
             "predicted from the meter on the second half (gain and offset fitted on the first), beside the best "
             "boxcar a brute-force search over window (1-1000 ms) and delay (-100..100 ms) finds on the first half, "
             "and on the second half itself (an oracle). The second table adds the reverse fold (characterised and "
             "searched on the second half, predicting the first, with the meter from the record's start as the "
             "reference: the meter is the input, the field is what is held out), the two folds' mean, and the "
             "in-sample comparisons (each half, and the whole record). The A100 records of that repository are "
             "held back for an independent check and not read.", "",
             "| record | field | period (truth) | shape, length, delay (first half, against the meter) | halves agree | RMSE on 2nd half: model / boxcar searched on 1st / oracle boxcar / model fitted to the load alone; model minus boxcar (block-bootstrap SE); in sample, model / boxcar | energy per on-period vs meter: raw / calibrated (interval) | point attribution raw / calibrated |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['record']} | {r['field']} | ({_f(r['period_truth_ms'], '.2f')} ms) | refused: "
                         f"{r['refused'][:110]} | | | | |")
            continue
        en = r["energy"]
        if "refused" in en:
            etext = "refused: " + en["refused"][:80]
        elif math.isfinite(en.get("err_pct", math.nan)):
            etext = (f"{en['err_pct']:+.1f} % / {en['err_cal_pct']:+.1f} % ([{_f(en['low_j'])}, {_f(en['high_j'])}] J "
                     f"vs {en['meter_j']:.1f} J)")
        else:
            etext = "not resolved: " + (en["warnings"][0][:90] if en.get("warnings") else "")
        pt = f"{_f(en.get('point_err_pct'), '+.1f')} % / {_f(en.get('point_cal_pct'), '+.1f')} %"
        lines.append(
            f"| {r['record']} | {r['field']} | {r['period_ms']:.2f} +- {r['period_err_ms']:.2f} ms "
            f"({r['period_truth_ms']:.2f}) | {r['shape']} {r['length_ms']:.1f} +- {r['length_err_ms']:.1f} ms, "
            f"delay {r['delay_ms']:+.1f} +- {r['delay_err_ms']:.1f} ms | "
            f"{'no: ' + r['split_warnings'][0][:70] if r['split_warnings'] else 'yes'} | "
            f"{r['model_rmse_w']:.1f} / {r['boxcar_first_half']['rmse_w']:.1f} "
            f"({r['boxcar_first_half']['window_ms']:.0f} ms, {r['boxcar_first_half']['delay_ms']:+.0f}) / "
            f"{r['boxcar_oracle']['rmse_w']:.1f} / {_f(r['load_fit'].get('rmse_w'))} W; model - boxcar "
            f"{r['model_minus_boxcar_w'][0]:+.2f} +- {r['model_minus_boxcar_w'][1]:.2f} W; in sample (1st half) "
            f"{r['in_sample_w'][0]:.2f} / {r['in_sample_w'][1]:.2f} W | {etext} | {pt} |")
    lines += ["", *cv_table(rows)]
    lines += ["", *refit_table(rows)]
    lines += ["", *curve_table(rows)]
    least = [(v, k, f"{r['record']} {r['field']}") for r in rows for k, v in r.get("least_w", {}).items()]
    neg = [x for x in least if x[0] < 0]
    if least:
        lines += ["", (f"Negative power or energy: none. The least value of any output (the fields predicted from the "
                       f"meter, the on-period curves, their bands' lower ends, the energies and their intervals' "
                       f"lower ends) is {min(least)[0]:.1f} ({min(least)[1]}, {min(least)[2]})." if not neg else
                       "Negative power or energy: " + "; ".join(f"{k} {v:.1f} ({w})" for v, k, w in neg) + ".")]
    lines += ["", "What it does not show: the records are whole-board square waves and steps of "
              "tens to thousands of milliseconds, so they test the sensor's model and the period, not "
              "per-kernel attribution inside microsecond kernels; each GPU is one board, one driver."]
    lines += ["", *[f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in meta.get("figures", [])]]
    return "\n".join(lines) + "\n"


def write_section(text: str) -> None:
    path = os.path.join(RESULTS, "README.md")
    cur = open(path).read() if os.path.exists(path) else ""
    head = "## Validated on real data"
    if head in cur:
        a = cur.index(head)
        b = cur.find("\n## ", a + len(head))
        cur = cur[:a] + text + ("\n" + cur[b + 1:] if b >= 0 else "")
    else:
        cur = cur.rstrip() + "\n\n" + text
    with open(path, "w") as f:
        f.write(cur)


def _without_plots(r: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in r.items() if k != "figure"}
    if "curve" in out:
        out["curve"] = {k: v for k, v in out["curve"].items() if k != "plot"}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="", help="record:field pairs, comma-separated (default all)")
    ap.add_argument("--refit-draws", type=int, default=REFIT_DRAWS,
                    help="draws of the refit bootstrap per fold (each refits model and grid; ~0.6 s a draw)")
    args = ap.parse_args()
    globals()["REFIT_DRAWS"] = args.refit_draws  # read by case() for every record
    cases = [tuple(c.split(":")) for c in args.cases.split(",") if c] or list(CASES)
    try:  # every record before any work: a missing one stops the run at once, saying where it comes from
        for rec, field in cases:
            for f in (f"{field}.csv.gz", "load.csv", "meter.csv.gz"):
                real_data_path(f"yang_sc24/{rec}/{f}")
    except MissingRealData as e:
        sys.exit(f"realdata_bench: {e}")
    t0 = time.perf_counter()
    rows = []
    for rec, field in cases:
        t1 = time.perf_counter()
        r = case(rec, field)
        rows.append(r)
        short = {k: v for k, v in r.items() if k != "figure"}
        print(json.dumps(short, default=float)[:600], f"({time.perf_counter() - t1:.1f} s)", flush=True)
    os.makedirs(RESULTS, exist_ok=True)
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": os.uname().machine,
            "wall_s": time.perf_counter() - t0}
    meta["figures"] = [os.path.basename(p) for p in figure(rows)]
    with open(os.path.join(RESULTS, "realdata.json"), "w") as f:
        # The figure's arrays (every log, the meter at 1 ms) are in the figures, not the table's file.
        json.dump({"meta": meta, "rows": [_without_plots(r) for r in rows]}, f, indent=1, default=float)
    text = readme(rows, meta)
    write_section(text)
    print(text)


if __name__ == "__main__":
    main()
