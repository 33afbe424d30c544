"""The model check of an attribution: do the residuals say which assumption fails?

A least-squares fit always returns numbers; whether its model holds is in
its residuals. :func:`check_model` groups them by where each log's window
edges fall (inside an execution, in a gap, in idle time) and looks for
structure that noise would not make (Box, Jenkins and Reinsel, *Time Series
Analysis*, ch. 8: diagnostic checking by residual structure):

* a mean residual away from zero for logs whose window edge lies in a gap:
  the gaps do not draw what the model gives them;
* the same for edges in idle time: the idle level or the cooling after the
  work is wrong;
* residuals that follow the derivative of the prediction with respect to
  the logs' timestamps: the timing is off (the sensor's delay, or the clock
  map's offset), by the regression's coefficient;
* residuals that follow the derivative with respect to the window's length
  (or the filter's time constant): the window shape is wrong;
* correlation of consecutive residuals along the record (logs whose windows
  do not overlap): something slow is not modelled (drift, executions that
  differ from their shared curve).

Each test's standard error is cluster-robust over the engine's blocks
(Liang and Zeger 1986), so the correlation a sliding window creates does
not raise false alarms; a test fails at ``|z| > 4`` and an effect large
enough to matter.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from fingrav_native.method._engine_design import TILE_EXECUTION, TILE_GAP, TILE_IDLE, Design, design_rows, response_span
from fingrav_native.method._engine_solution import Solution
from fingrav_native.sensors._model import SensorModel

#: A test fails beyond this many (cluster-robust) standard errors.
Z_FAIL = 4.0


@dataclass(frozen=True)
class ModelCheck:
    """What the residuals of an attribution say about its assumptions.

    Attributes
    ----------
    residual_w : float
        RMS residual of the total channel (W, calibrated).
    groups : dict of str to tuple
        By where a log's window edges fall (``"edges in executions"``,
        ``"an edge in a gap"``, ``"an edge in idle time"``): (logs, mean
        residual W, its standard error W).
    lag1 : float
        Correlation of consecutive residuals of logs whose windows do not
        overlap (NaN with fewer than 20 such pairs).
    timing_ns, timing_se_ns : float
        The shift of the logs' timestamps that the residuals ask for, and its
        standard error (NaN where not measurable).
    window_rel, window_se_rel : float
        The relative change of the window's length (or time constant) the
        residuals ask for, and its standard error.
    failed : tuple of str
        The assumptions the residuals reject, in words (empty: none).
    """

    residual_w: float
    groups: dict[str, tuple[int, float, float]]
    lag1: float
    timing_ns: float
    timing_se_ns: float
    window_rel: float
    window_se_rel: float
    failed: tuple[str, ...]


def _cluster_mean(r: np.ndarray, blocks: np.ndarray) -> tuple[float, float]:
    """Mean of ``r`` and its cluster-robust standard error over blocks."""
    n = len(r)
    if n < 2:
        return math.nan, math.nan
    m = float(np.mean(r))
    sums = np.bincount(blocks, weights=r - m)
    k = int(np.count_nonzero(np.bincount(blocks)))
    if k < 2:
        return m, math.nan
    return m, float(math.sqrt(np.sum(sums ** 2) * k / (k - 1))) / n


def _regress(r: np.ndarray, g: np.ndarray, blocks: np.ndarray) -> tuple[float, float]:
    """Coefficient of ``r`` on ``g`` (no intercept) and its cluster-robust standard error."""
    gg = float(g @ g)
    if not gg > 0 or len(r) < 10:
        return math.nan, math.nan
    beta = float(g @ r) / gg
    e = r - beta * g
    s = np.bincount(blocks, weights=g * e)
    k = int(np.count_nonzero(np.bincount(blocks)))
    if k < 2:
        return beta, math.nan
    return beta, float(math.sqrt(np.sum(s ** 2) * k / (k - 1))) / gg


def _edge_kind(design: Design, x: np.ndarray) -> np.ndarray:
    """The kind of tile each time ``x`` falls in (:data:`TILE_IDLE` outside the tiles)."""
    til = design.tiling
    j = np.searchsorted(til.a, x, side="right") - 1
    inside = (j >= 0) & (x < til.b[np.clip(j, 0, None)])
    return np.where(inside, til.kind[np.clip(j, 0, None)], TILE_IDLE)


def _groups(design: Design, sensor: SensorModel, sol: Solution, r: np.ndarray) -> dict[str, tuple[int, float, float]]:
    """Mean residual by where the logs' window edges fall."""
    lo, hi = sol.rows.lo, sol.rows.hi
    k_hi = _edge_kind(design, hi)
    # A first-order response has one edge (its end); its start is a long tail, not an edge.
    k_lo = _edge_kind(design, lo) if (sensor.shape == "boxcar" and sensor.kind != "instant") else k_hi
    out: dict[str, tuple[int, float, float]] = {}
    masks = {"edges in executions": (k_lo == TILE_EXECUTION) & (k_hi == TILE_EXECUTION),
             "an edge in a gap": (k_lo == TILE_GAP) | (k_hi == TILE_GAP),
             "an edge in idle time": (k_lo == TILE_IDLE) | (k_hi == TILE_IDLE)}
    for name, m in masks.items():
        if m.sum() >= 10:
            mean, se = _cluster_mean(r[m], sol.blocks[m])
            out[name] = (int(m.sum()), mean, se)
    return out


def _prediction(design: Design, sensor: SensorModel, t: np.ndarray, w: np.ndarray, x: np.ndarray,
                n_logs: int) -> np.ndarray:
    """The total channel's prediction for logs at ``t`` (NaN where a log is not usable there)."""
    rows = design_rows(design, sensor, t, w, np.ones(len(t), dtype=bool))
    pred = np.full(n_logs, np.nan)
    P = rows.A.shape[1]
    xx = x[:P] if len(x) >= P else np.concatenate([x, np.zeros(P - len(x))])
    pred[rows.used] = rows.A @ xx
    return pred


def _derivative(design: Design, sensor: SensorModel, t: np.ndarray, w: np.ndarray, x: np.ndarray, *,
                dt: float = 0.0, dw: float = 0.0) -> np.ndarray:
    """Central difference of the prediction in the stamps (``dt``) or the window / time constant (``dw``, relative)."""
    n = len(t)
    if dt:
        plus = _prediction(design, sensor, t + dt, w, x, n)
        minus = _prediction(design, sensor, t - dt, w, x, n)
        return np.asarray((plus - minus) / (2.0 * dt))
    if sensor.shape == "first_order":
        s_plus = dataclasses.replace(sensor, tau_ns=sensor.tau_ns * (1 + dw))
        s_minus = dataclasses.replace(sensor, tau_ns=sensor.tau_ns * (1 - dw))
        plus = _prediction(design, s_plus, t, w, x, n)
        minus = _prediction(design, s_minus, t, w, x, n)
    else:
        plus = _prediction(design, sensor, t, w * (1 + dw), x, n)
        minus = _prediction(design, sensor, t, w * (1 - dw), x, n)
    return np.asarray((plus - minus) / (2.0 * dw))


def _lag1(r: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Correlation of consecutive residuals whose responses do not overlap."""
    order = np.argsort(hi, kind="stable")
    rs, lo_s, hi_s = r[order], lo[order], hi[order]
    apart = lo_s[1:] >= hi_s[:-1]
    if apart.sum() < 20:
        return math.nan
    a, b = rs[:-1][apart], rs[1:][apart]
    if np.std(a) == 0 or np.std(b) == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def _failures(groups: dict[str, tuple[int, float, float]], lag1: float, n_pairs: int, timing: tuple[float, float],
              window: tuple[float, float], resid: float, sensor: SensorModel) -> list[str]:
    """The assumptions the residuals reject, each with its figure."""
    out: list[str] = []
    floor = 0.25 * resid
    for name, why in (("an edge in a gap", "the gaps between executions do not draw the power the model gives them "
                       "(their own level by time since the last kernel, or the end of the execution before them)"),
                      ("an edge in idle time", "the idle level or the cooling after the work is not what the model "
                       "gives it")):
        if name in groups:
            n, m, se = groups[name]
            if math.isfinite(se) and se > 0 and abs(m) > Z_FAIL * se and abs(m) > floor:
                out.append(f"gap level: logs with {name} are off by {m:+.1f} W on average ({n} logs, "
                           f"{abs(m) / se:.0f} standard errors): {why}")
    b, se = timing
    if math.isfinite(se) and se > 0 and abs(b) > Z_FAIL * se and abs(b) > 1_000.0:
        out.append(f"delay or clock offset: the residuals ask for the logs' timestamps to move by {b / 1e3:+.1f} us "
                   f"(+-{se / 1e3:.1f}): the sensor's delay (delay_ns={sensor.delay_ns:.0f}) or the clock map's offset "
                   "is off; characterise the sensor, or check the clock map")
    b, se = window
    what = "time constant" if sensor.shape == "first_order" else "window"
    if math.isfinite(se) and se > 0 and abs(b) > Z_FAIL * se and abs(b) > 0.05:
        out.append(f"window shape: the residuals ask for a {100 * b:+.0f} % longer {what} (+-{100 * se:.0f} %): the "
                   f"sensor model's {what} or shape is wrong for these logs; characterise the sensor")
    if math.isfinite(lag1) and lag1 > max(0.3, 4.0 / math.sqrt(max(n_pairs, 1))):
        out.append(f"drift or shape: residuals of logs whose windows do not overlap are correlated along the record "
                   f"(lag-1 r = {lag1:.2f}): something slow is not modelled (a drift, a thermal swing, executions "
                   "that differ from their shared curve)")
    return out


def check_model(design: Design, sensor: SensorModel, t: np.ndarray, w: np.ndarray, sol: Solution,
                channel: int = 0, window_check: Optional[bool] = None) -> ModelCheck:
    """Test the chosen model's assumptions on its residuals.

    Parameters
    ----------
    design : Design
        The design the engine chose (``designs[sol.design]``).
    sensor : SensorModel
    t, w : numpy.ndarray
        All logs' stamps and windows (as given to the engine).
    sol : Solution
    channel : int
        The channel tested (the total).
    window_check : bool, optional
        Test the window's length (default: for sensors that average).

    Returns
    -------
    ModelCheck
    """
    used = sol.rows.used
    r = sol.residual[:, channel]
    resid = float(np.sqrt(np.mean(r ** 2))) if len(r) else math.nan
    groups = _groups(design, sensor, sol, r)
    lo, hi = response_span(sensor, t[used], w[used])
    lag1 = _lag1(r, lo, hi)
    n_pairs = int(np.sum(np.sort(lo)[1:] >= np.sort(hi)[:-1]))
    x = sol.x[:, channel]
    span = float(np.median(hi - lo)) if len(hi) else 0.0
    dt = max(500.0, 0.02 * span)
    g_t = _derivative(design, sensor, t, w, x, dt=dt)[used]
    ok = np.isfinite(g_t)
    timing = _regress(r[ok], g_t[ok], sol.blocks[ok])
    # A positive coefficient on d(pred)/dt: the logs look like the prediction at later stamps,
    # i.e. the stamps should move forward.
    window = (math.nan, math.nan)
    if window_check if window_check is not None else sensor.averages and sensor.kind != "instant":
        g_w = _derivative(design, sensor, t, w, x, dw=0.05)[used]
        okw = np.isfinite(g_w)
        window = _regress(r[okw], g_w[okw], sol.blocks[okw])
    failed = _failures(groups, lag1, n_pairs, timing, window, resid, sensor)
    return ModelCheck(residual_w=resid, groups=groups, lag1=lag1, timing_ns=timing[0], timing_se_ns=timing[1],
                      window_rel=window[0], window_se_rel=window[1], failed=tuple(failed))
