#include "fingrav/sim/kernels.hpp"

#include <cmath>
#include <stdexcept>

namespace fingrav::sim {

namespace {

void need(bool ok, const std::string& field, const std::string& what) {
  if (!ok) throw std::invalid_argument(field + ": " + what);
}

// Collective shape: latency-bound collectives are mostly handshakes around a
// short transfer; bandwidth-bound ones stream through ring steps, with a
// short synchronisation dip between steps (7 steps for 8 GPUs).
std::vector<Segment> collective_shape(bool bandwidth_bound, double compute, double io, double memory) {
  std::vector<Segment> s;
  if (!bandwidth_bound) {
    s.push_back({0.35, compute * 0.6, io * 0.5, memory * 0.4});
    s.push_back({0.75, compute, io, memory});
    s.push_back({1.0, compute * 0.5, io * 0.4, memory * 0.3});
    return s;
  }
  const int steps = 7;
  for (int i = 0; i < steps; ++i) {
    const double a = static_cast<double>(i) / steps, b = static_cast<double>(i + 1) / steps;
    s.push_back({a + 0.93 * (b - a), compute, io, memory});
    s.push_back({b, compute * 0.4, io * 0.45, memory * 0.5});
  }
  s.back().end = 1.0;
  return s;
}

KernelSpec make(const std::string& name, const std::string& kind, double duration_us, double fs,
                std::vector<Segment> shape) {
  KernelSpec k;
  k.name = name;
  k.kind = kind;
  k.duration_ns = duration_us * 1e3;
  k.freq_sensitivity = fs;
  k.shape = std::move(shape);
  return k;
}

}  // namespace

void validate_kernel(const KernelSpec& k) {
  need(!k.name.empty(), "name", "must not be empty");
  need(std::isfinite(k.duration_ns) && k.duration_ns >= 1'000 && k.duration_ns <= 1e9, "duration_ns",
       "must be in [1 us, 1 s], got " + std::to_string(k.duration_ns));
  need(k.freq_sensitivity >= 0 && k.freq_sensitivity <= 1, "freq_sensitivity", "must be in [0, 1]");
  need(!k.shape.empty(), "shape", "needs at least one segment");
  double prev = 0;
  for (std::size_t i = 0; i < k.shape.size(); ++i) {
    const Segment& s = k.shape[i];
    const std::string at = "shape[" + std::to_string(i) + "]";
    need(s.end > prev && s.end <= 1.0, at + ".end", "segment ends must increase strictly within (0, 1]");
    need(s.compute >= 0 && s.compute <= 1.5 && s.io >= 0 && s.io <= 1.5 && s.memory >= 0 && s.memory <= 1.5, at,
         "activities must be in [0, 1.5]");
    prev = s.end;
  }
  need(k.shape.back().end == 1.0, "shape", "the last segment must end at progress 1.0");
  need(k.exec_cv >= 0 && k.exec_cv < 0.5, "exec_cv", "must be in [0, 0.5)");
  need(k.run_cv >= 0 && k.run_cv < 0.5, "run_cv", "must be in [0, 0.5)");
  need(k.outlier_prob >= 0 && k.outlier_prob <= 1, "outlier_prob", "must be in [0, 1]");
  need(k.outlier_factor >= 1 && k.outlier_factor <= 10, "outlier_factor", "must be in [1, 10]");
  need(k.cold_factor >= 0 && k.cold_factor <= 10, "cold_factor", "must be in [0, 10]");
  need(k.cold_decay >= 0 && k.cold_decay < 1, "cold_decay", "must be in [0, 1)");
  need(k.launch_gap_ns >= 0 && k.launch_gap_ns <= 1e8, "launch_gap_ns", "must be in [0, 100 ms]");
  need(k.slow_mode_prob >= 0 && k.slow_mode_prob <= 1, "slow_mode_prob", "must be in [0, 1]");
  need(k.slow_mode_min >= 1 && k.slow_mode_max >= k.slow_mode_min && k.slow_mode_max <= 3, "slow_mode_min/max",
       "need 1 <= slow_mode_min <= slow_mode_max <= 3");
}

std::vector<Segment> gemm_shape(double tiles, double cus, double compute, double io, double memory) {
  const double waves = tiles / cus;
  const double full = std::floor(waves);
  const double last_occ = waves - full;
  const double nslots = last_occ > 1e-9 ? full + 1 : full;
  std::vector<Segment> s;
  // Prologue: the first tiles' operands stream in before the math units fill.
  const double occ0 = nslots > 1 ? 1.0 : waves;
  s.push_back({0.03, compute * occ0 * 0.45, io * 1.4, memory * 1.4});
  if (nslots > 1) {
    const double tail_start = (nslots - 1) / nslots;
    s.push_back({tail_start, compute, io, memory});
    const double occ = last_occ > 1e-9 ? last_occ : 1.0;
    s.push_back({1.0, compute * occ, io * occ, memory * occ});
  } else {
    s.push_back({1.0, compute * waves, io * waves, memory * waves});
  }
  return s;
}

std::vector<KernelSpec> kernel_presets() {
  // 304 CUs (MI300X). Tiles of 128x128 outputs per workgroup. Durations are
  // the paper's ranges (Table I / Section V): rocBLAS-class GEMMs at ~500
  // TFLOP/s for 8K, the 2K GEMM at half the compute utilisation (Section
  // V-C2), GEMVs limited by on-chip bandwidth, collectives over xGMI.
  const double cus = 304;
  std::vector<KernelSpec> v;
  v.push_back(make("cb-8k-gemm", "gemm", 2300, 0.85, gemm_shape(4096, cus, 0.95, 0.40, 0.60)));
  v.push_back(make("cb-4k-gemm", "gemm", 330, 0.85, gemm_shape(1024, cus, 0.92, 0.38, 0.40)));
  // Compute-light: one partial wave (256 tiles on 304 CUs) whose time is
  // the K loop's operand loads from the Infinity Cache; its math (~15 us
  // per tile at f_max, ~25 us at the parked clock) hides under them, so
  // the clock barely changes its duration (only the prologue and epilogue
  // scale) while it still sets its power (Section V-C1: similar execution
  // times, very different power).
  v.push_back(make("cb-2k-gemm", "gemm", 70, 0.02, gemm_shape(256, cus, 0.70, 0.36, 0.40)));
  // GEMVs stream the matrix from the Infinity Cache (8K: 128 MB fits in
  // 256 MB) or L2: IO-die heavy, compute-light, memory-bound.
  v.push_back(make("mb-8k-gemv", "gemv", 60, 0.05, {{0.05, 0.05, 0.45, 0.25}, {0.95, 0.13, 0.80, 0.38}, {1.0, 0.06, 0.40, 0.20}}));
  v.push_back(make("mb-4k-gemv", "gemv", 32, 0.05, {{0.05, 0.05, 0.30, 0.20}, {0.95, 0.11, 0.52, 0.33}, {1.0, 0.05, 0.28, 0.18}}));
  v.push_back(make("mb-2k-gemv", "gemv", 26, 0.05, {{0.05, 0.04, 0.20, 0.18}, {0.95, 0.09, 0.36, 0.30}, {1.0, 0.04, 0.20, 0.16}}));
  for (auto* k : {&v[3], &v[4], &v[5]}) k->cold_factor = 0.15;
  // Collectives on an 8-GPU node (Section V-D). Latency-bound sizes sit near
  // idle; bandwidth-bound sizes drive the IO die (xGMI) and HBM.
  v.push_back(make("allgather-64k", "collective", 28, 0.10, collective_shape(false, 0.05, 0.22, 0.08)));
  v.push_back(make("allgather-128k", "collective", 33, 0.10, collective_shape(false, 0.05, 0.25, 0.09)));
  v.push_back(make("allreduce-64k", "collective", 38, 0.12, collective_shape(false, 0.07, 0.24, 0.10)));
  v.push_back(make("allreduce-128k", "collective", 45, 0.12, collective_shape(false, 0.07, 0.27, 0.11)));
  v.push_back(make("allgather-512m", "collective", 1200, 0.05, collective_shape(true, 0.07, 0.85, 0.70)));
  v.push_back(make("allgather-1g", "collective", 2350, 0.05, collective_shape(true, 0.07, 0.88, 0.72)));
  v.push_back(make("allreduce-512m", "collective", 2450, 0.08, collective_shape(true, 0.16, 0.82, 0.75)));
  v.push_back(make("allreduce-1g", "collective", 4800, 0.08, collective_shape(true, 0.16, 0.85, 0.78)));
  for (std::size_t i = 6; i < v.size(); ++i) {
    v[i].cold_factor = 0.10;   // no kernel code/data to warm beyond the buffers
    v[i].slow_mode_prob = 0.2;
  }
  for (const auto& k : v) validate_kernel(k);
  return v;
}

}  // namespace fingrav::sim
