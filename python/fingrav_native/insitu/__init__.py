"""In-situ profiling: per-kernel power and energy inside a running application, from its profiler trace.

:class:`KernelTrace` holds an application's kernel executions on the host clock;
:func:`fingrav_native.profile_trace` attributes power logs to them and, given an energy counter,
checks that the kernels and the gaps between them add up to it (:class:`EnergyClosure`); its result
is a :class:`TraceProfile`. The logs' offset against the kernels, measured alone:
:func:`align_logs_to_trace` (logs of an instant) and :func:`measure_window_offset` (averaging logs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.insitu._align import ClockMismatchWarning, LogAlignment, align_logs_to_trace
    from fingrav_native.insitu._align_windows import measure_window_offset
    from fingrav_native.insitu._closure import EnergyClosure, EnergyClosureWarning
    from fingrav_native.insitu._concurrent import ConcurrentEnergy
    from fingrav_native.insitu._results import (
        ITERATION_DTYPE,
        KERNEL_TABLE_DTYPE,
        TRACE_LOG_DTYPE,
        IterationSummary,
        SpanEnergy,
        TraceProfile,
    )
    from fingrav_native.insitu._signatures import signature_label
    from fingrav_native.insitu._trace import KERNEL_SIGNATURE_DTYPE, STEP_DTYPE, KernelTrace, TraceFormatError

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "ClockMismatchWarning": "_align",
    "ConcurrentEnergy": "_concurrent",
    "EnergyClosure": "_closure",
    "EnergyClosureWarning": "_closure",
    "ITERATION_DTYPE": "_results",
    "IterationSummary": "_results",
    "KERNEL_SIGNATURE_DTYPE": "_trace",
    "KERNEL_TABLE_DTYPE": "_results",
    "KernelTrace": "_trace",
    "LogAlignment": "_align",
    "STEP_DTYPE": "_trace",
    "SpanEnergy": "_results",
    "TRACE_LOG_DTYPE": "_results",
    "TraceFormatError": "_trace",
    "TraceProfile": "_results",
    "align_logs_to_trace": "_align",
    "measure_window_offset": "_align_windows",
    "signature_label": "_signatures",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
