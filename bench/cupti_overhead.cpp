// CPU cost of the CUPTI consumer per kernel record, on the stand-in libcupti:
// the simulated application dispatches N kernels at R per millisecond through
// the stand-in, whose CUDA_INJECTION64_PATH tool is either the consumer
// (libfingrav_cupti_tool.so, writing the capture) or the discarding baseline
// (libfingrav_cupti_discard_tool.so). The process's CPU time (getrusage, all
// threads: the stand-in's delivery thread, the consumer, the capture's writer)
// is printed; the consumer's cost per record is the difference over N.
//
//   for tool in build/libfingrav_cupti_tool.so build/bench/libfingrav_cupti_discard_tool.so; do
//     FINGRAV_LAUNCH_DIR=$(mktemp -d) CUDA_INJECTION64_PATH=$tool
//     FINGRAV_CUPTI_LIBRARY=build/libfingrav_standin_cupti.so
//     build/bench/cupti_overhead build/libfingrav_standin_cupti.so 300000 100; done
// (the three variables and the command on one line; 300,000 kernels at 10^5 a second)
#include <dlfcn.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "fingrav/sim/standin_abi.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s STANDIN_LIBRARY N PER_MS\n", argv[0]);
    return 2;
  }
  void* s = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (s == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<decltype(&fingrav_standin_init)>(dlsym(s, "fingrav_standin_init"));
  auto dispatch = reinterpret_cast<decltype(&fingrav_standin_dispatch)>(dlsym(s, "fingrav_standin_dispatch"));
  auto fini = reinterpret_cast<decltype(&fingrav_standin_fini)>(dlsym(s, "fingrav_standin_fini"));
  const long n = std::atol(argv[2]);
  const long per_ms = std::atol(argv[3]);
  if (init() != 0) return 1;
  const char* names[] = {"gemm", "softmax", "reduce", "all_reduce"};
  const std::uint32_t grid[3] = {64, 1, 1}, block[3] = {256, 1, 1};
  const auto wall0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    if (per_ms > 0 && i % per_ms == 0) std::this_thread::sleep_until(wall0 + std::chrono::milliseconds(i / per_ms));
    dispatch(names[i & 3], 1000 * i, 1000 * i + 500, 0, 7, grid, block);
  }
  fini();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  std::printf("records %ld cpu_s %.4f cpu_ns_per_record %.1f\n", n, cpu, cpu * 1e9 / static_cast<double>(n));
  return 0;
}
