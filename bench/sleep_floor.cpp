// The kernel's floor for periodic polling on this machine: one thread that
// only sleeps to absolute deadlines (clock_nanosleep TIMER_ABSTIME, timer
// slack 1 ns, as the sampler sets it) and does nothing else. Its CPU time is
// what waking up every period costs by itself (syscall, timer interrupt,
// context switch, all charged to the thread); its lateness is what the timer
// delivers without spinning. bench/sampler_bench.py runs it in the same run as
// the sampler, so the sampler's CPU and jitter can be read against it.
//
// --spin-ns M sleeps to M ns before each deadline and spins the rest, as the
// sampler's sleep-then-spin wait does with its adaptive margin: it shows what
// a given spin margin costs in CPU and buys in lateness on this machine.
//
// Usage: sleep_floor [--period-ns N] [--seconds S] [--spin-ns M]; prints one
// JSON object.

#include <sys/prctl.h>
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::int64_t to_ns(const timespec& ts) { return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec; }

std::int64_t now_ns(clockid_t id) {
  timespec ts{};
  (void)clock_gettime(id, &ts);
  return to_ns(ts);
}

std::int64_t percentile(const std::vector<std::int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t period = 100'000;
  double seconds = 3.0;
  std::int64_t spin = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--period-ns" && i + 1 < argc) {
      period = std::strtoll(argv[++i], nullptr, 10);
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::strtod(argv[++i], nullptr);
    } else if (a == "--spin-ns" && i + 1 < argc) {
      spin = std::strtoll(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: sleep_floor [--period-ns N] [--seconds S] [--spin-ns M]\n");
      return 1;
    }
  }
  if (period < 1'000 || !(seconds > 0) || spin < 0 || spin >= period) {
    std::fprintf(stderr, "sleep_floor: need --period-ns >= 1000, --seconds > 0, 0 <= --spin-ns < period\n");
    return 1;
  }
#ifdef PR_SET_TIMERSLACK
  // Same setting as the sampler thread, so the floor is the sampler's floor.
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  const auto n = static_cast<std::size_t>(seconds * 1e9 / static_cast<double>(period));
  std::vector<std::int64_t> late;
  late.reserve(n);
  const std::int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  const std::int64_t t0 = now_ns(CLOCK_MONOTONIC);
  std::int64_t deadline = t0 + period;
  std::int64_t first = -1, last = -1;
  std::uint64_t misses = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t wake = deadline - spin;
    timespec ts{static_cast<time_t>(wake / 1'000'000'000LL), static_cast<long>(wake % 1'000'000'000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
    }
    std::int64_t t = now_ns(CLOCK_MONOTONIC);
    while (t < deadline) {
      _mm_pause();
      t = now_ns(CLOCK_MONOTONIC);
    }
    late.push_back(t - deadline);
    if (first < 0) first = t;
    last = t;
    deadline += period;
    // Same policy as the sampler: skip whole missed periods, do not burst.
    if (t >= deadline) {
      const std::int64_t missed = (t - deadline) / period + 1;
      misses += static_cast<std::uint64_t>(missed);
      deadline += missed * period;
    }
  }
  const std::int64_t cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  const std::int64_t wall = now_ns(CLOCK_MONOTONIC) - t0;
  std::sort(late.begin(), late.end());
  std::printf(
      "{\"period_ns\": %lld, \"spin_ns\": %lld, \"wakeups\": %zu, \"deadline_misses\": %llu, "
      "\"mean_period_ns\": %.1f, \"lateness_p50_ns\": %lld, \"lateness_p90_ns\": %lld, "
      "\"lateness_p99_ns\": %lld, \"lateness_max_ns\": %lld, \"cpu_fraction\": %.5f}\n",
      static_cast<long long>(period), static_cast<long long>(spin), late.size(),
      static_cast<unsigned long long>(misses),
      late.size() > 1 ? static_cast<double>(last - first) / static_cast<double>(late.size() - 1) : 0.0,
      static_cast<long long>(percentile(late, 0.50)), static_cast<long long>(percentile(late, 0.90)),
      static_cast<long long>(percentile(late, 0.99)), static_cast<long long>(late.empty() ? 0 : late.back()),
      static_cast<double>(cpu) / static_cast<double>(wall));
  return 0;
}
