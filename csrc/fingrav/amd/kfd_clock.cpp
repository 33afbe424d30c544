#include "fingrav/amd/kfd_clock.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "fingrav/dynlib.hpp"

namespace fingrav::amd {
namespace {

// ioctl retried on EINTR/EAGAIN as libhsakmt does (kmtIoctl): KFD returns
// them when a signal or a GPU reset interrupts the call.
int kfd_ioctl(int fd, unsigned long request, void* arg) {
  int rc;
  do {
    rc = ::ioctl(fd, request, arg);
  } while (rc == -1 && (errno == EINTR || errno == EAGAIN));
  return rc;
}

std::string open_error(const std::string& path, int err) {
  std::string msg = "cannot open " + path + " (the AMD KFD compute device): " + std::strerror(err);
  if (err == ENOENT || err == ENODEV || err == ENXIO) {
    msg += ". The amdgpu kernel driver with KFD (HSA compute) support is not loaded, or there is no "
           "AMD GPU: load it (modprobe amdgpu; ROCm's amdgpu-dkms on older kernels) on a machine with "
           "an AMD GPU, and pass the device node into containers (--device=/dev/kfd --device=/dev/dri).";
  } else if (err == EACCES || err == EPERM) {
    msg += ". Your user may not open it: add it to the 'render' group (and 'video' on older "
           "distributions), e.g. sudo usermod -aG render,video $USER, then log in again.";
  }
  return msg;
}

}  // namespace

KfdClockSource::KfdClockSource(std::uint32_t gpu_id, std::string device_path, double nominal_tick_ns)
    : gpu_id_(gpu_id), path_(std::move(device_path)) {
  if (!(nominal_tick_ns > 0))
    throw std::invalid_argument("nominal_tick_ns=" + std::to_string(nominal_tick_ns) + ": must be > 0");
  if (path_.empty()) throw std::invalid_argument("device_path: must not be empty");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) throw DeviceUnavailable(open_error(path_, errno));

  kfd_abi::GetVersionArgs ver{};
  if (kfd_ioctl(fd_, kfd_abi::kGetVersion, &ver) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw DeviceUnavailable(path_ + " is not the AMD KFD device: AMDKFD_IOC_GET_VERSION failed (" +
                            std::strerror(err) + "); it is /dev/kfd when the amdgpu driver is loaded");
  }
  major_ = ver.major_version;
  minor_ = ver.minor_version;
  if (major_ != kfd_abi::kMajorVersion) {
    ::close(fd_);
    fd_ = -1;
    throw DeviceUnavailable(path_ + ": KFD ioctl interface " + std::to_string(major_) + "." +
                            std::to_string(minor_) + " is not the supported major version " +
                            std::to_string(kfd_abi::kMajorVersion));
  }

  // KFD answers 0 for a gpu_id this process has no device data for (an
  // unknown id, or a GPU hidden by the container's device cgroup) instead of
  // failing, so a zero counter is the only sign of a wrong id.
  KfdCounters c{};
  try {
    c = read_counters();
  } catch (const std::exception& e) {
    ::close(fd_);
    fd_ = -1;
    throw DeviceUnavailable(std::string(e.what()));
  }
  if (c.gpu == 0) {
    ::close(fd_);
    fd_ = -1;
    throw DeviceUnavailable("KFD returned no GPU clock counter for gpu_id " + std::to_string(gpu_id_) +
                            " on " + path_ + ": not a GPU this process can use; take gpu_id from "
                            "/sys/class/kfd/kfd/topology/nodes/<N>/gpu_id of a node with a GPU");
  }

  info_.name = "kfd-clock-counter gpu_id " + std::to_string(gpu_id_);
  info_.clock_domain = "amd-gpu-counter";
  info_.nominal_tick_ns = nominal_tick_ns;
}

KfdClockSource::~KfdClockSource() {
  if (fd_ >= 0) ::close(fd_);
}

KfdCounters KfdClockSource::read_counters() {
  kfd_abi::GetClockCountersArgs a{};
  a.gpu_id = gpu_id_;
  if (kfd_ioctl(fd_, kfd_abi::kGetClockCounters, &a) != 0)
    throw std::runtime_error(path_ + ": AMDKFD_IOC_GET_CLOCK_COUNTERS failed for gpu_id " +
                             std::to_string(gpu_id_) + ": " + std::strerror(errno));
  return KfdCounters{a.gpu_clock_counter, a.cpu_clock_counter, a.system_clock_counter, a.system_clock_freq};
}

std::int64_t KfdClockSource::read_device_ticks() {
  return static_cast<std::int64_t>(read_counters().gpu);
}

std::string gfx_arch_from_target_version(std::uint32_t version) {
  if (version == 0)
    throw std::invalid_argument("gfx_target_version=0: not a GPU (KFD reports 0 for CPU nodes)");
  const std::uint32_t major = version / 10000, minor = (version / 100) % 100, step = version % 100;
  if (major == 0 || minor >= 16 || step >= 16)
    throw std::invalid_argument("gfx_target_version=" + std::to_string(version) +
                                ": not major*10000 + minor*100 + stepping with minor and stepping < 16");
  static const char kHex[] = "0123456789abcdef";
  return "gfx" + std::to_string(major) + kHex[minor] + kHex[step];
}

}  // namespace fingrav::amd
