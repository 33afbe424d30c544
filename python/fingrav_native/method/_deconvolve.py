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
window (:meth:`~fingrav_native.sensors.SensorModel.interval_weights`),
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
   characterisation (:func:`fingrav_native.characterize`) measures it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import numpy.typing as npt
import scipy.linalg

from fingrav_native._checks import integer_in, positive_number
from fingrav_native._core import CHANNELS
from fingrav_native.clocks._maps import ClockMapLike, host_relative
from fingrav_native.method._deconvolved import Deconvolution, DeconvolvedChannel
from fingrav_native.method._forward_model import TAIL_EDGES, penalty, run_rows, warm_bins
from fingrav_native.records._layouts import validate_executions, validate_samples
from fingrav_native.sensors._model import SensorModel

_log = logging.getLogger(__name__)

#: GCV grid of the smoothing parameter, relative to the data's scale.
_LAMBDAS = np.logspace(-8, 4, 49)


#: At most this many bootstrap blocks of runs (memory: blocks x parameters^2).
_MAX_BLOCKS = 256


#: What every deconvolution assumes (the module docstring explains each); stated in each result.
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


def _solve(G: np.ndarray, B: np.ndarray, R: np.ndarray, lam: float, ridge: float) -> np.ndarray:
    """The penalised least-squares solution ``(G + lam R + ridge I)^-1 B``."""
    M = G + lam * R + ridge * np.eye(len(G))
    return np.asarray(scipy.linalg.solve(M, B, assume_a="pos"))


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
    P = K + n_max + warm * warm_bins(K) + T
    G = sum((b.G for b in blocks), np.zeros((P, P)))
    B = sum((b.B for b in blocks), np.zeros((P, blocks[0].B.shape[1])))
    yy = sum((b.yy for b in blocks), np.zeros(blocks[0].B.shape[1]))
    active = np.diag(G) > 1e-12 * max(float(np.max(np.diag(G))), 1e-300)
    active[:K] = True  # the curve is always solved for (smoothness carries uncovered bins)
    if n <= int(active.sum()) - K + 2:
        raise ValueError(f"{n} logs for {int(active.sum())} parameters")
    Ga, Ra = G[np.ix_(active, active)], penalty(K, P, T, n_max, warm)[np.ix_(active, active)]
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


def _check_args(samples: np.ndarray, sensor: SensorModel, bins: int, bootstrap: int, confidence: float,
                lam: Optional[float], channels: Sequence[str]) -> tuple[int, int, float, list[str]]:
    """Curve bins, bootstrap resamples, the confidence level and the channels to recover (those with a value)."""
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
    return K, n_boot, conf, chans


@dataclass(frozen=True)
class _Layout:
    """The golden runs' executions and the model's shape: curve bins, level columns, tail, warm-up choices."""

    by_run: dict[int, np.ndarray]  # each golden run's executions, sorted by index
    eoi: dict[int, int]  # the row of its execution of interest
    n_max: int  # level columns: more than the largest execution index
    K: int
    dur: float  # median duration of the execution of interest
    frac_edges: np.ndarray
    tail: np.ndarray  # cooling-tail bin edges after a run (ns)
    warms: list[int]  # warm-up models to fit: executions before this index draw their own curve
    n_par: dict[int, int]  # unknowns of each warm-up model


def _layout(executions: np.ndarray, runs: npt.ArrayLike, execution_of_interest: int, kernel_id: Optional[int],
            K: int, warmup: Optional[int]) -> _Layout:
    """The golden runs holding the execution of interest, and the unknowns of each model to fit."""
    run_ids = np.unique(np.asarray(runs, dtype=np.int64))
    by_run, eoi, n_max = _runs_layout(executions, run_ids, int(execution_of_interest), kernel_id)
    if not by_run:
        raise ValueError(f"runs: no golden run holds execution {execution_of_interest}"
                         + (f" of kernel {kernel_id}" if kernel_id is not None else ""))
    dur = float(np.median([by_run[r]["end_ns"][eoi[r]] - by_run[r]["start_ns"][eoi[r]] for r in by_run]))
    frac_edges = np.linspace(0.0, 1.0, K + 1)
    tail = np.asarray(TAIL_EDGES) * dur
    eoi_idx = min(int(by_run[r]["index"][eoi[r]]) for r in by_run)
    # Shared warm-up (assumption 1) or own curves (1b): given, or both fitted
    # and the one generalised cross-validation prefers kept.
    warms = ([integer_in(warmup, "warmup", 0, max(0, eoi_idx))] if warmup is not None
             else sorted({0, min(3, eoi_idx)}))
    Kw = warm_bins(K)
    n_par = {w: K + n_max + w * Kw + len(tail) for w in warms}
    return _Layout(by_run, eoi, n_max, K, dur, frac_edges, tail, warms, n_par)


@dataclass(frozen=True)
class _Logs:
    """Every log on host time (relative to the origin), its window, calibrated values and its response's reach."""

    t: np.ndarray
    win: np.ndarray
    y: np.ndarray  # (logs, channels), the sensor's offset and gain undone
    reach_lo: np.ndarray
    reach_hi: np.ndarray
    ok: np.ndarray  # finite time and values


def _logs_on_host(samples: np.ndarray, logger_map: ClockMapLike, origin: int, sensor: SensorModel,
                  chans: Sequence[str]) -> _Logs:
    """Map every log onto host time, with its window, its calibrated values and what its response reaches."""
    t_all = host_relative(logger_map, samples["source_ts"], origin, "logger_map")
    if t_all.shape != (len(samples),):
        raise ValueError(f"logger_map: to_host() returned shape {t_all.shape}, expected ({len(samples)},)")
    names = samples.dtype.names or ()
    win_all = (samples["window_ns"].astype(np.float64) if "window_ns" in names
               else np.full(len(samples), sensor.window_ns))
    if sensor.kind != "instant" and sensor.shape == "boxcar":
        win_all = np.where(win_all > 0, win_all, sensor.window_ns)
    y_all = np.stack([samples[c].astype(np.float64) for c in chans], axis=1)
    y_all = (y_all - sensor.offset_w) / sensor.gain
    reach_lo = t_all - sensor.delay_ns - sensor.memory_ns(win_all)
    reach_hi = t_all - sensor.delay_ns
    ok = np.isfinite(t_all) & np.all(np.isfinite(y_all), axis=1)
    return _Logs(t_all, win_all, y_all, reach_lo, reach_hi, ok)


def _owners(executions: np.ndarray, logs: _Logs, horizon: float,
            by_run: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
    """Each log's run, the logs to use (a golden run's, not mixing two runs) and how many were dropped as mixed.

    A log belongs to the run whose span (or cooling tail) its response
    overlaps: the last run that started before its response ended.
    """
    # Each run's span in one pass (a mask per run would be quadratic in runs).
    by_id = np.argsort(executions["run"], kind="stable")
    run_sorted = executions["run"][by_id]
    run_heads = np.flatnonzero(np.concatenate([[True], run_sorted[1:] != run_sorted[:-1]]))
    all_runs = run_sorted[run_heads]
    span_lo = np.minimum.reduceat(executions["start_ns"][by_id], run_heads)
    span_hi = np.maximum.reduceat(executions["end_ns"][by_id], run_heads)
    order = np.argsort(span_lo)
    all_runs, span_lo, span_hi = all_runs[order], span_lo[order], span_hi[order]
    pos = np.searchsorted(span_lo, logs.reach_hi, side="right") - 1
    owner = np.where(pos >= 0, all_runs[np.clip(pos, 0, None)], -1)
    prev_end = np.where(pos >= 1, span_hi[np.clip(pos - 1, 0, None)], -np.inf)
    in_tail = logs.reach_lo <= np.where(pos >= 0, span_hi[np.clip(pos, 0, None)] + horizon, -np.inf)
    # A response that also reaches the previous run's executions mixes two runs: dropped, counted.
    mixed = logs.reach_lo < prev_end
    golden = np.isin(owner, np.fromiter(by_run, dtype=np.int64))
    use = logs.ok & golden & in_tail & ~mixed
    dropped = int(np.sum(logs.ok & golden & in_tail & mixed))
    return owner, use, dropped


@dataclass(frozen=True)
class _Accumulated:
    """Normal equations per warm-up model and block of runs, with the runs and logs behind them."""

    blocks_of: dict[int, list[_Normal]]
    used_runs: list[int]
    n_blocks: int
    edge_logs: int  # logs with a window edge inside an execution of the kernel
    n: int  # logs used


def _edge_logs(sensor: SensorModel, t: np.ndarray, win: np.ndarray, ex: np.ndarray, k: int) -> int:
    """Logs of one run with a window edge inside an execution of the kernel: they carry the shape (assumption 1)."""
    same = ex["kernel_id"] == ex["kernel_id"][k]
    s, e = ex["start_ns"][same][None, :], ex["end_ns"][same][None, :]
    end = (t - sensor.delay_ns)[:, None]
    begin = end - (win[:, None] if sensor.shape == "boxcar" else np.inf)
    return int(np.sum(np.any(((end > s) & (end < e)) | ((begin > s) & (begin < e)), axis=1)))


def _accumulate(sensor: SensorModel, lay: _Layout, logs: _Logs, owner: np.ndarray, use: np.ndarray,
                n_chans: int) -> _Accumulated:
    """Accumulate ``A'A`` and ``A'y`` run by run (memory bounded by the unknowns, not the logs), in blocks of runs.

    The blocks (at most ``_MAX_BLOCKS``) are what the bootstrap resamples.
    """
    used_runs = sorted(set(int(r) for r in owner[use]))
    n_blocks = min(_MAX_BLOCKS, max(1, len(used_runs)))
    block_of = {r: i % n_blocks for i, r in enumerate(used_runs)}
    blocks_of = {wm: [_Normal(np.zeros((P, P)), np.zeros((P, n_chans)), np.zeros(n_chans), 0,
                              np.zeros(P, np.int64)) for _ in range(n_blocks)] for wm, P in lay.n_par.items()}
    edge_logs = 0
    idx_use = np.flatnonzero(use)
    run_of = owner[idx_use]
    sort = np.argsort(run_of, kind="stable")
    idx_use, run_of = idx_use[sort], run_of[sort]
    cuts = np.flatnonzero(np.diff(run_of)) + 1
    for li in np.split(idx_use, cuts) if len(idx_use) else []:
        r = int(owner[li[0]])
        ex, k = lay.by_run[r], lay.eoi[r]
        for wm, model_blocks in blocks_of.items():
            A = run_rows(sensor, logs.t[li], logs.win[li], ex, k, lay.frac_edges, lay.n_max, lay.tail, wm)
            b = model_blocks[block_of[r]]
            b.G += A.T @ A
            b.B += A.T @ logs.y[li]
            b.yy += np.sum(logs.y[li] ** 2, axis=0)
            b.n += len(li)
            b.touch += np.count_nonzero(A > 0, axis=0)
        edge_logs += _edge_logs(sensor, logs.t[li], logs.win[li], ex, k)
    n = sum(b.n for b in next(iter(blocks_of.values())))
    return _Accumulated(blocks_of, used_runs, n_blocks, edge_logs, n)


def _fit_models(acc: _Accumulated, lay: _Layout, lam: Optional[float], sensor: SensorModel) -> tuple[int, _Fit]:
    """Fit every warm-up model and keep the one GCV prefers: its warm-up count and its fit."""
    K, n = lay.K, acc.n
    fits: dict[int, _Fit] = {}
    for wm in lay.warms:
        try:
            fits[wm] = _fit(acc.blocks_of[wm], K, lay.n_max, len(lay.tail), wm, n, lam)
        except ValueError as exc:
            if wm == lay.warms[0]:
                raise ValueError(
                    f"samples: {n} logs cannot determine the curve's {K} bins and what else the windows cover; "
                    f"with this sensor about {runs_needed(sensor, lay.dur, K)} runs would give {K} bins 20 window "
                    "edges each") from None
            _log.debug("deconvolve: the model with %d warm-up curves cannot be fitted (%s); left out", wm, exc)
    warm = min(fits, key=lambda wm: fits[wm].gcv)
    return warm, fits[warm]


def _resolution(fit: _Fit, K: int, dur: float) -> tuple[np.ndarray, float]:
    """Resolution (ns) per bin and its median, from the resolution kernel's rows (Backus and Gilbert 1968).

    The design is the same for every channel; the first channel's smoothing is used.
    """
    M0 = fit.Ga + fit.lam_used[0] * fit.scale * fit.Ra + fit.ridge * np.eye(len(fit.Ga))
    R_full = scipy.linalg.solve(M0, fit.Ga, assume_a="pos")
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
    return res_ns_bin, float(np.median(res_ns_bin))


def _bootstrap(fit: _Fit, blocks: Sequence[_Normal], n_boot: int, seed: int, K: int,
               dur: float) -> tuple[np.ndarray, np.ndarray]:
    """Curves and energies re-solved on blocks of runs resampled with replacement, at the chosen smoothing.

    ``(resamples, K, channels)`` and ``(resamples, channels)``; NaN where a
    resample's system could not be solved.
    """
    n_blocks, chans = len(blocks), fit.B.shape[1]
    rng = np.random.default_rng(seed)
    boot = np.full((n_boot, K, chans), np.nan)
    boot_e = np.full((n_boot, chans), np.nan)
    Gs = np.stack([b.G[np.ix_(fit.active, fit.active)] for b in blocks])
    Bs = np.stack([b.B[fit.active] for b in blocks])
    failed = 0
    for i in range(n_boot):
        weights = rng.multinomial(n_blocks, np.full(n_blocks, 1.0 / n_blocks)).astype(np.float64)
        Gb = np.tensordot(weights, Gs, axes=1)
        Bb = np.tensordot(weights, Bs, axes=1)
        for c in range(chans):
            try:
                xb = _solve(Gb, Bb[:, c], fit.Ra, fit.lam_used[c] * fit.scale, fit.ridge)
            except (np.linalg.LinAlgError, ValueError):
                failed += 1
                continue
            boot[i, :, c] = xb[:K]
            boot_e[i, c] = float(np.mean(xb[:K])) * dur * 1e-9
    if failed:
        _log.debug("deconvolve: %d of %d bootstrap solves failed and are left out of the band", failed, n_boot * chans)
    return boot, boot_e


def _column_names(K: int, n_max: int, warm: int) -> list[str]:
    """Names of the model's columns: curve bins, execution levels, warm-up curves, tail bins (the last: idle)."""
    tail_names = [f"tail_{a:.3g}-{b:.3g}x" for a, b in zip(TAIL_EDGES, (*TAIL_EDGES[1:], math.inf))]
    return ([f"curve_{j}" for j in range(K)] + [f"execution_{i}" for i in range(n_max)]
            + [f"warmup_{i}_bin_{j}" for i in range(warm) for j in range(warm_bins(K))] + tail_names)


def _band(bc: np.ndarray, be_all: np.ndarray, alpha: float,
          K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """One channel's percentile band, standard deviation and energy half-width from its bootstrap resamples."""
    with np.errstate(all="ignore"):
        good = np.all(np.isfinite(bc), axis=1)
        low = np.quantile(bc[good], alpha, axis=0) if good.sum() >= 2 else np.full(K, np.nan)
        high = np.quantile(bc[good], 1 - alpha, axis=0) if good.sum() >= 2 else np.full(K, np.nan)
        sd = np.std(bc[good], axis=0, ddof=1) if good.sum() >= 2 else np.full(K, np.nan)
        be = be_all[good]
        e_half = (0.5 * float(np.quantile(be, 1 - alpha) - np.quantile(be, alpha)) if len(be) >= 2
                  else math.nan)
    return low, high, sd, e_half


def _channel_results(fit: _Fit, chans: Sequence[str], boot: np.ndarray, boot_e: np.ndarray, conf: float,
                     lay: _Layout, warm: int, n: int) -> list[DeconvolvedChannel]:
    """Each channel's curve with its band, residual, energy and the nuisance levels, by name."""
    K, x_hat = lay.K, fit.x_hat
    alpha = 0.5 * (1.0 - conf)
    col_names = _column_names(K, lay.n_max, warm)
    active_names = [nm for nm, a in zip(col_names, fit.active) if a]
    results: list[DeconvolvedChannel] = []
    for c, name in enumerate(chans):
        curve = x_hat[:K, c]
        low, high, sd, e_half = _band(boot[:, :, c], boot_e[:, c], alpha, K)
        rss = max(float(fit.yy[c] - 2 * x_hat[:, c] @ fit.B[fit.active, c] + x_hat[:, c] @ fit.Ga @ x_hat[:, c]), 0.0)
        levels = {nm: float(v) for nm, v in zip(active_names[K:], x_hat[K:, c])}
        results.append(DeconvolvedChannel(
            name=name, curve=curve, low=low, high=high, sd=sd, lam=float(fit.lam_used[c]),
            edf=float(fit.edf_used[c]), residual_w=math.sqrt(rss / n), energy_j=float(np.mean(curve)) * lay.dur * 1e-9,
            energy_half_width_j=e_half, idle_w=levels.get(col_names[-1], math.nan), levels_w=levels))
    return results


def _resolution_warning(res_ns: float, asked: float, edge_logs: int, runs: int, K: int, sensor: SensorModel,
                        dur: float) -> str:
    """Why the logs resolve only features coarser than asked: too few window edges, or too much noise."""
    wanted_edges = 20 * K
    if edge_logs < wanted_edges:
        per_run = edge_logs / max(runs, 1)
        more = (f"about {math.ceil(wanted_edges / per_run)} runs" if per_run > 0
                else f"about {runs_needed(sensor, dur, K)} runs (from the sensor's period)")
        why = f"{more} would give {K} bins 20 window edges each (this campaign: {edge_logs} edges)"
    else:
        # The edges are there; the sensor's noise against what each edge carries limits the
        # resolution, which sharpens about as 1/sqrt(runs).
        why = (f"the {edge_logs} window edges are enough, the noise is not: roughly "
               f"{math.ceil(runs * (res_ns / asked) ** 2)} runs for {asked / 1e3:.1f} us")
    return (f"the logs resolve features of about {res_ns / 1e3:.1f} us over {runs} runs, "
            f"coarser than the {asked / 1e3:.1f} us asked for; {why}")


def _whole_period_warning(sensor: SensorModel, lay: _Layout, used_runs: Sequence[int],
                          win_used: np.ndarray) -> Optional[str]:
    """A boxcar of a whole number of execution periods: it averages every phase alike and hides the shape.

    Such a window sits on a zero of its sinc response: it carries the level,
    not the shape, whatever the number of runs.
    """
    by_run, eoi = lay.by_run, lay.eoi
    starts_by_run = [np.diff(by_run[r]["start_ns"][by_run[r]["kernel_id"] == by_run[r]["kernel_id"][eoi[r]]])
                     for r in used_runs if r in by_run]
    steps = np.concatenate(starts_by_run) if starts_by_run else np.zeros(0)
    if sensor.shape == "boxcar" and len(steps) and np.median(win_used) > 0:
        cycles = float(np.median(win_used)) / float(np.median(steps))
        if cycles >= 0.95 and abs(cycles - round(cycles)) < 0.05:
            return (f"the window spans {cycles:.2f} execution periods ({float(np.median(steps)) / 1e3:.1f} us each): a "
                    f"window of a whole number of executions averages every phase of the kernel alike and hides its "
                    f"shape; change the executions' spacing (a gap, another execution count) or the sensor's window")
    return None


def _noise_warnings(results: Sequence[DeconvolvedChannel], sensor: SensorModel, dur: float, K: int,
                    conf: float) -> list[str]:
    """Channels whose level or curve the bootstrap finds uncertain by more than 5 % (the first of each kind)."""
    out: list[str] = []
    noisy = [c for c in results if np.isfinite(c.energy_half_width_j) and c.energy_j > 0
             and c.energy_half_width_j > 0.05 * c.energy_j]
    if noisy:
        first = noisy[0]
        out.append(f"the {first.name} power's level is uncertain by "
                   f"+-{100 * first.energy_half_width_j / first.energy_j:.0f} % "
                   f"(bootstrap over runs): the windows do not separate the execution of interest from what else "
                   f"they cover; about {runs_needed(sensor, dur, K)} runs would give 20 window edges per bin")
    for ch in results:
        half = 0.5 * (ch.high - ch.low)
        level = float(np.mean(np.abs(ch.curve)))
        if np.isfinite(half).any() and level > 0 and float(np.nanmedian(half)) > 0.05 * level:
            out.append(f"the {ch.name} curve is noisy at its bins: the {100 * conf:.0f} % band is "
                       f"+-{100 * float(np.nanmedian(half)) / level:.0f} % of its level (median over bins); read "
                       f"features wider than a few bins, or run more runs")
            break
    return out


def _warnings(results: Sequence[DeconvolvedChannel], sensor: SensorModel, lay: _Layout, acc: _Accumulated,
              win_used: np.ndarray, res_ns: float, resolution_ns: Optional[float], conf: float) -> list[str]:
    """What the data could not support: resolution coarser than asked, a window hiding the shape, noise, few edges."""
    K, dur, edge_logs = lay.K, lay.dur, acc.edge_logs
    out: list[str] = []
    if resolution_ns is not None and res_ns > 1.5 * positive_number(resolution_ns, "resolution_ns"):
        out.append(_resolution_warning(res_ns, float(resolution_ns), edge_logs, len(acc.used_runs), K, sensor, dur))
    period = _whole_period_warning(sensor, lay, acc.used_runs, win_used)
    if period is not None:
        out.append(period)
    out += _noise_warnings(results, sensor, dur, K, conf)
    if edge_logs < 2 * K:
        out.append(f"only {edge_logs} logs have a window edge inside an execution of the kernel for {K} bins: "
                   f"the curve's shape is mostly the smoothness prior; about "
                   f"{runs_needed(sensor, dur, K)} runs would give 20 edges per bin")
    return out


def deconvolve(
    samples: np.ndarray,
    executions: np.ndarray,
    logger_map: ClockMapLike,
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
        :func:`~fingrav_native.sensors.counter_to_logs` carry it).
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
    # Relative to an exact integer origin: epoch-scale host times (1.8e18 ns) resolve only 256 ns as floats.
    origin = int(executions["start_ns"].min())
    executions = executions.copy()
    executions["start_ns"] -= origin
    executions["end_ns"] -= origin
    K, n_boot, conf, chans = _check_args(samples, sensor, bins, bootstrap, confidence, lam, channels)
    lay = _layout(executions, runs, execution_of_interest, kernel_id, K, warmup)
    logs = _logs_on_host(samples, logger_map, origin, sensor, chans)
    owner, use, dropped = _owners(executions, logs, float(lay.tail[-1]), lay.by_run)
    acc = _accumulate(sensor, lay, logs, owner, use, len(chans))
    if acc.n == 0:
        raise ValueError("samples: no log's response reaches a golden run's execution of interest")
    warm, fit = _fit_models(acc, lay, lam, sensor)
    blocks = acc.blocks_of[warm]
    res_ns_bin, res_ns = _resolution(fit, K, lay.dur)
    boot, boot_e = _bootstrap(fit, blocks, n_boot, seed, K, lay.dur)
    results = _channel_results(fit, chans, boot, boot_e, conf, lay, warm, acc.n)
    warnings = _warnings(results, sensor, lay, acc, logs.win[use], res_ns, resolution_ns, conf)
    return Deconvolution(
        bin_edges=lay.frac_edges, duration_ns=lay.dur, channels=tuple(results), resolution_ns=res_ns,
        resolution_ns_per_bin=res_ns_bin, n_logs=int(acc.n),
        logs_per_bin=sum((b.touch for b in blocks), np.zeros(lay.n_par[warm], np.int64))[:K],
        n_runs=len(acc.used_runs), run_ids=np.asarray(acc.used_runs, dtype=np.int64), edge_logs=int(acc.edge_logs),
        dropped_logs=dropped, confidence=conf,
        confidence_note=f"bootstrap over {acc.n_blocks} blocks of runs, {n_boot} resamples, percentile band",
        assumptions=ASSUMPTIONS + ((f"the first {warm} executions (warm-up, before the SSE execution) each draw their "
                                    "own curve",) if warm else ()),
        warnings=tuple(warnings), sensor=sensor)
