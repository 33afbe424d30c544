"""What was measured: the array layouts every step consumes and the recording a device produces.

Lowest layer of the analysis (docs/ARCHITECTURE.md): nothing here talks to a device
or a folder. ``EXECUTION_DTYPE`` and ``LOI_DTYPE`` are the layouts of executions and of
logs of interest, ``MARKER_RECORD_DTYPE`` that of a run's GPU-side
markers; the layouts of logs on their way through the package, each under
its own name (``PLACED_LOG_DTYPE``, ``TRACE_LOG_DTYPE``, ``SIM_LOG_DTYPE``, ...),
and of the result tables; :class:`Capabilities` says what a device and its
power logger are; :class:`RunRecord` is one run as a device returned it;
:class:`Recording` is what was measured, the input every analysis takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.records._kernels import KernelSpec, execution_plan, wait_for_idle
    from fingrav_native.records._layouts import (
        CHANNELS,
        EXECUTION_DTYPE,
        EXECUTION_DTYPE_V1,
        LAUNCH_DTYPE,
        LOI_DTYPE,
        MARKER_RECORD_DTYPE,
        SAMPLE_DTYPE,
        make_executions,
        validate_executions,
        validate_samples,
    )
    from fingrav_native.records._log_layouts import (
        ANALYTIC_LOG_DTYPE,
        COLLECTIVE_TRUTH_DTYPE,
        COUNTER_LOG_DTYPE,
        ITERATION_DTYPE,
        KERNEL_SIGNATURE_DTYPE,
        KERNEL_TABLE_DTYPE,
        PLACED_LOG_DTYPE,
        SCORE_DTYPE,
        SIM_EXEC_DTYPE,
        SIM_FIRMWARE_DTYPE,
        SIM_LOG_DTYPE,
        STEP_DTYPE,
        TRACE_LOG_DTYPE,
    )
    from fingrav_native.records._recording import Capabilities, Recording, RunRecord

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "KernelSpec": "_kernels",
    "execution_plan": "_kernels",
    "wait_for_idle": "_kernels",
    "ANALYTIC_LOG_DTYPE": "_log_layouts",
    "COLLECTIVE_TRUTH_DTYPE": "_log_layouts",
    "COUNTER_LOG_DTYPE": "_log_layouts",
    "ITERATION_DTYPE": "_log_layouts",
    "KERNEL_SIGNATURE_DTYPE": "_log_layouts",
    "KERNEL_TABLE_DTYPE": "_log_layouts",
    "PLACED_LOG_DTYPE": "_log_layouts",
    "SCORE_DTYPE": "_log_layouts",
    "SIM_EXEC_DTYPE": "_log_layouts",
    "SIM_FIRMWARE_DTYPE": "_log_layouts",
    "SIM_LOG_DTYPE": "_log_layouts",
    "STEP_DTYPE": "_log_layouts",
    "TRACE_LOG_DTYPE": "_log_layouts",
    "CHANNELS": "_layouts",
    "Capabilities": "_recording",
    "EXECUTION_DTYPE": "_layouts",
    "EXECUTION_DTYPE_V1": "_layouts",
    "LAUNCH_DTYPE": "_layouts",
    "LOI_DTYPE": "_layouts",
    "MARKER_RECORD_DTYPE": "_layouts",
    "Recording": "_recording",
    "RunRecord": "_recording",
    "SAMPLE_DTYPE": "_layouts",
    "make_executions": "_layouts",
    "validate_executions": "_layouts",
    "validate_samples": "_layouts",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
