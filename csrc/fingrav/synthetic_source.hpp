// A deterministic test source: reading k appears at host time start + k*period
// with a value that is a known function of k. Tests and the first demo use it
// to check that every reading arrives exactly once; it stands in for hardware
// loggers' two behaviours: a "latest value" file (depth 1, like gpu_metrics)
// and a buffer of recent readings (depth > 1, like NVML's sample buffer).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "fingrav/power_source.hpp"

namespace fingrav {

struct SyntheticConfig {
  std::int64_t period_ns = 1'000'000;  // a new reading every period
  std::uint32_t depth = 1;             // readings returned per poll: the newest `depth`
  std::uint32_t channel_mask = kAllChannels;
  double base_w = 300.0;               // waveform: base + amplitude * sin(2 pi k / cycle)
  double amplitude_w = 100.0;
  std::int64_t cycle = 50;             // readings per waveform cycle, <= 1'000'000
  std::int64_t ts_offset = 0;          // source_ts of reading 0, in ns ticks
  std::uint32_t window_ns = 0;         // declared averaging window
  // Fault injection for tests of the error paths: every Nth poll reports a
  // transient error (0 = never); poll number M reports a fatal one (0 = never).
  std::uint64_t transient_error_every = 0;
  std::uint64_t fatal_error_at_poll = 0;
};

class SyntheticSource final : public PowerSource {
 public:
  explicit SyntheticSource(const SyntheticConfig& cfg);

  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t max) override;
  std::string last_error() const override { return last_error_; }

  // The value of channel `channel` of reading k: the documented waveform
  // (total = base + amp * sin(2 pi k / cycle); compute, io, memory = 0.6, 0.25,
  // 0.15 of total; NaN for channels not in the mask).
  float value(std::uint64_t k, int channel) const noexcept;
  // Host time at which reading k appears (known once the first poll started
  // the clock); -1 before that.
  std::int64_t appear_host_ns(std::uint64_t k) const noexcept;
  const SyntheticConfig& config() const noexcept { return cfg_; }
  // Safe from any thread (the sampler thread writes these).
  std::uint64_t polls() const noexcept { return polls_.load(std::memory_order_relaxed); }

 private:
  SyntheticConfig cfg_;
  SourceInfo info_;
  std::vector<float> table_;    // one waveform cycle x 4 channels, so poll() does no trig
  std::atomic<std::int64_t> start_ns_{-1};  // host time of reading 0, set by the first poll
  std::atomic<std::uint64_t> polls_{0};
  std::string last_error_;
};

}  // namespace fingrav
