#include "fingrav/amd/gpu_metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "fingrav/dynlib.hpp"
#include "fingrav/host_clock.hpp"

namespace fingrav::amd {

namespace {

// ------------------------------------------------------------ the layouts
// The kernel's struct gpu_metrics_v1_4 .. v1_8 and amdgpu_xcp_metrics*, from
// drivers/gpu/drm/amd/include/kgd_pp_interface.h (torvalds/linux and
// ROCm/amdgpu, 2024-2025), restated field for field. Runs of same-typed
// fields are written as arrays: that keeps every offset (natural alignment,
// no packing attribute in the kernel's definitions) while staying short.
// Array bounds: NUM_VCN 4, NUM_JPEG_ENG 32, NUM_JPEG_ENG_V1 40, NUM_XGMI_LINKS
// 8, MAX_GFX_CLKS 8, MAX_CLKS 4, MAX_XCC 8, NUM_XCP 8.

struct Header {
  std::uint16_t structure_size;
  std::uint8_t format_revision;
  std::uint8_t content_revision;
};

// temperature_hotspot, temperature_mem, temperature_vrsoc, curr_socket_power,
// average_gfx_activity, average_umc_activity: six u16 after the header in
// every 1.4+ layout.
struct Head16 {
  std::uint16_t temperature_hotspot;
  std::uint16_t temperature_mem;
  std::uint16_t temperature_vrsoc;
  std::uint16_t curr_socket_power;
  std::uint16_t average_gfx_activity;
  std::uint16_t average_umc_activity;
};

// pcie_link_width/speed, xgmi_link_width/speed, gfx/mem_activity_acc, then
// pcie bandwidth acc/inst, l0-to-recovery, replay, replay-rollover counts.
struct LinkBlock {
  std::uint16_t pcie_link_width_speed[2];
  std::uint16_t xgmi_link_width_speed[2];
  std::uint32_t activity_acc[2];
  std::uint64_t pcie_counters[5];
};

// current_gfxclk[8], current_socclk[4], current_vclk0[4], current_dclk0[4], current_uclk.
struct Clocks {
  std::uint16_t gfxclk[8];
  std::uint16_t socclk[4];
  std::uint16_t vclk0[4];
  std::uint16_t dclk0[4];
  std::uint16_t uclk;
};

struct V1_4 {
  Header h;
  Head16 head;
  std::uint16_t vcn_activity[4];
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint32_t throttle_status;
  std::uint32_t gfxclk_lock_status;
  LinkBlock link;
  std::uint64_t xgmi_read_write_acc[16];
  std::uint64_t firmware_timestamp;
  Clocks clk;
  std::uint16_t padding;
};

struct V1_5 {
  Header h;
  Head16 head;
  std::uint16_t vcn_activity[4];
  std::uint16_t jpeg_activity[32];
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint32_t throttle_status;
  std::uint32_t gfxclk_lock_status;
  LinkBlock link;
  std::uint32_t pcie_nak_sent_rcvd[2];
  std::uint64_t xgmi_read_write_acc[16];
  std::uint64_t firmware_timestamp;
  Clocks clk;
  std::uint16_t padding;
};

// The first 1.6 (Linux 6.10-era): 1.5 plus the accumulation counter and
// throttler residencies, still with device-wide VCN/JPEG activity.
struct V1_6a {
  Header h;
  Head16 head;
  std::uint16_t vcn_activity[4];
  std::uint16_t jpeg_activity[32];
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint32_t accumulation_counter;
  std::uint32_t residency_acc[5];  // prochot, ppt, socket_thm, vr_thm, hbm_thm
  std::uint32_t throttle_status;
  std::uint32_t gfxclk_lock_status;
  LinkBlock link;
  std::uint32_t pcie_nak_sent_rcvd[2];
  std::uint64_t xgmi_read_write_acc[16];
  std::uint64_t firmware_timestamp;
  Clocks clk;
  std::uint16_t padding;
};

struct XcpMetrics {  // amdgpu_xcp_metrics
  std::uint32_t gfx_busy_inst[8];
  std::uint16_t jpeg_busy[32];
  std::uint16_t vcn_busy[4];
  std::uint64_t gfx_busy_acc[8];
};
struct XcpMetrics1_1 {  // amdgpu_xcp_metrics_v1_1
  std::uint32_t gfx_busy_inst[8];
  std::uint16_t jpeg_busy[32];
  std::uint16_t vcn_busy[4];
  std::uint64_t gfx_busy_acc[8];
  std::uint64_t gfx_below_host_limit_acc[8];
};
struct XcpMetrics1_2 {  // amdgpu_xcp_metrics_v1_2
  std::uint32_t gfx_busy_inst[8];
  std::uint16_t jpeg_busy[40];
  std::uint16_t vcn_busy[4];
  std::uint64_t gfx_busy_acc[8];
  std::uint64_t gfx_below_host_limit_acc[4][8];  // ppt, thm, low_utilization, total
};

// The later 1.6 (the same revision number, reworked in place): VCN/JPEG
// activity and throttle_status moved out, per-partition xcp_stats added.
struct V1_6b {
  Header h;
  Head16 head;
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint32_t accumulation_counter;
  std::uint32_t residency_acc[5];
  std::uint32_t gfxclk_lock_status;
  LinkBlock link;
  std::uint32_t pcie_nak_sent_rcvd[2];
  std::uint64_t xgmi_read_write_acc[16];
  std::uint64_t firmware_timestamp;
  Clocks clk;
  std::uint16_t num_partition;
  XcpMetrics xcp_stats[8];
  std::uint32_t pcie_lc_perf_other_end_recovery;
};

template <typename Xcp>
struct V1_7or8 {
  Header h;
  Head16 head;
  std::uint64_t mem_max_bandwidth;
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint32_t accumulation_counter;
  std::uint32_t residency_acc[5];
  std::uint32_t gfxclk_lock_status;
  LinkBlock link;
  std::uint32_t pcie_nak_sent_rcvd[2];
  std::uint64_t xgmi_read_write_acc[16];
  std::uint16_t xgmi_link_status[8];
  std::uint16_t padding;
  std::uint64_t firmware_timestamp;
  Clocks clk;
  std::uint16_t num_partition;
  Xcp xcp_stats[8];
  std::uint32_t pcie_lc_perf_other_end_recovery;
};
using V1_7 = V1_7or8<XcpMetrics1_1>;
using V1_8 = V1_7or8<XcpMetrics1_2>;

// Sizes as the kernel's own sizeof gives them (the 1.8 figure is also stated
// in the kernel's gpu_metrics attribute table: "sizeof(struct gpu_metrics_v1_8)
// == 3872"), and the offsets a reader depends on.
static_assert(sizeof(V1_4) == 288);
static_assert(sizeof(V1_5) == 360);
static_assert(sizeof(V1_6a) == 384);
static_assert(sizeof(V1_6b) == 1664);
static_assert(sizeof(V1_7) == 2208);
static_assert(sizeof(V1_8) == 3872);
static_assert(offsetof(V1_4, energy_accumulator) == 24 && offsetof(V1_4, firmware_timestamp) == 232);
static_assert(offsetof(V1_5, energy_accumulator) == 88 && offsetof(V1_5, firmware_timestamp) == 304);
static_assert(offsetof(V1_6a, accumulation_counter) == 104 && offsetof(V1_6a, firmware_timestamp) == 328);
static_assert(offsetof(V1_6b, energy_accumulator) == 16 && offsetof(V1_6b, firmware_timestamp) == 256);
static_assert(offsetof(V1_7, energy_accumulator) == 24 && offsetof(V1_7, firmware_timestamp) == 288);
static_assert(offsetof(V1_8, clk) == 296 && offsetof(V1_8, num_partition) == 338);

const char* const kLayout14 = "1.4";
const char* const kLayout15 = "1.5";
const char* const kLayout16a = "1.6 (device-wide VCN/JPEG activity)";
const char* const kLayout16b = "1.6 (per-partition xcp_stats)";
const char* const kLayout17 = "1.7";
const char* const kLayout18 = "1.8";

template <typename T>
T load(const std::uint8_t* data) {
  T v;
  std::memcpy(&v, data, sizeof(T));  // the buffer carries no alignment guarantee
  return v;
}

// Copies the fields every 1.4+ layout has, wherever that layout puts them.
template <typename S>
void fill_common(const S& s, GpuMetrics& m) {
  m.temperature_hotspot_c = s.head.temperature_hotspot;
  m.temperature_mem_c = s.head.temperature_mem;
  m.temperature_vrsoc_c = s.head.temperature_vrsoc;
  m.curr_socket_power_w = s.head.curr_socket_power;
  m.average_gfx_activity_pct = s.head.average_gfx_activity;
  m.average_umc_activity_pct = s.head.average_umc_activity;
  m.energy_accumulator = s.energy_accumulator;
  m.system_clock_counter = s.system_clock_counter;
  m.firmware_timestamp = s.firmware_timestamp;
  m.gfxclk_lock_status = s.gfxclk_lock_status;
  for (int i = 0; i < 8; ++i) m.current_gfxclk_raw[i] = s.clk.gfxclk[i];
  m.current_uclk_mhz = s.clk.uclk;
}

template <typename S>
GpuMetrics decode(const std::uint8_t* data, const char* name) {
  const S s = load<S>(data);
  GpuMetrics m;
  m.format_revision = s.h.format_revision;
  m.content_revision = s.h.content_revision;
  m.structure_size = s.h.structure_size;
  m.layout = name;
  fill_common(s, m);
  if constexpr (std::is_same_v<S, V1_4> || std::is_same_v<S, V1_5> || std::is_same_v<S, V1_6a>) {
    m.throttle_status = s.throttle_status;
  }
  if constexpr (!std::is_same_v<S, V1_4> && !std::is_same_v<S, V1_5>) {
    m.accumulation_counter = s.accumulation_counter;
  }
  if constexpr (std::is_same_v<S, V1_6b> || std::is_same_v<S, V1_7> || std::is_same_v<S, V1_8>) {
    m.num_partition = s.num_partition;
  }
  return m;
}

std::string sizes_of(std::uint8_t frev, std::uint8_t crev) {
  std::string out;
  for (const auto& l : gpu_metrics_layouts()) {
    if (l.format_revision != frev || l.content_revision != crev) continue;
    if (!out.empty()) out += " or ";
    out += std::to_string(l.structure_size) + " (" + l.name + ")";
  }
  return out;
}

std::string revision(std::uint8_t frev, std::uint8_t crev) {
  return std::to_string(frev) + "." + std::to_string(crev);
}

}  // namespace

const std::vector<GpuMetricsLayout>& gpu_metrics_layouts() {
  static const std::vector<GpuMetricsLayout> layouts = {
      {1, 4, static_cast<std::uint16_t>(sizeof(V1_4)), kLayout14},
      {1, 5, static_cast<std::uint16_t>(sizeof(V1_5)), kLayout15},
      {1, 6, static_cast<std::uint16_t>(sizeof(V1_6a)), kLayout16a},
      {1, 6, static_cast<std::uint16_t>(sizeof(V1_6b)), kLayout16b},
      {1, 7, static_cast<std::uint16_t>(sizeof(V1_7)), kLayout17},
      {1, 8, static_cast<std::uint16_t>(sizeof(V1_8)), kLayout18},
  };
  return layouts;
}

std::vector<std::uint16_t> GpuMetrics::current_gfxclk_mhz() const {
  std::vector<std::uint16_t> out;
  for (const auto v : current_gfxclk_raw) {
    if (v != kNotSupported16) out.push_back(v);
  }
  return out;
}

GpuMetrics parse_gpu_metrics(const std::uint8_t* data, std::size_t size) {
  if (data == nullptr || size < sizeof(Header)) {
    throw GpuMetricsFormatError("gpu_metrics: " + std::to_string(size) +
                                " bytes, shorter than the 4-byte header; nothing to parse");
  }
  const Header h = load<Header>(data);
  const std::string rev = revision(h.format_revision, h.content_revision);
  const std::string known = sizes_of(h.format_revision, h.content_revision);
  if (known.empty()) {
    throw GpuMetricsFormatError("gpu_metrics: format revision " + rev + " (structure_size " +
                                std::to_string(h.structure_size) + ", " + std::to_string(size) +
                                " bytes read) is not supported; this parser knows revisions 1.4 to 1.8");
  }
  const GpuMetricsLayout* layout = nullptr;
  for (const auto& l : gpu_metrics_layouts()) {
    if (l.format_revision == h.format_revision && l.content_revision == h.content_revision &&
        l.structure_size == h.structure_size) {
      layout = &l;
    }
  }
  if (layout == nullptr) {
    throw GpuMetricsFormatError("gpu_metrics: revision " + rev + " with structure_size " +
                                std::to_string(h.structure_size) + " matches no known layout (expected " + known +
                                "); " + std::to_string(size) + " bytes read");
  }
  if (size != h.structure_size) {
    throw GpuMetricsFormatError("gpu_metrics: revision " + rev + " header says structure_size " +
                                std::to_string(h.structure_size) + " but " + std::to_string(size) +
                                " bytes were read" + (size < h.structure_size ? " (truncated)" : " (trailing bytes)"));
  }
  // Each layout has its own size, so the size picks the struct.
  switch (h.structure_size) {
    case sizeof(V1_4): return decode<V1_4>(data, layout->name);
    case sizeof(V1_5): return decode<V1_5>(data, layout->name);
    case sizeof(V1_6a): return decode<V1_6a>(data, layout->name);
    case sizeof(V1_6b): return decode<V1_6b>(data, layout->name);
    case sizeof(V1_7): return decode<V1_7>(data, layout->name);
    case sizeof(V1_8): return decode<V1_8>(data, layout->name);
    default: break;
  }
  throw GpuMetricsFormatError("gpu_metrics: internal error: layout " + std::string(layout->name) + " has no decoder");
}

// --------------------------------------------------------------- files

namespace {

// Opens a sysfs file read-only; a missing file or no permission is a
// DeviceUnavailable that says where and what is needed.
int open_sysfs(const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) return fd;
  const int err = errno;
  std::string why = path + ": " + std::strerror(err) + ". ";
  if (err == ENOENT || err == ENOTDIR) {
    why += std::string("No ") + what +
           " file there: the amdgpu kernel driver must be loaded and bound to the GPU (modprobe amdgpu; "
           "see `lspci -k`), and the GPU's firmware must provide it.";
  } else if (err == EACCES || err == EPERM) {
    why += "Reading it needs permission (run as a user allowed to read the amdgpu sysfs files, e.g. in the "
           "'render' or 'video' group, or as root).";
  } else {
    why += "The amdgpu driver did not let it be opened.";
  }
  throw DeviceUnavailable(why);
}

// One pread of the whole file from offset 0. Returns bytes read, or -1 with errno.
ssize_t read_whole(int fd, std::uint8_t* buf, std::size_t cap) {
  for (;;) {
    const ssize_t n = ::pread(fd, buf, cap, 0);
    if (n >= 0 || errno != EINTR) return n;
  }
}

bool valid_ts(std::uint64_t v) { return v != 0 && v != kNotSupported64; }

}  // namespace

GpuMetricsSource::GpuMetricsSource(std::string path, GpuMetricsChannel channel, GpuMetricsClock clock)
    : path_(std::move(path)), channel_(channel), clock_(clock) {
  // A page: the driver never returns more (it truncates at PAGE_SIZE - 1),
  // and one spare byte tells "exactly structure_size" from "more than that".
  buf_.resize(4097);
  fd_ = open_sysfs(path_, "gpu_metrics");
  try {
    if (!read_table(first_)) {
      if (pending_status_ == PollStatus::kFatalError) throw GpuMetricsFormatError(last_error_);
      throw DeviceUnavailable(path_ + ": " + last_error_);
    }
    if (clock_ == GpuMetricsClock::kAuto) {
      // Some firmware leaves firmware_timestamp unset (all ones) or zero:
      // fall back to the driver's boottime stamp rather than dedupe on a constant.
      clock_ = valid_ts(first_.firmware_timestamp) ? GpuMetricsClock::kFirmware : GpuMetricsClock::kBoottime;
    } else if (clock_ == GpuMetricsClock::kFirmware && !valid_ts(first_.firmware_timestamp)) {
      throw DeviceUnavailable(path_ + ": clock='firmware' but this firmware leaves firmware_timestamp unset (" +
                              std::to_string(first_.firmware_timestamp) + "); use clock='boottime' or 'auto'");
    }
    if (channel_ == GpuMetricsChannel::kEnergy && first_.energy_accumulator == kNotSupported64) {
      throw DeviceUnavailable(path_ + ": channel='energy' but this firmware does not report the energy "
                              "accumulator; use channel='socket'");
    }
    if (channel_ == GpuMetricsChannel::kSocket && first_.curr_socket_power_w == kNotSupported16) {
      throw DeviceUnavailable(path_ + ": channel='socket' but this firmware does not report curr_socket_power; "
                              "use channel='energy'");
    }
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  const bool fw = clock_ == GpuMetricsClock::kFirmware;
  info_.name = std::string("amd gpu_metrics ") + first_.layout + " (" +
               (channel_ == GpuMetricsChannel::kEnergy ? "energy" : "socket") + ") " + path_;
  info_.clock_domain = fw ? "amd-pmfw-10ns" : "boottime";
  info_.tick_ns = fw ? static_cast<double>(kFirmwareTickNs) : 1.0;
  info_.channel_mask = 1u << kTotal;
  // The PMFW refreshes its metrics table about once a millisecond (the 1 ms
  // logger of paper Section III); the driver fetches it anew on each read.
  info_.native_period_ns = 1'000'000;
  info_.has_sequence = false;
  // Energy readings average over the gap to the previous table (about one
  // period; each reading carries its own window). curr_socket_power is
  // documented by the kernel only as "Power (Watts)": no window is declared.
  info_.window_ns = channel_ == GpuMetricsChannel::kEnergy ? 1'000'000u : 0u;
}

GpuMetricsSource::~GpuMetricsSource() {
  if (fd_ >= 0) ::close(fd_);
}

GpuMetricsStats GpuMetricsSource::stats() const noexcept {
  GpuMetricsStats s;
  s.reads = reads_.load(std::memory_order_relaxed);
  s.tables = tables_.load(std::memory_order_relaxed);
  s.emitted = emitted_.load(std::memory_order_relaxed);
  s.unpaired = unpaired_.load(std::memory_order_relaxed);
  s.energy_resets = energy_resets_.load(std::memory_order_relaxed);
  s.long_gaps = long_gaps_.load(std::memory_order_relaxed);
  return s;
}

bool GpuMetricsSource::read_table(GpuMetrics& out) {
  const ssize_t n = read_whole(fd_, buf_.data(), buf_.size());
  if (n < 0) {
    const int err = errno;
    last_error_ = "read " + path_ + ": " + std::strerror(err);
    // The device is gone (unplugged, driver unbound): no later read will work.
    pending_status_ = (err == ENODEV || err == ENOENT || err == ENXIO) ? PollStatus::kFatalError
                                                                       : PollStatus::kTransientError;
    return false;
  }
  try {
    out = parse_gpu_metrics(buf_.data(), static_cast<std::size_t>(n));
  } catch (const GpuMetricsFormatError& e) {
    last_error_ = path_ + ": " + e.what();
    pending_status_ = PollStatus::kFatalError;
    return false;
  }
  reads_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

PollResult GpuMetricsSource::fail(PollStatus status, std::string why) {
  last_error_ = std::move(why);
  return {0, status};
}

PollResult GpuMetricsSource::poll(Reading* out, std::size_t max) {
  if (max == 0) return {};
  GpuMetrics m;
  if (!read_table(m)) return {0, pending_status_};
  if (m.structure_size != first_.structure_size || m.layout != first_.layout) {
    return fail(PollStatus::kFatalError, path_ + ": the gpu_metrics layout changed from " + first_.layout + " to " +
                                             m.layout + " while sampling (driver reloaded?)");
  }
  const bool fw = clock_ == GpuMetricsClock::kFirmware;
  std::int64_t ts;
  bool is_new;
  if (fw) {
    if (!valid_ts(m.firmware_timestamp)) {
      return fail(PollStatus::kFatalError, path_ + ": firmware_timestamp became unset (" +
                                               std::to_string(m.firmware_timestamp) + ") while sampling");
    }
    ts = static_cast<std::int64_t>(m.firmware_timestamp);
    if (have_prev_ && ts < prev_ts_) {
      // The PMFW clock restarted (GPU reset): readings before and after are
      // on different clocks, and a clock map fitted on one is wrong for the other.
      return fail(PollStatus::kFatalError,
                  path_ + ": firmware_timestamp went backwards from " + std::to_string(prev_ts_) + " to " +
                      std::to_string(ts) + " (the power-management firmware restarted, e.g. a GPU reset); "
                      "restart the measurement so the clock map is fitted again");
    }
    is_new = !have_prev_ || ts != prev_ts_;
    if (!is_new && m.energy_accumulator != seen_energy_) {
      // New data under an old stamp: this firmware does not advance the
      // timestamp, and deduplicating on it would merge distinct readings.
      seen_energy_ = m.energy_accumulator;
      if (++stuck_tables_ >= kStuckTablesLimit) {
        return fail(PollStatus::kFatalError,
                    path_ + ": firmware_timestamp stayed at " + std::to_string(ts) + " while the energy accumulator "
                    "changed " + std::to_string(stuck_tables_) + " times: this firmware does not advance its "
                    "timestamp; construct the source with clock='boottime'");
      }
    }
  } else {
    // No firmware clock: a table is new when the firmware's accumulators
    // moved; it is stamped with the driver's boottime at the first read that
    // saw it (late by up to one poll period).
    ts = static_cast<std::int64_t>(m.system_clock_counter);
    is_new = !have_prev_ || m.energy_accumulator != prev_energy_ || m.accumulation_counter != prev_acc_;
    if (have_prev_ && is_new && ts <= prev_ts_) {
      return fail(PollStatus::kFatalError, path_ + ": system_clock_counter did not advance (" +
                                               std::to_string(prev_ts_) + " then " + std::to_string(ts) + ")");
    }
  }

  if (!is_new) {
    // The same table again: hand back the reading already returned, which
    // the sampler counts as a duplicate.
    if (!have_last_) return {};
    out[0] = last_;
    return {1, PollStatus::kOk};
  }
  tables_.fetch_add(1, std::memory_order_relaxed);
  stuck_tables_ = 0;
  seen_energy_ = m.energy_accumulator;

  Reading r;
  r.source_ts = ts;
  r.source_seq = m.accumulation_counter != kNotSupported32 ? m.accumulation_counter : tables_.load(std::memory_order_relaxed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto& p : r.power_w) p = nan;

  const bool had_prev = have_prev_;
  const std::int64_t dt_ticks = ts - prev_ts_;
  const std::uint64_t prev_energy = prev_energy_;
  have_prev_ = true;
  prev_ts_ = ts;
  prev_energy_ = m.energy_accumulator;
  prev_acc_ = m.accumulation_counter;

  if (channel_ == GpuMetricsChannel::kSocket) {
    if (m.curr_socket_power_w == kNotSupported16) {
      return fail(PollStatus::kTransientError, path_ + ": curr_socket_power not reported in this table");
    }
    r.power_w[kTotal] = static_cast<float>(m.curr_socket_power_w);
    r.window_ns = 0;
  } else {
    if (!had_prev) {
      // The first table has no predecessor to difference against.
      unpaired_.fetch_add(1, std::memory_order_relaxed);
      return {};
    }
    const double tick = fw ? static_cast<double>(kFirmwareTickNs) : 1.0;
    const double window_ns = static_cast<double>(dt_ticks) * tick;
    if (window_ns > static_cast<double>(std::numeric_limits<std::uint32_t>::max())) {
      long_gaps_.fetch_add(1, std::memory_order_relaxed);
      unpaired_.fetch_add(1, std::memory_order_relaxed);
      return fail(PollStatus::kTransientError,
                  path_ + ": " + std::to_string(window_ns * 1e-9) +
                      " s between consecutive tables, longer than a reading's window can hold (4.29 s); "
                      "no reading over that gap, derivation restarts");
    }
    // Unsigned difference: a 64-bit wrap of the accumulator comes out right.
    const std::uint64_t de = m.energy_accumulator - prev_energy;
    // W = dE[J] / dt[s] = de * 2^-16 / (window_ns * 1e-9), in one rounding-friendly order.
    const double watts = static_cast<double>(de) * 1e9 / (65536.0 * window_ns);
    if (!(watts <= kMaxPlausibleW)) {
      energy_resets_.fetch_add(1, std::memory_order_relaxed);
      unpaired_.fetch_add(1, std::memory_order_relaxed);
      return fail(PollStatus::kTransientError,
                  path_ + ": energy accumulator went from " + std::to_string(prev_energy) + " to " +
                      std::to_string(m.energy_accumulator) + " over " + std::to_string(window_ns) +
                      " ns, which is no physical power (accumulator reset?); derivation restarts");
    }
    r.power_w[kTotal] = static_cast<float>(watts);
    r.flags = kFlagDerived;
    r.window_ns = static_cast<std::uint32_t>(window_ns);
  }
  last_ = r;
  have_last_ = true;
  emitted_.fetch_add(1, std::memory_order_relaxed);
  out[0] = r;
  return {1, PollStatus::kOk};
}

// --------------------------------------------------------------- hwmon

std::uint64_t parse_hwmon_microwatts(const char* text, std::size_t size) {
  std::size_t end = size;
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) --end;
  if (end == 0) throw std::invalid_argument("hwmon power file: empty");
  if (end > 20) throw std::invalid_argument("hwmon power file: '" + std::string(text, end) + "' is too long");
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < end; ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') {
      throw std::invalid_argument("hwmon power file: '" + std::string(text, end) + "' is not a decimal microwatt count");
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      throw std::invalid_argument("hwmon power file: '" + std::string(text, end) + "' overflows 64 bits");
    }
    v = v * 10 + digit;
  }
  return v;
}

HwmonPowerSource::HwmonPowerSource(std::string path) : path_(std::move(path)) {
  const auto slash = path_.find_last_of('/');
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  averaged_ = base.find("average") != std::string::npos;
  fd_ = open_sysfs(path_, "hwmon power");
  std::uint64_t uw = 0;
  if (!read_value(uw)) {
    ::close(fd_);
    fd_ = -1;
    throw DeviceUnavailable(path_ + ": " + last_error_);
  }
  info_.name = "amd hwmon " + base + " " + path_;
  // The value is stamped with host time at the read that first saw it.
  info_.clock_domain = "host-monotonic-raw";
  info_.tick_ns = 1.0;
  info_.channel_mask = 1u << kTotal;
  info_.native_period_ns = 0;  // the driver asks the firmware on each read; its refresh rate is not documented
  info_.has_sequence = false;
  // power1_average's averaging window is the firmware's and is not
  // documented by the kernel; power1_input is documented as instantaneous.
  info_.window_ns = 0;
}

HwmonPowerSource::~HwmonPowerSource() {
  if (fd_ >= 0) ::close(fd_);
}

bool HwmonPowerSource::read_value(std::uint64_t& uw) {
  char text[64];
  const ssize_t n = read_whole(fd_, reinterpret_cast<std::uint8_t*>(text), sizeof(text));
  if (n < 0) {
    last_error_ = "read " + path_ + ": " + std::strerror(errno);
    return false;
  }
  try {
    uw = parse_hwmon_microwatts(text, static_cast<std::size_t>(n));
  } catch (const std::invalid_argument& e) {
    last_error_ = path_ + ": " + e.what();
    return false;
  }
  return true;
}

std::uint64_t HwmonPowerSource::read_microwatts() {
  std::uint64_t uw = 0;
  if (!read_value(uw)) throw std::runtime_error(last_error_);
  return uw;
}

PollResult HwmonPowerSource::poll(Reading* out, std::size_t max) {
  if (max == 0) return {};
  std::uint64_t uw = 0;
  if (!read_value(uw)) return {0, PollStatus::kTransientError};
  const std::int64_t now = host_now_ns();
  if (have_last_ && uw == last_uw_) {
    // Unchanged: most likely the firmware has not refreshed the value yet.
    out[0] = last_;
    return {1, PollStatus::kOk};
  }
  Reading r;
  r.source_ts = now;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto& p : r.power_w) p = nan;
  r.power_w[kTotal] = static_cast<float>(static_cast<double>(uw) * 1e-6);
  r.window_ns = 0;
  last_ = r;
  last_uw_ = uw;
  have_last_ = true;
  out[0] = r;
  return {1, PollStatus::kOk};
}

}  // namespace fingrav::amd
