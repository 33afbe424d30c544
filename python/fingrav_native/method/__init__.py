"""The FinGraV method (paper Section IV-B): pure steps from executions and logs to a profile.

Table I guidance, golden runs by execution-time binning (step 5), LOIs and TOIs through
the clock map (step 6), the SSE and SSP executions (step 3), the stitched profile and
energy (steps 7-8), the deconvolution of averaging sensors and the joint fit over an
application's timeline, phase steering, and the frozen result types. Nothing here talks
to a device or a folder; :func:`stitch_logs` runs steps 5-8 on logs brought from anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.method._agreement import Agreement, LocalAgreement, ThreadAgreement
    from fingrav_native.method._align import (
        LogAssignment,
        NoLogsInExecutionsError,
        assign_logs_to_executions,
        place_logs,
        select_executions_of_interest,
    )
    from fingrav_native.method._deconvolve import declared_windows, deconvolve, needs_deconvolution, runs_needed
    from fingrav_native.method._deconvolved import Deconvolution, DeconvolvedChannel, as_stitched
    from fingrav_native.method._engine_check import ModelCheck
    from fingrav_native.method._engine_design import FitTooLargeError
    from fingrav_native.method._forward_model import curve_precision_inverse, curve_scale, curve_variance, design_rows
    from fingrav_native.method._golden import GoldenSelection, select_golden_runs
    from fingrav_native.method._guidance import TABLE_I, Guidance, GuidanceRow, lookup_guidance, target_loi_count
    from fingrav_native.method._joint import GAP_EDGES_NS, TimelineFit, fit_timeline
    from fingrav_native.method._phase import (
        PhaseSteerer,
        PhaseSteeringWarning,
        SamplePrediction,
        predict_sample_instants,
    )
    from fingrav_native.method._phase_modes import PHASES
    from fingrav_native.method._pipeline import ATTRIBUTIONS, SensorResolutionWarning, stitch_logs
    from fingrav_native.method._results import (
        LOG_DTYPE,
        CampaignTimeline,
        ErrorBudget,
        ExecutionProfile,
        InterleavedProfile,
        Profile,
    )
    from fingrav_native.method._steady import (
        SSE_EXECUTIONS,
        SSE_INDEX,
        PowerMeasurement,
        SspSearch,
        SspStep,
        find_ssp_executions,
    )
    from fingrav_native.method._stitch import stitch
    from fingrav_native.method._stitched import (
        EnergyEstimate,
        LogQualityWarning,
        StitchedChannel,
        StitchedProfile,
        energy_per_execution,
    )
    from fingrav_native.method._whole_run import WholeRunView, whole_run_view

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "ATTRIBUTIONS": "_pipeline",
    "Agreement": "_agreement",
    "CampaignTimeline": "_results",
    "Deconvolution": "_deconvolved",
    "DeconvolvedChannel": "_deconvolved",
    "EnergyEstimate": "_stitched",
    "ErrorBudget": "_results",
    "ExecutionProfile": "_results",
    "FitTooLargeError": "_engine_design",
    "GAP_EDGES_NS": "_joint",
    "GoldenSelection": "_golden",
    "Guidance": "_guidance",
    "GuidanceRow": "_guidance",
    "InterleavedProfile": "_results",
    "LOG_DTYPE": "_results",
    "LocalAgreement": "_agreement",
    "LogAssignment": "_align",
    "LogQualityWarning": "_stitched",
    "NoLogsInExecutionsError": "_align",
    "PHASES": "_phase_modes",
    "PhaseSteerer": "_phase",
    "PhaseSteeringWarning": "_phase",
    "PowerMeasurement": "_steady",
    "Profile": "_results",
    "SSE_EXECUTIONS": "_steady",
    "SSE_INDEX": "_steady",
    "SamplePrediction": "_phase",
    "SensorResolutionWarning": "_pipeline",
    "SspSearch": "_steady",
    "SspStep": "_steady",
    "StitchedChannel": "_stitched",
    "StitchedProfile": "_stitched",
    "TABLE_I": "_guidance",
    "ThreadAgreement": "_agreement",
    "TimelineFit": "_joint",
    "WholeRunView": "_whole_run",
    "as_stitched": "_deconvolved",
    "assign_logs_to_executions": "_align",
    "curve_precision_inverse": "_forward_model",
    "curve_scale": "_forward_model",
    "curve_variance": "_forward_model",
    "deconvolve": "_deconvolve",
    "design_rows": "_forward_model",
    "energy_per_execution": "_stitched",
    "find_ssp_executions": "_steady",
    "fit_timeline": "_joint",
    "lookup_guidance": "_guidance",
    "needs_deconvolution": "_deconvolve",
    "declared_windows": "_deconvolve",
    "ModelCheck": "_engine_check",
    "place_logs": "_align",
    "predict_sample_instants": "_phase",
    "runs_needed": "_deconvolve",
    "select_executions_of_interest": "_align",
    "select_golden_runs": "_golden",
    "stitch": "_stitch",
    "stitch_logs": "_pipeline",
    "target_loi_count": "_guidance",
    "whole_run_view": "_whole_run",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
