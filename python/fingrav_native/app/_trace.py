"""The in-situ entry point for paths: read the trace file, then attribute (``fingrav_native.profile_trace``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

import numpy as np

from fingrav_native._checks import file_path
from fingrav_native._version import __version__
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.files._capture import PowerCapture
from fingrav_native.files._capture_read import load_capture
from fingrav_native.files._launches import LaunchLog
from fingrav_native.files._power_logs import read_power_log
from fingrav_native.files._rocprof import read_trace
from fingrav_native.files._run_folder import is_run_folder, launch_capture, load_run_folder
from fingrav_native.insitu._closure_fit import MappedCounter
from fingrav_native.insitu._profile import attribute_trace as _attribute
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._trace import TRACE_CLOCKS, KernelTrace
from fingrav_native.records._recording import Recording
from fingrav_native.sensors._model import SensorModel

__all__ = ["CaptureInputs", "capture_counter", "capture_inputs", "load_power", "profile_trace"]


def load_power(path: Union[str, "os.PathLike[str]"], *, device: Optional[int] = None, sensor: Any = None,
               power_log: Optional[Mapping[str, Any]] = None) -> Any:
    """A power capture (``.npz``, or its journal) or a power log another tool wrote, told apart by content.

    Parameters
    ----------
    path : str or path-like
    device : int, optional
        The GPU whose logs to read from a log of several.
    sensor : optional
        What each log measures (:func:`~fingrav_native.files.read_power_log`).
    power_log : dict, optional
        Further arguments of :func:`~fingrav_native.files.read_power_log`
        (``tz``, ``kind``, ``start``, ``period_s``, ``boottime_offset_ns``, ...).

    Returns
    -------
    PowerCapture
    """
    path = file_path(path, "samples")
    with open(path, "rb") as f:
        magic = f.read(8)
    # A capture is a zip (.npz) or the recorder's journal; anything else is a tool's text log.
    if magic.startswith(b"PK") or path.endswith(".journal"):
        if power_log:
            raise ValueError(f"power_log: {path} is a power capture, not a tool's power log; drop power_log=")
        return load_capture(path)
    return read_power_log(path, device=device, sensor=sensor, **dict(power_log or {}))


def profile_trace(trace: Union[str, "os.PathLike[str]", KernelTrace, LaunchLog], samples: Any = None,
                  logger_map: Optional[ClockMapLike] = None, *, power_log: Optional[Mapping[str, Any]] = None,
                  **options: Any) -> TraceProfile:
    """Per-kernel power and energy of a running application, from its kernels and the power logs taken beside it.

    A training or inference loop is FinGraV's protocol for free (paper
    Section IV-A): every execution of a kernel is a run at a random phase
    against the free-running power logger. The executions are grouped by
    signature (name, grid, block), each signature's golden executions kept
    (Section IV-B, step 5) past the loop's warm-up, and the logs attributed
    to them: placed at their instants and stitched (steps 6-8), or, for an
    averaging sensor, deconvolved over the device's whole timeline.

    ``trace`` is a path: a torch.profiler (Kineto) Chrome trace (``.json``,
    ``.json.gz``), a rocprofv3 kernel trace (read by
    :func:`fingrav_native.files.read_trace`), or the folder ``fingrav run``
    wrote (its native launch records and its power capture: no ``samples``
    needed); or the kernels already read (a ``KernelTrace``), or the launch
    records themselves (a ``LaunchLog`` from
    :func:`fingrav_native.files.read_launches`) with the capture.

    Parameters
    ----------
    trace : str, path, KernelTrace or LaunchLog
        The application's kernels.
    samples : numpy.ndarray, Recording, PowerCapture or path, optional
        The power logs taken while it ran; a path is read by :func:`load_power`:
        a capture file, or a log nvidia-smi, amd-smi, rocm-smi or dcgmi wrote
        (:func:`~fingrav_native.files.read_power_log`). Required except with a
        ``fingrav run`` folder (which holds its capture; one given instead is
        used). A :class:`~fingrav_native.records.Recording` brings its logs,
        its sensor model (used unless ``sensor`` is given) and its clock
        brackets: without ``logger_map`` it is the capture it holds
        (:meth:`~fingrav_native.files.PowerCapture.from_recording`, placed on
        the trace's clock through those brackets, as a capture is); with
        ``logger_map``, its logs are placed through that map. A Recording
        holding executions or markers (the kernels come from ``trace``), or,
        without ``logger_map``, lacking the CLOCK_REALTIME brackets or the
        capture's ``period_ns``, is refused, naming what it lacks.
    logger_map : clock map, optional
        Maps the logs' timestamps onto the trace's clock (a capture brings its own).
    power_log : dict, optional
        With ``samples`` a tool's power log: the arguments of
        :func:`~fingrav_native.files.read_power_log` beyond ``device`` and
        ``sensor`` (``tz``, ``start``, ``period_s``, ``boottime_offset_ns``, ...).
    **options
        Keyword options of the attribution, each described below.
    margin : float, optional
        Golden-execution bin margin in (0, 1); default: the paper's Table I
        for each signature's median duration (5 % below 200 us, 2 % above),
        the policy :func:`~fingrav_native.stitch_logs` and
        :func:`~fingrav_native.profile` share.
    min_executions : int
        Signatures with fewer executions are listed in ``skipped``.
    warmup_tolerance : float
        Relative power difference from the loop's steady state below which
        executions count as past the warm-up.
    sensor : SensorModel or str, optional
        What each log measures (a capture's own model by default; None:
        instantaneous logs).
    attribution : {"auto", "instant", "deconvolve"}
        ``"auto"``: logs that average over more than a few microseconds are
        deconvolved over the whole timeline
        (:func:`~fingrav_native.method.fit_timeline`: every
        signature's curve and the gaps' power at once, since a window in a
        loop covers several kernels); ``"instant"``: each log is placed at
        one instant (paper step 6).
    device : int, optional
        The trace's device the power logs belong to; needed when the trace
        holds kernels of several devices.
    bins : int
        Curve bins asked per signature when deconvolving: the most a curve
        gets; each gets fewer where its executions hold fewer than ten window
        edges per bin. Coarse bins misfit a kernel whose power changes
        within one (a GEMM's first microseconds as work fills the GPU), and
        averaging windows hand that misfit to the short kernels beside it:
        on a simulated loop under a 1 ms average, 8 bins left a 40 us
        kernel 1.6 % low with no noise at all, 16 left 0.7 %.
    align : {"auto", True, False}
        Measure the logs' offset against the trace's kernels
        (:func:`~fingrav_native.insitu.align_logs_to_trace`,
        instantaneous logs; reported in ``TraceProfile.alignment``) and
        correct it: ``"auto"`` when the logger's clock map is one-sided (it
        lands on each log's publication, tens of microseconds late), True
        always, False never (not even measured). The power's own lag
        behind activity is fitted beside the offset (a first-order response,
        profiled out), so it is not taken for one; a map from bracketed
        reads is trusted and ``"auto"`` only reports the offset there, with
        a warning where it lies beyond the map's own error bound (the
        trace and the capture disagree on the clock). A map whose bound is
        wider than the fine search (+-100 us: a tool's millisecond stamps, a
        start and period given by hand) has offsets across its whole bound
        searched, and ``"auto"`` applies one found inside it (the map's own
        error, measured; an averaging sensor's too, whose trade with
        ``delay_ns`` is microseconds against such a bound) and warns of one
        beyond it. An averaging sensor's
        logs (a window, a filter, a counter's intervals) are checked through
        its forward model instead (``insitu._align_windows``: each log's
        power regressed on each signature group's busy share of its
        response, offsets of up to 250 ms searched coarse to fine): the
        offset is reported and never applied (it trades with the model's
        ``delay_ns``), with a :class:`ClockMismatchWarning` where its
        interval lies beyond the map's bound, the trace's placement error and
        the measurement's resolution (5 % of the window, at least 50 us),
        and a note "offset unchecked" where the logs cannot determine it. The
        measurement costs about what the rest of the attribution does,
        whatever the trace's length: its regression has a bounded number of
        columns (the eight busiest signatures, the rest pooled; fewer where
        the logs are few, ``LogAlignment.pooled``).
    max_power_w : float, optional
        What the board can draw (its power limit, e.g. NVML's enforced limit
        or the device's TDP): a kernel whose power exceeds it is a warning
        (the sensor model is wrong, or the logs do not separate it).
    energy_counter : EnergyCounter, optional
        An energy counter's readings on the logs' clock (``logger_map``
        maps them): the kernels and gaps are checked against it over the
        trace (``TraceProfile.closure``; an
        :class:`~fingrav_native.insitu.EnergyClosureWarning` when they
        disagree). Default: the capture's counter, where it holds one.

    Returns
    -------
    TraceProfile

    Warns
    -----
    ClockMismatchWarning
        With launch records: their own clock brackets and the capture's
        disagree beyond their bounds (the capture is mapped through the
        launch records' brackets).

    Notes
    -----
    With launch records and a capture, the logs are placed on the records'
    clock through the brackets the launch file took beside them, the
    capture's brackets of that clock being the fallback (paper Section IV-A
    places each log by bracketed reads of the clocks involved).
    """
    if isinstance(samples, Recording):
        samples = _recording_logs(samples, logger_map, options)
    elif isinstance(samples, (str, os.PathLike)):
        samples = load_power(samples, device=options.get("device"), sensor=options.get("sensor"), power_log=power_log)
        if options.get("sensor") is not None:  # read by the reader (a preset, a model or a characterisation file)
            options["sensor"] = samples.sensor
    elif power_log:
        raise ValueError("power_log: only with samples a path to a tool's power log")
    if isinstance(trace, (str, os.PathLike)) and is_run_folder(trace):
        launches, capture = load_run_folder(trace)
        return _launch_profile(launches, capture if samples is None else samples, logger_map, options)
    if isinstance(trace, LaunchLog):
        return _launch_profile(trace, samples, logger_map, options)
    if samples is None:
        raise ValueError("samples: required (the power logs or PowerCapture taken beside the trace); only a "
                         "fingrav run folder brings its own")
    kt = trace if isinstance(trace, KernelTrace) else read_trace(file_path(trace, "trace"))
    return _attribute_logs(kt, samples, logger_map, options)


def _recording_logs(recording: Recording, logger_map: Optional[ClockMapLike], options: dict[str, Any]) -> Any:
    """What a Recording given as ``samples`` stands for: the capture it holds, or its logs beside ``logger_map``."""
    if logger_map is None:
        return PowerCapture.from_recording(recording, "samples")
    for part in ("executions", "markers"):
        if getattr(recording, part) is not None:
            raise ValueError(f"samples: the Recording holds {part}, which profile_trace does not take (the kernels "
                             "come from trace=); give a Recording of the logs and their clocks")
    if options.get("sensor") is None and recording.sensor is not None:
        options["sensor"] = recording.sensor
    return np.array(recording.samples)


def _launch_profile(launches: LaunchLog, samples: Any, logger_map: Optional[ClockMapLike],
                    options: dict[str, Any]) -> TraceProfile:
    """Attribute the logs to native launch records, the capture mapped through the records' own brackets."""
    if samples is None:
        raise ValueError("samples: required with launch records (the PowerCapture recorded beside them)")
    if not len(launches.records):
        raise ValueError("trace: the launch records hold no kernel execution; nothing to attribute")
    if isinstance(samples, PowerCapture) and logger_map is None:
        samples = launch_capture(samples, launches)
    return _attribute_logs(launches.to_trace(), samples, logger_map, options)


def _attribute_logs(kt: KernelTrace, samples: Any, logger_map: Optional[ClockMapLike],
                    options: dict[str, Any]) -> TraceProfile:
    """Attribute the logs to ``kt``'s kernels, a capture first resolved into what the attribution reads."""
    if isinstance(samples, PowerCapture):
        given = options.get("energy_counter")
        inputs = capture_inputs(samples, kt, logger_map, counter=given is None)
        options = {**options, "sensor": inputs.sensor if options.get("sensor") is None else options["sensor"],
                   "energy_counter": inputs.counter if given is None else given}
        return _attribute(kt, inputs.samples, inputs.logger_map, **options)
    if not isinstance(samples, np.ndarray):
        raise ValueError("samples: expected a structured array with source_ts and power fields, or a PowerCapture")
    return _attribute(kt, samples, logger_map, **options)


@dataclass(frozen=True)
class CaptureInputs:
    """A capture as the attribution reads it (:func:`capture_inputs`).

    Attributes
    ----------
    samples : numpy.ndarray
        Its power logs.
    logger_map : clock map
        The logs' timestamps onto the trace's clock.
    sensor : SensorModel, optional
        What each log measures (None: instantaneous logs).
    counter : MappedCounter, optional
        Its energy counter with the map of the counter's own stamps onto the
        trace's clock, or why the counter cannot be read; None: it holds none,
        or it was not asked for.
    """

    samples: np.ndarray
    logger_map: ClockMapLike
    sensor: Optional[SensorModel]
    counter: Optional[MappedCounter]


def capture_inputs(capture: PowerCapture, trace: KernelTrace, logger_map: Optional[ClockMapLike] = None, *,
                   counter: bool = True) -> CaptureInputs:
    """A power capture resolved into the arrays and maps the in-situ attribution reads.

    Parameters
    ----------
    capture : PowerCapture
        The power recorded beside the application.
    trace : KernelTrace
        The application's kernels: their clock picks which of the capture's
        bracketed host clocks the logs are mapped onto (CLOCK_REALTIME for
        Kineto, CLOCK_BOOTTIME for rocprofv3 and rocpd, :data:`TRACE_CLOCKS`).
    logger_map : clock map, optional
        Maps the logs onto the trace's clock instead of the capture's own
        brackets (no clock is then checked).
    counter : bool
        Read the capture's energy counter (False where one is given instead).

    Returns
    -------
    CaptureInputs
        The logs, their map, the capture's sensor and its counter.

    Raises
    ------
    ValueError
        Without ``logger_map``: a trace on a clock no capture brackets, or a
        capture without brackets of the trace's clock (format version 1
        brackets only CLOCK_REALTIME), saying what to record again.

    Notes
    -----
    Paper Section IV-A places each power log by bracketed reads of the
    clocks involved: the capture's brackets of the trace's own clock
    (:meth:`~fingrav_native.files.PowerCapture.logger_map`). The counter
    brings its own map (:func:`capture_counter`), fitted from its readings
    where they are not on the logs' clock.
    """
    clock = TRACE_CLOCKS.get(trace.clock)
    if logger_map is None:
        if clock is None:
            raise ValueError(f"trace: its kernels are on the {trace.clock} clock ({trace.source}), which a capture "
                             "does not bracket; pass logger_map= mapping the logs onto that clock")
        if clock not in capture.clocks:
            made_by = capture.meta.get("fingrav_native_version", "an older version")
            raise ValueError(f"samples: the trace's kernels are stamped on {clock} ({trace.source}), and this capture "
                             f"brackets only {', '.join(capture.clocks)} (recorded by fingrav_native {made_by}), so "
                             f"its logs cannot be placed on the trace. Record the power again with fingrav_native "
                             f"{__version__} (PowerRecorder, fingrav_native.record), whose captures bracket "
                             "CLOCK_REALTIME, CLOCK_BOOTTIME and CLOCK_MONOTONIC; or pass logger_map= mapping the "
                             f"logs onto {clock}")
        logger_map = capture.logger_map(clock=clock)
    # The energy closure's counter (insitu/_closure.py), on the trace's clock as the logs are.
    mapped = capture_counter(capture, clock or "CLOCK_REALTIME") if counter else None
    return CaptureInputs(capture.samples, logger_map, capture.sensor, mapped)


def capture_counter(capture: PowerCapture, clock: str = "CLOCK_REALTIME") -> Optional[MappedCounter]:
    """A capture's energy counter with the map of its own stamps onto ``clock``, or why it cannot be read.

    Parameters
    ----------
    capture : PowerCapture
    clock : str
        The host clock the trace stamps on (the counter lands on the logs' timeline).

    Returns
    -------
    MappedCounter or None
        None where the capture holds no counter. A counter that cannot be
        read (a glitched reading refused by its own checks) gives the reason,
        said to be the counter's so that it is not taken for the power logs:
        the profile stands without its energy closure.

    Notes
    -----
    The counter lands on the logs' timeline by bracketed reads of the clocks
    involved, as each log does (paper Section IV-A); what the closure then
    compares is in :mod:`fingrav_native.insitu._closure`.
    """
    try:
        got = capture.energy_counter(clock)
    except ValueError as exc:
        # The counter's readings are checked as samples of their own ("samples: total ..."): said to be the
        # counter's, so that the message is not read as one about the power logs.
        return MappedCounter(unreadable=f"the capture's energy counter (not its power logs) cannot be read: {exc}"
                             + (" (the reading numbered there is the counter's)" if "at log" in str(exc) else ""))
    return None if got is None else MappedCounter(got[0], got[1])
