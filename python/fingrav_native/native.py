"""The C++ core for experts: the sampler, the event log, power sources, clock reads and their constants.

Everything here is the compiled extension's (``fingrav_native._core``, typed by
``_core.pyi``): :class:`Sampler` polls a :class:`PowerSource` into a lock-free
ring of ``SAMPLE_DTYPE`` records, :class:`EventLog` records execution markers
(``MARKER_DTYPE``), :func:`measure_brackets` and :class:`ClockSyncRecorder`
read a device clock between two host reads, :func:`host_time_ns` is the host
clock every sample is stamped on (CLOCK_MONOTONIC_RAW).
"""

from __future__ import annotations

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

__all__ = [
    "CHANNELS", "FLAG_DERIVED", "FLAG_SOURCE_GAP", "MARKER_DTYPE", "MARKER_HAS_DEVICE_TS", "MAX_CAPACITY",
    "MAX_PERIOD_NS", "MIN_CAPACITY", "MIN_PERIOD_NS", "READING_DTYPE", "SAMPLE_DTYPE", "ClockSyncRecorder",
    "ClockSyncStats", "DeviceUnavailableError", "EventLog", "HostClockInfo", "LibraryNotFoundError", "MarkerKind",
    "PowerSource", "Sampler", "SamplerError", "SamplerStats", "SourceInfo", "SymbolNotFoundError", "SyntheticSource",
    "TimestampSource", "host_time_ns", "measure_brackets", "measure_host_clock",
]
