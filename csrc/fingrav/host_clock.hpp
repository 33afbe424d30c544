// Host time: CLOCK_MONOTONIC_RAW nanoseconds. Every result is placed on it.
//
// RAW rather than MONOTONIC because NTP slews MONOTONIC's rate; a clock map
// fitted against a slewed clock would absorb the slew as fake device skew.
#pragma once

#include <cstdint>
#include <ctime>

namespace fingrav {

inline std::int64_t host_now_ns() noexcept {
  timespec ts{};
  // Cannot fail for a valid clock id and a valid pointer; ignoring the result
  // keeps this callable from the sampler's hot loop without a branch.
  (void)::clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// What reading the host clock costs and how finely it resolves. Both bound how
// well any bracketed device read can be placed on host time.
struct HostClockInfo {
  double read_cost_ns = 0;          // mean cost of one host_now_ns() call
  std::int64_t min_read_cost_ns = 0;  // smallest difference between back-to-back reads
  std::int64_t resolution_ns = 0;   // clock_getres() for CLOCK_MONOTONIC_RAW
  std::int64_t observed_step_ns = 0;  // smallest non-zero step seen between reads
};

// Measures the host clock with `reads` back-to-back calls. Throws
// std::invalid_argument when reads < 2.
HostClockInfo measure_host_clock(std::int64_t reads = 200'000);

// Spin-wait hint for the sampler's sleep-then-spin phase.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace fingrav
