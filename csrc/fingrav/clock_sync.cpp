#include "fingrav/clock_sync.hpp"

#include <ctime>
#include <exception>
#include <stdexcept>

#include "fingrav/host_clock.hpp"

namespace fingrav {

void measure_brackets(TimestampSource& source, Bracket* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t before = host_now_ns();
    const std::int64_t ticks = source.read_device_ticks();
    const std::int64_t after = host_now_ns();
    out[i] = Bracket{before, ticks, after};
  }
}

ClockSyncRecorder::ClockSyncRecorder(std::shared_ptr<TimestampSource> source, const ClockSyncConfig& config)
    : source_(std::move(source)), config_(config), ring_([&] {
        // 2^26 brackets of 24 bytes (1.5 GiB): years of bursts at the
        // shortest interval; anything larger is a mistake.
        if (config.capacity < 16 || config.capacity > (std::size_t{1} << 26)) {
          throw std::invalid_argument("capacity=" + std::to_string(config.capacity) +
                                      ": must be a power of two in [16, 2^26 = 67108864] brackets");
        }
        return config.capacity;
      }()) {
  if (!source_) throw std::invalid_argument("source: must not be None");
  if (config.interval_ns < 1'000'000 || config.interval_ns > 3'600'000'000'000LL) {
    throw std::invalid_argument("interval_ns=" + std::to_string(config.interval_ns) +
                                ": must be in [1 ms, 1 h]");
  }
  if (config.burst < 1 || config.burst > 4096) {
    throw std::invalid_argument("burst=" + std::to_string(config.burst) + ": must be in [1, 4096]");
  }
  scratch_.resize(config.burst);
}

ClockSyncRecorder::~ClockSyncRecorder() { stop(); }

void ClockSyncRecorder::start() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (state_.load(std::memory_order_acquire) != 0) {
    throw std::logic_error("start(): this recorder was already started; a ClockSyncRecorder runs once");
  }
  state_.store(1, std::memory_order_release);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    state_.store(2, std::memory_order_release);
    throw;
  }
}

void ClockSyncRecorder::stop() noexcept {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (state_.load(std::memory_order_acquire) == 0) return;
  stop_requested_.store(true, std::memory_order_release);
  if (thread_.joinable()) {
    try {
      thread_.join();
    } catch (...) {
    }
  }
  state_.store(2, std::memory_order_release);
}

std::size_t ClockSyncRecorder::drain(Bracket* out, std::size_t max) {
  std::lock_guard<std::mutex> lock(consumer_mu_);
  return ring_.pop_into(out, max);
}

std::string ClockSyncRecorder::error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

ClockSyncStats ClockSyncRecorder::stats() const {
  ClockSyncStats s;
  s.bursts = bursts_.load(std::memory_order_relaxed);
  s.reads = reads_.load(std::memory_order_relaxed);
  s.drops = drops_.load(std::memory_order_relaxed);
  s.cpu_time_ns = cpu_final_.load(std::memory_order_relaxed);
  const std::int64_t t0 = t_start_.load(std::memory_order_relaxed);
  const std::int64_t t1 = t_end_.load(std::memory_order_relaxed);
  if (t0 >= 0) s.wall_time_ns = (t1 >= 0 ? t1 : host_now_ns()) - t0;
  return s;
}

bool ClockSyncRecorder::burst() noexcept {
  try {
    measure_brackets(*source_, scratch_.data(), scratch_.size());
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(error_mu_);
    error_ = std::string("timestamp source '") + source_->timestamp_info().name + "' failed: " + e.what();
    return false;
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    error_ = "timestamp source '" + source_->timestamp_info().name + "' threw a non-standard exception";
    return false;
  }
  std::uint64_t dropped = 0;
  for (const Bracket& b : scratch_) {
    if (!ring_.try_push(b)) ++dropped;
  }
  // Single writer: plain load + store.
  bursts_.store(bursts_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  reads_.store(reads_.load(std::memory_order_relaxed) + scratch_.size(), std::memory_order_relaxed);
  if (dropped) drops_.store(drops_.load(std::memory_order_relaxed) + dropped, std::memory_order_relaxed);
  return true;
}

void ClockSyncRecorder::run() noexcept {
  t_start_.store(host_now_ns(), std::memory_order_relaxed);
  bool ok = burst();
  std::int64_t next = host_now_ns() + config_.interval_ns;
  while (ok && !stop_requested_.load(std::memory_order_acquire)) {
    // Sliced sleeps keep stop() prompt at long intervals; precision does not
    // matter here (each bracket carries its own host times).
    const std::int64_t remaining = next - host_now_ns();
    if (remaining > 0) {
      const std::int64_t slice = remaining < 10'000'000 ? remaining : 10'000'000;
      timespec ts{static_cast<time_t>(slice / 1'000'000'000LL), static_cast<long>(slice % 1'000'000'000LL)};
      ::nanosleep(&ts, nullptr);
      continue;
    }
    ok = burst();
    next += config_.interval_ns;
  }
  if (ok) (void)burst();  // a last burst brackets the end of the campaign
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
    cpu_final_.store(static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec, std::memory_order_relaxed);
  }
  t_end_.store(host_now_ns(), std::memory_order_relaxed);
  state_.store(2, std::memory_order_release);
}

}  // namespace fingrav
