"""Window-aware attribution: recover an execution's power curve from averaging sensors.

FinGraV places each power log at one time of interest (paper Section IV-A,
step 6) and stitches the logs of many runs (step 8). That is exact for an
instantaneous logger. A log that averages a window (NVIDIA's 25 ms "instant"
field, AMD's 1 ms average, an energy counter's interval) mixes the execution
of interest with everything else its window covers: earlier executions, the
gaps, the idle GPU before the run, the cooling GPU after it. Pretending the
average is an instant smears the profile and biases its mean (a window
ending after the execution averages in the cooling GPU).

Here every log is what it is, a linear functional of the power over its
window (:meth:`~fingrav_native.sensors.model.SensorModel.interval_weights`),
and the curve of the execution of interest is solved for across all golden
runs at once: regularised least squares with nuisance terms for what else
the windows cover, the smoothing chosen from the data by generalised
cross-validation (Golub, Heath and Wahba, Technometrics 1979), confidence
bands from a bootstrap over runs, and the effective resolution read off the
resolution (averaging) kernel (Backus and Gilbert, 1968). This is the
equivalent-time sampling of sampling oscilloscopes applied to windowed
samples: each run places the window's edges at a different phase of the
execution, and the edges are where the shape information is.

Assumptions (stated in every result's ``assumptions``):

1. Executions of the same kernel in a run share one power curve over their
   execution progress, up to a constant level per execution index (warm-up
   executions draw less or more, the shape is the kernel's).
   1b. Warm-up executions (before the fourth, the paper's SSE execution,
   Section IV-A) each draw their own curve: clocks and power limits are
   still settling, and the shape differs, not only the level.
2. Executions of other kernels draw a constant level per execution index.
3. A launch gap between back-to-back executions draws the power of the end
   of the execution before it (gaps are microseconds).
4. After the run the GPU cools along one curve of time since the last
   execution ended, shared by all golden runs, reaching the idle level that
   also precedes every run.
5. The sensor model (window, shape, delay, gain, offset) is right; a
   characterisation (:mod:`fingrav_native.sensors.characterize`) measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt
import scipy.linalg

from fingrav_native._checks import integer_in, positive_number
from fingrav_native._core import CHANNELS
from fingrav_native.clocks._maps import host_relative
from fingrav_native.method._stitched import EnergyEstimate, StitchedChannel, StitchedProfile
from fingrav_native.records._layouts import validate_executions, validate_samples
from fingrav_native.sensors._model import SensorModel

#: Tail bins after a run's last execution, in multiples of the execution of interest's duration:
#: geometric (cooling is exponential-like: fast first, slow later), smoothed like the curve, the
#: last bin (beyond 64 durations) being the idle level that also precedes every run.
_TAIL_EDGES = (0.0, *np.geomspace(1.0 / 32.0, 64.0, 23))


#: GCV grid of the smoothing parameter, relative to the data's scale.
_LAMBDAS = np.logspace(-8, 4, 49)


#: At most this many bootstrap blocks of runs (memory: blocks x parameters^2).
_MAX_BLOCKS = 256


@dataclass(frozen=True)
class DeconvolvedChannel:
    """One channel's recovered curve of the execution of interest.

    Attributes
    ----------
    name : str
        The channel.
    curve : numpy.ndarray
        Power (W) in each bin of execution progress.
    low, high : numpy.ndarray
        Bootstrap percentile band at ``confidence``.
    sd : numpy.ndarray
        Bootstrap standard deviation per bin.
    lam : float
        Smoothing parameter chosen by GCV (relative to the data's scale).
    edf : float
        Effective degrees of freedom of the fit (trace of the hat matrix).
    residual_w : float
        RMS residual of the logs (W): the sensor's noise plus model error.
    energy_j, energy_half_width_j : float
        Energy per execution (J) and the half-width of its bootstrap interval.
    idle_w : float
        The idle level before the runs (a nuisance term).
    levels_w : dict
        Level of each other execution index relative to the curve's mean
        (same kernel) or absolute (other kernels), and the cooling tail.
    """

    name: str
    curve: np.ndarray
    low: np.ndarray
    high: np.ndarray
    sd: np.ndarray
    lam: float
    edf: float
    residual_w: float
    energy_j: float
    energy_half_width_j: float
    idle_w: float
    levels_w: dict[str, float]


@dataclass(frozen=True)
class Deconvolution:
    """The curve of an execution of interest recovered from windowed logs.

    Attributes
    ----------
    bin_edges : numpy.ndarray
        Edges of the curve's bins as fractions of the execution (0 to 1).
    duration_ns : float
        Median duration of the execution of interest in the golden runs.
    channels : tuple of DeconvolvedChannel
    resolution_ns : float
        Median equivalent width of the resolution kernel's rows: the finest
        feature the data resolve (a bin width when they resolve every bin).
    resolution_ns_per_bin : numpy.ndarray
        The same, per bin.
    n_logs : int
        Logs whose response reaches a golden run (used).
    logs_per_bin : numpy.ndarray
        Logs whose response reaches each bin of the curve (in any execution
        of the kernel).
    n_runs : int
        Golden runs that contributed a log.
    run_ids : numpy.ndarray
        Their ids.
    edge_logs : int
        Logs with a window edge (or a filter's end) inside an execution of
        the kernel: where the curve's shape comes from (assumption 1).
    dropped_logs : int
        Logs left out because their response also covers another run.
    confidence : float
    confidence_note : str
        How the band was made.
    assumptions : tuple of str
    warnings : tuple of str
        What the data could not support (resolution coarser than asked, too
        few edges), empty when none.
    sensor : SensorModel
    """

    bin_edges: npt.NDArray[np.float64]
    duration_ns: float
    channels: tuple[DeconvolvedChannel, ...]
    resolution_ns: float
    resolution_ns_per_bin: np.ndarray
    n_logs: int
    logs_per_bin: np.ndarray
    n_runs: int
    run_ids: np.ndarray
    edge_logs: int
    dropped_logs: int
    confidence: float
    confidence_note: str
    assumptions: tuple[str, ...]
    warnings: tuple[str, ...]
    sensor: SensorModel

    def channel(self, name: str) -> DeconvolvedChannel:
        """The channel called ``name``."""
        for c in self.channels:
            if c.name == name:
                return c
        raise KeyError(f"name: no channel {name!r}; deconvolved: {[c.name for c in self.channels]}")

    def __getitem__(self, name: str) -> DeconvolvedChannel:
        return self.channel(name)

    @property
    def bin_centres(self) -> np.ndarray:
        """Bin centres as fractions of the execution."""
        return 0.5 * (self.bin_edges[:-1] + self.bin_edges[1:])


ASSUMPTIONS = (
    "executions of the kernel in a run share one curve over execution progress, up to a level per execution index",
    "executions of other kernels draw a constant level per execution index",
    "launch gaps draw the power of the end of the execution before them",
    "after a run the GPU cools along one curve of time since its last execution, down to the idle level",
    "the sensor model (window, shape, delay, gain, offset) is right",
)


def needs_deconvolution(samples: np.ndarray, sensor: Optional[SensorModel], duration_ns: float,
                        resolution_ns: float) -> bool:
    """Whether logs average over more than the resolution asked for (then attribute by deconvolution).

    Parameters
    ----------
    samples : numpy.ndarray
        Logs; a ``window_ns`` field, where present, is each log's window.
    sensor : SensorModel or None
        The sensor; None means instantaneous unless the logs carry windows.
    duration_ns : float
        The execution of interest's duration.
    resolution_ns : float
        The profile's bin width (Table I's LOI interval).

    Returns
    -------
    bool
        True when a log's window (or a filter's time constant) exceeds half
        the resolution asked for: placing such a log at one instant smears
        features finer than its window.
    """
    positive_number(duration_ns, "duration_ns")
    res = positive_number(resolution_ns, "resolution_ns")
    reach = 0.0
    if samples.dtype.names is not None and "window_ns" in samples.dtype.names and len(samples):
        reach = float(np.max(samples["window_ns"]))
    if sensor is not None:
        if sensor.shape == "first_order":
            reach = max(reach, sensor.tau_ns)
        reach = max(reach, sensor.window_ns)
    return reach > 0.5 * res


def runs_needed(sensor: SensorModel, duration_ns: float, bins: int, edges_per_bin: int = 20) -> int:
    """Runs a campaign needs for ``edges_per_bin`` window edges in each bin of the curve.

    Parameters
    ----------
    sensor : SensorModel
    duration_ns : float
        The execution of interest's duration.
    bins : int
        Bins of the curve.
    edges_per_bin : int
        Window edges wanted per bin.

    Returns
    -------
    int

    Notes
    -----
    With random phase, a run's execution of interest holds a given log's
    window edge with probability ``min(1, duration / period)`` per edge; a
    boxcar window has two edges (start and end), an instantaneous log or a
    filter one. Shape information comes from edges (the module docstring),
    so ``bins * edges_per_bin`` edges take that many over the expected
    edges per run.
    """
    dur = positive_number(duration_ns, "duration_ns")
    k = integer_in(bins, "bins", 1)
    m = integer_in(edges_per_bin, "edges_per_bin", 1)
    edges = 2 if (sensor.kind != "instant" and sensor.shape == "boxcar") else 1
    per_run = edges * min(1.0, dur / sensor.period_ns)
    return int(math.ceil(k * m / per_run))


@dataclass
class _Normal:
    """Normal equations of one block of runs: G = A'A, B = A'Y (one column per channel), yy, n."""

    G: np.ndarray
    B: np.ndarray
    yy: np.ndarray
    n: int
    touch: np.ndarray  # logs whose response reaches each column


def _runs_layout(executions: np.ndarray, runs: np.ndarray, eoi_index: int, kernel_id: Optional[int]
                 ) -> tuple[dict[int, np.ndarray], dict[int, int], int]:
    """Each golden run's executions sorted by index, the index of its execution of interest, max executions."""
    by_run: dict[int, np.ndarray] = {}
    eoi: dict[int, int] = {}
    order = np.argsort(executions["run"], kind="stable")
    ex = executions[order]
    bounds = np.flatnonzero(np.diff(ex["run"])) + 1
    wanted = set(int(r) for r in runs)
    n_max = 0
    for chunk in np.split(ex, bounds):
        r = int(chunk["run"][0])
        if r not in wanted:
            continue
        chunk = chunk[np.argsort(chunk["index"], kind="stable")]
        k = eoi_index if eoi_index >= 0 else int(chunk["index"].max()) + 1 + eoi_index
        hit = np.flatnonzero(chunk["index"] == k)
        if len(hit) != 1 or (kernel_id is not None and int(chunk["kernel_id"][hit[0]]) != kernel_id):
            continue
        by_run[r] = chunk
        eoi[r] = int(hit[0])
        n_max = max(n_max, int(chunk["index"].max()) + 1)
    return by_run, eoi, n_max


def _warm_bins(K: int) -> int:
    """Bins of each warm-up execution's own curve: a fifth of the curve's, 4 to 8 (they are nuisances)."""
    return max(4, min(8, K // 5))


def _run_rows(sensor: SensorModel, t: np.ndarray, win: np.ndarray, ex: np.ndarray, k: int, frac_edges: np.ndarray,
              n_max: int, tail_edges_ns: np.ndarray, warm: int = 0) -> np.ndarray:
    """Design rows of one run's logs.

    Columns: [curve (K), level per execution index (n_max), own curve of each
    warm-up execution (warm x _warm_bins(K)), tail (T)]; the last tail column
    is the idle level.
    """
    K, T = len(frac_edges) - 1, len(tail_edges_ns)
    Kw = _warm_bins(K)
    A = np.zeros((len(t), K + n_max + warm * Kw + T))
    kid = ex["kernel_id"][k]
    starts, ends = ex["start_ns"], ex["end_ns"]
    tt, ww = t[:, None], win[:, None]
    warm_edges = np.linspace(0.0, 1.0, Kw + 1)
    for i in range(len(ex)):
        s, e = float(starts[i]), float(ends[i])
        # Assumption 3: a launch gap belongs to the end of the execution before it.
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


def _penalty(K: int, P: int, T: int, n_max: int = 0, warm: int = 0) -> np.ndarray:
    """Second differences of the curve, of each warm-up execution's curve and of the cooling tail; none on levels."""
    R = np.zeros((P, P))
    Kw = _warm_bins(K)
    blocks = [(0, K), (P - T, T)] + [(K + n_max + j * Kw, Kw) for j in range(warm)]
    for lo, m in blocks:
        if m >= 3:
            D = np.diff(np.eye(m), n=2, axis=0)
            R[lo:lo + m, lo:lo + m] = D.T @ D
    return R


def _solve(G: np.ndarray, B: np.ndarray, R: np.ndarray, lam: float, ridge: float) -> np.ndarray:
    M = G + lam * R + ridge * np.eye(len(G))
    return np.asarray(scipy.linalg.solve(M, B, assume_a="pos"))


def design_rows(sensor: SensorModel, stamps_ns: npt.ArrayLike, windows_ns: npt.ArrayLike, run_executions: np.ndarray,
                execution_of_interest: int, bins: int, n_max: int, duration_ns: float,
                warmup: Optional[int] = None) -> np.ndarray:
    """The rows :func:`deconvolve` builds for one run's logs: how each log weighs each unknown.

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
        As for :func:`deconvolve`.

    Returns
    -------
    numpy.ndarray
        ``(logs, bins + n_max + warm-up bins + tail bins)``: curve bins, a
        level per execution index, each warm-up execution's own curve, the
        cooling tail and the idle level (assumptions 1-4 of the module
        docstring).

    Notes
    -----
    The design of the sequential experiment of
    :mod:`fingrav_native.method.phase`: a launch phase is chosen by the
    information these rows would add (Backus and Gilbert 1968 for the
    resolution view; A-optimal design, Kiefer 1959).
    """
    ex = np.sort(np.asarray(run_executions), order="index")
    k_idx = execution_of_interest if execution_of_interest >= 0 else int(ex["index"].max()) + 1 + execution_of_interest
    hit = np.flatnonzero(ex["index"] == k_idx)
    if len(hit) != 1:
        raise ValueError(f"run_executions: no single execution {execution_of_interest} in the run")
    K = integer_in(bins, "bins", 2, 10_000)
    if int(ex["index"].max()) >= n_max:
        raise ValueError(f"n_max={n_max}: the run has execution index {int(ex['index'].max())}")
    t = np.asarray(stamps_ns, dtype=np.float64)
    w = np.broadcast_to(np.asarray(windows_ns, dtype=np.float64), t.shape)
    warm = min(3, k_idx) if warmup is None else integer_in(warmup, "warmup", 0, k_idx)
    return _run_rows(sensor, t, np.ascontiguousarray(w), ex, int(hit[0]), np.linspace(0.0, 1.0, K + 1), int(n_max),
                     np.asarray(_TAIL_EDGES) * float(duration_ns), warm)


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
        Smoothing, relative to the data's scale as :func:`deconvolve` sets
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
    P = len(G)
    K = int(bins)
    T = len(_TAIL_EDGES)
    warm = (P - K - int(n_max) - T) // _warm_bins(K)
    R = _penalty(K, P, T, int(n_max), warm)
    if scale is None:
        scale = curve_scale(G, bins, n_max)
    ridge = 1e-6 * max(scale, 1e-3)
    M = G + lam_rel * scale * R + ridge * np.eye(P)
    return np.asarray(scipy.linalg.inv(M, check_finite=False))


def curve_scale(G: np.ndarray, bins: int, n_max: int) -> float:
    """The data's scale :func:`curve_precision_inverse` sets the smoothing against: ``tr(G_curve) / tr(R)``."""
    P, K, T = len(G), int(bins), len(_TAIL_EDGES)
    R = _penalty(K, P, T, int(n_max), (P - K - int(n_max) - T) // _warm_bins(K))
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
    try:
        M_inv = curve_precision_inverse(G, bins, n_max, lam_rel, scale)
    except (np.linalg.LinAlgError, ValueError):
        return math.inf
    return float(np.trace(M_inv[:int(bins), :int(bins)]))


@dataclass(frozen=True)
class _Fit:
    """One model's fit: its active columns, matrices, the GCV-chosen solution per channel and its GCV score."""

    active: np.ndarray
    Ga: np.ndarray
    Ra: np.ndarray
    B: np.ndarray
    yy: np.ndarray
    scale: float
    ridge: float
    x_hat: np.ndarray
    lam_used: np.ndarray
    edf_used: np.ndarray
    gcv: float


def _fit(blocks: Sequence[_Normal], K: int, n_max: int, T: int, warm: int, n: int, lam: Optional[float]) -> _Fit:
    """Solve one model's normal equations, the smoothing per channel by GCV (Golub, Heath and Wahba 1979).

    Raises ValueError when the logs are fewer than the model's unknowns beyond the curve.
    """
    P = K + n_max + warm * _warm_bins(K) + T
    G = sum((b.G for b in blocks), np.zeros((P, P)))
    B = sum((b.B for b in blocks), np.zeros((P, blocks[0].B.shape[1])))
    yy = sum((b.yy for b in blocks), np.zeros(blocks[0].B.shape[1]))
    active = np.diag(G) > 1e-12 * max(float(np.max(np.diag(G))), 1e-300)
    active[:K] = True  # the curve is always solved for (smoothness carries uncovered bins)
    if n <= int(active.sum()) - K + 2:
        raise ValueError(f"{n} logs for {int(active.sum())} parameters")
    Ga, Ra = G[np.ix_(active, active)], _penalty(K, P, T, n_max, warm)[np.ix_(active, active)]
    scale = float(np.trace(Ga[:K, :K])) / max(float(np.trace(Ra)), 1e-300)
    ridge = 1e-10 * float(np.trace(Ga)) / len(Ga)
    chans = B.shape[1]
    x_hat = np.zeros((int(active.sum()), chans))
    lam_used = np.zeros(chans)
    edf_used = np.zeros(chans)
    gcvs = np.zeros(chans)
    for c in range(chans):
        b_c = B[active, c]
        best: tuple[float, float, np.ndarray, float] = (math.inf, 0.0, np.zeros(0), 0.0)
        for rel in ([float(lam)] if lam is not None else list(_LAMBDAS)):
            M = Ga + rel * scale * Ra + ridge * np.eye(len(Ga))
            cf = scipy.linalg.cho_factor(M)
            x = scipy.linalg.cho_solve(cf, b_c)
            edf = float(np.trace(scipy.linalg.cho_solve(cf, Ga)))
            rss = max(float(yy[c] - 2 * x @ b_c + x @ Ga @ x), 0.0)
            gcv = n * rss / max(n - edf, 1e-9) ** 2
            if gcv < best[0]:
                best = (gcv, rel, x, edf)
        gcvs[c], lam_used[c], x_hat[:, c], edf_used[c] = best
    return _Fit(active, Ga, Ra, B, yy, scale, ridge, x_hat, lam_used, edf_used, float(np.mean(gcvs)))


def deconvolve(
    samples: np.ndarray,
    executions: np.ndarray,
    logger_map: Any,
    sensor: SensorModel,
    *,
    execution_of_interest: int,
    runs: npt.ArrayLike,
    kernel_id: Optional[int] = None,
    bins: int = 40,
    channels: Sequence[str] = CHANNELS,
    lam: Optional[float] = None,
    bootstrap: int = 200,
    confidence: float = 0.95,
    resolution_ns: Optional[float] = None,
    seed: int = 0,
    warmup: Optional[int] = None,
) -> Deconvolution:
    """Recover the power curve of an execution of interest from logs that average windows.

    Parameters
    ----------
    samples : numpy.ndarray
        Power logs: ``source_ts`` in the logger's clock, one field per
        channel, and optionally ``window_ns`` (each log's own boxcar window;
        energy-counter logs from
        :func:`~fingrav_native.sensors.counter.counter_to_logs` carry it).
    executions : numpy.ndarray
        EXECUTION_DTYPE records on the host timeline.
    logger_map : clock map
        ``to_host`` maps ``source_ts`` onto host time.
    sensor : SensorModel
        What each log measures (window, shape, delay, gain, offset).
    execution_of_interest : int
        Execution index within each run (3 for SSE; -1 for the last).
    runs : array_like of int
        The golden runs (Section IV-B step 5); only their logs are used.
    kernel_id : int, optional
        The kernel of interest (when runs interleave kernels).
    bins : int
        Bins of the recovered curve over execution progress.
    channels : sequence of str
        Channels to recover (those with finite values).
    lam : float, optional
        Smoothing parameter (relative to the data's scale); default chosen
        by generalised cross-validation.
    bootstrap : int
        Bootstrap resamples of the runs for the band (0: none, band NaN).
    confidence : float
        Band level.
    resolution_ns : float, optional
        The resolution asked for; a warning is recorded when the data
        resolve only coarser features.
    seed : int
        Seed of the bootstrap.
    warmup : int, optional
        Executions before this index are warm-up: each draws its own
        (coarser) curve instead of the shared one (assumption 1b). Default:
        0 or ``min(3, execution_of_interest)`` (the paper's SSE definition,
        Section IV-A: execution time settles after the first three
        executions; on the simulator their power curves also differ in
        shape, by 20-140 W RMS for cb-8k-gemm, against a few W later),
        whichever generalised cross-validation prefers; the choice is in
        the result's ``assumptions``.

    Returns
    -------
    Deconvolution

    Raises
    ------
    ValueError
        Bad arguments (named); no log reaches a golden run; too few logs
        for the parameters.

    Notes
    -----
    1. Map every log onto host time; its value is ``offset + gain * sum_j
       w_j x_j`` over the intervals its response covers (curve bins of each
       execution of the kernel, levels of other executions, cooling tail,
       idle), the weights from the sensor model.
    2. Accumulate the normal equations ``A'A``, ``A'y`` run by run (memory
       bounded by the parameters, not the logs), in at most 256 blocks of
       runs for the bootstrap.
    3. Minimise ``|y - A x|^2 + lam |D c|^2`` (``D``: second differences of
       the curve ``c``), ``lam`` by GCV: ``n RSS / (n - tr H)^2``.
    4. Band: resample the blocks of runs with replacement, re-solve at the
       chosen ``lam``, take percentiles; energy likewise.
    5. Resolution: rows of ``(A'A + lam D'D)^-1 A'A`` over the curve are
       the averaging kernels; their equivalent width ``(sum r)^2 / sum r^2``
       bins is the resolution (the whole execution where the data set less
       than half of a bin's estimate).
    """
    executions = validate_executions(executions)
    samples = validate_samples(samples)
    origin = int(executions["start_ns"].min())
    executions = executions.copy()
    executions["start_ns"] -= origin
    executions["end_ns"] -= origin
    if not isinstance(sensor, SensorModel):
        raise ValueError(f"sensor: must be a SensorModel, got {type(sensor).__name__}")
    K = integer_in(bins, "bins", 2, 10_000)
    n_boot = integer_in(bootstrap, "bootstrap", 0, 100_000)
    conf = positive_number(confidence, "confidence")
    if not conf < 1:
        raise ValueError(f"confidence={confidence!r}: must be in (0, 1)")
    if lam is not None:
        positive_number(lam, "lam", allow_zero=True)
    names = samples.dtype.names or ()
    if "source_ts" not in names:
        raise ValueError("samples: needs a source_ts field (the logger's timestamps)")
    chans = [c for c in channels if c in names and np.isfinite(samples[c]).any()]
    if not chans:
        raise ValueError(f"channels: none of {list(channels)} has a finite value in samples")
    run_ids = np.unique(np.asarray(runs, dtype=np.int64))
    by_run, eoi, n_max = _runs_layout(executions, run_ids, int(execution_of_interest), kernel_id)
    if not by_run:
        raise ValueError(f"runs: no golden run holds execution {execution_of_interest}"
                         + (f" of kernel {kernel_id}" if kernel_id is not None else ""))
    dur = float(np.median([by_run[r]["end_ns"][eoi[r]] - by_run[r]["start_ns"][eoi[r]] for r in by_run]))
    frac_edges = np.linspace(0.0, 1.0, K + 1)
    tail = np.asarray(_TAIL_EDGES) * dur
    eoi_idx = min(int(by_run[r]["index"][eoi[r]]) for r in by_run)
    # Shared warm-up (assumption 1) or own curves (1b): given, or both fitted
    # and the one generalised cross-validation prefers kept.
    warms = ([integer_in(warmup, "warmup", 0, max(0, eoi_idx))] if warmup is not None
             else sorted({0, min(3, eoi_idx)}))
    Kw = _warm_bins(K)
    n_par = {w: K + n_max + w * Kw + len(tail) for w in warms}

    # Logs on host time, with their responses' reach.
    # Relative to an exact integer origin: epoch-scale host times (1.8e18 ns) resolve only 256 ns as floats.
    t_all = host_relative(logger_map, samples["source_ts"], origin, "logger_map")
    if t_all.shape != (len(samples),):
        raise ValueError(f"logger_map: to_host() returned shape {t_all.shape}, expected ({len(samples)},)")
    win_all = (samples["window_ns"].astype(np.float64) if "window_ns" in names
               else np.full(len(samples), sensor.window_ns))
    if sensor.kind != "instant" and sensor.shape == "boxcar":
        win_all = np.where(win_all > 0, win_all, sensor.window_ns)
    y_all = np.stack([samples[c].astype(np.float64) for c in chans], axis=1)
    y_all = (y_all - sensor.offset_w) / sensor.gain
    reach_lo = t_all - sensor.delay_ns - sensor.memory_ns(win_all)
    reach_hi = t_all - sensor.delay_ns
    ok = np.isfinite(t_all) & np.all(np.isfinite(y_all), axis=1)

    # Which run each log belongs to: its response overlaps that run's span (or its cooling tail).
    # Each run's span in one pass (a mask per run would be quadratic in runs).
    by_id = np.argsort(executions["run"], kind="stable")
    run_sorted = executions["run"][by_id]
    run_heads = np.flatnonzero(np.concatenate([[True], run_sorted[1:] != run_sorted[:-1]]))
    all_runs = run_sorted[run_heads]
    span_lo = np.minimum.reduceat(executions["start_ns"][by_id], run_heads)
    span_hi = np.maximum.reduceat(executions["end_ns"][by_id], run_heads)
    order = np.argsort(span_lo)
    all_runs, span_lo, span_hi = all_runs[order], span_lo[order], span_hi[order]
    horizon = float(tail[-1])
    # A log belongs to the last run that started before its response ended.
    pos = np.searchsorted(span_lo, reach_hi, side="right") - 1
    owner = np.where(pos >= 0, all_runs[np.clip(pos, 0, None)], -1)
    prev_end = np.where(pos >= 1, span_hi[np.clip(pos - 1, 0, None)], -np.inf)
    in_tail = reach_lo <= np.where(pos >= 0, span_hi[np.clip(pos, 0, None)] + horizon, -np.inf)
    # A response that also reaches the previous run's executions mixes two runs: dropped, counted.
    mixed = reach_lo < prev_end
    golden = np.isin(owner, np.fromiter(by_run, dtype=np.int64))
    use = ok & golden & in_tail & ~mixed
    dropped = int(np.sum(ok & golden & in_tail & mixed))

    used_runs = sorted(set(int(r) for r in owner[use]))
    n_blocks = min(_MAX_BLOCKS, max(1, len(used_runs)))
    block_of = {r: i % n_blocks for i, r in enumerate(used_runs)}
    blocks_of = {wm: [_Normal(np.zeros((P, P)), np.zeros((P, len(chans))), np.zeros(len(chans)), 0,
                              np.zeros(P, np.int64)) for _ in range(n_blocks)] for wm, P in n_par.items()}
    edge_logs = 0
    idx_use = np.flatnonzero(use)
    run_of = owner[idx_use]
    sort = np.argsort(run_of, kind="stable")
    idx_use, run_of = idx_use[sort], run_of[sort]
    cuts = np.flatnonzero(np.diff(run_of)) + 1
    for li in np.split(idx_use, cuts) if len(idx_use) else []:
        r = int(owner[li[0]])
        ex, k = by_run[r], eoi[r]
        for wm, model_blocks in blocks_of.items():
            A = _run_rows(sensor, t_all[li], win_all[li], ex, k, frac_edges, n_max, tail, wm)
            b = model_blocks[block_of[r]]
            b.G += A.T @ A
            b.B += A.T @ y_all[li]
            b.yy += np.sum(y_all[li] ** 2, axis=0)
            b.n += len(li)
            b.touch += np.count_nonzero(A > 0, axis=0)
        # Edges inside any execution of the kernel carry the shape (assumption 1).
        same = ex["kernel_id"] == ex["kernel_id"][k]
        s, e = ex["start_ns"][same][None, :], ex["end_ns"][same][None, :]
        end = (t_all[li] - sensor.delay_ns)[:, None]
        begin = end - (win_all[li][:, None] if sensor.shape == "boxcar" else np.inf)
        edge_logs += int(np.sum(np.any(((end > s) & (end < e)) | ((begin > s) & (begin < e)), axis=1)))
    n = sum(b.n for b in next(iter(blocks_of.values())))
    if n == 0:
        raise ValueError("samples: no log's response reaches a golden run's execution of interest")
    fits: dict[int, _Fit] = {}
    for wm in warms:
        try:
            fits[wm] = _fit(blocks_of[wm], K, n_max, len(tail), wm, n, lam)
        except ValueError:
            if wm == warms[0]:
                raise ValueError(
                    f"samples: {n} logs cannot determine the curve's {K} bins and what else the windows cover; "
                    f"with this sensor about {runs_needed(sensor, dur, K)} runs would give {K} bins 20 window "
                    "edges each") from None
    warm = min(fits, key=lambda wm: fits[wm].gcv)
    fit, blocks, P = fits[warm], blocks_of[warm], n_par[warm]
    active, Ga, Ra, scale, ridge = fit.active, fit.Ga, fit.Ra, fit.scale, fit.ridge
    B, yy, x_hat, lam_used, edf_used = fit.B, fit.yy, fit.x_hat, fit.lam_used, fit.edf_used
    results: list[DeconvolvedChannel] = []

    # Resolution kernel of the curve (the same design for every channel; use the first channel's lam).
    M0 = Ga + lam_used[0] * scale * Ra + ridge * np.eye(len(Ga))
    R_full = scipy.linalg.solve(M0, Ga, assume_a="pos")
    Rk = R_full[:K, :K]
    row_sum = Rk.sum(axis=1)
    # What of the other executions' levels, the tail and the idle leaks into each bin's estimate.
    leakage = np.abs(R_full[:K, K:]).sum(axis=1)
    eq_width = row_sum ** 2 / np.maximum(np.sum(Rk ** 2, axis=1), 1e-300)
    # A bin whose estimate the data set less than half of (the rest is the smoothness
    # prior's interpolation from elsewhere), or that mixes in the nuisance levels several
    # times over (windows that never separate the execution of interest from its neighbours), is not
    # resolved at all: the whole execution. (Leakage near 1 is normal where windows straddle
    # the execution of interest and its neighbour; tens mean the levels are not separated.)
    res_bins = np.where((row_sum >= 0.5) & (leakage <= 5.0), np.clip(eq_width, 1.0, float(K)), float(K))
    res_ns_bin = res_bins * dur / K
    res_ns = float(np.median(res_ns_bin))

    # Bootstrap over blocks of runs.
    rng = np.random.default_rng(seed)
    boot = np.full((n_boot, K, len(chans)), np.nan)
    boot_e = np.full((n_boot, len(chans)), np.nan)
    Gs = np.stack([b.G[np.ix_(active, active)] for b in blocks])
    Bs = np.stack([b.B[active] for b in blocks])
    for i in range(n_boot):
        weights = rng.multinomial(n_blocks, np.full(n_blocks, 1.0 / n_blocks)).astype(np.float64)
        Gb = np.tensordot(weights, Gs, axes=1)
        Bb = np.tensordot(weights, Bs, axes=1)
        for c in range(len(chans)):
            try:
                xb = _solve(Gb, Bb[:, c], Ra, lam_used[c] * scale, ridge)
            except (np.linalg.LinAlgError, ValueError):
                continue
            boot[i, :, c] = xb[:K]
            boot_e[i, c] = float(np.mean(xb[:K])) * dur * 1e-9
    alpha = 0.5 * (1.0 - conf)
    tail_names = [f"tail_{a:.3g}-{b:.3g}x" for a, b in zip(_TAIL_EDGES, (*_TAIL_EDGES[1:], math.inf))]
    col_names = ([f"curve_{j}" for j in range(K)] + [f"execution_{i}" for i in range(n_max)]
                 + [f"warmup_{i}_bin_{j}" for i in range(warm) for j in range(Kw)] + tail_names)
    active_names = [nm for nm, a in zip(col_names, active) if a]
    for c, name in enumerate(chans):
        curve = x_hat[:K, c]
        with np.errstate(all="ignore"):
            bc = boot[:, :, c]
            good = np.all(np.isfinite(bc), axis=1)
            low = np.quantile(bc[good], alpha, axis=0) if good.sum() >= 2 else np.full(K, np.nan)
            high = np.quantile(bc[good], 1 - alpha, axis=0) if good.sum() >= 2 else np.full(K, np.nan)
            sd = np.std(bc[good], axis=0, ddof=1) if good.sum() >= 2 else np.full(K, np.nan)
            be = boot_e[good, c]
            e_half = (0.5 * float(np.quantile(be, 1 - alpha) - np.quantile(be, alpha)) if len(be) >= 2
                      else math.nan)
        rss = max(float(yy[c] - 2 * x_hat[:, c] @ B[active, c] + x_hat[:, c] @ Ga @ x_hat[:, c]), 0.0)
        levels = {nm: float(v) for nm, v in zip(active_names[K:], x_hat[K:, c])}
        results.append(DeconvolvedChannel(
            name=name, curve=curve, low=low, high=high, sd=sd, lam=float(lam_used[c]), edf=float(edf_used[c]),
            residual_w=math.sqrt(rss / n), energy_j=float(np.mean(curve)) * dur * 1e-9,
            energy_half_width_j=e_half, idle_w=levels.get(tail_names[-1], math.nan), levels_w=levels))

    warnings: list[str] = []
    wanted_edges = 20 * K
    if resolution_ns is not None and res_ns > 1.5 * positive_number(resolution_ns, "resolution_ns"):
        asked = float(resolution_ns)
        if edge_logs < wanted_edges:
            per_run = edge_logs / max(len(used_runs), 1)
            more = (f"about {math.ceil(wanted_edges / per_run)} runs" if per_run > 0
                    else f"about {runs_needed(sensor, dur, K)} runs (from the sensor's period)")
            why = f"{more} would give {K} bins 20 window edges each (this campaign: {edge_logs} edges)"
        else:
            # The edges are there; the sensor's noise against what each edge carries limits the
            # resolution, which sharpens about as 1/sqrt(runs).
            why = (f"the {edge_logs} window edges are enough, the noise is not: roughly "
                   f"{math.ceil(len(used_runs) * (res_ns / asked) ** 2)} runs for {asked / 1e3:.1f} us")
        warnings.append(f"the logs resolve features of about {res_ns / 1e3:.1f} us over {len(used_runs)} runs, "
                        f"coarser than the {asked / 1e3:.1f} us asked for; {why}")
    # A boxcar spanning a whole number of execution periods integrates every phase of the
    # kernel equally (a zero of its sinc response): such windows carry the level, not the
    # shape, whatever the number of runs.
    starts_by_run = [np.diff(by_run[r]["start_ns"][by_run[r]["kernel_id"] == by_run[r]["kernel_id"][eoi[r]]])
                     for r in used_runs if r in by_run]
    steps = np.concatenate(starts_by_run) if starts_by_run else np.zeros(0)
    if sensor.shape == "boxcar" and len(steps) and np.median(win_all[use]) > 0:
        cycles = float(np.median(win_all[use])) / float(np.median(steps))
        if cycles >= 0.95 and abs(cycles - round(cycles)) < 0.05:
            warnings.append(
                f"the window spans {cycles:.2f} execution periods ({float(np.median(steps)) / 1e3:.1f} us each): a "
                f"window of a whole number of executions averages every phase of the kernel alike and hides its "
                f"shape; change the executions' spacing (a gap, another execution count) or the sensor's window")
    noisy = [c for c in results if np.isfinite(c.energy_half_width_j) and c.energy_j > 0
             and c.energy_half_width_j > 0.05 * c.energy_j]
    if noisy:
        first = noisy[0]
        warnings.append(f"the {first.name} power's level is uncertain by "
                        f"+-{100 * first.energy_half_width_j / first.energy_j:.0f} % "
                        f"(bootstrap over runs): the windows do not separate the execution of interest from what else "
                        f"they cover; about {runs_needed(sensor, dur, K)} runs would give 20 window edges per bin")
    for ch in results:
        half = 0.5 * (ch.high - ch.low)
        level = float(np.mean(np.abs(ch.curve)))
        if np.isfinite(half).any() and level > 0 and float(np.nanmedian(half)) > 0.05 * level:
            warnings.append(f"the {ch.name} curve is noisy at its bins: the {100 * conf:.0f} % band is "
                            f"+-{100 * float(np.nanmedian(half)) / level:.0f} % of its level (median over bins); read "
                            f"features wider than a few bins, or run more runs")
            break
    if edge_logs < 2 * K:
        warnings.append(f"only {edge_logs} logs have a window edge inside an execution of the kernel for {K} bins: "
                        f"the curve's shape is mostly the smoothness prior; about "
                        f"{runs_needed(sensor, dur, K)} runs would give 20 edges per bin")
    return Deconvolution(
        bin_edges=frac_edges, duration_ns=dur, channels=tuple(results), resolution_ns=res_ns,
        resolution_ns_per_bin=res_ns_bin, n_logs=int(n),
        logs_per_bin=sum((b.touch for b in blocks), np.zeros(P, np.int64))[:K], n_runs=len(used_runs),
        run_ids=np.asarray(used_runs, dtype=np.int64), edge_logs=int(edge_logs),
        dropped_logs=dropped, confidence=conf,
        confidence_note=f"bootstrap over {n_blocks} blocks of runs, {n_boot} resamples, percentile band",
        assumptions=ASSUMPTIONS + ((f"the first {warm} executions (warm-up, before the SSE execution) each draw their "
                                    "own curve",) if warm else ()),
        warnings=tuple(warnings), sensor=sensor)


def as_stitched(dec: Deconvolution, *, x: str = "time", uncert_ns_median: float = math.nan,
                uncert_ns_max: float = math.nan) -> tuple[StitchedProfile, dict[str, EnergyEstimate]]:
    """A deconvolution as the stitched profile and energies every consumer of a profile reads.

    Parameters
    ----------
    dec : Deconvolution
    x : {"time", "fraction"}
        Bin positions in ns from the execution's start, or as fractions.
    uncert_ns_median, uncert_ns_max : float
        The profile's TOI placement budget (clock map and markers).

    Returns
    -------
    (StitchedProfile, dict of EnergyEstimate)
        Each channel's bins hold the recovered curve (``mean``), the
        bootstrap band (``ci_low``, ``ci_high``) and standard deviation
        (``sd``), and ``count`` the logs whose response reaches the bin;
        ``fit_kind`` is ``"deconvolution"`` with the curve as the fit.
        Energies carry the bootstrap half-width.
    """
    if x not in ("time", "fraction"):
        raise ValueError(f"x={x!r}: must be 'time' or 'fraction'")
    scale = dec.duration_ns if x == "time" else 1.0
    edges = np.asarray(dec.bin_edges, dtype=np.float64) * scale
    centres = 0.5 * (edges[:-1] + edges[1:])
    chans = []
    energy: dict[str, EnergyEstimate] = {}
    for c in dec.channels:
        chans.append(StitchedChannel(
            name=c.name, x=x, bin_edges=edges, bin_centres=centres, count=np.asarray(dec.logs_per_bin, np.int64),
            mean=c.curve, sd=c.sd, ci_low=c.low, ci_high=c.high, confidence=dec.confidence,
            fit_kind="deconvolution", fit_x=centres, fit_y=c.curve, n_lois=dec.n_logs))
        energy[c.name] = EnergyEstimate(
            energy_j=c.energy_j, uncertainty_j=c.energy_half_width_j, duration_ns=dec.duration_ns, channel=c.name,
            confidence=dec.confidence, interpolated_share=0.0, pooled_share=0.0,
            note=f"deconvolution of windowed logs; {dec.confidence_note}")
    prof = StitchedProfile(
        x=x, x_unit="ns" if x == "time" else "fraction", bin_width=float(edges[1] - edges[0]),
        channels=tuple(chans), n_lois=dec.n_logs, runs=dec.run_ids, duration_ns=dec.duration_ns,
        smoother="deconvolution", span=math.nan, weighted=False, uncert_ns_median=uncert_ns_median,
        uncert_ns_max=uncert_ns_max)
    return prof, energy
