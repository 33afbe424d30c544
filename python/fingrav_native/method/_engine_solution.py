"""What the attribution engine returns: the chosen model's unknowns and maps with their intervals, and what can
be read from them (the Cramer-Rao floor of each map, the resolution of a curve).

The engine itself (:mod:`fingrav_native.method._engine`) chooses the model and smoothing by cross-validation
and resamples blocks of logs for the intervals; this module holds the result it hands to the joint fit
(:mod:`fingrav_native.method._joint`) and to the deconvolution (:mod:`fingrav_native.method._deconvolve`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
from scipy import stats

from fingrav_native.method._engine_design import Design, Rows, full_map

__all__ = ["Solution", "floor_sd", "resolution"]


@dataclass(frozen=True)
class Solution:
    """What the engine found: the model and smoothing chosen, the unknowns, the reported maps with intervals.

    Attributes
    ----------
    design : int
        The chosen design (index into the candidates given).
    model : str
        The chosen variant, in words.
    lam : float
        The chosen smoothing (relative to the data's scale).
    cv_scores : dict of str to float
        Each variant's best cross-validated squared error (GCV with fewer
        than three blocks).
    x : numpy.ndarray
        ``(columns, channels)``: the unknowns (drift columns last).
    values : dict of str to numpy.ndarray
        Each map's value, ``(rows, channels)``, at the drift's mean level.
    draws : dict of str to numpy.ndarray
        Bootstrap draws of each map, ``(resamples, rows, channels)``; NaN
        where a resample failed.
    rows : Rows
        The chosen design's rows (which logs were used).
    G, M : numpy.ndarray
        Its normal matrix and penalised normal matrix at the choice.
    residual : numpy.ndarray
        ``(used logs, channels)``.
    info_share : numpy.ndarray
        Per energy row: the share of its precision that the logs supply (1:
        all; below :data:`IDENTIFIABLE_SHARE`: not determined by them).
    confounded : list of list of int
        Groups of energy rows the logs cannot tell apart.
    n_blocks, n_folds, n_boot : int
    blocks : numpy.ndarray
        Per used log, its block.
    lower : numpy.ndarray
        The columns' lower bounds.
    smoothing_span : dict of str to (numpy.ndarray, numpy.ndarray)
        Per map, its lowest (<= 0) and highest (>= 0) offset from ``values``
        over the smoothings within one standard error of the chosen one in
        cross-validation (empty with a fixed smoothing).
    memory_note : str
        Empty, or why the record's blocks were merged into fewer (the normal
        matrices within :data:`~fingrav_native.method._engine_design.MEMORY_BYTES`).
    """

    design: int
    model: str
    lam: float
    cv_scores: dict[str, float]
    x: np.ndarray
    values: dict[str, np.ndarray]
    draws: dict[str, np.ndarray]
    rows: Rows
    G: np.ndarray
    M: np.ndarray
    residual: np.ndarray
    info_share: np.ndarray
    confounded: list[list[int]]
    n_blocks: int
    n_folds: int
    n_boot: int
    blocks: np.ndarray
    lower: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    smoothing_span: dict[str, tuple[np.ndarray, np.ndarray]] = field(repr=False, default_factory=dict)
    memory_note: str = ""

    def interval(self, name: str, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Band ``(low, high)`` and standard deviation of a map's rows, per channel (NaN: no bootstrap).

        The bootstrap's percentile band joined with its standard normal band,
        widened by how far the value moves over the smoothings
        cross-validation cannot tell apart (``smoothing_span``); the standard
        deviation is the bootstrap's.
        """
        d = self.draws[name]
        alpha = 0.5 * (1.0 - confidence)
        shape = self.values[name].shape
        good = np.all(np.isfinite(d), axis=(1, 2)) if len(d) else np.zeros(0, dtype=bool)
        if good.sum() < 2:
            nan = np.full(shape, np.nan)
            return nan, nan.copy(), nan.copy()
        d = d[good]
        sd = np.std(d, axis=0, ddof=1)
        # The percentiles' tails rest on a few draws (2.5 % of 100 is 2.5 draws) and come out narrow on
        # average; the standard normal interval on the bootstrap's deviation (Efron and Tibshirani 1993,
        # ch. 13) does not. The band holds both: lopsided where the draws are, never narrower than the
        # normal one, and not below zero where no draw is.
        # With few blocks the resamples see too little of the spread: Student's t on n - 1 degrees of
        # freedom and the n / (n - 1) variance correction (a 1.5 s loop logged through a 10 ms filter
        # holds 7 blocks; 1.96 sd missed its kernels).
        n = max(self.n_blocks, 3)
        z = float(stats.t.ppf(1.0 - alpha, df=n - 1)) * math.sqrt(n / (n - 1))
        q_lo, q_hi = np.quantile(d, alpha, axis=0), np.quantile(d, 1.0 - alpha, axis=0)
        n_lo = self.values[name] - z * sd
        n_lo = np.where(q_lo >= 0.0, np.maximum(n_lo, 0.0), n_lo)
        lo, hi = self.smoothing_span.get(name, (np.zeros(shape), np.zeros(shape)))
        low = np.minimum(q_lo, n_lo) + lo
        # The smoothing span's lowest offset can take a band below zero that no draw (all solved under the
        # columns' bounds) reaches; a band cut to where the quantity can lie loses no coverage.
        low = np.where(q_lo >= 0.0, np.maximum(low, 0.0), low)
        return low, np.maximum(q_hi, self.values[name] + z * sd) + hi, sd


def floor_sd(design: Design, sol: Solution, key: str) -> np.ndarray:
    """The standard error of each row of map ``key`` for an unbiased, unsmoothed fit at these unknowns.

    ``sigma^2 h G^+ h'`` per row ``h`` (``G`` the logs' normal matrix, ``sigma`` the RMS residual per
    channel): the Cramer-Rao bound for white noise (Kay, *Fundamentals of Statistical Signal Processing*,
    1993, Section 3.4, the linear model). The smoothing can go below it only by a bias it trades for
    variance; where the band sits near it, more logs (runs) are the only remedy at these bins. A row
    the logs do not determine is ``inf``.
    """
    H = full_map(design, sol.rows, key)
    Gi = scipy.linalg.pinvh(sol.G)
    var = np.einsum("ij,jk,ik->i", H, Gi, H)
    # A row the logs leave undetermined (its direction outside the range of G) has no finite floor.
    null = np.abs(H @ (np.eye(len(Gi)) - Gi @ sol.G)).max(axis=1) > 1e-6 * np.maximum(np.abs(H).max(axis=1), 1e-300)
    sigma2 = np.mean(sol.residual ** 2, axis=0)
    out = np.sqrt(np.maximum(var, 0.0))[:, None] * np.sqrt(sigma2)[None, :]
    out[null] = np.inf
    return np.asarray(out, dtype=np.float64)



def resolution(sol: Solution, curve_cols: np.ndarray, dur_ns: float) -> tuple[np.ndarray, float]:
    """Resolution (ns) per curve bin and its median, from the resolution kernel (Backus and Gilbert 1968).

    Rows of ``M^-1 G`` over the curve's columns are the averaging kernels;
    their equivalent width ``(sum r)^2 / sum r^2`` is the resolution in
    bins. A bin the data set less than half of (the rest is the prior), or
    whose estimate mixes in the other columns several times over, is not
    resolved at all: the whole execution.
    """
    K = len(curve_cols)
    R_full = scipy.linalg.solve(sol.M, sol.G, assume_a="pos")
    Rk = R_full[np.ix_(curve_cols, curve_cols)]
    row_sum = Rk.sum(axis=1)
    others = np.setdiff1d(np.arange(len(sol.G)), curve_cols)
    leakage = np.abs(R_full[np.ix_(curve_cols, others)]).sum(axis=1)
    eq_width = row_sum ** 2 / np.maximum(np.sum(Rk ** 2, axis=1), 1e-300)
    res_bins = np.where((row_sum >= 0.5) & (leakage <= 5.0), np.clip(eq_width, 1.0, float(K)), float(K))
    res_ns = res_bins * dur_ns / K
    return res_ns, float(np.median(res_ns))
