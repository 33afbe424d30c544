// Clock-sync measurement: bracketed reads of a device clock, in bursts and
// periodically during a campaign. C++ measures, Python fits
// (fingrav_native.clocksync): raw triples cross the boundary.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fingrav/spsc_ring.hpp"
#include "fingrav/timestamp_source.hpp"

namespace fingrav {

// n bracketed reads back to back, as fast as the source allows, into out.
// No allocation. Each device read sits between two host clock reads; taking
// a host read on either side of every device read (rather than sharing one
// between neighbours) avoids biasing the bracket towards either side.
// Exceptions from the source propagate.
void measure_brackets(TimestampSource& source, Bracket* out, std::size_t n);

struct ClockSyncConfig {
  std::int64_t interval_ns = 250'000'000;  // a burst four times a second
  std::uint32_t burst = 32;                // reads per burst
  std::size_t capacity = std::size_t{1} << 16;  // ring slots (power of two in [16, 2^26])
};

struct ClockSyncStats {
  std::uint64_t bursts = 0;
  std::uint64_t reads = 0;
  std::uint64_t drops = 0;  // brackets lost because the ring was full
  std::int64_t cpu_time_ns = 0;
  std::int64_t wall_time_ns = 0;
};

// A background thread that takes a burst of bracketed reads every interval,
// so a long campaign records what it needs to refit the clock map
// afterwards (skew wanders; a single calibration drifts). Cheap enough to
// leave on: 32 reads of ~2 us four times a second is ~0.03% of a core.
// The thread never throws: a failure is stored, and stop() reports it.
class ClockSyncRecorder {
 public:
  // Throws std::invalid_argument naming interval_ns, burst, capacity or
  // source, or AllocationError (a std::bad_alloc naming capacity).
  ClockSyncRecorder(std::shared_ptr<TimestampSource> source, const ClockSyncConfig& config);
  ~ClockSyncRecorder();
  ClockSyncRecorder(const ClockSyncRecorder&) = delete;
  ClockSyncRecorder& operator=(const ClockSyncRecorder&) = delete;

  // Takes the first burst at once, then one per interval. Runs once.
  void start();
  // Takes a last burst, then joins. Idempotent; never throws.
  void stop() noexcept;
  std::size_t drain(Bracket* out, std::size_t max);
  std::size_t available() const noexcept { return ring_.size_approx(); }
  bool started() const noexcept { return state_.load(std::memory_order_acquire) != 0; }
  bool running() const noexcept { return state_.load(std::memory_order_acquire) == 1; }
  std::string error() const;
  ClockSyncStats stats() const;
  const ClockSyncConfig& config() const noexcept { return config_; }

 private:
  void run() noexcept;
  bool burst() noexcept;

  const std::shared_ptr<TimestampSource> source_;
  const ClockSyncConfig config_;
  SpscRing<Bracket> ring_;
  std::vector<Bracket> scratch_;
  std::thread thread_;
  std::mutex lifecycle_mu_, consumer_mu_;
  mutable std::mutex error_mu_;
  std::string error_;
  std::atomic<int> state_{0};  // 0 idle, 1 running, 2 stopped
  std::atomic<bool> stop_requested_{false};
  std::atomic<std::uint64_t> bursts_{0}, reads_{0}, drops_{0};
  std::atomic<std::int64_t> t_start_{-1}, t_end_{-1}, cpu_final_{0};
};

}  // namespace fingrav
