"""A sensor's response to a switch of load, fitted: its window or time constant, its delay, its rise.

The fits of the characterisation (Yang, Adamek and Armour, SC'24, as
equivalent-time sampling): logs pooled from many runs, each placed by its
offset from the switching edges, trace the sensor's step response far
finer than its period (:func:`fit_step_response`); a record of arbitrary
load (the busy intervals the host knows) is fitted through the same
response models directly (:func:`fit_load_response`), and a reference
meter's readings stand in for the load where the host knows none
(:func:`fit_meter_response`). The shapes are a boxcar window after a delay
and a first-order filter after a delay; the one with the smaller penalised
residual wins, and a parameter the logs do not determine is refused by
name. The period, the counter's quantum and the saved characterisation are
:mod:`fingrav_native.sensors._characterize`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, Sequence

import numpy as np
import numpy.typing as npt
import scipy.optimize
import scipy.signal
import scipy.stats

from fingrav_native._checks import check_power, finite_array, positive_number, real_number
from fingrav_native.sensors._model import SensorModel, response_weights


@dataclass(frozen=True)
class StepFit:
    """The sensor's step response, fitted.

    Attributes
    ----------
    shape : str
        ``"boxcar"`` or ``"first_order"``: the better fit.
    delay_ns, delay_err_ns : float
        Reporting delay and its standard error.
    window_ns, window_err_ns : float
        Boxcar window (0 for a filter) and its standard error.
    tau_ns, tau_err_ns : float
        Filter time constant (0 for a boxcar) and its standard error.
    rise_ns : float
        10-90 % rise time of the fitted response.
    low_w, high_w : float
        Power before and after the step.
    residual_w : float
        RMS residual of the chosen fit.
    other_residual_w : float
        RMS residual of the other shape (how clearly the shape was told apart).
    logs : int
        Logs fitted.
    gain, offset_w : float
        The field against a reference meter (``field = gain * meter +
        offset``; 1 and 0 without one).
    gapless : bool
        The window was taken as the update period, fitted with its delay
        alone: a sensor averaging every instant into exactly one update (as
        a differenced energy counter does). Kept where the free shapes do
        not fit the logs better by more than an F test at
        :data:`GAPLESS_LEVEL` finds (``gapless_p``); ``window_err_ns`` is
        then 0 (the period's own error is in the :class:`~fingrav_native.sensors.PeriodEstimate`).
    gapless_p : float
        That F test's p-value (NaN where no period was given, or no test
        could be made).
    drift_w_per_s : float
        The slow linear drift of the power the fit carried beside the step
        (W/s; ``low_w`` and ``high_w`` are the levels at the logs' median
        time). A nuisance of the power's model, not part of the sensor: 0
        against a reference meter, where the fit has no drift term (the
        meter's power already holds the board's drift, and the model
        predicts ``gain * meter + offset`` through the sensor, nothing more).
    """

    shape: str
    delay_ns: float
    delay_err_ns: float
    window_ns: float
    window_err_ns: float
    tau_ns: float
    tau_err_ns: float
    rise_ns: float
    low_w: float
    high_w: float
    residual_w: float
    other_residual_w: float
    logs: int
    gain: float = 1.0
    offset_w: float = 0.0
    drift_w_per_s: float = 0.0
    gapless: bool = False
    gapless_p: float = math.nan


def _central_jac(fun_at: Callable[[list[np.ndarray]], list[np.ndarray]], step: np.ndarray) -> Any:
    """A Jacobian for ``scipy.optimize.least_squares`` by central differences with absolute steps.

    ``fun_at`` gives the residuals at a list of parameter vectors: all ``2 k`` of a Jacobian's points are asked
    for at once, so a problem that evaluates a batch in one pass (:meth:`_LoadResponse.designs`) does.

    scipy's own finite-difference step is relative to the parameter (``diff_step * |x|``, and
    ``~1.5e-8 * max(1, |x|)`` where that is 0): a delay started at exactly 0 gets a step of ~1e-8 of
    whatever unit it is in, below the resolution of the times it shifts, so its derivative is zero and
    the optimiser never moves it. Here every parameter is in units of the response's scale, and the
    step is a fixed fraction of that scale wherever the parameter is.
    """
    def jac(x: np.ndarray, *_: Any) -> np.ndarray:
        k = len(step)
        r = fun_at([x + e for e in np.diag(step)] + [x - e for e in np.diag(step)])
        return np.column_stack([(np.asarray(r[i]) - np.asarray(r[k + i])) / (2.0 * h) for i, h in enumerate(step)])
    return jac


#: The finite-difference step of a delay, window or time constant, as a fraction of the response's scale.
FD_STEP = 1e-3


def _boxcar(u: np.ndarray, d: float, w: float) -> np.ndarray:
    return np.clip((u - d) / max(w, 1.0), 0.0, 1.0)


def _filter(u: np.ndarray, d: float, tau: float) -> np.ndarray:
    with np.errstate(over="ignore"):  # before the delay expm1 overflows; np.where takes the 0 there
        return np.where(u > d, -np.expm1(-(u - d) / max(tau, 1.0)), 0.0)


#: The longest response a fit's first guess may be: an hour (a sensor averaging longer is no power sensor).
MAX_SCALE_NS = 3.6e12


def _step_shape_fit(f: Any, u: np.ndarray, y: np.ndarray, scale: float, lo0: float,
                    hi0: float) -> tuple[np.ndarray, np.ndarray, float, int]:
    """One response shape ``f`` fitted to the step's logs in view: parameters, their errors, the residual sum of
    squares and the logs fitted (robust least squares from a few starts, the best kept)."""
    us = u / scale  # the fit runs in units of the scale: delay, length and slope per scale

    def resid(p: np.ndarray, f: Any = f) -> np.ndarray:
        return np.asarray(p[0] + p[1] * us + p[2] * f(u, p[3] * scale, p[4] * scale) - y)
    best = None
    for d0 in (0.0, 0.25):
        for l0 in (0.1, 0.5, 1.0):
            r = scipy.optimize.least_squares(
                resid, np.array([lo0, 0.0, hi0 - lo0, d0, l0]), loss="soft_l1",
                f_scale=max(float(np.std(y)) * 0.05, 1e-6), x_scale="jac",
                jac=_central_jac(lambda ps: [resid(q) for q in ps], np.array([1.0, 1.0, 1.0, FD_STEP, FD_STEP])),
                bounds=([-np.inf, -np.inf, -np.inf, -1.0, 1.0 / scale], [np.inf, np.inf, np.inf, 1.0, 3.0]))
            if best is None or r.cost < best.cost:
                best = r
    assert best is not None
    rss = float(np.sum(resid(best.x) ** 2))
    dof = max(len(u) - 5, 1)
    units = np.array([1.0, 1.0 / scale, 1.0, scale, scale])  # back to W, W/ns, W, ns, ns
    try:
        jac = np.asarray(best.jac, dtype=np.float64)
        err = np.sqrt(np.clip(np.diag(np.linalg.inv(jac.T @ jac) * rss / dof), 0.0, None)) * units
    except np.linalg.LinAlgError:
        err = np.full(5, np.nan)
    return (best.x * units, err, rss, len(u))


def fit_step_response(offset_ns: npt.ArrayLike, values: npt.ArrayLike, *,
                      scale_ns: Optional[float] = None) -> StepFit:
    """Fit a sensor's response to a sharp power step, pooled over many steps.

    Parameters
    ----------
    offset_ns : array_like
        Each log's host time minus the step's (a busy block's first
        execution start, or its last execution's end for a falling step),
        after the clock maps.
    values : array_like
        The logged power.
    scale_ns : float, optional
        A first guess of the response's length (default: a tenth of the
        offsets' span); the fit widens its view until the response fits in it.

    Returns
    -------
    StepFit

    Raises
    ------
    ValueError
        Fewer than 8 logs, a NaN or infinite offset or value, a value that
        is no power (negative, above the 10 kW ceiling); a fit whose step is
        within 3 standard errors of none, or whose errors are not finite
        (the power does not follow the step: no sensor to report).

    Notes
    -----
    A GPU's power jumps within tens of microseconds when a kernel starts or
    stops (dynamic power follows activity) and drifts slowly after (clocks,
    temperature). Near the step the drift is a line, so the model is
    ``low + slope * u + jump * S(u - delay)`` with ``S`` the sensor's step
    response (a ramp of length ``W``, or ``1 - exp(-u / tau)``), fitted to
    the logs within a few response lengths of the step by
    ``scipy.optimize.least_squares`` (soft L1 loss, robust to a stray log);
    standard errors from the Jacobian. Delay and length are fitted in units
    of the scale, with a central-difference step of :data:`FD_STEP` of it
    (scipy's default step is relative to the parameter, so a delay started
    at 0 would never move). The shape with the smaller residual
    sum wins (both have five parameters). What remains confounded: a GPU
    whose own power rises over a time comparable to the window shows up as
    window (its rise time is reported, not subtracted).
    """
    u_all = finite_array(offset_ns, "offset_ns").ravel()
    y_all = finite_array(values, "values").ravel()
    if u_all.shape != y_all.shape:
        raise ValueError(f"offset_ns, values: one value per offset, got {y_all.size} for {u_all.size}")
    if len(u_all) < 8:
        raise ValueError(f"offset_ns, values: need at least 8 logs around the steps, got {len(u_all)}")
    check_power(y_all, "values")
    span = float(u_all.max() - u_all.min())
    scale = (positive_number(scale_ns, "scale_ns", upper=MAX_SCALE_NS) if scale_ns is not None
             else max(span / 10.0, 1.0))
    fits: dict[str, tuple[np.ndarray, np.ndarray, float, int]] = {}
    for _ in range(6):
        view = (u_all > -2.0 * scale) & (u_all < 4.0 * scale)
        u, y = u_all[view], y_all[view]
        if len(u) < 8:
            raise ValueError(f"offset_ns: fewer than 8 logs within {scale / 1e6:.3g} ms of the steps")
        before = u < 0
        lo0 = float(np.median(y[before])) if before.any() else float(y.min())
        after = u > 2.0 * scale
        hi0 = float(np.median(y[after])) if after.any() else float(y.max())
        fits = {name: _step_shape_fit(f, u, y, scale, lo0, hi0)
                for name, f in (("boxcar", _boxcar), ("first_order", _filter))}
        shape = min(fits, key=lambda k: fits[k][2])
        reach = float(fits[shape][0][3] + (fits[shape][0][4] if shape == "boxcar" else 3 * fits[shape][0][4]))
        if reach < 1.5 * scale:
            break
        scale *= 2.0  # the response did not fit in the view: widen it
    shape = min(fits, key=lambda k: fits[k][2])
    other = "first_order" if shape == "boxcar" else "boxcar"
    x, err, rss, n = fits[shape]
    _check_determined(x, err, "values", "the step", names=("level", "drift", "step"))
    length = float(x[4])
    rise = 0.8 * length if shape == "boxcar" else length * math.log(9.0)
    return StepFit(
        shape=shape, delay_ns=float(x[3]), delay_err_ns=float(err[3]),
        window_ns=length if shape == "boxcar" else 0.0, window_err_ns=float(err[4]) if shape == "boxcar" else 0.0,
        tau_ns=length if shape == "first_order" else 0.0, tau_err_ns=float(err[4]) if shape == "first_order" else 0.0,
        rise_ns=rise, low_w=float(x[0]), high_w=float(x[0] + x[2]), residual_w=math.sqrt(rss / n),
        other_residual_w=math.sqrt(fits[other][2] / fits[other][3]), logs=n, drift_w_per_s=float(x[1]) * 1e9)


def fit_load_response(t_ns: npt.ArrayLike, values: npt.ArrayLike, busy_ns: npt.ArrayLike, *,
                      scale_ns: float, min_delay_ns: float = 0.0, period_ns: Optional[float] = None) -> StepFit:
    """Fit a sensor to logs of a known load pattern: heavy intervals on a light background.

    Parameters
    ----------
    t_ns : array_like
        The logs' host times.
    values : array_like
        The logged power.
    busy_ns : array_like, shape (n, 2)
        Host-time [start, end] of every heavy execution (from GPU-side markers).
    scale_ns : float
        A first guess of the sensor's response length.
    min_delay_ns : float
        The least delay tried. 0 (the default) where the logger is known to
        stamp at or after its window's end (a square wave's edges trade a
        longer window against an earlier stamp, so a bound that holds is
        worth keeping); negative to let the data say (recorded logs:
        ``characterize_logs`` passes ``-4 * scale_ns``).
    period_ns : float, optional
        The sensor's update period. Given, a boxcar exactly that long (a
        gapless average) is fitted too, its delay alone, and kept unless the
        better free shape fits beyond an F test at :data:`GAPLESS_LEVEL`
        (``StepFit.gapless``, ``StepFit.gapless_p``).

    Returns
    -------
    StepFit
        ``low_w`` is the light level, ``high_w`` light plus the heavy
        kernel's excess.

    Raises
    ------
    ValueError
        Fewer than 8 logs or no interval; a NaN or infinite time or value, a
        value that is no power; an interval that ends before it starts
        (named, with its row); a fit whose heavy excess is within 3
        standard errors of none, or whose errors are not finite (the power
        does not follow the load).

    Notes
    -----
    The GPU's power is modelled as ``light + slope * t + excess * [heavy
    running]`` (dynamic power follows activity within tens of microseconds;
    slow drift is the slope); a log is that seen through the candidate sensor:
    ``light + slope * t + excess * sum_i w(t; s_i, e_i)`` with ``w`` from
    :meth:`SensorModel.interval_weights`. For each shape, the nonlinear
    parameters (delay, window or time constant) are found by variable
    projection (the linear ones solved exactly at each trial) with
    ``scipy.optimize.least_squares`` from several starts, in units of
    ``scale_ns`` with a central-difference step of :data:`FD_STEP` of it
    (scipy's default step is relative to the parameter: a delay started at
    exactly 0 got ~1e-8 ns, below the log times' resolution, and never
    moved); standard errors from the Jacobian of the full problem at the
    optimum.

    The drift is part of the *power's* model here (the square wave is an
    idealisation of what the GPU draws, which drifts with temperature and
    clocks), not of the sensor's: it is estimated beside the step and
    reported (``StepFit.drift_w_per_s``; ``low_w`` and ``high_w`` are the
    levels at the logs' median time) rather than dropped, and no
    :class:`SensorModel` carries it. Against a meter
    (:func:`fit_meter_response`) there is no drift term.
    """
    t, y = _logs(t_ns, values)
    iv = _intervals(busy_ns, "busy_ns")
    if len(t) < 8 or len(iv) == 0:
        raise ValueError(f"t_ns, values, busy_ns: need at least 8 logs and one heavy interval, got {len(t)}, {len(iv)}")
    sc = positive_number(scale_ns, "scale_ns", upper=MAX_SCALE_NS)
    min_delay_ns = real_number(min_delay_ns, "min_delay_ns")
    period = None if period_ns is None else positive_number(period_ns, "period_ns", upper=MAX_SCALE_NS)
    # Only intervals that can reach a log matter: index them by time for speed.
    order = np.argsort(iv[:, 0])
    return _step_fit(_LoadResponse(t, y, iv[order], float(np.median(t))), sc, len(t), float(min_delay_ns), period)


def fit_meter_response(t_ns: npt.ArrayLike, values: npt.ArrayLike, meter_t_ns: npt.ArrayLike,
                       meter_w: npt.ArrayLike, *, scale_ns: float, min_delay_ns: Optional[float] = None,
                       period_ns: Optional[float] = None) -> StepFit:
    """Fit a sensor to logs beside a reference meter: the meter's power seen through the sensor.

    Parameters
    ----------
    t_ns, values : array_like
        The logs' host times and logged power.
    meter_t_ns, meter_w : array_like
        A reference meter's samples on the same clock, much faster than
        the sensor (Yang et al.'s PMD at ~4.8 kHz beside nvidia-smi).
    scale_ns : float
        A first guess of the sensor's response length.
    min_delay_ns : float, optional
        The least delay tried (default ``-4 * scale_ns``: a stamp may come
        before its window ends).
    period_ns : float, optional
        The sensor's update period: a gapless boxcar as long is the null
        model, as in :func:`fit_load_response`.

    Returns
    -------
    StepFit
        As :func:`fit_load_response`; ``low_w`` and ``high_w`` are the
        field's fitted readings at the meter's 5th and 95th percentile,
        ``gain`` and ``offset_w`` the field against the meter.

    Notes
    -----
    :func:`fit_load_response` takes the board's power as a square wave of
    the load; where the board itself ramps (clocks, fans, voltage) the fitted
    window absorbs that ramp. Against a meter the input is the board's real
    power: a log is ``offset + gain * (sensor * meter)(t)``, the boxcar read
    from the meter's cumulative energy on its own samples (exact), a
    first-order filter run as a recursive filter on a grid of 1/200 of the
    scale, solved by the same variable projection (and the same
    scale-relative steps).

    There is no drift term, by design: the fitted objective is exactly what
    the returned model predicts (``SensorModel.gain * (response * power) +
    offset_w``), so the window and delay are the ones that predict the
    field best, and ``residual_w`` is the returned model's own RMS
    residual. The meter's power already holds the board's drift; a drift
    of the field against the meter is a calibration drift that a
    :class:`SensorModel` (no clock of its own) cannot carry, and a fit that
    absorbed it would choose the window and delay for a model it does not
    return: a slope fitted and then dropped leaves a model that predicts the
    field worse than a plain boxcar on the same grid.
    """
    t, y = _logs(t_ns, values)
    tm = finite_array(meter_t_ns, "meter_t_ns").ravel()
    pm = check_power(finite_array(meter_w, "meter_w").ravel(), "meter_w")
    if tm.shape != pm.shape or len(tm) < 16:
        raise ValueError(f"meter_t_ns, meter_w: one value per stamp and at least 16, got {tm.size} and {pm.size}")
    if len(t) < 8:
        raise ValueError(f"t_ns, values: need at least 8 logs, got {len(t)}")
    sc = positive_number(scale_ns, "scale_ns", upper=MAX_SCALE_NS)
    order = np.argsort(tm)
    lo = -4.0 * sc if min_delay_ns is None else real_number(min_delay_ns, "min_delay_ns")
    period = None if period_ns is None else positive_number(period_ns, "period_ns", upper=MAX_SCALE_NS)
    return _step_fit(_MeterResponse(t, y, tm[order], pm[order], float(np.median(t)), sc), sc, len(t), lo, period)


def _logs(t_ns: npt.ArrayLike, values: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Log times and their power: finite, one each, a power (a NaN log is refused, not dropped)."""
    t = finite_array(t_ns, "t_ns").ravel()
    y = finite_array(values, "values").ravel()
    if t.shape != y.shape:
        raise ValueError(f"t_ns, values: one value per log, got {y.size} for {t.size}")
    return t, check_power(y, "values")


def _intervals(busy_ns: npt.ArrayLike, name: str) -> np.ndarray:
    """``[start, end]`` rows, finite, each ending after it starts (an inverted interval is refused by name)."""
    iv = finite_array(busy_ns, name)
    if iv.size % 2 or (iv.ndim == 2 and iv.shape[1] != 2) or iv.ndim > 2:
        raise ValueError(f"{name}: an (n, 2) array of [start_ns, end_ns], got shape {iv.shape}")
    iv = iv.reshape(-1, 2)
    inverted = np.flatnonzero(iv[:, 1] <= iv[:, 0])
    if inverted.size:
        i = int(inverted[0])
        raise ValueError(f"{name}: {inverted.size} of {len(iv)} intervals end before they start (or at it), the "
                         f"first, row {i}: [{iv[i, 0]:.0f}, {iv[i, 1]:.0f}] ns; columns are [start_ns, end_ns]")
    return iv


#: A step fit stands only where the load's effect on the power is this many standard errors from none.
MIN_STEP_Z = 3.0


def _check_determined(p_hat: np.ndarray, err: np.ndarray, arg: str, load: str, unit: str = " W", *,
                      names: tuple[str, ...] = ("level", "drift", "effect")) -> None:
    """Refuse a fit the logs do not determine: the load not seen in the power, or errors that are not finite.

    ``p_hat`` and ``err`` are the linear parameters (named by ``names``; the last is the load's effect)
    then the delay and the length, and their standard errors. A record whose power ignores the load
    fits some window and delay as well as any other, with NaN or huge errors: returned, it reads as a
    characterised sensor.
    """
    jump, se = float(p_hat[-3]), float(err[-3])
    z = abs(jump) / se if se > 0 else (math.inf if jump != 0 else math.nan)
    if not (math.isfinite(se) and z >= MIN_STEP_Z):
        raise ValueError(f"{arg}: the power does not follow {load} (its effect is {jump:+.3g} +- {se:.2g}{unit}, "
                         f"{z:.1f} standard errors; at least {MIN_STEP_Z:g} are needed): there is no response to "
                         "fit; check that the load and the logs share one clock and that the two levels differ")
    if not np.all(np.isfinite(err)):
        which = [n for n, e in zip((*names, "delay", "length"), err) if not math.isfinite(e)]
        raise ValueError(f"{arg}: the fit's uncertainty is not finite ({', '.join(which)}): the logs do not "
                         f"determine the sensor's response to {load} (too few logs near its edges)")


#: The level of the F test that keeps a boxcar as long as the update period (a gapless average, one
#: parameter fewer) against the free shapes: the free fit is taken only where the logs reject the gapless one.
GAPLESS_LEVEL = 0.01


def _step_fit(problem: "_LoadResponse", sc: float, n_logs: int, min_delay: float,
              period: Optional[float] = None) -> StepFit:
    """Both shapes fitted; the better one as a StepFit, with the other's residual beside it.

    Given the update ``period``, a boxcar exactly that long (its delay fitted alone) is the null model:
    kept unless the better free shape lowers the residual sum of squares by more than an F test for one
    more parameter allows at :data:`GAPLESS_LEVEL`. Why: a free window and delay trade against each
    other along a valley of near-equal misfit, and on a record that holds few edges (one rise, one fall,
    or updates locked to one phase of a square wave) the optimum along it moves with the half of the
    record fitted; a sensor that averages over its whole period is a common design (an energy counter
    differenced, AMD's average power) and one parameter fewer. On the SC'24 3090 records its
    `power.draw.instant` is that sensor (window 99.97 ms, the period, not rejected: p 0.15-0.7), and the
    free fit on a half holding only the fall had taken 90 ms, predicting the other half 4x worse.
    """
    if not min_delay < 20.0 * sc:  # the delays tried run up to 20 x the scale
        raise ValueError(f"min_delay_ns={min_delay!r}: must be below 20 x scale_ns ({20.0 * sc:g} ns)")
    t = problem.t
    fits = {shape: problem.fit(shape, sc, min_delay) for shape in _SHAPES}
    shape = min(fits, key=lambda k: fits[k][2])
    other: _Shape = "first_order" if shape == "boxcar" else "boxcar"
    p_hat, err, rss = fits[shape]
    gapless, p_gap = False, math.nan
    if period is not None:
        g_hat, g_err, g_rss = problem.fit("boxcar", sc, min_delay, window=period)
        dof = len(t) - len(p_hat)
        if dof > 0 and rss > 0:
            f_stat = max(g_rss - rss, 0.0) / (rss / dof)
            p_gap = float(scipy.stats.f.sf(f_stat, 1, dof))
        elif g_rss <= rss:
            p_gap = 1.0
        if p_gap >= GAPLESS_LEVEL:
            other = "first_order"  # the free boxcar is the null's own family: beside it, the filter
            gapless, shape, p_hat, err, rss = True, "boxcar", g_hat, g_err, g_rss
    _check_determined(p_hat, err, "values", *(("the meter", " (gain)") if problem.referenced else ("the load",)),
                      names=problem.names)
    length = float(p_hat[-1])
    effect, level = float(p_hat[-3]), float(p_hat[0])
    return StepFit(
        shape=shape, delay_ns=float(p_hat[-2]), delay_err_ns=float(err[-2]),
        window_ns=length if shape == "boxcar" else 0.0, window_err_ns=float(err[-1]) if shape == "boxcar" else 0.0,
        tau_ns=length if shape == "first_order" else 0.0, tau_err_ns=float(err[-1]) if shape == "first_order" else 0.0,
        rise_ns=0.8 * length if shape == "boxcar" else length * math.log(9.0),
        low_w=level + effect * problem.low, high_w=level + effect * problem.high,
        residual_w=math.sqrt(rss / len(t)), other_residual_w=math.sqrt(fits[other][2] / len(t)), logs=n_logs,
        gain=effect if problem.referenced else 1.0, offset_w=level if problem.referenced else 0.0,
        drift_w_per_s=float(p_hat[1]) if problem.drift else 0.0, gapless=gapless, gapless_p=p_gap)


#: (log, interval) pairs :meth:`_LoadResponse.loads` weighs at once: bounded, so its memory is.
_PAIRS = 1 << 18

#: The response shapes a load response is fitted with: a boxcar window, a first-order filter.
_Shape = Literal["boxcar", "first_order"]
_SHAPES: tuple[_Shape, ...] = ("boxcar", "first_order")


class _LoadResponse:
    """Logs ``y`` at host times ``t`` of a load pattern (heavy intervals ``iv``, sorted), fitted shape by shape.

    The GPU's power is ``light + slope * (t - t0) + excess * [heavy running]``, seen through the
    candidate sensor; the linear parameters are solved exactly at each trial of the nonlinear ones.
    """

    #: The load column's levels that ``low_w`` and ``high_w`` report (light: 0, heavy: 1).
    low, high = 0.0, 1.0
    #: Whether the load column is a meter's watts (then its coefficients are the field's gain and offset).
    referenced = False
    #: Whether the linear model carries a drift column (the square wave is a model of the power, which drifts).
    drift = True
    #: The linear parameters, in the design's column order (the last is the load's effect).
    names: tuple[str, ...] = ("level", "drift", "effect")

    def __init__(self, t: np.ndarray, y: np.ndarray, iv: np.ndarray, t0: float) -> None:
        self.t, self.y, self.iv, self.t0 = t, y, iv, t0
        # Every trial of the fit reads these: the intervals' starts and ends contiguous (searchsorted would copy a
        # strided column at each call), and the design's columns that no sensor parameter enters.
        self.starts, self.ends = np.ascontiguousarray(iv[:, 0]), np.ascontiguousarray(iv[:, 1])
        self.fixed = [np.ones(len(t))] + ([(t - t0) * 1e-9] if self.drift else [])

    def loads(self, models: Sequence[SensorModel]) -> np.ndarray:
        """The heavy intervals seen through each of ``models`` (candidate sensors of one shape, :func:`_model_of`)
        at every log, a row each (each log's weight of heavy time).

        A log's intervals within its response's reach are a run of the sorted intervals. The (sensor, log,
        interval) triples of every sensor are weighed together (the forward model's ``response_weights``, which
        :meth:`SensorModel.interval_weights` uses too) and summed per sensor and log by ``bincount``, which adds
        a log's weights in the order of its intervals, as a loop over them would: a grid of trial sensors costs a
        few numpy passes, not a few per sensor.
        """
        t = self.t
        delay = np.array([m.delay_ns for m in models])[:, None]
        reach = np.array([float(m.memory_ns()) for m in models])[:, None] + delay
        length = np.array([m.tau_ns if m.shape == "first_order" else m.window_ns for m in models])
        lo = np.searchsorted(self.ends, t - reach - 1.0).ravel()
        n = np.maximum(np.searchsorted(self.starts, t - delay + 1.0, side="right").ravel() - lo, 0)
        out = np.zeros(len(n))
        # Blocks of (sensor, log) rows of about _PAIRS triples each at most: a long response over many intervals
        # and many sensors stays in memory.
        first = np.concatenate([[0], np.cumsum(n)])
        cuts = (np.unique(np.append(np.searchsorted(first, np.arange(0, first[-1], _PAIRS), side="right") - 1, len(n)))
                if first[-1] > _PAIRS else [0, len(n)])
        for a, b in zip(cuts[:-1], cuts[1:]):
            r = np.repeat(np.arange(a, b), n[a:b])
            j = lo[r] + np.arange(len(r)) - (first[r] - first[a])
            m = r // len(t)
            w = response_weights(models[0].shape == "first_order", t[r - m * len(t)] - delay[m, 0],
                                 self.starts[j], self.ends[j], length[m])
            out[a:b] = np.bincount(r - a, weights=w, minlength=b - a)
        return out.reshape(len(models), len(t))

    def design(self, shape: _Shape, d: float, length: float) -> np.ndarray:
        """The linear model's columns: the level, the drift (where carried), the load through the sensor."""
        return self.designs(shape, [(d, length)])[0]

    def designs(self, shape: _Shape, trials: Sequence[tuple[float, float]]) -> list[np.ndarray]:
        """:meth:`design` at each ``(delay, length)`` of ``trials``, the loads in one pass (:meth:`loads`)."""
        loads = self.loads([_model_of(shape, d, length) for d, length in trials])
        return [np.column_stack([*self.fixed, v]) for v in loads]

    def fit(self, shape: _Shape, sc: float, min_delay: float = 0.0,
            window: Optional[float] = None) -> tuple[np.ndarray, np.ndarray, float]:
        """Delay and length by variable projection from several starts; the linear parameters, delay and
        length, their errors, the RSS. A given boxcar ``window`` is held: the delay alone is fitted and the
        window's error is 0.

        The two are fitted in units of the scale ``sc``, with a central-difference step of
        :data:`FD_STEP` of it: scipy's default step is relative to the parameter, so a delay started at
        exactly 0 got ~1.5e-8 ns, below the resolution of the log times, a derivative of zero and no move.
        """
        y = self.y
        held = window is not None

        def projs(qs: list[np.ndarray]) -> list[np.ndarray]:
            """The residuals of the linear fit at each trial ``q`` (delay and length in scales)."""
            out = []
            for X in self.designs(shape, [(q[0] * sc, window if window is not None else q[1] * sc) for q in qs]):
                coef, *_ = np.linalg.lstsq(X, y, rcond=None)
                out.append(np.asarray(X @ coef - y))
            return out

        def proj(q: np.ndarray) -> np.ndarray:
            return projs([q])[0]
        best = None
        # The misfit has many local minima in (delay, length) (a window and a delay trade against each
        # other on a square wave): a coarse scan first, as a brute-force search would, then the best
        # few cells refined. A negative delay is a stamp taken before its window ends (nvidia-smi's).
        lo = max(min_delay, -4.0 * sc) / sc
        cells: list[tuple[float, ...]]
        if held:
            cells = [(d0,) for d0 in np.linspace(max(lo, -2.0), 2.0, 65)]
        else:
            cells = [(d0, l0) for d0 in np.linspace(max(lo, -2.0), 2.0, 17) for l0 in np.geomspace(0.05, 10.0, 12)]
        cost = [float(np.sum(r ** 2)) for r in projs([np.array(c) for c in cells])]
        jac = _central_jac(projs, np.full(1 if held else 2, FD_STEP))
        bounds = ([lo], [20.0]) if held else ([lo, 1.0 / sc], [20.0, 40.0])
        for k in np.argsort(cost)[:3 if held else 4]:
            r = scipy.optimize.least_squares(proj, np.array(cells[int(k)]), jac=jac, bounds=bounds)
            if best is None or r.cost < best.cost:
                best = r
        assert best is not None
        d = float(best.x[0]) * sc
        length = window if window is not None else float(best.x[1]) * sc
        X = self.design(shape, d, length)
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        p_hat = np.concatenate([coef, [d, length]])
        err, rss = self._errors(shape, p_hat, sc, fixed_length=held)
        return p_hat, err, rss

    def _errors(self, shape: _Shape, p_hat: np.ndarray, sc: float,
                fixed_length: bool = False) -> tuple[np.ndarray, float]:
        """Standard errors from the Jacobian of the full problem at the optimum, and its RSS.

        The linear parameters' columns are the design's own; delay and length by central differences
        of :data:`FD_STEP` of the scale (absolute: a step relative to a delay of 0 is none).
        """
        y = self.y
        d, length = float(p_hat[-2]), float(p_hat[-1])
        coef = p_hat[:-2]
        h = FD_STEP * sc
        hl = min(h, 0.5 * length)  # a length below 1 ns is taken as 1 ns: keep the step inside
        # A given length is no parameter: its column is left out and its error is 0.
        X, *moved = self.designs(shape, [(d, length), (d + h, length), (d - h, length)]
                                 + ([] if fixed_length else [(d, length + hl), (d, length - hl)]))
        rss = float(np.sum((X @ coef - y) ** 2))
        dd = (moved[0] - moved[1]) @ coef / (2 * h)
        if fixed_length:
            J = np.column_stack([X, dd])
        else:
            dl = (moved[2] - moved[3]) @ coef / (2 * hl)
            J = np.column_stack([X, dd, dl])
        k = J.shape[1]
        # A delay or length whose column is zero moves no prediction: every log sits at the same place
        # against the load's edges (logs on the load's own grid, a 1 ms logger under a wave of whole
        # milliseconds), so the logs place that edge only between two logs. Inverting J'J would fail (or,
        # nearly singular, give whatever rounding left) and refuse a fit as "the power does not follow the
        # load" whose effect is 90 standard errors. Its error is the spread of a
        # position uniform over one log interval; the other parameters' come from the columns that move.
        size = float(np.linalg.norm(X @ coef)) or 1.0
        moves = np.array([True] * X.shape[1] + [float(np.linalg.norm(J[:, j])) * sc > 1e-9 * size
                                                 for j in range(X.shape[1], k)])
        err = np.full(k, float(np.median(np.diff(np.unique(self.t)))) / math.sqrt(12.0))
        try:
            Jm = J[:, moves]
            err[moves] = np.sqrt(np.clip(np.diag(np.linalg.inv(Jm.T @ Jm) * rss / max(len(self.t) - k, 1)),
                                         0.0, None))
        except np.linalg.LinAlgError:
            err = np.full(k, np.nan)
        return (np.concatenate([err, [0.0]]) if fixed_length else err), rss


#: Grid steps a meter response may hold beyond four per meter sample (the padding before the meter's first
#: sample: 60 scales at 200 steps a scale, and room for a meter with a few gaps).
MAX_PADDING_STEPS = 1_000_000


class _MeterResponse(_LoadResponse):
    """Logs ``y`` beside a meter: its power through the candidate sensor is the load column."""

    referenced = True
    # No drift column: the model predicts ``offset + gain * (sensor * meter)`` and nothing else (the
    # meter's power already holds the board's own drift), so the window and delay are chosen by that.
    drift = False
    names = ("offset", "gain")

    def __init__(self, t: np.ndarray, y: np.ndarray, tm: np.ndarray, pm: np.ndarray, t0: float, sc: float) -> None:
        super().__init__(t, y, np.zeros((0, 2)), t0)
        # The filter's grid: fine against the scale (a 5 % step smeared a 50/50 ms wave's edges and moved
        # the fitted window by 0.25 ms), never finer than the meter samples.
        dt = max(sc / 200.0, float(np.median(np.diff(tm))))
        # Before its first sample the meter is taken at its first level (the board idle before a test),
        # far enough back for any response the fit tries (40 x the scale).
        start = float(np.min(t, initial=tm[0])) - 60.0 * sc  # a 40-scale response after a 20-scale delay
        # The grid holds about one point per meter sample; one stamp far from the others (a corrupted
        # row) would ask for more points than memory holds.
        steps = (float(tm[-1]) - start) / dt
        if steps > 4.0 * len(tm) + MAX_PADDING_STEPS:
            raise ValueError(f"t_ns, meter_t_ns: the logs and the meter span {float(tm[-1]) - start:.4g} ns, "
                             f"{steps:.3g} steps of the meter's median spacing ({dt:.4g} ns) for its {len(tm)} "
                             "samples: a stamp far from the others, or a meter with long gaps")
        if start < tm[0]:
            tm, pm = np.concatenate([[start], tm]), np.concatenate([[pm[0]], pm])
        cum = np.concatenate([[0.0], np.cumsum(0.5 * (pm[1:] + pm[:-1]) * np.diff(tm))])
        self.tm, self.tcum = tm, cum  # a boxcar's mean is exact on the meter's own samples
        self.grid = np.arange(tm[0], tm[-1], dt)
        self.cum = np.interp(self.grid, tm, cum)
        self.power = np.diff(self.cum) / dt  # the mean over each grid step
        self.dt = dt
        self.low, self.high = (float(v) for v in np.percentile(pm, [5, 95]))

    def loads(self, models: Sequence[SensorModel]) -> np.ndarray:
        return np.array([self.load(m) for m in models]).reshape(len(models), len(self.t))

    def load(self, model: SensorModel) -> np.ndarray:
        e = self.t - model.delay_ns
        if model.shape != "first_order":
            w = max(model.window_ns, 1.0)
            return np.asarray((np.interp(e, self.tm, self.tcum) - np.interp(e - w, self.tm, self.tcum)) / w)
        a = math.exp(-self.dt / model.tau_ns)
        # The filter's state at each grid step's end, started at the first step's level.
        out = scipy.signal.lfilter([1.0 - a], [1.0, -a], self.power, zi=[a * self.power[0]])[0]
        return np.asarray(np.interp(e, self.grid[1:], out))


def _model_of(shape: _Shape, d: float, length: float) -> SensorModel:
    """The candidate sensor: a boxcar window or a first-order filter of that length, after delay ``d``."""
    if shape == "boxcar":
        return SensorModel("fit", "window", period_ns=1.0, window_ns=max(length, 1.0), delay_ns=d)
    return SensorModel("fit", "window", period_ns=1.0, shape="first_order", tau_ns=max(length, 1.0), delay_ns=d)
