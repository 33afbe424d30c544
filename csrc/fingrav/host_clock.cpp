#include "fingrav/host_clock.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include <cerrno>

namespace fingrav {

HostClockInfo measure_host_clock(std::int64_t reads) {
  if (reads < 2) {
    throw std::invalid_argument("reads=" + std::to_string(reads) +
                                ": need at least 2 host clock reads");
  }
  HostClockInfo info;
  timespec res{};
  (void)::clock_getres(CLOCK_MONOTONIC_RAW, &res);
  info.resolution_ns = static_cast<std::int64_t>(res.tv_sec) * 1'000'000'000LL + res.tv_nsec;

  std::int64_t min_diff = std::numeric_limits<std::int64_t>::max();
  std::int64_t min_step = std::numeric_limits<std::int64_t>::max();
  const std::int64_t first = host_now_ns();
  std::int64_t prev = first;
  for (std::int64_t i = 1; i < reads; ++i) {
    const std::int64_t now = host_now_ns();
    const std::int64_t d = now - prev;
    min_diff = std::min(min_diff, d);
    if (d > 0) min_step = std::min(min_step, d);
    prev = now;
  }
  info.read_cost_ns = static_cast<double>(prev - first) / static_cast<double>(reads - 1);
  info.min_read_cost_ns = min_diff;
  info.observed_step_ns = min_step == std::numeric_limits<std::int64_t>::max() ? 0 : min_step;
  return info;
}

void read_epoch_brackets(EpochBracket* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    // Three reads into locals first, the store after: nothing between them
    // that could fault in a page or take a lock.
    const std::int64_t before = host_now_ns();
    const std::int64_t rt = realtime_now_ns();
    const std::int64_t after = host_now_ns();
    out[i] = EpochBracket{before, rt, after};
  }
}

std::int64_t wait_until_ns(std::int64_t target_ns, std::int64_t spin_ns) {
  if (spin_ns < 0) {
    throw std::invalid_argument("spin_ns=" + std::to_string(spin_ns) + ": must be >= 0");
  }
  std::int64_t now = host_now_ns();
  // Sleep in relative steps: a signal (EINTR) or an early wake-up only
  // shortens one step, and each step is recomputed from the clock.
  while (target_ns - now > spin_ns) {
    const std::int64_t sleep_ns = target_ns - now - spin_ns;
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(sleep_ns / 1'000'000'000LL);
    ts.tv_nsec = static_cast<long>(sleep_ns % 1'000'000'000LL);
    (void)::nanosleep(&ts, nullptr);
    now = host_now_ns();
  }
  while (now < target_ns) {
    cpu_relax();
    now = host_now_ns();
  }
  return now;
}

}  // namespace fingrav
