// One run of the launch-capture overhead bench (driven by
// bench/launch_overhead_bench.py, which sets the tool the stand-in loads,
// alternates the consumer with a discarding client and reads the drops from
// the journal): the stand-in vendor runtime STANDIN delivers N kernel records
// at R per second, in ticks of 10 ms, to whatever tool it loads
// (ROCP_TOOL_LIBRARIES for the rocprofiler-sdk stand-in,
// CUDA_INJECTION64_PATH for the CUPTI one).
//
//   launch_overhead STANDIN N R [SAMPLER_SECONDS]
//
// Printed (one JSON object): the process's CPU time over the dispatch stream
// and the runtime's shutdown (CLOCK_PROCESS_CPUTIME_ID, every thread: the stand-in's
// delivery, the tool's callback, the capture's writer), per record; the
// dispatch loop's wall time; the same less the dispatching thread's own CPU
// over the loop (the clients run on their runtime's delivery threads). With SAMPLER_SECONDS > 0, the power sampler
// (a SyntheticSource polled every 1 ms, drained every 100 ms, as `fingrav
// record` runs it) is also measured twice in this process: alone for
// SAMPLER_SECONDS before the runtime starts, then beside the dispatch stream;
// for each, its thread's CPU per poll and its poll lateness quantiles.
#include <dlfcn.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fingrav/sampler.hpp"
#include "fingrav/sim/standin_abi.h"
#include "fingrav/synthetic_source.hpp"

namespace {

// Every thread's CPU time, ended ones included, to the nanosecond (getrusage
// counts in scheduler ticks, milliseconds: too coarse for 10^4 records).
double process_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// A sampler as the recorder runs it, with a consumer draining every 100 ms.
class SamplerRun {
 public:
  SamplerRun() {
    fingrav::SyntheticConfig sc;
    sc.period_ns = 1'000'000;
    sampler_ = std::make_unique<fingrav::Sampler>(std::make_shared<fingrav::SyntheticSource>(sc),
                                                  fingrav::SamplerConfig{});
    sampler_->start();
    consumer_ = std::thread([this] {
      std::vector<fingrav::Sample> buf(4096);
      while (!stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        while (sampler_->drain(buf.data(), buf.size()) == buf.size()) {
        }
      }
    });
  }
  // Stops and returns the figures as a JSON object.
  std::string finish() {
    stop_.store(true);
    consumer_.join();
    sampler_->stop();
    const fingrav::SamplerStats s = sampler_->stats();
    char out[512];
    std::snprintf(out, sizeof out,
                  "{\"polls\": %llu, \"cpu_ns_per_poll\": %.1f, \"late_p50_ns\": %lld, \"late_p90_ns\": %lld, "
                  "\"late_p99_ns\": %lld, \"late_max_ns\": %lld, \"deadline_misses\": %llu}",
                  static_cast<unsigned long long>(s.polls),
                  s.polls > 0 ? static_cast<double>(s.cpu_time_ns) / static_cast<double>(s.polls) : 0.0,
                  static_cast<long long>(s.jitter_p50_ns), static_cast<long long>(s.jitter_p90_ns),
                  static_cast<long long>(s.jitter_p99_ns), static_cast<long long>(s.jitter_max_ns),
                  static_cast<unsigned long long>(s.deadline_misses));
    return out;
  }

 private:
  std::unique_ptr<fingrav::Sampler> sampler_;
  std::atomic<bool> stop_{false};
  std::thread consumer_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s STANDIN_LIBRARY N RATE_PER_S [SAMPLER_SECONDS]\n", argv[0]);
    return 2;
  }
  const long n = std::atol(argv[2]);
  const long rate = std::atol(argv[3]);
  const double sampler_s = argc == 5 ? std::atof(argv[4]) : 0.0;
  if (n <= 0 || rate < 100 || rate % 100 != 0 || sampler_s < 0) {
    std::fprintf(stderr, "N must be > 0, RATE_PER_S a multiple of 100, SAMPLER_SECONDS >= 0\n");
    return 2;
  }
  std::string alone;
  if (sampler_s > 0) {
    SamplerRun run;
    std::this_thread::sleep_for(std::chrono::duration<double>(sampler_s));
    alone = run.finish();
  }
  void* s = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (s == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<decltype(&fingrav_standin_init)>(dlsym(s, "fingrav_standin_init"));
  auto dispatch = reinterpret_cast<decltype(&fingrav_standin_dispatch)>(dlsym(s, "fingrav_standin_dispatch"));
  auto fini = reinterpret_cast<decltype(&fingrav_standin_fini)>(dlsym(s, "fingrav_standin_fini"));
  if (init == nullptr || dispatch == nullptr || fini == nullptr || init() != 0) return 1;
  std::unique_ptr<SamplerRun> beside;
  if (sampler_s > 0) beside = std::make_unique<SamplerRun>();
  const char* names[] = {"gemm", "softmax", "reduce", "all_reduce"};
  const std::uint32_t grid[3] = {64, 1, 1}, block[3] = {256, 1, 1};
  // Records go out in ticks of 10 ms: a vendor runtime hands them over in
  // buffers anyway, and a wake-up per millisecond would be most of the
  // baseline's CPU (and of its noise) at 10^4 per second.
  const long per_tick = rate / 100;
  const double cpu0 = process_cpu_s();
  const double loop0 = thread_cpu_s();
  const auto wall0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    if (i % per_tick == 0) std::this_thread::sleep_until(wall0 + std::chrono::milliseconds(10 * (i / per_tick)));
    const std::int64_t t = 1000 * static_cast<std::int64_t>(i);
    if (dispatch(names[i & 3], t, t + 500, 0, 7, grid, block) != 0) return 1;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const double loop_cpu = thread_cpu_s() - loop0;
  fini();
  const double cpu = process_cpu_s() - cpu0;
  std::string with;
  // The sampler's CPU is its own thread's; it is stopped after the stream, so
  // the process figure above includes it when it runs (reported apart).
  if (beside) with = beside->finish();
  // Less the dispatching thread's CPU over the loop: the stand-in's own work
  // there is the same for every client and is most of the noise; the clients'
  // work runs on their delivery threads, and the runtime's shutdown is kept.
  const double off_loop = cpu - loop_cpu;
  std::printf("{\"records\": %ld, \"rate_per_s\": %ld, \"cpu_s\": %.6f, \"cpu_ns_per_record\": %.1f, "
              "\"off_dispatch_ns_per_record\": %.1f, \"wall_s\": %.4f",
              n, rate, cpu, cpu * 1e9 / static_cast<double>(n), off_loop * 1e9 / static_cast<double>(n), wall);
  if (sampler_s > 0) std::printf(", \"sampler_alone\": %s, \"sampler_beside\": %s", alone.c_str(), with.c_str());
  std::printf("}\n");
  return 0;
}
