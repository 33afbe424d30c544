"""Per-kernel power and energy inside a running application: FinGraV over its profiler trace.

A training or inference loop is FinGraV's protocol for free (paper Section
IV-A): every execution of a kernel is a run, at a random phase against the
free-running power logger, thousands of times. :func:`attribute_trace` groups
the executions of an application's trace by signature (name, grid, block),
keeps the golden executions of each (execution-time binning, Section IV-B
step 5), leaves out the warm-up (the SSP idea applied to a loop: the first
iterations, while power still climbs), and stitches each signature's logs of
interest into a profile with its energy per execution.

This module checks the arguments and runs the steps in order; each step lives
in a module of its own: the placement and offset checks (``_placement``), the
per-signature stitch and warm-up (``_signatures``), the instant or the joint
attribution (``_instant_attribution``, ``_joint_attribution``) and the
assembled result (``_summary``). The public entry is
:func:`fingrav_native.profile_trace`, which reads the trace, resolves a
capture into arrays and maps, and calls :func:`attribute_trace`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Literal, Optional, Union

import numpy as np

from fingrav_native._checks import choice, fraction, integer_in, positive_number, short_repr
from fingrav_native._threads import numeric_threads
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.insitu._closure_fit import MappedCounter, closure_from, counter_of
from fingrav_native.insitu._concurrent import Spans, steady_spans
from fingrav_native.insitu._instant_attribution import (
    Overlap,
    instant_extras,
    instant_levels,
    overlapped,
    placement_terms,
)
from fingrav_native.insitu._joint_attribution import joint_attribution
from fingrav_native.insitu._placement import ShiftedMap, aligned_logs, check_overlap, device_of, one_sided
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._signatures import NearLogs, Signatures, profile_signatures
from fingrav_native.insitu._summary import (
    elsewhere,
    nothing_or_undetermined,
    power_limit_notes,
    trace_profile,
    trace_wide,
)
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.method._deconvolve import declared_windows, logs_with_windows, needs_deconvolution
from fingrav_native.method._pipeline import ATTRIBUTIONS, Attribution
from fingrav_native.records._layouts import validate_executions, validate_samples
from fingrav_native.sensors._energy_counter import EnergyCounter
from fingrav_native.sensors._model import SensorModel, as_sensor

#: Logs that reach back more than half of this (a window, a filter) are deconvolved: the table's
#: kernels last tens of microseconds, and a point placement smears them by the log's reach.
_RESOLUTION_NS = 10_000.0


@numeric_threads()
def attribute_trace(
    trace: Union[str, os.PathLike[str], KernelTrace],
    samples: np.ndarray,
    logger_map: Optional[ClockMapLike] = None,
    *,
    margin: Optional[float] = None,
    min_executions: int = 20,
    warmup_tolerance: float = 0.02,
    sensor: Union[SensorModel, str, None] = None,
    attribution: Attribution = "auto",
    device: Optional[int] = None,
    bins: int = 32,
    align: Union[bool, Literal["auto"]] = "auto",
    max_power_w: Optional[float] = None,
    energy_counter: Union[EnergyCounter, MappedCounter, None] = None,
) -> TraceProfile:
    """Per-kernel power and energy of a running application, from its profiler trace and power logs.

    Parameters
    ----------
    trace : str, path or KernelTrace
        A torch.profiler (Kineto) Chrome trace (``.json`` or ``.json.gz``,
        :func:`~fingrav_native.files.read_kineto_trace`), what rocprofv3
        wrote (``kernel_trace.csv``, ``--output-format json`` or a rocpd
        database: :func:`~fingrav_native.files.read_rocprof_kernel_trace`),
        or the executions already read (an EXECUTION_DTYPE array with a
        name per execution: :meth:`KernelTrace.from_executions`).
    samples : numpy.ndarray
        Power logs taken while the application ran (SAMPLE_DTYPE-compatible:
        ``source_ts`` in the logger's clock, one field per channel). A
        :class:`~fingrav_native.files.PowerCapture` is refused here:
        :func:`fingrav_native.profile_trace` resolves it into its logs, their
        map onto the trace's clock, its sensor and its counter
        (``fingrav_native.app._trace.capture_inputs``), so that this layer
        reads arrays only.
    logger_map : clock map
        ``to_host`` maps ``source_ts`` onto the trace's clock (Unix-epoch ns
        for Kineto, CLOCK_BOOTTIME ns for rocprofv3), ``error_bound_at`` its
        error there. A map with ``to_host_relative`` keeps epoch times exact
        (int64); any other passes them through a float64 once (about 0.1 us
        of rounding, below the trace's microsecond timestamps).
    energy_counter : EnergyCounter or MappedCounter, optional
        An :class:`~fingrav_native.sensors.EnergyCounter` on the logs' clock
        (``logger_map`` maps it), or a
        :class:`~fingrav_native.insitu._closure_fit.MappedCounter`: a
        capture's counter with its own map, or why it cannot be read.
    margin, min_executions, warmup_tolerance, sensor, attribution, device, bins, align, max_power_w
        The attribution's options, as the public entry
        :func:`fingrav_native.profile_trace` documents them (one description
        of each, where users read it).

    Returns
    -------
    TraceProfile
        The kernel table, a profile per signature, and per-iteration energy
        when the trace marks iterations (``prof.step()``). A row's
        ``duration_ns``, ``power_w`` and ``energy_j`` are those of an
        execution of the golden duration class (its ``golden`` executions:
        the fullest execution-time bin past the warm-up, step 5), not the
        mean over all ``count`` executions, which differs where a kernel's
        durations spread (throttling, clocks ramping); its interval covers
        the logs' placement error against the kernels too (instantaneous
        logs: the measured offset's interval and resolution, or the map's
        bound, times the power step at the executions' edges). A trace in which
        no signature has ``min_executions`` executions is not refused: its
        table is empty, a warning names each signature's shortfall, and the
        energy per iteration (``summary``) or, without iterations, over the
        trace's kernel span (``span``) is what the logs give.

    Raises
    ------
    ValueError
        Bad arguments (named); a trace without kernels
        (:class:`~fingrav_native.insitu.TraceFormatError`); logs that fall
        within none of the trace's kernels.

    Notes
    -----
    Paper Section IV-A/B on an application's own executions: each execution
    is a run of one (``execution_of_interest=0``); golden executions by
    execution-time binning (step 5), logs of interest through the clock map
    (step 6), stitching and energy (step 8). Executions that overlap another
    kernel on the same device are left out of their signature's fit and
    counted, not mis-attributed; compute kernels beside compute kernels
    (several streams) form spans whose logs measure the sum, attributed
    jointly and split by the signatures' fitted power
    (``TraceProfile.concurrency``, :mod:`fingrav_native.insitu._concurrent`).
    The energy per iteration is a ratio estimator (mean power of the logs
    over the steady iterations x their mean duration) with a bootstrap
    interval over iterations (Efron and Tibshirani 1993, via
    :func:`scipy.stats.bootstrap`).
    """
    _check_options(margin, min_executions, warmup_tolerance)
    if max_power_w is not None:
        max_power_w = positive_number(max_power_w, "max_power_w")
    model = as_sensor(sensor)
    device = None if device is None else integer_in(device, "device", 0)
    kt, trace_notes = _checked_trace(trace)
    zero = _zero_duration_on(trace, kt, device)
    # The energy closure's counter (insitu/_closure.py), on the trace's clock as the logs are.
    counted = counter_of(energy_counter, logger_map)
    _check_logs(samples, logger_map, align, attribution, bins, max_power_w)
    assert logger_map is not None  # _check_logs refused a missing one
    samples, model = _windowed(samples, model)
    on_device = kt.device == device_of(kt, device)
    joint = _joint(samples, model, attribution)
    lmap = ShiftedMap(logger_map, kt.origin_ns)
    t_logs = lmap.to_host(samples["source_ts"])  # once: the profiles below map through lmap themselves
    check_overlap(kt, on_device, t_logs, trace_notes)
    conc = kt.concurrent()
    alignment, t_logs = aligned_logs(kt, samples, t_logs, model, on_device, conc, lmap,
                                     "asked" if align is True else "one-sided" if one_sided(logger_map) else "",
                                     trace_notes)
    conc, attributed, overlap = overlapped(kt, samples, t_logs, on_device, conc, joint, trace_notes)
    # A window in a loop covers other kernels: the joint fit below replaces the attribution.
    found, it_of = Signatures(notes=trace_notes), kt.iteration()
    near = NearLogs(attributed, t_logs) if model is None and "seq" in (samples.dtype.names or ()) else None
    profile_signatures(found, kt, on_device, conc, attributed, near, lmap, it_of, margin=margin,
                       min_executions=min_executions, warmup_tolerance=warmup_tolerance,
                       sensor=None if joint else model, attribution="instant" if joint else attribution,
                       smoother=None if joint else "local")
    spans = _spans(kt, on_device & ~overlap.comm, it_of, found, joint, min_executions)
    if joint:
        assert model is not None
        if found.rows or found.rare:
            found.profiles = joint_attribution(samples, t_logs, kt, model, on_device, found, bins, overlap,
                                               max_power_w, spans)
    else:
        _instant(found, kt, attributed, t_logs, lmap, overlap, spans, it_of)
    elsewhere(found, kt, on_device)
    nothing_or_undetermined(found, bool(np.any(it_of[on_device] >= 0)))
    power_limit_notes(found, max_power_w)
    tp = trace_profile(kt, samples, t_logs, model, found, conc, alignment, lmap, it_of)
    tp = trace_wide(tp, found, kt, on_device, overlap, spans, it_of, samples, t_logs, model)
    tp = dataclasses.replace(tp, device_executions=int(on_device.sum()), zero_duration=zero)
    return closure_from(tp, counted, samples, model, on_device)


def _windowed(samples: np.ndarray, model: Optional[SensorModel]) -> tuple[np.ndarray, Optional[SensorModel]]:
    """The logs with their sensor's window written on them, and the sensor: the model given, or, where none is,
    the windows the logs declare (``window_ns``: windowed logs, the same engine as a SensorModel's)."""
    if model is None:
        model = declared_windows(samples)
    # Written onto the logs, so every step reads one description of the window.
    return logs_with_windows(samples, model), model


def _joint(samples: np.ndarray, model: Optional[SensorModel], attribution: str) -> bool:
    """Whether the logs are attributed by the joint fit over the whole timeline: an averaging sensor, unless
    ``"instant"`` is asked, whose reach exceeds half of :data:`_RESOLUTION_NS` (or ``"deconvolve"`` asked)."""
    return model is not None and model.averages and attribution != "instant" and (
        attribution == "deconvolve" or needs_deconvolution(samples, model, 1.0, _RESOLUTION_NS))


def _instant(found: Signatures, kt: KernelTrace, attributed: np.ndarray, t_logs: np.ndarray, lmap: ShiftedMap,
             overlap: Overlap, spans: Optional[Spans], it_of: np.ndarray) -> None:
    """Instantaneous logs: the stitched rows' intervals widened for the placement, the communication's rows
    from its level, and the coarse rows, the joint row and the spans' power from the logs."""
    if found.rows:
        placement_terms(found, kt, attributed, t_logs, lmap)
    instant_extras(found, kt, t_logs, np.asarray(attributed["total"], dtype=np.float64), spans, overlap, it_of)
    # After the coarse rows: a communication signature beside compute is its additive level, rare or not.
    instant_levels(found, kt, overlap)


def _spans(kt: KernelTrace, compute: np.ndarray, it_of: np.ndarray, found: Signatures, joint: bool,
           min_executions: int) -> Optional[Spans]:
    """Compute kernels on several streams: the spans past the warm-up where they overlap one another (None where
    none do), and what keeps the joint fit from attributing them, in ``found.span_note``."""
    ex = kt.executions
    step_of = np.where(it_of >= 0, kt.steps["step"][np.clip(it_of, 0, None)] if len(kt.steps) else -1, -1)
    spans = steady_spans(ex["start_ns"], ex["end_ns"], compute, step_of, found.first_steady)
    if not spans.overlapped.any():
        return None
    if joint and not found.rows:
        found.span_note = "no signature was profiled, so the averaging sensor's joint fit did not run"
    elif joint and len(spans.start) < min_executions:
        found.span_note = (f"{len(spans.start)} spans past the warm-up, fewer than min_executions={min_executions} "
                           "for the averaging sensor's joint fit to draw them as a class of their own")
        return spans.none()
    return spans


def _check_options(margin: Optional[float], min_executions: int, warmup_tolerance: float) -> None:
    """:func:`attribute_trace`'s numbers, each named when it is wrong."""
    if margin is not None:
        fraction(margin, "margin")
    integer_in(min_executions, "min_executions", 2)
    fraction(warmup_tolerance, "warmup_tolerance")


def _check_logs(samples: Any, logger_map: Optional[ClockMapLike], align: object, attribution: str,
                bins: int, max_power_w: Optional[float]) -> None:
    """The logs, their clock map and how they are to be attributed, each named when it is wrong."""
    if not isinstance(samples, np.ndarray):
        # A capture is picked apart above this layer (its logs, their map onto the trace's clock, its sensor
        # and its counter: fingrav_native.app._trace.capture_inputs), so that this one reads arrays only.
        raise ValueError(f"samples: expected a structured array with source_ts and power fields, not a "
                         f"{type(samples).__name__}; a PowerCapture is resolved into its logs, clock map, sensor "
                         "and counter by fingrav_native.profile_trace")
    if samples.dtype.names is None or "source_ts" not in samples.dtype.names:
        raise ValueError("samples: expected a structured array with source_ts and power fields, or a PowerCapture")
    # Every log, before any is attributed: one absurd value (a flipped exponent) would poison every kernel
    # whose window it falls in, and the per-signature checks see only the logs inside their kernels.
    validate_samples(samples, require_total=True, max_power_w=max_power_w)
    if logger_map is None:
        raise ValueError("logger_map: required with an array of samples (a PowerCapture brings its own)")
    if not callable(getattr(logger_map, "to_host", None)):
        raise ValueError(f"logger_map={short_repr(logger_map)}: must be a clock map (to_host, error_bound_at), "
                         f"not a {type(logger_map).__name__}")
    if align not in ("auto", True, False):
        raise ValueError(f"align={align!r}: must be 'auto', True or False")
    choice(attribution, "attribution", ATTRIBUTIONS)
    if not isinstance(bins, int) or not 2 <= bins <= 64:
        raise ValueError(f"bins={bins!r}: must be an integer in [2, 64]")


def _checked_trace(trace: object) -> tuple[KernelTrace, list[str]]:
    """``trace`` as a KernelTrace whose executions are valid, and what was left out.

    Executions of zero recorded duration (3-7 % of the kernels of older Kineto traces, whose durations
    are whole microseconds) are below the trace's resolution: they are left out of the attribution and
    counted in a note, not refused with the whole trace; their energy falls between kernels.
    """
    if not isinstance(trace, KernelTrace):
        raise ValueError(f"trace: must be a KernelTrace here, not {type(trace).__name__}; read a file with "
                         "fingrav_native.files.read_trace, or call fingrav_native.profile_trace, which reads paths")
    notes: list[str] = []
    ex = trace.executions
    zero = np.asarray(ex["end_ns"] == ex["start_ns"]) if len(ex) else np.zeros(0, dtype=bool)
    if zero.any():
        if zero.all():
            raise ValueError(f"trace: all {len(ex)} kernel executions have zero recorded duration ({trace.source}); "
                             "nothing can be attributed (a trace whose clock ticks coarser than its kernels)")
        names = np.unique(trace.signatures["name"][ex["kernel_id"][zero]])
        notes.append(f"{int(zero.sum())} of {len(ex)} kernel executions have zero recorded duration (below the "
                     f"trace's resolution; {len(names)} kernel name(s), e.g. {str(names[0])[:60]!r}): a trace artefact, "
                     "with no energy to attribute, counted apart (neither used nor left out); what ran then is "
                     "counted between kernels")
        trace = trace.without(zero)
    unshaped = np.any(trace.signatures["grid"] < 0, axis=1) | np.any(trace.signatures["block"] < 0, axis=1)
    if unshaped.any():
        # A trace without launch shapes (ROCm's Kineto traces give none) keys a kernel by its name alone:
        # launches of one kernel with different grids, which draw different power, share one row.
        notes.append(f"{int(unshaped.sum())} of {len(unshaped)} kernel signature(s) have no grid or block in the "
                     f"trace (e.g. {str(trace.signatures['name'][unshaped][0])[:60]!r}): each is keyed by its name "
                     "alone, so launches of one kernel with different shapes share its row")
    validate_executions(trace.executions, "trace", exclusive=False)
    return trace, notes


def _zero_duration_on(trace: object, kept: KernelTrace, device: Optional[int]) -> int:
    """Executions of zero recorded duration on the logs' device, which ``_checked_trace`` took out of ``kept``."""
    if not isinstance(trace, KernelTrace) or len(trace.executions) == len(kept.executions):
        return 0
    ex = trace.executions
    zero = ex["end_ns"] == ex["start_ns"]
    dev = device_of(trace, device)
    return int(np.count_nonzero(zero & (trace.device == dev)))
