#include "fingrav/host_clock.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

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

}  // namespace fingrav
