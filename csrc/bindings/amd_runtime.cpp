// AMD runtime: KFD clock counters, HIP runtime, hiprtc probe kernel, HIP events.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "fingrav/amd/hip.hpp"
#include "fingrav/amd/kfd_clock.hpp"
#include "fingrav/timestamp_source.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

// A stream handle from Python (an int: hipStream_t as framework adapters give it).
std::uintptr_t stream_handle(const py::int_& stream) {
  const auto v = stream.cast<unsigned long long>();
  return static_cast<std::uintptr_t>(v);
}

}  // namespace

void register_amd_runtime(py::module_& m) {
  namespace amd = fingrav::amd;
  m.attr("HIP_WALL_CLOCK_RATE_ATTRIBUTE") = amd::kHipDeviceAttributeWallClockRate;
  m.attr("HIP_PROBE_KERNEL") = amd::kProbeKernelName;
  m.attr("HIP_PROBE_SOURCE") = amd::probe_source();

  m.def("gfx_arch_from_target_version", [](std::int64_t version) {
        if (version < 0 || version > 0xffffffffLL)
          throw std::invalid_argument("version=" + std::to_string(version) + ": must be a KFD gfx_target_version");
        return amd::gfx_arch_from_target_version(static_cast<std::uint32_t>(version));
      }, py::arg("version"),
      "The gfx target name of a KFD topology gfx_target_version (90402 -> 'gfx942', 90010 -> 'gfx90a').");

  m.def("hiprtc_compile_probe", [](const std::string& arch) {
        std::vector<char> code;
        {
          py::gil_scoped_release nogil;
          code = amd::compile_probe(arch);
        }
        return py::bytes(code.data(), code.size());
      }, py::arg("arch"),
      "Compiles the marker probe kernel with hiprtc for a gfx target (no GPU needed); returns the\n"
      "AMDGPU code object. Raises LibraryNotFoundError naming the paths tried when hiprtc is absent.");

  m.def("hip_runtime_info", [] {
        amd::HipRuntimeInfo info;
        {
          py::gil_scoped_release nogil;
          info = amd::hip_runtime_info();
        }
        py::list devices;
        for (const auto& d : info.devices) {
          py::dict e;
          e["index"] = d.index;
          e["name"] = d.name;
          e["wall_clock_rate_khz"] = d.wall_clock_rate_khz;
          devices.append(e);
        }
        py::dict out;
        out["library_path"] = info.library_path;
        out["runtime_version"] = info.runtime_version;
        out["device_count"] = info.device_count;
        out["init_error"] = info.init_error;
        out["devices"] = devices;
        return out;
      },
      "Loads the HIP runtime and reports its path, version and devices (init_error says why there\n"
      "are none). Raises LibraryNotFoundError when libamdhip64 is absent.");

  py::class_<amd::KfdClockSource, TimestampSource, std::shared_ptr<amd::KfdClockSource>>(
      m, "KfdClockSource",
      "The GPU clock counter of one KFD gpu_id, read with AMDKFD_IOC_GET_CLOCK_COUNTERS on /dev/kfd.")
      .def(py::init([](std::int64_t gpu_id, const std::string& device_path, double nominal_tick_ns) {
             if (gpu_id <= 0 || gpu_id > 0xffffffffLL)
               throw std::invalid_argument("gpu_id=" + std::to_string(gpu_id) + ": must be a KFD gpu_id (> 0)");
             py::gil_scoped_release nogil;
             return std::make_shared<amd::KfdClockSource>(static_cast<std::uint32_t>(gpu_id), device_path,
                                                          nominal_tick_ns);
           }),
           py::arg("gpu_id"), py::kw_only(), py::arg("device_path") = "/dev/kfd", py::arg("nominal_tick_ns") = 10.0)
      .def("read_counters", [](amd::KfdClockSource& s) {
        amd::KfdCounters c;
        {
          py::gil_scoped_release nogil;
          c = s.read_counters();
        }
        py::dict out;
        out["gpu"] = c.gpu;
        out["cpu_ns"] = c.cpu_ns;
        out["boot_ns"] = c.boot_ns;
        out["system_freq"] = c.system_freq;
        return out;
      }, "One ioctl: the GPU counter, CLOCK_MONOTONIC_RAW ns read right after it, CLOCK_BOOTTIME ns,\n"
         "and the host counters' frequency (1e9).")
      .def_property_readonly("gpu_id", &amd::KfdClockSource::gpu_id)
      .def_property_readonly("device_path", &amd::KfdClockSource::device_path)
      .def_property_readonly("kfd_version", [](const amd::KfdClockSource& s) {
        return py::make_tuple(s.kfd_major(), s.kfd_minor());
      });

  py::class_<amd::HipMarkerProbe, std::shared_ptr<amd::HipMarkerProbe>>(
      m, "HipMarkerProbe",
      "GPU-side execution markers: a probe kernel (compiled with hiprtc) that writes the device wall\n"
      "clock into one of N host-mapped slots when the stream reaches it.")
      .def(py::init([](int device, py::ssize_t slots, const std::string& arch) {
             if (slots < 1) throw std::invalid_argument("slots=" + std::to_string(slots) + ": must be >= 1");
             py::gil_scoped_release nogil;
             return std::make_shared<amd::HipMarkerProbe>(device, static_cast<std::size_t>(slots), arch);
           }),
           py::arg("device"), py::arg("slots"), py::kw_only(), py::arg("arch"))
      .def("stamp", [](amd::HipMarkerProbe& p, const py::int_& stream, py::ssize_t slot) {
        if (slot < 0) throw std::invalid_argument("slot=" + std::to_string(slot) + ": must be >= 0");
        const auto h = stream_handle(stream);
        py::gil_scoped_release nogil;
        p.stamp(h, static_cast<std::size_t>(slot));
      }, py::arg("stream"), py::arg("slot"), "Enqueues the probe on stream (an int handle; 0: null stream).")
      .def("slots", [](const amd::HipMarkerProbe& p) {
        // A copy, not a view of the mapped memory: the GPU writes those
        // slots and reset() zeroes them, and an array handed out must never
        // change afterwards. Read once the stream has synchronised.
        py::array_t<std::uint64_t> a(static_cast<py::ssize_t>(p.size()));
        std::uint64_t* out = a.mutable_data();
        const std::uint64_t* in = p.slots();
        for (std::size_t i = 0; i < p.size(); ++i) out[i] = __atomic_load_n(in + i, __ATOMIC_ACQUIRE);
        return a;
      }, "A copy of the slots as uint64 (0: not written since reset()); read after the stream syncs.")
      .def("reset", &amd::HipMarkerProbe::reset)
      .def("__len__", &amd::HipMarkerProbe::size)
      .def_property_readonly("device", &amd::HipMarkerProbe::device)
      .def_property_readonly("arch", &amd::HipMarkerProbe::arch)
      .def_property_readonly("wall_clock_rate_khz", &amd::HipMarkerProbe::wall_clock_rate_khz,
                             "hipDeviceAttributeWallClockRate; 0 where the runtime lacks it (ROCm < 6).");

  py::class_<amd::HipEventTimer, std::shared_ptr<amd::HipEventTimer>>(
      m, "HipEventTimer", "HIP events recorded on a stream: the second marker source (durations only).")
      .def(py::init([](int device, py::ssize_t events) {
             if (events < 2) throw std::invalid_argument("events=" + std::to_string(events) + ": must be >= 2");
             py::gil_scoped_release nogil;
             return std::make_shared<amd::HipEventTimer>(device, static_cast<std::size_t>(events));
           }),
           py::arg("device"), py::arg("events"))
      .def("record", [](amd::HipEventTimer& t, const py::int_& stream, py::ssize_t index) {
        if (index < 0) throw std::invalid_argument("index=" + std::to_string(index) + ": must be >= 0");
        const auto h = stream_handle(stream);
        py::gil_scoped_release nogil;
        t.record(h, static_cast<std::size_t>(index));
      }, py::arg("stream"), py::arg("index"))
      .def("synchronize", [](amd::HipEventTimer& t, py::ssize_t index) {
        if (index < 0) throw std::invalid_argument("index=" + std::to_string(index) + ": must be >= 0");
        py::gil_scoped_release nogil;
        t.synchronize(static_cast<std::size_t>(index));
      }, py::arg("index"))
      .def("elapsed_ms", [](amd::HipEventTimer& t, py::ssize_t start, py::ssize_t end) {
        if (start < 0 || end < 0) throw std::invalid_argument("start, end: must be >= 0");
        return t.elapsed_ms(static_cast<std::size_t>(start), static_cast<std::size_t>(end));
      }, py::arg("start"), py::arg("end"))
      .def("__len__", &amd::HipEventTimer::size);

  py::class_<amd::HipTimestampSource, TimestampSource, std::shared_ptr<amd::HipTimestampSource>>(
      m, "HipTimestampSource",
      "The GPU wall clock read by launching the probe on a private stream and spinning on its slot.")
      .def(py::init([](int device, const std::string& arch, std::int64_t timeout_ns) {
             py::gil_scoped_release nogil;
             return std::make_shared<amd::HipTimestampSource>(device, arch, timeout_ns);
           }),
           py::arg("device"), py::kw_only(), py::arg("arch"), py::arg("timeout_ns") = 1'000'000'000)
      .def_property_readonly("wall_clock_rate_khz", &amd::HipTimestampSource::wall_clock_rate_khz);
}

}  // namespace fingrav::bindings
