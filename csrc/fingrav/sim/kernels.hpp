// Simulated kernels: how long an execution takes, how that depends on the
// clock, how it varies, and how hard it drives each component over the
// course of one execution (its activity shape).
#pragma once

#include <string>
#include <vector>

namespace fingrav::sim {

// Activity of each component over one piece of an execution's progress
// (0 = idle, 1 = the component's full dynamic power at f_max). Progress is
// the fraction of the kernel's work done, not of its time, so a throttled
// kernel stretches its shape instead of cutting it.
struct Segment {
  double end = 1.0;  // this segment covers progress (previous end, end]
  double compute = 0;
  double io = 0;
  double memory = 0;
};

struct KernelSpec {
  std::string name;
  std::string kind = "custom";       // gemm | gemv | collective | custom
  double duration_ns = 100'000;       // warm, at f_max, typical run
  double freq_sensitivity = 0.8;      // share of the time that scales with 1/f
  std::vector<Segment> shape;         // ends strictly increasing, last == 1
  double exec_cv = 0.003;             // execution-to-execution jitter within a run
  double outlier_prob = 0.004;        // rare slow executions (preemption, ECC retry)
  double outlier_factor = 1.3;        // how much slower an outlier is, at most
  double cold_factor = 0.25;          // first execution from idle is this much slower
  double cold_decay = 0.25;           // ... and the excess shrinks by this per execution (0.4% left at the SSE, the 4th)
  double launch_gap_ns = 4'000;       // gap between back-to-back executions
  // Run-to-run variation: most runs land near the nominal time, some in a
  // slower mode (a different memory placement / allocation alignment, the
  // paper's Section III example), so binning matters.
  double run_cv = 0.004;
  double slow_mode_prob = 0.3;
  double slow_mode_min = 1.03;
  double slow_mode_max = 1.09;
};

// Throws std::invalid_argument naming the offending field.
void validate_kernel(const KernelSpec& k);

// The paper's cases (Section V-A): cb-{8k,4k,2k}-gemm, mb-{8k,4k,2k}-gemv,
// allgather-{64k,128k,512m,1g}, allreduce-{64k,128k,512m,1g}.
std::vector<KernelSpec> kernel_presets();

// A GEMM's activity shape from its tile count: a prologue that loads the
// first tiles, full waves, and a last partial wave at lower occupancy.
std::vector<Segment> gemm_shape(double tiles, double cus, double compute, double io, double memory);

}  // namespace fingrav::sim
