"""The in-situ entry point for paths: read the trace file, then attribute (``fingrav_native.profile_trace``)."""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from fingrav_native._checks import file_path
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.files._rocprof import read_trace
from fingrav_native.insitu._profile import profile_trace as _attribute
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._trace import KernelTrace

__all__ = ["profile_trace"]


def profile_trace(trace: Union[str, "os.PathLike[str]", KernelTrace], samples: Any,
                  logger_map: Optional[ClockMapLike] = None, **options: Any) -> TraceProfile:
    """Per-kernel power and energy of a running application, from its profiler trace file and power logs.

    The same as :func:`fingrav_native.insitu.profile_trace` (whose parameters
    ``options`` takes), with ``trace`` also a path: a torch.profiler (Kineto)
    Chrome trace (``.json``, ``.json.gz``) or a rocprofv3 ``kernel_trace.csv``,
    read by :func:`fingrav_native.files.read_trace`.

    Parameters
    ----------
    trace : str, path or KernelTrace
        The application's kernels.
    samples : numpy.ndarray or PowerCapture
        The power logs taken while it ran.
    logger_map : clock map, optional
        Maps the logs' timestamps onto the trace's clock (a capture brings its own).
    **options
        ``margin``, ``min_executions``, ``warmup_tolerance``, ``sensor``,
        ``attribution``, ``device``, ``bins``, ``align``.

    Returns
    -------
    TraceProfile
    """
    kt = trace if isinstance(trace, KernelTrace) else read_trace(file_path(trace, "trace"))
    return _attribute(kt, samples, logger_map, **options)
