// Host time: CLOCK_MONOTONIC_RAW nanoseconds. Every result is placed on it.
//
// RAW rather than MONOTONIC because NTP slews MONOTONIC's rate; a clock map
// fitted against a slewed clock would absorb the slew as fake device skew.
#pragma once

#include <cstddef>
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

// Unix-epoch time now: CLOCK_REALTIME in nanoseconds. Never a timeline for
// results (NTP steps and slews it); only the far side of the epoch brackets
// below, because application tracers (torch.profiler's Kineto) stamp their
// events with it.
inline std::int64_t realtime_now_ns() noexcept {
  timespec ts{};
  (void)::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// One CLOCK_REALTIME read between two host clock (CLOCK_MONOTONIC_RAW) reads:
// the realtime value was taken somewhere in [mono_before, mono_after]. The
// layout is that of a device-clock Bracket (timestamp_source.hpp), realtime in
// the device's place, so the same fitting code maps one clock onto the other.
struct EpochBracket {
  std::int64_t mono_before;
  std::int64_t realtime_ns;
  std::int64_t mono_after;
};
static_assert(sizeof(EpochBracket) == 3 * sizeof(std::int64_t), "EpochBracket must be three packed int64");

// n epoch brackets back to back into out. No allocation, no branch and no
// call but clock_gettime between the three reads of a bracket, so its width
// is the cost of the reads themselves (vDSO: tens of ns) unless the thread is
// preempted, which the fit sees as a wide bracket and down-weights. n == 0
// writes nothing.
void read_epoch_brackets(EpochBracket* out, std::size_t n) noexcept;

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

// Waits until host time reaches target_ns and returns the host time at
// wake-up (>= target_ns). Phase-steered launches (equivalent-time sampling)
// aim a launch at a predicted sensor instant, so the wait must end within a
// few microseconds of the target: it sleeps (nanosleep, relative: CLOCK_
// MONOTONIC_RAW has no absolute sleep) until spin_ns before the target, where
// the scheduler's wake-up latency (tens of microseconds) no longer matters,
// then spins on the clock. A target already past returns at once. Throws
// std::invalid_argument when spin_ns < 0.
std::int64_t wait_until_ns(std::int64_t target_ns, std::int64_t spin_ns = 200'000);

// Spin-wait hint for the sampler's sleep-then-spin phase.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace fingrav
