"""Drivers: everything that runs a device or a folder over time, and the ``fingrav`` command.

The campaign (:func:`profile`), the sensor characterisation (:func:`characterize`), the
live recorder (:class:`PowerRecorder`, :func:`record_torch`), the sync report, the node
drivers, the simulated training loop, the demo and the figures. Every driver opens its
device through :func:`open_device` and persists through :mod:`fingrav_native.files`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.app._characterize import characterize
    from fingrav_native.app._distributed import (
        DEFAULT_EXCHANGES,
        DEFAULT_WARMUP,
        HostIdentity,
        TorchAgreement,
        align_ranks,
        exchange_brackets,
        gather_to_root,
        host_identity,
        shares_host_clock_with_root,
    )
    from fingrav_native.app._loop import LOOP_KERNELS, LoopKernel, SimTrainingLoop, simulate_training_loop
    from fingrav_native.app._node import profile_distributed, profile_node
    from fingrav_native.app._plot import (
        figure_kernels_by_component,
        figure_trace_profiles,
        plot_interleaved,
        plot_kernel,
        plot_kernel_energy,
        plot_kernels,
        plot_ssp_search,
        plot_sync_error,
        plot_whole_run,
    )
    from fingrav_native.app._profile import profile, profile_interleaved
    from fingrav_native.app._progress import (
        CampaignProgress,
        LineProgress,
        ProgressReporter,
        TerminalProgress,
        as_reporter,
    )
    from fingrav_native.app._recorder import PowerRecorder, record_torch
    from fingrav_native.app._sync import SyncReport, sync_report

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "CampaignProgress": "_progress",
    "DEFAULT_EXCHANGES": "_distributed",
    "DEFAULT_WARMUP": "_distributed",
    "HostIdentity": "_distributed",
    "LOOP_KERNELS": "_loop",
    "LineProgress": "_progress",
    "LoopKernel": "_loop",
    "PowerRecorder": "_recorder",
    "ProgressReporter": "_progress",
    "SimTrainingLoop": "_loop",
    "SyncReport": "_sync",
    "TerminalProgress": "_progress",
    "TorchAgreement": "_distributed",
    "align_ranks": "_distributed",
    "as_reporter": "_progress",
    "characterize": "_characterize",
    "exchange_brackets": "_distributed",
    "figure_kernels_by_component": "_plot",
    "figure_trace_profiles": "_plot",
    "gather_to_root": "_distributed",
    "host_identity": "_distributed",
    "plot_interleaved": "_plot",
    "plot_kernel": "_plot",
    "plot_kernel_energy": "_plot",
    "plot_kernels": "_plot",
    "plot_ssp_search": "_plot",
    "plot_sync_error": "_plot",
    "plot_whole_run": "_plot",
    "profile": "_profile",
    "profile_distributed": "_node",
    "profile_interleaved": "_profile",
    "profile_node": "_node",
    "record_torch": "_recorder",
    "shares_host_clock_with_root": "_distributed",
    "simulate_training_loop": "_loop",
    "sync_report": "_sync",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
