"""The simulated device: one GPU in virtual or real time (``device``) and a multi-GPU node (``node``).

It knows the ground truth of everything it simulates, so every method is
scored against it (DESIGN.md, "The simulated device"). The names of
``device`` are re-exported here, as ``fingrav_native.sim`` offered them
before the package had subpackages.
"""

from fingrav_native.sim.device import (
    EXEC_DTYPE,
    FIRMWARE_DTYPE,
    KERNEL_PRESETS,
    LOG_DTYPE,
    Parameter,
    RunResult,
    SimGPU,
    kernel_presets,
    parameters,
    steady_state_index,
)

__all__ = [
    "EXEC_DTYPE",
    "FIRMWARE_DTYPE",
    "LOG_DTYPE",
    "KERNEL_PRESETS",
    "Parameter",
    "RunResult",
    "SimGPU",
    "kernel_presets",
    "parameters",
    "steady_state_index",
]
