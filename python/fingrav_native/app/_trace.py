"""The in-situ entry point for paths: read the trace file, then attribute (``fingrav_native.profile_trace``)."""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from fingrav_native._checks import file_path
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.files._capture import PowerCapture
from fingrav_native.files._rocprof import read_trace
from fingrav_native.files._run_folder import is_run_folder, launch_capture, load_run_folder
from fingrav_native.insitu._profile import profile_trace as _attribute
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._trace import KernelTrace

__all__ = ["profile_trace"]


def _is_launch_log(value: Any) -> bool:
    """A LaunchLog (``fingrav_native.files.read_launches``), told by what it has: records to turn into a trace."""
    return callable(getattr(value, "to_trace", None)) and hasattr(value, "brackets") and hasattr(value, "clock")


def profile_trace(trace: Union[str, "os.PathLike[str]", KernelTrace, Any], samples: Any = None,
                  logger_map: Optional[ClockMapLike] = None, **options: Any) -> TraceProfile:
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
    samples : numpy.ndarray or PowerCapture, optional
        The power logs taken while it ran; required except with a
        ``fingrav run`` folder (which holds its capture; one given instead is
        used).
    logger_map : clock map, optional
        Maps the logs' timestamps onto the trace's clock (a capture brings its own).
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
    if isinstance(trace, (str, os.PathLike)) and is_run_folder(trace):
        launches, capture = load_run_folder(trace)
        return _launch_profile(launches, capture if samples is None else samples, logger_map, options)
    if _is_launch_log(trace):
        return _launch_profile(trace, samples, logger_map, options)
    if samples is None:
        raise ValueError("samples: required (the power logs or PowerCapture taken beside the trace); only a "
                         "fingrav run folder brings its own")
    kt = trace if isinstance(trace, KernelTrace) else read_trace(file_path(trace, "trace"))
    return _attribute(kt, samples, logger_map, **options)


def _launch_profile(launches: Any, samples: Any, logger_map: Optional[ClockMapLike],
                    options: dict[str, Any]) -> TraceProfile:
    """Attribute the logs to native launch records, the capture mapped through the records' own brackets."""
    if samples is None:
        raise ValueError("samples: required with launch records (the PowerCapture recorded beside them)")
    if not len(launches.records):
        raise ValueError("trace: the launch records hold no kernel execution; nothing to attribute")
    if isinstance(samples, PowerCapture) and logger_map is None:
        samples = launch_capture(samples, launches)
    return _attribute(launches.to_trace(), samples, logger_map, **options)
