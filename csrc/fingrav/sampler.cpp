#include "fingrav/sampler.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <exception>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "fingrav/alloc_error.hpp"
#include "fingrav/host_clock.hpp"

namespace fingrav {

// ---------------------------------------------------------------- histogram

int JitterHistogram::bucket_of(std::uint64_t v) noexcept {
  if (v < static_cast<std::uint64_t>(kSub)) return static_cast<int>(v);
  const int msb = 63 - __builtin_clzll(v);  // >= 4
  const int shift = msb - 4;
  const int sub = static_cast<int>((v >> shift) & (kSub - 1));
  return (msb - 3) * kSub + sub;
}

std::uint64_t JitterHistogram::bucket_upper(int b) noexcept {
  if (b < kSub) return static_cast<std::uint64_t>(b);
  const int msb = b / kSub + 3;
  const int sub = b % kSub;
  const int shift = msb - 4;
  // Values in this bucket are (16 + sub) << shift ... ((17 + sub) << shift) - 1.
  const std::uint64_t lo = (static_cast<std::uint64_t>(kSub + sub)) << shift;
  return lo + ((std::uint64_t{1} << shift) - 1);
}

void JitterHistogram::record(std::int64_t value_ns) noexcept {
  const std::uint64_t v = value_ns > 0 ? static_cast<std::uint64_t>(value_ns) : 0;
  auto& b = buckets_[static_cast<std::size_t>(bucket_of(v))];
  b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  count_.store(count_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (static_cast<std::int64_t>(v) > max_.load(std::memory_order_relaxed)) {
    max_.store(static_cast<std::int64_t>(v), std::memory_order_relaxed);
  }
}

std::int64_t JitterHistogram::quantile(double q) const noexcept {
  std::array<std::uint64_t, kBuckets> snap{};
  std::uint64_t total = 0;
  for (int i = 0; i < kBuckets; ++i) {
    snap[static_cast<std::size_t>(i)] = buckets_[static_cast<std::size_t>(i)].load(std::memory_order_relaxed);
    total += snap[static_cast<std::size_t>(i)];
  }
  if (total == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Rank of the quantile, 1-based: the smallest value with at least
  // ceil(q * total) observations at or below it.
  const auto rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total))));
  std::uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += snap[static_cast<std::size_t>(i)];
    if (seen >= rank) {
      // Never report more than the true maximum (the top bucket is wide).
      return std::min(static_cast<std::int64_t>(bucket_upper(i)), max());
    }
  }
  return max();
}

// ---------------------------------------------------------------- sampler

Sampler::Sampler(std::shared_ptr<PowerSource> source, const SamplerConfig& config)
    : source_(std::move(source)),
      config_(config),
      ring_([&] {
        if (config.capacity < kMinCapacity || (config.capacity & (config.capacity - 1)) != 0) {
          throw std::invalid_argument("capacity=" + std::to_string(config.capacity) + ": must be a power of two >= " +
                                      std::to_string(kMinCapacity) + " and at most 2^26 = " +
                                      std::to_string(kMaxCapacity));
        }
        if (config.capacity > kMaxCapacity) {
          throw std::invalid_argument(
              "capacity=" + std::to_string(config.capacity) + ": must be at most 2^26 = " +
              std::to_string(kMaxCapacity) + " samples (" + std::to_string(sizeof(Sample)) + " bytes each: " +
              format_bytes(bytes_of(config.capacity, sizeof(Sample))) + " asked, " +
              format_bytes(bytes_of(kMaxCapacity, sizeof(Sample))) + " at the limit); drain more often instead");
        }
        return config.capacity;
      }()) {
  if (!source_) throw std::invalid_argument("source: must not be null");
  by_seq_ = source_->info().has_sequence;
  if (config.period_ns < kMinPeriodNs || config.period_ns > kMaxPeriodNs) {
    throw std::invalid_argument("period_ns=" + std::to_string(config.period_ns) +
                                ": must be in [20000, 1000000000] ns (20 us to 1 s)");
  }
  if (config.cpu < -1 || config.cpu >= CPU_SETSIZE) {
    throw std::invalid_argument("cpu=" + std::to_string(config.cpu) + ": must be -1 (no pinning) or in [0, " +
                                std::to_string(CPU_SETSIZE) + ")");
  }
  if (config.cpu >= 0) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && !CPU_ISSET(config.cpu, &allowed)) {
      throw std::invalid_argument("cpu=" + std::to_string(config.cpu) +
                                  ": not in this process's allowed CPU set (see `taskset -p $$`)");
    }
  }
}

Sampler::~Sampler() { stop(); }

void Sampler::start() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (state_.load(std::memory_order_acquire) != kIdle) {
    throw std::logic_error(
        "start(): this sampler was already started; a Sampler runs once, create a new one");
  }
  if (!source_->try_acquire()) {
    throw std::logic_error("start(): the source '" + source_->info().name +
                           "' is already being polled by another sampler");
  }
  state_.store(kRunning, std::memory_order_release);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    state_.store(kStopped, std::memory_order_release);
    source_->release();
    throw;
  }
}

void Sampler::stop() noexcept {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);  // std::mutex::lock only throws on deadlock misuse
  if (state_.load(std::memory_order_acquire) == kIdle) return;
  stop_requested_.store(true, std::memory_order_release);
  if (thread_.joinable()) {
    try {
      thread_.join();
    } catch (...) {
      // join only throws for a non-joinable or self thread; both are excluded.
    }
  }
  state_.store(kStopped, std::memory_order_release);
}

std::size_t Sampler::drain(Sample* out, std::size_t max) {
  std::lock_guard<std::mutex> lock(consumer_mu_);
  const std::size_t n = ring_.pop_into(out, max);
  drained_.fetch_add(n, std::memory_order_relaxed);
  return n;
}

std::string Sampler::error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

void Sampler::fail(std::string message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_.empty()) error_ = std::move(message);
  } catch (...) {
  }
  stop_requested_.store(true, std::memory_order_release);
}

std::int64_t Sampler::thread_cpu_ns() const noexcept {
  if (finished_.load(std::memory_order_acquire) || !cpu_clock_valid_.load(std::memory_order_acquire)) {
    return cpu_final_ns_.load(std::memory_order_relaxed);
  }
  timespec ts{};
  const auto id = static_cast<clockid_t>(cpu_clock_id_.load(std::memory_order_relaxed));
  const bool ok = ::clock_gettime(id, &ts) == 0;
  // The thread may have ended between the check and the read: then its final
  // figure is the right one.
  if (!ok || finished_.load(std::memory_order_acquire)) return cpu_final_ns_.load(std::memory_order_relaxed);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

SamplerStats Sampler::stats() const {
  SamplerStats s;
  s.polls = polls_.load(std::memory_order_relaxed);
  s.samples = samples_.load(std::memory_order_relaxed);
  s.duplicates = duplicates_.load(std::memory_order_relaxed);
  s.drops = drops_.load(std::memory_order_relaxed);
  s.source_missed = source_missed_.load(std::memory_order_relaxed);
  s.read_errors = read_errors_.load(std::memory_order_relaxed);
  s.deadline_misses = deadline_misses_.load(std::memory_order_relaxed);
  s.drained = drained_.load(std::memory_order_relaxed);
  s.jitter_p50_ns = jitter_.quantile(0.50);
  s.jitter_p90_ns = jitter_.quantile(0.90);
  s.jitter_p99_ns = jitter_.quantile(0.99);
  s.jitter_max_ns = jitter_.max();
  const std::int64_t first = first_poll_ns_.load(std::memory_order_relaxed);
  const std::int64_t last = last_poll_ns_.load(std::memory_order_relaxed);
  const std::uint64_t scheduled = jitter_.count();
  if (scheduled > 1 && first >= 0 && last > first) {
    s.mean_period_ns = static_cast<double>(last - first) / static_cast<double>(scheduled - 1);
  }
  s.cpu_time_ns = thread_cpu_ns();
  const std::int64_t t0 = thread_start_ns_.load(std::memory_order_relaxed);
  const std::int64_t t1 = thread_end_ns_.load(std::memory_order_relaxed);
  if (t0 >= 0) s.wall_time_ns = (t1 >= 0 ? t1 : host_now_ns()) - t0;
  s.buffered = ring_.size_approx();
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    s.last_read_error = last_read_error_;
  }
  return s;
}

void Sampler::wait_until(std::int64_t deadline) noexcept {
  // Sleep-then-spin: sleep until the deadline minus the typical oversleep of
  // nanosleep on this machine (capped, below), then spin the rest. The margin
  // adapts, so a poll costs one sleep and at most a few microseconds of
  // spinning, not a whole period. Sleeps are sliced so stop() is prompt even
  // at a 1 s period.
  constexpr std::int64_t kMaxSlice = 20'000'000;  // 20 ms
  // Spinning is bounded to about 1% of the period (at least 1 us): the
  // wake-up then lands within the timer's own jitter of the deadline (a few
  // us on a VM; each reading carries its own timestamp, so lateness costs no
  // accuracy), and the thread stays near the cost of a bare sleep loop.
  const std::int64_t margin_cap = std::max<std::int64_t>(1'000, config_.period_ns / 100);
  for (;;) {
    if (stop_requested_.load(std::memory_order_relaxed)) return;
    const std::int64_t now = host_now_ns();
    const std::int64_t remaining = deadline - now;
    if (remaining <= 0) return;
    const std::int64_t margin = std::min(oversleep_ewma_ns_, margin_cap);
    if (remaining > margin + 1'000) {
      const std::int64_t req = std::min(remaining - margin, kMaxSlice);
      timespec ts{static_cast<time_t>(req / 1'000'000'000LL), static_cast<long>(req % 1'000'000'000LL)};
      ::nanosleep(&ts, nullptr);
      const std::int64_t over = host_now_ns() - now - req;
      if (req < kMaxSlice) {
        // EWMA with weight 1/8: follows a change in timer behaviour within a
        // few dozen polls, ignores a single preempted sleep.
        oversleep_ewma_ns_ += (std::max<std::int64_t>(over, 0) - oversleep_ewma_ns_) / 8;
      }
    } else {
      cpu_relax();
    }
  }
}

bool Sampler::poll_once(std::int64_t deadline) noexcept {
  const std::int64_t t0 = host_now_ns();
  if (deadline >= 0) {
    jitter_.record(t0 - deadline);
    if (first_poll_ns_.load(std::memory_order_relaxed) < 0) first_poll_ns_.store(t0, std::memory_order_relaxed);
    last_poll_ns_.store(t0, std::memory_order_relaxed);
  }
  PollResult res;
  try {
    res = source_->poll(readings_.data(), readings_.size());
  } catch (const std::exception& e) {
    fail(std::string("source '") + source_->info().name + "' poll() threw: " + e.what());
    return false;
  } catch (...) {
    fail(std::string("source '") + source_->info().name + "' poll() threw a non-standard exception");
    return false;
  }
  const std::int64_t t1 = host_now_ns();
  bump(polls_);
  if (res.status == PollStatus::kFatalError) {
    std::string why;
    try {
      why = source_->last_error();
    } catch (...) {
    }
    fail(std::string("source '") + source_->info().name + "' failed: " +
         (why.empty() ? std::string("poll() reported a fatal error") : why));
    return false;
  }
  if (res.status == PollStatus::kTransientError) {
    bump(read_errors_);
    try {
      std::string why = source_->last_error();
      std::lock_guard<std::mutex> lock(error_mu_);
      last_read_error_ = std::move(why);
    } catch (...) {
    }
  }
  const std::size_t n = std::min(res.count, readings_.size());
  std::uint64_t pushed = 0, dup = 0, dropped = 0, missed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Reading& r = readings_[i];
    std::uint32_t flags = r.flags;
    if (have_last_) {
      if (by_seq_ ? r.source_seq <= last_seq_ : r.source_ts <= last_ts_) {
        ++dup;
        continue;
      }
      if (by_seq_ && r.source_seq > last_seq_ + 1) {
        missed += r.source_seq - last_seq_ - 1;
        flags |= kFlagSourceGap;
      }
    }
    have_last_ = true;
    last_seq_ = r.source_seq;
    last_ts_ = r.source_ts;
    Sample s;
    s.host_ns = t1;
    s.host_poll_begin_ns = t0;
    s.source_ts = r.source_ts;
    s.source_seq = r.source_seq;
    s.seq = next_seq_++;
    std::memcpy(s.power_w, r.power_w, sizeof(s.power_w));
    s.flags = flags;
    s.window_ns = r.window_ns;
    if (ring_.try_push(s)) {
      ++pushed;
    } else {
      ++dropped;
    }
  }
  if (pushed) bump(samples_, pushed);
  if (dup) bump(duplicates_, dup);
  if (dropped) bump(drops_, dropped);
  if (missed) bump(source_missed_, missed);
  return true;
}

void Sampler::run() noexcept {
  thread_start_ns_.store(host_now_ns(), std::memory_order_relaxed);
  clockid_t cid;
  if (pthread_getcpuclockid(pthread_self(), &cid) == 0) {
    cpu_clock_id_.store(static_cast<int>(cid), std::memory_order_relaxed);
    cpu_clock_valid_.store(true, std::memory_order_release);
  }
#ifdef PR_SET_TIMERSLACK
  // The default 50 us timer slack would dominate jitter at 10 kHz.
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  bool ok = true;
  if (config_.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(config_.cpu, &set);
    const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc != 0) {
      fail("cpu=" + std::to_string(config_.cpu) + ": pinning the sampler thread failed: " + std::strerror(rc));
      ok = false;
    }
  }
  const std::int64_t period = config_.period_ns;
  std::int64_t deadline = host_now_ns();
  while (ok && !stop_requested_.load(std::memory_order_acquire)) {
    wait_until(deadline);
    if (stop_requested_.load(std::memory_order_acquire)) break;
    ok = poll_once(deadline);
    deadline += period;
    const std::int64_t now = host_now_ns();
    if (now >= deadline) {
      // Late by at least a whole period: skip the missed slots instead of
      // bursting to catch up, and count them.
      const std::int64_t missed = (now - deadline) / period + 1;
      bump(deadline_misses_, static_cast<std::uint64_t>(missed));
      deadline += missed * period;
    }
  }
  // One last poll so the readings produced up to the stop are kept, unless the
  // source just failed.
  if (ok && error().empty()) (void)poll_once(-1);
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
    cpu_final_ns_.store(static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec,
                        std::memory_order_relaxed);
  }
  thread_end_ns_.store(host_now_ns(), std::memory_order_relaxed);
  finished_.store(true, std::memory_order_release);
  // The thread owns the source while it runs; hand it back as it ends, so a
  // sampler that stopped on its own (an error) does not keep it locked.
  source_->release();
  state_.store(kStopped, std::memory_order_release);
}

}  // namespace fingrav
