"""The in-situ entry point for paths: read the trace file, then attribute (``fingrav_native.profile_trace``)."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Union

import numpy as np

from fingrav_native._checks import file_path
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.files._capture import PowerCapture
from fingrav_native.files._capture_read import load_capture
from fingrav_native.files._launches import LaunchLog
from fingrav_native.files._power_logs import read_power_log
from fingrav_native.files._rocprof import read_trace
from fingrav_native.files._run_folder import is_run_folder, launch_capture, load_run_folder
from fingrav_native.insitu._profile import attribute_trace as _attribute
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.records._recording import Recording

__all__ = ["load_power", "profile_trace"]


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

    The same as :func:`fingrav_native.insitu.profile_trace` (whose parameters
    ``options`` takes), with ``trace`` also a path: a torch.profiler (Kineto)
    Chrome trace (``.json``, ``.json.gz``), a rocprofv3 kernel trace (read by
    :func:`fingrav_native.files.read_trace`), or the folder ``fingrav run``
    wrote (its native launch records and its power capture: no ``samples``
    needed); or the launch records themselves (a ``LaunchLog`` from
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
        ``margin``, ``min_executions``, ``warmup_tolerance``, ``sensor``,
        ``attribution``, ``device``, ``bins``, ``align``.

    Returns
    -------
    TraceProfile

    Warns
    -----
    ClockMismatchWarning
        With launch records: their own clock brackets and the capture's
        disagree beyond their bounds (:func:`~fingrav_native.files._run_folder.launch_capture`).

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
    return _attribute(kt, samples, logger_map, **options)


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
    return _attribute(launches.to_trace(), samples, logger_map, **options)
