// NVIDIA runtime: CUDA driver, PTX %globaltimer probe, CUDA events.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "fingrav/nvidia/cuda_driver.hpp"
#include "fingrav/timestamp_source.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

py::dict cuda_device_dict(const nvidia::CudaDeviceInfo& d) {
  py::dict out;
  out["index"] = d.index;
  out["name"] = d.name;
  out["pci_bus_id"] = d.pci_bus_id;
  out["uuid"] = d.uuid;
  out["compute_capability"] = py::make_tuple(d.cc_major, d.cc_minor);
  out["clock_rate_khz"] = d.clock_rate_khz;
  out["memory_clock_rate_khz"] = d.memory_clock_rate_khz;
  out["multiprocessors"] = d.multiprocessors;
  out["total_memory"] = d.total_memory;
  out["can_map_host_memory"] = d.can_map_host_memory;
  return out;
}

}  // namespace

void register_cuda(py::module_& m) {
  namespace nv = fingrav::nvidia;
  auto stream_of = [](std::uint64_t s) { return static_cast<std::uintptr_t>(s); };

  m.def("cuda_library_path", &nv::CudaDriver::library_path,
        "Where the CUDA driver library (libcuda) loads from; raises LibraryNotFoundError naming every path tried.");
  m.def("cuda_driver_version", [] { return nv::CudaDriver::get()->driver_version(); },
        "The driver's CUDA version as cuDriverGetVersion reports it (e.g. 12040 for 12.4).");
  m.def("cuda_devices", [] {
    auto drv = nv::CudaDriver::get();
    py::list out;
    const int n = drv->device_count();
    for (int i = 0; i < n; ++i) out.append(cuda_device_dict(drv->device_info(i)));
    return out;
  }, "Every CUDA device (CUDA_VISIBLE_DEVICES order) as a dict: index, name, pci_bus_id, uuid,\n"
     "compute_capability, clock rates, multiprocessors, total_memory, can_map_host_memory.");
  m.def("cuda_probe_ptx", [] { return std::string(nv::probe_ptx()); },
        "The PTX text of the %globaltimer probe kernels (fingrav_stamp, fingrav_timer_step).");
  m.def("_cuda_prototypes", [] {
    py::list out;
    for (const auto& p : nv::cuda_prototypes()) {
      py::list syms;
      for (const char* s : p.symbols) syms.append(s);
      out.append(py::make_tuple(p.api, syms, p.params));
    }
    return out;
  }, "The declared driver entry points as (api name, symbols tried, parameter types), for the header check.");
  m.def("_cuda_constants", [] {
    py::dict out;
    for (const auto& c : nv::cuda_constants()) out[c.name] = c.value;
    return out;
  }, "The declared driver constants (CUresult codes, flags, attributes) by cuda.h name.");
  m.attr("CUDA_PROBE_UNWRITTEN") = py::int_(nv::kUnwrittenSlot);

  py::class_<nv::CudaMarkerProbe>(m, "CudaMarkerProbe",
      "GPU-side markers: stamp(stream, slot) enqueues a probe that stores %globaltimer (ns) into a\n"
      "host-mapped slot between the work before and after it on the stream.")
      .def(py::init([](int device, py::ssize_t slots) {
             return std::make_unique<nv::CudaMarkerProbe>(device, non_negative(slots, "slots"));
           }),
           py::arg("device") = 0, py::arg("slots") = 1 << 16, py::call_guard<py::gil_scoped_release>())
      .def("stamp", [stream_of](nv::CudaMarkerProbe& p, std::uint64_t stream, py::ssize_t slot) {
             const auto s = non_negative(slot, "slot");
             py::gil_scoped_release nogil;
             p.stamp(stream_of(stream), s);
           }, py::arg("stream"), py::arg("slot"),
           "Enqueues the probe on `stream` (a CUstream / cudaStream_t as an int; 0: the legacy default stream).")
      .def("values", [](const nv::CudaMarkerProbe& p, py::ssize_t first, std::optional<py::ssize_t> count) {
             const auto f = non_negative(first, "first");
             if (f > p.size()) throw std::out_of_range("first=" + std::to_string(f) + ": the probe has " +
                                                       std::to_string(p.size()) + " slots");
             const auto n = count ? non_negative(*count, "count") : p.size() - f;
             py::array_t<std::uint64_t> out(static_cast<py::ssize_t>(n));
             p.copy_to(out.mutable_data(), f, n);
             return out;
           }, py::arg("first") = 0, py::arg("count") = py::none(),
           "A copy of slots [first, first + count) as uint64; CUDA_PROBE_UNWRITTEN where no probe wrote yet.")
      .def("reset", &nv::CudaMarkerProbe::reset, "Marks every slot unwritten (CUDA_PROBE_UNWRITTEN).")
      .def("synchronize", [stream_of](nv::CudaMarkerProbe& p, std::uint64_t stream) {
             py::gil_scoped_release nogil;
             p.synchronize(stream_of(stream));
           }, py::arg("stream"), "Waits until everything enqueued on `stream` is done (cuStreamSynchronize).")
      .def_property_readonly("size", &nv::CudaMarkerProbe::size)
      .def_property_readonly("device", &nv::CudaMarkerProbe::device);

  py::class_<nv::CudaEventTimer>(m, "CudaEventTimer",
      "CUDA events with timing, recorded on a stream: a second marker source (elapsed milliseconds).")
      .def(py::init([](int device, py::ssize_t count) {
             return std::make_unique<nv::CudaEventTimer>(device, non_negative(count, "count"));
           }),
           py::arg("device") = 0, py::arg("count") = 2, py::call_guard<py::gil_scoped_release>())
      .def("record", [stream_of](nv::CudaEventTimer& t, std::uint64_t stream, py::ssize_t index) {
             const auto i = non_negative(index, "index");
             py::gil_scoped_release nogil;
             t.record(stream_of(stream), i);
           }, py::arg("stream"), py::arg("index"), "Records event `index` on `stream` (cuEventRecord).")
      .def("synchronize", [](nv::CudaEventTimer& t, py::ssize_t index) {
             const auto i = non_negative(index, "index");
             py::gil_scoped_release nogil;
             t.synchronize(i);
           }, py::arg("index"), "Waits for event `index` (cuEventSynchronize).")
      .def("elapsed_ms", [](const nv::CudaEventTimer& t, py::ssize_t start, py::ssize_t end) {
             const auto s = non_negative(start, "start");
             const auto e = non_negative(end, "end");
             py::gil_scoped_release nogil;
             return t.elapsed_ms(s, e);
           }, py::arg("start"), py::arg("end"), "Milliseconds between two completed events (cuEventElapsedTime).")
      .def_property_readonly("size", &nv::CudaEventTimer::size);

  py::class_<nv::GlobaltimerSource, TimestampSource, std::shared_ptr<nv::GlobaltimerSource>>(
      m, "GlobaltimerSource",
      "%globaltimer (ns) of a CUDA device as a TimestampSource: one read enqueues the probe on a\n"
      "private non-blocking stream and spins on its host-mapped slot.")
      .def(py::init([](int device, std::int64_t timeout_ns) {
             return std::make_shared<nv::GlobaltimerSource>(device, timeout_ns);
           }),
           py::arg("device") = 0, py::kw_only(), py::arg("timeout_ns") = 1'000'000'000,
           py::call_guard<py::gil_scoped_release>())
      .def("measure_steps", [](nv::GlobaltimerSource& s, std::int64_t n) {
             if (n < 1 || n > (1 << 20)) throw std::invalid_argument("n=" + std::to_string(n) + ": must be in [1, 2^20]");
             std::vector<std::uint64_t> steps;
             {
               py::gil_scoped_release nogil;
               steps = s.measure_steps(static_cast<std::uint32_t>(n));
             }
             py::array_t<std::uint64_t> out(static_cast<py::ssize_t>(steps.size()));
             std::copy(steps.begin(), steps.end(), out.mutable_data());
             return out;
           }, py::arg("n"),
           "n update steps of %globaltimer in ns, timed inside one kernel (0: the timer did not move);\n"
           "the minimum is its update granularity.")
      .def_property_readonly("device", &nv::GlobaltimerSource::device);
}

}  // namespace fingrav::bindings
