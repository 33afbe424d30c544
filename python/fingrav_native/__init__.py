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
Errors and warnings
    Every one the entry points above raise.

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
from typing import Any

from fingrav_native._core import (
    SAMPLE_DTYPE,
    DeviceUnavailableError,
    LibraryNotFoundError,
    SamplerError,
    SymbolNotFoundError,
)
from fingrav_native._version import __version__
from fingrav_native.app._characterize import characterize
from fingrav_native.app._open import open_device
from fingrav_native.app._profile import profile
from fingrav_native.app._recorder import record
from fingrav_native.app._trace import profile_trace
from fingrav_native.backends._nvidia import UnknownSensorWindowWarning
from fingrav_native.clocks._epoch import ClockStepWarning
from fingrav_native.files._campaign import CampaignFormatError, CampaignLockedError, CampaignMismatchError
from fingrav_native.files._capture import CaptureFormatError
from fingrav_native.files._io import load, save
from fingrav_native.files._profiles import ProfileFormatError
from fingrav_native.files._trace import export_trace
from fingrav_native.insitu._closure import EnergyClosureWarning
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._trace import KernelTrace, TraceFormatError
from fingrav_native.method._align import NoLogsInExecutionsError
from fingrav_native.method._phase import PhaseSteeringWarning
from fingrav_native.method._pipeline import SensorResolutionWarning, stitch_logs
from fingrav_native.method._results import ExecutionProfile, InterleavedProfile, Profile
from fingrav_native.multi._results import NodeProfile
from fingrav_native.records._layouts import EXECUTION_DTYPE, make_executions
from fingrav_native.records._recording import Capabilities, Recording
from fingrav_native.sensors._characterize import Characterisation
from fingrav_native.sensors._from_logs import characterize_logs
from fingrav_native.sensors._model import SensorModel, sensor_preset

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
    # errors
    "ProfileFormatError", "CaptureFormatError", "TraceFormatError", "CampaignFormatError",
    "CampaignMismatchError", "CampaignLockedError", "NoLogsInExecutionsError", "LibraryNotFoundError",
    "SymbolNotFoundError", "DeviceUnavailableError", "SamplerError",
    # warnings
    "SensorResolutionWarning", "PhaseSteeringWarning", "ClockStepWarning", "UnknownSensorWindowWarning",
    "EnergyClosureWarning",
]


#: The subpackages, reachable as attributes (``fingrav_native.method``) after ``import fingrav_native``.
_SUBPACKAGES = ("app", "backends", "clocks", "files", "insitu", "method", "multi", "native", "records", "sensors", "sim")


def __getattr__(name: str) -> Any:
    # A subpackage is imported on first use (PEP 562), so ``fg.sim.SimGPU`` works after ``import fingrav_native``.
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # What tab completion offers: the public names and the subpackages, not the import machinery.
    return sorted([*__all__, *_SUBPACKAGES])
