// AMD power: the gpu_metrics parser and source, the hwmon fallback.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common.hpp"
#include "fingrav/amd/gpu_metrics.hpp"
#include "fingrav/power_source.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

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
  d["firmware_tick_ns"] = g.firmware_tick_ns;
  d["accumulation_counter"] = u64(g.accumulation_counter);
  d["throttle_status"] = u32(g.throttle_status);
  d["gfxclk_lock_status"] = u32(g.gfxclk_lock_status);
  d["current_gfxclk_mhz"] = g.current_gfxclk_mhz();
  d["current_uclk_mhz"] = u16(g.current_uclk_mhz);
  d["num_partition"] = u16(g.num_partition);
  // Format 1.9 only (None for the fixed layouts).
  d["attribute_count"] = g.encoding_bytes ? py::object(py::int_(g.attribute_count)) : py::object(py::none());
  d["encoding_bytes"] = g.encoding_bytes ? py::object(py::int_(g.encoding_bytes)) : py::object(py::none());
  return d;
}

}  // namespace

void register_amd_power(py::module_& m) {
  // A ValueError: the bytes are wrong, not the machine.
  py::register_exception<amd::GpuMetricsFormatError>(m, "GpuMetricsFormatError", rooted_bases(PyExc_ValueError));
  m.attr("AMD_ENERGY_UNIT_UJ") = amd::kEnergyUnitUj;
  m.attr("AMD_FIRMWARE_TICK_NS") = amd::kFirmwareTickNs;
  m.attr("AMD_DRIVER_CACHE_INTERVAL_NS") = amd::kDriverCacheIntervalNs;
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
      "Parses one read of an amdgpu gpu_metrics file (formats 1.4-1.9; 1.9 decoded by its attribute\n"
      "encodings) into a dict; None marks fields the firmware does not provide. Raises GpuMetricsFormatError\n"
      "for an unknown or inconsistent table.");

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
      "'amd-pmfw-10ns'; a 1.9 table may state 1 ns, 'amd-pmfw-1ns') when the firmware sets it, else the\n"
      "driver's boottime stamp (domain 'boottime'). info.native_period_ns is 0: the period depends on the\n"
      "driver's table cache and is measured by the backend.")
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

}  // namespace fingrav::bindings
