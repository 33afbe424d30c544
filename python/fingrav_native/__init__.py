"""fingrav-native: fine-grain GPU power profiles of sub-millisecond kernels.

An implementation of the FinGraV methodology (Singhania et al., "Methodology
for Fine-Grain GPU Power Visibility and Insights", ISPASS 2025) with a
low-overhead C++ core: a sampler thread that polls a power source into a
lock-free ring, an event log for execution markers, and (in the Python layer)
the steps that turn many noisy runs into one profile.

The subpackages follow the data flow (docs/ARCHITECTURE.md): ``backends``
(devices) and ``sim`` (the simulated device) produce runs, ``clocks`` maps
their timestamps onto host time, ``method`` turns runs into a profile,
``multi`` merges the ranks of a node, ``files`` saves and exports, ``app`` is
the ``fingrav`` command. This namespace re-exports the public API.
"""

from __future__ import annotations

# The old flat module paths ``fingrav_native.profile`` and ``fingrav_native.stitch``
# (forwarding modules now) share their names with public functions: import
# them first, so a later ``import fingrav_native.profile`` finds them loaded
# and does not rebind the package attribute from the function to the module.
from fingrav_native import profile as _old_profile_module  # noqa: F401  isort: skip
from fingrav_native import stitch as _old_stitch_module  # noqa: F401  isort: skip
from fingrav_native._core import (
    CHANNELS,
    FLAG_DERIVED,
    FLAG_SOURCE_GAP,
    MARKER_DTYPE,
    MARKER_HAS_DEVICE_TS,
    MAX_CAPACITY,
    MAX_PERIOD_NS,
    MIN_CAPACITY,
    MIN_PERIOD_NS,
    READING_DTYPE,
    SAMPLE_DTYPE,
    ClockSyncRecorder,
    ClockSyncStats,
    DeviceUnavailableError,
    EventLog,
    HostClockInfo,
    LibraryNotFoundError,
    MarkerKind,
    PowerSource,
    Sampler,
    SamplerError,
    SamplerStats,
    SourceInfo,
    SymbolNotFoundError,
    SyntheticSource,
    TimestampSource,
    host_time_ns,
    measure_brackets,
    measure_host_clock,
)
from fingrav_native._version import __version__
from fingrav_native.backends.amd import AmdBackend
from fingrav_native.backends.base import Backend, Capabilities, RunRecord
from fingrav_native.backends.nvidia import NvidiaBackend
from fingrav_native.backends.sim import SimBackend
from fingrav_native.backends.workloads import Workload
from fingrav_native.clocks.maps import (
    ClockMap,
    PiecewiseClockMap,
    ReadLatency,
    fit_clock_map,
    fit_one_sided_clock_map,
    fit_piecewise_clock_map,
    summarize_read_latency,
)
from fingrav_native.files.profiles import ProfileFormatError, load_profile, save_profile
from fingrav_native.files.trace import export_trace
from fingrav_native.insitu.align import LogAlignment, align_logs_to_trace
from fingrav_native.insitu.capture import (
    CaptureFormatError,
    ClockStepWarning,
    EpochMap,
    PowerCapture,
    PowerRecorder,
    fit_epoch_map,
    load_capture,
    record_torch,
)
from fingrav_native.insitu.kineto import read_kineto_trace
from fingrav_native.insitu.profile import profile_trace
from fingrav_native.insitu.results import IterationSummary, TraceProfile
from fingrav_native.method.align import (
    LogAssignment,
    NoLogsInExecutionsError,
    assign_logs_to_executions,
    place_logs,
    select_executions_of_interest,
)
from fingrav_native.method.golden import GoldenSelection, select_golden_runs
from fingrav_native.method.guidance import Guidance, GuidanceRow, lookup_guidance, target_loi_count
from fingrav_native.method.profile import profile, profile_interleaved, stitch_logs
from fingrav_native.method.records import EXECUTION_DTYPE, LOI_DTYPE, make_executions, validate_executions
from fingrav_native.method.results import ErrorBudget, ExecutionProfile, InterleavedProfile, Profile
from fingrav_native.method.steady import (
    SSE_EXECUTIONS,
    SSE_INDEX,
    PowerMeasurement,
    SspSearch,
    SspStep,
    find_ssp_executions,
)
from fingrav_native.method.stitch import (
    EnergyEstimate,
    StitchedChannel,
    StitchedProfile,
    WholeRunView,
    energy_per_execution,
    stitch,
    whole_run_view,
)
from fingrav_native.multi.node import merge_ranks, profile_distributed, profile_node
from fingrav_native.multi.results import NodeProfile

__all__ = [
    "NodeProfile",
    "merge_ranks",
    "profile_distributed",
    "profile_node",
    "export_trace",
    "ProfileFormatError",
    "load_profile",
    "save_profile",
    "Workload",
    "AmdBackend",
    "NvidiaBackend",
    "Backend",
    "Capabilities",
    "EXECUTION_DTYPE",
    "ErrorBudget",
    "ExecutionProfile",
    "InterleavedProfile",
    "LOI_DTYPE",
    "PowerMeasurement",
    "Profile",
    "RunRecord",
    "SSE_EXECUTIONS",
    "SSE_INDEX",
    "SimBackend",
    "SspSearch",
    "SspStep",
    "find_ssp_executions",
    "make_executions",
    "profile",
    "profile_interleaved",
    "stitch_logs",
    "profile_trace",
    "IterationSummary",
    "TraceProfile",
    "read_kineto_trace",
    "LogAlignment",
    "align_logs_to_trace",
    "PowerRecorder",
    "PowerCapture",
    "load_capture",
    "record_torch",
    "EpochMap",
    "fit_epoch_map",
    "ClockStepWarning",
    "CaptureFormatError",
    "validate_executions",
    "CHANNELS",
    "ClockSyncRecorder",
    "ClockSyncStats",
    "TimestampSource",
    "measure_brackets",
    "FLAG_DERIVED",
    "FLAG_SOURCE_GAP",
    "MARKER_DTYPE",
    "MARKER_HAS_DEVICE_TS",
    "MAX_CAPACITY",
    "MAX_PERIOD_NS",
    "MIN_CAPACITY",
    "MIN_PERIOD_NS",
    "READING_DTYPE",
    "SAMPLE_DTYPE",
    "EventLog",
    "HostClockInfo",
    "MarkerKind",
    "PowerSource",
    "Sampler",
    "SamplerError",
    "LibraryNotFoundError",
    "SymbolNotFoundError",
    "DeviceUnavailableError",
    "SamplerStats",
    "SourceInfo",
    "SyntheticSource",
    "__version__",
    "host_time_ns",
    "measure_host_clock",
    "ClockMap",
    "PiecewiseClockMap",
    "ReadLatency",
    "fit_clock_map",
    "fit_one_sided_clock_map",
    "fit_piecewise_clock_map",
    "summarize_read_latency",
    "Guidance",
    "GuidanceRow",
    "lookup_guidance",
    "target_loi_count",
    "GoldenSelection",
    "select_golden_runs",
    "LogAssignment",
    "NoLogsInExecutionsError",
    "assign_logs_to_executions",
    "place_logs",
    "select_executions_of_interest",
    "EnergyEstimate",
    "StitchedChannel",
    "StitchedProfile",
    "WholeRunView",
    "energy_per_execution",
    "stitch",
    "whole_run_view",
]
