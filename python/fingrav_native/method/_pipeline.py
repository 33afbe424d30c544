"""Steps 5-8 of FinGraV on logs and executions brought from anywhere: golden runs, LOIs, curve, energy.

:func:`stitch_logs` is the public entry; the campaign driver
(:func:`fingrav_native.profile`) calls the same steps one by one, because its
top-up loop places the logs before it stitches them: :func:`place_runs`, then
:func:`finish_execution`, where both end, which stitches logs placed at an
instant (:func:`finish_profile`) or deconvolves logs that average windows
(:func:`finish_deconvolved`) by one attribution policy.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from dataclasses import dataclass
from typing import Literal, Optional, Sequence, Union, cast, get_args

import numpy as np

from fingrav_native._checks import choice, clock_map, fraction, integer_in
from fingrav_native._errors import FingravWarning
from fingrav_native._threads import numeric_threads
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.method._align import NoLogsInExecutionsError, place_logs, select_executions_of_interest
from fingrav_native.method._components import with_rest
from fingrav_native.method._deconvolve import declared_windows, deconvolve, logs_with_windows, needs_deconvolution
from fingrav_native.method._deconvolved import Deconvolution, as_stitched
from fingrav_native.method._golden import GoldenSelection, select_golden_runs
from fingrav_native.method._guidance import Guidance, lookup_guidance, target_loi_count
from fingrav_native.method._results import LOG_DTYPE, ErrorBudget, ExecutionProfile
from fingrav_native.method._steady import PowerMeasurement
from fingrav_native.method._stitch import count_once, stitch
from fingrav_native.method._stitched import (
    EnergyEstimate,
    LogQualityWarning,
    Smoother,
    Span,
    StitchedChannel,
    StitchedProfile,
    XAxis,
    energy_per_execution,
)
from fingrav_native.records._layouts import LOI_DTYPE, validate_executions, validate_samples
from fingrav_native.records._recording import Capabilities, Recording
from fingrav_native.sensors._model import SensorModel, as_sensor

_log = logging.getLogger(__name__)


#: How logs are attributed to the execution of interest: each at one instant (the paper's step 6),
#: deconvolved from what each window covers, or "auto" (deconvolve windows wider than the resolution).
Attribution = Literal["auto", "instant", "deconvolve"]


#: The attributions stitch_logs, profile and profile_trace take, for validation and choices.
ATTRIBUTIONS: tuple[Attribution, ...] = get_args(Attribution)


class SensorResolutionWarning(FingravWarning):
    """The sensor cannot resolve what was asked (window much longer than the kernel, too few window edges)."""


#: The least share of the runs that logs spread over the executions' time would reach, that the logs must reach.
MIN_RUNS_REACHED = 0.1


def _warn_degenerate(samples: np.ndarray, label: str, stacklevel: int = 3) -> None:
    """Warn when every log's total is one value: a sensor that reports nothing is not a measurement of it."""
    total = samples["total"]
    lo, hi = float(np.min(total)), float(np.max(total))
    if lo != hi or len(samples) < 2:
        return
    what = "zero" if hi == 0 else f"{hi:g} W"
    warnings.warn(f"{label}: samples: all {len(samples)} logs' total is {what}: a sensor that reports one value is "
                  "not measuring the power (a counter not running, a reading cached or clamped); the profile and "
                  "its interval (zero width) describe the logs, not the kernel", LogQualityWarning,
                      stacklevel=stacklevel)


def _unit_hint(ratio: float) -> str:
    """What a span ratio (logs / executions) near a power of 1,000 suggests, or '' when it is near none."""
    if not (ratio > 0 and math.isfinite(ratio)):
        return ""
    k = round(math.log10(ratio) / 3)
    if k == 0 or abs(math.log10(ratio) - 3 * k) > 1:
        return ""
    return (f" (the logs span ~{ratio:.2g} x the executions' time: samples' source_ts, through logger_map, look "
            f"1e{3 * k:+d} times the executions' ns; convert one to the other's unit)")


def _spans(samples: np.ndarray, executions: np.ndarray, logger_map: ClockMapLike) -> tuple[np.ndarray, str, float]:
    """The logs on host time, both time spans in words, and the ratio of the logs' span to the executions'."""
    clock_map(logger_map, "logger_map", ("to_host", "error_bound_at"))
    host = np.asarray(logger_map.to_host(samples["source_ts"]), dtype=np.float64)
    if host.shape != (len(samples),) or not np.all(np.isfinite(host)):
        raise ValueError(f"logger_map: to_host() returned shape {host.shape} with non-finite values or not one per "
                         f"log ({len(samples)})")
    host = np.sort(host)
    ex_lo, ex_hi = float(executions["start_ns"].min()), float(executions["end_ns"].max())
    words = (f"the logs on host time (through logger_map) span {host[0]:.6g} to {host[-1]:.6g} ns, the executions "
             f"{ex_lo:.6g} to {ex_hi:.6g} ns")
    return host, words, (host[-1] - host[0]) / (ex_hi - ex_lo) if ex_hi > ex_lo else math.nan


def _check_log_cover(samples: np.ndarray, executions: np.ndarray, logger_map: ClockMapLike) -> None:
    """Refuse logs that reach far fewer runs than logs spread over the executions' time would: a unit mismatch.

    Stamps in us against executions in ns put every log inside the first run or two, and the profile of
    "200 golden runs" is then built from one. Logs spread over the executions' time reach run r with
    probability ``1 - exp(-rate * span_r)`` (a Poisson count at their mean rate), whatever the kernel's length.
    """
    runs = np.unique(executions["run"])
    if len(runs) < 2:
        return
    host, words, ratio = _spans(samples, executions, logger_map)
    order = np.argsort(executions["run"], kind="stable")
    r_sorted = executions["run"][order]
    lo = np.minimum.reduceat(executions["start_ns"][order], np.searchsorted(r_sorted, runs)).astype(np.float64)
    hi = np.maximum.reduceat(executions["end_ns"][order], np.searchsorted(r_sorted, runs)).astype(np.float64)
    ex_lo, ex_hi = float(lo.min()), float(hi.max())
    inside = int(np.searchsorted(host, ex_hi, side="right") - np.searchsorted(host, ex_lo))
    if inside == 0 or ex_hi <= ex_lo:
        return  # no log among the executions: placement says so
    expected = float(np.sum(-np.expm1(-inside / (ex_hi - ex_lo) * (hi - lo))))
    reached = int(np.count_nonzero(np.searchsorted(host, hi, side="right") > np.searchsorted(host, lo)))
    if expected < 5 or reached >= MIN_RUNS_REACHED * expected:
        return
    raise ValueError(
        f"samples, executions: {inside} logs lie among the executions but reach {reached} of their {len(runs)} "
        f"runs, where logs spread over that time would reach ~{expected:.0f}: {words}; they are not on one clock or "
        f"in one unit{_unit_hint(ratio)}; a profile from them would be built from the few runs the logs reach")


def log_records(samples: np.ndarray, logger_map: ClockMapLike) -> np.ndarray:
    """Every power log on host time as LOG_DTYPE records (what trace export shows)."""
    logs = np.zeros(len(samples), dtype=LOG_DTYPE)
    logs["host_ns"] = logger_map.to_host(samples["source_ts"])
    logs["window_ns"] = samples["window_ns"]
    for ch in ("total", "compute", "io", "memory"):
        logs[ch] = samples[ch]
    return logs


def stratified_mean(toi_frac: np.ndarray, values: np.ndarray, strata: int = 8) -> PowerMeasurement:
    """Mean power of LOIs over an execution, stratified by its progress, with its standard error."""
    # Power varies within an execution (ramps, a last partial wave), and LOIs
    # land at random times of interest: averaging per stratum of the
    # execution's progress and then across strata removes that shape from
    # the estimate's variance, so probes of the SSP search compare levels,
    # not where their few logs happened to land.
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n < 2:
        return PowerMeasurement(float(v.mean()) if n else float("nan"), float("inf"), n)
    k = int(min(strata, max(1, n // 4)))
    bins = np.clip((np.asarray(toi_frac) * k).astype(int), 0, k - 1)
    means, vars_ = [], []
    for b in range(k):
        vb = v[bins == b]
        if len(vb) == 0:
            continue
        means.append(vb.mean())
        vars_.append(vb.var(ddof=1) / len(vb) if len(vb) > 1 else v.var(ddof=1))
    m = len(means)
    return PowerMeasurement(float(np.mean(means)), float(math.sqrt(np.sum(vars_)) / m), n)


@dataclass(frozen=True)
class PlacedRuns:
    """Steps 5 and 6 for one execution of interest: the golden runs, their LOIs and the median duration."""

    golden: GoldenSelection
    lois: np.ndarray
    duration_ns: float
    #: Half-width of the median duration's own error: the golden executions' start and end marker errors.
    duration_err_ns: float = 0.0


def place_runs(
    samples: np.ndarray,
    executions: np.ndarray,
    logger_map: ClockMapLike,
    *,
    execution_index: int,
    margin: float,
    kernel_id: Optional[int] = None,
    lois: Optional[np.ndarray] = None,
) -> PlacedRuns:
    """Steps 5 and 6: golden runs by the duration of each run's execution of interest, then LOIs.

    ``lois``: the logs already placed in these executions of interest (:func:`place_logs_of_kernels`); the golden
    runs' are taken from them instead of placing the logs again.
    """
    mask = select_executions_of_interest(executions, execution_of_interest=execution_index, kernel_id=kernel_id)
    eoi = executions[mask]
    durations = eoi["end_ns"] - eoi["start_ns"]
    golden = select_golden_runs(durations, margin, runs=eoi["run"])
    if lois is not None and golden.run_ids is not None:
        # A pair's record depends on its log and its execution only: the golden runs' records, in order.
        lois = lois[np.isin(lois["run"], golden.run_ids)]
    else:
        lois = _golden_lois(samples, executions, logger_map, execution_index, kernel_id, golden)
    # A probe's overhead shifts every execution's markers alike, so the duration's error does not average out
    # over the golden runs: its bound is the markers' own, start plus end.
    marker_err = (eoi["start_err_ns"].astype(np.float64) + eoi["end_err_ns"].astype(np.float64))[golden.mask]
    return PlacedRuns(golden, lois, float(np.median(durations[golden.mask])), float(np.median(marker_err)))


def place_every_run(samples: np.ndarray, executions: np.ndarray, logger_map: ClockMapLike, *,
                    execution_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 6 before step 5: every run's execution of interest and the logs placed in it (LOI_DTYPE).

    A (log, execution) pair's record depends on that log and that execution
    only, so the runs can be placed a batch at a time, each batch on its own
    clock maps, and :func:`place_runs` (``lois=``) picks the golden runs'
    records from all the batches' without placing any log again: a running
    count that fits each run's clocks once, however often it is counted.
    """
    eoi = executions[select_executions_of_interest(executions, execution_of_interest=execution_index)]
    try:
        lois = place_logs(samples, executions, logger_map, execution_of_interest=execution_index)
    except NoLogsInExecutionsError:  # no log in these runs' executions of interest yet: a shortfall, not an error
        lois = np.zeros(0, dtype=LOI_DTYPE)
    return eoi, lois


def _golden_lois(samples: np.ndarray, executions: np.ndarray, logger_map: ClockMapLike, execution_index: int,
                 kernel_id: Optional[int], golden: GoldenSelection) -> np.ndarray:
    """Step 6: the logs placed in the golden runs' executions of interest (none yet where none falls there)."""
    try:
        return place_logs(samples, executions, logger_map, execution_of_interest=execution_index,
                          kernel_id=kernel_id, runs=golden.run_ids)
    except NoLogsInExecutionsError as exc:
        # Short kernels: a few runs may hold no log at all in the execution
        # of interest. That is a shortfall for step 7, not an error yet.
        _log.debug("execution %d: no LOI in the %d golden runs yet (%s)", execution_index, golden.count, exc)
        return np.zeros(0, dtype=LOI_DTYPE)


def finish_profile(
    label: str,
    placed: PlacedRuns,
    *,
    execution_index: int,
    executions_per_run: int,
    guidance: Guidance,
    smoother: Optional[str],
    x: str,
    top_up_runs: int,
    span: float | str = "auto",
) -> ExecutionProfile:
    """Step 8: stitch, and integrate energy per execution.

    ``smoother``, ``x`` and ``span`` are :func:`stitch`'s options, typed ``str`` because the campaign
    driver passes its own options through; :func:`stitch` checks them.
    """
    if len(placed.lois) == 0:
        raise NoLogsInExecutionsError(
            f"{label}: no power log landed in execution {execution_index} of any golden run "
            f"({placed.golden.count} runs); run more runs (runs=...) or allow top-up runs")
    stitched = stitch(placed.lois, x=cast(XAxis, x), bin_width=guidance.loi_interval_ns if x == "time" else None,
                      smoother=cast(Optional[Smoother], smoother), span=cast(Span, span))
    energy = {c.name: energy_per_execution(c, placed.duration_ns, duration_err_ns=placed.duration_err_ns)
              for c in stitched.channels if np.isfinite(c.mean).any()}
    return _execution_profile(label, placed, stitched, energy, placed.duration_ns, execution_index=execution_index,
                              executions_per_run=executions_per_run, guidance=guidance, top_up_runs=top_up_runs)


def _execution_profile(label: str, placed: PlacedRuns, stitched: StitchedProfile, energy: dict[str, EnergyEstimate],
                       duration_ns: float, *, execution_index: int, executions_per_run: int, guidance: Guidance,
                       top_up_runs: int, deconvolution: Optional[Deconvolution] = None) -> ExecutionProfile:
    """The result of steps 5-8 for one execution of interest, however its curve was made."""
    # NVIDIA's memory scope beside the total: the per-component curves carry memory and the rest.
    stitched, energy = with_rest(stitched, energy)
    return ExecutionProfile(
        label=label,
        execution_index=int(execution_index),
        executions_per_run=int(executions_per_run),
        golden=placed.golden,
        lois=placed.lois,
        stitched=stitched,
        duration_ns=duration_ns,
        energy=energy,
        loi_target=target_loi_count(guidance, placed.duration_ns),
        top_up_runs=top_up_runs,
        deconvolution=deconvolution,
    )


def build_execution_profile(
    label: str,
    samples: np.ndarray,
    executions: np.ndarray,
    logger_map: ClockMapLike,
    *,
    execution_index: int,
    executions_per_run: int,
    margin: float,
    guidance: Guidance,
    smoother: Optional[str],
    x: XAxis,
    kernel_id: Optional[int] = None,
    top_up_runs: int = 0,
    span: Span = "auto",
    sensor: Optional[SensorModel] = None,
    attribution: Attribution = "auto",
    marker_duration_err: bool = True,
    lois: Optional[np.ndarray] = None,
) -> ExecutionProfile:
    """Steps 5-8 for one execution of interest: its logs placed at an instant, or deconvolved.

    Deconvolved with ``attribution="deconvolve"``, or with ``"auto"`` when a
    log's window (or filter) exceeds half the resolution asked for
    (:func:`needs_deconvolution`). ``marker_duration_err``: the executions'
    start and end errors are the markers' own (a campaign's probes), so they
    bound the duration's error and widen the energy interval; False where
    they are mostly a clock offset common to start and end (a trace's), which
    cancels in a duration. ``lois``: the logs already placed in the executions
    of interest (:func:`place_runs`).
    """
    # A window declared by the model is written onto the logs, so placing and deconvolving read one description.
    samples = logs_with_windows(samples, sensor)
    placed = place_runs(samples, executions, logger_map, execution_index=execution_index, margin=margin,
                        kernel_id=kernel_id, lois=lois)
    if not marker_duration_err:
        placed = dataclasses.replace(placed, duration_err_ns=0.0)
    # Level 5: the caller of stitch_logs or stitch_placed_logs (through _stitch_checked and this function).
    return finish_execution(label, placed, samples, executions, logger_map, sensor, attribution=attribution,
                            execution_index=execution_index, executions_per_run=executions_per_run,
                            guidance=guidance, smoother=smoother, x=x, kernel_id=kernel_id, top_up_runs=top_up_runs,
                            span=span, stacklevel=5)


def finish_execution(
    label: str,
    placed: PlacedRuns,
    samples: np.ndarray,
    executions: np.ndarray,
    logger_map: ClockMapLike,
    sensor: Optional[SensorModel],
    *,
    attribution: str,
    execution_index: int,
    executions_per_run: int,
    guidance: Guidance,
    smoother: Optional[str],
    x: str,
    kernel_id: Optional[int],
    top_up_runs: int,
    span: float | str = "auto",
    stacklevel: int = 2,
) -> ExecutionProfile:
    """Step 8 for one execution of interest: stitched or deconvolved, by the package's one attribution policy.

    Both :func:`stitch_logs` and :func:`~fingrav_native.profile` end here,
    so the same logs get the same attribution from either.

    Parameters
    ----------
    label, placed, samples, executions, logger_map, sensor
        The execution of interest's name, its golden runs and LOIs
        (:func:`place_runs`), and the logs, executions, map and sensor model
        they were placed with.
    attribution : {"auto", "instant", "deconvolve"}
        The policy:

        * ``"instant"``: each log at its instant, stitched (the paper's
          steps 6-8, Section IV-B);
        * ``"deconvolve"``: the curve deconvolved across the golden runs
          (:func:`finish_deconvolved`); logs too few to deconvolve raise
          its ``ValueError``: what was asked for explicitly is never
          replaced by something else;
        * ``"auto"``: deconvolved where a log's window (or filter) exceeds
          half the resolution asked for (:func:`needs_deconvolution`), else
          stitched. Where the logs are too few to deconvolve, a
          :class:`SensorResolutionWarning` says why (and the runs it would
          take) and the logs are stitched at their instants, smeared by the
          sensor's window; the result's ``deconvolution`` is None. A
          campaign's hours of runs are not thrown away for a resolution
          the user did not ask for explicitly, and the result says which
          attribution it holds.
    execution_index, executions_per_run, guidance, smoother, x, kernel_id, top_up_runs, span
        As :func:`finish_profile` and :func:`finish_deconvolved` take them.
    stacklevel : int
        Where the fallback's warning points, counted from this function.

    Returns
    -------
    ExecutionProfile
    """
    use_deconv = attribution == "deconvolve" or (
        attribution == "auto" and needs_deconvolution(samples, sensor, placed.duration_ns, guidance.loi_interval_ns))
    if use_deconv:
        try:
            return finish_deconvolved(label, placed, samples, executions, logger_map, sensor,
                                      execution_index=execution_index, executions_per_run=executions_per_run,
                                      guidance=guidance, x=x, kernel_id=kernel_id, top_up_runs=top_up_runs)
        except ValueError as exc:
            # Too few logs for the deconvolution (a 25 ms window every 100 ms over a sub-millisecond kernel
            # needs ~10^5 runs).
            if attribution == "deconvolve":
                raise
            warnings.warn(f"{label}: cannot deconvolve ({exc}); the profile attributes each log to one instant "
                          "and is smeared by the sensor's window", SensorResolutionWarning, stacklevel=stacklevel)
    return finish_profile(label, placed, execution_index=execution_index, executions_per_run=executions_per_run,
                          guidance=guidance, smoother=smoother, x=x, top_up_runs=top_up_runs, span=span)


def finish_deconvolved(
    label: str,
    placed: PlacedRuns,
    samples: np.ndarray,
    executions: np.ndarray,
    logger_map: ClockMapLike,
    sensor: Optional[SensorModel],
    *,
    execution_index: int,
    executions_per_run: int,
    guidance: Guidance,
    x: str,
    kernel_id: Optional[int],
    top_up_runs: int,
) -> ExecutionProfile:
    """Step 8 for windowed logs: the curve by deconvolution across the golden runs (:func:`deconvolve`).

    ``x`` is typed ``str`` because the campaign driver passes its own option through;
    :func:`as_stitched` checks it.
    """
    if sensor is None:
        # The logs declare their windows; a boxcar sensor of the widest is the model for any that do not.
        sensor = declared_windows(samples)
        if sensor is None:
            raise ValueError(f"{label}: no sensor model and no log declares a window (window_ns): nothing to "
                             "deconvolve; pass sensor=, or attribution='instant'")
    if placed.golden.run_ids is None:  # place_runs always passes run ids; a guard for mypy and for the reader
        raise ValueError(f"{label}: the golden selection carries no run ids to deconvolve")
    bins = max(8, min(200, int(round(placed.duration_ns / guidance.loi_interval_ns))))
    dec = deconvolve(samples, executions, logger_map, sensor, execution_of_interest=execution_index,
                     runs=placed.golden.run_ids, kernel_id=kernel_id, bins=bins,
                     resolution_ns=guidance.loi_interval_ns)
    unc = placed.lois["uncert_ns"] if len(placed.lois) else np.zeros(1)
    stitched, energy = as_stitched(dec, x=cast(XAxis, x), uncert_ns_median=float(np.median(unc)),
                                   uncert_ns_max=float(np.max(unc)))
    if placed.duration_err_ns > 0:
        energy = {name: _with_duration_err(e, stitched[name], placed.duration_err_ns) for name, e in energy.items()}
    for w in dec.warnings:
        warnings.warn(f"{label}: {w}", SensorResolutionWarning, stacklevel=3)
    return _execution_profile(label, placed, stitched, energy, dec.duration_ns, execution_index=execution_index,
                              executions_per_run=executions_per_run, guidance=guidance, top_up_runs=top_up_runs,
                              deconvolution=dec)


def _with_duration_err(est: EnergyEstimate, channel: StitchedChannel, err_ns: float) -> EnergyEstimate:
    """``est`` with the interval widened by what the duration's marker error can add or drop (as
    :func:`energy_per_execution` does for binned curves): the curve's largest power times the error."""
    curve = np.abs(np.asarray(channel.mean, dtype=np.float64))
    if not np.isfinite(curve).any():
        return est
    bound = float(np.nanmax(curve)) * err_ns * 1e-9
    note = f"the interval adds {bound * 1e3:.4g} mJ for the duration's marker error (+-{err_ns:.4g} ns)"
    return dataclasses.replace(est, uncertainty_j=est.uncertainty_j + bound,
                               note="; ".join(n for n in (est.note, note) if n))


def error_budget(lois_list: Sequence[np.ndarray], executions: np.ndarray, logger_map: ClockMapLike,
            caps: Capabilities) -> ErrorBudget:
    """The timing error budget: medians over the LOIs of each bound :func:`place_logs` adds, and of their sum."""
    lois = np.concatenate(lois_list) if lois_list else np.zeros(0, dtype=LOI_DTYPE)
    if len(lois) == 0:
        return ErrorBudget(float("nan"), float("nan"), caps.logger_window_ns / 2, float("nan"))
    clock = float(np.median(logger_map.error_bound_at(lois["host_ns"])))
    marker = float(np.median(executions["start_err_ns"]))
    return ErrorBudget(clock, marker, caps.logger_window_ns / 2, float(np.median(lois["uncert_ns"])))


@numeric_threads()
def stitch_logs(
    samples: Union[np.ndarray, Recording],
    executions: Optional[np.ndarray] = None,
    logger_map: Optional[ClockMapLike] = None,
    *,
    execution_of_interest: int,
    margin: Optional[float] = None,
    kernel_id: Optional[int] = None,
    smoother: Optional[Smoother] = "local",
    x: XAxis = "time",
    label: str = "custom",
    sensor: Union[SensorModel, str, None] = None,
    attribution: str = "auto",  # an Attribution; str for drivers that pass their own option (checked below)
) -> ExecutionProfile:
    """Steps 5-8 of FinGraV on your own arrays (bring-your-own-logs).

    Parameters
    ----------
    samples : numpy.ndarray or Recording
        Power logs with ``source_ts`` in the logger's clock and one field per
        channel (SAMPLE_DTYPE or compatible); or a
        :class:`~fingrav_native.records.Recording`, which brings the logs,
        the executions, the brackets of the logs' clock (fitted into
        ``logger_map`` when none is given:
        :meth:`~fingrav_native.records.Recording.logger_clock_map`) and the
        sensor model (used when ``sensor`` is not given). A Recording
        without executions (raw markers only, or none), or without brackets
        of its logs' clock and no ``logger_map``, is refused, naming what it
        lacks.
    executions : numpy.ndarray
        EXECUTION_DTYPE records on the host timeline (see
        :func:`~fingrav_native.records.make_executions`). Required with an
        array of samples; not given with a Recording (it holds them).
    logger_map : clock map
        Maps ``source_ts`` to host time (``to_host``, ``error_bound_at``):
        e.g. :func:`~fingrav_native.clocks.fit_clock_map` of your
        bracketed reads. Required with an array of samples.
    execution_of_interest : int
        Execution index within each run (3 for SSE; -1 for each run's last).
    margin : float, optional
        Golden-run binning margin in (0, 1); default: the paper's Table I for
        the executions' median duration (5 % below 200 us, 2 % above), the
        policy every entry point shares.
    kernel_id : int, optional
        Only executions of this kernel.
    smoother, x
        As for :func:`profile`.
    label : str
        Name of the profile.
    sensor : SensorModel or str, optional
        What each log measures (a :data:`~fingrav_native.sensors.SENSOR_PRESETS`
        name or a model, e.g. from a characterisation). Default: what the
        logs declare (a ``window_ns`` field: boxcar windows; none:
        instantaneous).
    attribution : {"auto", "instant", "deconvolve"}
        ``"instant"``: the paper's step 6, each log placed at one time of
        interest (its window's part inside the execution) with its value
        unchanged. ``"deconvolve"``: the curve recovered across golden runs
        from what each window covers
        (:func:`~fingrav_native.method.deconvolve`). ``"auto"``
        (default): deconvolve when a window (or filter) exceeds half the
        profile's resolution (Table I's LOI interval). The policy
        :func:`~fingrav_native.profile` applies too (:func:`finish_execution`):
        with ``"auto"``, logs too few to deconvolve are stitched at their
        instants with a :class:`SensorResolutionWarning` (the result's
        ``deconvolution`` is None); with ``"deconvolve"`` they raise.

    Returns
    -------
    ExecutionProfile
        With ``deconvolution`` set when the curve was deconvolved; a
        :class:`SensorResolutionWarning` says when the logs cannot resolve
        the resolution asked for.

    Raises
    ------
    ValueError
        An argument of the wrong type or range (the message names it); logs
        that reach under a tenth of the runs that logs spread over the
        executions' time would reach (stamps in another unit or on another
        clock: the message gives the likely factor of 1,000).
    NoLogsInExecutionsError
        No log inside any golden run's execution of interest; the message
        gives both time spans (and a likely unit factor).

    Warns
    -----
    LogQualityWarning
        Logs that repeat an earlier log's stamp and values (each is counted
        once: a log given twice is not a second measurement), or a total
        that is one value in every log (all zero: a sensor reporting
        nothing).

    Notes
    -----
    Logs repeated (same stamp, same values) are counted once; logs that
    reach under a tenth of the runs their rate predicts (``1 - exp(-rate *
    span)`` per run, a Poisson count) are refused as a unit or clock
    mismatch. Then:

    1. Golden runs: bin the durations of each run's execution of interest
       (Section IV-B step 5).
    2. Place the logs of the golden runs (LOI/TOI, step 6).
    3. Stitch the LOIs per channel (step 8) and integrate energy per
       execution over the golden bin's median duration. The executions'
       ``start_err_ns``/``end_err_ns`` do not widen the energy's interval
       here (a trace's are mostly a clock offset that cancels in a
       duration); :func:`~fingrav_native.profile` adds its own markers'.

    Examples
    --------
    >>> import numpy as np
    >>> from fingrav_native.records import make_executions
    >>> class Identity:  # logs already stamped in host ns
    ...     def to_host(self, t): return np.asarray(t, dtype=float)
    ...     def error_bound_at(self, t): return np.full(np.shape(t), 100.0)
    >>> rng = np.random.default_rng(0)
    >>> starts = np.arange(50) * 1e7
    >>> ex = make_executions(np.arange(50), np.zeros(50, int), np.zeros(50, int), starts, starts + 1e5)
    >>> logs = np.zeros(50, dtype=[("source_ts", "<i8"), ("total", "<f4")])
    >>> logs["source_ts"] = starts + rng.uniform(0, 1e5, 50)
    >>> logs["total"] = 300.0 + rng.normal(0.0, 2.0, 50)
    >>> p = stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0.05)
    >>> len(p.lois)
    50
    """
    if isinstance(samples, Recording):
        samples, executions, logger_map, sensor = _recording_parts(samples, executions, logger_map, sensor)
    elif executions is None:
        raise ValueError("executions: required with an array of samples (a Recording given as samples brings its "
                         "own)")
    if logger_map is None:
        raise ValueError("logger_map: required with an array of samples (a Recording given as samples fits its own "
                         "from the brackets of its logs' clock)")
    return _stitch_checked(samples, executions, logger_map, None, execution_of_interest=execution_of_interest,
                           margin=margin, kernel_id=kernel_id, smoother=smoother, x=x, label=label, sensor=sensor,
                           attribution=attribution)


def stitch_placed_logs(samples: np.ndarray, executions: np.ndarray, logger_map: ClockMapLike, lois: np.ndarray, *,
                       margin: Optional[float], label: str, sensor: Optional[SensorModel],
                       attribution: str, smoother: Optional[Smoother] = "local") -> ExecutionProfile:
    """:func:`stitch_logs` of every execution (``execution_of_interest=0``, runs of one execution: an
    application's trace) with its logs already placed: ``lois``, :func:`place_logs_of_kernels`'s records of
    these executions. The same checks and result as :func:`stitch_logs` (Section IV-B steps 5-8); logs that
    repeat one another are placed again once each. ``smoother``: :func:`stitch`'s; None bins only (the
    energy, from the bins' means, is the same), for a caller that replaces the curve.
    """
    return _stitch_checked(samples, executions, logger_map, lois, execution_of_interest=0, margin=margin,
                           kernel_id=None, smoother=smoother, x="time", label=label, sensor=sensor,
                           attribution=attribution)


def _recording_parts(recording: Recording, executions: Optional[np.ndarray], logger_map: Optional[ClockMapLike],
                     sensor: Union[SensorModel, str, None]
                     ) -> tuple[np.ndarray, np.ndarray, ClockMapLike, Union[SensorModel, str, None]]:
    """A Recording's logs, executions, logs' clock map (unless given) and sensor (unless given)."""
    if executions is not None:
        raise ValueError("executions: the Recording given as samples holds its executions; give either the "
                         "Recording or the arrays, not both")
    held = recording.executions_for("samples", "stitch_logs")
    lmap = recording.logger_clock_map("logger_map") if logger_map is None else logger_map
    return recording.samples, held, lmap, recording.sensor if sensor is None else sensor


def _stitch_checked(samples: np.ndarray, executions: np.ndarray, logger_map: ClockMapLike,
                    lois: Optional[np.ndarray], *, execution_of_interest: int, margin: Optional[float],
                    kernel_id: Optional[int], smoother: Optional[Smoother], x: XAxis, label: str,
                    sensor: Union[SensorModel, str, None], attribution: str) -> ExecutionProfile:
    """:func:`stitch_logs`'s checks and steps, with ``lois`` placed already (or None); warnings point at the
    caller of :func:`stitch_logs` or :func:`stitch_placed_logs`."""
    samples = validate_samples(samples, require_total=True)
    executions = validate_executions(executions)
    if not isinstance(label, str):
        raise ValueError(f"label={label!r}: must be a str")
    if margin is not None:
        margin = fraction(margin, "margin")
    execution_of_interest = integer_in(execution_of_interest, "execution_of_interest", -1)
    if kernel_id is not None:
        kernel_id = integer_in(kernel_id, "kernel_id", -2**31, 2**31 - 1)
    attributed = choice(attribution, "attribution", ATTRIBUTIONS)
    model = as_sensor(sensor)
    once = count_once(samples, "samples", label, stacklevel=4)
    if once is not samples:
        lois = None  # placed from the logs as given: place the ones counted once again
    samples = once
    _warn_degenerate(samples, label, stacklevel=4)
    _check_log_cover(samples, executions, logger_map)
    durations = executions["end_ns"] - executions["start_ns"]
    guidance = lookup_guidance(float(np.median(durations)))
    if margin is None:
        # The one margin policy (as profile() and profile_trace() apply it): Table I's margin
        # for the execution's duration.
        margin = guidance.margin
    try:
        return build_execution_profile(
            label, samples, executions, logger_map, execution_index=execution_of_interest,
            executions_per_run=int(executions["index"].max()) + 1, margin=margin, guidance=guidance,
            smoother=smoother, x=x, kernel_id=kernel_id, sensor=model, attribution=attributed,
            marker_duration_err=False, lois=lois)
    except NoLogsInExecutionsError as exc:
        # Where the logs lie tells a unit or clock mismatch from too few runs.
        _, words, ratio = _spans(samples, executions, logger_map)
        raise NoLogsInExecutionsError(f"{exc}; {words}{_unit_hint(ratio)}") from exc
