// The sampler: one background thread that polls one PowerSource at a fixed
// period with absolute deadlines, keeps only readings that are new, and pushes
// them into an SPSC ring that a consumer drains in batches.
//
// The thread never throws: a failure is recorded, the thread ends, and the
// Python layer raises it from stop().
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "fingrav/power_source.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/spsc_ring.hpp"

namespace fingrav {

inline constexpr std::int64_t kMinPeriodNs = 20'000;         // 20 us
inline constexpr std::int64_t kMaxPeriodNs = 1'000'000'000;  // 1 s
inline constexpr std::size_t kMinCapacity = 16;
// 2^26 samples of 64 bytes: a 4 GiB ring, 22 minutes of the fastest period
// (20 us) with nobody draining. A larger request is a mistake (2^31 asks for
// 128 GiB), refused by name before anything is allocated.
inline constexpr std::size_t kMaxCapacity = std::size_t{1} << 26;

struct SamplerConfig {
  std::int64_t period_ns = 1'000'000;
  std::size_t capacity = std::size_t{1} << 16;  // power of two in [kMinCapacity, kMaxCapacity]
  int cpu = -1;  // pin the sampler thread to this CPU; -1 = no pinning
};

// Lateness of each poll against its deadline, in a log-linear histogram
// (16 sub-buckets per power of two, <= 6.25% relative error) so the hot loop
// records a value with two stores and no allocation. One writer (the sampler
// thread); readers take relaxed snapshots.
class JitterHistogram {
 public:
  static constexpr int kSub = 16;
  static constexpr int kBuckets = 64 * kSub;

  void record(std::int64_t value_ns) noexcept;
  // q in [0, 1]; returns the upper edge of the bucket holding quantile q, or
  // 0 when empty.
  std::int64_t quantile(double q) const noexcept;
  std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  std::int64_t max() const noexcept { return max_.load(std::memory_order_relaxed); }

  static int bucket_of(std::uint64_t v) noexcept;
  static std::uint64_t bucket_upper(int b) noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::int64_t> max_{0};
};

// While the thread runs, the counters are read one by one and bumped once per
// poll after its pushes, so a snapshot is not atomic: drained may briefly lead
// samples by up to one poll's readings. After stop() every figure is final.
struct SamplerStats {
  std::uint64_t polls = 0;            // calls to source->poll()
  std::uint64_t samples = 0;          // new readings pushed into the ring
  std::uint64_t duplicates = 0;       // readings skipped as already seen
  std::uint64_t drops = 0;            // new readings lost because the ring was full
  std::uint64_t source_missed = 0;    // readings the source produced but no poll saw (sequence gaps)
  std::uint64_t read_errors = 0;      // polls that reported a transient error
  std::uint64_t deadline_misses = 0;  // whole periods skipped because a poll ran late
  std::uint64_t drained = 0;          // samples handed to the consumer
  std::int64_t jitter_p50_ns = 0;     // poll start minus its deadline
  std::int64_t jitter_p90_ns = 0;
  std::int64_t jitter_p99_ns = 0;
  std::int64_t jitter_max_ns = 0;
  double mean_period_ns = 0;          // achieved: (last poll - first poll) / (polls - 1)
  std::int64_t cpu_time_ns = 0;       // the sampler thread's own CPU time
  std::int64_t wall_time_ns = 0;      // since the thread started
  std::size_t buffered = 0;           // samples waiting in the ring
  std::string last_read_error;        // message of the latest transient error
};

class Sampler {
 public:
  // Validates the configuration; throws std::invalid_argument naming the
  // argument (period_ns, capacity, cpu, source), or AllocationError (a
  // std::bad_alloc naming capacity) when the ring cannot be allocated.
  Sampler(std::shared_ptr<PowerSource> source, const SamplerConfig& config);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Starts the thread. Throws std::logic_error if this sampler was started
  // before (a sampler runs once: its stats describe one run) or the source is
  // in use by another sampler; std::system_error if the thread cannot start.
  void start();
  // Requests the stop, performs one last poll (so readings produced up to now
  // are kept), and joins. Idempotent; a no-op before start(). Never throws:
  // check error() afterwards.
  void stop() noexcept;

  // Consumer side: moves up to max samples into out, oldest first. Safe to
  // call from several threads (serialised by a consumer-only mutex the
  // producer never touches).
  std::size_t drain(Sample* out, std::size_t max);
  // Samples waiting; exact lower bound for the consumer.
  std::size_t available() const noexcept { return ring_.size_approx(); }

  SamplerStats stats() const;
  bool started() const noexcept { return state_.load(std::memory_order_acquire) != kIdle; }
  bool running() const noexcept { return state_.load(std::memory_order_acquire) == kRunning; }
  // Empty when the thread has not failed.
  std::string error() const;

  const SamplerConfig& config() const noexcept { return config_; }
  const SourceInfo& source_info() const noexcept { return source_->info(); }
  const std::shared_ptr<PowerSource>& source() const noexcept { return source_; }

 private:
  enum State : int { kIdle = 0, kRunning = 1, kStopped = 2 };

  void run() noexcept;
  // Polls once; returns false on a fatal error. deadline < 0: not scheduled
  // (the final poll), so no lateness is recorded.
  bool poll_once(std::int64_t deadline) noexcept;
  void wait_until(std::int64_t deadline) noexcept;
  void fail(std::string message) noexcept;
  std::int64_t thread_cpu_ns() const noexcept;

  static void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
    // Single writer: a plain load+store, no locked read-modify-write.
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  const std::shared_ptr<PowerSource> source_;
  const SamplerConfig config_;
  SpscRing<Sample> ring_;
  std::thread thread_;
  std::atomic<int> state_{kIdle};
  std::atomic<bool> stop_requested_{false};

  // Whether new readings are told apart by sequence (else by timestamp);
  // read once, not through a virtual call every poll.
  bool by_seq_ = false;

  // Producer-only state.
  std::array<Reading, PowerSource::kMaxReadingsPerPoll> readings_{};
  bool have_last_ = false;
  std::uint64_t last_seq_ = 0;
  std::int64_t last_ts_ = 0;
  std::uint64_t next_seq_ = 0;
  std::int64_t oversleep_ewma_ns_ = 0;

  // Written by the producer, read by stats().
  std::atomic<std::uint64_t> polls_{0}, samples_{0}, duplicates_{0}, drops_{0}, source_missed_{0},
      read_errors_{0}, deadline_misses_{0};
  std::atomic<std::int64_t> first_poll_ns_{-1}, last_poll_ns_{-1}, thread_start_ns_{-1},
      thread_end_ns_{-1};
  std::atomic<std::int64_t> cpu_final_ns_{0};
  std::atomic<bool> cpu_clock_valid_{false}, finished_{false};
  std::atomic<int> cpu_clock_id_{0};
  JitterHistogram jitter_;

  // Serialises start()/stop() so two callers never join the thread twice.
  std::mutex lifecycle_mu_;

  // Consumer side.
  std::mutex consumer_mu_;
  std::atomic<std::uint64_t> drained_{0};

  // Error path only (never touched while sampling normally).
  mutable std::mutex error_mu_;
  std::string error_;
  std::string last_read_error_;
};

}  // namespace fingrav
