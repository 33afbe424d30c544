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
runs at once by the attribution engine (:mod:`fingrav_native.method._engine`,
the same the in-situ path uses): the campaign's timeline cut into tiles
(:mod:`fingrav_native.method._campaign_model`), power bounded below, the
smoothing and the model (gaps at their own level or held at the end of the
execution before them; warm-up curves) chosen by cross-validation over
blocks of runs, intervals from a bootstrap over runs that repeats that
choice, the curve's bins limited by the window edges that fall inside the
executions, and the effective resolution read off the resolution kernel
(Backus and Gilbert, 1968). This is the equivalent-time sampling of sampling
oscilloscopes applied to windowed samples: each run places the window's
edges at a different phase of the execution, and the edges are where the
shape information is.

Assumptions (stated in every result's ``assumptions``; the model check
tests the gap level, the timing, the window and drift on the residuals):

1. Executions of the same kernel in a run share one power curve over their
   execution progress, up to a constant level per execution index (warm-up
   executions draw less or more, the shape is the kernel's).
   1b. Warm-up executions (before the fourth, the paper's SSE execution,
   Section IV-A) each draw their own curve where the data prefer it.
   1c. Executions before the execution of interest whose durations vary
   over runs draw their index's energy where the data prefer it: a cold
   execution runs longer at lower power for nearly the same energy.
2. Executions of other kernels draw a constant level per execution index.
3. A launch gap between executions draws a level of its own, or (where the
   data prefer it) the power of the end of the execution before it.
4. After the run the GPU cools along one curve of time since the last
   execution ended, shared by all golden runs, reaching the idle level that
   also precedes every run.
5. The sensor model (window, shape, delay, gain, offset) is right; a
   characterisation (:func:`fingrav_native.characterize`) measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import (
    fraction,
    instance_of,
    integer_in,
    positive_number,
    real_number,
    structured,
    whole_numbers,
)
from fingrav_native._core import CHANNELS
from fingrav_native._threads import numeric_threads
from fingrav_native.clocks._maps import ClockMapLike, host_relative
from fingrav_native.method._campaign_model import CampaignRuns, campaign_designs, campaign_runs
from fingrav_native.method._deconvolved import Deconvolution, DeconvolvedChannel
from fingrav_native.method._engine import IDENTIFIABLE_SHARE, attribute
from fingrav_native.method._engine_check import ModelCheck, check_model
from fingrav_native.method._engine_design import Design, response_span
from fingrav_native.method._engine_solution import Solution, floor_sd, resolution
from fingrav_native.records._layouts import validate_executions, validate_samples
from fingrav_native.sensors._model import SensorModel

#: Window edges wanted per curve bin: the curve gets at most its edges over this many bins.
EDGES_PER_BIN = 10
#: Curve bins per resolution width (the resolution kernel's equivalent width): its Nyquist step.
RESOLUTION_BINS = 2.0

#: What every deconvolution assumes (the module docstring explains each); stated in each result.
ASSUMPTIONS = (
    "executions of the kernel in a run share one curve over execution progress, up to a level per execution index",
    "executions of other kernels draw a constant level per execution index",
    "after a run the GPU cools along one curve of time since its last execution, down to the idle level",
    "the sensor model (window, shape, delay, gain, offset) is right",
)

#: Largest smoothing parameter accepted (1000x the cross-validation grid's largest).
MAX_LAM = 1e6


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
    structured(samples, "samples", ("source_ts",), "power logs (SAMPLE_DTYPE)")
    instance_of(sensor, "sensor", (SensorModel, type(None)), "a SensorModel or None")
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


def declared_windows(samples: np.ndarray) -> Optional[SensorModel]:
    """The sensor the logs declare: boxcar windows as their ``window_ns`` field gives them (None: no window).

    Parameters
    ----------
    samples : numpy.ndarray
        Logs; a ``window_ns`` field, where present and positive, is each log's
        boxcar window (an energy counter's interval, a sampler's average).

    Returns
    -------
    SensorModel or None
        A ``"declared windows"`` boxcar model (its window the widest declared,
        its period the logs' median spacing); per-log windows override the
        model's wherever the model is used, so the campaign and in-situ paths
        treat such logs alike.
    """
    names = structured(samples, "samples", ("source_ts",), "power logs (SAMPLE_DTYPE)").dtype.names or ()
    if "window_ns" not in names or not len(samples) or not np.any(samples["window_ns"] > 0):
        return None
    widest = float(np.max(samples["window_ns"]))
    stamps = np.unique(samples["source_ts"])
    period = float(np.median(np.diff(stamps))) if len(stamps) > 2 else widest
    return SensorModel("declared windows", "window", period_ns=max(period, 1.0), window_ns=widest, source="assumed",
                       notes="boxcar windows as each log declares (window_ns)")


def logs_with_windows(samples: np.ndarray, sensor: Optional[SensorModel]) -> np.ndarray:
    """The logs with every log's boxcar window in their ``window_ns`` field: one description for every step.

    A window declared per log (``window_ns``) and one declared by the sensor
    model (``SensorModel(kind="window", window_ns=...)``) are the same
    window; every step (placing the logs, Section IV-B step 6; the
    deconvolution; the alignment) reads the field, so the model's window is
    written into it where a log declares none, and the same logs give the
    same answer however their window was declared.

    Parameters
    ----------
    samples : numpy.ndarray
        Power logs (SAMPLE_DTYPE or compatible), with or without a
        ``window_ns`` field.
    sensor : SensorModel or None
        The sensor. Only a boxcar window sensor fills windows; an instant, a
        first-order filter or no model leaves the logs as they are.

    Returns
    -------
    numpy.ndarray
        ``samples`` itself where nothing is to fill; else a copy whose
        ``window_ns`` (float ns, added where missing) is each log's own
        window where positive, the sensor's elsewhere.
    """
    structured(samples, "samples", ("source_ts",), "power logs (SAMPLE_DTYPE)")
    instance_of(sensor, "sensor", (SensorModel, type(None)), "a SensorModel or None")
    if sensor is None or sensor.kind == "instant" or sensor.shape != "boxcar" or not sensor.window_ns > 0:
        return samples
    names = samples.dtype.names or ()
    if "window_ns" in names:
        own = np.asarray(samples["window_ns"], dtype=np.float64)
        if np.all(own > 0):
            return samples
    else:
        own = np.zeros(len(samples))
    filled = np.where(own > 0, own, float(sensor.window_ns))
    # The fields in their order, the window as float ns (a counter's uint32 field holds no model's window).
    fields = [(n, np.dtype("<f8") if n == "window_ns" else samples.dtype[n]) for n in names]
    out = np.empty(len(samples), dtype=fields if "window_ns" in names else [*fields, ("window_ns", "<f8")])
    for n in names:
        out[n] = samples[n]
    out["window_ns"] = filled
    return out


def runs_needed(sensor: SensorModel, duration_ns: float, bins: int, edges_per_bin: int = 20) -> int:
    """Runs a campaign needs for ``edges_per_bin`` window edges in each bin of the curve.

    Parameters
    ----------
    sensor : SensorModel
    duration_ns : float
        The execution of interest's duration: 1 ns to a day.
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
    instance_of(sensor, "sensor", SensorModel, "a SensorModel")
    # Below a nanosecond no kernel runs (and the runs needed overflow any integer).
    dur = positive_number(duration_ns, "duration_ns", upper=86_400e9)
    if not dur >= 1.0:
        raise ValueError(f"duration_ns={duration_ns!r}: must be at least 1 ns")
    k = integer_in(bins, "bins", 1, 1 << 20)
    m = integer_in(edges_per_bin, "edges_per_bin", 1, 1 << 20)
    edges = 2 if (sensor.kind != "instant" and sensor.shape == "boxcar") else 1
    per_run = edges * min(1.0, dur / sensor.period_ns)
    return int(math.ceil(k * m / per_run))


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


def _check_args(samples: np.ndarray, sensor: SensorModel, bins: int, bootstrap: int, confidence: float,
                lam: Optional[float], channels: Sequence[str]) -> tuple[int, int, float, list[str]]:
    """Curve bins, bootstrap resamples, the confidence level and the channels to recover (those with a value)."""
    if not isinstance(sensor, SensorModel):
        raise ValueError(f"sensor: must be a SensorModel, got {type(sensor).__name__}")
    K = integer_in(bins, "bins", 2, 10_000)
    n_boot = integer_in(bootstrap, "bootstrap", 0, 100_000)
    conf = fraction(confidence, "confidence")
    if lam is not None:
        # The cross-validation grid ends at 1e3; far beyond it the curve is the penalty's straight line and
        # the solve loses all precision (an ill-conditioned matrix), so larger values are refused.
        positive_number(lam, "lam", allow_zero=True, upper=MAX_LAM)
    names = samples.dtype.names or ()
    if "source_ts" not in names:
        raise ValueError("samples: needs a source_ts field (the logger's timestamps)")
    chans = [c for c in channels if c in names and np.isfinite(samples[c]).any()]
    if not chans:
        raise ValueError(f"channels: none of {list(channels)} has a finite value in samples")
    return K, n_boot, conf, chans


@dataclass(frozen=True)
class _Layout:
    """The golden runs' executions and the model's shape: level columns, duration, warm-up choices."""

    by_run: dict[int, np.ndarray]  # each golden run's executions, sorted by index
    eoi: dict[int, int]  # the row of its execution of interest
    n_max: int  # level columns: more than the largest execution index
    dur: float  # median duration of the execution of interest
    warms: list[int]  # warm-up models to fit: executions before this index draw their own curve
    kernel: int  # the kernel of interest


def _layout(executions: np.ndarray, runs: npt.ArrayLike, execution_of_interest: int, kernel_id: Optional[int],
            warmup: Optional[int]) -> _Layout:
    """The golden runs holding the execution of interest, and the warm-up models to fit."""
    # Whole run ids only: 0.5 and 1.5 were truncated to runs 0 and 1.
    run_ids = np.unique(whole_numbers(runs, "runs", 0, 2**63 - 1).ravel())
    # -1 is the last execution; other negative indices are no execution the docstring names.
    eoi_index = integer_in(execution_of_interest, "execution_of_interest", -1, 2**62)
    if kernel_id is not None:
        kernel_id = integer_in(kernel_id, "kernel_id", -(2**31), 2**31 - 1)
    if warmup is not None:
        integer_in(warmup, "warmup", 0)
    by_run, eoi, n_max = _runs_layout(executions, run_ids, eoi_index, kernel_id)
    if not by_run:
        raise ValueError(f"runs: no golden run holds execution {execution_of_interest}"
                         + (f" of kernel {kernel_id}" if kernel_id is not None else ""))
    dur = float(np.median([by_run[r]["end_ns"][eoi[r]] - by_run[r]["start_ns"][eoi[r]] for r in by_run]))
    eoi_idx = min(int(by_run[r]["index"][eoi[r]]) for r in by_run)
    # Shared warm-up (assumption 1) or own curves (1b): given, or both fitted
    # and the one cross-validation prefers kept.
    warms = ([integer_in(warmup, "warmup", 0, max(0, eoi_idx))] if warmup is not None
             else sorted({0, min(3, eoi_idx)}))
    first = next(iter(by_run))
    kernel = int(by_run[first]["kernel_id"][eoi[first]])
    return _Layout(by_run, eoi, n_max, dur, warms, kernel)


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


def _edge_logs(cr: CampaignRuns, lo: np.ndarray, hi: np.ndarray, two: bool) -> int:
    """Logs with a window edge inside a golden execution of the kernel: they carry the shape (assumption 1)."""
    mine = cr.golden & cr.same
    s, e = cr.s[mine], cr.e[mine]
    n = 0
    for x in ((lo, hi) if two else (hi,)):
        j = np.searchsorted(s, x, side="right") - 1
        n += int(np.sum((j >= 0) & (x < e[np.clip(j, 0, None)])))
    return n


def _absolute_levels(lay: _Layout) -> np.ndarray:
    """Per execution index, whether its level is another kernel's power (absolute) rather than an offset."""
    out = np.zeros(lay.n_max, dtype=bool)
    for r, ex in lay.by_run.items():
        other = ex["kernel_id"] != lay.kernel
        out[ex["index"][other]] = True
    return out


def _blocks_by_run(cr: CampaignRuns, hi: np.ndarray) -> np.ndarray:
    """Per log, the run its response ends in or after (the bootstrap's and cross-validation's unit)."""
    first = np.flatnonzero(np.concatenate([[True], cr.run[1:] != cr.run[:-1]]))
    j = np.searchsorted(cr.s[first], hi, side="right") - 1
    return np.asarray(cr.run[first][np.clip(j, 0, None)], dtype=np.int64)


def _channel_results(sol: Solution, design: Design, chans: Sequence[str], conf: float, K: int,
                     dur: float) -> list[DeconvolvedChannel]:
    """Each channel's curve with its band, its Cramer-Rao floor, residual, energy and the nuisance levels, by name."""
    design_names = design.names
    low, high, sd = sol.interval("curve", conf)
    floor = floor_sd(design, sol, "curve")
    e_lo, e_hi, _ = sol.interval("energy", conf)
    reach = np.diff(sol.rows.A.tocsc().indptr)
    out = []
    for c, name in enumerate(chans):
        curve = sol.values["curve"][:, c]
        levels = {nm: float(v) for nm, v, r in zip(design_names[K:], sol.values["levels"][:, c], reach[K:]) if r}
        idle = [v for nm, v in levels.items() if nm.endswith("-infx")]
        out.append(DeconvolvedChannel(
            name=name, curve=curve, low=low[:, c], high=high[:, c], sd=sd[:, c], lam=sol.lam, edf=math.nan,
            residual_w=float(np.sqrt(np.mean(sol.residual[:, c] ** 2))), energy_j=float(sol.values["energy"][0, c]),
            energy_half_width_j=0.5 * float(e_hi[0, c] - e_lo[0, c]), idle_w=idle[0] if idle else math.nan,
            levels_w=levels, floor_sd=floor[:, c]))
    return out


def _noise_warnings(results: Sequence[DeconvolvedChannel], conf: float, check: ModelCheck) -> list[str]:
    """Channels whose level or curve the bootstrap finds uncertain by more than 5 %, with the likely reason."""
    out: list[str] = []
    why = ("; the model check names an assumption that fails (above)" if check.failed
           else "; the residuals show no failed assumption: the sensor's noise over too few window edges")
    noisy = [c for c in results if np.isfinite(c.energy_half_width_j) and c.energy_j > 0
             and c.energy_half_width_j > 0.05 * c.energy_j]
    if noisy:
        first = noisy[0]
        out.append(f"the {first.name} power's level is uncertain by "
                   f"+-{100 * first.energy_half_width_j / first.energy_j:.0f} % (bootstrap over runs){why}")
    for ch in results:
        half = 0.5 * (ch.high - ch.low)
        level = float(np.mean(np.abs(ch.curve)))
        if np.isfinite(half).any() and level > 0 and float(np.nanmedian(half)) > 0.05 * level:
            out.append(f"the {ch.name} curve is noisy at its bins: the {100 * conf:.0f} % band is "
                       f"+-{100 * float(np.nanmedian(half)) / level:.0f} % of its level (median over bins); read "
                       f"features wider than a few bins{why}")
            break
    return out


def _warnings(results: Sequence[DeconvolvedChannel], sensor: SensorModel, lay: _Layout, sol: Solution,
              check: ModelCheck, K: int, K_edges: int, asked: int, edge_logs: int, reached: int, win_used: np.ndarray,
              res_ns: float, resolution_ns: Optional[float], conf: float) -> list[str]:
    """What the data could not support, and the assumptions the residuals reject."""
    dur = lay.dur
    used_runs = sorted(lay.by_run)
    out: list[str] = list(check.failed)
    if K_edges < asked:
        out.append(f"the curve has {K} bins, not the {asked} asked: only {edge_logs} logs have a window edge inside "
                   f"the kernel's executions ({EDGES_PER_BIN} per bin at least); about "
                   f"{_runs_for(asked, edge_logs, reached, sensor, dur)} runs would give {asked} bins, 20 window "
                   "edges each")
    elif K < asked:
        out.append(f"the curve has {K} bins, not the {asked} asked: the noise limits the resolution to about "
                   f"{res_ns / 1e3:.1f} us, and finer bins would only add noise")
    if sol.info_share.size and sol.info_share[0] < IDENTIFIABLE_SHARE:
        out.append(f"the energy per execution is not determined by the logs (they supply "
                   f"{100 * float(sol.info_share[0]):.0f} % of its precision, the prior the rest): every window "
                   "covers the execution of interest in the same mix with its neighbours")
    if resolution_ns is not None and res_ns > 1.5 * positive_number(resolution_ns, "resolution_ns"):
        out.append(_resolution_warning(res_ns, float(resolution_ns), edge_logs, max(reached, 1), K, sensor, dur))
    period = _whole_period_warning(sensor, lay, used_runs, win_used)
    if period is not None:
        out.append(period)
    out += _noise_warnings(results, conf, check)
    if sol.n_blocks < 3:
        out.append(f"{sol.n_blocks} blocks of runs: too few for cross-validation and a bootstrap (smoothing by GCV, "
                   "no band); run more runs")
    return out


#: The finest resolution a deconvolution may be asked for, ns: power logs resolve microseconds at best.
_FINEST_NS = 1.0


def _runs_for(bins: int, edge_logs: int, runs: int, sensor: SensorModel, dur: float) -> int:
    """Runs for ``bins`` bins of 20 window edges each: at this campaign's rate, or the sensor's period's."""
    per_run = edge_logs / max(runs, 1)
    return math.ceil(20 * bins / per_run) if per_run > 0 else runs_needed(sensor, dur, bins)


def _resolution_warning(res_ns: float, asked: float, edge_logs: int, runs: int, K: int, sensor: SensorModel,
                        dur: float) -> str:
    """Why the logs resolve only features coarser than asked: too few window edges, or too much noise."""
    # The bins the asked resolution needs, at the curve's Nyquist step.
    needed = max(K, int(math.ceil(RESOLUTION_BINS * dur / asked)))
    if edge_logs < EDGES_PER_BIN * needed:
        more = f"about {_runs_for(needed, edge_logs, runs, sensor, dur)} runs"
        why = f"{more} would give {needed} bins, 20 window edges each (this campaign: {edge_logs} edges)"
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


def _fit(cr: CampaignRuns, lay: _Layout, logs: _Logs, lo: np.ndarray, hi: np.ndarray, ok: np.ndarray,
         y: np.ndarray, sensor: SensorModel, K: int, floor_w: float, lam: Optional[float], n_boot: int,
         seed: int) -> tuple[list[Design], Solution, float, np.ndarray]:
    """The campaign's candidate designs at ``K`` bins, the engine's solution, and its resolution (median, per bin)."""
    designs = campaign_designs(cr, K=K, n_max=lay.n_max, warms=lay.warms, dur=lay.dur,
                               lo=float(np.min(lo[ok], initial=cr.s[0])), hi=float(np.max(hi[ok], initial=cr.e[-1])),
                               floor_w=floor_w, absolute_levels=_absolute_levels(lay))
    try:
        sol = attribute(designs, sensor, logs.t, logs.win, y, _blocks_by_run(cr, hi), lam=lam, bootstrap=n_boot,
                        seed=seed)
    except ValueError as exc:
        raise ValueError(f"samples: no log's response reaches a golden run's execution of interest, or too few "
                         f"({exc})") from None
    res_bin, res = resolution(sol, np.arange(K), lay.dur)
    return designs, sol, res, res_bin


def _bins_that_hold(fit: Any, K: int, dur: float, n_boot: int) -> tuple[int, tuple[Any, ...]]:
    """The bins the resolution supports, and the fit at them (with the bootstrap, where asked).

    A first fit without the bootstrap measures the resolution the bins should follow. Never more
    unknowns than the data determine: where the noise, not the window edges, limits the resolution to
    several bins, refit with bins of half the resolution (its Nyquist step); finer bins only add
    variance the smoothing must then remove, and a reader would take them for detail. Fewer bins can
    change the smoothing cross-validation picks and so the resolution: repeated (at most three times)
    until the bins hold.
    """
    out = fit(K, 0)
    for _ in range(3):
        res_ns = out[2]
        K_res = int(math.ceil(RESOLUTION_BINS * dur / res_ns))
        if not (K_res < K / 1.25 and res_ns < dur):
            break
        K = max(1, K_res)
        out = fit(K, 0)
    return K, (fit(K, n_boot) if n_boot else out)


def _edges_in_reach(cr: CampaignRuns, lay: _Layout, logs: _Logs, sensor: SensorModel, asked: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Each log's response span and usability, the window edges inside the golden executions of interest, and the
    golden runs the logs reach; too few edges for one bin is an error that says how many runs would do."""
    lo, hi = response_span(sensor, logs.t, logs.win)
    ok = logs.ok & np.isfinite(lo)
    two = sensor.shape == "boxcar" and sensor.kind != "instant"
    edge_logs = _edge_logs(cr, lo[ok], hi[ok], two)
    # The golden runs the logs reach: the rate at which more runs add window edges.
    reached = int(np.sum(cr.golden & cr.eoi & (cr.s < np.max(hi[ok], initial=-np.inf))
                         & (cr.e > np.min(lo[ok], initial=np.inf))))
    if edge_logs < EDGES_PER_BIN:
        more = _runs_for(asked, edge_logs, reached, sensor, lay.dur)
        raise ValueError(f"samples: the logs cannot determine the kernel's power: {edge_logs} window edges fall "
                         f"inside the executions of interest of the {reached} golden runs the logs reach, {EDGES_PER_BIN} at "
                         f"least for one bin; about {more} runs would give the {asked} bins asked, 20 window "
                         "edges each")
    return lo, hi, ok, edge_logs, reached


@numeric_threads()
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
    floor_w: float = 0.0,
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
        The golden runs (Section IV-B step 5); executions of other runs are
        excluded (a log whose response reaches one is left out).
    kernel_id : int, optional
        The kernel of interest (when runs interleave kernels).
    bins : int
        Bins of the recovered curve over execution progress (2 to 10,000), at most: fewer
        where the logs hold fewer than :data:`EDGES_PER_BIN` window edges per
        bin inside the kernel's executions.
    channels : sequence of str
        Channels to recover (those with finite values).
    lam : float, optional
        Smoothing parameter (relative to the data's scale), in ``[0, 1e6]``;
        default chosen by cross-validation over blocks of runs.
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
        Section IV-A), whichever cross-validation prefers; the choice is in
        the result's ``model``.
    floor_w : float
        Lower bound of every power (W, after the sensor's calibration).

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
       w_j x_j`` over the tiles its response covers (curve bins of each
       execution of the kernel, levels of other executions, the launch gaps,
       cooling tail, idle), the weights from the sensor model.
    2. Accumulate the normal equations per run (memory bounded by the
       unknowns, not the logs), in at most 64 blocks of runs.
    3. Minimise ``|y - A x|^2 + lam |D c|^2`` (``D``: second differences of
       the curve ``c``) subject to power >= ``floor_w``, the model and
       ``lam`` by 5-fold cross-validation over blocks of runs.
    4. Band: resample the blocks with replacement, choose again, re-solve,
       take percentiles; energy likewise.
    5. Resolution: rows of ``(A'A + lam D'D)^-1 A'A`` over the curve are
       the averaging kernels; their equivalent width ``(sum r)^2 / sum r^2``
       bins is the resolution (the whole execution where the data set less
       than half of a bin's estimate).
    6. Model check on the residuals (gap level, timing, window, drift).
    """
    executions = validate_executions(executions)
    samples = validate_samples(samples)
    # Relative to an exact integer origin: epoch-scale host times (1.8e18 ns) resolve only 256 ns as floats.
    origin = int(executions["start_ns"].min())
    executions = executions.copy()
    executions["start_ns"] -= origin
    executions["end_ns"] -= origin
    asked, n_boot, conf, chans = _check_args(samples, sensor, bins, bootstrap, confidence, lam, channels)
    real_number(floor_w, "floor_w")
    integer_in(seed, "seed", 0)
    if resolution_ns is not None and positive_number(resolution_ns, "resolution_ns") < _FINEST_NS:
        raise ValueError(f"resolution_ns={resolution_ns!r}: must be at least {_FINEST_NS:g} ns; no power log resolves "
                         "a finer feature (and the bins it asks for would not fit in memory)")
    lay = _layout(executions, runs, execution_of_interest, kernel_id, warmup)
    logs = _logs_on_host(samples, logger_map, origin, sensor, chans)
    cr = campaign_runs(executions, np.fromiter(lay.by_run, dtype=np.int64), lay.eoi, lay.by_run, lay.kernel)
    lo, hi, ok, edge_logs, reached = _edges_in_reach(cr, lay, logs, sensor, asked)
    K_edges = int(min(asked, edge_logs // EDGES_PER_BIN))
    y = np.where(ok[:, None], logs.y, np.nan)

    def fit(K: int, n_boot: int) -> tuple[list[Design], Solution, float, np.ndarray]:  # what changes between fits
        return _fit(cr, lay, logs, lo, hi, ok, y, sensor, K, floor_w, lam, n_boot, seed)
    K, (designs, sol, res_ns, res_ns_bin) = _bins_that_hold(fit, K_edges, lay.dur, n_boot)
    design = designs[sol.design]
    check = check_model(design, sensor, logs.t, logs.win, sol)
    results = _channel_results(sol, design, chans, conf, K, lay.dur)
    warnings = _warnings(results, sensor, lay, sol, check, K, K_edges, asked, edge_logs, reached,
                         logs.win[sol.rows.used], res_ns, resolution_ns, conf)
    used_runs = np.unique(_blocks_by_run(cr, hi[sol.rows.used]))
    return Deconvolution(
        bin_edges=np.linspace(0.0, 1.0, K + 1), duration_ns=lay.dur, channels=tuple(results), resolution_ns=res_ns,
        resolution_ns_per_bin=res_ns_bin, n_logs=len(sol.rows.used),
        logs_per_bin=np.diff(sol.rows.A.tocsc().indptr)[:K].astype(np.int64),
        n_runs=len(np.intersect1d(used_runs, list(lay.by_run))),
        run_ids=np.intersect1d(used_runs, list(lay.by_run)).astype(np.int64), edge_logs=int(edge_logs),
        dropped_logs=int(ok.sum() - len(sol.rows.used)), confidence=conf,
        confidence_note=(f"bootstrap over {sol.n_blocks} blocks of runs, {sol.n_boot} resamples, each choosing the "
                         "model and smoothing again; percentile band"),
        assumptions=ASSUMPTIONS + (design.name,), warnings=tuple(warnings), sensor=sensor, model=design.name,
        check=check, bins_asked=asked, info_share=float(sol.info_share[0]) if sol.info_share.size else math.nan)
