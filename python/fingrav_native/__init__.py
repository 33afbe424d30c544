"""fingrav-native: fine-grain GPU power profiles of sub-millisecond kernels.

An implementation of the FinGraV methodology (Singhania et al., "Methodology
for Fine-Grain GPU Power Visibility and Insights", ISPASS 2025) with a
low-overhead C++ core: a sampler thread that polls a power source into a
lock-free ring, an event log for execution markers, and (in the Python layer)
the steps that turn many noisy runs into one profile.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ._core import (
    CHANNELS,
    ClockSyncRecorder,
    ClockSyncStats,
    TimestampSource,
    measure_brackets,
    FLAG_DERIVED,
    FLAG_SOURCE_GAP,
    MARKER_DTYPE,
    MARKER_HAS_DEVICE_TS,
    MAX_PERIOD_NS,
    MIN_CAPACITY,
    MIN_PERIOD_NS,
    READING_DTYPE,
    SAMPLE_DTYPE,
    EventLog,
    HostClockInfo,
    MarkerKind,
    PowerSource,
    Sampler,
    SamplerError,
    LibraryNotFoundError,
    SymbolNotFoundError,
    DeviceUnavailableError,
    SamplerStats,
    SourceInfo,
    SyntheticSource,
    host_time_ns,
    measure_host_clock,
)
from .clocksync import (
    ClockMap,
    PiecewiseClockMap,
    ReadLatency,
    fit_clock_map,
    fit_one_sided_clock_map,
    fit_piecewise_clock_map,
    summarize_read_latency,
)
from .guidance import Guidance, GuidanceRow, lookup_guidance, target_loi_count
from .golden import GoldenSelection, select_golden_runs
from .align import (
    LogAssignment,
    NoLogsInExecutionsError,
    assign_logs_to_executions,
    place_logs,
    select_executions_of_interest,
)
from .stitch import (
    EnergyEstimate,
    StitchedChannel,
    StitchedProfile,
    WholeRunView,
    energy_per_execution,
    stitch,
    whole_run_view,
)
from .records import EXECUTION_DTYPE, LOI_DTYPE, make_executions, validate_executions
from .steady import SSE_EXECUTIONS, SSE_INDEX, PowerMeasurement, SspSearch, SspStep, find_ssp_executions
from .backend import Backend, Capabilities, RunRecord, SimBackend
from .profile import (
    ErrorBudget,
    ExecutionProfile,
    InterleavedProfile,
    Profile,
    profile,
    profile_interleaved,
    stitch_logs,
)
from .io import ProfileFormatError, load_profile, save_profile
from .workloads import Workload
from .amd import AmdBackend
from .nvidia import NvidiaBackend
from .multigpu import NodeProfile, merge_ranks, profile_distributed, profile_node
from .trace import export_trace

try:
    __version__ = version("fingrav-native")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

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
