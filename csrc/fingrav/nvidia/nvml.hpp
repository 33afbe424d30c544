// NVIDIA power through NVML (libnvidia-ml.so.1), loaded at run time.
//
// NVML gives a GPU's power in five ways, and which work depends on the GPU
// and driver; NvmlPowerSource reads any one of them (its "mode"):
//   samples  nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES): the driver's
//            buffer of recent power samples, each with its own timestamp, so
//            a slow poll loses nothing until the buffer wraps. nvml.h: "Set
//            lastSeenTimeStamp to 0 to fetch all the samples maintained by the
//            underlying buffer"; that history predates the source (it may be
//            busy), so the source starts from the newest sample it finds;
//   instant  field NVML_FI_DEV_POWER_INSTANT ("Current GPU power") with the
//            field's timestamp; on A100/H100 a 25 ms average refreshed every
//            100 ms (Yang, Adamek, Armour, SC'24), elsewhere no window known;
//   average  field NVML_FI_DEV_POWER_AVERAGE ("GPU power averaged over 1 sec
//            interval") with its timestamp;
//   energy   the total-energy counter (field NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
//            or nvmlDeviceGetTotalEnergyConsumption where the field fails; mJ
//            "since the driver was last reloaded"); power is the difference
//            between two moves of the counter (kFlagDerived, window = dt);
//   usage    nvmlDeviceGetPowerUsage, stamped by us (it has no timestamp); a
//            1 s average on Ampere and newer except GA100 (nvml.h).
//
// The field modes (instant, average) read one power scope (nvml.h, the
// nvmlFieldValue_t scopeId of the power fields): the GPU alone, or the whole
// module, GPU and NVIDIA CPU (Grace) and their memory. On a Grace Hopper
// superchip (C2C enabled, nvmlDeviceGetC2cModeInfoV) the default is the
// module, as Zeus reads it there; a GPU-only scope is chosen by asking for
// it. The other modes have no scope argument and read what NVML defines.
//
// Memory power: where the driver answers the same field at
// NVML_POWER_SCOPE_MEMORY ("Targets the GPU Memory", nvml.h; Hopper, e.g.
// H100 as Zeus reads it), a field-mode source reads it in the same
// nvmlDeviceGetFieldValues call as the total and reports it as the kMemory
// channel, so both values are one poll's. The probe takes NOT_SUPPORTED, an
// older driver's refusal of the scope, or a value of 0 (what Zeus sees on
// GPUs without the rail) as "no memory channel": the channel is then absent
// (NaN), never zero. nvmlDeviceGetPowerUsage documents the GPU's power as
// "this GPU ... and its associated circuitry (e.g. memory)", so memory is a
// part of the total and total minus memory is the rest of the board.
// Unverified on hardware: tested on the fake NVML only.
//
// Every mode but samples reads a value the driver caches and refreshes more
// slowly than we may poll (100 ms is typical), and a field's timestamp may be
// the time of the query rather than of the refresh: a new timestamp does not
// mean a new value. So those modes keep a reading only when the value (or the
// energy counter) changes, stamped when it was first seen, and the first
// value a source reads is only a baseline (when it appeared is unknown). The
// logger period is then the interval between changes, the sensor's refresh,
// not the poll period.
//
// Every timestamp is NVML's host "CPU timestamp" in microseconds: the header
// documents nvmlFieldValue_t::timestamp as "microseconds since 1970", i.e. the
// host's CLOCK_REALTIME (gettimeofday); nvmlSample_t::timeStamp is documented
// only as "CPU Timestamp in microseconds" and is taken as the same clock (both
// come from the driver's host-side sampling). Our own stamps (usage mode, the
// energy function fallback) use CLOCK_REALTIME too, so every mode shares the
// clock domain "nvml-host-us" with tick_ns = 1000. CLOCK_REALTIME can be
// stepped by NTP: the profile's one-sided logger-clock fit absorbs a constant
// offset, not a step inside a run.
//
// No NVML header is needed to build: the few types and prototypes we use are
// declared below from nvml.h (NVML API version 13, PyPI nvidia-nvml-dev
// 13.5.37; unchanged in nvidia-nvml-dev-cu12 12.9.79), and a test compiles
// them against the real header so they cannot drift.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fingrav/dynlib.hpp"
#include "fingrav/power_source.hpp"

namespace fingrav {

// ------------------------------------------------------------------ NVML ABI
// Names equal the header's so the prototype table below reads as C and the
// header check can compile it as is.
namespace nvml_abi {

using nvmlReturn_t = int;  // an enum in nvml.h: int-sized on every ABI NVML ships for
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
using nvmlSamplingType_t = int;   // enum nvmlSamplingType_enum
using nvmlValueType_t = int;      // enum nvmlValueType_enum
using nvmlDeviceArchitecture_t = unsigned int;

// nvmlReturn_t values we act on (nvml.h, enum nvmlReturn_enum).
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

inline constexpr nvmlSamplingType_t NVML_TOTAL_POWER_SAMPLES = 0;

inline constexpr nvmlValueType_t NVML_VALUE_TYPE_DOUBLE = 0;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_INT = 1;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_LONG = 2;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_SIGNED_INT = 5;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_SHORT = 6;

// Field ids (nvml.h NVML_FI_*). Units: mW for power, mJ for energy.
inline constexpr unsigned int NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION = 83;
inline constexpr unsigned int NVML_FI_DEV_POWER_AVERAGE = 185;
inline constexpr unsigned int NVML_FI_DEV_POWER_INSTANT = 186;

// nvmlPowerScopeType_t values (nvml.h NVML_POWER_SCOPE_*), for nvmlFieldValue_t::scopeId.
inline constexpr unsigned int NVML_POWER_SCOPE_GPU = 0;
inline constexpr unsigned int NVML_POWER_SCOPE_MODULE = 1;
// The field documentation's scope list (0 GPU, 1 module, 2 "GPU base") is older than the constants, which
// give 2 to memory and 3 to GPU base: the constant is what the driver reads.
inline constexpr unsigned int NVML_POWER_SCOPE_MEMORY = 2;

inline constexpr unsigned int NVML_DEVICE_ARCH_AMPERE = 7;
inline constexpr unsigned int NVML_DEVICE_ARCH_UNKNOWN = 0xffffffffu;

inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;

// union nvmlValue_st. `unsigned long` is 8 bytes on LP64 Linux, the only ABI
// this loader targets; the header test checks the size.
union nvmlValue_t {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
};

// struct nvmlSample_st
struct nvmlSample_t {
  unsigned long long timeStamp;  // host CPU timestamp, us
  nvmlValue_t sampleValue;
};

// struct nvmlFieldValue_st. The second word was "unused" before NVML R418-era
// headers and "scopeId" since; the layout never changed (40 bytes).
struct nvmlFieldValue_t {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;    // host CPU timestamp, us since 1970
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};

// struct nvmlPciInfo_st, as nvmlDeviceGetPciInfo_v3 fills it.
struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

// nvmlC2cModeInfo_v1_t: whether the GPU's chip-to-chip link to an NVIDIA CPU is on (Grace Hopper).
struct nvmlC2cModeInfo_v1_t {
  unsigned int isC2cEnabled;
};

static_assert(sizeof(nvmlValue_t) == 8);
static_assert(sizeof(nvmlSample_t) == 16);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(offsetof(nvmlFieldValue_t, timestamp) == 8);
static_assert(offsetof(nvmlFieldValue_t, valueType) == 24);
static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28);
static_assert(offsetof(nvmlFieldValue_t, value) == 32);
static_assert(sizeof(nvmlPciInfo_t) == 68);

// Every function we resolve: X(name, return type, (parameters), required).
// Optional ones (false) only refine what we report; their absence is not an
// error. The symbol names are the versioned ones nvml.h maps the plain names
// to (nvmlInit -> nvmlInit_v2, ...): the unversioned old symbols have other
// semantics or struct sizes, so there is deliberately no fallback to them.
#define FINGRAV_NVML_FUNCTIONS(X)                                                                     \
  X(nvmlInit_v2, nvmlReturn_t, (void), true)                                                          \
  X(nvmlShutdown, nvmlReturn_t, (void), true)                                                         \
  X(nvmlErrorString, const char*, (nvmlReturn_t result), true)                                        \
  X(nvmlSystemGetDriverVersion, nvmlReturn_t, (char* version, unsigned int length), false)            \
  X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int* deviceCount), true)                           \
  X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int index, nvmlDevice_t* device), true)    \
  X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t device, char* name, unsigned int length), true)    \
  X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t device, char* uuid, unsigned int length), true)    \
  X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t device, nvmlPciInfo_t* pci), false)          \
  X(nvmlDeviceGetEnforcedPowerLimit, nvmlReturn_t, (nvmlDevice_t device, unsigned int* limit), false) \
  X(nvmlDeviceGetArchitecture, nvmlReturn_t, (nvmlDevice_t device, nvmlDeviceArchitecture_t* arch),   \
    false)                                                                                            \
  X(nvmlDeviceGetCudaComputeCapability, nvmlReturn_t, (nvmlDevice_t device, int* major, int* minor),  \
    false)                                                                                            \
  X(nvmlDeviceGetSamples, nvmlReturn_t,                                                               \
    (nvmlDevice_t device, nvmlSamplingType_t type, unsigned long long lastSeenTimeStamp,              \
     nvmlValueType_t* sampleValType, unsigned int* sampleCount, nvmlSample_t* samples),               \
    false)                                                                                            \
  X(nvmlDeviceGetFieldValues, nvmlReturn_t, (nvmlDevice_t device, int valuesCount,                    \
                                             nvmlFieldValue_t* values),                               \
    false)                                                                                            \
  X(nvmlDeviceGetTotalEnergyConsumption, nvmlReturn_t,                                                \
    (nvmlDevice_t device, unsigned long long* energy), false)                                         \
  X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t device, unsigned int* power), false)           \
  X(nvmlDeviceGetC2cModeInfoV, nvmlReturn_t, (nvmlDevice_t device, nvmlC2cModeInfo_v1_t* c2cModeInfo),  \
    false)

#define FINGRAV_NVML_FN_TYPE(name, ret, params, required) using name##_fn = ret(*) params;
FINGRAV_NVML_FUNCTIONS(FINGRAV_NVML_FN_TYPE)
#undef FINGRAV_NVML_FN_TYPE

struct Prototype {
  const char* name;
  const char* return_type;
  const char* parameters;  // as declared above, with the parentheses
  bool required;
};
// The table above as text, for the test that compiles it against nvml.h.
const std::vector<Prototype>& prototypes();

// A named constant and a (type, member) offset, for the same test.
struct Constant {
  const char* name;
  long long value;
};
const std::vector<Constant>& constants();
struct Layout {
  const char* type;
  const char* member;  // empty: the row gives sizeof(type)
  std::size_t value;
};
const std::vector<Layout>& layouts();

}  // namespace nvml_abi

// ------------------------------------------------------------------ library
enum class NvmlMode : std::uint8_t { kSamples = 0, kInstant = 1, kAverage = 2, kEnergy = 3, kUsage = 4 };
inline constexpr int kNvmlModeCount = 5;
const char* nvml_mode_name(NvmlMode m) noexcept;
// Parses "samples", "instant", ...; throws std::invalid_argument naming `mode`.
NvmlMode parse_nvml_mode(const std::string& mode);

// Which power a field mode reads: kAuto is the module on a Grace Hopper
// superchip (C2C enabled) where the module's field works, else the GPU.
enum class NvmlScope : std::uint8_t { kAuto = 0, kGpu = 1, kModule = 2 };
const char* nvml_scope_name(NvmlScope s) noexcept;
// Parses "auto", "gpu", "module"; throws std::invalid_argument naming `scope`.
NvmlScope parse_nvml_scope(const std::string& scope);

// What one GPU is and which power paths work on it (each one probed).
struct NvmlDeviceInfo {
  unsigned int index = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;       // empty if nvmlDeviceGetPciInfo_v3 failed
  double power_limit_w = -1.0;  // enforced limit; < 0: unknown
  unsigned int architecture = nvml_abi::NVML_DEVICE_ARCH_UNKNOWN;
  int cc_major = -1, cc_minor = -1;  // CUDA compute capability; -1: unknown
  std::uint32_t modes = 0;           // bit (1 << NvmlMode) set: that mode works
  // Why each mode does not work ("" where it does), the NVML error text.
  std::string unsupported[kNvmlModeCount];
  // The energy mode reads the field (with NVML's timestamp) if that works,
  // else the function (stamped by us).
  bool energy_from_field = false;
  std::uint32_t sample_buffer = 0;  // samples the driver reported for GetSamples sizing; 0: unknown
  // nvmlDeviceGetC2cModeInfoV: 1 enabled (a Grace Hopper superchip), 0 not,
  // -1 unknown (not supported or not exported; c2c_why says which).
  int c2c = -1;
  std::string c2c_why;
  // The field modes (bit 1 << NvmlMode) that work at each power scope.
  std::uint32_t gpu_scope_modes = 0;
  std::uint32_t module_scope_modes = 0;
  // Why a field mode fails at each scope ("" where it works or is not a field mode).
  std::string gpu_unsupported[kNvmlModeCount];
  std::string module_unsupported[kNvmlModeCount];
  // The field modes whose field answers at NVML_POWER_SCOPE_MEMORY with a power above 0, and why
  // the others do not (NVML's error, or the 0 a GPU without the memory rail returns).
  std::uint32_t memory_scope_modes = 0;
  std::string memory_unsupported[kNvmlModeCount];
};

// The NVML library, opened and initialised once per process while anyone uses
// it: acquire() hands out a shared reference, and the last one released calls
// nvmlShutdown and closes the library, so a later acquire() (e.g. with
// FINGRAV_NVML_LIBRARY pointing elsewhere) loads afresh.
class Nvml {
 public:
  // Opens and initialises NVML. LibraryNotFound if the library is absent,
  // SymbolNotFound if too old, DeviceUnavailable if nvmlInit_v2 fails (driver
  // not loaded, no permission).
  static std::shared_ptr<Nvml> acquire();
  // Where the library is, without initialising it (LibraryNotFound if absent).
  static std::string locate();
  static LibrarySpec spec();

  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  const std::string& path() const noexcept { return lib_.path(); }
  std::string driver_version() const;
  unsigned int device_count() const;
  // DeviceUnavailable if there is no device `index` (naming how many there are).
  nvml_abi::nvmlDevice_t device(unsigned int index) const;
  NvmlDeviceInfo describe(unsigned int index) const;
  std::vector<NvmlDeviceInfo> devices() const;

  // "nvmlDeviceGetSamples: Not Supported (NVML error 3)".
  std::string error_text(const char* fn, nvml_abi::nvmlReturn_t r) const;

#define FINGRAV_NVML_MEMBER(name, ret, params, required) nvml_abi::name##_fn name = nullptr;
  FINGRAV_NVML_FUNCTIONS(FINGRAV_NVML_MEMBER)
#undef FINGRAV_NVML_MEMBER

 private:
  explicit Nvml(DynamicLibrary lib);
  DynamicLibrary lib_;
};

// ------------------------------------------------------------------ source
class NvmlPowerSource final : public PowerSource {
 public:
  // Throws DeviceUnavailable if the device is absent or does not support the
  // mode (naming the modes it does support), std::invalid_argument for a bad
  // index or mode.
  // `scope` applies to the field modes (instant, average); kModule with any
  // other mode, or where the module's field does not work, throws (naming why).
  NvmlPowerSource(unsigned int device, NvmlMode mode, NvmlScope scope = NvmlScope::kAuto);
  NvmlPowerSource(unsigned int device, NvmlMode mode, std::shared_ptr<Nvml> nvml,
                  NvmlScope scope = NvmlScope::kAuto);

  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t max) override;
  std::string last_error() const override { return last_error_; }

  NvmlMode mode() const noexcept { return mode_; }
  // The scope the readings are of: kGpu or kModule (never kAuto).
  NvmlScope scope() const noexcept { return scope_; }
  // Why that scope, in words.
  const std::string& scope_reference() const noexcept { return scope_reference_; }
  unsigned int device_index() const noexcept { return index_; }
  const NvmlDeviceInfo& device_info() const noexcept { return dev_; }
  const std::string& library_path() const noexcept { return nvml_->path(); }
  const Nvml& nvml() const noexcept { return *nvml_; }
  // Whether the averaging window we declare in info().window_ns is published
  // (nvml.h, or for the instant field on A100/H100 Yang et al., SC'24); false:
  // we declare 0 because nothing is published for this GPU and mode.
  bool window_documented() const noexcept { return window_documented_; }
  // Where the declared window comes from, in words (empty: nowhere).
  const std::string& window_reference() const noexcept { return window_reference_; }
  // Value modes (instant, average, usage) and energy: polls that saw the value
  // (counter) the previous poll saw, so kept nothing.
  std::uint64_t unchanged_polls() const noexcept { return unchanged_polls_; }
  // Readings whose NVML timestamp did not advance although the value changed:
  // stamped with the host's CLOCK_REALTIME when the change was first seen.
  std::uint64_t restamped() const noexcept { return restamped_; }
  // Samples mode: the sample buffer our fetches use, and how many fetches came
  // back completely full of new samples, i.e. the driver may have overwritten
  // samples nobody saw (the first reading of such a batch carries
  // kFlagSourceGap). Polled from the sampler thread; read after it stops.
  std::size_t sample_capacity() const noexcept { return samples_.size(); }
  std::uint64_t possible_overruns() const noexcept { return possible_overruns_; }
  // Energy mode: times the counter went backwards (driver reload) and the
  // baseline was taken afresh.
  std::uint64_t energy_resets() const noexcept { return energy_resets_; }
  // Whether the readings carry GPU memory power in the kMemory channel
  // (field modes where NVML_POWER_SCOPE_MEMORY answers), and why or why not.
  bool memory_channel() const noexcept { return memory_; }
  const std::string& memory_reference() const noexcept { return memory_reference_; }
  // Polls whose memory value failed or read 0 while the total was read: that
  // reading's memory is NaN (read after the sampler stops).
  std::uint64_t memory_missing() const noexcept { return memory_missing_; }

 private:
  PollResult fail(const char* fn, nvml_abi::nvmlReturn_t r);
  PollResult poll_samples(Reading* out, std::size_t max);
  PollResult poll_field(Reading* out, std::size_t max, unsigned int field);
  // Sets scope_ from what was asked and what the device supports (throws when it cannot).
  void choose_scope(NvmlScope asked);
  PollResult poll_energy(Reading* out, std::size_t max);
  PollResult poll_usage(Reading* out, std::size_t max);
  // Keeps a value reading only when it (or its memory value, NaN for none) differs from the last seen.
  PollResult keep_if_changed(Reading* out, std::int64_t ts_us, std::int64_t seen_us, double mw,
                             double memory_mw = std::numeric_limits<double>::quiet_NaN());

  std::shared_ptr<Nvml> nvml_;
  unsigned int index_;
  NvmlMode mode_;
  NvmlScope scope_ = NvmlScope::kGpu;
  std::string scope_reference_;
  nvml_abi::nvmlDevice_t handle_ = nullptr;
  NvmlDeviceInfo dev_;
  SourceInfo info_;
  bool window_documented_ = false;
  std::string window_reference_;
  std::string last_error_;
  std::uint64_t unchanged_polls_ = 0;
  std::uint64_t restamped_ = 0;

  // memory scope (field modes)
  bool memory_ = false;
  std::string memory_reference_;
  std::uint64_t memory_missing_ = 0;

  // value modes: the last value seen and the stamp it was kept with
  bool have_value_ = false;
  double last_mw_ = 0;
  double last_memory_mw_ = std::numeric_limits<double>::quiet_NaN();
  std::int64_t last_value_us_ = 0;

  // samples mode
  std::vector<nvml_abi::nvmlSample_t> samples_;  // fetch buffer
  std::vector<Reading> pending_;                 // fetched, not yet returned (oldest first)
  std::size_t pending_head_ = 0;
  unsigned long long last_seen_us_ = 0;
  std::uint64_t possible_overruns_ = 0;
  // energy mode
  bool have_energy_ = false;
  // Whether the baseline's stamp is when the counter was seen to move to it
  // (false for the first read after start or a reset: that value may be old).
  bool energy_anchored_ = false;
  unsigned long long last_energy_mj_ = 0;
  long long last_energy_us_ = 0;
  std::uint64_t energy_resets_ = 0;
};

// Host CLOCK_REALTIME in microseconds: the clock NVML stamps with.
std::int64_t realtime_now_us() noexcept;

}  // namespace fingrav
