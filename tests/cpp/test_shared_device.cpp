// The shared simulated device (fingrav/sim/shared_device.hpp): the file's
// header round trip, refusals by name, and the lock-free ring between a
// producer and readers, through one mapping and through two mappings of the
// same file (as the application and the recorder map it). Run under TSan
// and ASan in CI.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "fingrav/host_clock.hpp"
#include "fingrav/sim/device.hpp"
#include "fingrav/sim/shared_device.hpp"

namespace {

using fingrav::sim::LogRecord;
using fingrav::sim::SharedSimDevice;
using fingrav::sim::SharedState;
using fingrav::sim::SimParams;

std::string temp_path(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  std::string p = std::string(dir != nullptr ? dir : "/tmp") + "/fingrav-shared-" + std::to_string(::getpid()) + "-" +
                  name;
  ::unlink(p.c_str());
  return p;
}

// A log whose every field follows from its sequence number, so a torn copy
// (fields from two different logs) is caught.
LogRecord log_of(std::uint64_t seq) {
  LogRecord r{};
  r.seq = seq;
  r.sample_ns = static_cast<std::int64_t>(seq * 1000 + 7);
  r.publish_ns = r.sample_ns + 20;
  r.logger_ticks = static_cast<std::int64_t>(seq * 3 + 1);
  for (int c = 0; c < 4; ++c) r.power_w[c] = static_cast<float>(seq % 100000) + static_cast<float>(c);
  r.window_ns = static_cast<std::uint32_t>(seq & 0xffff);
  return r;
}

void check_whole(const LogRecord& r) {
  const LogRecord want = log_of(r.seq);
  CHECK_EQ(r.sample_ns, want.sample_ns);
  CHECK_EQ(r.publish_ns, want.publish_ns);
  CHECK_EQ(r.logger_ticks, want.logger_ticks);
  for (int c = 0; c < 4; ++c) CHECK_EQ(r.power_w[c], want.power_w[c]);
  CHECK_EQ(r.window_ns, want.window_ns);
}

void header_round_trip_and_refusals() {
  const std::string path = temp_path("header");
  SimParams p;
  p.seed = 42;
  p.logger_period_ns = 250'000;
  p.device_clock.skew_ppm = -13.5;
  p.logger_own_clock = true;
  auto made = SharedSimDevice::create(path, p, 64);
  auto opened = SharedSimDevice::open(path);
  CHECK_EQ(opened->capacity(), std::uint64_t{64});
  CHECK_EQ(opened->clock_epoch_ns(), made->clock_epoch_ns());
  for (const auto& e : fingrav::sim::param_table()) CHECK_EQ(e.get(opened->params()), e.get(p));
  CHECK(opened->state() == SharedState::kWaiting);
  // Never written over; a bad capacity is named.
  CHECK_THROWS(SharedSimDevice::create(path, p, 64), std::invalid_argument, "never written over");
  CHECK_THROWS(SharedSimDevice::create(path + "x", p, 100), std::invalid_argument, "capacity=100");
  // A file that is not a shared device is refused, saying why.
  const std::string other = temp_path("other");
  {
    std::ofstream f(other);
    f << std::string(1 << 16, 'x');
  }
  CHECK_THROWS(SharedSimDevice::open(other), std::runtime_error, "no FGSIMDEV magic");
  CHECK_THROWS(SharedSimDevice::open(other + ".missing"), std::runtime_error, "cannot open");
  // One application per device.
  opened->attach();
  CHECK(made->state() == SharedState::kAttached);
  CHECK_THROWS(made->attach(), std::runtime_error, "already run");
  opened->detach();
  CHECK(made->state() == SharedState::kDetached);
  CHECK(made->detach_ns() >= made->attach_ns());
  made.reset();
  opened.reset();
  ::unlink(path.c_str());
  ::unlink(other.c_str());
}

// A producer laps a small ring many times while readers copy the newest
// logs: every log a reader returns is whole, in order, consecutive, and no
// older than the newest it saw before.
void ring_never_returns_a_torn_or_stale_log() {
  const std::string path = temp_path("ring");
  SimParams p;
  auto producer_map = SharedSimDevice::create(path, p, 16);
  auto reader_map = SharedSimDevice::open(path);
  producer_map->attach();
  const std::uint64_t total = 200'000;
  std::atomic<bool> done{false};
  auto reader = [&](SharedSimDevice* dev, std::size_t max) {
    std::vector<LogRecord> out(max);
    std::uint64_t newest_seen = 0;
    bool any = false;
    std::uint64_t polls = 0;
    for (bool finished = false; !finished || polls < 10;) {
      // Read `done` before polling, so the poll after it has seen every log.
      finished = done.load(std::memory_order_acquire);
      const std::size_t n = dev->newest(out.data(), max);
      ++polls;
      for (std::size_t i = 0; i < n; ++i) {
        check_whole(out[i]);
        if (i > 0) CHECK_EQ(out[i].seq, out[i - 1].seq + 1);
      }
      if (n > 0) {
        if (any) CHECK(out[n - 1].seq >= newest_seen);
        newest_seen = out[n - 1].seq;
        any = true;
      }
    }
    CHECK(any);
    CHECK_EQ(newest_seen, total - 1);
  };
  std::thread same(reader, producer_map.get(), 8);   // one mapping: TSan sees every access
  std::thread other(reader, reader_map.get(), 16);   // another mapping, as the recorder's process
  for (std::uint64_t i = 0; i < total; ++i) producer_map->publish(log_of(i));
  done.store(true, std::memory_order_release);
  same.join();
  other.join();
  CHECK_EQ(reader_map->published(), total);
  producer_map.reset();
  reader_map.reset();
  ::unlink(path.c_str());
}

// The power source reports what SimPowerSource reports for the same
// parameters, gives nothing before an application attaches, and returns the
// newest logs oldest first.
void power_source_matches_the_in_process_one() {
  const std::string path = temp_path("source");
  SimParams p;
  p.logger_window_ns = 500'000;
  auto dev = SharedSimDevice::create(path, p, 32);
  fingrav::sim::SharedSimPowerSource src(dev, 4);
  auto sim = std::make_shared<fingrav::sim::SimDevice>(p, true);
  fingrav::sim::SimPowerSource ref(sim, 4);
  CHECK_EQ(src.info().name, ref.info().name);
  CHECK_EQ(src.info().clock_domain, ref.info().clock_domain);
  CHECK_EQ(src.info().tick_ns, ref.info().tick_ns);
  CHECK_EQ(src.info().native_period_ns, ref.info().native_period_ns);
  CHECK_EQ(src.info().window_ns, ref.info().window_ns);
  CHECK_EQ(src.info().has_sequence, ref.info().has_sequence);
  fingrav::Reading out[fingrav::PowerSource::kMaxReadingsPerPoll];
  CHECK_EQ(src.poll(out, 128).count, std::size_t{0});  // no application yet
  auto app = SharedSimDevice::open(path);
  app->attach();
  for (std::uint64_t i = 0; i < 10; ++i) app->publish(log_of(i));
  const auto r = src.poll(out, 128);
  CHECK_EQ(r.count, std::size_t{4});
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK_EQ(out[i].source_seq, std::uint64_t{6 + i});
    CHECK_EQ(out[i].source_ts, log_of(6 + i).logger_ticks);
    CHECK_EQ(out[i].power_w[0], log_of(6 + i).power_w[0]);
  }
  CHECK_THROWS(fingrav::sim::SharedSimPowerSource(dev, 0), std::invalid_argument, "depth=0");
  app.reset();
  dev.reset();
  ::unlink(path.c_str());
}

// The recorder's clock reads and the application's device agree: each read
// lies between the true ticks at its two host reads, as the application's
// SimDevice (same parameters, same clock epoch) keeps them.
void clock_reads_follow_the_applications_device() {
  const std::string path = temp_path("clock");
  SimParams p;
  p.read_outlier_prob = 0;
  p.device_clock.skew_ppm = 250;  // large, so a wrong epoch or rate shows
  auto dev = SharedSimDevice::create(path, p, 16);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto app_side = SharedSimDevice::open(path);
  fingrav::sim::SimDevice app_dev(app_side->params(), true, app_side->clock_epoch_ns());
  fingrav::sim::SharedSimTimestampSource ts(dev);
  for (int i = 0; i < 50; ++i) {
    const fingrav::Bracket b = ts.read();
    CHECK(b.host_after - b.host_before >= static_cast<std::int64_t>(p.read_rtt_ns));
    CHECK(b.device_ticks >= app_dev.device_ticks_at(b.host_before));
    CHECK(b.device_ticks <= app_dev.device_ticks_at(b.host_after));
  }
  app_side.reset();
  dev.reset();
  ::unlink(path.c_str());
}

}  // namespace

int main() {
  return fingrav_test::run_tests("shared_device", {
                                                      {"header_round_trip_and_refusals", header_round_trip_and_refusals},
                                                      {"ring_never_returns_a_torn_or_stale_log",
                                                       ring_never_returns_a_torn_or_stale_log},
                                                      {"power_source_matches_the_in_process_one",
                                                       power_source_matches_the_in_process_one},
                                                      {"clock_reads_follow_the_applications_device",
                                                       clock_reads_follow_the_applications_device},
                                                  });
}
