// The interface every power source implements: the simulated device, AMD
// gpu_metrics, NVML, and the synthetic test source. The sampler and everything
// above it see only this, plus the capabilities a source declares.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fingrav/sample.hpp"

namespace fingrav {

struct SourceInfo {
  std::string name;
  // Names the clock domain of Reading::source_ts (e.g. "synthetic",
  // "amd-pmfw-10ns", "nvml-host-us"), so logs from different domains are
  // never mixed without a clock map.
  std::string clock_domain;
  std::uint32_t channel_mask = kAllChannels;  // bit i: channel i is provided
  std::int64_t native_period_ns = 0;  // how often a new reading appears; 0 = unknown
  double tick_ns = 1.0;               // length of one source_ts tick in ns
  // Whether Reading::source_seq counts readings (then the sampler can detect
  // readings the source produced but nobody saw).
  bool has_sequence = false;
  std::uint32_t window_ns = 0;  // default averaging window of a reading; 0 = instantaneous
};

enum class PollStatus : std::uint8_t {
  kOk = 0,
  kTransientError = 1,  // counted as a read error; sampling continues
  kFatalError = 2,      // stops the sampler; stop() raises last_error()
};

struct PollResult {
  std::size_t count = 0;
  PollStatus status = PollStatus::kOk;
};

class PowerSource {
 public:
  // Enough for NVML's sample buffer between two polls at the slowest period.
  static constexpr std::size_t kMaxReadingsPerPoll = 128;

  PowerSource() = default;
  PowerSource(const PowerSource&) = delete;
  PowerSource& operator=(const PowerSource&) = delete;
  virtual ~PowerSource() = default;

  virtual const SourceInfo& info() const noexcept = 0;

  // Writes up to max readings, oldest first, into out. A source may return
  // readings it returned before (hardware buffers and "latest value" files do);
  // the sampler keeps only new ones by sequence or timestamp. Called from one
  // thread at a time (see try_acquire). May throw; the sampler treats an
  // exception as a fatal error.
  virtual PollResult poll(Reading* out, std::size_t max) = 0;

  // Why the last poll did not return kOk. Same thread as poll().
  virtual std::string last_error() const { return {}; }

  // Exclusive use: a source is polled by one sampler (or one direct caller)
  // at a time, so sources need no internal locking.
  bool try_acquire() noexcept { return !in_use_.exchange(true, std::memory_order_acq_rel); }
  void release() noexcept { in_use_.store(false, std::memory_order_release); }
  bool in_use() const noexcept { return in_use_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> in_use_{false};
};

}  // namespace fingrav
