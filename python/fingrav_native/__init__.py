"""fingrav-native: fine-grain GPU power profiles of sub-millisecond kernels.

An implementation of the FinGraV methodology (Singhania et al., "Methodology
for Fine-Grain GPU Power Visibility and Insights", ISPASS 2025) with a
low-overhead C++ core. The names here are the public API, grouped by job:

Acquire (drive a device over time)
    :func:`open_device` (``"sim"``, ``"nvidia:0"``, ``"amd:0:socket"``, ...),
    :func:`profile` (a campaign: many runs of one kernel, paper Section IV-B),
    :func:`record` (power logs beside a running application).
Analyse (pure functions of what was measured)
    :func:`stitch_logs` (steps 5-8 on logs brought from anywhere),
    :func:`profile_trace` (per-kernel power inside an application, from its
    profiler trace), :func:`characterize` (a sensor's period, window, delay), and
    :func:`characterize_logs` (the same from logs recorded under a known load).
Save and load
    :func:`save`, :func:`load` (every result and recording, one guarded
    reader), :func:`export_trace` (Perfetto / Chrome trace).
Result and value types
    :class:`Recording`, :class:`Profile`, :class:`ExecutionProfile`,
    :class:`InterleavedProfile`, :class:`NodeProfile`, :class:`TraceProfile`,
    :class:`KernelTrace`, :class:`Characterisation`, :class:`SensorModel`,
    :class:`Capabilities`; :func:`sensor_preset`, :func:`make_executions` and
    the array layouts ``EXECUTION_DTYPE`` and ``SAMPLE_DTYPE``.
Tune
    :func:`threads_in_force` (the BLAS thread count a timing ran under) and
    :class:`thread_policy` (the package's one-BLAS-thread policy for its small
    solves, switched off to time it against its absence).
Errors and warnings
    Every one the package raises: each error is a :class:`FingravError` and
    each warning a :class:`FingravWarning` (one ``except`` or one filter for
    all of them), and keeps its standard base (``ValueError``, ...) too.

The pieces are in subpackages, each a public face over private modules:
``records`` (array layouts, the recording), ``sensors`` (sensor models and
their characterisation), ``clocks`` (clock maps), ``method`` (the paper's
steps), ``insitu`` (application traces), ``multi`` (node profiles),
``backends`` (devices), ``sim`` (the simulated device), ``files`` (formats),
``app`` (drivers and the ``fingrav`` command); ``native`` holds the C++ core's
objects and constants for experts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fingrav_native._core import (
        SAMPLE_DTYPE,
        DeviceUnavailableError,
        GpuMetricsFormatError,
        LibraryNotFoundError,
        SamplerError,
        SymbolNotFoundError,
    )
    from fingrav_native._errors import FingravError, FingravWarning
    from fingrav_native._threads import thread_policy, threads_in_force
    from fingrav_native._version import __version__
    from fingrav_native.app._characterize import characterize
    from fingrav_native.app._child import CommandNotRunnableError
    from fingrav_native.app._open import open_device
    from fingrav_native.app._profile import profile
    from fingrav_native.app._recorder import record
    from fingrav_native.app._trace import profile_trace
    from fingrav_native.backends._nvidia import UnknownSensorWindowWarning
    from fingrav_native.clocks._epoch import ClockStepWarning
    from fingrav_native.files._campaign import CampaignFormatError, CampaignLockedError, CampaignMismatchError
    from fingrav_native.files._capture import CaptureFormatError
    from fingrav_native.files._io import RecordingFormatError, load, save
    from fingrav_native.files._journal import RecoveredCaptureWarning
    from fingrav_native.files._launches import LaunchFormatError
    from fingrav_native.files._outputs import OutputFolderMissingError, OutputNotWritableError, OutputPathError
    from fingrav_native.files._power_logs import PowerLogFormatError
    from fingrav_native.files._profiles import ProfileFormatError
    from fingrav_native.files._trace import export_trace
    from fingrav_native.insitu._align import ClockMismatchWarning
    from fingrav_native.insitu._closure import EnergyClosureWarning
    from fingrav_native.insitu._results import TraceProfile
    from fingrav_native.insitu._trace import KernelTrace, TraceFileNotFoundError, TraceFormatError
    from fingrav_native.method._align import NoLogsInExecutionsError
    from fingrav_native.method._engine_design import FitTooLargeError
    from fingrav_native.method._phase import PhaseSteeringWarning
    from fingrav_native.method._pipeline import SensorResolutionWarning, stitch_logs
    from fingrav_native.method._results import ExecutionProfile, InterleavedProfile, Profile
    from fingrav_native.method._stitched import LogQualityWarning
    from fingrav_native.multi._results import NodeProfile
    from fingrav_native.records._layouts import EXECUTION_DTYPE, make_executions
    from fingrav_native.records._recording import Capabilities, Recording
    from fingrav_native.sensors._characterize import Characterisation
    from fingrav_native.sensors._counter import CounterDiscontinuityWarning
    from fingrav_native.sensors._from_logs import SplitDisagreementWarning, characterize_logs
    from fingrav_native.sensors._model import SensorModel, sensor_preset

#: Each public name -> the module that defines it. Loaded on first use (PEP 562), so ``import fingrav_native``
#: (and the ``fingrav`` command's start, which imports it first) loads neither scipy nor matplotlib nor any
#: analysis module until a name that needs them is used.
_WHERE = {
    "__version__": "fingrav_native._version",  # read from the installed metadata (importlib.metadata: tens of ms)
    "DeviceUnavailableError": "fingrav_native._core",
    "GpuMetricsFormatError": "fingrav_native._core",
    # The root (the compiled core imports it to create its errors under it: fingrav_native/_errors.py).
    "FingravError": "fingrav_native._errors",
    "FingravWarning": "fingrav_native._errors",
    "OutputFolderMissingError": "fingrav_native.files._outputs",
    "OutputNotWritableError": "fingrav_native.files._outputs",
    "OutputPathError": "fingrav_native.files._outputs",
    "LibraryNotFoundError": "fingrav_native._core",
    "thread_policy": "fingrav_native._threads",
    "threads_in_force": "fingrav_native._threads",
    "SAMPLE_DTYPE": "fingrav_native._core",
    "SamplerError": "fingrav_native._core",
    "SymbolNotFoundError": "fingrav_native._core",
    "characterize": "fingrav_native.app._characterize",
    "open_device": "fingrav_native.app._open",
    "profile": "fingrav_native.app._profile",
    "record": "fingrav_native.app._recorder",
    "profile_trace": "fingrav_native.app._trace",
    "UnknownSensorWindowWarning": "fingrav_native.backends._nvidia",
    "ClockStepWarning": "fingrav_native.clocks._epoch",
    "CampaignFormatError": "fingrav_native.files._campaign",
    "CampaignLockedError": "fingrav_native.files._campaign",
    "CampaignMismatchError": "fingrav_native.files._campaign",
    "CaptureFormatError": "fingrav_native.files._capture",
    "RecordingFormatError": "fingrav_native.files._io",
    "RecoveredCaptureWarning": "fingrav_native.files._journal",
    "PowerLogFormatError": "fingrav_native.files._power_logs",
    "load": "fingrav_native.files._io",
    "save": "fingrav_native.files._io",
    "ProfileFormatError": "fingrav_native.files._profiles",
    "export_trace": "fingrav_native.files._trace",
    "EnergyClosureWarning": "fingrav_native.insitu._closure",
    "TraceProfile": "fingrav_native.insitu._results",
    "KernelTrace": "fingrav_native.insitu._trace",
    "TraceFormatError": "fingrav_native.insitu._trace",
    "LaunchFormatError": "fingrav_native.files._launches",
    "CommandNotRunnableError": "fingrav_native.app._child",
    "TraceFileNotFoundError": "fingrav_native.insitu._trace",
    "ClockMismatchWarning": "fingrav_native.insitu._align",
    "LogQualityWarning": "fingrav_native.method._stitched",
    "CounterDiscontinuityWarning": "fingrav_native.sensors._counter",
    "SplitDisagreementWarning": "fingrav_native.sensors._from_logs",
    "NoLogsInExecutionsError": "fingrav_native.method._align",
    "FitTooLargeError": "fingrav_native.method._engine_design",
    "PhaseSteeringWarning": "fingrav_native.method._phase",
    "SensorResolutionWarning": "fingrav_native.method._pipeline",
    "stitch_logs": "fingrav_native.method._pipeline",
    "ExecutionProfile": "fingrav_native.method._results",
    "InterleavedProfile": "fingrav_native.method._results",
    "Profile": "fingrav_native.method._results",
    "NodeProfile": "fingrav_native.multi._results",
    "EXECUTION_DTYPE": "fingrav_native.records._layouts",
    "make_executions": "fingrav_native.records._layouts",
    "Capabilities": "fingrav_native.records._recording",
    "Recording": "fingrav_native.records._recording",
    "Characterisation": "fingrav_native.sensors._characterize",
    "characterize_logs": "fingrav_native.sensors._from_logs",
    "SensorModel": "fingrav_native.sensors._model",
    "sensor_preset": "fingrav_native.sensors._model",
}

#: The public names, by job (the module docstring lists them the same way; tests/test_public_api.py
#: checks that the two agree and that nothing else is public).
__all__ = [
    "__version__",
    # acquire
    "open_device", "profile", "record",
    # analyse
    "stitch_logs", "profile_trace", "characterize", "characterize_logs",
    # save and load
    "save", "load", "export_trace",
    # result and value types
    "Recording", "Profile", "ExecutionProfile", "InterleavedProfile", "NodeProfile", "TraceProfile",
    "KernelTrace", "Characterisation", "SensorModel", "Capabilities", "sensor_preset", "make_executions",
    "EXECUTION_DTYPE", "SAMPLE_DTYPE",
    # tune
    "threads_in_force", "thread_policy",
    # errors
    "FingravError",
    "ProfileFormatError", "CaptureFormatError", "TraceFormatError", "CampaignFormatError",
    "CampaignMismatchError", "CampaignLockedError", "NoLogsInExecutionsError", "LibraryNotFoundError",
    "SymbolNotFoundError", "DeviceUnavailableError", "SamplerError",
    "RecordingFormatError", "PowerLogFormatError", "TraceFileNotFoundError", "GpuMetricsFormatError",
    "OutputPathError", "OutputFolderMissingError", "OutputNotWritableError",
    "LaunchFormatError", "CommandNotRunnableError", "FitTooLargeError",
    # warnings
    "FingravWarning",
    "SensorResolutionWarning", "PhaseSteeringWarning", "ClockStepWarning", "UnknownSensorWindowWarning",
    "EnergyClosureWarning", "ClockMismatchWarning", "SplitDisagreementWarning", "LogQualityWarning",
    "CounterDiscontinuityWarning", "RecoveredCaptureWarning",
]


#: The subpackages, reachable as attributes (``fingrav_native.method``) after ``import fingrav_native``.
_SUBPACKAGES = ("app", "backends", "clocks", "files", "insitu", "method", "multi", "native", "records", "sensors", "sim")


def __getattr__(name: str) -> Any:
    # A public name or a subpackage is imported on first use (PEP 562), so ``fg.profile`` and ``fg.sim.SimGPU``
    # work after ``import fingrav_native`` as they would with eager imports.
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value  # cached: the lookup runs once per name
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # What tab completion offers: the public names and the subpackages, not the import machinery.
    return sorted([*__all__, *_SUBPACKAGES])
