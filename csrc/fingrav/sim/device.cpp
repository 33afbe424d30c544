#include "fingrav/sim/device.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

#include "fingrav/host_clock.hpp"

namespace fingrav::sim {

namespace {

constexpr std::int64_t kVirtualEpochNs = 1'000'000'000'000LL;  // virtual host time starts at 1000 s
constexpr std::int64_t kIdleStepNs = 200'000;

// x(t) under a first-order lag towards `target` with time constant tau:
// value after dt, and the integral over [0, dt].
inline void lag(double& x, double target, double dt, double tau, double& integral) {
  const double e = std::exp(-dt / tau);
  integral = target * dt + (x - target) * tau * (1.0 - e);
  x = target + (x - target) * e;
}

inline std::int64_t ceil_ns(double v) { return static_cast<std::int64_t>(std::ceil(v)); }

// Exact first-order filter (time constant tau) of an input that itself
// follows tg + (p0 - tg) exp(-t / taup), after dt from the output y0:
// y' = (P - y) / tau solved in closed form, so the filter's output does not
// depend on how the simulation steps.
inline double filter_after(double y0, double p0, double tg, double dt, double tau, double taup) {
  const double ey = std::exp(-dt / tau);
  double k;
  if (std::fabs(taup - tau) <= 1e-9 * tau) {
    k = dt / tau * ey;
  } else {
    k = taup / (taup - tau) * (std::exp(-dt / taup) - ey);
  }
  return tg + (y0 - tg) * ey + (p0 - tg) * k;
}

}  // namespace

// ------------------------------------------------------------------ parameters

const std::vector<ParamEntry>& param_table() {
  static const std::vector<ParamEntry> table = [] {
    std::vector<ParamEntry> t;
#define FINGRAV_PARAM(field, doc)                                                     \
  t.push_back({#field, doc, [](const SimParams& p) { return static_cast<double>(p.field); }, \
               [](SimParams& p, double v) { p.field = static_cast<decltype(p.field)>(v); }})
#define FINGRAV_CLOCK(prefix, member, doc)                                                              \
  t.push_back({std::string(prefix) + "_" #member, doc,                                                   \
               [](const SimParams& p) { return static_cast<double>(p.CLOCKFIELD.member); },              \
               [](SimParams& p, double v) { p.CLOCKFIELD.member = static_cast<decltype(p.CLOCKFIELD.member)>(v); }})
    FINGRAV_PARAM(seed, "seed of every random stream (runs are reproducible from it)");
    FINGRAV_PARAM(max_step_ns, "integration step bound while power or work changes, ns");
    FINGRAV_PARAM(record_truth, "1: keep the exact power trace for truth queries");
#define CLOCKFIELD device_clock
    FINGRAV_CLOCK("device", tick_ns, "device timestamp counter tick, ns (100 MHz like AMD's counter)");
    FINGRAV_CLOCK("device", offset_ticks, "device counter value at the host epoch (arbitrary, as on hardware)");
    FINGRAV_CLOCK("device", skew_ppm, "device clock rate error vs host, ppm (crystals: tens of ppm)");
    FINGRAV_CLOCK("device", wander_ppm, "amplitude of the slow wander of that skew, ppm (temperature)");
    FINGRAV_CLOCK("device", wander_period_ns, "period of the skew wander, ns");
    FINGRAV_CLOCK("device", wander_phase, "phase of the skew wander, radians");
#undef CLOCKFIELD
    FINGRAV_PARAM(read_rtt_ns, "minimum round trip of a host read of the device clock, ns (PCIe MMIO)");
    FINGRAV_PARAM(read_jitter_ns, "mean exponential excess of a read's round trip, ns");
    FINGRAV_PARAM(read_outlier_prob, "probability that a read is preempted or contended");
    FINGRAV_PARAM(read_outlier_ns, "mean extra delay of such an outlier read, ns");
    FINGRAV_PARAM(read_asymmetry, "share of the round trip before the device samples its clock (0.5 = symmetric; invisible to calibration)");
    FINGRAV_PARAM(logger_period_ns, "power logger period, ns (the paper's logger: 1 ms)");
    FINGRAV_PARAM(logger_window_ns, "0: instantaneous logs; else each log is the boxcar average of the window ending at its timestamp minus the delay, ns (may exceed the period: a sliding average, NVIDIA's 1 s power reading)");
    FINGRAV_PARAM(logger_tau_ns, "> 0: logs are a first-order filter of power with this time constant, ns (AMD's filtered socket power); exclusive with logger_window_ns");
    FINGRAV_PARAM(logger_delay_ns, "reporting delay: a log sampled at t describes the window ending at t - this, ns (firmware pipelines)");
    FINGRAV_PARAM(logger_gain, "reported power = offset + gain x true (sensor calibration error, a shunt's tolerance)");
    FINGRAV_PARAM(logger_offset_w, "reported power offset, W (sensor calibration error)");
    FINGRAV_PARAM(logger_noise_w, "standard deviation of Gaussian noise on each reported power, W (ADC noise), from the logger's own random stream");
    FINGRAV_PARAM(logger_quantum_w, "reported power is rounded to a multiple of this, W (register resolution; 0: none)");
    FINGRAV_PARAM(logger_counter, "1: an energy counter; each log is the counter's increase since the previous log over that interval (window_ns = the interval), as AMD's energy_accumulator differenced");
    FINGRAV_PARAM(logger_counter_quantum_j, "energy counter resolution, J (AMD MI300 energy_accumulator: 2^-16 J = 15.259 uJ; NVIDIA total energy: 1 mJ; 0: exact)");
    FINGRAV_PARAM(logger_jitter_ns, "firmware scheduling jitter of the logger's sampling instant, ns");
    FINGRAV_PARAM(logger_publish_ns, "delay from sampling to visibility for a host reader, ns");
    FINGRAV_PARAM(logger_publish_jitter_ns, "mean exponential jitter of that delay, ns");
    FINGRAV_PARAM(logger_own_clock, "1: logs are stamped with a separate firmware clock; 0: with the device clock");
#define CLOCKFIELD logger_clock
    FINGRAV_CLOCK("logger", tick_ns, "firmware clock tick, ns (AMD PMFW: 10 ns)");
    FINGRAV_CLOCK("logger", offset_ticks, "firmware clock value at the host epoch");
    FINGRAV_CLOCK("logger", skew_ppm, "firmware clock rate error vs host, ppm");
    FINGRAV_CLOCK("logger", wander_ppm, "amplitude of the firmware clock's skew wander, ppm");
    FINGRAV_CLOCK("logger", wander_period_ns, "period of that wander, ns");
    FINGRAV_CLOCK("logger", wander_phase, "phase of that wander, radians");
#undef CLOCKFIELD
    FINGRAV_PARAM(poll_period_ns, "period of the virtual poller that observes published logs, ns");
    FINGRAV_PARAM(poll_read_ns, "cost of one virtual poll (a sysfs read), ns");
    FINGRAV_PARAM(launch_latency_ns, "host launch call to first execution start, ns");
    FINGRAV_PARAM(launch_jitter_ns, "mean exponential jitter of the launch latency, ns");
    FINGRAV_PARAM(sync_latency_ns, "last execution end to the host seeing it, ns");
    FINGRAV_PARAM(sync_jitter_ns, "mean exponential jitter of the sync latency, ns");
    FINGRAV_PARAM(sync_poll_ns, "virtual time only: the host checks for completion every this many ns while it waits (0: it sees the device go idle at once, as a training loop's event-driven waits do)");
    FINGRAV_PARAM(marker_offset_ns, "GPU-side begin/end markers precede/follow the kernel by this, ns");
    FINGRAV_PARAM(marker_jitter_ns, "jitter of the GPU-side markers, ns");
    FINGRAV_PARAM(cap_w, "firmware power cap, W (MI300X TBP 750 W)");
    FINGRAV_PARAM(compute_idle_w, "compute dies' always-on power (clock tree), W");
    FINGRAV_PARAM(compute_leak_w, "compute dies' leakage at ambient temperature, W");
    FINGRAV_PARAM(leak_temp_scale_k, "leakage grows e-fold per this many kelvin");
    FINGRAV_PARAM(compute_dyn_w, "compute dynamic power at activity 1 and f_max, W");
    FINGRAV_PARAM(voltage_exponent, "dynamic power ~ f^this along the V/f curve");
    FINGRAV_PARAM(io_static_w, "IO die + Infinity Cache static power, W");
    FINGRAV_PARAM(io_dyn_w, "IO die dynamic power at activity 1, W");
    FINGRAV_PARAM(memory_static_w, "HBM static power (refresh, PHY), W");
    FINGRAV_PARAM(memory_dyn_w, "HBM dynamic power at activity 1, W");
    FINGRAV_PARAM(other_w, "rest of the board, W (in total, in no component)");
    FINGRAV_PARAM(vr_loss, "voltage-regulator loss as a share of component power (in total only)");
    FINGRAV_PARAM(tau_power_ns, "time constant of component power following activity, ns");
    FINGRAV_PARAM(r_fast_k_per_w, "compute dies' rise above the package per W of compute power, K/W");
    FINGRAV_PARAM(tau_fast_ns, "compute dies' thermal time constant (thin silicon on the package), ns");
    FINGRAV_PARAM(r_slow_k_per_w, "package/heat-sink thermal resistance, K/W");
    FINGRAV_PARAM(tau_slow_ns, "package/heat-sink thermal time constant, ns");
    FINGRAV_PARAM(fw_loop_ns, "firmware power-management loop period, ns");
    FINGRAV_PARAM(fw_jitter_ns, "scheduling jitter of each firmware loop tick, ns (uniform +-)");
    FINGRAV_PARAM(ppt_tau_ns, "averaging time constant of the power the cap is checked against, ns");
    FINGRAV_PARAM(fast_limit, "with the lagging average over the cap, a window above cap x this is cut with undershoot; between the cap and this, trimmed exactly");
    FINGRAV_PARAM(hard_limit, "a loop-average power above cap x this is cut at once, whatever the average");
    FINGRAV_PARAM(f_min, "lowest clock the firmware sets (f_max = 1)");
    FINGRAV_PARAM(f_park, "clock when work arrives after idle, and for compute-light work");
    FINGRAV_PARAM(boost_activity_lo, "compute activity below which clocks stay parked");
    FINGRAV_PARAM(boost_activity_hi, "compute activity above which the clock target is f_max");
    FINGRAV_PARAM(ramp_up_per_ms, "fastest clock climb per ms (DPM step rate)");
    FINGRAV_PARAM(ramp_partial_per_ms, "clock climb per ms towards a target below f_max (compute-light work sits near DPM's busy set point, so each evaluation raises one step); its execution time barely follows, its power does");
    FINGRAV_PARAM(ramp_gain, "clock climb per ms is at most this times the relative headroom under the cap");
    FINGRAV_PARAM(ramp_hold_per_ms, "clock climb per ms for hold_ns after a throttle (hysteresis against oscillation)");
    FINGRAV_PARAM(hold_ns, "how long that slow climb lasts after a throttle, ns");
    FINGRAV_PARAM(ramp_down_per_ms, "clock descent per ms towards a lower activity target");
    FINGRAV_PARAM(throttle_gain, "extra clock cut per unit of relative excess over the cap (undershoot)");
    FINGRAV_PARAM(park_after_ns, "idle this long and clocks park at f_park, ns");
    FINGRAV_PARAM(cold_reset_ns, "idle this long and the next execution runs cold again, ns");
#undef FINGRAV_PARAM
#undef FINGRAV_CLOCK
    return t;
  }();
  return table;
}

void validate_params(const SimParams& p) {
  auto need = [](bool ok, const char* name, const std::string& what) {
    if (!ok) throw std::invalid_argument(std::string(name) + ": " + what);
  };
  auto pos = [&](double v, const char* name) { need(std::isfinite(v) && v > 0, name, "must be > 0, got " + std::to_string(v)); };
  auto nonneg = [&](double v, const char* name) { need(std::isfinite(v) && v >= 0, name, "must be >= 0, got " + std::to_string(v)); };
  auto unit = [&](double v, const char* name) { need(v >= 0 && v <= 1, name, "must be in [0, 1], got " + std::to_string(v)); };
  need(p.max_step_ns >= 100 && p.max_step_ns <= 1e6, "max_step_ns", "must be in [100, 1e6]");
  (void)ClockModel(p.device_clock, 0, "device");
  (void)ClockModel(p.logger_clock, 0, "logger");
  pos(p.read_rtt_ns, "read_rtt_ns");
  nonneg(p.read_jitter_ns, "read_jitter_ns");
  unit(p.read_outlier_prob, "read_outlier_prob");
  nonneg(p.read_outlier_ns, "read_outlier_ns");
  unit(p.read_asymmetry, "read_asymmetry");
  need(p.logger_period_ns >= 10'000 && p.logger_period_ns <= 10e9, "logger_period_ns", "must be in [10 us, 10 s]");
  nonneg(p.logger_window_ns, "logger_window_ns");
  // A log's window_ns field is 32-bit; longer windows than that (4.29 s)
  // are not a sensor anyone ships.
  need(p.logger_window_ns <= 4e9, "logger_window_ns", "must be <= 4e9 (a log's window_ns is 32-bit), got " +
                                                          std::to_string(p.logger_window_ns));
  need(std::isfinite(p.logger_tau_ns) && p.logger_tau_ns >= 0 && p.logger_tau_ns <= 10e9, "logger_tau_ns",
       "must be in [0, 10 s], got " + std::to_string(p.logger_tau_ns));
  need(!(p.logger_tau_ns > 0 && p.logger_window_ns > 0), "logger_tau_ns",
       "a first-order filter and a boxcar window are exclusive: set logger_window_ns=0");
  need(std::isfinite(p.logger_delay_ns) && p.logger_delay_ns >= 0 && p.logger_delay_ns <= 10e9, "logger_delay_ns",
       "must be in [0, 10 s], got " + std::to_string(p.logger_delay_ns));
  pos(p.logger_gain, "logger_gain");
  need(std::isfinite(p.logger_offset_w), "logger_offset_w", "must be finite");
  nonneg(p.logger_noise_w, "logger_noise_w");
  nonneg(p.logger_quantum_w, "logger_quantum_w");
  nonneg(p.logger_counter_quantum_j, "logger_counter_quantum_j");
  if (p.logger_counter) {
    need(p.logger_window_ns == 0 && p.logger_tau_ns == 0, "logger_counter",
         "a counter's window is the interval between two logs: set logger_window_ns=0 and logger_tau_ns=0");
    need(p.logger_noise_w == 0 && p.logger_quantum_w == 0, "logger_counter",
         "a counter's error is its quantum (logger_counter_quantum_j): set logger_noise_w=0 and logger_quantum_w=0");
  }
  need(p.logger_jitter_ns >= 0 && p.logger_jitter_ns < p.logger_period_ns / 4, "logger_jitter_ns",
       "must be in [0, logger_period_ns / 4)");
  nonneg(p.logger_publish_ns, "logger_publish_ns");
  nonneg(p.logger_publish_jitter_ns, "logger_publish_jitter_ns");
  need(p.poll_period_ns >= 1'000, "poll_period_ns", "must be >= 1000");
  need(p.poll_read_ns >= 0 && p.poll_read_ns < p.poll_period_ns, "poll_read_ns", "must be in [0, poll_period_ns)");
  nonneg(p.launch_latency_ns, "launch_latency_ns");
  nonneg(p.launch_jitter_ns, "launch_jitter_ns");
  nonneg(p.sync_latency_ns, "sync_latency_ns");
  nonneg(p.sync_jitter_ns, "sync_jitter_ns");
  nonneg(p.sync_poll_ns, "sync_poll_ns");
  nonneg(p.marker_offset_ns, "marker_offset_ns");
  nonneg(p.marker_jitter_ns, "marker_jitter_ns");
  pos(p.cap_w, "cap_w");
  nonneg(p.compute_idle_w, "compute_idle_w");
  nonneg(p.compute_leak_w, "compute_leak_w");
  pos(p.leak_temp_scale_k, "leak_temp_scale_k");
  nonneg(p.compute_dyn_w, "compute_dyn_w");
  need(p.voltage_exponent >= 1 && p.voltage_exponent <= 4, "voltage_exponent", "must be in [1, 4]");
  nonneg(p.io_static_w, "io_static_w");
  nonneg(p.io_dyn_w, "io_dyn_w");
  nonneg(p.memory_static_w, "memory_static_w");
  nonneg(p.memory_dyn_w, "memory_dyn_w");
  nonneg(p.other_w, "other_w");
  need(p.vr_loss >= 0 && p.vr_loss < 0.5, "vr_loss", "must be in [0, 0.5)");
  pos(p.tau_power_ns, "tau_power_ns");
  nonneg(p.r_fast_k_per_w, "r_fast_k_per_w");
  pos(p.tau_fast_ns, "tau_fast_ns");
  nonneg(p.r_slow_k_per_w, "r_slow_k_per_w");
  pos(p.tau_slow_ns, "tau_slow_ns");
  need(p.fw_loop_ns >= 10'000 && p.fw_loop_ns <= 1e9, "fw_loop_ns", "must be in [10 us, 1 s]");
  pos(p.ppt_tau_ns, "ppt_tau_ns");
  need(p.fw_jitter_ns >= 0 && p.fw_jitter_ns < p.fw_loop_ns / 4, "fw_jitter_ns", "must be in [0, fw_loop_ns / 4)");
  need(p.fast_limit >= 1 && p.fast_limit <= 2, "fast_limit", "must be in [1, 2]");
  need(p.hard_limit >= p.fast_limit && p.hard_limit <= 3, "hard_limit", "must be in [fast_limit, 3]");
  need(p.f_min > 0 && p.f_min <= 1, "f_min", "must be in (0, 1]");
  need(p.f_park >= p.f_min && p.f_park <= 1, "f_park", "must be in [f_min, 1]");
  need(p.boost_activity_lo >= 0 && p.boost_activity_hi > p.boost_activity_lo, "boost_activity_lo/hi",
       "need 0 <= boost_activity_lo < boost_activity_hi");
  nonneg(p.ramp_up_per_ms, "ramp_up_per_ms");
  nonneg(p.ramp_gain, "ramp_gain");
  nonneg(p.ramp_down_per_ms, "ramp_down_per_ms");
  nonneg(p.ramp_hold_per_ms, "ramp_hold_per_ms");
  nonneg(p.ramp_partial_per_ms, "ramp_partial_per_ms");
  nonneg(p.hold_ns, "hold_ns");
  nonneg(p.throttle_gain, "throttle_gain");
  nonneg(p.park_after_ns, "park_after_ns");
  nonneg(p.cold_reset_ns, "cold_reset_ns");
}

// ------------------------------------------------------------------ device

SimDevice::SimDevice(const SimParams& params, bool realtime)
    : SimDevice(params, realtime, realtime ? host_now_ns() : kVirtualEpochNs) {}

SimDevice::SimDevice(const SimParams& params, bool realtime, std::int64_t clock_epoch_ns)
    : p_(params),
      realtime_(realtime),
      epoch_ns_(realtime ? host_now_ns() : kVirtualEpochNs),
      rng_kernel_(params.seed, 1),
      rng_run_(params.seed, 2),
      rng_log_(params.seed, 3),
      rng_launch_(params.seed, 4),
      rng_read_(params.seed, 5),
      rng_noise_(params.seed, 6) {
  validate_params(p_);
  device_clock_ = ClockModel(p_.device_clock, clock_epoch_ns, "device");
  logger_clock_ = ClockModel(p_.logger_clock, clock_epoch_ns, "logger");
  logger_own_ = p_.logger_own_clock;
  kernels_ = kernel_presets();
  t_ = epoch_ns_;
  f_ = p_.f_park;
  // Start in the idle steady state: iterate the leakage/temperature fixed
  // point so the first runs do not see an artificial warm-up of the board.
  pw_[1] = p_.io_static_w;
  pw_[2] = p_.memory_static_w;
  double temp = 0;
  for (int i = 0; i < 50; ++i) {
    pw_[0] = p_.compute_idle_w + p_.compute_leak_w * std::exp(temp / p_.leak_temp_scale_k);
    temp = p_.r_fast_k_per_w * pw_[0] + p_.r_slow_k_per_w * total_from(pw_);
  }
  ppt_w_ = total_from(pw_);
  for (int c = 0; c < 3; ++c) filt_[c] = pw_[c];  // a filter that has long seen idle
  counter_prev_t_ = t_;
  t_fast_ = p_.r_fast_k_per_w * pw_[0];
  t_slow_ = p_.r_slow_k_per_w * total_from(pw_);
  last_busy_ns_ = t_ - static_cast<std::int64_t>(p_.park_after_ns) - 1;
  last_end_ns_ = std::numeric_limits<std::int64_t>::min() / 2;
  // Random phases: the firmware loop, the logger and the poller free-run
  // with respect to each other and to kernel launches, as on hardware.
  next_fw_ns_ = t_ + ceil_ns(rng_log_.uniform(0, p_.fw_loop_ns));
  fw_window_start_ns_ = next_fw_ns_ - static_cast<std::int64_t>(p_.fw_loop_ns);
  next_log_ns_ = t_ + ceil_ns(rng_log_.uniform(0, p_.logger_period_ns));
  next_poll_phase_ns_ = t_ + ceil_ns(rng_log_.uniform(0, p_.poll_period_ns));
  log_acc_from_ = t_;
}

double SimDevice::total_from(const double c[3]) const {
  return (c[0] + c[1] + c[2]) * (1.0 + p_.vr_loss) + p_.other_w;
}

int SimDevice::add_kernel(const KernelSpec& k) {
  validate_kernel(k);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : kernels_) {
    if (e.name == k.name) throw std::invalid_argument("name: a kernel named '" + k.name + "' already exists");
  }
  kernels_.push_back(k);
  return static_cast<int>(kernels_.size() - 1);
}

int SimDevice::kernel_id(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    if (kernels_[i].name == name) return static_cast<int>(i);
  }
  std::string known;
  for (const auto& k : kernels_) known += (known.empty() ? "" : ", ") + k.name;
  throw std::invalid_argument("kernel: unknown kernel '" + name + "'; known: " + known);
}

std::vector<KernelSpec> SimDevice::kernels() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_;
}

std::int64_t SimDevice::now() {
  std::lock_guard<std::mutex> lock(mu_);
  if (realtime_) advance_locked(host_now_ns());
  return t_;
}

void SimDevice::advance(std::int64_t ns) {
  if (realtime_) throw std::logic_error("advance(): only in virtual time; a real-time device follows the host clock");
  if (ns < 0) throw std::invalid_argument("ns=" + std::to_string(ns) + ": must be >= 0");
  std::lock_guard<std::mutex> lock(mu_);
  advance_locked(t_ + ns);
}

void SimDevice::launch(int kernel, int count, int run) {
  if (count < 1 || count > kMaxPendingExecutions) {
    throw std::invalid_argument("count=" + std::to_string(count) + ": must be in [1, 2^20 = " +
                                std::to_string(kMaxPendingExecutions) +
                                "] executions per launch (each is queued, simulated and recorded); launch fewer");
  }
  if (run < 0) throw std::invalid_argument("run=" + std::to_string(run) + ": must be >= 0");
  std::lock_guard<std::mutex> lock(mu_);
  if (kernel < 0 || kernel >= static_cast<int>(kernels_.size())) {
    throw std::invalid_argument("kernel=" + std::to_string(kernel) + ": no such kernel id");
  }
  if (realtime_) advance_locked(host_now_ns());
  int next_index = 0;
  // Execution indices continue within a run across launches.
  for (auto it = queue_.rbegin(); it != queue_.rend(); ++it) {
    if (it->run == run) {
      next_index = it->index + 1;
      break;
    }
  }
  if (next_index == 0 && phase_ != Phase::kIdle && cur_.run == run) next_index = cur_.index + 1;
  if (next_index == 0) {
    for (auto it = execs_.rbegin(); it != execs_.rend(); ++it) {
      if (it->run == run) {
        next_index = it->index + 1;
        break;
      }
    }
  }
  // Checked before anything is drawn or queued, so a refused launch changes
  // nothing (a real-time device has only caught up with the host clock).
  if (queue_.size() + static_cast<std::size_t>(count) > static_cast<std::size_t>(kMaxPendingExecutions)) {
    throw std::invalid_argument("count=" + std::to_string(count) + ": " + std::to_string(queue_.size()) +
                                " executions are still queued, and at most 2^20 = " +
                                std::to_string(kMaxPendingExecutions) +
                                " may wait at once; synchronize() before launching more");
  }
  if (next_index > INT32_MAX - count) {
    throw std::invalid_argument("count=" + std::to_string(count) + ": run " + std::to_string(run) +
                                " would pass 2^31 - 1 executions (indices are int32); start a new run");
  }
  const std::int64_t start =
      t_ + ceil_ns(p_.launch_latency_ns + rng_launch_.exponential(p_.launch_jitter_ns));
  for (int i = 0; i < count; ++i) {
    queue_.push_back({kernel, run, next_index + i, t_, start, i == count - 1});
  }
  if (phase_ == Phase::kIdle) {
    cur_ = queue_.front();
    queue_.pop_front();
    phase_ = Phase::kGap;
    gap_end_ = cur_.earliest_start_ns;
  }
}

bool SimDevice::busy() {
  std::lock_guard<std::mutex> lock(mu_);
  if (realtime_) advance_locked(host_now_ns());
  return phase_ != Phase::kIdle || !queue_.empty();
}

std::int64_t SimDevice::sync_time_locked() {
  // The host sees completion a sync latency after the last execution ends.
  return last_sync_ns_ >= 0 ? last_sync_ns_ : t_;
}

std::int64_t SimDevice::synchronize() {
  if (!realtime_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (p_.sync_poll_ns > 0) {
      // A host that checks every sync_poll_ns (the campaigns' harness).
      const auto poll = static_cast<std::int64_t>(p_.sync_poll_ns);
      while (phase_ != Phase::kIdle || !queue_.empty()) advance_locked(t_ + poll);
    } else {
      // Event by event, so the wait ends when the device goes idle (the
      // host then sees it a sync latency later): a loop of short kernels
      // with host gaps keeps its real timing.
      while (phase_ != Phase::kIdle || !queue_.empty()) {
        step(std::min(next_event_time(), t_ + 1'000'000));
        on_boundary();
      }
    }
    const std::int64_t seen = std::max(sync_time_locked(), t_);
    advance_locked(seen);
    return seen;
  }
  for (;;) {
    std::int64_t seen = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      advance_locked(host_now_ns());
      if (phase_ == Phase::kIdle && queue_.empty()) seen = sync_time_locked();
    }
    if (seen >= 0) {
      while (host_now_ns() < seen) cpu_relax();
      return std::max(seen, host_now_ns());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

fingrav::Bracket SimDevice::read_clock() {
  double rtt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rtt = p_.read_rtt_ns + rng_read_.exponential(p_.read_jitter_ns);
    if (rng_read_.bernoulli(p_.read_outlier_prob)) rtt += rng_read_.exponential(p_.read_outlier_ns);
  }
  const double before_sample = p_.read_asymmetry * rtt;
  if (!realtime_) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::int64_t hb = t_;
    const std::int64_t ticks = device_clock_.ticks(hb + static_cast<std::int64_t>(std::llround(before_sample)));
    const std::int64_t ha = hb + ceil_ns(rtt);
    advance_locked(ha);
    return {hb, ticks, ha};
  }
  // Real time: the read really takes its round trip; the device samples its
  // clock part-way through.
  const std::int64_t hb = host_now_ns();
  const std::int64_t at = hb + static_cast<std::int64_t>(std::llround(before_sample));
  while (host_now_ns() < at) cpu_relax();
  const std::int64_t ticks = device_clock_.ticks(host_now_ns());
  const std::int64_t done = hb + ceil_ns(rtt);
  while (host_now_ns() < done) cpu_relax();
  return {hb, ticks, host_now_ns()};
}

std::int64_t SimDevice::logger_ticks_at(std::int64_t host_ns) const { return logger_clock().ticks(host_ns); }
double SimDevice::host_at_logger_ticks(double ticks) const { return logger_clock().host_at(ticks); }

double SimDevice::current_freq() {
  std::lock_guard<std::mutex> lock(mu_);
  if (realtime_) advance_locked(host_now_ns());
  return f_;
}

double SimDevice::current_temp_rise_k() {
  std::lock_guard<std::mutex> lock(mu_);
  if (realtime_) advance_locked(host_now_ns());
  return t_fast_ + t_slow_;
}

// ------------------------------------------------------------------ stepping

void SimDevice::current_activity(double a[3]) const {
  a[0] = a[1] = a[2] = 0;
  if (phase_ != Phase::kRunning) return;
  const Segment& s = kernels_[static_cast<std::size_t>(cur_.kernel)].shape[seg_];
  a[0] = s.compute;
  a[1] = s.io;
  a[2] = s.memory;
}

double SimDevice::exec_rate() const {
  const KernelSpec& k = kernels_[static_cast<std::size_t>(cur_.kernel)];
  const double fs = k.freq_sensitivity;
  return 1.0 / (k.duration_ns * cur_factor_ * (fs / f_ + (1.0 - fs)));
}

std::int64_t SimDevice::next_event_time() const {
  const bool idle = phase_ == Phase::kIdle && queue_.empty();
  std::int64_t t = t_ + (idle ? kIdleStepNs : static_cast<std::int64_t>(p_.max_step_ns));
  t = std::min(t, next_fw_ns_);
  t = std::min(t, next_log_ns_);
  if (!logger_general() && p_.logger_window_ns > 0 && !log_acc_on_) {
    t = std::min(t, std::max(t_ + 1, next_log_ns_ - static_cast<std::int64_t>(p_.logger_window_ns)));
  }
  if (phase_ == Phase::kGap) t = std::min(t, std::max(gap_end_, t_ + 1));
  if (phase_ == Phase::kRunning) {
    const double seg_end = kernels_[static_cast<std::size_t>(cur_.kernel)].shape[seg_].end;
    const double dt = (seg_end - progress_) / exec_rate();
    t = std::min(t, t_ + std::max<std::int64_t>(1, ceil_ns(dt)));
  }
  return std::max(t, t_ + 1);
}

void SimDevice::step(std::int64_t t1) {
  const double dt = static_cast<double>(t1 - t_);
  double a[3];
  current_activity(a);
  const double temp = t_fast_ + t_slow_;
  double target[3];
  target[0] = p_.compute_idle_w + p_.compute_leak_w * std::exp(temp / p_.leak_temp_scale_k) +
              a[0] * p_.compute_dyn_w * std::pow(f_, p_.voltage_exponent);
  target[1] = p_.io_static_w + a[1] * p_.io_dyn_w;
  target[2] = p_.memory_static_w + a[2] * p_.memory_dyn_w;
  if (p_.record_truth) {
    truth_.push_back({t_, t1,
                      {static_cast<float>(pw_[0]), static_cast<float>(pw_[1]), static_cast<float>(pw_[2])},
                      {static_cast<float>(target[0]), static_cast<float>(target[1]), static_cast<float>(target[2])}});
  }
  const bool general = logger_general();
  if (general) {
    HistSeg h{};
    h.t0 = t_;
    h.t1 = t1;
    for (int c = 0; c < 3; ++c) {
      h.p0[c] = pw_[c];
      h.tg[c] = target[c];
      h.y0[c] = filt_[c];
    }
    for (int c = 0; c < 4; ++c) h.cum0[c] = cum_e_[c];
    hist_.push_back(h);
    if (p_.logger_tau_ns > 0) {
      for (int c = 0; c < 3; ++c) filt_[c] = filter_after(filt_[c], pw_[c], target[c], dt, p_.logger_tau_ns, p_.tau_power_ns);
    }
  }
  double integ[3];
  for (int c = 0; c < 3; ++c) lag(pw_[c], target[c], dt, p_.tau_power_ns, integ[c]);
  const double e_comp = integ[0] + integ[1] + integ[2];
  const double e_total = e_comp * (1.0 + p_.vr_loss) + p_.other_w * dt;  // W*ns
  if (general) {
    cum_e_[0] += e_total;
    for (int c = 0; c < 3; ++c) cum_e_[c + 1] += integ[c];
  }
  fw_energy_ += e_total;
  fw_activity_ += a[0] * dt;
  if (phase_ != Phase::kIdle) fw_busy_time_ += dt;
  if (phase_ != Phase::kIdle) fw_busy_ = true;
  if (log_acc_on_) {
    log_acc_[0] += e_total;
    for (int c = 0; c < 3; ++c) log_acc_[c + 1] += integ[c];
  }
  if (phase_ == Phase::kRunning) {
    cur_energy_[0] += e_total;
    for (int c = 0; c < 3; ++c) cur_energy_[c + 1] += integ[c];
    cur_freq_time_ += f_ * dt;
    progress_ += exec_rate() * dt;
  }
  // Thermal nodes driven by the step's mean power (steps are far shorter
  // than the thermal time constants): the compute dies heat above the
  // package by their own power (an IO-heavy collective barely warms them),
  // the package and heat sink by the whole board's.
  double unused;
  lag(t_fast_, p_.r_fast_k_per_w * integ[0] / dt, dt, p_.tau_fast_ns, unused);
  lag(t_slow_, p_.r_slow_k_per_w * e_total / dt, dt, p_.tau_slow_ns, unused);
  t_ = t1;
}

void SimDevice::start_exec(const Pending& pe) {
  const KernelSpec& k = kernels_[static_cast<std::size_t>(pe.kernel)];
  if (pe.kernel == last_kernel_ && (t_ - last_end_ns_) < static_cast<std::int64_t>(p_.cold_reset_ns)) {
    ++warm_count_;
  } else {
    warm_count_ = 0;
  }
  if (pe.run != run_factor_run_ || pe.kernel != run_factor_kernel_) {
    run_factor_run_ = pe.run;
    run_factor_kernel_ = pe.kernel;
    run_factor_ = rng_run_.bernoulli(k.slow_mode_prob) ? rng_run_.uniform(k.slow_mode_min, k.slow_mode_max)
                                                       : std::max(0.5, 1.0 + rng_run_.normal(0, k.run_cv));
  }
  double factor = run_factor_ * std::max(0.5, 1.0 + rng_kernel_.normal(0, k.exec_cv));
  if (rng_kernel_.bernoulli(k.outlier_prob)) {
    factor *= rng_kernel_.uniform(1.0 + 0.3 * (k.outlier_factor - 1.0), k.outlier_factor);
  }
  factor *= 1.0 + k.cold_factor * std::pow(k.cold_decay, warm_count_);
  cur_factor_ = factor;
  phase_ = Phase::kRunning;
  progress_ = 0;
  seg_ = 0;
  for (double& e : cur_energy_) e = 0;
  cur_freq_time_ = 0;
  cur_rec_ = ExecRecord{};
  cur_rec_.run = pe.run;
  cur_rec_.index = pe.index;
  cur_rec_.kernel_id = pe.kernel;
  cur_rec_.warm_index = warm_count_;
  cur_rec_.start_ns = t_;
  const double moff = p_.marker_offset_ns + std::fabs(rng_launch_.normal(0, p_.marker_jitter_ns));
  // Markers are written in stream order: a begin marker never precedes the
  // previous execution's end marker, however short the gap.
  cur_rec_.begin_marker_ticks = std::max(device_clock_.ticks(t_ - static_cast<std::int64_t>(std::llround(moff))),
                                         last_end_marker_ticks_ + 1);
  cur_rec_.host_launch_ns = pe.host_launch_ns;
  cur_rec_.host_sync_ns = -1;
  cur_rec_.duration_factor = factor;
}

void SimDevice::finish_exec() {
  const double dur = static_cast<double>(t_ - cur_rec_.start_ns);
  cur_rec_.end_ns = t_;
  const double moff = p_.marker_offset_ns + std::fabs(rng_launch_.normal(0, p_.marker_jitter_ns));
  cur_rec_.end_marker_ticks = device_clock_.ticks(t_ + static_cast<std::int64_t>(std::llround(moff)));
  last_end_marker_ticks_ = cur_rec_.end_marker_ticks;
  cur_rec_.energy_j = cur_energy_[0] * 1e-9;
  for (int c = 0; c < 4; ++c) cur_rec_.mean_power_w[c] = dur > 0 ? cur_energy_[c] / dur : 0;
  cur_rec_.mean_freq = dur > 0 ? cur_freq_time_ / dur : f_;
  if (cur_.last_of_launch) {
    cur_rec_.host_sync_ns = t_ + ceil_ns(p_.sync_latency_ns + rng_launch_.exponential(p_.sync_jitter_ns));
    last_sync_ns_ = cur_rec_.host_sync_ns;
  }
  execs_.push_back(cur_rec_);
  last_end_ns_ = t_;
  last_kernel_ = cur_.kernel;
  if (!queue_.empty()) {
    const KernelSpec& next = kernels_[static_cast<std::size_t>(queue_.front().kernel)];
    cur_ = queue_.front();
    queue_.pop_front();
    phase_ = Phase::kGap;
    const double gap = next.launch_gap_ns * std::max(0.5, 1.0 + 0.2 * rng_launch_.normal());
    gap_end_ = std::max(cur_.earliest_start_ns, t_ + ceil_ns(gap));
  } else {
    phase_ = Phase::kIdle;
  }
}

void SimDevice::firmware_tick() {
  // The window actually elapsed since the last tick (ticks are jittered).
  const double loop = static_cast<double>(std::max<std::int64_t>(1, t_ - fw_window_start_ns_));
  fw_window_start_ns_ = t_;
  const double p_loop = fw_energy_ / loop;
  ppt_w_ += (p_loop - ppt_w_) * (1.0 - std::exp(-loop / p_.ppt_tau_ns));
  // Activity while busy (DPM looks at how hard the engines work when they
  // work), so the first window of a run is not diluted by the idle before it.
  const double activity = fw_busy_time_ > 0 ? fw_activity_ / fw_busy_time_ : 0.0;
  int throttled = 0;
  if (p_loop > p_.cap_w * p_.hard_limit || (ppt_w_ > p_.cap_w && p_loop > p_.cap_w * p_.fast_limit)) {
    // Protective cut: once the lagging average crosses the cap while the
    // last window is well over it (or at once past the hard limit), cut to
    // where the cap would hold if all power scaled with the clock, and
    // further the more the window was over it: a sharp rise is followed by
    // an undershoot.
    const double cut = std::pow(p_.cap_w / p_loop, 1.0 / p_.voltage_exponent) *
                       (1.0 - p_.throttle_gain * (p_loop / p_.cap_w - 1.0));
    f_ = std::max(p_.f_min, f_ * cut);
    hold_until_ = t_ + static_cast<std::int64_t>(p_.hold_ns);
    throttled = 1;
  } else if (ppt_w_ > p_.cap_w && p_loop > p_.cap_w) {
    // Gentle trim (slow PPT): just enough to bring the window to the cap.
    f_ = std::max(p_.f_min, f_ * std::pow(p_.cap_w / p_loop, 1.0 / p_.voltage_exponent));
    hold_until_ = std::max(hold_until_, t_ + static_cast<std::int64_t>(p_.hold_ns));
    throttled = 1;
  } else if (fw_busy_) {
    const double x = std::clamp((activity - p_.boost_activity_lo) / (p_.boost_activity_hi - p_.boost_activity_lo), 0.0, 1.0);
    const double target = p_.f_park + (1.0 - p_.f_park) * x;
    const double ms = loop / 1e6;
    if (f_ < target) {
      // Climb in proportion to the headroom the lagging average shows: fast
      // from idle (the average still remembers idle), slow near the cap.
      // After a throttle, climb only slowly for a while (hysteresis).
      const double headroom = std::max(0.0, (p_.cap_w - ppt_w_) / p_.cap_w);
      double rate = std::min(p_.ramp_up_per_ms, p_.ramp_gain * headroom);
      // Compute-light work (a partial target) climbs a DPM step per loop:
      // its activity hovers near the busy set point. A busy compute kernel
      // goes to f_max at once, so its execution time settles in its
      // warm-up executions.
      if (x < 1.0) rate = std::min(rate, p_.ramp_partial_per_ms);
      if (t_ < hold_until_) rate = std::min(rate, p_.ramp_hold_per_ms);
      f_ = std::min(target, f_ + rate * ms);
    } else if (f_ > target) {
      f_ = std::max(target, f_ - p_.ramp_down_per_ms * ms);
    }
  }
  if (fw_busy_) {
    last_busy_ns_ = t_;
  } else if (t_ - last_busy_ns_ >= static_cast<std::int64_t>(p_.park_after_ns)) {
    f_ = p_.f_park;
    hold_until_ = -1;
  }
  fw_.push_back({t_, p_loop, ppt_w_, activity, f_, t_fast_ + t_slow_, throttled});
  fw_energy_ = 0;
  fw_activity_ = 0;
  fw_busy_time_ = 0;
  fw_busy_ = phase_ != Phase::kIdle;
  // The firmware task is scheduled with jitter, so its phase random-walks
  // against the (separately scheduled) logger instead of staying locked to it.
  next_fw_ns_ += static_cast<std::int64_t>(p_.fw_loop_ns) +
                 (p_.fw_jitter_ns > 0 ? ceil_ns(rng_log_.uniform(-p_.fw_jitter_ns, p_.fw_jitter_ns)) : 0);
  next_fw_ns_ = std::max(next_fw_ns_, t_ + 1);
}

bool SimDevice::logger_general() const noexcept {
  // The single accumulator below serves the original logger (instant, or a
  // boxcar no longer than the period, no delay); everything else reads the
  // exact history. Calibration, noise and quantum apply to both.
  return p_.logger_counter || p_.logger_tau_ns > 0 || p_.logger_delay_ns > 0 ||
         p_.logger_window_ns > p_.logger_period_ns;
}

void SimDevice::logger_history_at(std::int64_t x, double energy[4], double inst[4], double filtered[4]) const {
  double pw[3], y[3], e[4];
  const HistSeg* seg = nullptr;
  if (!hist_.empty() && x < t_) {
    const auto it = std::upper_bound(hist_.begin(), hist_.end(), x,
                                     [](std::int64_t v, const HistSeg& h) { return v < h.t0; });
    seg = it == hist_.begin() ? &hist_.front() : &*(it - 1);
    x = std::max(x, seg->t0);
  }
  if (seg == nullptr) {
    for (int c = 0; c < 3; ++c) {
      pw[c] = pw_[c];
      y[c] = filt_[c];
    }
    for (int c = 0; c < 4; ++c) e[c] = cum_e_[c];
  } else {
    // Inside one step every component is an exact exponential: integrate
    // and filter it in closed form up to x.
    const double dx = static_cast<double>(x - seg->t0);
    const double taup = p_.tau_power_ns;
    const double ex = std::exp(-dx / taup);
    double comp = 0;
    for (int c = 0; c < 3; ++c) {
      pw[c] = seg->tg[c] + (seg->p0[c] - seg->tg[c]) * ex;
      const double integ = seg->tg[c] * dx + (seg->p0[c] - seg->tg[c]) * taup * (1.0 - ex);
      e[c + 1] = seg->cum0[c + 1] + integ;
      comp += integ;
      y[c] = p_.logger_tau_ns > 0 ? filter_after(seg->y0[c], seg->p0[c], seg->tg[c], dx, p_.logger_tau_ns, taup) : 0.0;
    }
    e[0] = seg->cum0[0] + comp * (1.0 + p_.vr_loss) + p_.other_w * dx;
  }
  for (int c = 0; c < 4; ++c) energy[c] = e[c];
  inst[0] = total_from(pw);
  filtered[0] = total_from(y);  // the filter is linear with unit DC gain: the constant rails pass through
  for (int c = 0; c < 3; ++c) {
    inst[c + 1] = pw[c];
    filtered[c + 1] = y[c];
  }
}

double SimDevice::logger_calibrate(double true_w) {
  double v = p_.logger_offset_w + p_.logger_gain * true_w;
  // Only drawn when noise is asked for, from its own stream, so a noiseless
  // logger leaves every other stream (and the existing results) unchanged.
  if (p_.logger_noise_w > 0) v += rng_noise_.normal(0, p_.logger_noise_w);
  if (p_.logger_quantum_w > 0) v = std::round(v / p_.logger_quantum_w) * p_.logger_quantum_w;
  return v;
}

void SimDevice::logger_tick() {
  LogRecord r{};
  r.sample_ns = t_;
  const bool calibrate = p_.logger_gain != 1.0 || p_.logger_offset_w != 0.0 || p_.logger_noise_w > 0 ||
                         p_.logger_quantum_w > 0;
  if (logger_general()) {
    const std::int64_t earliest = hist_.empty() ? t_ : hist_.front().t0;
    const std::int64_t x = std::max(t_ - static_cast<std::int64_t>(std::llround(p_.logger_delay_ns)), earliest);
    double e1[4], inst[4], filt[4];
    logger_history_at(x, e1, inst, filt);
    double v[4];
    if (p_.logger_counter) {
      // The counter's reading at x, in joules and quantised (it counts whole
      // steps); the log is its increase over the interval since the
      // previous read: an exact window average up to one quantum.
      const double q = p_.logger_counter_quantum_j;
      const std::int64_t dt = x - counter_prev_t_;
      for (int c = 0; c < 4; ++c) {
        double cj = (p_.logger_gain * e1[c] + p_.logger_offset_w * static_cast<double>(x - epoch_ns_)) * 1e-9;
        if (q > 0) cj = std::floor(cj / q) * q;
        v[c] = dt > 0 ? (cj - counter_prev_[c]) / (static_cast<double>(dt) * 1e-9) : 0.0;
        counter_prev_[c] = cj;
      }
      r.window_ns = static_cast<std::uint32_t>(std::max<std::int64_t>(dt, 0));
      counter_prev_t_ = x;
    } else if (p_.logger_window_ns > 0) {
      const std::int64_t x0 = std::max(x - static_cast<std::int64_t>(std::llround(p_.logger_window_ns)), earliest);
      double e0[4], unused_i[4], unused_f[4];
      logger_history_at(x0, e0, unused_i, unused_f);
      const double w = static_cast<double>(x - x0);
      for (int c = 0; c < 4; ++c) v[c] = w > 0 ? (e1[c] - e0[c]) / w : inst[c];
      r.window_ns = static_cast<std::uint32_t>(x - x0);
    } else if (p_.logger_tau_ns > 0) {
      for (int c = 0; c < 4; ++c) v[c] = filt[c];
      r.window_ns = 0;
    } else {
      for (int c = 0; c < 4; ++c) v[c] = inst[c];
      r.window_ns = 0;
    }
    for (int c = 0; c < 4; ++c) {
      r.power_w[c] = static_cast<float>(calibrate && !p_.logger_counter ? logger_calibrate(v[c]) : v[c]);
    }
  } else if (p_.logger_window_ns > 0) {
    const double w = static_cast<double>(t_ - log_acc_from_);
    for (int c = 0; c < 4; ++c) r.power_w[c] = static_cast<float>(w > 0 ? log_acc_[c] / w : 0.0);
    r.window_ns = static_cast<std::uint32_t>(t_ - log_acc_from_);
  } else {
    r.power_w[0] = static_cast<float>(total_from(pw_));
    for (int c = 0; c < 3; ++c) r.power_w[c + 1] = static_cast<float>(pw_[c]);
    r.window_ns = 0;
  }
  if (calibrate && !logger_general()) {
    for (int c = 0; c < 4; ++c) r.power_w[c] = static_cast<float>(logger_calibrate(static_cast<double>(r.power_w[c])));
  }
  std::int64_t publish = t_ + ceil_ns(p_.logger_publish_ns + rng_log_.exponential(p_.logger_publish_jitter_ns));
  // The firmware publishes in order.
  if (!logs_.empty()) publish = std::max(publish, logs_.back().publish_ns);
  r.publish_ns = publish;
  r.logger_ticks = logger_clock().ticks(t_);
  if (log_origin_ns_ < 0) log_origin_ns_ = t_;
  r.seq = log_seq_++;
  logs_.push_back(r);
  log_acc_on_ = false;
  for (double& a : log_acc_) a = 0;
  schedule_next_log();
  if (logger_general()) {
    // Keep the history back to the oldest instant the next log can reach
    // (its sampling time is already drawn); later logs reach later still.
    const std::int64_t keep = next_log_ns_ - static_cast<std::int64_t>(std::llround(p_.logger_delay_ns)) -
                              static_cast<std::int64_t>(std::llround(p_.logger_window_ns)) - 1;
    while (hist_.size() > 1 && hist_.front().t1 < keep) hist_.pop_front();
  }
}

void SimDevice::schedule_next_log() {
  // Nominal grid plus scheduling jitter; the grid itself never drifts.
  // Anchored to the first log, not to the records (which clear_records()
  // trims), so the period never changes.
  const double nominal = static_cast<double>(log_origin_ns_) + static_cast<double>(log_seq_) * p_.logger_period_ns;
  const double jitter = p_.logger_jitter_ns > 0 ? rng_log_.uniform(-p_.logger_jitter_ns, p_.logger_jitter_ns) : 0.0;
  next_log_ns_ = std::max(t_ + 1, ceil_ns(nominal + jitter));
}

void SimDevice::on_boundary() {
  if (phase_ == Phase::kRunning) {
    const auto& shape = kernels_[static_cast<std::size_t>(cur_.kernel)].shape;
    // Tolerance for the ns rounding of event times.
    while (seg_ < shape.size() && progress_ >= shape[seg_].end - 1e-9) ++seg_;
    if (seg_ >= shape.size()) finish_exec();
  }
  if (phase_ == Phase::kGap && t_ >= gap_end_) start_exec(cur_);
  if (t_ >= next_fw_ns_) firmware_tick();
  if (!logger_general() && p_.logger_window_ns > 0 && !log_acc_on_ &&
      t_ >= next_log_ns_ - static_cast<std::int64_t>(p_.logger_window_ns)) {
    log_acc_on_ = true;
    log_acc_from_ = t_;
    for (double& a : log_acc_) a = 0;
  }
  if (t_ >= next_log_ns_) logger_tick();
}

void SimDevice::advance_locked(std::int64_t t_target) {
  while (t_ < t_target) {
    const std::int64_t t1 = std::min(next_event_time(), t_target);
    step(t1);
    on_boundary();
  }
}

// ------------------------------------------------------------------ records

void SimDevice::truth_power(const std::int64_t* t, std::size_t n, float* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!p_.record_truth) throw std::logic_error("truth_power(): this device was made with record_truth=0");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < n; ++i) {
    float* o = out + 4 * i;
    const auto it = std::upper_bound(truth_.begin(), truth_.end(), t[i],
                                     [](std::int64_t v, const TruthSegment& s) { return v < s.t0; });
    if (it == truth_.begin() || t[i] >= (it - 1)->t1) {
      // The instant the state reached, if asked exactly at the current time.
      if (t[i] == t_) {
        o[0] = static_cast<float>(total_from(pw_));
        for (int c = 0; c < 3; ++c) o[c + 1] = static_cast<float>(pw_[c]);
      } else {
        o[0] = o[1] = o[2] = o[3] = nan;
      }
      continue;
    }
    const TruthSegment& s = *(it - 1);
    const double e = std::exp(-static_cast<double>(t[i] - s.t0) / p_.tau_power_ns);
    double c[3];
    for (int k = 0; k < 3; ++k) c[k] = s.target[k] + (s.p0[k] - s.target[k]) * e;
    o[0] = static_cast<float>(total_from(c));
    for (int k = 0; k < 3; ++k) o[k + 1] = static_cast<float>(c[k]);
  }
}

std::vector<ExecRecord> SimDevice::executions(std::size_t first) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first >= execs_.size()) return {};
  return std::vector<ExecRecord>(execs_.begin() + static_cast<std::ptrdiff_t>(first), execs_.end());
}
std::size_t SimDevice::execution_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return execs_.size();
}

std::vector<LogRecord> SimDevice::logs() {
  std::lock_guard<std::mutex> lock(mu_);
  return logs_;
}
std::vector<FirmwareRecord> SimDevice::firmware() {
  std::lock_guard<std::mutex> lock(mu_);
  return fw_;
}
std::vector<TruthSegment> SimDevice::truth_segments() {
  std::lock_guard<std::mutex> lock(mu_);
  return truth_;
}

std::vector<Sample> SimDevice::observed_samples(std::int64_t from_publish_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Sample> out;
  const auto period = static_cast<std::int64_t>(p_.poll_period_ns);
  const auto read = static_cast<std::int64_t>(p_.poll_read_ns);
  // Publication times are monotonic (the firmware publishes in order).
  const auto first = std::lower_bound(logs_.begin(), logs_.end(), from_publish_ns,
                                      [](const LogRecord& r, std::int64_t v) { return r.publish_ns < v; });
  out.reserve(static_cast<std::size_t>(logs_.end() - first));
  for (auto it = first; it != logs_.end(); ++it) {
    const LogRecord& r = *it;
    // The first poll that starts after the log is published sees it.
    const std::int64_t k = (r.publish_ns - next_poll_phase_ns_ + period - 1) / period;
    const std::int64_t begin = next_poll_phase_ns_ + std::max<std::int64_t>(k, 0) * period;
    if (begin + read > t_) break;  // not observed yet
    Sample s{};
    s.host_poll_begin_ns = begin;
    s.host_ns = begin + read;
    s.source_ts = r.logger_ticks;
    s.source_seq = r.seq;
    s.seq = r.seq;
    for (int c = 0; c < 4; ++c) s.power_w[c] = r.power_w[c];
    s.flags = 0;
    s.window_ns = r.window_ns;
    out.push_back(s);
  }
  return out;
}

std::size_t SimDevice::published_logs(std::int64_t t, LogRecord* out, std::size_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  if (realtime_) advance_locked(std::max(t, t_));
  const auto end = std::upper_bound(logs_.begin(), logs_.end(), t,
                                    [](std::int64_t v, const LogRecord& r) { return v < r.publish_ns; });
  const auto n = static_cast<std::size_t>(std::min<std::ptrdiff_t>(end - logs_.begin(), static_cast<std::ptrdiff_t>(max)));
  std::copy(end - static_cast<std::ptrdiff_t>(n), end, out);
  return n;
}

void SimDevice::clear_records() {
  std::lock_guard<std::mutex> lock(mu_);
  execs_.clear();
  fw_.clear();
  truth_.clear();
  // Logs are kept: their sequence numbers and the published-log view
  // depend on them. Drop all but the newest few hundred.
  if (logs_.size() > 256) logs_.erase(logs_.begin(), logs_.end() - 256);
}

// ------------------------------------------------------------------ adapters

SourceInfo sim_source_info(const SimParams& p) {
  SourceInfo info;
  info.name = "sim";
  info.clock_domain = p.logger_own_clock ? "sim-logger" : "sim-device";
  info.channel_mask = kAllChannels;
  info.native_period_ns = static_cast<std::int64_t>(p.logger_period_ns);
  info.tick_ns = p.logger_own_clock ? p.logger_clock.tick_ns : p.device_clock.tick_ns;
  info.has_sequence = true;
  // A counter's logs are windows of one period (each carries its own).
  info.window_ns = static_cast<std::uint32_t>(p.logger_counter ? p.logger_period_ns : p.logger_window_ns);
  return info;
}

SimPowerSource::SimPowerSource(std::shared_ptr<SimDevice> device, std::uint32_t depth)
    : dev_(std::move(device)), depth_(depth) {
  if (!dev_) throw std::invalid_argument("device: must not be None");
  if (depth < 1 || depth > kMaxReadingsPerPoll) {
    throw std::invalid_argument("depth=" + std::to_string(depth) + ": must be in [1, " +
                                std::to_string(kMaxReadingsPerPoll) + "]");
  }
  if (!dev_->realtime()) {
    throw std::invalid_argument("device: a sampler polls live, so the device must be in real time (realtime=True)");
  }
  info_ = sim_source_info(dev_->params());
  buf_.resize(kMaxReadingsPerPoll);
}

PollResult SimPowerSource::poll(Reading* out, std::size_t max) {
  const std::size_t want = std::min<std::size_t>(depth_, max);
  const std::size_t n = dev_->published_logs(host_now_ns(), buf_.data(), want);
  for (std::size_t i = 0; i < n; ++i) to_reading(buf_[i], out[i]);
  return {n, PollStatus::kOk};
}

SimTimestampSource::SimTimestampSource(std::shared_ptr<SimDevice> device) : dev_(std::move(device)) {
  if (!dev_) throw std::invalid_argument("device: must not be None");
  if (!dev_->realtime()) {
    // Brackets pair device reads with the real host clock; a virtual device's
    // clock follows virtual time. Virtual reads come with their own brackets.
    throw std::invalid_argument(
        "device: bracketed reads against the host clock need a real-time device (realtime=True); "
        "in virtual time use SimGPU.read_clocks()");
  }
  info_.name = "sim";
  info_.clock_domain = "sim-device";
  info_.nominal_tick_ns = dev_->params().device_clock.tick_ns;
}

}  // namespace fingrav::sim
