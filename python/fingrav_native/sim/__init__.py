"""The simulated device: one GPU in virtual or real time, shared with an application process, a multi-GPU node, an analytic curve.

It knows the ground truth of everything it simulates, so every method is scored against it. The analytic
simulator gives that truth in closed form: a kernel's curve (:func:`shape`) logged exactly by any sensor
model (:func:`observe`), runs of it (:func:`logged_runs`, :func:`simulate_runs`) and a training loop of
several kernels with its trace (:func:`logged_loop`, :func:`draw_schedule`), on the host's clock
(:class:`Identity`, :class:`EpochIdentity`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.sim._analytic import (
        ANALYTIC_LOG_DTYPE,
        DURATION_NS,
        EpochIdentity,
        Identity,
        LoggedRuns,
        RunsTruth,
        logged_runs,
        observe,
        shape,
        simulate_runs,
    )
    from fingrav_native.sim._analytic_loop import (
        COMMUNICATION,
        CONCURRENT,
        SEQUENCE,
        SIGNATURES,
        LoggedLoop,
        LoopSchedule,
        draw_schedule,
        logged_loop,
    )
    from fingrav_native.sim._device import (
        EXEC_DTYPE,
        FIRMWARE_DTYPE,
        KERNEL_PRESETS,
        LOG_DTYPE,
        Parameter,
        RunResult,
        SimGPU,
        kernel_presets,
        parameters,
        sensor_params,
        sim_markers,
        steady_state_index,
    )
    from fingrav_native.sim._fabric import (
        COLLECTIVE_KINDS,
        COLLECTIVE_TRUTH_DTYPE,
        CollectiveKind,
        CollectiveTime,
        FabricParams,
        collective_time,
    )
    from fingrav_native.sim._node import SimNode
    from fingrav_native.sim._rank import SimRankBackend
    from fingrav_native.sim._shared import DEVICE_ENV, SharedSimGPU, SharedSimTruth, app_path
    from fingrav_native.sim._standin import STANDIN_LIBRARIES, standin_library

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "ANALYTIC_LOG_DTYPE": "_analytic",
    "COMMUNICATION": "_analytic_loop",
    "CONCURRENT": "_analytic_loop",
    "DURATION_NS": "_analytic",
    "EpochIdentity": "_analytic",
    "Identity": "_analytic",
    "LoggedLoop": "_analytic_loop",
    "LoggedRuns": "_analytic",
    "LoopSchedule": "_analytic_loop",
    "RunsTruth": "_analytic",
    "SEQUENCE": "_analytic_loop",
    "SIGNATURES": "_analytic_loop",
    "draw_schedule": "_analytic_loop",
    "logged_loop": "_analytic_loop",
    "logged_runs": "_analytic",
    "observe": "_analytic",
    "shape": "_analytic",
    "simulate_runs": "_analytic",
    "COLLECTIVE_KINDS": "_fabric",
    "COLLECTIVE_TRUTH_DTYPE": "_fabric",
    "CollectiveKind": "_fabric",
    "CollectiveTime": "_fabric",
    "DEVICE_ENV": "_shared",
    "EXEC_DTYPE": "_device",
    "FIRMWARE_DTYPE": "_device",
    "FabricParams": "_fabric",
    "KERNEL_PRESETS": "_device",
    "LOG_DTYPE": "_device",
    "Parameter": "_device",
    "RunResult": "_device",
    "SimGPU": "_device",
    "SimNode": "_node",
    "SharedSimGPU": "_shared",
    "SharedSimTruth": "_shared",
    "STANDIN_LIBRARIES": "_standin",
    "SimRankBackend": "_rank",
    "app_path": "_shared",
    "collective_time": "_fabric",
    "kernel_presets": "_device",
    "parameters": "_device",
    "sensor_params": "_device",
    "sim_markers": "_device",
    "standin_library": "_standin",
    "steady_state_index": "_device",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
