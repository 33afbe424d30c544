// NVIDIA power: NVML samples, instant power and energy.
#include <cstddef>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "fingrav/nvidia/nvml.hpp"
#include "fingrav/power_source.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

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
  out["c2c_enabled"] = d.c2c < 0 ? py::object(py::none()) : py::object(py::bool_(d.c2c == 1));
  py::dict scopes;  // field mode -> the scopes it works at
  for (NvmlMode m : {NvmlMode::kInstant, NvmlMode::kAverage}) {
    py::list ok;
    if (d.gpu_scope_modes & (1u << static_cast<unsigned>(m))) ok.append("gpu");
    if (d.module_scope_modes & (1u << static_cast<unsigned>(m))) ok.append("module");
    scopes[nvml_mode_name(m)] = ok;
  }
  out["field_scopes"] = scopes;
  py::list memory_modes;  // field modes that read GPU memory power beside the total
  py::dict memory_unsupported;
  for (NvmlMode m : {NvmlMode::kInstant, NvmlMode::kAverage}) {
    if (d.memory_scope_modes & (1u << static_cast<unsigned>(m))) {
      memory_modes.append(nvml_mode_name(m));
    } else {
      memory_unsupported[nvml_mode_name(m)] = d.memory_unsupported[static_cast<unsigned>(m)];
    }
  }
  out["memory_modes"] = memory_modes;
  out["memory_unsupported"] = memory_unsupported;
  out["sample_buffer"] = d.sample_buffer;
  out["driver_version"] = driver;
  out["library_path"] = path;
  return out;
}

}  // namespace

void register_nvml(py::module_& m) {
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
      "reason), energy_from_field, c2c_enabled (a Grace Hopper superchip; None: unknown), field_scopes\n"
      "(instant/average -> the power scopes that work: 'gpu', 'module'), memory_modes (the field modes that\n"
      "also read GPU memory power at NVML_POWER_SCOPE_MEMORY), memory_unsupported (field mode -> why not),\n"
      "sample_buffer, driver_version, library_path. [] when NVML sees no GPU.\n"
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
      "Board power of one NVIDIA GPU through NVML. mode: 'samples' (the driver's buffered power samples,\n"
      "from the newest one at construction on), 'instant' / 'average' (field values), 'energy' (power\n"
      "derived from moves of the energy counter, FLAG_DERIVED, window = interval) or 'usage'\n"
      "(nvmlDeviceGetPowerUsage). All but 'samples' keep a reading only when the value (counter) changes,\n"
      "after a first baseline read. Timestamps: host CLOCK_REALTIME in us, clock domain 'nvml-host-us',\n"
      "tick_ns 1000. scope: for 'instant' and 'average', 'gpu', 'module' (GPU, Grace CPU and memory) or\n"
      "'auto' (the module on a Grace Hopper superchip, as Zeus reads it; else the GPU). Raises\n"
      "DeviceUnavailableError when the device is absent or does not support the mode or scope (naming\n"
      "the modes it does).")
      .def(py::init([](long long device, const std::string& mode, const std::string& scope) {
             if (device < 0 || device > std::numeric_limits<unsigned int>::max()) {
               throw std::invalid_argument("device=" + std::to_string(device) + ": must be >= 0");
             }
             const NvmlMode md = parse_nvml_mode(mode);
             const NvmlScope sc = parse_nvml_scope(scope);
             py::gil_scoped_release nogil;
             return std::make_shared<NvmlPowerSource>(static_cast<unsigned int>(device), md, sc);
           }),
           py::arg("device") = 0, py::arg("mode") = "samples", py::arg("scope") = "auto")
      .def_property_readonly("mode", [](const NvmlPowerSource& s) { return nvml_mode_name(s.mode()); })
      .def_property_readonly("scope", [](const NvmlPowerSource& s) { return nvml_scope_name(s.scope()); },
                             "The power the readings are of: 'gpu' or 'module'.")
      .def_property_readonly("scope_reference", &NvmlPowerSource::scope_reference,
                             "Why that scope, in words.")
      .def_property_readonly("device", &NvmlPowerSource::device_index)
      .def_property_readonly("library_path", &NvmlPowerSource::library_path)
      .def_property_readonly("window_documented", &NvmlPowerSource::window_documented,
                             "Whether the averaging window declared in info.window_ns is published (nvml.h; for\n"
                             "the instant field on A100/H100, Yang et al., SC'24). False: 0 is declared because\n"
                             "nothing is published for this GPU and mode; characterise the sensor.")
      .def_property_readonly("window_reference", &NvmlPowerSource::window_reference,
                             "Where the declared window comes from, in words ('' when nowhere).")
      .def_property_readonly("unchanged_polls", &NvmlPowerSource::unchanged_polls,
                             "Polls that saw the value (or energy counter) the previous poll saw, so kept nothing\n"
                             "(instant, average, usage and energy modes keep a reading only when it changes).")
      .def_property_readonly("restamped", &NvmlPowerSource::restamped,
                             "Changed values whose NVML timestamp did not advance, stamped when first seen.")
      .def_property_readonly("sample_capacity", &NvmlPowerSource::sample_capacity,
                             "Samples one fetch can return (samples mode; 0 otherwise).")
      .def_property_readonly("possible_overruns", &NvmlPowerSource::possible_overruns,
                             "Fetches that came back full of new samples: the driver may have overwritten some.")
      .def_property_readonly("energy_resets", &NvmlPowerSource::energy_resets,
                             "Times the energy counter went backwards and was re-baselined (energy mode).")
      .def_property_readonly("memory_channel", &NvmlPowerSource::memory_channel,
                             "Whether the readings carry GPU memory power (NVML_POWER_SCOPE_MEMORY) in the\n"
                             "'memory' channel, read in the same call as the total (field modes where the GPU and\n"
                             "driver have the scope). False: the channel is NaN, never 0.")
      .def_property_readonly("memory_reference", &NvmlPowerSource::memory_reference,
                             "Why the memory channel is there or not, in words.")
      .def_property_readonly("memory_missing", &NvmlPowerSource::memory_missing,
                             "Polls whose memory value failed or read 0 while the total was read (NaN there).")
      .def_property_readonly("device_info", [](const NvmlPowerSource& s) {
        return nvml_device_dict(s.device_info(), s.nvml().driver_version(), s.library_path());
      });
}

}  // namespace fingrav::bindings
