// Deterministic random numbers for the simulator: xoshiro256** seeded through
// splitmix64. Each subsystem of the simulated device draws from its own
// stream, so changing how often one subsystem draws never perturbs another
// (a longer clock-read burst must not change kernel jitter).
#pragma once

#include <cmath>
#include <cstdint>

namespace fingrav {

inline std::uint64_t splitmix64(std::uint64_t& x) noexcept {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  Rng() : Rng(0) {}
  // stream distinguishes independent generators made from one seed.
  explicit Rng(std::uint64_t seed, std::uint64_t stream = 0) noexcept {
    std::uint64_t x = seed ^ (0xD1B54A32D192ED03ULL * (stream + 1));
    for (auto& w : s_) w = splitmix64(x);
  }

  std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1).
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }
  // Exponential with the given mean.
  double exponential(double mean) noexcept { return -mean * std::log1p(-uniform()); }
  // Standard normal (Box-Muller; the spare is dropped to keep streams simple).
  double normal() noexcept {
    double u1 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double normal(double mean, double sd) noexcept { return mean + sd * normal(); }
  bool bernoulli(double p) noexcept { return uniform() < p; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace fingrav
