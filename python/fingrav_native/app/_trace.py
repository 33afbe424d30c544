"""The in-situ entry point for paths: read the trace file, then attribute (``fingrav_native.profile_trace``)."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Union

from fingrav_native._checks import file_path
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.files._capture import load_capture
from fingrav_native.files._power_logs import read_power_log
from fingrav_native.files._rocprof import read_trace
from fingrav_native.insitu._profile import profile_trace as _attribute
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._trace import KernelTrace

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


def profile_trace(trace: Union[str, "os.PathLike[str]", KernelTrace], samples: Any,
                  logger_map: Optional[ClockMapLike] = None, *, power_log: Optional[Mapping[str, Any]] = None,
                  **options: Any) -> TraceProfile:
    """Per-kernel power and energy of a running application, from its profiler trace file and power logs.

    The same as :func:`fingrav_native.insitu.profile_trace` (whose parameters
    ``options`` takes), with ``trace`` also a path: a torch.profiler (Kineto)
    Chrome trace (``.json``, ``.json.gz``) or a rocprofv3 ``kernel_trace.csv``,
    read by :func:`fingrav_native.files.read_trace`.

    Parameters
    ----------
    trace : str, path or KernelTrace
        The application's kernels.
    samples : numpy.ndarray, PowerCapture or path
        The power logs taken while it ran; a path is read by :func:`load_power`:
        a capture file, or a log nvidia-smi, amd-smi, rocm-smi or dcgmi wrote
        (:func:`~fingrav_native.files.read_power_log`).
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
    """
    if isinstance(samples, (str, os.PathLike)):
        samples = load_power(samples, device=options.get("device"), sensor=options.get("sensor"), power_log=power_log)
        if options.get("sensor") is not None:  # read by the reader (a preset, a model or a characterisation file)
            options["sensor"] = samples.sensor
    elif power_log:
        raise ValueError("power_log: only with samples a path to a tool's power log")
    kt = trace if isinstance(trace, KernelTrace) else read_trace(file_path(trace, "trace"))
    return _attribute(kt, samples, logger_map, **options)
