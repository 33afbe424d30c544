// The only file that includes pybind11. Thin: cast arguments, release the GIL,
// call plain C++. Arrays leave C++ without a copy: drained samples are handed
// to numpy together with a capsule that owns their memory, and marker views
// keep the EventLog alive through their base object.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/native_enum.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fingrav/amd/hip.hpp"
#include "fingrav/amd/kfd_clock.hpp"
#include "fingrav/amd/gpu_metrics.hpp"
#include "fingrav/clock_sync.hpp"
#include "fingrav/dynlib.hpp"
#include "fingrav/event_log.hpp"
#include "fingrav/host_clock.hpp"
#include "fingrav/nvidia/nvml.hpp"
#include "fingrav/nvidia/cuda_driver.hpp"
#include "fingrav/power_source.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/sampler.hpp"
#include "fingrav/synthetic_source.hpp"
#include "fingrav/sim/device.hpp"
#include "fingrav/sim/kernels.hpp"
#include "fingrav/timestamp_source.hpp"

namespace py = pybind11;
using namespace fingrav;

namespace {

// Raised to Python as fingrav_native.SamplerError: the sampler thread failed.
struct SamplerFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* const kChannelNames[kChannelCount] = {"total", "compute", "io", "memory"};

// A numpy structured dtype from (name, format, offset) triples and an item
// size; built through numpy itself so field offsets are exactly ours.
py::dtype make_dtype(std::initializer_list<std::tuple<const char*, const char*, std::size_t>> fields,
                     std::size_t itemsize) {
  py::list names, formats, offsets;
  for (const auto& [name, fmt, off] : fields) {
    names.append(name);
    formats.append(fmt);
    offsets.append(off);
  }
  py::dict spec;
  spec["names"] = names;
  spec["formats"] = formats;
  spec["offsets"] = offsets;
  spec["itemsize"] = itemsize;
  return py::dtype::from_args(spec);
}

py::dtype sample_dtype() {
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"host_ns", "<i8", offsetof(Sample, host_ns)},
       {"host_poll_begin_ns", "<i8", offsetof(Sample, host_poll_begin_ns)},
       {"source_ts", "<i8", offsetof(Sample, source_ts)},
       {"source_seq", "<u8", offsetof(Sample, source_seq)},
       {"seq", "<u8", offsetof(Sample, seq)},
       {"total", "<f4", offsetof(Sample, power_w) + 0 * sizeof(float)},
       {"compute", "<f4", offsetof(Sample, power_w) + 1 * sizeof(float)},
       {"io", "<f4", offsetof(Sample, power_w) + 2 * sizeof(float)},
       {"memory", "<f4", offsetof(Sample, power_w) + 3 * sizeof(float)},
       {"flags", "<u4", offsetof(Sample, flags)},
       {"window_ns", "<u4", offsetof(Sample, window_ns)}},
      sizeof(Sample)));
  return *dt;
}

py::dtype reading_dtype() {
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"source_ts", "<i8", offsetof(Reading, source_ts)},
       {"source_seq", "<u8", offsetof(Reading, source_seq)},
       {"total", "<f4", offsetof(Reading, power_w) + 0 * sizeof(float)},
       {"compute", "<f4", offsetof(Reading, power_w) + 1 * sizeof(float)},
       {"io", "<f4", offsetof(Reading, power_w) + 2 * sizeof(float)},
       {"memory", "<f4", offsetof(Reading, power_w) + 3 * sizeof(float)},
       {"flags", "<u4", offsetof(Reading, flags)},
       {"window_ns", "<u4", offsetof(Reading, window_ns)}},
      sizeof(Reading)));
  return *dt;
}

py::dtype marker_dtype() {
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"host_ns", "<i8", offsetof(Marker, host_ns)},
       {"device_ts", "<i8", offsetof(Marker, device_ts)},
       {"run", "<i4", offsetof(Marker, run)},
       {"execution", "<i4", offsetof(Marker, execution)},
       {"kernel_id", "<i4", offsetof(Marker, kernel_id)},
       {"kind", "u1", offsetof(Marker, kind)},
       {"flags", "u1", offsetof(Marker, flags)}},
      sizeof(Marker)));
  return *dt;
}

// Hands a heap array of T to numpy; the capsule deletes it with the array.
template <typename T>
py::array owning_array(const py::dtype& dt, std::unique_ptr<T[]> data, std::size_t n) {
  T* raw = data.release();
  py::capsule owner(raw, [](void* p) { delete[] static_cast<T*>(p); });
  return py::array(dt, {static_cast<py::ssize_t>(n)}, {static_cast<py::ssize_t>(sizeof(T))}, raw, owner);
}

py::list channel_list(std::uint32_t mask) {
  py::list out;
  for (int c = 0; c < kChannelCount; ++c) {
    if (mask & (1u << c)) out.append(kChannelNames[c]);
  }
  return out;
}

std::size_t non_negative(py::ssize_t v, const char* name) {
  if (v < 0) throw std::invalid_argument(std::string(name) + "=" + std::to_string(v) + ": must be >= 0");
  return static_cast<std::size_t>(v);
}

py::dtype exec_dtype() {
  using fingrav::sim::ExecRecord;
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"run", "<i4", offsetof(ExecRecord, run)},
       {"index", "<i4", offsetof(ExecRecord, index)},
       {"kernel_id", "<i4", offsetof(ExecRecord, kernel_id)},
       {"warm_index", "<i4", offsetof(ExecRecord, warm_index)},
       {"start_ns", "<i8", offsetof(ExecRecord, start_ns)},
       {"end_ns", "<i8", offsetof(ExecRecord, end_ns)},
       {"begin_marker_ticks", "<i8", offsetof(ExecRecord, begin_marker_ticks)},
       {"end_marker_ticks", "<i8", offsetof(ExecRecord, end_marker_ticks)},
       {"host_launch_ns", "<i8", offsetof(ExecRecord, host_launch_ns)},
       {"host_sync_ns", "<i8", offsetof(ExecRecord, host_sync_ns)},
       {"energy_j", "<f8", offsetof(ExecRecord, energy_j)},
       {"mean_total_w", "<f8", offsetof(ExecRecord, mean_power_w) + 0 * sizeof(double)},
       {"mean_compute_w", "<f8", offsetof(ExecRecord, mean_power_w) + 1 * sizeof(double)},
       {"mean_io_w", "<f8", offsetof(ExecRecord, mean_power_w) + 2 * sizeof(double)},
       {"mean_memory_w", "<f8", offsetof(ExecRecord, mean_power_w) + 3 * sizeof(double)},
       {"mean_freq", "<f8", offsetof(ExecRecord, mean_freq)},
       {"duration_factor", "<f8", offsetof(ExecRecord, duration_factor)}},
      sizeof(ExecRecord)));
  return *dt;
}

py::dtype log_dtype() {
  using fingrav::sim::LogRecord;
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"sample_ns", "<i8", offsetof(LogRecord, sample_ns)},
       {"publish_ns", "<i8", offsetof(LogRecord, publish_ns)},
       {"logger_ticks", "<i8", offsetof(LogRecord, logger_ticks)},
       {"seq", "<u8", offsetof(LogRecord, seq)},
       {"total", "<f4", offsetof(LogRecord, power_w) + 0 * sizeof(float)},
       {"compute", "<f4", offsetof(LogRecord, power_w) + 1 * sizeof(float)},
       {"io", "<f4", offsetof(LogRecord, power_w) + 2 * sizeof(float)},
       {"memory", "<f4", offsetof(LogRecord, power_w) + 3 * sizeof(float)},
       {"window_ns", "<u4", offsetof(LogRecord, window_ns)}},
      sizeof(LogRecord)));
  return *dt;
}

py::dtype firmware_dtype() {
  using fingrav::sim::FirmwareRecord;
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"t_ns", "<i8", offsetof(FirmwareRecord, t_ns)},
       {"power_avg_w", "<f8", offsetof(FirmwareRecord, power_avg_w)},
       {"power_ppt_w", "<f8", offsetof(FirmwareRecord, power_ppt_w)},
       {"activity", "<f8", offsetof(FirmwareRecord, activity)},
       {"freq", "<f8", offsetof(FirmwareRecord, freq)},
       {"temp_k", "<f8", offsetof(FirmwareRecord, temp_k)},
       {"throttled", "<i4", offsetof(FirmwareRecord, throttled)}},
      sizeof(FirmwareRecord)));
  return *dt;
}

// Moves a vector of records into a numpy array (no copy: the capsule owns
// the vector).
template <typename T>
py::array vector_array(const py::dtype& dt, std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array(dt, {static_cast<py::ssize_t>(owned->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                   owned->data(), owner);
}

fingrav::sim::SimParams params_from_dict(const py::dict& overrides) {
  fingrav::sim::SimParams p;
  const auto& table = fingrav::sim::param_table();
  for (const auto& item : overrides) {
    const auto name = py::str(item.first).cast<std::string>();
    const auto it = std::find_if(table.begin(), table.end(), [&](const auto& e) { return e.name == name; });
    if (it == table.end()) {
      throw std::invalid_argument(name + ": unknown simulator parameter (see fingrav_native.sim.parameters())");
    }
    double v;
    try {
      v = item.second.cast<double>();
    } catch (const py::cast_error&) {
      throw std::invalid_argument(name + ": must be a number");
    }
    it->set(p, v);
  }
  fingrav::sim::validate_params(p);
  return p;
}

py::dict kernel_to_dict(const fingrav::sim::KernelSpec& k) {
  py::dict d;
  d["name"] = k.name;
  d["kind"] = k.kind;
  d["duration_ns"] = k.duration_ns;
  d["freq_sensitivity"] = k.freq_sensitivity;
  py::list shape;
  for (const auto& s : k.shape) shape.append(py::make_tuple(s.end, s.compute, s.io, s.memory));
  d["shape"] = shape;
  d["exec_cv"] = k.exec_cv;
  d["outlier_prob"] = k.outlier_prob;
  d["outlier_factor"] = k.outlier_factor;
  d["cold_factor"] = k.cold_factor;
  d["cold_decay"] = k.cold_decay;
  d["launch_gap_ns"] = k.launch_gap_ns;
  d["run_cv"] = k.run_cv;
  d["slow_mode_prob"] = k.slow_mode_prob;
  d["slow_mode_min"] = k.slow_mode_min;
  d["slow_mode_max"] = k.slow_mode_max;
  return d;
}

fingrav::sim::KernelSpec kernel_from_dict(const py::dict& d) {
  fingrav::sim::KernelSpec k;
  static const char* const known[] = {"name", "kind", "duration_ns", "freq_sensitivity", "shape", "exec_cv",
                                      "outlier_prob", "outlier_factor", "cold_factor", "cold_decay",
                                      "launch_gap_ns", "run_cv", "slow_mode_prob", "slow_mode_min", "slow_mode_max"};
  for (const auto& item : d) {
    const auto key = py::str(item.first).cast<std::string>();
    if (std::find(std::begin(known), std::end(known), key) == std::end(known)) {
      throw std::invalid_argument(key + ": unknown kernel field");
    }
  }
  if (!d.contains("name")) throw std::invalid_argument("name: a kernel needs a name");
  k.name = d["name"].cast<std::string>();
  if (d.contains("kind")) k.kind = d["kind"].cast<std::string>();
  auto num = [&](const char* key, double& field) {
    if (!d.contains(key)) return;
    try {
      field = d[key].cast<double>();
    } catch (const py::cast_error&) {
      throw std::invalid_argument(std::string(key) + ": must be a number");
    }
  };
  num("duration_ns", k.duration_ns);
  num("freq_sensitivity", k.freq_sensitivity);
  num("exec_cv", k.exec_cv);
  num("outlier_prob", k.outlier_prob);
  num("outlier_factor", k.outlier_factor);
  num("cold_factor", k.cold_factor);
  num("cold_decay", k.cold_decay);
  num("launch_gap_ns", k.launch_gap_ns);
  num("run_cv", k.run_cv);
  num("slow_mode_prob", k.slow_mode_prob);
  num("slow_mode_min", k.slow_mode_min);
  num("slow_mode_max", k.slow_mode_max);
  if (d.contains("shape")) {
    for (const auto& seg : d["shape"]) {
      auto t = seg.cast<py::sequence>();
      if (t.size() != 4) throw std::invalid_argument("shape: each segment is (end, compute, io, memory)");
      k.shape.push_back({t[0].cast<double>(), t[1].cast<double>(), t[2].cast<double>(), t[3].cast<double>()});
    }
  } else {
    k.shape = {{1.0, 0.8, 0.3, 0.3}};
  }
  fingrav::sim::validate_kernel(k);
  return k;
}

// Brackets as an (n, 3) int64 array (host_before, device_ticks, host_after),
// owning the buffer (no copy).
py::array_t<std::int64_t> brackets_array(std::unique_ptr<Bracket[]> data, std::size_t n) {
  Bracket* raw = data.release();
  py::capsule owner(raw, [](void* p) { delete[] static_cast<Bracket*>(p); });
  return py::array_t<std::int64_t>({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(3)},
                                   {static_cast<py::ssize_t>(sizeof(Bracket)), static_cast<py::ssize_t>(sizeof(std::int64_t))},
                                   reinterpret_cast<std::int64_t*>(raw), owner);
}

template <typename F>
py::array_t<std::int64_t> map_i64(const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& in, F f) {
  py::array_t<std::int64_t> out(in.size());
  auto* o = out.mutable_data();
  const auto* i = in.data();
  for (py::ssize_t k = 0; k < in.size(); ++k) o[k] = f(i[k]);
  return out;
}

// ------------------------------------------------------------ vendor backends
// Each backend binds its classes in its own function, so the module body stays
// a list of sections.

// A gpu_metrics table as a dict: None where the firmware leaves a field
// unset (all ones), so no sentinel leaks into numbers.
py::dict gpu_metrics_dict(const amd::GpuMetrics& g) {
  auto u16 = [](std::uint16_t v) -> py::object { return v == amd::kNotSupported16 ? py::object(py::none()) : py::object(py::int_(v)); };
  auto u32 = [](std::uint32_t v) -> py::object { return v == amd::kNotSupported32 ? py::object(py::none()) : py::object(py::int_(v)); };
  auto u64 = [](std::uint64_t v) -> py::object { return v == amd::kNotSupported64 ? py::object(py::none()) : py::object(py::int_(v)); };
  py::dict d;
  d["format_revision"] = g.format_revision;
  d["content_revision"] = g.content_revision;
  d["structure_size"] = g.structure_size;
  d["layout"] = g.layout;
  d["temperature_hotspot_c"] = u16(g.temperature_hotspot_c);
  d["temperature_mem_c"] = u16(g.temperature_mem_c);
  d["temperature_vrsoc_c"] = u16(g.temperature_vrsoc_c);
  d["curr_socket_power_w"] = u16(g.curr_socket_power_w);
  d["average_gfx_activity_pct"] = u16(g.average_gfx_activity_pct);
  d["average_umc_activity_pct"] = u16(g.average_umc_activity_pct);
  d["energy_accumulator"] = u64(g.energy_accumulator);
  d["energy_j"] = g.energy_accumulator == amd::kNotSupported64 ? py::object(py::none()) : py::float_(g.energy_j());
  d["system_clock_counter_ns"] = u64(g.system_clock_counter);
  d["firmware_timestamp"] = u64(g.firmware_timestamp);
  d["accumulation_counter"] = u32(g.accumulation_counter);
  d["throttle_status"] = u32(g.throttle_status);
  d["gfxclk_lock_status"] = u32(g.gfxclk_lock_status);
  d["current_gfxclk_mhz"] = g.current_gfxclk_mhz();
  d["current_uclk_mhz"] = u16(g.current_uclk_mhz);
  d["num_partition"] = u16(g.num_partition);
  return d;
}

// AMD power: the gpu_metrics parser and source, the hwmon fallback.
void bind_amd_power(py::module_& m) {
  // A ValueError: the bytes are wrong, not the machine.
  py::register_exception<amd::GpuMetricsFormatError>(m, "GpuMetricsFormatError", PyExc_ValueError);
  m.attr("AMD_ENERGY_UNIT_UJ") = amd::kEnergyUnitUj;
  m.attr("AMD_FIRMWARE_TICK_NS") = amd::kFirmwareTickNs;
  py::list layouts;
  for (const auto& l : amd::gpu_metrics_layouts()) {
    layouts.append(py::make_tuple(l.format_revision, l.content_revision, l.structure_size, l.name));
  }
  m.attr("GPU_METRICS_LAYOUTS") = py::tuple(layouts);

  m.def(
      "parse_gpu_metrics",
      [](const py::bytes& data) {
        const std::string_view view(data);
        amd::GpuMetrics g;
        {
          py::gil_scoped_release nogil;
          g = amd::parse_gpu_metrics(reinterpret_cast<const std::uint8_t*>(view.data()), view.size());
        }
        return gpu_metrics_dict(g);
      },
      py::arg("data"),
      "Parses one read of an amdgpu gpu_metrics file (formats 1.4-1.8) into a dict; None marks fields the\n"
      "firmware does not provide. Raises GpuMetricsFormatError for an unknown or inconsistent table.");

  auto stats_dict = [](const amd::GpuMetricsStats& s) {
    py::dict d;
    d["reads"] = s.reads;
    d["tables"] = s.tables;
    d["emitted"] = s.emitted;
    d["unpaired"] = s.unpaired;
    d["energy_resets"] = s.energy_resets;
    d["long_gaps"] = s.long_gaps;
    return d;
  };

  py::class_<amd::GpuMetricsSource, PowerSource, std::shared_ptr<amd::GpuMetricsSource>>(
      m, "GpuMetricsSource",
      "Power from an amdgpu gpu_metrics file (/sys/class/drm/cardN/device/gpu_metrics).\n"
      "channel='energy': total power derived from energy-accumulator differences between consecutive tables\n"
      "(FLAG_DERIVED, window = the gap; the first table only seeds the difference). channel='socket': the\n"
      "firmware's integer curr_socket_power. clock='auto' uses firmware_timestamp (10 ns ticks, domain\n"
      "'amd-pmfw-10ns') when the firmware sets it, else the driver's boottime stamp (domain 'boottime').")
      .def(py::init([](const std::string& path, const std::string& channel, const std::string& clock) {
             amd::GpuMetricsChannel ch;
             if (channel == "energy") {
               ch = amd::GpuMetricsChannel::kEnergy;
             } else if (channel == "socket") {
               ch = amd::GpuMetricsChannel::kSocket;
             } else {
               throw std::invalid_argument("channel='" + channel + "': must be 'energy' or 'socket'");
             }
             amd::GpuMetricsClock ck;
             if (clock == "auto") {
               ck = amd::GpuMetricsClock::kAuto;
             } else if (clock == "firmware") {
               ck = amd::GpuMetricsClock::kFirmware;
             } else if (clock == "boottime") {
               ck = amd::GpuMetricsClock::kBoottime;
             } else {
               throw std::invalid_argument("clock='" + clock + "': must be 'auto', 'firmware' or 'boottime'");
             }
             if (path.empty()) throw std::invalid_argument("path: must name a gpu_metrics file");
             py::gil_scoped_release nogil;
             return std::make_shared<amd::GpuMetricsSource>(path, ch, ck);
           }),
           py::arg("path"), py::arg("channel") = "energy", py::arg("clock") = "auto")
      .def_property_readonly("path", &amd::GpuMetricsSource::path)
      .def_property_readonly("channel", [](const amd::GpuMetricsSource& s) {
        return std::string(s.channel() == amd::GpuMetricsChannel::kEnergy ? "energy" : "socket");
      })
      .def_property_readonly("clock", [](const amd::GpuMetricsSource& s) {
        return std::string(s.clock() == amd::GpuMetricsClock::kFirmware ? "firmware" : "boottime");
      }, "The clock readings are stamped in: 'firmware' or 'boottime' (never 'auto').")
      .def_property_readonly("layout", [](const amd::GpuMetricsSource& s) { return s.first_table().layout; })
      .def_property_readonly("first_table", [](const amd::GpuMetricsSource& s) {
        return gpu_metrics_dict(s.first_table());
      }, "The table read when the source was opened, as parse_gpu_metrics returns it.")
      .def("stats", [stats_dict](const amd::GpuMetricsSource& s) { return stats_dict(s.stats()); },
           "Counters: reads, tables (distinct), emitted, unpaired (tables that only seeded a difference),\n"
           "energy_resets, long_gaps.");

  py::class_<amd::HwmonPowerSource, PowerSource, std::shared_ptr<amd::HwmonPowerSource>>(
      m, "HwmonPowerSource",
      "Power from an amdgpu hwmon file (power1_average or power1_input, microwatts). A new value is\n"
      "stamped with host CLOCK_MONOTONIC_RAW at the read that first saw it (domain 'host-monotonic-raw').")
      .def(py::init([](const std::string& path) {
             if (path.empty()) throw std::invalid_argument("path: must name a hwmon power file");
             py::gil_scoped_release nogil;
             return std::make_shared<amd::HwmonPowerSource>(path);
           }),
           py::arg("path"))
      .def_property_readonly("path", &amd::HwmonPowerSource::path)
      .def_property_readonly("averaged", &amd::HwmonPowerSource::averaged,
                             "True for power1_average (averaged by the firmware), False for power1_input.")
      .def(
          "read_microwatts",
          [](amd::HwmonPowerSource& s) {
            if (!s.try_acquire()) {
              throw std::runtime_error("read_microwatts(): the source is being polled by a running sampler");
            }
            try {
              py::gil_scoped_release nogil;
              const auto v = s.read_microwatts();
              s.release();
              return v;
            } catch (...) {
              s.release();
              throw;
            }
          },
          "Reads the file once; the value in microwatts.");
}

// A stream handle from Python (an int: hipStream_t as framework adapters give it).
std::uintptr_t stream_handle(const py::int_& stream) {
  const auto v = stream.cast<unsigned long long>();
  return static_cast<std::uintptr_t>(v);
}

// AMD runtime: KFD clock counters, HIP runtime, hiprtc probe kernel, HIP events.
void bind_amd_runtime(py::module_& m) {
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
      .def("slots", [](const std::shared_ptr<amd::HipMarkerProbe>& p) {
        // A read-only view of the mapped memory; the probe stays alive through the array's base.
        py::array_t<std::uint64_t> a({static_cast<py::ssize_t>(p->size())}, {static_cast<py::ssize_t>(8)},
                                     p->slots(), py::cast(p));
        py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
        return a;
      }, "The slots as a read-only uint64 view (0: not written since reset()); read after the stream syncs.")
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

// One NVML device as the dict nvml_devices() returns.
py::dict nvml_device_dict(const NvmlDeviceInfo& d, const std::string& driver, const std::string& path) {
  py::dict out;
  out["index"] = d.index;
  out["name"] = d.name;
  out["uuid"] = d.uuid;
  out["pci_bus_id"] = d.pci_bus_id;
  out["power_limit_w"] = d.power_limit_w >= 0 ? py::object(py::float_(d.power_limit_w)) : py::object(py::none());
  out["architecture"] = d.architecture != nvml_abi::NVML_DEVICE_ARCH_UNKNOWN ? py::object(py::int_(d.architecture))
                                                                              : py::object(py::none());
  out["compute_capability"] =
      d.cc_major >= 0 ? py::object(py::make_tuple(d.cc_major, d.cc_minor)) : py::object(py::none());
  py::list modes;
  py::dict unsupported;
  for (int i = 0; i < kNvmlModeCount; ++i) {
    const char* name = nvml_mode_name(static_cast<NvmlMode>(i));
    if (d.modes & (1u << i)) {
      modes.append(name);
    } else {
      unsupported[name] = d.unsupported[i];
    }
  }
  out["modes"] = modes;
  out["unsupported"] = unsupported;
  out["energy_from_field"] = d.energy_from_field;
  out["sample_buffer"] = d.sample_buffer;
  out["driver_version"] = driver;
  out["library_path"] = path;
  return out;
}

// NVIDIA power: NVML samples, instant power and energy.
void bind_nvml(py::module_& m) {
  py::tuple mode_names(kNvmlModeCount);
  for (int i = 0; i < kNvmlModeCount; ++i) mode_names[static_cast<std::size_t>(i)] = nvml_mode_name(static_cast<NvmlMode>(i));
  m.attr("NVML_MODES") = mode_names;

  m.def(
      "nvml_library_path",
      [] {
        py::gil_scoped_release nogil;
        return Nvml::locate();
      },
      "Where NVML (libnvidia-ml) is, without initialising it. Raises LibraryNotFoundError naming\n"
      "every path tried; FINGRAV_NVML_LIBRARY overrides the search.");

  m.def(
      "nvml_devices",
      [] {
        std::vector<NvmlDeviceInfo> devs;
        std::string driver, path;
        {
          py::gil_scoped_release nogil;
          auto nvml = Nvml::acquire();
          devs = nvml->devices();
          driver = nvml->driver_version();
          path = nvml->path();
        }
        py::list out;
        for (const auto& d : devs) out.append(nvml_device_dict(d, driver, path));
        return out;
      },
      "Every GPU NVML sees, each a dict: index, name, uuid, pci_bus_id, power_limit_w, architecture,\n"
      "compute_capability, modes (the power modes that work, each probed), unsupported (mode -> NVML's\n"
      "reason), energy_from_field, sample_buffer, driver_version, library_path. [] when NVML sees no GPU.\n"
      "Raises LibraryNotFoundError, SymbolNotFoundError or DeviceUnavailableError (nvmlInit failed).");

  m.def(
      "_nvml_prototypes",
      [] {
        py::list out;
        for (const auto& p : nvml_abi::prototypes())
          out.append(py::make_tuple(p.name, p.return_type, p.parameters, p.required));
        return out;
      },
      "The NVML functions we resolve, as declared: (name, return type, '(parameters)', required).");
  m.def(
      "_nvml_constants",
      [] {
        py::dict out;
        for (const auto& c : nvml_abi::constants()) out[c.name] = c.value;
        return out;
      },
      "The nvml.h constants we declare, by name.");
  m.def(
      "_nvml_layouts",
      [] {
        py::list out;
        for (const auto& l : nvml_abi::layouts()) out.append(py::make_tuple(l.type, l.member, l.value));
        return out;
      },
      "(type, member, offset) of the NVML structs we declare; member '' gives sizeof(type).");

  py::class_<NvmlPowerSource, PowerSource, std::shared_ptr<NvmlPowerSource>>(
      m, "NvmlPowerSource",
      "Board power of one NVIDIA GPU through NVML. mode: 'samples' (the driver's buffered power samples),\n"
      "'instant' / 'average' (field values), 'energy' (power derived from the energy counter, FLAG_DERIVED,\n"
      "window = interval) or 'usage' (nvmlDeviceGetPowerUsage). Timestamps: host CLOCK_REALTIME in us,\n"
      "clock domain 'nvml-host-us', tick_ns 1000. Raises DeviceUnavailableError when the device is absent or\n"
      "does not support the mode (naming the modes it does).")
      .def(py::init([](long long device, const std::string& mode) {
             if (device < 0 || device > std::numeric_limits<unsigned int>::max()) {
               throw std::invalid_argument("device=" + std::to_string(device) + ": must be >= 0");
             }
             const NvmlMode md = parse_nvml_mode(mode);
             py::gil_scoped_release nogil;
             return std::make_shared<NvmlPowerSource>(static_cast<unsigned int>(device), md);
           }),
           py::arg("device") = 0, py::arg("mode") = "samples")
      .def_property_readonly("mode", [](const NvmlPowerSource& s) { return nvml_mode_name(s.mode()); })
      .def_property_readonly("device", &NvmlPowerSource::device_index)
      .def_property_readonly("library_path", &NvmlPowerSource::library_path)
      .def_property_readonly("window_documented", &NvmlPowerSource::window_documented,
                             "Whether NVML documents the averaging window declared in info.window_ns\n"
                             "(False: 0 is declared because nothing is documented).")
      .def_property_readonly("sample_capacity", &NvmlPowerSource::sample_capacity,
                             "Samples one fetch can return (samples mode; 0 otherwise).")
      .def_property_readonly("possible_overruns", &NvmlPowerSource::possible_overruns,
                             "Fetches that came back full of new samples: the driver may have overwritten some.")
      .def_property_readonly("energy_resets", &NvmlPowerSource::energy_resets,
                             "Times the energy counter went backwards and was re-baselined (energy mode).")
      .def_property_readonly("device_info", [](const NvmlPowerSource& s) {
        return nvml_device_dict(s.device_info(), s.nvml().driver_version(), s.library_path());
      });
}

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

// NVIDIA runtime: CUDA driver, PTX %globaltimer probe, CUDA events.
void bind_cuda(py::module_& m) {
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

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "fingrav-native C++ core: host clock, power sources, sampler thread, event log.";

  py::register_exception<SamplerFailure>(m, "SamplerError", PyExc_RuntimeError);
  // A missing vendor library or device: the message names the library, the
  // paths tried and what to install (see dynlib.hpp).
  py::register_exception<LibraryNotFound>(m, "LibraryNotFoundError", PyExc_RuntimeError);
  py::register_exception<SymbolNotFound>(m, "SymbolNotFoundError", PyExc_RuntimeError);
  py::register_exception<DeviceUnavailable>(m, "DeviceUnavailableError", PyExc_RuntimeError);

  m.attr("SAMPLE_DTYPE") = sample_dtype();
  m.attr("READING_DTYPE") = reading_dtype();
  m.attr("MARKER_DTYPE") = marker_dtype();
  m.attr("CHANNELS") = py::make_tuple("total", "compute", "io", "memory");
  m.attr("MIN_PERIOD_NS") = kMinPeriodNs;
  m.attr("MAX_PERIOD_NS") = kMaxPeriodNs;
  m.attr("MIN_CAPACITY") = kMinCapacity;
  m.attr("FLAG_SOURCE_GAP") = static_cast<std::uint32_t>(kFlagSourceGap);
  m.attr("FLAG_DERIVED") = static_cast<std::uint32_t>(kFlagDerived);
  m.attr("MARKER_HAS_DEVICE_TS") = static_cast<std::uint32_t>(kMarkerHasDeviceTs);

  // ------------------------------------------------------------ host clock
  m.def("host_time_ns", &host_now_ns,
        "Host time now: CLOCK_MONOTONIC_RAW in nanoseconds, the timeline every result is placed on.");

  py::class_<HostClockInfo>(m, "HostClockInfo", "Cost and resolution of reading the host clock.")
      .def_readonly("read_cost_ns", &HostClockInfo::read_cost_ns)
      .def_readonly("min_read_cost_ns", &HostClockInfo::min_read_cost_ns)
      .def_readonly("resolution_ns", &HostClockInfo::resolution_ns)
      .def_readonly("observed_step_ns", &HostClockInfo::observed_step_ns)
      .def("__repr__", [](const HostClockInfo& h) {
        return "HostClockInfo(read_cost_ns=" + std::to_string(h.read_cost_ns) +
               ", min_read_cost_ns=" + std::to_string(h.min_read_cost_ns) +
               ", resolution_ns=" + std::to_string(h.resolution_ns) +
               ", observed_step_ns=" + std::to_string(h.observed_step_ns) + ")";
      });
  m.def(
      "measure_host_clock",
      [](std::int64_t reads) {
        py::gil_scoped_release nogil;
        return measure_host_clock(reads);
      },
      py::arg("reads") = 200000, "Measures the host clock's read cost and resolution over `reads` back-to-back reads.");

  // ------------------------------------------------------------ sources
  py::class_<SourceInfo>(m, "SourceInfo", "What a power source provides and in which clock domain.")
      .def_readonly("name", &SourceInfo::name)
      .def_readonly("clock_domain", &SourceInfo::clock_domain)
      .def_readonly("channel_mask", &SourceInfo::channel_mask)
      .def_readonly("native_period_ns", &SourceInfo::native_period_ns)
      .def_readonly("tick_ns", &SourceInfo::tick_ns)
      .def_readonly("has_sequence", &SourceInfo::has_sequence)
      .def_readonly("window_ns", &SourceInfo::window_ns)
      .def_property_readonly("channels", [](const SourceInfo& i) { return channel_list(i.channel_mask); })
      .def("__repr__", [](const SourceInfo& i) {
        return "SourceInfo(name='" + i.name + "', clock_domain='" + i.clock_domain +
               "', native_period_ns=" + std::to_string(i.native_period_ns) +
               ", channels=" + py::str(channel_list(i.channel_mask)).cast<std::string>() + ")";
      });

  py::class_<PowerSource, std::shared_ptr<PowerSource>>(m, "PowerSource",
                                                        "A source of power readings (interface).")
      .def_property_readonly("info", &PowerSource::info, py::return_value_policy::copy)
      .def_property_readonly("in_use", &PowerSource::in_use)
      .def(
          "poll",
          [](PowerSource& src) {
            // Direct polling, as a pure-Python tool would do it. Refused while
            // a sampler owns the source: sources are single-threaded.
            if (!src.try_acquire()) {
              throw std::runtime_error("poll(): the source '" + src.info().name +
                                       "' is being polled by a running sampler");
            }
            std::unique_ptr<Reading[]> buf(new Reading[PowerSource::kMaxReadingsPerPoll]);
            PollResult res;
            try {
              py::gil_scoped_release nogil;
              res = src.poll(buf.get(), PowerSource::kMaxReadingsPerPoll);
            } catch (...) {
              src.release();
              throw;
            }
            src.release();
            if (res.status != PollStatus::kOk) {
              const std::string why = src.last_error();
              throw std::runtime_error("poll(): source '" + src.info().name + "' reported " +
                                       (res.status == PollStatus::kFatalError ? "a fatal" : "a transient") +
                                       " error: " + why);
            }
            return owning_array(reading_dtype(), std::move(buf), res.count);
          },
          "Polls the source once from this thread; returns READING_DTYPE records, oldest first.");

  py::class_<SyntheticSource, PowerSource, std::shared_ptr<SyntheticSource>>(
      m, "SyntheticSource",
      "Deterministic test source: reading k appears k periods after the first poll, with total power\n"
      "base_w + amplitude_w * sin(2 pi (k mod cycle) / cycle) and compute/io/memory = 0.6/0.25/0.15 of it.\n"
      "depth=1 behaves like a latest-value file (gpu_metrics); depth>1 like a sample buffer (NVML).")
      .def(py::init([](std::int64_t period_ns, std::int64_t depth, std::int64_t channel_mask, double base_w,
                       double amplitude_w, std::int64_t cycle, std::int64_t ts_offset, std::int64_t window_ns,
                       std::int64_t transient_error_every, std::int64_t fatal_error_at_poll) {
             // Signed on the Python side so a negative value is named in a
             // ValueError rather than rejected as an unmatched overload.
             auto in_range = [](std::int64_t v, std::int64_t hi, const char* name) {
               if (v < 0 || v > hi) {
                 throw std::invalid_argument(std::string(name) + "=" + std::to_string(v) + ": must be in [0, " +
                                             std::to_string(hi) + "]");
               }
               return v;
             };
             constexpr std::int64_t u32 = 0xFFFFFFFFLL;
             SyntheticConfig c;
             c.period_ns = period_ns;
             c.depth = static_cast<std::uint32_t>(in_range(depth, u32, "depth"));
             c.channel_mask = static_cast<std::uint32_t>(in_range(channel_mask, u32, "channel_mask"));
             c.base_w = base_w;
             c.amplitude_w = amplitude_w;
             c.cycle = cycle;
             c.ts_offset = ts_offset;
             c.window_ns = static_cast<std::uint32_t>(in_range(window_ns, u32, "window_ns"));
             c.transient_error_every =
                 static_cast<std::uint64_t>(in_range(transient_error_every, INT64_MAX, "transient_error_every"));
             c.fatal_error_at_poll = static_cast<std::uint64_t>(in_range(fatal_error_at_poll, INT64_MAX, "fatal_error_at_poll"));
             return std::make_shared<SyntheticSource>(c);
           }),
           py::kw_only(), py::arg("period_ns") = 1'000'000, py::arg("depth") = 1,
           py::arg("channel_mask") = kAllChannels, py::arg("base_w") = 300.0, py::arg("amplitude_w") = 100.0,
           py::arg("cycle") = 50, py::arg("ts_offset") = 0, py::arg("window_ns") = 0,
           py::arg("transient_error_every") = 0, py::arg("fatal_error_at_poll") = 0)
      .def("value", [](const SyntheticSource& src, const py::int_& k, int channel) {
             // k spans the whole unsigned 64-bit sequence space; a negative
             // k is named rather than rejected as an overload mismatch.
             if (k < py::int_(0)) throw std::invalid_argument("k=" + py::str(k).cast<std::string>() + ": must be >= 0");
             return src.value(k.cast<std::uint64_t>(), channel);
           }, py::arg("k"), py::arg("channel"),
           "Power of channel `channel` (0..3) in reading k, as the documented waveform gives it.")
      .def("appear_host_ns", [](const SyntheticSource& src, std::int64_t k) {
             if (k < 0) throw std::invalid_argument("k=" + std::to_string(k) + ": must be >= 0");
             return src.appear_host_ns(static_cast<std::uint64_t>(k));
           }, py::arg("k"),
           "Host time at which reading k appears; -1 before the first poll.")
      .def_property_readonly("polls", &SyntheticSource::polls);

  // ------------------------------------------------------------ sampler
  py::class_<SamplerStats>(m, "SamplerStats", "Counters and timing of one sampler run.")
      .def_readonly("polls", &SamplerStats::polls)
      .def_readonly("samples", &SamplerStats::samples)
      .def_readonly("duplicates", &SamplerStats::duplicates)
      .def_readonly("drops", &SamplerStats::drops)
      .def_readonly("source_missed", &SamplerStats::source_missed)
      .def_readonly("read_errors", &SamplerStats::read_errors)
      .def_readonly("deadline_misses", &SamplerStats::deadline_misses)
      .def_readonly("drained", &SamplerStats::drained)
      .def_readonly("jitter_p50_ns", &SamplerStats::jitter_p50_ns)
      .def_readonly("jitter_p90_ns", &SamplerStats::jitter_p90_ns)
      .def_readonly("jitter_p99_ns", &SamplerStats::jitter_p99_ns)
      .def_readonly("jitter_max_ns", &SamplerStats::jitter_max_ns)
      .def_readonly("mean_period_ns", &SamplerStats::mean_period_ns)
      .def_readonly("cpu_time_ns", &SamplerStats::cpu_time_ns)
      .def_readonly("wall_time_ns", &SamplerStats::wall_time_ns)
      .def_readonly("buffered", &SamplerStats::buffered)
      .def_readonly("last_read_error", &SamplerStats::last_read_error)
      .def_property_readonly("cpu_fraction",
                             [](const SamplerStats& s) {
                               return s.wall_time_ns > 0 ? static_cast<double>(s.cpu_time_ns) /
                                                               static_cast<double>(s.wall_time_ns)
                                                         : 0.0;
                             },
                             "Sampler thread CPU time / wall time (1.0 = one whole core).")
      .def("as_dict", [](const SamplerStats& s) {
        py::dict d;
        d["polls"] = s.polls;
        d["samples"] = s.samples;
        d["duplicates"] = s.duplicates;
        d["drops"] = s.drops;
        d["source_missed"] = s.source_missed;
        d["read_errors"] = s.read_errors;
        d["deadline_misses"] = s.deadline_misses;
        d["drained"] = s.drained;
        d["jitter_p50_ns"] = s.jitter_p50_ns;
        d["jitter_p90_ns"] = s.jitter_p90_ns;
        d["jitter_p99_ns"] = s.jitter_p99_ns;
        d["jitter_max_ns"] = s.jitter_max_ns;
        d["mean_period_ns"] = s.mean_period_ns;
        d["cpu_time_ns"] = s.cpu_time_ns;
        d["wall_time_ns"] = s.wall_time_ns;
        d["buffered"] = s.buffered;
        d["last_read_error"] = s.last_read_error;
        return d;
      })
      .def("__repr__", [](const SamplerStats& s) {
        return "SamplerStats(polls=" + std::to_string(s.polls) + ", samples=" + std::to_string(s.samples) +
               ", duplicates=" + std::to_string(s.duplicates) + ", drops=" + std::to_string(s.drops) +
               ", source_missed=" + std::to_string(s.source_missed) +
               ", read_errors=" + std::to_string(s.read_errors) +
               ", deadline_misses=" + std::to_string(s.deadline_misses) +
               ", jitter_p99_ns=" + std::to_string(s.jitter_p99_ns) + ")";
      });

  py::class_<Sampler>(m, "Sampler",
                      "Polls one power source on a background C++ thread and buffers new readings in a\n"
                      "lock-free ring. Use as a context manager, or start()/stop(); drain() any time.")
      .def(py::init([](std::shared_ptr<PowerSource> source, std::int64_t period_ns, py::ssize_t capacity,
                       std::optional<int> cpu) {
             SamplerConfig c;
             c.period_ns = period_ns;
             c.capacity = non_negative(capacity, "capacity");
             c.cpu = cpu ? *cpu : -1;
             if (cpu && *cpu < 0) {
               throw std::invalid_argument("cpu=" + std::to_string(*cpu) + ": must be >= 0, or None for no pinning");
             }
             return std::make_unique<Sampler>(std::move(source), c);
           }),
           py::arg("source"), py::kw_only(), py::arg("period_ns") = 1'000'000, py::arg("capacity") = 1 << 16,
           py::arg("cpu") = py::none())
      .def("start", &Sampler::start, "Starts the sampler thread. A sampler runs once.")
      .def(
          "stop",
          [](Sampler& s) {
            {
              py::gil_scoped_release nogil;
              s.stop();
            }
            const std::string err = s.error();
            if (!err.empty()) throw SamplerFailure(err);
          },
          "Stops and joins the thread (one last poll first). Raises SamplerError if the thread failed.")
      .def(
          "drain",
          [](Sampler& s, std::optional<py::ssize_t> max) {
            const std::size_t limit = max ? non_negative(*max, "max") : std::size_t(-1);
            std::unique_ptr<Sample[]> buf;
            std::size_t n = 0;
            {
              py::gil_scoped_release nogil;
              // available() is an exact lower bound for the consumer, so the
              // buffer is sized once and filled completely.
              const std::size_t want = std::min(s.available(), limit);
              buf.reset(new Sample[want > 0 ? want : 1]);
              n = s.drain(buf.get(), want);
            }
            if (n == 0 && limit != 0 && !s.running()) {
              // The thread may have ended (pushing its final poll) between
              // sizing the buffer and draining: once it has ended,
              // available() is exact, so look once more before refusing.
              py::gil_scoped_release nogil;
              const std::size_t want = std::min(s.available(), limit);
              if (want > 0) {
                buf.reset(new Sample[want]);
                n = s.drain(buf.get(), want);
              }
            }
            if (n == 0 && limit != 0 && !s.running()) {
              if (!s.started()) throw std::runtime_error("drain(): the sampler was never started; call start() first");
              const std::string err = s.error();
              throw std::runtime_error("drain(): the sampler is stopped and every sample was already drained" +
                                       (err.empty() ? std::string() : " (it stopped on an error: " + err + ")"));
            }
            return owning_array(sample_dtype(), std::move(buf), n);
          },
          py::arg("max") = py::none(),
          "Moves buffered samples (at most `max`) into a new SAMPLE_DTYPE array, without a further copy.")
      .def(
          "drain_into",
          [](Sampler& s, py::array out) {
            if (!out.dtype().equal(sample_dtype())) {
              throw std::invalid_argument("out: dtype must be SAMPLE_DTYPE, got " +
                                          py::str(out.dtype()).cast<std::string>());
            }
            if (out.ndim() != 1 || !(out.flags() & py::array::c_style) || !out.writeable()) {
              throw std::invalid_argument("out: must be a writeable, C-contiguous 1-D array");
            }
            auto* dst = static_cast<Sample*>(out.mutable_data());
            const auto cap = static_cast<std::size_t>(out.shape(0));
            std::size_t n;
            {
              py::gil_scoped_release nogil;
              n = s.drain(dst, cap);
            }
            // Same contract as drain(): an empty result from a sampler that
            // will never produce more is an error, not a silent 0.
            if (n == 0 && cap != 0 && !s.running()) {
              if (!s.started()) throw std::runtime_error("drain_into(): the sampler was never started; call start() first");
              if (s.available() == 0) {
                throw std::runtime_error("drain_into(): the sampler is stopped and every sample was already drained");
              }
              py::gil_scoped_release nogil;
              n = s.drain(dst, cap);
            }
            return n;
          },
          py::arg("out"), "Moves up to len(out) samples into `out` (SAMPLE_DTYPE); returns how many.")
      .def_property_readonly("available", &Sampler::available, "Samples waiting in the ring.")
      .def_property_readonly("running", &Sampler::running)
      .def_property_readonly("started", &Sampler::started)
      .def_property_readonly("error", [](const Sampler& s) -> std::optional<std::string> {
        std::string e = s.error();
        if (e.empty()) return std::nullopt;
        return e;
      })
      .def_property_readonly("period_ns", [](const Sampler& s) { return s.config().period_ns; })
      .def_property_readonly("capacity", [](const Sampler& s) { return s.config().capacity; })
      .def_property_readonly("cpu", [](const Sampler& s) -> std::optional<int> {
        if (s.config().cpu < 0) return std::nullopt;
        return s.config().cpu;
      })
      .def_property_readonly("source", [](const Sampler& s) { return s.source(); })
      .def("stats", &Sampler::stats, "A snapshot of the counters; valid while running and after stop().")
      .def("__enter__", [](Sampler& s) -> Sampler& {
        s.start();
        return s;
      }, py::return_value_policy::reference)
      .def("__exit__", [](Sampler& s, const py::object& exc_type, const py::object&, const py::object&) {
        {
          py::gil_scoped_release nogil;
          s.stop();
        }
        // An exception already leaving the with-block wins; otherwise a
        // thread failure surfaces here.
        const std::string err = s.error();
        if (!err.empty() && exc_type.is_none()) throw SamplerFailure(err);
        return false;
      });

  // ------------------------------------------------------------ event log
  py::native_enum<MarkerKind>(m, "MarkerKind", "enum.IntEnum", "What a marker marks.")
      .value("EXEC_BEGIN", MarkerKind::kExecBegin)
      .value("EXEC_END", MarkerKind::kExecEnd)
      .value("RUN_BEGIN", MarkerKind::kRunBegin)
      .value("RUN_END", MarkerKind::kRunEnd)
      .finalize();

  py::class_<EventLog>(m, "EventLog",
                       "Append-only log of execution/run markers: preallocated, no lock, one writer thread.")
      .def(py::init([](py::ssize_t capacity) { return std::make_unique<EventLog>(non_negative(capacity, "capacity")); }),
           py::arg("capacity") = 1 << 20)
      .def(
          "mark",
          [](EventLog& log, MarkerKind kind, std::int32_t run, std::int32_t execution, std::int32_t kernel_id,
             std::optional<std::int64_t> host_ns, std::optional<std::int64_t> device_ts) {
            const std::int64_t t = host_ns ? *host_ns : host_now_ns();
            if (!log.mark(kind, run, execution, kernel_id, t, device_ts.value_or(0), device_ts.has_value())) {
              throw std::runtime_error("mark(): the EventLog is full (capacity=" + std::to_string(log.capacity()) +
                                       ", dropped=" + std::to_string(log.dropped()) +
                                       "); create it with a larger capacity");
            }
          },
          py::arg("kind"), py::arg("run"), py::arg("execution") = -1, py::arg("kernel_id") = 0, py::kw_only(),
          py::arg("host_ns") = py::none(), py::arg("device_ts") = py::none(),
          "Appends a marker stamped with the host clock now (or host_ns); device_ts in the device clock if known.")
      .def(
          "markers",
          [](py::object self) {
            auto& log = self.cast<EventLog&>();
            py::array arr(marker_dtype(), {static_cast<py::ssize_t>(log.size())},
                          {static_cast<py::ssize_t>(sizeof(Marker))}, log.data(), self);
            // A view of published, immutable markers: never written through.
            arr.attr("setflags")(py::arg("write") = false);
            return arr;
          },
          "A read-only MARKER_DTYPE view (no copy) of the markers published so far.")
      .def("clear", &EventLog::clear, "Forgets all markers; earlier views see their slots reused.")
      .def_property_readonly("capacity", &EventLog::capacity)
      .def_property_readonly("dropped", &EventLog::dropped)
      .def("__len__", &EventLog::size);

  // ------------------------------------------------------------ simulator
  namespace sim = fingrav::sim;
  m.attr("EXEC_DTYPE") = exec_dtype();
  m.attr("LOG_DTYPE") = log_dtype();
  m.attr("FIRMWARE_DTYPE") = firmware_dtype();

  m.def("sim_parameters", [] {
    sim::SimParams defaults;
    py::list out;
    for (const auto& e : sim::param_table()) out.append(py::make_tuple(e.name, e.get(defaults), e.doc));
    return out;
  }, "Every simulator parameter as (name, default, doc).");
  m.def("sim_kernel_presets", [] {
    py::list out;
    for (const auto& k : sim::kernel_presets()) out.append(kernel_to_dict(k));
    return out;
  }, "The built-in kernels (the paper's cases) as dicts.");

  py::class_<TimestampSource, std::shared_ptr<TimestampSource>>(m, "TimestampSource",
                                                                "A device clock readable from the host (interface).")
      .def_property_readonly("name", [](const TimestampSource& t) { return t.timestamp_info().name; })
      .def_property_readonly("clock_domain", [](const TimestampSource& t) { return t.timestamp_info().clock_domain; })
      .def_property_readonly("nominal_tick_ns", [](const TimestampSource& t) { return t.timestamp_info().nominal_tick_ns; })
      .def("read_device_ticks", [](TimestampSource& t) {
        py::gil_scoped_release nogil;
        return t.read_device_ticks();
      }, "One read of the device clock (blocks for the read's latency).");

  py::class_<sim::SimDevice, std::shared_ptr<sim::SimDevice>>(m, "SimDevice",
      "The simulated GPU (see fingrav_native.sim for the friendly wrapper).")
      .def(py::init([](const py::dict& params, bool realtime) {
             return std::make_shared<sim::SimDevice>(params_from_dict(params), realtime);
           }),
           py::arg("params") = py::dict(), py::kw_only(), py::arg("realtime") = false)
      .def_property_readonly("realtime", &sim::SimDevice::realtime)
      .def_property_readonly("params", [](const sim::SimDevice& d) {
        py::dict out;
        for (const auto& e : sim::param_table()) out[py::str(e.name)] = e.get(d.params());
        return out;
      })
      .def("add_kernel", [](sim::SimDevice& d, const py::dict& spec) { return d.add_kernel(kernel_from_dict(spec)); },
           py::arg("spec"), "Registers a user-defined kernel; returns its id.")
      .def("kernel_id", &sim::SimDevice::kernel_id, py::arg("name"))
      .def("kernels", [](const sim::SimDevice& d) {
        py::list out;
        for (const auto& k : d.kernels()) out.append(kernel_to_dict(k));
        return out;
      })
      .def("now", &sim::SimDevice::now, py::call_guard<py::gil_scoped_release>())
      .def("advance", &sim::SimDevice::advance, py::arg("ns"), py::call_guard<py::gil_scoped_release>())
      .def("launch", &sim::SimDevice::launch, py::arg("kernel"), py::arg("count"), py::arg("run"),
           py::call_guard<py::gil_scoped_release>())
      .def("synchronize", &sim::SimDevice::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("busy", &sim::SimDevice::busy, py::call_guard<py::gil_scoped_release>())
      .def("read_clock", [](sim::SimDevice& d) {
        Bracket b;
        {
          py::gil_scoped_release nogil;
          b = d.read_clock();
        }
        return py::make_tuple(b.host_before, b.device_ticks, b.host_after);
      }, "One bracketed read: (host_before_ns, device_ticks, host_after_ns).")
      .def("read_clocks", [](sim::SimDevice& d, py::ssize_t n) {
        if (n < 1) throw std::invalid_argument("n=" + std::to_string(n) + ": must be >= 1");
        py::array_t<std::int64_t> out({n, static_cast<py::ssize_t>(3)});
        auto* o = out.mutable_data();
        py::gil_scoped_release nogil;
        for (py::ssize_t i = 0; i < n; ++i) {
          const Bracket b = d.read_clock();
          o[3 * i] = b.host_before;
          o[3 * i + 1] = b.device_ticks;
          o[3 * i + 2] = b.host_after;
        }
        return out;
      }, py::arg("n"), "A burst of n back-to-back bracketed reads as an (n, 3) int64 array.")
      .def("device_ticks_at", [](const sim::SimDevice& d, const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& t) {
        return map_i64(t, [&](std::int64_t h) { return d.device_ticks_at(h); });
      }, py::arg("host_ns"), "True device clock ticks at host times.")
      .def("logger_ticks_at", [](const sim::SimDevice& d, const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& t) {
        return map_i64(t, [&](std::int64_t h) { return d.logger_ticks_at(h); });
      }, py::arg("host_ns"), "True logger clock ticks at host times.")
      .def("host_at_device_ticks", py::vectorize([](const sim::SimDevice* d, double ticks) { return d->host_at_device_ticks(ticks); }),
           py::arg("ticks"), "True host time (float ns) at which the device clock reads `ticks`.")
      .def("host_at_logger_ticks", py::vectorize([](const sim::SimDevice* d, double ticks) { return d->host_at_logger_ticks(ticks); }),
           py::arg("ticks"), "True host time (float ns) at which the logger clock reads `ticks`.")
      .def("truth_power", [](sim::SimDevice& d, const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& t) {
        py::array_t<float> out({t.size(), static_cast<py::ssize_t>(4)});
        float* o = out.mutable_data();
        const std::int64_t* ti = t.data();
        const auto n = static_cast<std::size_t>(t.size());
        py::gil_scoped_release nogil;
        d.truth_power(ti, n, o);
        return out;
      }, py::arg("host_ns"), "Exact power (total, compute, io, memory) at host times, as an (n, 4) array.")
      .def("executions", [](sim::SimDevice& d, py::ssize_t first) {
             return vector_array(exec_dtype(), d.executions(non_negative(first, "first")));
           }, py::arg("first") = 0, "Execution records (EXEC_DTYPE), skipping the first `first`.")
      .def("execution_count", &sim::SimDevice::execution_count, "How many execution records there are.")
      .def("logs", [](sim::SimDevice& d) { return vector_array(log_dtype(), d.logs()); })
      .def("observed_samples", [](sim::SimDevice& d, std::optional<std::int64_t> from_publish_ns) {
             return vector_array(sample_dtype(), d.observed_samples(from_publish_ns.value_or(INT64_MIN)));
           }, py::arg("from_publish_ns") = py::none(),
           "The logs (published at or after from_publish_ns) as a sampler polling every poll_period_ns\n"
           "would have drained them (SAMPLE_DTYPE).")
      .def("firmware", [](sim::SimDevice& d) { return vector_array(firmware_dtype(), d.firmware()); })
      .def("clear_records", &sim::SimDevice::clear_records)
      .def("current_freq", &sim::SimDevice::current_freq)
      .def("current_temp_rise_k", &sim::SimDevice::current_temp_rise_k,
           "Die temperature above ambient, kelvin (the leakage model's input).");

  py::class_<sim::SimPowerSource, PowerSource, std::shared_ptr<sim::SimPowerSource>>(
      m, "SimPowerSource", "A real-time SimDevice's power logger as a PowerSource for the Sampler.")
      .def(py::init<std::shared_ptr<sim::SimDevice>, std::uint32_t>(), py::arg("device"), py::kw_only(),
           py::arg("depth") = 1);

  py::class_<sim::SimTimestampSource, TimestampSource, std::shared_ptr<sim::SimTimestampSource>>(
      m, "SimTimestampSource", "A SimDevice's clock as a TimestampSource.")
      .def(py::init<std::shared_ptr<sim::SimDevice>>(), py::arg("device"));

  // ------------------------------------------------------------ clock sync
  m.def(
      "measure_brackets",
      [](std::shared_ptr<TimestampSource> source, py::ssize_t n) {
        if (!source) throw std::invalid_argument("source: must not be None");
        if (n < 1 || n > (1 << 24)) throw std::invalid_argument("n=" + std::to_string(n) + ": must be in [1, 2^24]");
        std::unique_ptr<Bracket[]> buf(new Bracket[static_cast<std::size_t>(n)]);
        {
          py::gil_scoped_release nogil;
          measure_brackets(*source, buf.get(), static_cast<std::size_t>(n));
        }
        return brackets_array(std::move(buf), static_cast<std::size_t>(n));
      },
      py::arg("source"), py::arg("n"),
      "n bracketed reads of a device clock, back to back: an (n, 3) int64 array of\n"
      "(host_before_ns, device_ticks, host_after_ns). The GIL is released while reading.");

  py::class_<ClockSyncStats>(m, "ClockSyncStats", "Counters of a ClockSyncRecorder.")
      .def_readonly("bursts", &ClockSyncStats::bursts)
      .def_readonly("reads", &ClockSyncStats::reads)
      .def_readonly("drops", &ClockSyncStats::drops)
      .def_readonly("cpu_time_ns", &ClockSyncStats::cpu_time_ns)
      .def_readonly("wall_time_ns", &ClockSyncStats::wall_time_ns)
      .def("__repr__", [](const ClockSyncStats& s) {
        return "ClockSyncStats(bursts=" + std::to_string(s.bursts) + ", reads=" + std::to_string(s.reads) +
               ", drops=" + std::to_string(s.drops) + ")";
      });

  py::class_<ClockSyncRecorder>(m, "ClockSyncRecorder",
                                "Takes a burst of bracketed device-clock reads every interval on a background\n"
                                "thread, so a long campaign can refit its clock map afterwards.")
      .def(py::init([](std::shared_ptr<TimestampSource> source, std::int64_t interval_ns, std::int64_t burst,
                       py::ssize_t capacity) {
             if (burst < 1 || burst > 4096) {
               throw std::invalid_argument("burst=" + std::to_string(burst) + ": must be in [1, 4096]");
             }
             ClockSyncConfig c;
             c.interval_ns = interval_ns;
             c.burst = static_cast<std::uint32_t>(burst);
             c.capacity = non_negative(capacity, "capacity");
             return std::make_unique<ClockSyncRecorder>(std::move(source), c);
           }),
           py::arg("source"), py::kw_only(), py::arg("interval_ns") = 250'000'000, py::arg("burst") = 32,
           py::arg("capacity") = 1 << 16)
      .def("start", &ClockSyncRecorder::start, "Starts the thread: a burst at once, then one per interval.")
      .def("stop", [](ClockSyncRecorder& r) {
        {
          py::gil_scoped_release nogil;
          r.stop();
        }
        const std::string err = r.error();
        if (!err.empty()) throw SamplerFailure(err);
      }, "Takes a last burst and joins. Raises SamplerError if the timestamp source failed.")
      .def("drain", [](ClockSyncRecorder& r) {
        std::unique_ptr<Bracket[]> buf;
        std::size_t n;
        {
          py::gil_scoped_release nogil;
          const std::size_t want = r.available();
          buf.reset(new Bracket[want > 0 ? want : 1]);
          n = r.drain(buf.get(), want);
        }
        return brackets_array(std::move(buf), n);
      }, "Moves the recorded brackets into an (n, 3) int64 array (no further copy).")
      .def_property_readonly("available", &ClockSyncRecorder::available)
      .def_property_readonly("running", &ClockSyncRecorder::running)
      .def_property_readonly("started", &ClockSyncRecorder::started)
      .def_property_readonly("error", [](const ClockSyncRecorder& r) -> std::optional<std::string> {
        std::string e = r.error();
        if (e.empty()) return std::nullopt;
        return e;
      })
      .def_property_readonly("interval_ns", [](const ClockSyncRecorder& r) { return r.config().interval_ns; })
      .def_property_readonly("burst", [](const ClockSyncRecorder& r) { return r.config().burst; })
      .def("stats", &ClockSyncRecorder::stats)
      .def("__enter__", [](ClockSyncRecorder& r) -> ClockSyncRecorder& {
        r.start();
        return r;
      }, py::return_value_policy::reference)
      .def("__exit__", [](ClockSyncRecorder& r, const py::object& exc_type, const py::object&, const py::object&) {
        {
          py::gil_scoped_release nogil;
          r.stop();
        }
        const std::string err = r.error();
        if (!err.empty() && exc_type.is_none()) throw SamplerFailure(err);
        return false;
      });

  bind_amd_power(m);
  bind_amd_runtime(m);
  bind_nvml(m);
  bind_cuda(m);
}
