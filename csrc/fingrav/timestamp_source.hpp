// The interface every device timestamp source implements (the simulated
// device's clock, AMD's GPU counter, NVIDIA's %globaltimer): one read of the
// device clock from the host. Clock sync brackets each read between two host
// clock reads; see clock_sync.hpp.
#pragma once

#include <cstdint>
#include <string>

namespace fingrav {

// One bracketed read: the device clock value read between two host clock
// reads (CLOCK_MONOTONIC_RAW ns). The device sampled its clock somewhere in
// [host_before, host_after]; where exactly is the asymmetry no calibration
// can see.
struct Bracket {
  std::int64_t host_before;
  std::int64_t device_ticks;
  std::int64_t host_after;
};
static_assert(sizeof(Bracket) == 24);

struct TimestampInfo {
  std::string name;
  std::string clock_domain;    // e.g. "sim-device", "amd-gpu-counter", "nvidia-globaltimer"
  double nominal_tick_ns = 1;  // nominal length of a tick (the fit measures the real one)
};

class TimestampSource {
 public:
  virtual ~TimestampSource() = default;
  virtual const TimestampInfo& timestamp_info() const noexcept = 0;
  // One device clock read; blocks for the read's latency. Thread-compatible:
  // one caller at a time.
  virtual std::int64_t read_device_ticks() = 0;
};

}  // namespace fingrav
