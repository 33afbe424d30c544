// The launch capture's fixed cost: the CPU its writer thread (and its close)
// spends per second of an idle capture, no record pushed, at the default
// options (a 100 ms flush period, 8 brackets a burst). Built without CMake:
//
//   g++ -O2 -std=c++17 -Icsrc -pthread -o /tmp/launch_idle_cost bench/launch_idle_cost.cpp
//       csrc/fingrav/launch/launch_capture.cpp csrc/fingrav/launch/crc32.cpp csrc/fingrav/host_clock.cpp
//   (one command line)
//   /tmp/launch_idle_cost DIR [SECONDS (default 4)] [FLUSH_PERIOD_NS]
//
// Prints the writer's CPU per second: the process's CPU less the main
// thread's (which only sleeps), so the writer's wake-ups, drains, writes and
// fsyncs, and the final drain at close.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "fingrav/launch/launch_capture.hpp"

namespace {
double cpu_s(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [SECONDS] [FLUSH_PERIOD_NS]\n", argv[0]);
    return 2;
  }
  const double seconds = argc > 2 ? std::atof(argv[2]) : 4.0;
  fingrav::launch::CaptureOptions o;
  o.path = std::string(argv[1]) + "/idle." + std::to_string(::time(nullptr)) + ".journal";
  o.vendor = "rocm";
  o.tool = "launch_idle_cost";
  if (argc > 3) o.flush_period_ns = std::atoll(argv[3]);
  auto capture = fingrav::launch::LaunchCapture::open(o);
  const double p0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), m0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  capture->close();
  const double writer = (cpu_s(CLOCK_PROCESS_CPUTIME_ID) - p0) - (cpu_s(CLOCK_THREAD_CPUTIME_ID) - m0);
  std::printf("{\"seconds\": %.1f, \"flush_period_ns\": %lld, \"writer_cpu_ms_per_s\": %.3f}\n", seconds,
              static_cast<long long>(o.flush_period_ns), writer * 1e3 / seconds);
  std::remove(o.path.c_str());
  return 0;
}
