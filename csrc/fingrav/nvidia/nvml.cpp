#include "fingrav/nvidia/nvml.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace fingrav {

using namespace nvml_abi;

namespace nvml_abi {

const std::vector<Prototype>& prototypes() {
#define FINGRAV_NVML_PROTO(name, ret, params, required) {#name, #ret, #params, required},
  static const std::vector<Prototype> table = {FINGRAV_NVML_FUNCTIONS(FINGRAV_NVML_PROTO)};
#undef FINGRAV_NVML_PROTO
  return table;
}

const std::vector<Constant>& constants() {
#define C(n) {#n, static_cast<long long>(n)}
  static const std::vector<Constant> table = {
      C(NVML_SUCCESS),
      C(NVML_ERROR_UNINITIALIZED),
      C(NVML_ERROR_INVALID_ARGUMENT),
      C(NVML_ERROR_NOT_SUPPORTED),
      C(NVML_ERROR_NO_PERMISSION),
      C(NVML_ERROR_NOT_FOUND),
      C(NVML_ERROR_INSUFFICIENT_SIZE),
      C(NVML_ERROR_DRIVER_NOT_LOADED),
      C(NVML_ERROR_GPU_IS_LOST),
      C(NVML_ERROR_UNKNOWN),
      C(NVML_TOTAL_POWER_SAMPLES),
      C(NVML_VALUE_TYPE_DOUBLE),
      C(NVML_VALUE_TYPE_UNSIGNED_INT),
      C(NVML_VALUE_TYPE_UNSIGNED_LONG),
      C(NVML_VALUE_TYPE_UNSIGNED_LONG_LONG),
      C(NVML_VALUE_TYPE_SIGNED_LONG_LONG),
      C(NVML_VALUE_TYPE_SIGNED_INT),
      C(NVML_VALUE_TYPE_UNSIGNED_SHORT),
      C(NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION),
      C(NVML_FI_DEV_POWER_AVERAGE),
      C(NVML_FI_DEV_POWER_INSTANT),
      C(NVML_POWER_SCOPE_GPU),
      C(NVML_POWER_SCOPE_MODULE),
      C(NVML_POWER_SCOPE_MEMORY),
      C(NVML_DEVICE_ARCH_AMPERE),
      C(NVML_DEVICE_ARCH_UNKNOWN),
      C(NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE),
      C(NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE),
      C(NVML_DEVICE_UUID_V2_BUFFER_SIZE),
      C(NVML_DEVICE_NAME_V2_BUFFER_SIZE),
      C(NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE),
  };
#undef C
  return table;
}

const std::vector<Layout>& layouts() {
#define S(t) {#t, "", sizeof(t)}
#define O(t, m) {#t, #m, offsetof(t, m)}
  static const std::vector<Layout> table = {
      S(nvmlValue_t),
      S(nvmlSample_t),
      O(nvmlSample_t, timeStamp),
      O(nvmlSample_t, sampleValue),
      S(nvmlFieldValue_t),
      O(nvmlFieldValue_t, fieldId),
      O(nvmlFieldValue_t, scopeId),
      O(nvmlFieldValue_t, timestamp),
      O(nvmlFieldValue_t, latencyUsec),
      O(nvmlFieldValue_t, valueType),
      O(nvmlFieldValue_t, nvmlReturn),
      O(nvmlFieldValue_t, value),
      S(nvmlPciInfo_t),
      O(nvmlPciInfo_t, busIdLegacy),
      O(nvmlPciInfo_t, domain),
      O(nvmlPciInfo_t, pciSubSystemId),
      O(nvmlPciInfo_t, busId),
      S(nvmlC2cModeInfo_v1_t),
      O(nvmlC2cModeInfo_v1_t, isC2cEnabled),
      S(nvmlReturn_t),
      S(nvmlValueType_t),
      S(nvmlSamplingType_t),
  };
#undef S
#undef O
  return table;
}

}  // namespace nvml_abi

namespace {

const char* const kModeNames[kNvmlModeCount] = {"samples", "instant", "average", "energy", "usage"};
const char* const kScopeNames[3] = {"auto", "gpu", "module"};

std::uint32_t mode_bit(NvmlMode m) { return 1u << static_cast<unsigned>(m); }

// A NUL-terminated copy of a C buffer NVML filled (never trust the terminator).
std::string from_buffer(const char* buf, std::size_t size) {
  return std::string(buf, strnlen(buf, size));
}

// A sample or field value as a double, whatever type NVML chose for it.
// false for a type this code does not know (never guessed at).
bool value_as_double(nvmlValueType_t type, const nvmlValue_t& v, double* out) {
  switch (type) {
    case NVML_VALUE_TYPE_DOUBLE: *out = v.dVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_INT: *out = static_cast<double>(v.uiVal); return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: *out = static_cast<double>(v.ulVal); return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: *out = static_cast<double>(v.ullVal); return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: *out = static_cast<double>(v.sllVal); return true;
    case NVML_VALUE_TYPE_SIGNED_INT: *out = static_cast<double>(v.siVal); return true;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT: *out = static_cast<double>(v.usVal); return true;
    default: return false;
  }
}

bool value_as_u64(nvmlValueType_t type, const nvmlValue_t& v, unsigned long long* out) {
  switch (type) {
    case NVML_VALUE_TYPE_UNSIGNED_INT: *out = v.uiVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: *out = v.ulVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: *out = v.ullVal; return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      if (v.sllVal < 0) return false;
      *out = static_cast<unsigned long long>(v.sllVal);
      return true;
    default: return false;
  }
}

// memory_watts: the memory scope's power, NaN where it was not read (the channel stays NaN, never 0).
Reading total_reading(std::int64_t ts_us, double watts, std::uint32_t window_ns, std::uint32_t flags,
                      double memory_watts = std::numeric_limits<double>::quiet_NaN()) {
  Reading r;
  r.source_ts = ts_us;
  for (float& p : r.power_w) p = std::numeric_limits<float>::quiet_NaN();
  r.power_w[kTotal] = static_cast<float>(watts);
  r.power_w[kMemory] = static_cast<float>(memory_watts);
  r.window_ns = window_ns;
  r.flags = flags;
  return r;
}

std::uint32_t clamp_window(long long ns) {
  if (ns <= 0) return 0;
  return static_cast<std::uint32_t>(std::min<long long>(ns, std::numeric_limits<std::uint32_t>::max()));
}

// Two memory readings alike: equal, or both absent (NaN).
bool same_memory(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Errors after which polling again cannot help.
bool is_fatal(nvmlReturn_t r) {
  return r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_UNINITIALIZED ||
         r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NO_PERMISSION;
}

}  // namespace

std::int64_t realtime_now_us() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

const char* nvml_mode_name(NvmlMode m) noexcept {
  const auto i = static_cast<unsigned>(m);
  return i < kNvmlModeCount ? kModeNames[i] : "?";
}

NvmlMode parse_nvml_mode(const std::string& mode) {
  for (int i = 0; i < kNvmlModeCount; ++i) {
    if (mode == kModeNames[i]) return static_cast<NvmlMode>(i);
  }
  throw std::invalid_argument("mode='" + mode +
                              "': must be one of 'samples', 'instant', 'average', 'energy', 'usage'");
}

const char* nvml_scope_name(NvmlScope s) noexcept {
  const auto i = static_cast<unsigned>(s);
  return i < 3 ? kScopeNames[i] : "?";
}

NvmlScope parse_nvml_scope(const std::string& scope) {
  for (unsigned i = 0; i < 3; ++i) {
    if (scope == kScopeNames[i]) return static_cast<NvmlScope>(i);
  }
  throw std::invalid_argument("scope='" + scope + "': must be one of 'auto', 'gpu', 'module'");
}

// ------------------------------------------------------------------ Nvml
LibrarySpec Nvml::spec() {
  LibrarySpec s;
  s.what = "NVML (libnvidia-ml)";
  // The driver ships only the versioned name; the unversioned link comes with
  // development packages, so it is tried first and the .so.1 right after.
  s.names = {"libnvidia-ml.so", "libnvidia-ml.so.1"};
  s.dirs = nvidia_driver_library_dirs();
  s.override_env = "FINGRAV_NVML_LIBRARY";
  s.install_hint = "Install the NVIDIA driver (it ships libnvidia-ml.so.1).";
  return s;
}

std::string Nvml::locate() { return DynamicLibrary::open(spec()).path(); }

std::shared_ptr<Nvml> Nvml::acquire() {
  // One initialised library per process while anyone holds it; weak, so the
  // last user's release shuts NVML down and closes the library.
  static std::mutex mu;
  static std::weak_ptr<Nvml> current;
  std::lock_guard<std::mutex> lock(mu);
  if (auto live = current.lock()) return live;
  std::shared_ptr<Nvml> fresh(new Nvml(DynamicLibrary::open(spec())));
  current = fresh;
  return fresh;
}

Nvml::Nvml(DynamicLibrary lib) : lib_(std::move(lib)) {
#define FINGRAV_NVML_RESOLVE(name, ret, params, required) \
  name = (required) ? lib_.require_fn<name##_fn>({#name}) : lib_.find_fn<name##_fn>({#name});
  FINGRAV_NVML_FUNCTIONS(FINGRAV_NVML_RESOLVE)
#undef FINGRAV_NVML_RESOLVE
  const nvmlReturn_t r = nvmlInit_v2();
  if (r != NVML_SUCCESS) {
    std::string why = error_text("nvmlInit_v2", r);
    if (r == NVML_ERROR_DRIVER_NOT_LOADED) why += "; the NVIDIA kernel driver is not loaded (is there an NVIDIA GPU?)";
    if (r == NVML_ERROR_NO_PERMISSION) why += "; no permission to open /dev/nvidia*";
    throw DeviceUnavailable("NVML at " + lib_.path() + " could not initialise: " + why);
  }
}

Nvml::~Nvml() { (void)nvmlShutdown(); }

std::string Nvml::error_text(const char* fn, nvmlReturn_t r) const {
  const char* s = nvmlErrorString ? nvmlErrorString(r) : nullptr;
  return std::string(fn) + ": " + (s ? s : "unknown error") + " (NVML error " + std::to_string(r) + ")";
}

std::string Nvml::driver_version() const {
  if (!nvmlSystemGetDriverVersion) return {};
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (nvmlSystemGetDriverVersion(buf, sizeof buf) != NVML_SUCCESS) return {};
  return from_buffer(buf, sizeof buf);
}

unsigned int Nvml::device_count() const {
  unsigned int n = 0;
  const nvmlReturn_t r = nvmlDeviceGetCount_v2(&n);
  if (r != NVML_SUCCESS) throw DeviceUnavailable("NVML at " + path() + ": " + error_text("nvmlDeviceGetCount_v2", r));
  return n;
}

nvmlDevice_t Nvml::device(unsigned int index) const {
  const unsigned int n = device_count();
  if (index >= n) {
    throw DeviceUnavailable("NVML at " + path() + " sees " + std::to_string(n) + " GPU(s); there is no device " +
                            std::to_string(index) +
                            (n == 0 ? " (no NVIDIA GPU is visible: check nvidia-smi and CUDA_VISIBLE_DEVICES is "
                                      "not what NVML uses)"
                                    : ""));
  }
  nvmlDevice_t h = nullptr;
  const nvmlReturn_t r = nvmlDeviceGetHandleByIndex_v2(index, &h);
  if (r != NVML_SUCCESS) {
    throw DeviceUnavailable("NVML device " + std::to_string(index) + ": " +
                            error_text("nvmlDeviceGetHandleByIndex_v2", r));
  }
  return h;
}

NvmlDeviceInfo Nvml::describe(unsigned int index) const {
  const nvmlDevice_t h = device(index);
  NvmlDeviceInfo d;
  d.index = index;
  {
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (nvmlDeviceGetName(h, buf, sizeof buf) == NVML_SUCCESS) d.name = from_buffer(buf, sizeof buf);
  }
  {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvmlDeviceGetUUID(h, buf, sizeof buf) == NVML_SUCCESS) d.uuid = from_buffer(buf, sizeof buf);
  }
  if (nvmlDeviceGetPciInfo_v3) {
    nvmlPciInfo_t pci{};
    if (nvmlDeviceGetPciInfo_v3(h, &pci) == NVML_SUCCESS) d.pci_bus_id = from_buffer(pci.busId, sizeof pci.busId);
  }
  if (nvmlDeviceGetEnforcedPowerLimit) {
    unsigned int mw = 0;
    if (nvmlDeviceGetEnforcedPowerLimit(h, &mw) == NVML_SUCCESS) d.power_limit_w = mw / 1000.0;
  }
  if (nvmlDeviceGetArchitecture) {
    nvmlDeviceArchitecture_t a = NVML_DEVICE_ARCH_UNKNOWN;
    if (nvmlDeviceGetArchitecture(h, &a) == NVML_SUCCESS) d.architecture = a;
  }
  if (nvmlDeviceGetCudaComputeCapability) {
    int ma = -1, mi = -1;
    if (nvmlDeviceGetCudaComputeCapability(h, &ma, &mi) == NVML_SUCCESS) {
      d.cc_major = ma;
      d.cc_minor = mi;
    }
  }

  auto mark = [&d](NvmlMode m, bool ok, std::string why) {
    if (ok) {
      d.modes |= mode_bit(m);
    } else {
      d.unsupported[static_cast<unsigned>(m)] = std::move(why);
    }
  };
  const std::string absent = " is not exported by this NVML (driver too old)";

  // samples: a sizing call (samples = NULL). NOT_FOUND means the buffer is
  // empty right now, not that the query is unsupported.
  if (nvmlDeviceGetSamples) {
    nvmlValueType_t vt = 0;
    unsigned int count = 0;
    const nvmlReturn_t r = nvmlDeviceGetSamples(h, NVML_TOTAL_POWER_SAMPLES, 0, &vt, &count, nullptr);
    mark(NvmlMode::kSamples, r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND,
         error_text("nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)", r));
    if (r == NVML_SUCCESS) d.sample_buffer = count;
  } else {
    mark(NvmlMode::kSamples, false, std::string("nvmlDeviceGetSamples") + absent);
  }

  bool energy_function = false;
  std::string energy_function_why = std::string("nvmlDeviceGetTotalEnergyConsumption") + absent;
  if (nvmlDeviceGetTotalEnergyConsumption) {
    unsigned long long mj = 0;
    const nvmlReturn_t r = nvmlDeviceGetTotalEnergyConsumption(h, &mj);
    energy_function = r == NVML_SUCCESS;
    energy_function_why = error_text("nvmlDeviceGetTotalEnergyConsumption", r);
  }

  // Grace Hopper: the chip-to-chip link to the Grace CPU (Zeus reads the module's power there).
  if (nvmlDeviceGetC2cModeInfoV) {
    nvmlC2cModeInfo_v1_t c{};
    const nvmlReturn_t r = nvmlDeviceGetC2cModeInfoV(h, &c);
    if (r == NVML_SUCCESS) {
      d.c2c = c.isC2cEnabled ? 1 : 0;
    } else {
      d.c2c_why = error_text("nvmlDeviceGetC2cModeInfoV", r);
    }
  } else {
    d.c2c_why = std::string("nvmlDeviceGetC2cModeInfoV") + absent;
  }

  if (nvmlDeviceGetFieldValues) {
    // The power fields at GPU scope and the energy field; on a C2C device the power fields at module scope
    // in a call of their own, so that a driver refusing the scope does not fail the GPU's fields too.
    nvmlFieldValue_t v[3] = {};
    v[0].fieldId = NVML_FI_DEV_POWER_INSTANT;
    v[1].fieldId = NVML_FI_DEV_POWER_AVERAGE;
    v[2].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
    const nvmlReturn_t r = nvmlDeviceGetFieldValues(h, 3, v);
    nvmlFieldValue_t vm[2] = {};
    vm[0].fieldId = NVML_FI_DEV_POWER_INSTANT;
    vm[1].fieldId = NVML_FI_DEV_POWER_AVERAGE;
    vm[0].scopeId = vm[1].scopeId = NVML_POWER_SCOPE_MODULE;
    const nvmlReturn_t rm = d.c2c == 1 ? nvmlDeviceGetFieldValues(h, 2, vm) : NVML_ERROR_NOT_SUPPORTED;
    // Memory scope in a call of its own too: a driver older than the scope may refuse the whole call.
    nvmlFieldValue_t vmem[2] = {};
    vmem[0].fieldId = NVML_FI_DEV_POWER_INSTANT;
    vmem[1].fieldId = NVML_FI_DEV_POWER_AVERAGE;
    vmem[0].scopeId = vmem[1].scopeId = NVML_POWER_SCOPE_MEMORY;
    const nvmlReturn_t rmem = nvmlDeviceGetFieldValues(h, 2, vmem);
    auto field_ok = [&](int i) { return r == NVML_SUCCESS && v[i].nvmlReturn == NVML_SUCCESS; };
    auto field_why = [&](int i, const char* name) {
      return error_text((std::string("nvmlDeviceGetFieldValues(") + name + ")").c_str(),
                        r != NVML_SUCCESS ? r : v[i].nvmlReturn);
    };
    auto module_ok = [&](int i) { return rm == NVML_SUCCESS && vm[i].nvmlReturn == NVML_SUCCESS; };
    auto module_why = [&](int i, const std::string& name) {
      return error_text(("nvmlDeviceGetFieldValues(" + name + ")").c_str(), rm != NVML_SUCCESS ? rm : vm[i].nvmlReturn);
    };
    const NvmlMode field_modes[2] = {NvmlMode::kInstant, NvmlMode::kAverage};
    const char* field_names[2] = {"NVML_FI_DEV_POWER_INSTANT", "NVML_FI_DEV_POWER_AVERAGE"};
    for (int k = 0; k < 2; ++k) {
      const NvmlMode m = field_modes[k];
      const std::string memory_name =
          "nvmlDeviceGetFieldValues(" + std::string(field_names[k]) + ", NVML_POWER_SCOPE_MEMORY)";
      double memory_mw = 0;
      if (rmem != NVML_SUCCESS || vmem[k].nvmlReturn != NVML_SUCCESS) {
        d.memory_unsupported[static_cast<unsigned>(m)] =
            error_text(memory_name.c_str(), rmem != NVML_SUCCESS ? rmem : vmem[k].nvmlReturn);
      } else if (!value_as_double(vmem[k].valueType, vmem[k].value, &memory_mw) || !(memory_mw > 0)) {
        // Zeus (zeus/device/gpu/nvidia.py) finds the memory scope answering 0 on GPUs without it (A40).
        d.memory_unsupported[static_cast<unsigned>(m)] =
            memory_name + " answered " + std::to_string(memory_mw) + " mW: no memory power on this GPU";
      } else {
        d.memory_scope_modes |= mode_bit(m);
      }
      if (field_ok(k)) {
        d.gpu_scope_modes |= mode_bit(m);
      } else {
        d.gpu_unsupported[static_cast<unsigned>(m)] = field_why(k, field_names[k]);
      }
      const std::string module_name = std::string(field_names[k]) + ", NVML_POWER_SCOPE_MODULE";
      if (d.c2c == 1 && module_ok(k)) {
        d.module_scope_modes |= mode_bit(m);
      } else {
        d.module_unsupported[static_cast<unsigned>(m)] =
            d.c2c == 1 ? module_why(k, module_name)
                       : "module scope is read only on a Grace Hopper superchip (C2C enabled); " +
                             (d.c2c == 0 ? std::string("nvmlDeviceGetC2cModeInfoV: C2C is not enabled") : d.c2c_why);
      }
      mark(m, field_ok(k) || (d.module_scope_modes & mode_bit(m)),
           field_why(k, field_names[k]) + (d.c2c == 1 ? "; " + d.module_unsupported[static_cast<unsigned>(m)] : ""));
    }
    d.energy_from_field = field_ok(2);
    mark(NvmlMode::kEnergy, d.energy_from_field || energy_function,
         field_why(2, "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION") + "; " + energy_function_why);
  } else {
    const std::string why = std::string("nvmlDeviceGetFieldValues") + absent;
    d.memory_unsupported[static_cast<unsigned>(NvmlMode::kInstant)] = why;
    d.memory_unsupported[static_cast<unsigned>(NvmlMode::kAverage)] = why;
    mark(NvmlMode::kInstant, false, why);
    mark(NvmlMode::kAverage, false, why);
    mark(NvmlMode::kEnergy, energy_function, why + "; " + energy_function_why);
  }

  if (nvmlDeviceGetPowerUsage) {
    unsigned int mw = 0;
    const nvmlReturn_t r = nvmlDeviceGetPowerUsage(h, &mw);
    mark(NvmlMode::kUsage, r == NVML_SUCCESS, error_text("nvmlDeviceGetPowerUsage", r));
  } else {
    mark(NvmlMode::kUsage, false, std::string("nvmlDeviceGetPowerUsage") + absent);
  }
  return d;
}

std::vector<NvmlDeviceInfo> Nvml::devices() const {
  std::vector<NvmlDeviceInfo> out;
  const unsigned int n = device_count();
  for (unsigned int i = 0; i < n; ++i) out.push_back(describe(i));
  return out;
}

// ------------------------------------------------------------------ source
NvmlPowerSource::NvmlPowerSource(unsigned int device, NvmlMode mode, NvmlScope scope)
    : NvmlPowerSource(device, mode, Nvml::acquire(), scope) {}

NvmlPowerSource::NvmlPowerSource(unsigned int device, NvmlMode mode, std::shared_ptr<Nvml> nvml, NvmlScope scope)
    : nvml_(std::move(nvml)), index_(device), mode_(mode) {
  if (!nvml_) throw std::invalid_argument("nvml: must not be null");
  if (static_cast<unsigned>(mode) >= kNvmlModeCount) throw std::invalid_argument("mode: out of range");
  if (static_cast<unsigned>(scope) >= 3) throw std::invalid_argument("scope: out of range");
  const bool field_mode = mode == NvmlMode::kInstant || mode == NvmlMode::kAverage;
  if (scope == NvmlScope::kModule && !field_mode) {
    throw std::invalid_argument(std::string("scope='module': only the field modes 'instant' and 'average' take a "
                                            "power scope (nvml.h); mode '") +
                                nvml_mode_name(mode) + "' reads what NVML defines for it");
  }
  handle_ = nvml_->device(device);
  dev_ = nvml_->describe(device);
  if (!(dev_.modes & mode_bit(mode))) {
    std::string supported;
    for (int i = 0; i < kNvmlModeCount; ++i) {
      if (dev_.modes & (1u << i)) supported += std::string(supported.empty() ? "" : ", ") + "'" + kModeNames[i] + "'";
    }
    throw DeviceUnavailable("NVML device " + std::to_string(device) + " (" + dev_.name + ") does not support mode '" +
                            nvml_mode_name(mode) + "': " + dev_.unsupported[static_cast<unsigned>(mode)] +
                            ". Modes it supports: " + (supported.empty() ? "none" : supported));
  }

  if (field_mode) {
    choose_scope(scope);
    memory_ = (dev_.memory_scope_modes & mode_bit(mode)) != 0;
    memory_reference_ = memory_ ? "GPU memory (NVML_POWER_SCOPE_MEMORY), read with the total in one "
                                  "nvmlDeviceGetFieldValues call"
                                : "no memory channel: " + dev_.memory_unsupported[static_cast<unsigned>(mode)];
  } else {
    scope_reference_ = std::string("mode '") + nvml_mode_name(mode) + "' has no scope argument in nvml.h: the GPU";
    memory_reference_ = std::string("no memory channel: mode '") + nvml_mode_name(mode) +
                        "' has no scope argument in nvml.h; the field modes 'instant' and 'average' read "
                        "NVML_POWER_SCOPE_MEMORY where the GPU has it";
  }

  info_.name = "nvml:" + std::to_string(device) + ":" + nvml_mode_name(mode) +
               (scope_ == NvmlScope::kModule ? ":module" : "");
  info_.clock_domain = "nvml-host-us";
  info_.tick_ns = 1000.0;
  // The total at the chosen scope, and GPU memory where its scope answers.
  info_.channel_mask = (1u << kTotal) | (memory_ ? (1u << kMemory) : 0u);
  info_.has_sequence = false;         // deduplicated by timestamp
  info_.native_period_ns = 0;

  const bool ampere_or_newer =
      dev_.architecture != NVML_DEVICE_ARCH_UNKNOWN && dev_.architecture >= NVML_DEVICE_ARCH_AMPERE;
  const bool ga100 = dev_.cc_major == 8 && dev_.cc_minor == 0;
  const bool gh100 = dev_.cc_major == 9 && dev_.cc_minor == 0;  // H100 and H200
  switch (mode) {
    case NvmlMode::kSamples: {
      // nvml.h says nothing about what a power sample averages over: declare
      // 0 and say it is undocumented. The buffer is sized from the driver's
      // own sizing answer (pynvml does the same), at least one full poll.
      window_documented_ = false;
      std::size_t cap = std::max<std::size_t>(dev_.sample_buffer, kMaxReadingsPerPoll);
      cap = std::min<std::size_t>(cap, 1u << 16);
      samples_.resize(cap);
      pending_.reserve(cap);
      // nvml.h (nvmlDeviceGetSamples): lastSeenTimeStamp 0 fetches "all the
      // samples maintained by the underlying buffer". That history is the
      // driver's, from before this source existed (possibly a busy GPU); it
      // gives the sampling period, but the first poll starts after its newest
      // sample, or an idle baseline taken now would include old busy power.
      nvmlValueType_t vt = 0;
      unsigned int n = static_cast<unsigned int>(samples_.size());
      const nvmlReturn_t first =
          nvml_->nvmlDeviceGetSamples(handle_, NVML_TOTAL_POWER_SAMPLES, 0, &vt, &n, samples_.data());
      if (first == NVML_SUCCESS && n >= 1) {
        n = std::min<unsigned int>(n, static_cast<unsigned int>(samples_.size()));
        std::vector<unsigned long long> ts(n);
        for (unsigned int i = 0; i < n; ++i) ts[i] = samples_[i].timeStamp;
        std::sort(ts.begin(), ts.end());
        last_seen_us_ = ts.back();
        std::vector<unsigned long long> d;
        for (unsigned int i = 1; i < n; ++i)
          if (ts[i] > ts[i - 1]) d.push_back(ts[i] - ts[i - 1]);
        if (!d.empty()) {
          // The driver's sampling period, measured from what the buffer holds now.
          std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
          info_.native_period_ns = static_cast<std::int64_t>(d[d.size() / 2]) * 1000;
        }
      } else if (first != NVML_SUCCESS && first != NVML_ERROR_NOT_FOUND) {
        // The history fetch failed (an empty buffer is no failure): start
        // from now. nvml.h stamps samples in CPU microseconds since the
        // epoch; from 0 the first poll would return the driver's whole
        // history, old busy power included.
        last_seen_us_ = static_cast<unsigned long long>(
            std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count());
      }
      break;
    }
    case NvmlMode::kInstant:
      // nvml.h documents the field only as "Current GPU power". Yang, Adamek
      // and Armour (SC'24, "Part-time power measurements: nvidia-smi's lack of
      // attention") measured it on A100 (GA100) and H100 (GH100): a 25 ms
      // average, refreshed every 100 ms. Nothing is published for other GPUs.
      if (ga100 || gh100) {
        info_.window_ns = 25'000'000u;
        window_documented_ = true;
        window_reference_ =
            "Yang, Adamek, Armour (SC'24): on A100/H100 NVML_FI_DEV_POWER_INSTANT averages 25 ms of every 100 ms";
      } else {
        window_documented_ = false;
      }
      break;
    case NvmlMode::kAverage:
      // nvml.h: "GPU power averaged over 1 sec interval".
      info_.window_ns = 1'000'000'000u;
      window_documented_ = true;
      window_reference_ = "nvml.h NVML_FI_DEV_POWER_AVERAGE: \"GPU power averaged over 1 sec interval\"";
      break;
    case NvmlMode::kEnergy:
      // Each derived reading averages exactly over the interval between two
      // counter moves; the per-reading window says how long that was.
      window_documented_ = true;
      window_reference_ = "nvml.h nvmlDeviceGetTotalEnergyConsumption: mJ since the driver was last reloaded; "
                          "the window is the interval between two moves of the counter";
      break;
    case NvmlMode::kUsage:
      // nvml.h (nvmlDeviceGetPowerUsage): "On Ampere (except GA100) or newer
      // GPUs, the API returns power averaged over 1 sec interval. On GA100 and
      // older architectures, instantaneous power is returned."
      if (dev_.architecture == NVML_DEVICE_ARCH_UNKNOWN || (dev_.architecture == NVML_DEVICE_ARCH_AMPERE &&
                                                            dev_.cc_major < 0)) {
        window_documented_ = false;  // cannot tell which rule applies
      } else if (ampere_or_newer && !ga100) {
        info_.window_ns = 1'000'000'000u;
        window_documented_ = true;
        window_reference_ = "nvml.h nvmlDeviceGetPowerUsage: a 1 s average on Ampere (except GA100) or newer";
      } else {
        window_documented_ = true;  // instantaneous
        window_reference_ = "nvml.h nvmlDeviceGetPowerUsage: instantaneous on GA100 and older architectures";
      }
      break;
  }
}

void NvmlPowerSource::choose_scope(NvmlScope asked) {
  const std::uint32_t bit = mode_bit(mode_);
  const bool gpu_ok = (dev_.gpu_scope_modes & bit) != 0;
  const bool module_ok = (dev_.module_scope_modes & bit) != 0;
  const std::string who = "NVML device " + std::to_string(index_) + " (" + dev_.name + ") mode '" +
                          nvml_mode_name(mode_) + "'";
  if (asked == NvmlScope::kModule) {
    if (!module_ok) {
      throw DeviceUnavailable(who + " cannot read scope 'module': " +
                              dev_.module_unsupported[static_cast<unsigned>(mode_)]);
    }
    scope_ = NvmlScope::kModule;
    scope_reference_ = "module (GPU, Grace CPU and memory), as asked";
  } else if (asked == NvmlScope::kGpu) {
    if (!gpu_ok) {
      throw DeviceUnavailable(who + " cannot read scope 'gpu': " + dev_.gpu_unsupported[static_cast<unsigned>(mode_)] +
                              (module_ok ? "; scope 'module' works" : ""));
    }
    scope_ = NvmlScope::kGpu;
    scope_reference_ = "GPU, as asked";
  } else if (dev_.c2c == 1 && module_ok) {
    // Zeus (ml-energy/zeus, zeus/device/gpu/nvidia.py) reads the power
    // fields at NVML_POWER_SCOPE_MODULE wherever C2C is enabled.
    scope_ = NvmlScope::kModule;
    scope_reference_ = "module (GPU, Grace CPU and memory): a Grace Hopper superchip (C2C enabled), as Zeus reads it; "
                       "scope='gpu' reads the GPU alone";
  } else {
    scope_ = NvmlScope::kGpu;
    scope_reference_ = dev_.c2c == 1 ? "GPU: C2C is enabled but the module's field fails (" +
                                           dev_.module_unsupported[static_cast<unsigned>(mode_)] + ")"
                                     : "GPU (not a Grace Hopper superchip)";
  }
}

PollResult NvmlPowerSource::fail(const char* fn, nvmlReturn_t r) {
  last_error_ = nvml_->error_text(fn, r);
  return {0, is_fatal(r) ? PollStatus::kFatalError : PollStatus::kTransientError};
}

PollResult NvmlPowerSource::poll(Reading* out, std::size_t max) {
  switch (mode_) {
    case NvmlMode::kSamples: return poll_samples(out, max);
    case NvmlMode::kInstant: return poll_field(out, max, NVML_FI_DEV_POWER_INSTANT);
    case NvmlMode::kAverage: return poll_field(out, max, NVML_FI_DEV_POWER_AVERAGE);
    case NvmlMode::kEnergy: return poll_energy(out, max);
    case NvmlMode::kUsage: return poll_usage(out, max);
  }
  return {0, PollStatus::kFatalError};
}

PollResult NvmlPowerSource::poll_samples(Reading* out, std::size_t max) {
  // Only fetch when everything fetched before has been handed out, so the
  // readings leave oldest first across polls.
  if (pending_head_ == pending_.size()) {
    pending_.clear();
    pending_head_ = 0;
    nvmlValueType_t vt = 0;
    unsigned int n = static_cast<unsigned int>(samples_.size());
    const nvmlReturn_t r =
        nvml_->nvmlDeviceGetSamples(handle_, NVML_TOTAL_POWER_SAMPLES, last_seen_us_, &vt, &n, samples_.data());
    if (r == NVML_ERROR_NOT_FOUND) return {0, PollStatus::kOk};  // no sample newer than last_seen_us_
    if (r != NVML_SUCCESS) return fail("nvmlDeviceGetSamples", r);
    n = std::min<unsigned int>(n, static_cast<unsigned int>(samples_.size()));
    // The order within the returned array is not documented: sort by time.
    std::sort(samples_.begin(), samples_.begin() + n,
              [](const nvmlSample_t& a, const nvmlSample_t& b) { return a.timeStamp < b.timeStamp; });
    // A batch that fills our whole buffer may have lost samples in between.
    const bool maybe_overrun = last_seen_us_ != 0 && n == samples_.size();
    if (maybe_overrun) ++possible_overruns_;
    for (unsigned int i = 0; i < n; ++i) {
      const nvmlSample_t& s = samples_[i];
      if (s.timeStamp <= last_seen_us_) continue;  // NVML promises "greater than"; be sure
      double mw = 0;
      if (!value_as_double(vt, s.sampleValue, &mw)) {
        last_error_ = "nvmlDeviceGetSamples returned value type " + std::to_string(vt) + ", which is not known";
        return {0, PollStatus::kFatalError};
      }
      // Power samples are milliwatts, as every NVML power query.
      pending_.push_back(total_reading(static_cast<std::int64_t>(s.timeStamp), mw / 1000.0, info_.window_ns,
                                       (maybe_overrun && pending_.empty()) ? kFlagSourceGap : 0u));
    }
    if (n > 0) last_seen_us_ = std::max(last_seen_us_, samples_[n - 1].timeStamp);
  }
  const std::size_t k = std::min(max, pending_.size() - pending_head_);
  std::copy_n(pending_.begin() + static_cast<std::ptrdiff_t>(pending_head_), k, out);
  pending_head_ += k;
  return {k, PollStatus::kOk};
}

PollResult NvmlPowerSource::keep_if_changed(Reading* out, std::int64_t ts_us, std::int64_t seen_us, double mw,
                                            double memory_mw) {
  if (!have_value_) {
    // The first value: how long ago it appeared is unknown, so it only sets
    // the baseline a change is detected against.
    have_value_ = true;
    last_mw_ = mw;
    last_memory_mw_ = memory_mw;
    last_value_us_ = ts_us;
    return {0, PollStatus::kOk};
  }
  if (mw == last_mw_ && same_memory(memory_mw, last_memory_mw_)) {
    // The cached value again (the driver refreshes every ~100 ms; a 1 s
    // average is the same number until then), whatever its timestamp says:
    // keeping it would make the poll period look like the logger period.
    ++unchanged_polls_;
    return {0, PollStatus::kOk};
  }
  if (ts_us <= last_value_us_) {
    // A new value under a stamp that did not advance: the sampler would drop
    // it as a duplicate. Stamp it when we first saw it (same clock).
    ++restamped_;
    ts_us = std::max<std::int64_t>(seen_us, last_value_us_ + 1);
  }
  last_mw_ = mw;
  last_memory_mw_ = memory_mw;
  last_value_us_ = ts_us;
  out[0] = total_reading(ts_us, mw / 1000.0, info_.window_ns, 0, memory_mw / 1000.0);
  return {1, PollStatus::kOk};
}

PollResult NvmlPowerSource::poll_field(Reading* out, std::size_t max, unsigned int field) {
  if (max == 0) return {0, PollStatus::kOk};
  // The total at its scope and, where the GPU has it, the memory scope: one call, so both are one poll's.
  nvmlFieldValue_t vs[2] = {};
  nvmlFieldValue_t& v = vs[0];
  v.fieldId = field;
  v.scopeId = scope_ == NvmlScope::kModule ? NVML_POWER_SCOPE_MODULE : NVML_POWER_SCOPE_GPU;
  vs[1].fieldId = field;
  vs[1].scopeId = NVML_POWER_SCOPE_MEMORY;
  const std::int64_t a = realtime_now_us();
  const nvmlReturn_t r = nvml_->nvmlDeviceGetFieldValues(handle_, memory_ ? 2 : 1, vs);
  const std::int64_t b = realtime_now_us();
  if (r != NVML_SUCCESS) return fail("nvmlDeviceGetFieldValues", r);
  if (v.nvmlReturn != NVML_SUCCESS) return fail("nvmlDeviceGetFieldValues (field value)", v.nvmlReturn);
  double mw = 0;
  if (!value_as_double(v.valueType, v.value, &mw)) {
    last_error_ = "field " + std::to_string(field) + " has value type " + std::to_string(v.valueType) +
                  ", which is not known";
    return {0, PollStatus::kFatalError};
  }
  // nvml.h documents nvmlFieldValue_t::timestamp as the "CPU Timestamp of
  // this value", not the time the sensor refreshed it: a driver that stamps
  // the query gives a new timestamp for the same cached value on every poll.
  // So a reading is kept when the value changes, not when the stamp does.
  double memory_mw = std::numeric_limits<double>::quiet_NaN();
  if (memory_) {
    // A memory value that fails or reads 0 this once leaves the channel NaN for this reading (never 0): the
    // total is still good.
    double m = 0;
    if (vs[1].nvmlReturn == NVML_SUCCESS && value_as_double(vs[1].valueType, vs[1].value, &m) && m > 0) {
      memory_mw = m;
    } else {
      ++memory_missing_;
    }
  }
  return keep_if_changed(out, v.timestamp, a + (b - a) / 2, mw, memory_mw);
}

PollResult NvmlPowerSource::poll_energy(Reading* out, std::size_t max) {
  if (max == 0) return {0, PollStatus::kOk};
  unsigned long long mj = 0;
  long long ts_us = 0;
  std::int64_t seen_us = 0;  // the middle of our call, CLOCK_REALTIME us
  if (dev_.energy_from_field) {
    nvmlFieldValue_t v{};
    v.fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
    const std::int64_t a = realtime_now_us();
    const nvmlReturn_t r = nvml_->nvmlDeviceGetFieldValues(handle_, 1, &v);
    seen_us = a + (realtime_now_us() - a) / 2;
    if (r != NVML_SUCCESS) return fail("nvmlDeviceGetFieldValues", r);
    if (v.nvmlReturn != NVML_SUCCESS) return fail("nvmlDeviceGetFieldValues (energy field)", v.nvmlReturn);
    if (!value_as_u64(v.valueType, v.value, &mj)) {
      last_error_ = "the energy field has value type " + std::to_string(v.valueType) + ", which is not known";
      return {0, PollStatus::kFatalError};
    }
    ts_us = v.timestamp;
  } else {
    // No timestamp from NVML: stamp the middle of the call on the same clock.
    const std::int64_t a = realtime_now_us();
    const nvmlReturn_t r = nvml_->nvmlDeviceGetTotalEnergyConsumption(handle_, &mj);
    const std::int64_t b = realtime_now_us();
    if (r != NVML_SUCCESS) return fail("nvmlDeviceGetTotalEnergyConsumption", r);
    ts_us = seen_us = a + (b - a) / 2;
  }
  if (!have_energy_ || mj < last_energy_mj_) {
    // nvml.h: the counter runs "since the driver was last reloaded", so going
    // back means a reload: a new, unanchored baseline.
    if (have_energy_) ++energy_resets_;
    have_energy_ = true;
    energy_anchored_ = false;
    last_energy_mj_ = mj;
    last_energy_us_ = ts_us;
    return {0, PollStatus::kOk};
  }
  if (mj == last_energy_mj_) {
    // The counter has not moved. The driver refreshes it every 10-100 ms (by
    // GPU) while we may poll every millisecond, and its stamp (ours, or a
    // field timestamp of the query) advances anyway: differencing now would
    // give 0 W, then a spike when it moves. Keep nothing until it moves.
    ++unchanged_polls_;
    return {0, PollStatus::kOk};
  }
  if (ts_us <= last_energy_us_) {
    // Moved under a stamp that did not advance: stamp it when we first saw
    // it (same clock), or the difference would have no interval.
    ++restamped_;
    ts_us = std::max<std::int64_t>(seen_us, last_energy_us_ + 1);
  }
  if (!energy_anchored_) {
    // The first move: the old baseline's value may have sat in the counter
    // long before we read it, so its stamp is not when it was reached. From
    // here on both ends of every difference are moves seen within one poll.
    energy_anchored_ = true;
    last_energy_mj_ = mj;
    last_energy_us_ = ts_us;
    return {0, PollStatus::kOk};
  }
  const long long dt_us = ts_us - last_energy_us_;
  const unsigned long long de_mj = mj - last_energy_mj_;
  // mJ / us = 1e3 W.
  const double watts = static_cast<double>(de_mj) * 1000.0 / static_cast<double>(dt_us);
  out[0] = total_reading(ts_us, watts, clamp_window(dt_us * 1000), kFlagDerived);
  last_energy_mj_ = mj;
  last_energy_us_ = ts_us;
  return {1, PollStatus::kOk};
}

PollResult NvmlPowerSource::poll_usage(Reading* out, std::size_t max) {
  if (max == 0) return {0, PollStatus::kOk};
  unsigned int mw = 0;
  const std::int64_t a = realtime_now_us();
  const nvmlReturn_t r = nvml_->nvmlDeviceGetPowerUsage(handle_, &mw);
  const std::int64_t b = realtime_now_us();
  if (r != NVML_SUCCESS) return fail("nvmlDeviceGetPowerUsage", r);
  // No timestamp from NVML: the middle of the call, and only for a changed
  // value (a 1 s average repeats over every poll until the driver refreshes).
  const std::int64_t mid = a + (b - a) / 2;
  return keep_if_changed(out, mid, mid, static_cast<double>(mw));
}

}  // namespace fingrav
