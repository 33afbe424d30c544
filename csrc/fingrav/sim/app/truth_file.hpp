// The simulated application's truth, written beside the shared device file
// as `<device file>.truth/`: executions.npy, kernels.npy, energy.npy and
// meta.json (read by fingrav_native.sim.SharedSimGPU.truth()). The folder
// is written under a temporary name and renamed, so a reader sees all of it
// or none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fingrav/sim/device.hpp"

namespace fingrav::sim::app {

// One execution as the device ran it (host time, CLOCK_MONOTONIC_RAW).
struct TruthExec {
  char kernel[64];
  std::int32_t kernel_id;
  std::int32_t run;
  std::int64_t start_ns;
  std::int64_t end_ns;
  double energy_j;
  double mean_total_w;
  double mean_compute_w;
  double mean_io_w;
  double mean_memory_w;
};
static_assert(sizeof(TruthExec) == 128);

// Cumulative exact energy of the total power from the first segment folded
// in, sampled every `step_ns` of host time (linear interpolation between
// samples errs by at most the power's change within one step).
class EnergyGrid {
 public:
  EnergyGrid(std::int64_t step_ns, double tau_power_ns, double vr_loss, double other_w)
      : step_(step_ns), tau_(tau_power_ns), vr_(vr_loss), other_(other_w) {}
  // Segments must be contiguous and in order across calls.
  void fold(const std::vector<TruthSegment>& segs);
  const std::vector<std::int64_t>& times() const { return t_; }
  const std::vector<double>& energy_j() const { return e_; }

 private:
  double integral(const TruthSegment& s, std::int64_t a, std::int64_t b) const;
  std::int64_t step_;
  double tau_, vr_, other_;
  std::int64_t next_ = INT64_MIN;
  double cum_j_ = 0;
  std::vector<std::int64_t> t_;
  std::vector<double> e_;
};

struct TruthMeta {
  std::string workload;
  std::string vendor;
  std::uint64_t seed = 0;
  std::int64_t attach_ns = 0;
  std::int64_t detach_ns = 0;
  std::uint64_t dispatched = 0;
  std::uint64_t dispatch_errors = 0;
  std::uint64_t logs_published = 0;
  int signal = 0;  // the signal that ended the run, 0 for none
};

// Writes `<device_path>.truth/`; throws std::runtime_error naming the path.
void write_truth(const std::string& device_path, const std::vector<TruthExec>& execs, const EnergyGrid& grid,
                 const TruthMeta& meta);

}  // namespace fingrav::sim::app
