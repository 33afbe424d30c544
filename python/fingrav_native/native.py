"""The C++ core for experts and tool builders: every object and constant of the compiled extension.

The pieces, each usable on its own (typed by ``_core.pyi``):

Sampling
    :class:`Sampler` polls a :class:`PowerSource` on a native thread into a
    lock-free ring of ``SAMPLE_DTYPE`` records (``CHANNELS``, ``FLAG_*``,
    ``MIN_``/``MAX_PERIOD_NS``, ``MIN_``/``MAX_CAPACITY``); :class:`SyntheticSource`
    is a deterministic source for tests; :class:`SamplerStats` counts polls, drops, misses.
Power sources
    AMD: :class:`GpuMetricsSource` (``gpu_metrics``, ``parse_gpu_metrics``,
    ``GPU_METRICS_LAYOUTS``), :class:`HwmonPowerSource`; NVIDIA:
    :class:`NvmlPowerSource` (``NVML_MODES``, ``nvml_devices``); the
    simulator's :class:`SimPowerSource` and :class:`SimDevice`.
Clocks
    :func:`host_time_ns` (CLOCK_MONOTONIC_RAW, what every sample is stamped
    on), :func:`measure_host_clock`, :func:`wait_until_ns`; bracketed reads of a
    device clock: :func:`measure_brackets`, :class:`ClockSyncRecorder`,
    :class:`TimestampSource` (:class:`KfdClockSource`, :class:`GlobaltimerSource`,
    :class:`HipTimestampSource`, :class:`SimTimestampSource`); the epoch clock:
    :func:`read_epoch_brackets`.
Markers
    :class:`EventLog` (``MARKER_DTYPE``, :class:`MarkerKind`), GPU-side probes and
    event timers for CUDA and HIP (:class:`CudaMarkerProbe`, :class:`HipMarkerProbe`,
    :class:`CudaEventTimer`, :class:`HipEventTimer`, ``hiprtc_compile_probe``).
Launch-capture tool libraries
    :func:`tool_library` is the path of the tool library a vendor runtime loads
    into an application (``ROCP_TOOL_LIBRARIES``, ``CUDA_INJECTION64_PATH``).
Vendor libraries
    ``cuda_devices``, ``cuda_driver_version``, ``cuda_library_path``,
    ``nvml_library_path``, ``hip_runtime_info``; a missing one raises
    :class:`LibraryNotFoundError` naming it and how to install it.
"""

from __future__ import annotations

import os

from fingrav_native._core import (
    AMD_DRIVER_CACHE_INTERVAL_NS,
    AMD_ENERGY_UNIT_UJ,
    AMD_FIRMWARE_TICK_NS,
    CHANNELS,
    CUDA_PROBE_UNWRITTEN,
    EXEC_DTYPE,
    FIRMWARE_DTYPE,
    FLAG_DERIVED,
    FLAG_SOURCE_GAP,
    GPU_METRICS_LAYOUTS,
    HIP_PROBE_KERNEL,
    HIP_PROBE_SOURCE,
    HIP_WALL_CLOCK_RATE_ATTRIBUTE,
    LOG_DTYPE,
    MARKER_DTYPE,
    MARKER_HAS_DEVICE_TS,
    MAX_CAPACITY,
    MAX_MARKERS,
    MAX_PERIOD_NS,
    MIN_CAPACITY,
    MIN_PERIOD_NS,
    NVML_MODES,
    READING_DTYPE,
    SAMPLE_DTYPE,
    SIM_MAX_PENDING_EXECUTIONS,
    ClockSyncRecorder,
    ClockSyncStats,
    CudaEventTimer,
    CudaMarkerProbe,
    DeviceUnavailableError,
    EventLog,
    GlobaltimerSource,
    GpuMetricsFormatError,
    GpuMetricsSource,
    HipEventTimer,
    HipMarkerProbe,
    HipTimestampSource,
    HostClockInfo,
    HwmonPowerSource,
    KfdClockSource,
    LibraryNotFoundError,
    MarkerKind,
    NvmlPowerSource,
    PowerSource,
    Sampler,
    SamplerError,
    SamplerStats,
    SimDevice,
    SimPowerSource,
    SimTimestampSource,
    SourceInfo,
    SymbolNotFoundError,
    SyntheticSource,
    TimestampSource,
    cuda_devices,
    cuda_driver_version,
    cuda_library_path,
    cuda_probe_ptx,
    gfx_arch_from_target_version,
    hip_runtime_info,
    hiprtc_compile_probe,
    host_time_ns,
    measure_brackets,
    measure_host_clock,
    nvml_devices,
    nvml_library_path,
    parse_gpu_metrics,
    read_epoch_brackets,
    sim_kernel_presets,
    sim_parameters,
    wait_until_ns,
)

__all__ = [
    "TOOL_LIBRARIES",
    "tool_library",
    "AMD_DRIVER_CACHE_INTERVAL_NS",
    "AMD_ENERGY_UNIT_UJ",
    "AMD_FIRMWARE_TICK_NS",
    "CHANNELS",
    "CUDA_PROBE_UNWRITTEN",
    "ClockSyncRecorder",
    "ClockSyncStats",
    "CudaEventTimer",
    "CudaMarkerProbe",
    "DeviceUnavailableError",
    "EXEC_DTYPE",
    "EventLog",
    "FIRMWARE_DTYPE",
    "FLAG_DERIVED",
    "FLAG_SOURCE_GAP",
    "GPU_METRICS_LAYOUTS",
    "GlobaltimerSource",
    "GpuMetricsFormatError",
    "GpuMetricsSource",
    "HIP_PROBE_KERNEL",
    "HIP_PROBE_SOURCE",
    "HIP_WALL_CLOCK_RATE_ATTRIBUTE",
    "HipEventTimer",
    "HipMarkerProbe",
    "HipTimestampSource",
    "HostClockInfo",
    "HwmonPowerSource",
    "KfdClockSource",
    "LOG_DTYPE",
    "LibraryNotFoundError",
    "MARKER_DTYPE",
    "MARKER_HAS_DEVICE_TS",
    "MAX_CAPACITY",
    "MAX_MARKERS",
    "MAX_PERIOD_NS",
    "MIN_CAPACITY",
    "MIN_PERIOD_NS",
    "MarkerKind",
    "NVML_MODES",
    "NvmlPowerSource",
    "PowerSource",
    "READING_DTYPE",
    "SAMPLE_DTYPE",
    "SIM_MAX_PENDING_EXECUTIONS",
    "Sampler",
    "SamplerError",
    "SamplerStats",
    "SimDevice",
    "SimPowerSource",
    "SimTimestampSource",
    "SourceInfo",
    "SymbolNotFoundError",
    "SyntheticSource",
    "TimestampSource",
    "cuda_devices",
    "cuda_driver_version",
    "cuda_library_path",
    "cuda_probe_ptx",
    "gfx_arch_from_target_version",
    "hip_runtime_info",
    "hiprtc_compile_probe",
    "host_time_ns",
    "measure_brackets",
    "measure_host_clock",
    "nvml_devices",
    "nvml_library_path",
    "parse_gpu_metrics",
    "read_epoch_brackets",
    "sim_kernel_presets",
    "sim_parameters",
    "wait_until_ns",
]


#: Each vendor's launch-capture tool library, as installed beside the extension in ``fingrav_native/lib``.
TOOL_LIBRARIES = {"rocm": "libfingrav_rocprofiler_tool.so", "cuda": "libfingrav_cupti_tool.so"}

#: How each library gets built, for the error that finds it missing.
_TOOL_BUILD = {
    "rocm": "it is built with the package (pip install .); in a source tree, build the CMake target "
            "fingrav_rocprofiler_tool and copy it into python/fingrav_native/lib/",
    # The headers must be visible to the build: pip's isolated build environment does not see the
    # wheels installed beside the package, hence --no-build-isolation (or the include folders named).
    "cuda": "it is built only where the CUPTI headers are found at build time: pip install "
            "nvidia-cuda-cupti-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-nvcc-cu12 (the test-full extra has "
            "them), then reinstall with pip install --no-build-isolation . (or pass -C "
            "cmake.define.CUPTI_INCLUDE_DIR=<CUDA>/extras/CUPTI/include -C "
            "cmake.define.CUPTI_CUDA_INCLUDE_DIR=<CUDA>/include); in a source tree, build the CMake target "
            "fingrav_cupti_tool and copy it into python/fingrav_native/lib/",
}


def tool_library(vendor: str) -> str:
    """The installed path of a vendor's launch-capture tool library.

    The tool library is what a vendor runtime loads into an application to
    hand it every kernel execution (issue 42's native launch capture):
    rocprofiler-sdk through ``ROCP_TOOL_LIBRARIES``, CUDA through
    ``CUDA_INJECTION64_PATH``. It writes a launch journal into
    ``FINGRAV_LAUNCH_DIR`` (read by :func:`fingrav_native.files.read_launches`).

    Parameters
    ----------
    vendor : {"rocm", "cuda"}

    Returns
    -------
    str
        Absolute path of the ``.so`` in ``fingrav_native/lib``.

    Raises
    ------
    ValueError
        ``vendor`` is not one of the two.
    FileNotFoundError
        The library is not installed: the message names the file and how to build it.
    """
    if not isinstance(vendor, str) or vendor not in TOOL_LIBRARIES:
        raise ValueError(f"vendor={vendor!r}: must be one of {sorted(TOOL_LIBRARIES)}")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", TOOL_LIBRARIES[vendor])
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: the {vendor} launch-capture tool library is not installed; "
                                f"{_TOOL_BUILD[vendor]}")
    return path
