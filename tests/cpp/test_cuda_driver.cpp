// The CUDA driver loader, %globaltimer source and marker probe against the
// fake libcuda (fake_libcuda.cpp), under the sanitizers: the spin on mapped
// memory, the context push/pop discipline and the slot bookkeeping.
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "check.hpp"
#include "fingrav/clock_sync.hpp"
#include "fingrav/nvidia/cuda_driver.hpp"

using namespace fingrav;
using namespace fingrav::nvidia;

#ifndef FAKE_LIBCUDA_PATH
#error "FAKE_LIBCUDA_PATH must name the built fake libcuda"
#endif

int main() {
  setenv("FINGRAV_CUDA_LIBRARY", FAKE_LIBCUDA_PATH, 1);
  return fingrav_test::run_tests("cuda_driver", {
  {"the driver loads and describes its device", [] {
    auto drv = CudaDriver::get();
    CHECK(drv == CudaDriver::get());  // one per process
    CHECK_EQ(drv->driver_version(), 12040);
    const auto info = drv->device_info(0);
    CHECK_EQ(info.cc_major, 9);
    CHECK_EQ(info.pci_bus_id, std::string("0000:18:00.0"));
    CHECK_THROWS(drv->device_info(5), DeviceUnavailable, "device=5");
  }},
  {"globaltimer reads lie inside their brackets, from two sources on two threads", [] {
    GlobaltimerSource a(0), b(0);
    auto read = [](GlobaltimerSource& s) {
      Bracket br[256];
      measure_brackets(s, br, 256);
      for (const auto& x : br) {
        const auto t = x.device_ticks - 1'000'000'000'000LL;  // the fake clock's offset
        CHECK(x.host_before <= t);
        CHECK(t <= x.host_after);
      }
    };
    std::thread t([&] { read(a); });
    read(b);
    t.join();
    const auto steps = a.measure_steps(4);
    CHECK_EQ(steps.size(), std::size_t{4});
    CHECK_EQ(steps[0], std::uint64_t{32});
  }},
  {"marker probe slots: written, reset, bounds", [] {
    CudaMarkerProbe p(0, 4);
    CHECK_EQ(p.value(2), kUnwrittenSlot);
    p.stamp(0, 2);
    CHECK(p.value(2) != kUnwrittenSlot);
    p.reset();
    CHECK_EQ(p.value(2), kUnwrittenSlot);
    CHECK_THROWS(p.stamp(0, 4), std::out_of_range, "slot=4");
    CHECK_THROWS(CudaMarkerProbe(0, 0), std::invalid_argument, "slots=0");
  }},
  {"events time an interval", [] {
    CudaEventTimer ev(0, 2);
    ev.record(0, 0);
    ev.record(0, 1);
    ev.synchronize(1);
    CHECK(ev.elapsed_ms(0, 1) >= 0.0f);
    CHECK_THROWS(ev.record(0, 2), std::out_of_range, "index=2");
  }},
  });
}
