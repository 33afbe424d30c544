// The AMD GPU's clock counter read from the host through the KFD
// (amdkfd, /dev/kfd) clock-counter ioctl. One ioctl returns the GPU counter
// and, right after it in the same kernel call, CLOCK_MONOTONIC_RAW; a
// bracketed read (clock_sync.hpp) puts host reads on either side of it.
// No ROCm library is needed: only the kernel's stable ioctl ABI.
#pragma once

#include <cstdint>
#include <string>

#include "fingrav/timestamp_source.hpp"

namespace fingrav::amd {

// The two ioctls used, declared here from the kernel's UAPI header
// include/uapi/linux/kfd_ioctl.h (stable ABI since Linux 3.19; checked against
// the header of Linux 6.x and KFD_IOCTL_MAJOR_VERSION 1). Struct layouts and
// request numbers are ABI facts; test_kfd_clock.cpp re-derives them by hand.
namespace kfd_abi {

struct GetVersionArgs {     // struct kfd_ioctl_get_version_args
  std::uint32_t major_version;  // from KFD
  std::uint32_t minor_version;  // from KFD
};
static_assert(sizeof(GetVersionArgs) == 8);

struct GetClockCountersArgs {  // struct kfd_ioctl_get_clock_counters_args
  std::uint64_t gpu_clock_counter;     // from KFD
  std::uint64_t cpu_clock_counter;     // from KFD
  std::uint64_t system_clock_counter;  // from KFD
  std::uint64_t system_clock_freq;     // from KFD
  std::uint32_t gpu_id;                // to KFD
  std::uint32_t pad;
};
static_assert(sizeof(GetClockCountersArgs) == 40);

// Linux _IOC encoding (asm-generic/ioctl.h): dir << 30 | size << 16 | type << 8 | nr,
// with _IOC_READ = 2, _IOC_WRITE = 1; AMDKFD_IOCTL_BASE is 'K'.
constexpr unsigned long ioc(unsigned dir, unsigned nr, unsigned size) {
  return (static_cast<unsigned long>(dir) << 30) | (static_cast<unsigned long>(size) << 16) |
         (static_cast<unsigned long>('K') << 8) | nr;
}
// AMDKFD_IOR(0x01, struct kfd_ioctl_get_version_args)
constexpr unsigned long kGetVersion = ioc(2, 0x01, sizeof(GetVersionArgs));
// AMDKFD_IOWR(0x05, struct kfd_ioctl_get_clock_counters_args)
constexpr unsigned long kGetClockCounters = ioc(3, 0x05, sizeof(GetClockCountersArgs));
constexpr std::uint32_t kMajorVersion = 1;  // KFD_IOCTL_MAJOR_VERSION

}  // namespace kfd_abi

// One AMDKFD_IOC_GET_CLOCK_COUNTERS result. What the kernel fills in
// (drivers/gpu/drm/amd/amdkfd/kfd_chardev.c, kfd_ioctl_get_clock_counters):
//   gpu        amdgpu_amdkfd_get_gpu_clock_counter(): the GFX block's 64-bit
//              GPU clock counter, read first;
//   cpu_ns     ktime_get_raw_ns(), i.e. CLOCK_MONOTONIC_RAW (the project's host
//              clock), read immediately after the GPU counter;
//   boot_ns    ktime_get_boottime_ns(), CLOCK_BOOTTIME;
//   system_freq  always 1e9 (the two host values are nanoseconds).
// The pairing (gpu, cpu_ns) is the kernel's own near-zero-width bracket, with
// the caveat that cpu_ns is taken after the GPU read, so it sits late by the
// register read's latency (a PCIe round trip, ~1 us).
struct KfdCounters {
  std::uint64_t gpu;
  std::uint64_t cpu_ns;
  std::uint64_t boot_ns;
  std::uint64_t system_freq;
};

// The GPU counter of one KFD GPU (its gpu_id, from
// /sys/class/kfd/kfd/topology/nodes/N/gpu_id) as a TimestampSource.
//
// The counter's rate is not in the ioctl. ROCr takes it from libdrm's
// amdgpu_query_gpu_info().gpu_counter_freq (the DRM AMDGPU_INFO_DEV_INFO
// query, kHz), which HIP exposes as hipDeviceAttributeWallClockRate; it is
// 100 MHz on gfx9 data-centre parts (MI100/MI200/MI300) but not guaranteed
// elsewhere, so nominal_tick_ns is a constructor argument and the clock fit
// measures the real rate (clocksync fits offset and skew).
class KfdClockSource final : public TimestampSource {
 public:
  // Opens device_path (normally /dev/kfd), checks the KFD ioctl version, and
  // reads the counter once to check gpu_id. Throws DeviceUnavailable naming
  // the path and what to do (load amdgpu; join the render group; a gpu_id
  // from the KFD topology). nominal_tick_ns must be > 0 (invalid_argument).
  explicit KfdClockSource(std::uint32_t gpu_id, std::string device_path = "/dev/kfd",
                          double nominal_tick_ns = 10.0);
  ~KfdClockSource() override;
  KfdClockSource(const KfdClockSource&) = delete;
  KfdClockSource& operator=(const KfdClockSource&) = delete;

  const TimestampInfo& timestamp_info() const noexcept override { return info_; }
  // The GPU counter (gpu_clock_counter). Throws std::runtime_error if the ioctl fails.
  std::int64_t read_device_ticks() override;
  // All four values of one ioctl.
  KfdCounters read_counters();

  std::uint32_t gpu_id() const noexcept { return gpu_id_; }
  const std::string& device_path() const noexcept { return path_; }
  std::uint32_t kfd_major() const noexcept { return major_; }
  std::uint32_t kfd_minor() const noexcept { return minor_; }

 private:
  int fd_ = -1;
  std::uint32_t gpu_id_;
  std::string path_;
  std::uint32_t major_ = 0, minor_ = 0;
  TimestampInfo info_;
};

// "gfx" name of a KFD topology gfx_target_version (major * 10000 + minor * 100
// + stepping, e.g. 90402 -> gfx942, 90010 -> gfx90a, 110000 -> gfx1100): the
// major in decimal, minor and stepping one hex digit each, as ROCr names ISAs.
// Throws std::invalid_argument for 0 (a CPU node) or a minor/stepping >= 16.
std::string gfx_arch_from_target_version(std::uint32_t version);

}  // namespace fingrav::amd
