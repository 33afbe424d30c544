// AMD runtime pieces that need no GPU: the KFD ioctl ABI re-derived by hand,
// KfdClockSource's errors on paths that are not /dev/kfd, the gfx name of a
// KFD gfx_target_version, and the HIP/hiprtc loaders' errors when told to
// load a library that does not exist.
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "check.hpp"
#include "fingrav/amd/hip.hpp"
#include "fingrav/amd/kfd_clock.hpp"
#include "fingrav/dynlib.hpp"

using namespace fingrav;
using namespace fingrav::amd;

int main() {
  return fingrav_test::run_tests("amd_runtime", {
  {"KFD ioctl request numbers match the hand-computed _IOR/_IOWR values", [] {
    // _IOR('K', 1, 8 bytes):   dir 2 << 30 | 8 << 16 | 0x4b << 8 | 1
    CHECK_EQ(kfd_abi::kGetVersion, 0x80084B01UL);
    // _IOWR('K', 5, 40 bytes): dir 3 << 30 | 0x28 << 16 | 0x4b << 8 | 5
    CHECK_EQ(kfd_abi::kGetClockCounters, 0xC0284B05UL);
    CHECK_EQ(sizeof(kfd_abi::GetClockCountersArgs), 40u);
    CHECK_EQ(offsetof(kfd_abi::GetClockCountersArgs, gpu_id), 32u);
    CHECK_EQ(offsetof(kfd_abi::GetClockCountersArgs, cpu_clock_counter), 8u);
  }},

  {"a missing device path names the path and the amdgpu driver", [] {
    CHECK_THROWS(KfdClockSource(1, "/nonexistent/kfd"), DeviceUnavailable, "/nonexistent/kfd");
    CHECK_THROWS(KfdClockSource(1, "/nonexistent/kfd"), DeviceUnavailable, "amdgpu");
  }},

  {"a device that is not KFD fails the version ioctl", [] {
    CHECK_THROWS(KfdClockSource(1, "/dev/null"), DeviceUnavailable, "AMDKFD_IOC_GET_VERSION");
  }},

  {"bad arguments are invalid_argument", [] {
    CHECK_THROWS(KfdClockSource(1, "/dev/null", 0.0), std::invalid_argument, "nominal_tick_ns");
    CHECK_THROWS(KfdClockSource(1, ""), std::invalid_argument, "device_path");
  }},

  {"gfx names from gfx_target_version", [] {
    CHECK_EQ(gfx_arch_from_target_version(90402), std::string("gfx942"));
    CHECK_EQ(gfx_arch_from_target_version(90010), std::string("gfx90a"));
    CHECK_EQ(gfx_arch_from_target_version(90008), std::string("gfx908"));
    CHECK_EQ(gfx_arch_from_target_version(110000), std::string("gfx1100"));
    CHECK_EQ(gfx_arch_from_target_version(100302), std::string("gfx1032"));
    CHECK_EQ(gfx_arch_from_target_version(120001), std::string("gfx1201"));
    CHECK_THROWS(gfx_arch_from_target_version(0), std::invalid_argument, "CPU");
    CHECK_THROWS(gfx_arch_from_target_version(91600), std::invalid_argument, "91600");
    CHECK_THROWS(gfx_arch_from_target_version(90016), std::invalid_argument, "90016");
  }},

  {"the HIP loader names the forced path and what to install", [] {
    setenv("FINGRAV_HIP_LIBRARY", "/nonexistent/libamdhip64.so", 1);
    CHECK_THROWS(load_hip(), LibraryNotFound, "/nonexistent/libamdhip64.so");
    CHECK_THROWS(load_hip(), LibraryNotFound, "libamdhip64-5");
    CHECK_THROWS(open_hip_device(0), LibraryNotFound, "FINGRAV_HIP_LIBRARY");
    CHECK_THROWS(open_hip_device(-1), std::invalid_argument, "device=-1");
    unsetenv("FINGRAV_HIP_LIBRARY");
  }},

  {"the hiprtc loader names its forced path; arch is checked before loading", [] {
    setenv("FINGRAV_HIPRTC_LIBRARY", "/nonexistent/libhiprtc.so", 1);
    CHECK_THROWS(load_hiprtc(), LibraryNotFound, "/nonexistent/libhiprtc.so");
    CHECK_THROWS(compile_probe("gfx90a"), LibraryNotFound, "hiprtc");
    CHECK_THROWS(compile_probe("sm_90"), std::invalid_argument, "arch='sm_90'");
    CHECK_THROWS(compile_probe("gfx90a:xnack"), std::invalid_argument, "gfx90a:xnack");
    CHECK_THROWS(compile_probe("gfx"), std::invalid_argument, "arch");
    unsetenv("FINGRAV_HIPRTC_LIBRARY");
  }},

  {"without hiprtc either way, both searches are listed", [] {
    setenv("FINGRAV_HIP_LIBRARY", "/nonexistent/libamdhip64.so", 1);
    setenv("ROCM_PATH", "/nonexistent-rocm", 1);
    // libhiprtc may exist on this machine; only when it does not is the
    // fallback reached, and then its error lists the HIP attempt too.
    try {
      (void)load_hiprtc();
    } catch (const LibraryNotFound& e) {
      CHECK(std::string(e.what()).find("/nonexistent/libamdhip64.so") != std::string::npos);
      CHECK(std::string(e.what()).find("/nonexistent-rocm/lib/libhiprtc.so") != std::string::npos);
    }
    unsetenv("FINGRAV_HIP_LIBRARY");
    unsetenv("ROCM_PATH");
  }},

  {"the probe source calls the wall clock and names the kernel", [] {
    CHECK(probe_source().find("wall_clock64()") != std::string::npos);
    CHECK(probe_source().find(kProbeKernelName) != std::string::npos);
    CHECK_EQ(kHipDeviceAttributeWallClockRate, 10017);
  }},
  });
}
