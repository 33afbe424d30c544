// The records that cross from the sampler thread to Python: one power reading
// as a source produced it (Reading) and as the sampler stored it (Sample).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace fingrav {

// Power channels, in the paper's component split (Section II-A): the whole
// package, the compute dies (XCDs / SMs), the IO die and cache, and HBM.
enum Channel : int { kTotal = 0, kCompute = 1, kIo = 2, kMemory = 3, kChannelCount = 4 };

inline constexpr std::uint32_t kAllChannels = (1u << kChannelCount) - 1u;

// Bits of Sample::flags / Reading::flags.
enum SampleFlag : std::uint32_t {
  // The source's sequence skipped readings before this one: the source
  // produced them, but nobody polled before they were overwritten.
  kFlagSourceGap = 1u << 0,
  // The value was derived (e.g. from energy-counter differences), not read.
  kFlagDerived = 1u << 1,
};

// One reading as a PowerSource reports it, in the source's own clock domain.
struct Reading {
  std::int64_t source_ts = 0;   // source clock ticks (SourceInfo::tick_ns each)
  std::uint64_t source_seq = 0;  // source's own counter, if SourceInfo::has_sequence
  float power_w[kChannelCount] = {};  // NaN where the source lacks a channel
  std::uint32_t flags = 0;
  // The value averages over [source_ts - window, source_ts]; 0 = instantaneous.
  std::uint32_t window_ns = 0;
};

// One reading as the sampler stored it: the reading plus where and when on the
// host timeline it was seen. Exactly one cache line, so a ring slot never
// straddles two and a numpy view has a round stride.
struct Sample {
  // Host time (CLOCK_MONOTONIC_RAW ns) right after the poll that returned it.
  // The reading was produced no later than this: the one-sided observation
  // the logger-clock fit uses.
  std::int64_t host_ns;
  // Host time right before that poll: with host_ns it brackets the read.
  std::int64_t host_poll_begin_ns;
  std::int64_t source_ts;
  std::uint64_t source_seq;
  // Sampler-assigned, 0, 1, 2, ... over every accepted reading, dropped ones
  // included, so a gap in a drained array is a ring overrun.
  std::uint64_t seq;
  float power_w[kChannelCount];
  std::uint32_t flags;
  std::uint32_t window_ns;
};

static_assert(std::is_trivially_copyable_v<Sample>, "Sample crosses threads by memcpy");
static_assert(std::is_standard_layout_v<Sample>, "Sample is viewed by numpy through offsets");
static_assert(sizeof(Sample) == 64, "Sample is one cache line");
static_assert(offsetof(Sample, host_ns) == 0);
static_assert(offsetof(Sample, host_poll_begin_ns) == 8);
static_assert(offsetof(Sample, source_ts) == 16);
static_assert(offsetof(Sample, source_seq) == 24);
static_assert(offsetof(Sample, seq) == 32);
static_assert(offsetof(Sample, power_w) == 40);
static_assert(offsetof(Sample, flags) == 56);
static_assert(offsetof(Sample, window_ns) == 60);
static_assert(std::is_trivially_copyable_v<Reading>);

}  // namespace fingrav
