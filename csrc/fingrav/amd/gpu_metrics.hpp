// AMD power from the amdgpu kernel driver's sysfs files: a parser for the
// binary `gpu_metrics` table (formats 1.4 to 1.9, the MI200/MI300 family),
// a PowerSource over that file, and the hwmon `power1_*` fallback.
//
// Formats 1.4 to 1.8 are the kernel's fixed `struct gpu_metrics_v1_x`
// (drivers/gpu/drm/amd/include/kgd_pp_interface.h, Linux 6.x / ROCm amdgpu
// DKMS), restated in gpu_metrics_layouts.hpp with every field's offset checked
// at compile time. Format 1.9 (SMU 13.0.6 SOCs, MI300 class, since September
// 2025) is attribute-encoded: a header, an attribute count, then per field its
// encoding and its value(s); it is decoded by those encodings (see
// parse_gpu_metrics). The file holds the table as the driver filled it, in
// host byte order; the driver first fills the whole table with 0xFF, so a
// field the firmware does not provide reads as all ones ("not supported",
// see kNotSupported*).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fingrav/power_source.hpp"

namespace fingrav::amd {

// The table is not one this parser knows, or the bytes disagree with its
// header. what() names the revision and both sizes; nothing is guessed.
class GpuMetricsFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One energy-accumulator unit: 2^-16 J (the kernel's "15.259uJ" units).
inline constexpr double kEnergyUnitJ = 1.0 / 65536.0;
inline constexpr double kEnergyUnitUj = 15.2587890625;
// PMFW firmware_timestamp resolution in formats 1.4 to 1.8 ("PMFW attached
// timestamp (10ns resolution)", kgd_pp_interface.h). Format 1.9 states the
// unit in each field's encoding (AMDGPU_METRICS_UNIT_TIME_2: 10 ns).
inline constexpr std::int64_t kFirmwareTickNs = 10;
// How long the driver serves one cached gpu_metrics table before it builds a
// new one: SMU_GPU_METRICS_CACHE_INTERVAL, 5 ms ("The default cache interval
// is set at 5ms", amd-gfx "drm/amd/pm: Use driver table structure in smuv11",
// December 2025), checked in jiffies, so a table can live longer (two 4 ms
// jiffies at HZ=250). Distinct tables are therefore at least this far apart
// on such drivers, while older ones build a table on every read. Neither
// figure is the logger period: the backend measures that (amd.py).
inline constexpr std::int64_t kDriverCacheIntervalNs = 5'000'000;

inline constexpr std::uint16_t kNotSupported16 = 0xFFFF;
inline constexpr std::uint32_t kNotSupported32 = 0xFFFFFFFFu;
inline constexpr std::uint64_t kNotSupported64 = ~std::uint64_t{0};

// One known layout: its revision, the size the header must carry (0: any,
// for the attribute-encoded 1.9, whose size depends on the SOC's field list),
// and a name that tells the two incompatible 1.6 layouts apart.
struct GpuMetricsLayout {
  std::uint8_t format_revision;
  std::uint8_t content_revision;
  std::uint16_t structure_size;
  const char* name;
};

// Every layout the parser accepts, oldest first.
const std::vector<GpuMetricsLayout>& gpu_metrics_layouts();

// The fields of one gpu_metrics read that this project uses. Raw values as
// the driver wrote them (all ones where not supported).
struct GpuMetrics {
  std::uint8_t format_revision = 0;
  std::uint8_t content_revision = 0;
  std::uint16_t structure_size = 0;
  std::string layout;  // GpuMetricsLayout::name; for 1.9 also the encoding width
  // Format 1.9 only: how many attributes the table lists and how wide each
  // encoding is (4 or 8 bytes: the patch revisions disagree); 0 otherwise.
  std::uint32_t attribute_count = 0;
  std::uint8_t encoding_bytes = 0;

  std::uint16_t temperature_hotspot_c = kNotSupported16;
  std::uint16_t temperature_mem_c = kNotSupported16;
  std::uint16_t temperature_vrsoc_c = kNotSupported16;
  std::uint16_t curr_socket_power_w = kNotSupported16;  // integer watts
  std::uint16_t average_gfx_activity_pct = kNotSupported16;
  std::uint16_t average_umc_activity_pct = kNotSupported16;
  std::uint64_t energy_accumulator = kNotSupported64;  // kEnergyUnitJ units
  std::uint64_t system_clock_counter = kNotSupported64;  // driver's CLOCK_BOOTTIME ns at the read
  std::uint64_t firmware_timestamp = kNotSupported64;  // PMFW clock, firmware_tick_ns ticks
  // Length of one firmware_timestamp tick: 10 ns in 1.4-1.8, the field's
  // unit in 1.9.
  std::int64_t firmware_tick_ns = kFirmwareTickNs;
  // PMFW accumulation cycles (1.6 and later; kNotSupported64 before). 64 bits:
  // 1.9 tables carry it as U32 or U64 depending on the driver.
  std::uint64_t accumulation_counter = kNotSupported64;
  std::uint32_t throttle_status = kNotSupported32;  // 1.4, 1.5 and the first 1.6 only
  std::uint32_t gfxclk_lock_status = kNotSupported32;
  std::uint16_t current_gfxclk_raw[8] = {kNotSupported16, kNotSupported16, kNotSupported16, kNotSupported16,
                                         kNotSupported16, kNotSupported16, kNotSupported16, kNotSupported16};
  std::uint16_t current_uclk_mhz = kNotSupported16;
  std::uint16_t num_partition = kNotSupported16;  // the xcp layouts (second 1.6, 1.7, 1.8)

  // Per-XCC current gfxclk in MHz: the supported entries, in XCC order (the
  // driver fills the first NUM_XCC of 8 slots).
  std::vector<std::uint16_t> current_gfxclk_mhz() const;
  double energy_j() const noexcept { return static_cast<double>(energy_accumulator) * kEnergyUnitJ; }
};

// Parses one gpu_metrics read. Throws GpuMetricsFormatError for a buffer
// shorter than the header, a revision outside 1.4-1.9, a structure_size that
// is not one of that revision's layouts, or a byte count that differs from
// structure_size (the driver writes exactly structure_size bytes). A 1.9 table
// is also refused when its attribute count runs past its size, a value is
// truncated, an encoding names a type of unknown width, a field this parser
// reads appears twice or with the wrong shape or unit, or both encoding
// widths fit the bytes (ambiguous); attributes it does not read are skipped.
GpuMetrics parse_gpu_metrics(const std::uint8_t* data, std::size_t size);

// --------------------------------------------------------------- sources

enum class GpuMetricsChannel : std::uint8_t {
  // Total power = energy-accumulator difference / firmware-timestamp
  // difference between consecutive distinct tables (kFlagDerived).
  kEnergy = 0,
  // curr_socket_power: the firmware's integer watts.
  kSocket = 1,
};

enum class GpuMetricsClock : std::uint8_t {
  kAuto = 0,      // firmware timestamp if the first table carries one, else boottime
  kFirmware = 1,  // firmware_timestamp, domain "amd-pmfw-10ns" (or "amd-pmfw-1ns" for a 1.9 table in ns)
  kBoottime = 2,  // system_clock_counter, domain "boottime"
};

// Counters of one GpuMetricsSource, safe to read from any thread.
struct GpuMetricsStats {
  std::uint64_t reads = 0;          // successful reads of the file
  std::uint64_t tables = 0;         // distinct tables seen (new timestamp / new energy)
  std::uint64_t emitted = 0;        // readings returned for the first time
  std::uint64_t unpaired = 0;       // energy channel: tables with no predecessor (first, after a reset or gap)
  std::uint64_t energy_resets = 0;  // energy accumulator went backwards or jumped implausibly
  std::uint64_t long_gaps = 0;      // consecutive tables further apart than a uint32 window
};

// Polls a gpu_metrics file. The driver regenerates the table on every read,
// so each poll is one pread of the whole file from offset 0 on a descriptor
// kept open. A table whose timestamp was seen before is the same reading
// (returned again so the sampler counts it as a duplicate).
class GpuMetricsSource final : public PowerSource {
 public:
  // Opens and reads the file once: throws DeviceUnavailable (missing file,
  // no permission) or GpuMetricsFormatError (unknown layout) here rather than
  // on the sampler thread.
  GpuMetricsSource(std::string path, GpuMetricsChannel channel = GpuMetricsChannel::kEnergy,
                   GpuMetricsClock clock = GpuMetricsClock::kAuto);
  ~GpuMetricsSource() override;

  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t max) override;
  std::string last_error() const override { return last_error_; }

  const std::string& path() const noexcept { return path_; }
  GpuMetricsChannel channel() const noexcept { return channel_; }
  GpuMetricsClock clock() const noexcept { return clock_; }  // never kAuto after construction
  const GpuMetrics& first_table() const noexcept { return first_; }
  GpuMetricsStats stats() const noexcept;

  // Energy readings imply at most this much power; a larger value means the
  // accumulator was reset (GPU reset, driver reload), not a real draw.
  static constexpr double kMaxPlausibleW = 100'000.0;
  // The firmware timestamp is declared stuck after this many tables whose
  // energy changed while the timestamp did not.
  static constexpr int kStuckTablesLimit = 3;

 private:
  bool read_table(GpuMetrics& out);  // false: last_error_ set, status in pending_status_
  PollResult fail(PollStatus status, std::string why);

  std::string path_;
  int fd_ = -1;
  GpuMetricsChannel channel_;
  GpuMetricsClock clock_;
  SourceInfo info_;
  GpuMetrics first_;
  std::vector<std::uint8_t> buf_;
  PollStatus pending_status_ = PollStatus::kOk;
  std::string last_error_;

  // Derivation state (poll thread only).
  bool have_prev_ = false;         // a previous distinct table exists
  std::int64_t prev_ts_ = 0;       // its timestamp, source ticks
  std::uint64_t prev_energy_ = 0;  // its energy accumulator
  std::uint64_t prev_acc_ = 0;     // its accumulation counter (boottime key)
  bool have_last_ = false;         // last_ holds a reading already returned
  Reading last_{};
  int stuck_tables_ = 0;             // tables with new energy under an unchanged timestamp
  std::uint64_t seen_energy_ = 0;   // energy of the last table read, new or not

  std::atomic<std::uint64_t> reads_{0}, tables_{0}, emitted_{0}, unpaired_{0}, energy_resets_{0}, long_gaps_{0};
};

// Polls hwmon `power1_average` or `power1_input` (text, microwatts). No device
// timestamp exists: a new value is stamped with host CLOCK_MONOTONIC_RAW at
// the read that first saw it (domain "host-monotonic-raw", 1 ns ticks).
class HwmonPowerSource final : public PowerSource {
 public:
  explicit HwmonPowerSource(std::string path);
  ~HwmonPowerSource() override;

  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t max) override;
  std::string last_error() const override { return last_error_; }

  const std::string& path() const noexcept { return path_; }
  // Whether the file is power1_average (firmware-averaged) rather than power1_input.
  bool averaged() const noexcept { return averaged_; }
  // Reads the file once, in microwatts. Throws std::runtime_error on a read or parse error.
  std::uint64_t read_microwatts();

 private:
  bool read_value(std::uint64_t& uw);

  std::string path_;
  int fd_ = -1;
  bool averaged_ = false;
  SourceInfo info_;
  std::string last_error_;
  bool have_last_ = false;
  std::uint64_t last_uw_ = 0;
  Reading last_{};
};

// Parses the text of a hwmon power file: a decimal unsigned integer (in
// microwatts) and an optional trailing newline. Throws std::invalid_argument.
std::uint64_t parse_hwmon_microwatts(const char* text, std::size_t size);

}  // namespace fingrav::amd
