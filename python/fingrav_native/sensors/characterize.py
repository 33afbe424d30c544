"""Characterise a power sensor from what it reports: period, window and its shape, delay, rise time, quantum.

Documentation of power sensors is thin and sometimes wrong; Yang, Adamek and
Armour (SC'24) measured NVIDIA's by driving square waves and steps of GPU
load and watching the reported power. The same here, as equivalent-time
sampling: many runs each switch the GPU from idle to a long busy block and
back, at random phase against the sensor; every log is placed on the host
timeline relative to the switching edges (through the calibrated clock maps,
DESIGN.md), so the pooled logs trace the sensor's step response at a
resolution far finer than its period. The response is fitted as

* a boxcar window ``W`` after a delay ``d``: a linear ramp from ``d`` to ``d + W``;
* a first-order filter of time constant ``tau`` after ``d``: ``1 - exp(-(u - d) / tau)``;

and the shape with the smaller residual (penalised by its parameters) wins.
The update period comes from the distinct timestamps of the logs; a
counter's resolution from the smallest step of its value.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt
import scipy.optimize

from fingrav_native._checks import positive_number
from fingrav_native.sensors.model import SensorModel

__all__ = ["PeriodEstimate", "StepFit", "Characterisation", "estimate_period", "fit_step_response",
           "counter_resolution", "load_characterisation"]


@dataclass(frozen=True)
class PeriodEstimate:
    """A sensor's update period from its distinct timestamps.

    Attributes
    ----------
    period_ns : float
        The period (median interval between updates, missed updates removed).
    uncertainty_ns : float
        Standard error of the period.
    jitter_ns : float
        Robust spread (1.4826 MAD) of the intervals around their multiples of the period.
    missed : int
        Intervals spanning more than one period (updates the reader missed).
    updates : int
        Distinct timestamps used.
    """

    period_ns: float
    uncertainty_ns: float
    jitter_ns: float
    missed: int
    updates: int


def estimate_period(timestamps_ns: npt.ArrayLike) -> PeriodEstimate:
    """The update period of a sensor from the timestamps of its logs.

    Parameters
    ----------
    timestamps_ns : array_like
        Log timestamps (host ns, or the logger's clock scaled to ns); repeats
        of one update (a reader polling faster than the sensor) are merged.

    Returns
    -------
    PeriodEstimate

    Raises
    ------
    ValueError
        Fewer than 3 distinct timestamps.

    Notes
    -----
    1. Distinct timestamps, sorted; intervals between them.
    2. A first period: the median interval; an interval of ``m`` periods
       (missed updates) is divided by ``m = round(interval / period)``.
    3. The period: the median of the divided intervals, refined once; its
       standard error from the robust spread over ``sqrt(n)``.
    """
    t = np.unique(np.asarray(timestamps_ns, dtype=np.float64))
    t = t[np.isfinite(t)]
    if len(t) < 3:
        raise ValueError(f"timestamps_ns: need at least 3 distinct timestamps, got {len(t)}")
    d = np.diff(t)
    p = float(np.median(d))
    for _ in range(2):
        m = np.maximum(np.round(d / p), 1.0)
        p = float(np.median(d / m))
    m = np.maximum(np.round(d / p), 1.0)
    resid = d - m * p
    jitter = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
    unc = (jitter / math.sqrt(float(np.sum(m)))) if len(d) else math.nan
    return PeriodEstimate(p, unc, jitter, int(np.sum(m > 1)), len(t))


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


def _boxcar(u: np.ndarray, d: float, w: float) -> np.ndarray:
    return np.clip((u - d) / max(w, 1.0), 0.0, 1.0)


def _filter(u: np.ndarray, d: float, tau: float) -> np.ndarray:
    return np.where(u > d, -np.expm1(-(u - d) / max(tau, 1.0)), 0.0)


def fit_step_response(offset_ns: npt.ArrayLike, values: npt.ArrayLike, *,
                      scale_ns: Optional[float] = None) -> StepFit:
    """Fit a sensor's response to a rising power step, pooled over many steps.

    Parameters
    ----------
    offset_ns : array_like
        Each log's host time minus the step's (the busy block's first
        execution start), after the clock maps.
    values : array_like
        The logged power.
    scale_ns : float, optional
        A first guess of the response's length (default: a tenth of the
        offsets' span).

    Returns
    -------
    StepFit

    Notes
    -----
    Both shapes are fitted by ``scipy.optimize.least_squares`` (soft L1 loss,
    robust to a stray log), parameters ``(low, high, delay, length)``; the
    standard errors come from the Jacobian at the optimum. The shape with the
    smaller residual sum wins (both have four parameters).
    """
    u = np.asarray(offset_ns, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(u) & np.isfinite(y)
    u, y = u[ok], y[ok]
    if len(u) < 8:
        raise ValueError(f"offset_ns, values: need at least 8 finite logs around the steps, got {len(u)}")
    span = float(u.max() - u.min())
    guess = positive_number(scale_ns, "scale_ns") if scale_ns is not None else max(span / 10.0, 1.0)
    lo0 = float(np.median(y[u < 0])) if np.any(u < 0) else float(np.min(y))
    hi0 = float(np.median(y[u > u.max() - 0.2 * span])) if span > 0 else float(np.max(y))
    fits: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
    for name, f in (("boxcar", _boxcar), ("first_order", _filter)):
        def resid(p: np.ndarray, f: Any = f) -> np.ndarray:
            return np.asarray(p[0] + (p[1] - p[0]) * f(u, p[2], p[3]) - y)
        best = None
        for d0 in (0.0, 0.25 * guess, guess):
            for l0 in (0.3 * guess, guess, 3.0 * guess):
                r = scipy.optimize.least_squares(
                    resid, np.array([lo0, hi0, d0, l0]), loss="soft_l1",
                    f_scale=max(float(np.std(y)) * 0.1, 1e-6),
                    bounds=([-np.inf, -np.inf, -span, 1.0], [np.inf, np.inf, span, 2 * span + 1.0]))
                if best is None or r.cost < best.cost:
                    best = r
        assert best is not None
        rss = float(np.sum(resid(best.x) ** 2))
        dof = max(len(u) - 4, 1)
        try:
            jac = np.asarray(best.jac, dtype=np.float64)  # dense under the default jac="2-point"
            cov = np.linalg.inv(jac.T @ jac) * rss / dof
            err = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        except np.linalg.LinAlgError:
            err = np.full(4, np.nan)
        fits[name] = (best.x, err, rss)
    shape = min(fits, key=lambda k: fits[k][2])
    other = "first_order" if shape == "boxcar" else "boxcar"
    x, err, rss = fits[shape]
    length = float(x[3])
    rise = 0.8 * length if shape == "boxcar" else length * math.log(9.0)
    n = len(u)
    return StepFit(
        shape=shape, delay_ns=float(x[2]), delay_err_ns=float(err[2]),
        window_ns=length if shape == "boxcar" else 0.0, window_err_ns=float(err[3]) if shape == "boxcar" else 0.0,
        tau_ns=length if shape == "first_order" else 0.0, tau_err_ns=float(err[3]) if shape == "first_order" else 0.0,
        rise_ns=rise, low_w=float(x[0]), high_w=float(x[1]), residual_w=math.sqrt(rss / n),
        other_residual_w=math.sqrt(fits[other][2] / n), logs=n)


def counter_resolution(energy_j: npt.ArrayLike) -> float:
    """The smallest step of an energy counter (its quantum), from its reads.

    Parameters
    ----------
    energy_j : array_like
        Counter reads (J), in time order.

    Returns
    -------
    float
        The greatest step that divides every observed step (to 1e-3 of
        it), found from the smallest nonzero step; NaN with no step.
    """
    e = np.asarray(energy_j, dtype=np.float64)
    steps = np.abs(np.diff(e))
    steps = steps[steps > 0]
    if not len(steps):
        return math.nan
    q = float(steps.min())
    # Every step is a whole number of quanta: refine q to the largest divisor that fits them all.
    for div in range(1, 65):
        cand = q / div
        k = steps / cand
        if np.all(np.abs(k - np.round(k)) < 1e-3 * np.maximum(k, 1.0)):
            return cand
    return q


@dataclass(frozen=True)
class Characterisation:
    """A characterised sensor: the model profiles use, and the measurements behind it.

    Attributes
    ----------
    sensor : SensorModel
        The model (``source="characterised"``).
    period : PeriodEstimate
    step : StepFit or None
        None for an energy counter (its windows are exact).
    quantum : float
        Counter resolution (J), or the power quantum (W); 0 when not observed.
    device : str
        The device characterised, in words.
    notes : str
        How it was measured.
    """

    sensor: SensorModel
    period: PeriodEstimate
    step: Optional[StepFit]
    quantum: float
    device: str
    notes: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the characterisation file)."""
        return {"format": "fingrav-sensor", "version": 1, "sensor": self.sensor.as_dict(),
                "period": vars(self.period), "step": None if self.step is None else vars(self.step),
                "quantum": self.quantum, "device": self.device, "notes": self.notes}

    def save(self, path: Union[str, "os.PathLike[str]"]) -> str:
        """Write the characterisation as JSON; returns the path."""
        p = os.fspath(path)
        with open(p, "w", encoding="utf-8") as f:
            json.dump(self.as_dict(), f, indent=2, allow_nan=True)
        return p


def load_characterisation(path: Union[str, "os.PathLike[str]"]) -> Characterisation:
    """Read a characterisation file written by :meth:`Characterisation.save`.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Characterisation

    Raises
    ------
    ValueError
        Not a characterisation file (the message names the file and what is wrong).
    """
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"path={p!r}: not a readable sensor characterisation: {exc}") from None
    if not isinstance(d, dict) or d.get("format") != "fingrav-sensor":
        raise ValueError(f"path={p!r}: not a fingrav sensor characterisation (format is not 'fingrav-sensor')")
    try:
        return Characterisation(
            sensor=SensorModel.from_dict(d["sensor"]), period=PeriodEstimate(**d["period"]),
            step=None if d["step"] is None else StepFit(**d["step"]), quantum=float(d["quantum"]),
            device=str(d["device"]), notes=str(d["notes"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"path={p!r}: malformed sensor characterisation: {exc}") from None
