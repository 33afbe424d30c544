// The simulated device under concurrency: in real time, an application thread
// launches and synchronizes while the sampler thread polls the device's
// logger and a ClockSyncRecorder thread reads its clock. Run under TSan this
// proves the device's locking; the checks prove the three views agree.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "check.hpp"
#include "fingrav/clock_sync.hpp"
#include "fingrav/sampler.hpp"
#include "fingrav/sim/device.hpp"

using namespace fingrav;
using namespace fingrav::sim;

namespace {

void concurrent_launch_sample_and_clock_reads() {
  SimParams p;
  p.seed = 5;
  p.read_outlier_prob = 0;
  auto dev = std::make_shared<SimDevice>(p, /*realtime=*/true);
  auto power = std::make_shared<SimPowerSource>(dev, 8);
  auto clock = std::make_shared<SimTimestampSource>(dev);
  SamplerConfig sc;
  sc.period_ns = 200'000;
  Sampler sampler(power, sc);
  ClockSyncConfig cc;
  cc.interval_ns = 5'000'000;
  cc.burst = 8;
  ClockSyncRecorder recorder(clock, cc);
  sampler.start();
  recorder.start();
  const int gemm = dev->kernel_id("cb-4k-gemm");
  const int gemv = dev->kernel_id("mb-8k-gemv");
  for (int run = 0; run < 6; ++run) {
    dev->launch(run % 2 ? gemv : gemm, 10, run);
    dev->synchronize();
  }
  sampler.stop();
  recorder.stop();
  CHECK(sampler.error().empty());
  CHECK(recorder.error().empty());

  std::vector<Sample> samples(sampler.available());
  CHECK_EQ(sampler.drain(samples.data(), samples.size()), samples.size());
  CHECK(samples.size() > 5);
  const std::vector<LogRecord> logs = dev->logs();
  for (const Sample& s : samples) {
    // Every drained sample is the device's log of that sequence number,
    // seen after it was published.
    CHECK(s.source_seq < logs.size());
    const LogRecord& r = logs[s.source_seq];
    CHECK_EQ(s.source_ts, r.logger_ticks);
    CHECK_EQ(s.power_w[0], r.power_w[0]);
    CHECK(s.host_ns >= r.publish_ns);
  }
  std::vector<Bracket> brackets(recorder.available());
  CHECK_EQ(recorder.drain(brackets.data(), brackets.size()), brackets.size());
  CHECK(brackets.size() >= 16);
  for (const Bracket& b : brackets) {
    // The device sampled its clock inside the bracket (to a tick).
    const double t = dev->host_at_device_ticks(static_cast<double>(b.device_ticks));
    CHECK_MSG(t >= static_cast<double>(b.host_before) - p.device_clock.tick_ns &&
                  t <= static_cast<double>(b.host_after) + p.device_clock.tick_ns,
              "bracket [" << b.host_before << ", " << b.host_after << "] true " << t);
  }
  const std::vector<ExecRecord> execs = dev->executions();
  CHECK_EQ(execs.size(), 60u);
  for (std::size_t i = 1; i < execs.size(); ++i) CHECK(execs[i].start_ns >= execs[i - 1].end_ns);
}

void virtual_time_is_deterministic() {
  SimParams p;
  p.seed = 9;
  auto run = [&] {
    SimDevice dev(p, false);
    dev.launch(dev.kernel_id("cb-2k-gemm"), 50, 0);
    dev.synchronize();
    return dev.executions();
  };
  const auto a = run(), b = run();
  CHECK_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK_EQ(a[i].start_ns, b[i].start_ns);
    CHECK_EQ(a[i].end_ns, b[i].end_ns);
    CHECK_EQ(a[i].energy_j, b[i].energy_j);
  }
}

// The paper's SSE -> SSP picture for a kernel under the cap (CB-4K, Section
// V-C1): the clock reaches f_max during the warm-ups, so execution time is
// settled by the SSE, while power keeps rising at that clock as the compute
// dies heat and leak more, for tens of executions.
void clock_settles_before_power() {
  SimParams p;
  p.seed = 4;
  SimDevice dev(p, false);
  dev.advance(100'000'000);  // idle, parked and cool
  const double temp_idle = dev.current_temp_rise_k();
  dev.launch(dev.kernel_id("cb-4k-gemm"), 30, 0);
  dev.synchronize();
  const std::vector<ExecRecord> ex = dev.executions();
  CHECK_EQ(ex.size(), 30u);
  auto duration = [&](std::size_t i) { return static_cast<double>(ex[i].end_ns - ex[i].start_ns); };
  CHECK_MSG(ex[3].mean_freq > 0.99 && ex[29].mean_freq > 0.99, "clock " << ex[3].mean_freq << " " << ex[29].mean_freq);
  CHECK_MSG(std::fabs(duration(3) / duration(29) - 1.0) < 0.02, "durations " << duration(3) << " " << duration(29));
  CHECK_MSG(ex[29].mean_power_w[0] > 1.04 * ex[3].mean_power_w[0],
            "power " << ex[3].mean_power_w[0] << " -> " << ex[29].mean_power_w[0]);
  CHECK(dev.current_temp_rise_k() > temp_idle + 10);
  // Under the cap: the firmware never cut the clock.
  for (const FirmwareRecord& r : dev.firmware()) CHECK_EQ(r.throttled, 0);
}

}  // namespace

int main() {
  return fingrav_test::run_tests("sim_device", {
                                                    {"concurrent_launch_sample_and_clock_reads",
                                                     concurrent_launch_sample_and_clock_reads},
                                                    {"virtual_time_is_deterministic", virtual_time_is_deterministic},
                                                    {"clock_settles_before_power", clock_settles_before_power},
                                                });
}
