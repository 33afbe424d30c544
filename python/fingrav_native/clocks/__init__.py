"""Clock domains: maps between a device's, a logger's and the host's clocks.

Paper Section IV-A ("High-resolution CPU-GPU sync"), extended with drift (offset and
skew, piecewise over long campaigns) and an error bound; the epoch map (host monotonic
clock onto CLOCK_REALTIME, with its steps) and the host alignment between the ranks of
a node are fits of the same kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.clocks._epoch import ClockStep, ClockStepWarning, EpochMap, fit_epoch_map
    from fingrav_native.clocks._host import (
        DEFAULT_PRIOR_SKEW_PPM,
        HostAlignment,
        HostClock,
        MonotonicRawClock,
        SkewedClock,
        fit_host_alignment,
    )
    from fingrav_native.clocks._latency import ReadLatency, summarize_read_latency
    from fingrav_native.clocks._maps import (
        MAX_SKEW_PPM,
        MIN_BRACKETS,
        MIN_ONE_SIDED,
        ClockMap,
        ClockMapLike,
        PiecewiseClockMap,
        host_ns_exact,
        host_relative,
    )
    from fingrav_native.clocks._onesided import fit_one_sided_clock_map
    from fingrav_native.clocks._piecewise import fit_piecewise_clock_map
    from fingrav_native.clocks._record_clocks import RecordClockError, record_clock_error
    from fingrav_native.clocks._runs import (
        Timeline,
        executions_from_markers,
        fit_device_map,
        fit_logger_map,
        nominal_durations,
        timeline_of,
    )
    from fingrav_native.clocks._twosided import OffsetMethod, fit_clock_map

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "ClockMap": "_maps",
    "ClockMapLike": "_maps",
    "ClockStep": "_epoch",
    "ClockStepWarning": "_epoch",
    "DEFAULT_PRIOR_SKEW_PPM": "_host",
    "EpochMap": "_epoch",
    "HostAlignment": "_host",
    "HostClock": "_host",
    "MAX_SKEW_PPM": "_maps",
    "MIN_BRACKETS": "_maps",
    "MIN_ONE_SIDED": "_maps",
    "MonotonicRawClock": "_host",
    "OffsetMethod": "_twosided",
    "PiecewiseClockMap": "_maps",
    "ReadLatency": "_latency",
    "RecordClockError": "_record_clocks",
    "SkewedClock": "_host",
    "Timeline": "_runs",
    "executions_from_markers": "_runs",
    "fit_clock_map": "_twosided",
    "fit_device_map": "_runs",
    "fit_epoch_map": "_epoch",
    "fit_host_alignment": "_host",
    "fit_logger_map": "_runs",
    "fit_one_sided_clock_map": "_onesided",
    "fit_piecewise_clock_map": "_piecewise",
    "host_ns_exact": "_maps",
    "host_relative": "_maps",
    "nominal_durations": "_runs",
    "record_clock_error": "_record_clocks",
    "summarize_read_latency": "_latency",
    "timeline_of": "_runs",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
