// A simulated device-side clock as seen from host time: a large offset, a rate
// (tick length), a constant skew of tens of ppm and a slow sinusoidal wander
// of the skew (temperature-driven crystal drift). The exact map both ways is
// the ground truth that clock-sync methods are scored against.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace fingrav::sim {

struct ClockParams {
  double tick_ns = 10.0;                  // 100 MHz, like AMD's GPU counter
  std::int64_t offset_ticks = 0;          // device ticks at host time epoch_ns
  double skew_ppm = 20.0;                 // device runs fast by this much
  double wander_ppm = 0.5;                // amplitude of the skew's slow wander
  double wander_period_ns = 90e9;         // period of that wander
  double wander_phase = 0.0;              // radians
};

class ClockModel {
 public:
  ClockModel() = default;
  ClockModel(const ClockParams& p, std::int64_t epoch_ns, const char* what) : p_(p), epoch_(epoch_ns) {
    const std::string w(what);
    if (!(p.tick_ns > 0) || !std::isfinite(p.tick_ns)) throw std::invalid_argument(w + "_tick_ns: must be > 0");
    if (!(std::fabs(p.skew_ppm) < 1000)) throw std::invalid_argument(w + "_skew_ppm: must be within +-1000 ppm");
    if (!(std::fabs(p.wander_ppm) < 1000)) throw std::invalid_argument(w + "_wander_ppm: must be within +-1000 ppm");
    if (!(p.wander_period_ns > 0)) throw std::invalid_argument(w + "_wander_period_ns: must be > 0");
  }

  // Device time elapsed since the epoch, in device ns (before dividing by the
  // tick), for a host time: integral of (1 + skew(t)) dt.
  double device_elapsed_ns(std::int64_t host_ns) const noexcept {
    const double dt = static_cast<double>(host_ns - epoch_);
    const double w = 2.0 * M_PI / p_.wander_period_ns;
    const double wander = p_.wander_ppm * 1e-6 / w * (std::cos(p_.wander_phase) - std::cos(w * dt + p_.wander_phase));
    return dt * (1.0 + p_.skew_ppm * 1e-6) + wander;
  }

  // Exact device ticks (fractional) at a host time. The offset is added in
  // integer arithmetic by callers that need exact integers (see ticks()).
  double ticks_fractional_since_offset(std::int64_t host_ns) const noexcept {
    return device_elapsed_ns(host_ns) / p_.tick_ns;
  }

  // The integer tick counter a read at host_ns returns (floor: a counter).
  std::int64_t ticks(std::int64_t host_ns) const noexcept {
    return p_.offset_ticks + static_cast<std::int64_t>(std::floor(ticks_fractional_since_offset(host_ns)));
  }

  // Instantaneous rate d(host)/d(tick) in ns per tick at a host time.
  double host_ns_per_tick(std::int64_t host_ns) const noexcept {
    const double dt = static_cast<double>(host_ns - epoch_);
    const double w = 2.0 * M_PI / p_.wander_period_ns;
    const double rate = 1.0 + p_.skew_ppm * 1e-6 + p_.wander_ppm * 1e-6 * std::sin(w * dt + p_.wander_phase);
    return p_.tick_ns / rate;
  }

  // Exact inverse: the host time (fractional ns) at which the device clock
  // reads `ticks` (which may be fractional). Newton iterations on a map whose
  // slope is within 1e-3 of constant converge to well under a picosecond.
  double host_at(double ticks) const noexcept {
    const double rel = ticks - static_cast<double>(p_.offset_ticks);
    double h = static_cast<double>(epoch_) + rel * p_.tick_ns / (1.0 + p_.skew_ppm * 1e-6);
    for (int i = 0; i < 4; ++i) {
      const auto hi = static_cast<std::int64_t>(std::floor(h));
      const double frac = h - static_cast<double>(hi);
      const double f = ticks_fractional_since_offset(hi) + frac / host_ns_per_tick(hi) - rel;
      h -= f * host_ns_per_tick(hi);
    }
    return h;
  }

  const ClockParams& params() const noexcept { return p_; }
  std::int64_t epoch_ns() const noexcept { return epoch_; }

 private:
  ClockParams p_{};
  std::int64_t epoch_ = 0;
};

}  // namespace fingrav::sim
