// The simulated GPU: an MI300X-class device that behaves the way the FinGraV
// paper's observations depend on (Sections III and V), and that knows the
// ground truth of everything it did, so every method can be scored.
//
// Model, per component (compute dies, IO die + cache, HBM):
//   target power = static + activity(progress) x dynamic max (x (f/fmax)^2.5
//   for compute, the V/f curve), plus compute leakage that grows
//   exponentially with die temperature; actual power follows the target
//   through a first-order lag (voltage regulators, on-package decoupling).
//   Die temperature is two thermal RC nodes: the compute dies above the
//   package, heated by compute power within milliseconds, and the package,
//   heated by the whole board over hundreds. So power creeps up at a
//   constant clock for tens of executions (the paper's SSE -> SSP).
//   A firmware loop every ~1 ms sets the clock: the target follows compute
//   activity (activity-based DPM: busy compute kernels are boosted to f_max
//   at the first tick with work, compute-light ones part way a step per
//   tick, memory-bound and communication kernels stay parked); the climb is
//   fast while a lagging power average (slow PPT) shows headroom, so a heavy
//   kernel overshoots the cap; once that average crosses the cap, a window
//   well over it is cut with an undershoot, and for a while afterwards
//   clocks climb back only slowly (hysteresis). Small excesses are trimmed
//   exactly.
//   Kernels progress through their work at a rate set by the clock and their
//   frequency sensitivity; execution time varies by run (allocation modes),
//   by execution (jitter, rare outliers) and is longer for the first
//   executions from idle.
//   A power logger samples instantaneous (or window-averaged) power every
//   period, stamped in its own clock, and publishes after a short delay.
//   It can be any of the real sensors (a sensor is part of the
//   measurement): a boxcar window longer than its period (a sliding
//   average, NVIDIA's 1 s power), a first-order filter, a reporting delay,
//   gain/offset, noise and a value quantum, or an energy counter whose
//   consecutive reads are exact window averages (AMD energy_accumulator).
//
// Time: virtual (deterministic, advances only through calls) or real (the
// device follows CLOCK_MONOTONIC_RAW; every call advances it to now).
// Integration is exact for the linear parts (piecewise-constant inputs over
// steps no longer than max_step_ns), so the result barely depends on how
// often it is queried.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fingrav/power_source.hpp"
#include "fingrav/rng.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/sim/clock_model.hpp"
#include "fingrav/sim/kernels.hpp"
#include "fingrav/timestamp_source.hpp"

namespace fingrav::sim {

struct SimParams {
  std::uint64_t seed = 0;
  double max_step_ns = 20'000;          // integration step bound while anything changes
  bool record_truth = true;             // keep the exact power trace (piecewise exponentials)

  // Device clock (GPU timestamp counter). Offset is arbitrary, as on hardware.
  ClockParams device_clock{10.0, 4'611'686'018'427LL, 20.0, 0.5, 90e9, 0.7};
  // Reading it from the host (a PCIe/MMIO round trip).
  double read_rtt_ns = 2'000;           // minimum round trip
  double read_jitter_ns = 300;          // mean of the exponential excess
  double read_outlier_prob = 0.002;     // preempted / contended read
  double read_outlier_ns = 50'000;      // mean extra delay of an outlier
  double read_asymmetry = 0.5;          // share of the round trip before the device samples

  // Power logger.
  double logger_period_ns = 1'000'000;  // 1 ms, like the paper's logger
  double logger_window_ns = 0;          // 0: instantaneous; else a boxcar average of (t - delay - window, t - delay]
  double logger_tau_ns = 0;             // > 0: a first-order filter with this time constant instead of a boxcar
  double logger_delay_ns = 0;           // a log sampled at t describes the window ending at t - delay
  double logger_gain = 1;               // reported = offset + gain * true (sensor calibration error)
  double logger_offset_w = 0;
  double logger_noise_w = 0;            // Gaussian noise on each reported power, W (own RNG stream)
  double logger_quantum_w = 0;          // reported power rounded to this, W (0: no rounding)
  bool logger_counter = false;          // an energy counter: each log = quantised energy since the previous log / interval
  double logger_counter_quantum_j = 0;  // counter resolution, J (AMD energy_accumulator: 2^-16 J)
  double logger_jitter_ns = 2'000;      // firmware scheduling jitter of the sampling instant
  double logger_publish_ns = 20'000;    // sampling -> visible to the host (firmware copy)
  double logger_publish_jitter_ns = 5'000;
  bool logger_own_clock = false;        // false: stamped with the device clock
  ClockParams logger_clock{10.0, 987'654'321'000LL, -35.0, 0.3, 70e9, 2.1};  // PMFW-like 10 ns ticks

  // Virtual poller: how a sampler thread would have observed the logs in
  // virtual time (first poll after publication).
  double poll_period_ns = 97'000;       // not a divisor of the logger period: a real poller's phase drifts against it
  double poll_read_ns = 3'000;          // cost of one poll (sysfs read)

  // Launch path.
  double launch_latency_ns = 8'000;     // host launch call -> first execution starts
  double launch_jitter_ns = 1'500;
  double sync_latency_ns = 12'000;      // last execution ends -> host sees it
  double sync_jitter_ns = 3'000;
  double sync_poll_ns = 1'000'000;
  double marker_offset_ns = 500;        // GPU-side begin/end markers bracket the kernel by this
  double marker_jitter_ns = 100;

  // Power (watts). The paper reports relative power only; these absolute
  // figures are plausible for a 750 W MI300X-class board, not measured.
  double cap_w = 750;                   // firmware power cap (board TBP)
  double compute_idle_w = 30;           // XCD clock tree, always on
  double compute_leak_w = 40;           // XCD leakage at ambient temperature
  double leak_temp_scale_k = 25;        // leakage grows e-fold per this many kelvin (doubles per ~17 K)
  double compute_dyn_w = 410;           // all XCDs at activity 1 and f_max: CB-4K's SSP stays under the cap, CB-8K's does not
  double voltage_exponent = 2.5;        // dynamic power ~ f^2.5 along the V/f curve
  double io_static_w = 60;
  double io_dyn_w = 170;
  double memory_static_w = 40;
  double memory_dyn_w = 120;
  double other_w = 20;                  // board, fans' share, misc rails
  double vr_loss = 0.03;                // regulator loss, share of component power
  double tau_power_ns = 15'000;         // component power lag

  // Thermal: two RC nodes, kelvin above ambient. The compute dies (thin
  // silicon on the package) heat by their own power within milliseconds;
  // their leakage then creeps up at a constant clock over the executions
  // after the clock has settled: the paper's SSE -> SSP rise (Section V-C1).
  // A kernel whose SSE comes late in that rise (CB-8K, ~2.5 ms executions)
  // shows little of it; a short one (CB-2K, ~70 us) most of it.
  double r_fast_k_per_w = 0.05;         // per W of compute power
  double tau_fast_ns = 1.3e6;
  double r_slow_k_per_w = 0.03;         // per W of total power
  double tau_slow_ns = 200e6;           // package and heat sink

  // Firmware power management (normalised clock, f_max = 1). Clock targets
  // follow compute activity (activity-based DPM): a busy compute kernel is
  // boosted to f_max, a compute-light one only part way, and memory-bound or
  // communication kernels stay at the parked clock. A busy compute kernel
  // reaches f_max at the first loop tick with work (~1 ms), so its
  // execution time settles within its warm-up executions (the paper's SSE:
  // after ~3 warm-ups, time no longer falls); compute-light work climbs a
  // step per tick, which changes its power, not its time. The power cap is checked
  // against a lagging average (PPT), so a sharp rise overshoots it before the
  // firmware cuts, and the cut undershoots: only the heaviest kernel
  // (CB-8K) gets there.
  double fw_loop_ns = 1'000'000;
  double fw_jitter_ns = 100'000;        // loop tick scheduling jitter (uniform +-)
  double ppt_tau_ns = 3e6;              // averaging time constant of the cap check
  double fast_limit = 1.05;             // over the cap on average: cut with undershoot above this, trim below
  double hard_limit = 1.25;             // a window above cap x this is cut at once
  double f_min = 0.4;
  double f_park = 0.6;                  // clock when work arrives after idle
  double boost_activity_lo = 0.35;      // compute activity below which clocks stay parked
  double boost_activity_hi = 0.7;       // ... and above which the target is f_max (CB-4K with its tail wave)
  double ramp_up_per_ms = 0.5;          // fastest clock climb: park to f_max within one loop
  double ramp_partial_per_ms = 0.09;    // climb towards a partial (compute-light) target, a DPM step per loop
  double ramp_gain = 1.0;               // climb <= ramp_gain x relative headroom (per ms)
  double ramp_hold_per_ms = 0.0015;     // slowest climb, for hold_ns after a throttle (hysteresis)
  double hold_ns = 30e6;
  double ramp_down_per_ms = 0.2;        // descent towards a lower activity target
  double throttle_gain = 0.5;           // extra clock cut per unit of relative excess (undershoot)
  double park_after_ns = 3e6;           // idle this long -> clocks park
  double cold_reset_ns = 2e6;           // idle this long -> caches/TLBs cold again
};

// Names, docs and accessors of every numeric SimParams field, so Python can
// set them by name and list them with their defaults.
struct ParamEntry {
  std::string name;
  std::string doc;
  std::function<double(const SimParams&)> get;
  std::function<void(SimParams&, double)> set;
};
const std::vector<ParamEntry>& param_table();
// Throws std::invalid_argument naming the parameter.
void validate_params(const SimParams& p);

struct ExecRecord {
  std::int32_t run;
  std::int32_t index;        // execution index within the run
  std::int32_t kernel_id;
  std::int32_t warm_index;   // executions of this kernel since the device was cold / another kernel ran
  std::int64_t start_ns;     // true start, host time
  std::int64_t end_ns;       // true end, host time
  std::int64_t begin_marker_ticks;  // GPU-side markers in device clock ticks
  std::int64_t end_marker_ticks;
  std::int64_t host_launch_ns;      // host launch call that enqueued it
  std::int64_t host_sync_ns;        // host saw completion (last of a launch), else -1
  double energy_j;                  // true energy, total
  double mean_power_w[4];           // true mean power over the execution, per channel
  double mean_freq;                 // mean normalised clock
  double duration_factor;           // run x execution x outlier factor drawn
};

struct LogRecord {
  std::int64_t sample_ns;     // true host time of the sampling (the window ends logger_delay_ns before it)
  std::int64_t publish_ns;    // host time from which a read can see it
  std::int64_t logger_ticks;  // its timestamp, in the logger clock
  std::uint64_t seq;
  float power_w[4];
  std::uint32_t window_ns;
};

// A published log as the sampler reads it (both simulated power sources, in process and shared).
inline void to_reading(const LogRecord& r, Reading& out) noexcept {
  out.source_ts = r.logger_ticks;
  out.source_seq = r.seq;
  for (int c = 0; c < 4; ++c) out.power_w[c] = r.power_w[c];
  out.flags = 0;
  out.window_ns = r.window_ns;
}

struct FirmwareRecord {
  std::int64_t t_ns;
  double power_avg_w;  // what the loop measured over its last window
  double power_ppt_w;  // its lagging average, checked against the cap
  double activity;     // mean compute activity over the busy part of the window
  double freq;         // clock chosen for the next window
  double temp_k;       // die temperature above ambient
  std::int32_t throttled;
};

// One step of the exact trace: on [t0, t1) each component follows
// target + (p0 - target) * exp(-(t - t0) / tau_power).
struct TruthSegment {
  std::int64_t t0, t1;
  float p0[3];
  float target[3];
};

// Executions queued and not yet started, at most: each is simulated and
// keeps a record (sizeof(ExecRecord) = 120 bytes), and a run takes seconds
// per million. The paper's runs have hundreds; 10^8 would need gigabytes and
// minutes, and is refused by name instead.
inline constexpr int kMaxPendingExecutions = 1 << 20;

class SimDevice {
 public:
  SimDevice(const SimParams& params, bool realtime);
  // Real time with the device and logger clocks anchored at clock_epoch_ns
  // (host time) instead of the construction instant: a second process
  // simulating the same GPU (shared_device.hpp) reads the same clocks.
  SimDevice(const SimParams& params, bool realtime, std::int64_t clock_epoch_ns);

  bool realtime() const noexcept { return realtime_; }
  const SimParams& params() const noexcept { return p_; }

  // Kernels: the presets are registered at construction; ids are indices.
  int add_kernel(const KernelSpec& k);
  int kernel_id(const std::string& name) const;  // throws std::invalid_argument
  std::vector<KernelSpec> kernels() const;

  // Time. Virtual: now() is the simulated host time and moves only through
  // advance()/synchronize()/reads. Real: now() is host_now_ns().
  std::int64_t now();
  void advance(std::int64_t ns);  // virtual only
  // Enqueue `count` back-to-back executions of kernel `kernel` for run
  // `run`; returns at once (launches are asynchronous, as on a GPU). Throws
  // std::invalid_argument naming count when more than
  // kMaxPendingExecutions would wait, or a run would pass 2^31 - 1
  // executions (indices are int32).
  void launch(int kernel, int count, int run);
  // Waits until all launched work is done; returns the host time at which
  // the host learns it (virtual: now() moves there; real: sleeps).
  std::int64_t synchronize();
  bool busy();

  // One bracketed read of the device clock (virtual: at now(), and now()
  // moves past it; real: really takes the round trip, spinning).
  fingrav::Bracket read_clock();

  // Ground truth.
  std::int64_t device_ticks_at(std::int64_t host_ns) const { return device_clock_.ticks(host_ns); }
  double host_at_device_ticks(double ticks) const { return device_clock_.host_at(ticks); }
  std::int64_t logger_ticks_at(std::int64_t host_ns) const;
  double host_at_logger_ticks(double ticks) const;
  const ClockModel& device_clock() const noexcept { return device_clock_; }
  const ClockModel& logger_clock() const noexcept { return logger_own_ ? logger_clock_ : device_clock_; }
  // Exact power (total, compute, io, memory) at host times; NaN outside the
  // recorded trace. out has 4*n floats.
  void truth_power(const std::int64_t* t, std::size_t n, float* out);

  // Records (copies; clear_records() frees them).
  // `first`: skip the first records (a campaign fetches only what is new,
  // keeping the cost per run constant).
  std::vector<ExecRecord> executions(std::size_t first = 0);
  std::size_t execution_count();
  std::vector<LogRecord> logs();
  // Logs as the virtual poller saw them; only those published at or after
  // `from_publish_ns`.
  std::vector<Sample> observed_samples(std::int64_t from_publish_ns = INT64_MIN);
  std::vector<FirmwareRecord> firmware();
  std::vector<TruthSegment> truth_segments();
  void clear_records();

  // The newest logs published by host time `t` (at most max, oldest first):
  // what a live reader sees.
  std::size_t published_logs(std::int64_t t, LogRecord* out, std::size_t max);

  double current_freq();
  double current_temp_rise_k();

 private:
  struct Pending {
    int kernel, run, index;
    std::int64_t host_launch_ns;
    std::int64_t earliest_start_ns;
    bool last_of_launch;
  };
  enum class Phase { kIdle, kGap, kRunning };

  void advance_locked(std::int64_t t_target);
  void step(std::int64_t t1);
  void on_boundary();
  void start_exec(const Pending& pe);
  void finish_exec();
  void firmware_tick();
  void logger_tick();
  void schedule_next_log();
  // The general logger (windows longer than the period, filters, delay,
  // counters): exact energy integral and filter state at any past time.
  bool logger_general() const noexcept;
  void logger_history_at(std::int64_t x, double energy[4], double inst[4], double filtered[4]) const;
  double logger_calibrate(double true_w);
  double exec_rate() const;
  std::int64_t next_event_time() const;
  void current_activity(double a[3]) const;
  double total_from(const double c[3]) const;
  std::int64_t sync_time_locked();

  SimParams p_;
  const bool realtime_;
  std::int64_t epoch_ns_;
  mutable std::mutex mu_;
  ClockModel device_clock_, logger_clock_;
  bool logger_own_;
  Rng rng_kernel_, rng_run_, rng_log_, rng_launch_, rng_read_, rng_noise_;
  std::vector<KernelSpec> kernels_;

  // State.
  std::int64_t t_;
  double pw_[3];       // component powers (compute, io, memory), watts
  double t_fast_ = 0, t_slow_ = 0;
  double f_;
  double ppt_w_ = 0;
  std::int64_t hold_until_ = -1;
  std::int64_t last_busy_ns_;
  double fw_energy_ = 0;
  double fw_activity_ = 0;  // integral of compute activity over the loop window
  double fw_busy_time_ = 0;  // time with work in the loop window, ns
  bool fw_busy_ = false;
  std::int64_t next_fw_ns_;
  std::int64_t fw_window_start_ns_ = 0;
  std::int64_t next_log_ns_;
  std::uint64_t log_seq_ = 0;
  std::int64_t log_origin_ns_ = -1;  // sampling time of log 0: the logger's fixed grid
  double log_acc_[4] = {0, 0, 0, 0};
  std::int64_t log_acc_from_ = 0;
  bool log_acc_on_ = false;
  std::int64_t next_poll_phase_ns_;
  // General logger state. One step of history: on [t0, t1) each component
  // follows tg + (p0 - tg) exp(-(t - t0) / tau_power), so the energy
  // integral (cum0 at t0) and the filter output (y0 at t0) are exact at any
  // instant inside it. Kept back to the oldest window a future log opens.
  struct HistSeg {
    std::int64_t t0, t1;
    double p0[3], tg[3], cum0[4], y0[3];
  };
  std::deque<HistSeg> hist_;
  double cum_e_[4] = {0, 0, 0, 0};  // energy since the epoch, W*ns (total, compute, io, memory)
  double filt_[3] = {0, 0, 0};      // first-order filter state per component, W
  double counter_prev_[4] = {0, 0, 0, 0};  // quantised counter at the previous log, J
  std::int64_t counter_prev_t_ = 0;         // end of the previous counter interval

  // Work.
  std::deque<Pending> queue_;
  Phase phase_ = Phase::kIdle;
  std::int64_t gap_end_ = 0;
  Pending cur_{};
  double progress_ = 0;
  std::size_t seg_ = 0;
  double cur_factor_ = 1;  // duration factor of the running execution
  ExecRecord cur_rec_{};
  double cur_energy_[4] = {0, 0, 0, 0};
  double cur_freq_time_ = 0;
  int last_kernel_ = -1;
  int warm_count_ = 0;
  std::int64_t last_end_ns_;
  std::int64_t last_end_marker_ticks_ = INT64_MIN / 2;
  int run_factor_run_ = -1;
  int run_factor_kernel_ = -1;
  double run_factor_ = 1;
  std::int64_t last_sync_ns_ = -1;

  // Records.
  std::vector<ExecRecord> execs_;
  std::vector<LogRecord> logs_;
  std::vector<FirmwareRecord> fw_;
  std::vector<TruthSegment> truth_;
};

// SourceInfo of a simulated logger with these parameters (SimPowerSource's
// and SharedSimPowerSource's, so a recorder sees one kind of source).
SourceInfo sim_source_info(const SimParams& p);

// The device as a PowerSource for the sampler thread (real-time mode): each
// poll advances the device to now and returns the newest published logs.
// depth 1 behaves like AMD's gpu_metrics file (latest value only).
class SimPowerSource final : public PowerSource {
 public:
  SimPowerSource(std::shared_ptr<SimDevice> device, std::uint32_t depth);
  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t max) override;

 private:
  std::shared_ptr<SimDevice> dev_;
  std::uint32_t depth_;
  SourceInfo info_;
  std::vector<LogRecord> buf_;
};

// The device clock as a TimestampSource (bracketed reads cost real latency
// in real-time mode).
class SimTimestampSource final : public TimestampSource {
 public:
  explicit SimTimestampSource(std::shared_ptr<SimDevice> device);
  const TimestampInfo& timestamp_info() const noexcept override { return info_; }
  std::int64_t read_device_ticks() override { return dev_->read_clock().device_ticks; }

 private:
  std::shared_ptr<SimDevice> dev_;
  TimestampInfo info_;
};

}  // namespace fingrav::sim
