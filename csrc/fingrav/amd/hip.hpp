// The HIP runtime and hiprtc, loaded at run time, and what FinGraV builds on
// them: a probe kernel compiled at run time that writes the GPU's
// constant-rate wall clock into host-mapped memory (GPU-side execution
// markers, paper Section IV-B step 4), HIP events as a second marker source,
// and the probe as a TimestampSource where /dev/kfd cannot be used.
//
// No HIP header is used: the few prototypes are declared in hip.cpp from
// hip_runtime_api.h and hiprtc.h (ROCm 5.2 and 6.x, whose C ABI for these
// calls is the same), and the library is found by dynlib.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fingrav/dynlib.hpp"
#include "fingrav/timestamp_source.hpp"

namespace fingrav::amd {

// hipDeviceAttribute_t::hipDeviceAttributeWallClockRate ("constant frequency
// of wall clock in kilohertz"): hipDeviceAttributeAmdSpecificBegin (10000)
// + 17 in the ROCm 6.x hip_runtime_api.h, right after
// hipDeviceAttributeFineGrainSupport (10016). ROCm 5.2's header (Debian
// bookworm's libamdhip64-dev) ends at FineGrainSupport: older runtimes reject
// 10017 with hipErrorInvalidValue, and the rate is then measured by the fit.
constexpr int kHipDeviceAttributeWallClockRate = 10017;

// Where to find the libraries (see dynlib.hpp for the search order).
LibrarySpec hip_library_spec();
LibrarySpec hiprtc_library_spec();

struct HipApi;     // the HIP runtime's function table (hip.cpp)
struct HiprtcApi;  // hiprtc's

// Loads the HIP runtime (throws LibraryNotFound / SymbolNotFound). A fresh
// handle each call, so a changed FINGRAV_HIP_LIBRARY takes effect; the
// library itself stays mapped for the life of the process once loaded
// (it starts threads and registers exit handlers that must not outlive it).
std::shared_ptr<const HipApi> load_hip();
// libhiprtc (ROCm 6+), else the hiprtc symbols inside libamdhip64 (ROCm 5).
std::shared_ptr<const HiprtcApi> load_hiprtc();

// What the loaded HIP runtime says about this machine. Never throws for a
// missing device: init_error says why there is none.
struct HipDeviceInfo {
  int index = 0;
  std::string name;
  int wall_clock_rate_khz = 0;  // 0: the runtime does not report it
};
struct HipRuntimeInfo {
  std::string library_path;
  int runtime_version = 0;  // HIP_VERSION form: major * 10^7 + minor * 10^5 + patch
  int device_count = 0;
  std::string init_error;   // hipInit / hipGetDeviceCount failure, else empty
  std::vector<HipDeviceInfo> devices;
};
HipRuntimeInfo hip_runtime_info();

// The probe kernel's source and entry point. It needs no header: hiprtc
// provides the HIP device library (wall_clock64() is s_memrealtime on gfx9/
// MI-class GPUs and the equivalent message on gfx11+).
extern const char* const kProbeKernelName;
const std::string& probe_source();

// hiprtcCompileProgram of the probe for one gfx target ("gfx90a", "gfx942",
// optionally with ":sramecc+:xnack-"). Needs no GPU. Returns the code object
// (an AMDGPU ELF). Throws std::invalid_argument for a malformed arch and
// std::runtime_error with hiprtc's log when compilation fails.
std::vector<char> compile_probe(const std::string& arch);

// The loaded runtime, initialised, with `device` checked and made current.
// Throws DeviceUnavailable naming the device, the count and HIP's error.
std::shared_ptr<const HipApi> open_hip_device(int device);

// GPU-side execution markers: N host-mapped, GPU-coherent 64-bit slots and
// the compiled probe; stamp() enqueues the probe on a stream so that it
// writes the wall clock into a slot when the stream reaches it.
class HipMarkerProbe {
 public:
  // Throws std::invalid_argument (slots == 0, bad arch), the loaders'
  // errors, DeviceUnavailable, or std::runtime_error from HIP.
  HipMarkerProbe(int device, std::size_t slots, const std::string& arch);
  ~HipMarkerProbe();
  HipMarkerProbe(const HipMarkerProbe&) = delete;
  HipMarkerProbe& operator=(const HipMarkerProbe&) = delete;

  // Enqueues the probe on `stream` (a hipStream_t as an integer; 0 is the
  // null stream of this device). Throws std::out_of_range for a bad slot.
  void stamp(std::uintptr_t stream, std::size_t slot);
  // Slot values (0 = not written since reset()); valid to read once the
  // stream has passed the probe.
  const std::uint64_t* slots() const noexcept { return host_; }
  std::uint64_t slot(std::size_t i) const;  // an acquire load; throws out_of_range
  std::size_t size() const noexcept { return n_; }
  void reset() noexcept;
  int device() const noexcept { return device_; }
  const std::string& arch() const noexcept { return arch_; }
  // hipDeviceAttributeWallClockRate, or 0 where the runtime lacks it.
  int wall_clock_rate_khz() const noexcept { return rate_khz_; }
  const HipApi& api() const noexcept { return *api_; }

 private:
  std::shared_ptr<const HipApi> api_;
  int device_;
  std::string arch_;
  std::size_t n_;
  std::uint64_t* host_ = nullptr;
  void* device_ptr_ = nullptr;
  void* module_ = nullptr;
  void* function_ = nullptr;
  int rate_khz_ = 0;
};

// HIP events recorded on a stream around executions: the second marker
// source (its times are GPU-side too, but only as differences between events).
class HipEventTimer {
 public:
  HipEventTimer(int device, std::size_t events);
  ~HipEventTimer();
  HipEventTimer(const HipEventTimer&) = delete;
  HipEventTimer& operator=(const HipEventTimer&) = delete;

  void record(std::uintptr_t stream, std::size_t index);
  // Waits for event `index` to complete.
  void synchronize(std::size_t index);
  // Milliseconds from event `from` to event `to` (both recorded and complete).
  float elapsed_ms(std::size_t from, std::size_t to);
  std::size_t size() const noexcept { return events_.size(); }

 private:
  std::shared_ptr<const HipApi> api_;
  int device_;
  std::vector<void*> events_;
};

// The wall clock read through the probe on a private stream: the probe is
// enqueued and the host spins on its mapped slot. Wider brackets than the
// KFD ioctl (a kernel launch, ~5-20 us), but the same counter the markers
// use, and it needs no /dev/kfd access beyond what HIP itself has.
class HipTimestampSource final : public TimestampSource {
 public:
  HipTimestampSource(int device, const std::string& arch, std::int64_t timeout_ns = 1'000'000'000);
  ~HipTimestampSource() override;
  const TimestampInfo& timestamp_info() const noexcept override { return info_; }
  // Throws std::runtime_error if the probe does not land within timeout_ns.
  std::int64_t read_device_ticks() override;
  int wall_clock_rate_khz() const noexcept { return probe_.wall_clock_rate_khz(); }

 private:
  HipMarkerProbe probe_;
  void* stream_ = nullptr;
  std::int64_t timeout_ns_;
  TimestampInfo info_;
};

}  // namespace fingrav::amd
