// The host clock (CLOCK_MONOTONIC_RAW), measure_host_clock() and the epoch
// brackets (CLOCK_REALTIME between two host clock reads).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "check.hpp"
#include "fingrav/host_clock.hpp"

using namespace fingrav;

namespace {

void monotonic() {
  std::int64_t prev = host_now_ns();
  CHECK(prev > 0);
  for (int i = 0; i < 1'000'000; ++i) {
    const std::int64_t now = host_now_ns();
    CHECK_MSG(now >= prev, "clock went back: " << prev << " then " << now);
    prev = now;
  }
}

void advances_with_real_time() {
  const std::int64_t t0 = host_now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::int64_t dt = host_now_ns() - t0;
  // sleep_for sleeps at least as long on CLOCK_MONOTONIC; RAW differs from it
  // only by the NTP slew (< 0.05%), so 19 ms is a safe floor.
  CHECK_MSG(dt >= 19'000'000, "dt=" << dt);
  CHECK_MSG(dt < 10'000'000'000, "dt=" << dt);
}

void measure_is_sane() {
  const HostClockInfo info = measure_host_clock(10'000);
  CHECK_MSG(info.read_cost_ns > 0 && info.read_cost_ns < 1e6, "read_cost_ns=" << info.read_cost_ns);
  CHECK(info.min_read_cost_ns >= 0);
  CHECK(static_cast<double>(info.min_read_cost_ns) <= info.read_cost_ns);  // a minimum is below the mean
  CHECK_MSG(info.resolution_ns >= 1 && info.resolution_ns <= 10'000'000, "resolution_ns=" << info.resolution_ns);
  CHECK(info.observed_step_ns >= 0);
  CHECK(info.observed_step_ns == 0 || info.observed_step_ns >= info.min_read_cost_ns);
  // The smallest call: two reads.
  const HostClockInfo two = measure_host_clock(2);
  CHECK(two.read_cost_ns >= 0);
}

void invalid_reads() {
  CHECK_THROWS(measure_host_clock(1), std::invalid_argument, "reads");
  CHECK_THROWS(measure_host_clock(0), std::invalid_argument, "reads");
  CHECK_THROWS(measure_host_clock(-5), std::invalid_argument, "reads");
}

}  // namespace

void wait_until_reaches_target() {
  // Never early; late by scheduling noise only (bound generous for a loaded
  // CI machine: precision is measured in bench/phase_bench.py, not asserted).
  for (std::int64_t ahead : {0LL, 50'000LL, 300'000LL, 2'000'000LL}) {
    const std::int64_t target = host_now_ns() + ahead;
    const std::int64_t woke = wait_until_ns(target);
    CHECK_MSG(woke >= target, "woke " << woke << " before " << target);
    CHECK_MSG(host_now_ns() >= target, "returned early");
    CHECK_MSG(woke - target < 50'000'000, "late by " << (woke - target));
  }
  // A target in the past returns at once.
  const std::int64_t past = host_now_ns() - 1'000'000;
  CHECK(wait_until_ns(past) >= past);
  // Without a spin phase the sleep alone reaches the target.
  const std::int64_t t = host_now_ns() + 1'000'000;
  CHECK(wait_until_ns(t, 0) >= t);
  bool threw = false;
  try {
    (void)wait_until_ns(host_now_ns(), -1);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  CHECK(threw);
}

void epoch_brackets_are_tight_and_ordered() {
  constexpr std::size_t kN = 4096;
  std::vector<EpochBracket> b(kN);
  read_epoch_brackets(b.data(), kN);
  std::vector<std::int64_t> widths;
  widths.reserve(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    CHECK_MSG(b[i].mono_before <= b[i].mono_after,
              "row " << i << ": mono_before " << b[i].mono_before << " > mono_after " << b[i].mono_after);
    CHECK_MSG(b[i].mono_before > 0, "row " << i);
    // After September 2001: the realtime column is epoch ns, not the host clock.
    CHECK_MSG(b[i].realtime_ns > 1'000'000'000'000'000'000LL, "row " << i << ": realtime_ns=" << b[i].realtime_ns);
    if (i > 0) {
      CHECK_MSG(b[i].mono_before >= b[i - 1].mono_after, "row " << i << " began before row " << i - 1 << " ended");
    }
    widths.push_back(b[i].mono_after - b[i].mono_before);
  }
  // Back-to-back vDSO reads cost tens of ns; most brackets must be that
  // tight. Bounds generous for a loaded CI machine (preempted reads are wide,
  // but not most of them).
  std::sort(widths.begin(), widths.end());
  CHECK_MSG(widths.front() < 50'000, "narrowest bracket " << widths.front() << " ns");
  CHECK_MSG(widths[kN / 2] < 1'000'000, "median bracket " << widths[kN / 2] << " ns");
  read_epoch_brackets(b.data(), 0);  // n == 0 writes nothing and does not crash
}

void epoch_brackets_advance_with_real_time() {
  EpochBracket first{}, second{};
  read_epoch_brackets(&first, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  read_epoch_brackets(&second, 1);
  const std::int64_t d_rt = second.realtime_ns - first.realtime_ns;
  const std::int64_t d_mono_lo = second.mono_before - first.mono_after;
  const std::int64_t d_mono_hi = second.mono_after - first.mono_before;
  CHECK_MSG(d_rt > 0, "realtime did not advance: " << first.realtime_ns << " then " << second.realtime_ns);
  // Realtime advances at the host clock's rate up to NTP's slew (<= 500 ppm)
  // and the RAW clock's own frequency error; an NTP step in these 20 ms would
  // fail this, and is what the Python side detects in its fits.
  const double tol = 1e-3 * static_cast<double>(d_mono_hi) + 1'000;
  CHECK_MSG(static_cast<double>(d_rt) >= static_cast<double>(d_mono_lo) - tol &&
                static_cast<double>(d_rt) <= static_cast<double>(d_mono_hi) + tol,
            "realtime advanced " << d_rt << " ns while the host clock advanced [" << d_mono_lo << ", "
                                 << d_mono_hi << "] ns");
  CHECK_MSG(d_mono_lo >= 19'000'000, "slept " << d_mono_lo << " ns");
}

int main() {
  return fingrav_test::run_tests("host_clock", {
                                                   {"monotonic", monotonic},
                                                   {"advances_with_real_time", advances_with_real_time},
                                                   {"measure_is_sane", measure_is_sane},
                                                   {"invalid_reads", invalid_reads},
                                                   {"wait_until_reaches_target", wait_until_reaches_target},
                                                   {"epoch_brackets_are_tight_and_ordered",
                                                    epoch_brackets_are_tight_and_ordered},
                                                   {"epoch_brackets_advance_with_real_time",
                                                    epoch_brackets_advance_with_real_time},
                                               });
}
