#include "fingrav/synthetic_source.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "fingrav/host_clock.hpp"

namespace fingrav {

namespace {
constexpr double kShare[kChannelCount] = {1.0, 0.6, 0.25, 0.15};
constexpr double kTwoPi = 6.283185307179586;
}  // namespace

SyntheticSource::SyntheticSource(const SyntheticConfig& cfg) : cfg_(cfg) {
  if (cfg.period_ns < 1'000) {
    throw std::invalid_argument("period_ns=" + std::to_string(cfg.period_ns) +
                                ": the synthetic source needs a period of at least 1000 ns");
  }
  if (cfg.depth < 1 || cfg.depth > kMaxReadingsPerPoll) {
    throw std::invalid_argument("depth=" + std::to_string(cfg.depth) + ": must be in [1, " +
                                std::to_string(kMaxReadingsPerPoll) + "]");
  }
  if (cfg.cycle < 1 || cfg.cycle > 1'000'000) {
    throw std::invalid_argument("cycle=" + std::to_string(cfg.cycle) + ": must be in [1, 1000000]");
  }
  if ((cfg.channel_mask & ~kAllChannels) != 0 || cfg.channel_mask == 0) {
    throw std::invalid_argument("channel_mask=" + std::to_string(cfg.channel_mask) +
                                ": must be a non-empty subset of the 4 channel bits (0..15)");
  }
  if (!std::isfinite(cfg.base_w) || !std::isfinite(cfg.amplitude_w)) {
    throw std::invalid_argument("base_w/amplitude_w: must be finite");
  }
  info_.name = "synthetic";
  info_.clock_domain = "synthetic-ns";
  info_.channel_mask = cfg.channel_mask;
  info_.native_period_ns = cfg.period_ns;
  info_.tick_ns = 1.0;
  info_.has_sequence = true;
  info_.window_ns = cfg.window_ns;
  table_.resize(static_cast<std::size_t>(cfg.cycle) * kChannelCount);
  for (std::int64_t k = 0; k < cfg.cycle; ++k) {
    const double total = cfg.base_w + cfg.amplitude_w * std::sin(kTwoPi * static_cast<double>(k) /
                                                                  static_cast<double>(cfg.cycle));
    for (int c = 0; c < kChannelCount; ++c) {
      table_[static_cast<std::size_t>(k) * kChannelCount + static_cast<std::size_t>(c)] =
          (cfg.channel_mask & (1u << c)) ? static_cast<float>(total * kShare[c])
                                         : std::numeric_limits<float>::quiet_NaN();
    }
  }
}

float SyntheticSource::value(std::uint64_t k, int channel) const noexcept {
  if (channel < 0 || channel >= kChannelCount) return std::numeric_limits<float>::quiet_NaN();
  const std::size_t row = static_cast<std::size_t>(k % static_cast<std::uint64_t>(cfg_.cycle));
  return table_[row * kChannelCount + static_cast<std::size_t>(channel)];
}

std::int64_t SyntheticSource::appear_host_ns(std::uint64_t k) const noexcept {
  const std::int64_t start = start_ns_.load(std::memory_order_acquire);
  if (start < 0) return -1;
  return start + static_cast<std::int64_t>(k) * cfg_.period_ns;
}

PollResult SyntheticSource::poll(Reading* out, std::size_t max) {
  // Only the polling thread writes; the atomics let other threads read.
  const std::uint64_t poll_no = polls_.load(std::memory_order_relaxed) + 1;
  polls_.store(poll_no, std::memory_order_relaxed);
  if (cfg_.fatal_error_at_poll != 0 && poll_no == cfg_.fatal_error_at_poll) {
    last_error_ = "synthetic source: injected fatal error at poll " + std::to_string(poll_no);
    return {0, PollStatus::kFatalError};
  }
  if (cfg_.transient_error_every != 0 && poll_no % cfg_.transient_error_every == 0) {
    last_error_ = "synthetic source: injected transient error at poll " + std::to_string(poll_no);
    return {0, PollStatus::kTransientError};
  }
  const std::int64_t now = host_now_ns();
  std::int64_t start = start_ns_.load(std::memory_order_relaxed);
  if (start < 0) {
    start = now;  // reading 0 appears at the first poll
    start_ns_.store(start, std::memory_order_release);
  }
  const std::uint64_t newest = static_cast<std::uint64_t>((now - start) / cfg_.period_ns);
  const std::uint64_t want = std::min<std::uint64_t>({cfg_.depth, newest + 1, max});
  const std::uint64_t oldest = newest + 1 - want;
  for (std::uint64_t i = 0; i < want; ++i) {
    const std::uint64_t k = oldest + i;
    Reading& r = out[i];
    r.source_ts = cfg_.ts_offset + static_cast<std::int64_t>(k) * cfg_.period_ns;
    r.source_seq = k;
    const float* row = &table_[static_cast<std::size_t>(k % static_cast<std::uint64_t>(cfg_.cycle)) * kChannelCount];
    for (int c = 0; c < kChannelCount; ++c) r.power_w[c] = row[c];
    r.flags = 0;
    r.window_ns = cfg_.window_ns;
  }
  return {static_cast<std::size_t>(want), PollStatus::kOk};
}

}  // namespace fingrav
