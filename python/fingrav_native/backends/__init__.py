"""Devices: the backend protocol beside its implementations (simulated, AMD, NVIDIA).

The protocol never imports an implementation (as ml-energy/zeus keeps
``device/gpu/common.py``); each backend reports what it found, and the workloads build
PyTorch / hip-python kernels for the hardware backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.backends._amd import AmdBackend, AmdClock, AmdKernelSpec, measure_logger_period
    from fingrav_native.backends._amd_sensors import AMD_SENSORS, power_semantics
    from fingrav_native.backends._amd_sysfs import (
        AMD_VENDOR_ID,
        AmdChannel,
        AmdGpu,
        AmdPrefer,
        find_amd_gpus,
        power_source,
        read_gpu_metrics,
    )
    from fingrav_native.backends._base import (
        MARKER_RECORD_DTYPE,
        Backend,
        BackendWrapper,
        HostRelease,
        KernelSpec,
        LivePower,
        drain_all,
        execution_plan,
        marker_records,
        wait_for_idle,
    )
    from fingrav_native.backends._devices import BACKENDS, format_reports, list_backends
    from fingrav_native.backends._nvidia import NvidiaBackend, UnknownSensorWindowWarning, match_nvml_device
    from fingrav_native.backends._nvidia_sensors import (
        NVML_MODES,
        NvmlMode,
        nvml_provenance,
        nvml_semantics,
        nvml_sensor,
    )
    from fingrav_native.backends._report import BackendReport, Component, DeviceEntry
    from fingrav_native.backends._sim import LiveSimBackend, SimBackend, sim_markers
    from fingrav_native.backends._workloads import (
        Workload,
        cupy_workload,
        resolve_workload,
        torch_gemm,
        torch_gemv,
        torch_workload,
    )

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "AMD_SENSORS": "_amd_sensors",
    "AMD_VENDOR_ID": "_amd_sysfs",
    "AmdBackend": "_amd",
    "AmdChannel": "_amd_sysfs",
    "AmdClock": "_amd",
    "AmdGpu": "_amd_sysfs",
    "AmdKernelSpec": "_amd",
    "AmdPrefer": "_amd_sysfs",
    "BACKENDS": "_devices",
    "Backend": "_base",
    "BackendReport": "_report",
    "BackendWrapper": "_base",
    "Component": "_report",
    "DeviceEntry": "_report",
    "HostRelease": "_base",
    "KernelSpec": "_base",
    "LivePower": "_base",
    "LiveSimBackend": "_sim",
    "MARKER_RECORD_DTYPE": "_base",
    "NVML_MODES": "_nvidia_sensors",
    "NvidiaBackend": "_nvidia",
    "NvmlMode": "_nvidia_sensors",
    "SimBackend": "_sim",
    "UnknownSensorWindowWarning": "_nvidia",
    "Workload": "_workloads",
    "cupy_workload": "_workloads",
    "drain_all": "_base",
    "execution_plan": "_base",
    "find_amd_gpus": "_amd_sysfs",
    "format_reports": "_devices",
    "list_backends": "_devices",
    "marker_records": "_base",
    "match_nvml_device": "_nvidia",
    "measure_logger_period": "_amd",
    "nvml_provenance": "_nvidia_sensors",
    "nvml_semantics": "_nvidia_sensors",
    "nvml_sensor": "_nvidia_sensors",
    "power_semantics": "_amd_sensors",
    "power_source": "_amd_sysfs",
    "read_gpu_metrics": "_amd_sysfs",
    "resolve_workload": "_workloads",
    "sim_markers": "_sim",
    "torch_gemm": "_workloads",
    "torch_gemv": "_workloads",
    "torch_workload": "_workloads",
    "wait_for_idle": "_base",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
