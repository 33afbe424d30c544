"""The forward model of windowed logs: how each log weighs each unknown of an execution's power.

A log that averages a window (or passes a filter) is a linear functional of
the power over what its response covers (:meth:`~fingrav_native.sensors.SensorModel.interval_weights`).
The unknowns tile a run: the curve of the execution of interest over its
progress, a level per execution index, each warm-up execution's own coarser
curve, and the cooling tail after the run down to the idle level that also
precedes it (the assumptions of :func:`~fingrav_native.method.deconvolve`).
:func:`design_rows` builds one run's rows, :func:`penalty` the smoothness
prior, and :func:`curve_variance` scores a design; the deconvolution solves
with them and the phase steerer chooses launches by them.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Optional

import numpy as np
import numpy.typing as npt
import scipy.linalg

from fingrav_native._checks import finite_array, instance_of, integer_in, positive_number, structured
from fingrav_native.sensors._model import SensorModel

#: Tail bins after a run's last execution, in multiples of the execution of interest's duration:
#: geometric (cooling is exponential-like: fast first, slow later), smoothed like the curve, the
#: last bin (beyond 64 durations) being the idle level that also precedes every run.
TAIL_EDGES = (0.0, *np.geomspace(1.0 / 32.0, 64.0, 23))


def warm_bins(K: int) -> int:
    """Bins of each warm-up execution's own curve: a fifth of the curve's, 4 to 8 (they are nuisances), at most K."""
    return max(1, min(K, max(4, min(8, K // 5))))


def run_rows(sensor: SensorModel, t: np.ndarray, win: np.ndarray, ex: np.ndarray, k: int, frac_edges: np.ndarray,
             n_max: int, tail_edges_ns: np.ndarray, warm: int = 0) -> np.ndarray:
    """Design rows of one run's logs.

    Columns: [curve (K), level per execution index (n_max), own curve of each
    warm-up execution (warm x warm_bins(K)), tail (T)]; the last tail column
    is the idle level.
    """
    K, T = len(frac_edges) - 1, len(tail_edges_ns)
    Kw = warm_bins(K)
    A = np.zeros((len(t), K + n_max + warm * Kw + T))
    kid = ex["kernel_id"][k]
    starts, ends = ex["start_ns"], ex["end_ns"]
    tt, ww = t[:, None], win[:, None]
    warm_edges = np.linspace(0.0, 1.0, Kw + 1)
    for i in range(len(ex)):
        s, e = float(starts[i]), float(ends[i])
        # Assumption 3 (of the deconvolution): a launch gap belongs to the end of the execution before it.
        e_ext = float(starts[i + 1]) if i + 1 < len(ex) else e
        idx = int(ex["index"][i])
        if ex["kernel_id"][i] == kid and i != k and idx < warm:
            # Assumption 1b: a warm-up execution draws its own curve.
            edges = s + warm_edges * (e - s)
            edges[-1] = e_ext
            lo = K + n_max + idx * Kw
            A[:, lo:lo + Kw] += sensor.interval_weights(tt, edges[None, :-1], edges[None, 1:], ww)
        elif ex["kernel_id"][i] == kid:
            edges = s + frac_edges * (e - s)
            edges[-1] = e_ext
            w = sensor.interval_weights(tt, edges[None, :-1], edges[None, 1:], ww)
            A[:, :K] += w
            if i != k:
                A[:, K + idx] += w.sum(axis=1)
        else:
            A[:, K + idx] += sensor.interval_weights(t, s, e_ext, win)
    # Before the run: idle (the last tail column, the level the GPU cools to).
    first, last = float(starts[0]), float(ends[-1])
    A[:, -1] += sensor.interval_weights(t, -np.inf, first, win)
    lo_t = last + tail_edges_ns
    hi_t = np.append(lo_t[1:], np.inf)
    A[:, A.shape[1] - T:] += sensor.interval_weights(tt, lo_t[None, :], hi_t[None, :], ww)
    return A


def penalty(K: int, P: int, T: int, n_max: int = 0, warm: int = 0) -> np.ndarray:
    """Second differences of the curve, of each warm-up execution's curve and of the cooling tail; none on levels."""
    R = np.zeros((P, P))
    Kw = warm_bins(K)
    blocks = [(0, K), (P - T, T)] + [(K + n_max + j * Kw, Kw) for j in range(warm)]
    for lo, m in blocks:
        if m >= 3:
            D = np.diff(np.eye(m), n=2, axis=0)
            R[lo:lo + m, lo:lo + m] = D.T @ D
    return R

def design_rows(sensor: SensorModel, stamps_ns: npt.ArrayLike, windows_ns: npt.ArrayLike, run_executions: np.ndarray,
                execution_of_interest: int, bins: int, n_max: int, duration_ns: float,
                warmup: Optional[int] = None) -> np.ndarray:
    """The rows :func:`~fingrav_native.method.deconvolve` builds for one run's logs: how each log weighs each unknown.

    Parameters
    ----------
    sensor : SensorModel
    stamps_ns : array_like
        The logs' timestamps on the host timeline (as reported: the delay
        is applied here).
    windows_ns : array_like
        Each log's boxcar window (ignored for filters).
    run_executions : numpy.ndarray
        EXECUTION_DTYPE records of one run.
    execution_of_interest : int
        Its index (negative: from the end).
    bins, n_max : int
        Curve bins; columns for execution levels (more than the largest index).
    duration_ns : float
        The execution of interest's duration (scales the cooling-tail bins).
    warmup : int, optional
        As for :func:`~fingrav_native.method.deconvolve`.

    Returns
    -------
    numpy.ndarray
        ``(logs, bins + n_max + warm-up bins + tail bins)``: curve bins, a
        level per execution index, each warm-up execution's own curve, the
        cooling tail and the idle level (assumptions 1-4 of
        :func:`~fingrav_native.method.deconvolve`).

    Notes
    -----
    The design of the sequential experiment of
    :class:`~fingrav_native.method.PhaseSteerer`: a launch phase is chosen by the
    information these rows would add (Backus and Gilbert 1968 for the
    resolution view; A-optimal design, Kiefer 1959).
    """
    instance_of(sensor, "sensor", SensorModel, "a SensorModel")
    ex = np.sort(structured(run_executions, "run_executions", ("index", "start_ns", "end_ns"),
                            "one run's executions (EXECUTION_DTYPE)"), order="index")
    if not len(ex):
        raise ValueError("run_executions: empty; one run's executions are needed")
    execution_of_interest = integer_in(execution_of_interest, "execution_of_interest", -(2**62), 2**62)
    k_idx = execution_of_interest if execution_of_interest >= 0 else int(ex["index"].max()) + 1 + execution_of_interest
    hit = np.flatnonzero(ex["index"] == k_idx)
    if len(hit) != 1:
        raise ValueError(f"run_executions: no single execution {execution_of_interest} in the run")
    K = integer_in(bins, "bins", 2, 10_000)
    n_max = integer_in(n_max, "n_max", 1, 1 << 20)
    duration_ns = positive_number(duration_ns, "duration_ns", upper=1e15)  # 11 days: past any kernel
    if int(ex["index"].max()) >= n_max:
        raise ValueError(f"n_max={n_max}: the run has execution index {int(ex['index'].max())}")
    t = finite_array(stamps_ns, "stamps_ns")
    w = finite_array(windows_ns, "windows_ns")
    try:
        w = np.broadcast_to(w, t.shape)
    except ValueError:
        raise ValueError(f"windows_ns: one per stamp or one for all, got shape {w.shape} for {t.shape}") from None
    if np.any(w < 0):
        raise ValueError("windows_ns: must be >= 0")
    warm = min(3, k_idx) if warmup is None else integer_in(warmup, "warmup", 0, k_idx)
    return run_rows(sensor, t, np.ascontiguousarray(w), ex, int(hit[0]), np.linspace(0.0, 1.0, K + 1), int(n_max),
                     np.asarray(TAIL_EDGES) * float(duration_ns), warm)


def _checked_design(G: Any, bins: Any, n_max: Any) -> tuple[np.ndarray, int, int]:
    """``G`` a finite square matrix with room for ``bins`` curve columns, ``n_max`` levels and the tail."""
    K = integer_in(bins, "bins", 2, 10_000)
    n = integer_in(n_max, "n_max", 1, 1 << 20)
    g = finite_array(G, "G")
    if g.ndim != 2 or g.shape[0] != g.shape[1] or len(g) < K + n + len(TAIL_EDGES):
        raise ValueError(f"G: must be the square A'A of design_rows' rows ({K} bins, {n} levels and the tail: at "
                         f"least {K + n + len(TAIL_EDGES)} columns), got shape {g.shape}")
    return g, K, n


def curve_precision_inverse(G: np.ndarray, bins: int, n_max: int, lam_rel: float = 1e-2,
                            scale: Optional[float] = None) -> np.ndarray:
    """``(G + lam R + ridge I)^-1``: the posterior covariance (per unit noise) of every unknown.

    Parameters
    ----------
    G : numpy.ndarray
        ``A'A`` of the rows (:func:`design_rows`) of all logs so far.
    bins : int
        Curve bins (the first ``bins`` columns).
    n_max : int
        Level columns (as given to :func:`design_rows`).
    lam_rel : float
        Smoothing, relative to the data's scale as :func:`~fingrav_native.method.deconvolve` sets
        it (its GCV grid spans 1e-8 to 1e4).
    scale : float, optional
        The data's scale the smoothing is relative to; default from ``G``
        itself. Designs compared against each other must share it (a fixed
        prior), else more data would also mean more smoothing.

    Returns
    -------
    numpy.ndarray

    Notes
    -----
    The smoothing prior and a small ridge keep it finite before any log has
    been seen (a Bayesian A-optimal design, Chaloner and Verdinelli,
    Statistical Science 1995).
    """
    G, K, n_max = _checked_design(G, bins, n_max)
    lam_rel = positive_number(lam_rel, "lam_rel", allow_zero=True)
    if scale is not None:
        scale = positive_number(scale, "scale")
    P = len(G)
    T = len(TAIL_EDGES)
    warm = (P - K - int(n_max) - T) // warm_bins(K)
    R = penalty(K, P, T, int(n_max), warm)
    if scale is None:
        scale = curve_scale(G, bins, n_max)
    ridge = 1e-6 * max(scale, 1e-3)
    M = G + lam_rel * scale * R + ridge * np.eye(P)
    with warnings.catch_warnings():
        # An ill-conditioned design (absurd G or lam_rel) is singular for every use here: raised as such, not
        # a scipy warning beside an inverse of noise.
        warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
        try:
            return np.asarray(scipy.linalg.inv(M, check_finite=True))
        except (scipy.linalg.LinAlgWarning, ValueError) as exc:
            raise np.linalg.LinAlgError(f"G: the design is singular or ill-conditioned ({exc})") from None


def curve_scale(G: np.ndarray, bins: int, n_max: int) -> float:
    """The data's scale :func:`curve_precision_inverse` sets the smoothing against: ``tr(G_curve) / tr(R)``."""
    G, K, n_max = _checked_design(G, bins, n_max)
    P, T = len(G), len(TAIL_EDGES)
    R = penalty(K, P, T, int(n_max), (P - K - int(n_max) - T) // warm_bins(K))
    return max(float(np.trace(G[:K, :K])), 1.0) / max(float(np.trace(R)), 1e-300)


def curve_variance(G: np.ndarray, bins: int, n_max: int, lam_rel: float = 1e-2,
                   scale: Optional[float] = None) -> float:
    """A-optimality of a design: the summed posterior variance of the curve's bins (per unit noise).

    Parameters
    ----------
    G, bins, n_max, lam_rel, scale
        As for :func:`curve_precision_inverse`.

    Returns
    -------
    float
        ``trace`` of the curve block of ``(G + lam R + ridge I)^-1``: what a
        new run's logs should lower the most (A-optimal design, Kiefer 1959).
    """
    G, bins, n_max = _checked_design(G, bins, n_max)  # bad arguments are named, not taken for a singular design
    try:
        M_inv = curve_precision_inverse(G, bins, n_max, lam_rel, scale)
    except np.linalg.LinAlgError:
        return math.inf
    return float(np.trace(M_inv[:int(bins), :int(bins)]))

