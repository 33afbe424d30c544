// One function per concept, each binding into the module `m`; module.cpp
// calls them in an order where every type is registered before a signature
// or a subclass names it.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace fingrav::bindings {

void register_errors(py::module_& m);       // common.cpp: SamplerError and the vendor errors
void register_clocks(py::module_& m);       // clock.cpp: host clock, TimestampSource, clock sync
void register_sources(py::module_& m);      // sampler.cpp: record dtypes and flags, the sources
void register_sampler(py::module_& m);      // sampler.cpp: period/capacity limits, SamplerStats, Sampler
void register_event_log(py::module_& m);    // event_log.cpp: MARKER_DTYPE, MarkerKind, EventLog
void register_sim(py::module_& m);          // sim.cpp: SimDevice and its sources
void register_amd_power(py::module_& m);    // amd_power.cpp: gpu_metrics, hwmon
void register_amd_runtime(py::module_& m);  // amd_runtime.cpp: KFD clock, HIP, hiprtc probe
void register_nvml(py::module_& m);         // nvml.cpp: NVML power
void register_cuda(py::module_& m);         // cuda.cpp: CUDA driver, %globaltimer probe
void register_kineto(py::module_& m);       // kineto.cpp: the streaming Kineto trace reader
void register_launch(py::module_& m);       // launch.cpp: launch record clock brackets, journal CRC-32

}  // namespace fingrav::bindings
