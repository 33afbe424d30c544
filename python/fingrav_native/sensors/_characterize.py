"""Characterise a power sensor from what it reports: period, window and its shape, delay, rise time, quantum.

Documentation of power sensors is thin and sometimes wrong; Yang, Adamek and
Armour (SC'24) measured NVIDIA's by driving square waves and steps of GPU
load and watching the reported power. The same here, as equivalent-time
sampling: many runs each switch the GPU from idle to a long busy block and
back, at random phase against the sensor; every log is placed on the host
timeline relative to the switching edges (through the calibrated clock maps,
whose bounds say how far a log may be misplaced), so the pooled logs trace
the sensor's step response at a resolution far finer than its period. The response is fitted
(:mod:`fingrav_native.sensors._response_fit`) as

* a boxcar window ``W`` after a delay ``d``: a linear ramp from ``d`` to ``d + W``;
* a first-order filter of time constant ``tau`` after ``d``: ``1 - exp(-(u - d) / tau)``;

and the shape with the smaller residual (penalised by its parameters) wins.
The update period comes from the distinct timestamps of the logs; a
counter's resolution from the smallest step of its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import numpy.typing as npt
import scipy.optimize
import scipy.signal
import scipy.stats

from fingrav_native._checks import finite_array, integer_in
from fingrav_native.sensors._model import SensorModel
from fingrav_native.sensors._response_fit import StepFit


@dataclass(frozen=True)
class PeriodEstimate:
    """A sensor's update period from its distinct timestamps.

    Attributes
    ----------
    period_ns : float
        The period: the least-squares slope of update stamps on their index
        (missed updates counted).
    uncertainty_ns : float
        Standard error of the period, from its spread over contiguous pieces
        of the record.
    jitter_ns : float
        Robust spread (1.4826 MAD) of the stamps around the fitted grid.
    missed : int
        Intervals spanning more than one period (updates the reader missed).
    updates : int
        Distinct timestamps used.
    off_grid : int
        Distinct timestamps left out: off the update grid (late by far more
        than the others against the coherent period), or a second stamp in
        one period.
    """

    period_ns: float
    uncertainty_ns: float
    jitter_ns: float
    missed: int
    updates: int
    off_grid: int = 0


def _changes(t: np.ndarray, values: Optional[npt.ArrayLike]) -> np.ndarray:
    """The stamps of distinct updates: with ``values``, the first poll of each new reading (a cached value polled again is no update)."""
    if values is None:
        return np.unique(t)
    v = finite_array(values, "values").ravel()
    if v.shape != t.shape:
        raise ValueError(f"values: one per timestamp, got {v.shape} for timestamps_ns {t.shape}")
    order = np.argsort(t, kind="stable")
    tt, vv = t[order], v[order]
    new = np.concatenate([[True], vv[1:] != vv[:-1]]) if len(vv) else np.zeros(0, dtype=bool)
    return np.unique(tt[new])


def _rayleigh(t: np.ndarray, period: float) -> float:
    """The Rayleigh statistic of stamps ``t`` folded at ``period``: ``|sum exp(2 pi i t / P)|^2 / N``."""
    ph = (2.0 * np.pi / period) * t
    return float(np.hypot(np.cos(ph).sum(), np.sin(ph).sum()) ** 2 / len(t))


def _coherent_period(t: np.ndarray, p0: float) -> float:
    """The period within 10 % of ``p0`` at which the stamps fold most coherently (max Rayleigh)."""
    tt = t - t[0]
    span = float(tt[-1])
    if span <= 0 or p0 <= 0:
        return p0
    # The peak's half-width is about P^2 / (2 pi span): a grid a quarter of that, at most 20000 points.
    step = max(p0 * p0 / (8.0 * np.pi * span), 0.2 * p0 / 20000)
    grid = np.arange(0.9 * p0, 1.1 * p0, step)
    ph = (2.0 * np.pi) * tt[None, :] / grid[:, None] if len(grid) * len(tt) <= 4_000_000 else None
    if ph is not None:
        z = np.hypot(np.cos(ph).sum(axis=1), np.sin(ph).sum(axis=1))
    else:  # long records: one period at a time, memory bounded by the stamps
        z = np.array([_rayleigh(tt, g) for g in grid])
    k = int(np.argmax(z))
    best = scipy.optimize.minimize_scalar(lambda q: -_rayleigh(tt, q), bounds=(grid[k] - step, grid[k] + step),
                                          method="bounded", options={"xatol": step * 1e-3})
    return float(best.x) if best.success else float(grid[k])


def _coherent_index(t: np.ndarray, period: float) -> tuple[np.ndarray, np.ndarray]:
    """Each on-grid stamp's whole number of ``period`` from the first, and which stamps are on the grid.

    A stamp's lateness is its phase against the stamps' mean phase (circular, in cycles); stamps late by
    more than five robust spreads (1.4826 MAD, at least 0.02 cycles) beyond the median are off the update
    grid (a value that changed between updates, a restart) and get no index; of stamps sharing an index
    the first is kept.
    """
    tt = t - t[0]
    cyc = tt / period
    mean = float(np.angle(np.exp(2j * np.pi * cyc).sum())) / (2.0 * np.pi)
    late = (cyc - mean + 0.5) % 1.0 - 0.5
    med = float(np.median(late))
    spread = max(1.4826 * float(np.median(np.abs(late - med))), 0.02)
    on = np.abs(late - med) <= 5.0 * spread
    n = np.round(cyc - mean - late)  # the grid line each stamp is late from
    first = np.ones(len(t), dtype=bool)
    idx = np.flatnonzero(on)
    first[idx[1:]] = np.diff(n[idx]) > 0
    on &= first
    return n[on] - n[on][0], on


def estimate_period(timestamps_ns: npt.ArrayLike, values: Optional[npt.ArrayLike] = None, *,
                    blocks: int = 8) -> PeriodEstimate:
    """The update period of a sensor from the timestamps of its logs (and, polled, their values).

    Parameters
    ----------
    timestamps_ns : array_like
        Log timestamps (host ns, or the logger's clock scaled to ns); repeats
        of one stamp are merged.
    values : array_like, optional
        The logged values, one per timestamp. Given, a host tool's polls of
        a cached reading collapse to the first poll that saw each new value
        (nvidia-smi polls every few ms a field the driver updates every 20-100
        ms): the update instants, each seen late by up to one poll.
    blocks : int
        Contiguous pieces of the record whose periods, fitted alone, give
        the standard error (at least 2).

    Returns
    -------
    PeriodEstimate

    Raises
    ------
    ValueError
        Fewer than 3 distinct updates, a timestamp or value that is NaN or
        infinite, or ``values`` of another length.

    Notes
    -----
    1. Distinct update stamps, sorted; a first period from the lower
       quartile of the intervals (missed updates only lengthen them),
       refined twice on intervals divided by their whole number
       of periods ``m = round(interval / period)`` (missed updates).
    2. Each update's index ``n``. Counting periods interval by interval
       fails where the value stays unchanged for seconds (an idle board):
       a 1 % error in the period miscounts a gap of 50 periods, and both
       counts fit. So the index comes from the phase-coherent period: the
       one that maximises the Rayleigh statistic ``|sum exp(2 pi i t /
       P)|^2 / N`` of the stamps (epoch folding, as pulsar timing finds a
       period from arrival times; Buccheri et al. 1983), searched within
       10 % of the first period on a grid finer than its peak
       (``P^2 / span``) and refined by Brent's method; ``n`` is then each
       stamp's whole number of those periods from the first. Stamps off
       that grid (late by more than five robust spreads beyond the others:
       a value that changed between updates) are left out and counted.
    3. The period is the least-squares slope of stamp on index. The median
       of intervals is biased when a poll grid quantises them (a few percent
       at 13 ms polls of a 100 ms field); the slope is not: a stamp's
       lateness is bounded, so its effect falls as one over the record's
       length.
    4. The standard error from the spread of the slopes fitted on
       ``blocks`` contiguous pieces (a piece ``1/B`` of the record has a
       slope ``B^1.5`` times as uncertain: ``1/B`` of the stamps over ``1/B``
       of the span), or least squares' own inflated for the residuals'
       lag-1 correlation, whichever is larger: where a poll's phase against
       the updates drifts slowly, neighbouring stamps are late together.
    """
    nb = integer_in(blocks, "blocks", 2)
    # A NaN stamp is a log with no time: refused, not dropped (dropped, it would change the fit without a word).
    t = _changes(finite_array(timestamps_ns, "timestamps_ns").ravel(), values)
    if len(t) < 3:
        raise ValueError(f"timestamps_ns: need at least 3 distinct updates, got {len(t)}")
    d = np.diff(t)
    # A first period from the short intervals: a missed update (or one that left the value unchanged, so
    # that no poll could see it) only lengthens an interval, so the median can land on two periods.
    p = float(np.percentile(d, 25))
    for _ in range(2):
        m = np.maximum(np.round(d / p), 1.0)
        p = float(np.median(d / m))
    n, on = _coherent_index(t, _coherent_period(t, p))
    off_grid = int(np.sum(~on))
    t = t[on]
    if len(t) < 3:
        raise ValueError(f"timestamps_ns: need at least 3 updates on one period's grid, got {len(t)}")
    m = np.diff(n)
    fit = scipy.stats.linregress(n, t)
    period = float(fit.slope)
    resid = t - (fit.intercept + period * n)
    jitter = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
    # Pieces of at least three updates each (a short record gets fewer pieces, not none).
    pieces = [k for k in np.array_split(np.arange(len(t)), max(min(nb, len(t) // 3), 1))
              if len(k) >= 3 and n[k[-1]] > n[k[0]]]
    slopes = [float(scipy.stats.linregress(n[k], t[k]).slope) for k in pieces]
    # A slope over a piece 1/B as long, from 1/B of the stamps, scatters B^1.5 times as much as the
    # whole record's: the pieces' spread scaled so, or least squares' own error if larger.
    # Least squares' own error assumes independent stamps; a poll whose phase against the updates drifts
    # slowly makes neighbours late together: inflated for the residuals' lag-1 correlation (AR(1)).
    rho = 0.0
    if len(resid) > 3 and np.std(resid[:-1]) > 0 and np.std(resid[1:]) > 0:
        rho = float(np.clip(np.corrcoef(resid[:-1], resid[1:])[0, 1], 0.0, 0.99))
    ols = float(fit.stderr) * math.sqrt((1.0 + rho) / (1.0 - rho))
    b = len(slopes)
    unc = max(float(np.std(slopes, ddof=1)) / b ** 1.5, ols) if b >= 2 else ols
    return PeriodEstimate(period, unc, jitter, int(np.sum(m > 1)), len(t), off_grid)


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
    e = finite_array(energy_j, "energy_j").ravel()
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

    def __getattr__(self, name: str) -> Any:
        # A value type below the files layer writes no file: the one writer is files/'s
        # (fingrav_native.save), so a call of the save method other value types lack is pointed there.
        if name == "save":
            raise AttributeError("Characterisation has no save method: write it with "
                                 "fingrav_native.save(characterisation, path)")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
