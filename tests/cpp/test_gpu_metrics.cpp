// The gpu_metrics parser on hand-built buffers: one valid table per layout
// written by explicit byte offsets (read off the kernel's struct
// gpu_metrics_v1_x, kgd_pp_interface.h), truncated and random buffers, and
// the file source on a temporary file. Runs under ASan/UBSan in CI, so every
// out-of-bounds or misaligned read the parser could make would show here.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"
#include "fingrav/amd/gpu_metrics.hpp"
#include "fingrav/dynlib.hpp"

using fingrav::amd::GpuMetricsFormatError;
using fingrav::amd::parse_gpu_metrics;

namespace {

struct Offsets {
  std::uint8_t crev;
  std::size_t size;
  std::size_t energy, scc, fts, gfxclk, uclk, lock;
  long acc, throttle, npart;  // -1: not in this layout
  const char* name;
};

// Offsets as the C ABI lays out the kernel's structs (natural alignment).
const Offsets kLayouts[] = {
    {4, 288, 24, 32, 232, 240, 280, 44, -1, 40, -1, "1.4"},
    {5, 360, 88, 96, 304, 312, 352, 108, -1, 104, -1, "1.5"},
    {6, 384, 88, 96, 328, 336, 376, 132, 104, 128, -1, "1.6 (device-wide VCN/JPEG activity)"},
    {6, 1664, 16, 24, 256, 264, 304, 56, 32, -1, 306, "1.6 (per-partition xcp_stats)"},
    {7, 2208, 24, 32, 288, 296, 336, 64, 40, -1, 338, "1.7"},
    {8, 3872, 24, 32, 288, 296, 336, 64, 40, -1, 338, "1.8"},
};

template <typename T>
void put(std::vector<std::uint8_t>& b, std::size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

std::vector<std::uint8_t> table(const Offsets& o, std::uint64_t energy, std::uint64_t fts) {
  std::vector<std::uint8_t> b(o.size, 0xFF);
  put<std::uint16_t>(b, 0, static_cast<std::uint16_t>(o.size));
  b[2] = 1;
  b[3] = o.crev;
  put<std::uint16_t>(b, 4, 80);   // temperature_hotspot
  put<std::uint16_t>(b, 10, 321);  // curr_socket_power
  put<std::uint64_t>(b, o.energy, energy);
  put<std::uint64_t>(b, o.scc, 777);
  put<std::uint64_t>(b, o.fts, fts);
  put<std::uint16_t>(b, o.gfxclk, 2100);
  put<std::uint16_t>(b, o.gfxclk + 2, 2000);
  put<std::uint16_t>(b, o.uclk, 1300);
  put<std::uint32_t>(b, o.lock, 3);
  if (o.acc >= 0) put<std::uint32_t>(b, static_cast<std::size_t>(o.acc), 99);
  if (o.throttle >= 0) put<std::uint32_t>(b, static_cast<std::size_t>(o.throttle), 5);
  if (o.npart >= 0) put<std::uint16_t>(b, static_cast<std::size_t>(o.npart), 4);
  return b;
}

std::uint64_t next(std::uint64_t& s) {  // xorshift64*: fixed seed, reproducible
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 2685821657736338717ULL;
}

void valid_tables() {
  for (const auto& o : kLayouts) {
    const auto b = table(o, 0x1122334455667788ULL, 123456789);
    const auto m = parse_gpu_metrics(b.data(), b.size());
    CHECK_EQ(m.layout, std::string(o.name));
    CHECK_EQ(m.structure_size, o.size);
    CHECK_EQ(m.content_revision, o.crev);
    CHECK_EQ(m.temperature_hotspot_c, 80);
    CHECK_EQ(m.curr_socket_power_w, 321);
    CHECK_EQ(m.energy_accumulator, 0x1122334455667788ULL);
    CHECK_EQ(m.system_clock_counter, 777u);
    CHECK_EQ(m.firmware_timestamp, 123456789u);
    CHECK_EQ(m.current_uclk_mhz, 1300);
    CHECK_EQ(m.gfxclk_lock_status, 3u);
    const auto clk = m.current_gfxclk_mhz();
    CHECK_EQ(clk.size(), 2u);
    CHECK_EQ(clk[0], 2100);
    CHECK_EQ(clk[1], 2000);
    CHECK_EQ(m.accumulation_counter, o.acc >= 0 ? 99u : fingrav::amd::kNotSupported64);
    CHECK_EQ(m.firmware_tick_ns, 10);
    CHECK_EQ(m.encoding_bytes, 0);
    CHECK_EQ(m.throttle_status, o.throttle >= 0 ? 5u : fingrav::amd::kNotSupported32);
    CHECK_EQ(m.num_partition, o.npart >= 0 ? 4 : fingrav::amd::kNotSupported16);
    CHECK(std::fabs(m.energy_j() - static_cast<double>(0x1122334455667788ULL) / 65536.0) < 1e-3);
  }
}

void truncated_and_oversized() {
  for (const auto& o : kLayouts) {
    auto b = table(o, 1, 2);
    for (std::size_t n = 0; n < b.size(); n += (n < 8 ? 1 : 37)) {
      CHECK_THROWS(parse_gpu_metrics(b.data(), n), GpuMetricsFormatError, "gpu_metrics");
    }
    b.push_back(0);
    CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "trailing");
  }
  CHECK_THROWS(parse_gpu_metrics(nullptr, 0), GpuMetricsFormatError, "shorter than the 4-byte header");
}

void unknown_revisions() {
  auto b = table(kLayouts[0], 1, 2);
  b[3] = 10;
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "revision 1.10 (structure_size 288");
  b[3] = 9;  // a fixed layout relabelled 1.9: its bytes are no attribute list
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "gpu_metrics 1.9: ");
  b[3] = 6;  // a 1.6 header on 288 bytes: neither 1.6 layout
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "384 (");
}

void random_buffers() {
  std::uint64_t s = 0x9E3779B97F4A7C15ULL;
  std::vector<std::uint8_t> buf;
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::size_t n = next(s) % 4100;
    // Each buffer on the heap at its exact size, so ASan sees any overread.
    buf.assign(n, 0);
    for (auto& c : buf) c = static_cast<std::uint8_t>(next(s));
    if (n >= 4 && (next(s) & 1)) {
      // Half the time a plausible header, so the decoders run on junk bodies.
      const auto& o = kLayouts[next(s) % 6];
      buf.resize(o.size);
      put<std::uint16_t>(buf, 0, static_cast<std::uint16_t>(o.size));
      buf[2] = 1;
      buf[3] = o.crev;
    }
    std::vector<std::uint8_t> exact(buf.begin(), buf.end());
    try {
      const auto m = parse_gpu_metrics(exact.data(), exact.size());
      CHECK_EQ(m.structure_size, exact.size());
      ++accepted;
    } catch (const GpuMetricsFormatError&) {
    }
  }
  CHECK(accepted > 1000);  // the plausible-header half parses
}

// ------------------------------------------------------------ format 1.9
// Tables packed as the driver's DECLARE_SMU_METRICS_CLASS packs them
// (drivers/gpu/drm/amd/pm/swsmu/smu_cmn.h): header, int attr_count, then per
// field its encoding AMDGPU_METRICS_ENC_ATTR(unit, type, id, inst)
// (kgd_pp_interface.h) and at once its value(s), no padding. The encoding is
// a u64 in the merged helpers and a u32 as they were first posted.

std::uint64_t enc(unsigned unit, unsigned type, unsigned id, unsigned inst) {
  return (std::uint64_t{unit} << 24) | (std::uint64_t{type} << 20) | (std::uint64_t{id} << 10) | inst;
}
enum : unsigned { kU8 = 0, kU16 = 2, kS16 = 3, kU32 = 4, kU64 = 6 };
enum : unsigned { kNone = 0, kClock = 1, kTemp = 2, kWatt = 3, kNs = 4, kTenNs = 5 };

struct V19 {
  std::size_t tag;
  std::vector<std::uint8_t> body;
  std::int32_t count = 0;

  template <typename T>
  V19& add(unsigned unit, unsigned type, unsigned id, std::vector<T> values) {
    const std::uint64_t e = enc(unit, type, id, static_cast<unsigned>(values.size()));
    const std::size_t at = body.size();
    body.resize(at + tag);
    if (tag == 8) {
      std::memcpy(body.data() + at, &e, 8);
    } else {
      const auto e32 = static_cast<std::uint32_t>(e);
      std::memcpy(body.data() + at, &e32, 4);
    }
    for (const T v : values) {
      const std::size_t p = body.size();
      body.resize(p + sizeof(T));
      std::memcpy(body.data() + p, &v, sizeof(T));
    }
    ++count;
    return *this;
  }

  std::vector<std::uint8_t> bytes() const {
    std::vector<std::uint8_t> b(8);
    const auto size = static_cast<std::uint16_t>(8 + body.size());
    std::memcpy(b.data(), &size, 2);
    b[2] = 1;
    b[3] = 9;
    std::memcpy(b.data() + 4, &count, 4);
    b.insert(b.end(), body.begin(), body.end());
    return b;
  }
};

// The fields read, in the order and types SMU 13.0.6 writes them (ROCm/amdgpu
// smu_v13_0_6_ppt.h), with attributes the parser does not read between them.
V19 mi300_table(std::size_t tag, std::uint64_t energy, std::uint64_t fts) {
  V19 t{tag, {}};
  t.add<std::uint16_t>(kTemp, kU16, 0, {48})
      .add<std::uint16_t>(kWatt, kU16, 3, {162})
      .add<std::uint64_t>(8 /* BW_1 */, kU64, 6, {5300})  // mem_max_bandwidth: not read
      .add<std::uint64_t>(kNone, kU64, 7, {energy})
      .add<std::uint64_t>(kNs, kU64, 8, {987654321})
      .add<std::uint64_t>(kNone, kU64, 9, {5000000000ULL})
      .add<std::uint64_t>(9 /* DATA_1 */, kU64, 29, std::vector<std::uint64_t>(8, 7))  // xgmi_read_data_acc
      .add<std::uint64_t>(kTenNs, kU64, 32, {fts})
      .add<std::uint16_t>(kClock, kU16, 33, {2100, 2000, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF})
      .add<std::uint16_t>(kClock, kU16, 37, {1300})
      .add<std::uint16_t>(kTemp, kU16, 48, std::vector<std::uint16_t>(8, 40));  // temperature_hbm: not read
  return t;
}

void v19_both_encoding_widths() {
  for (const std::size_t tag : {std::size_t{8}, std::size_t{4}}) {
    const auto b = mi300_table(tag, 0x1122334455667788ULL, 123456789).bytes();
    const auto m = parse_gpu_metrics(b.data(), b.size());
    CHECK_EQ(m.content_revision, 9);
    CHECK_EQ(m.structure_size, b.size());
    CHECK_EQ(m.encoding_bytes, tag);
    CHECK_EQ(m.attribute_count, 11u);
    CHECK_EQ(m.temperature_hotspot_c, 48);
    CHECK_EQ(m.curr_socket_power_w, 162);
    CHECK_EQ(m.energy_accumulator, 0x1122334455667788ULL);
    CHECK_EQ(m.system_clock_counter, 987654321u);
    CHECK_EQ(m.accumulation_counter, 5000000000ULL);  // a U64 counter, kept whole
    CHECK_EQ(m.firmware_timestamp, 123456789u);
    CHECK_EQ(m.firmware_tick_ns, 10);
    CHECK_EQ(m.current_gfxclk_mhz().size(), 2u);
    CHECK_EQ(m.current_uclk_mhz, 1300);
    CHECK_EQ(m.temperature_mem_c, fingrav::amd::kNotSupported16);  // absent: not supported
    CHECK_EQ(m.throttle_status, fingrav::amd::kNotSupported32);
  }
  // A firmware clock in ns (AMDGPU_METRICS_UNIT_TIME_1) and an empty table.
  V19 ns{8, {}};
  ns.add<std::uint64_t>(kNs, kU64, 32, {5});
  const auto b = ns.bytes();
  CHECK_EQ(parse_gpu_metrics(b.data(), b.size()).firmware_tick_ns, 1);
  const auto empty = V19{8, {}}.bytes();
  CHECK_EQ(parse_gpu_metrics(empty.data(), empty.size()).energy_accumulator, fingrav::amd::kNotSupported64);
}

void v19_malformed() {
  auto set_count = [](std::vector<std::uint8_t> b, std::int32_t c) {
    std::memcpy(b.data() + 4, &c, 4);
    return b;
  };
  auto base = mi300_table(8, 1, 2).bytes();
  auto b = set_count(base, 1000);
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "attr_count 1000 needs at least");
  b = set_count(base, -1);
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "negative");
  b = set_count(base, 10);  // one attribute short: bytes left over
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "attributes end at byte");
  // Cut inside the last value (header kept consistent): neither width fits.
  b.assign(base.begin(), base.end() - 3);
  const auto cut = static_cast<std::uint16_t>(b.size());
  std::memcpy(b.data(), &cut, 2);
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "past the end of the table");
  // The header disagrees with the bytes read.
  CHECK_THROWS(parse_gpu_metrics(base.data(), base.size() - 1), GpuMetricsFormatError, "truncated");
  const std::vector<std::uint8_t> tiny = {6, 0, 1, 9, 0, 0};
  CHECK_THROWS(parse_gpu_metrics(tiny.data(), tiny.size()), GpuMetricsFormatError, "no room for its attr_count");
  // A type of unknown width (9): nothing after it can be found.
  V19 t{8, {}};
  t.add<std::uint16_t>(kTemp, 9, 0, {1});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "not one of the 8 types");
  // The same field twice.
  t = V19{8, {}};
  t.add<std::uint64_t>(kNone, kU64, 7, {1}).add<std::uint64_t>(kNone, kU64, 7, {2});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "energy_accumulator appears twice");
  // A scalar with two values, a time in watts, power in an unknown unit, a negative power, one too large.
  t = V19{8, {}};
  t.add<std::uint64_t>(kNone, kU64, 7, {1, 2});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "energy_accumulator has 2 values");
  t = V19{8, {}};
  t.add<std::uint64_t>(kWatt, kU64, 32, {1});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "not a time unit");
  t = V19{8, {}};
  t.add<std::uint16_t>(kNone, kU16, 3, {1});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "not watts");
  t = V19{8, {}};
  t.add<std::int16_t>(kWatt, kS16, 3, {-5});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "curr_socket_power is negative");
  t = V19{8, {}};
  t.add<std::uint32_t>(kWatt, kU32, 3, {70000});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "does not fit 16 bits");
  // Bits above 31 in an 8-byte encoding, in a table that is no 4-byte one either.
  b = mi300_table(8, 1, 2).bytes();
  b[8 + 7] = 0x80;
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "bits above 31");
  // Bytes that read consistently both ways (see gpu_metrics.cpp): as 8-byte
  // encodings, two U64 scalars; as 4-byte ones, a U64 then a U64[2] whose
  // encoding is the first value's upper half. Refused.
  t = V19{8, {}};
  t.add<std::uint64_t>(kNone, kU64, 500, {enc(kNone, kU64, 501, 2) << 32}).add<std::uint64_t>(kNone, kU64, 502, {9});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "both 8-byte and 4-byte");
  // An encoding with no values.
  t = V19{8, {}};
  t.add<std::uint8_t>(kNone, kU8, 600, {});
  b = t.bytes();
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "has no values (inst 0)");
}

void v19_random_corruption() {
  // Every byte flip of a real table parses or is refused, never read out of
  // bounds (ASan/UBSan in CI).
  std::uint64_t s = 0x2545F4914F6CDD1DULL;
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    auto b = mi300_table((next(s) & 1) ? 8 : 4, next(s), next(s)).bytes();
    const int flips = 1 + static_cast<int>(next(s) % 4);
    for (int k = 0; k < flips; ++k) b[next(s) % b.size()] = static_cast<std::uint8_t>(next(s));
    b.resize(b.size() - (next(s) % 4 == 0 ? next(s) % b.size() : 0));
    std::vector<std::uint8_t> exact(b.begin(), b.end());
    try {
      const auto m = parse_gpu_metrics(exact.data(), exact.size());
      CHECK_EQ(m.structure_size, exact.size());
      ++accepted;
    } catch (const GpuMetricsFormatError&) {
    }
  }
  CHECK(accepted > 100);  // flips inside values leave a valid table
}

std::string temp_file(const std::vector<std::uint8_t>& data) {
  char name[] = "/tmp/fingrav-gpu-metrics-XXXXXX";
  const int fd = ::mkstemp(name);
  CHECK(fd >= 0);
  CHECK(::pwrite(fd, data.data(), data.size(), 0) == static_cast<ssize_t>(data.size()));
  ::close(fd);
  return name;
}

void rewrite(const std::string& path, const std::vector<std::uint8_t>& data) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  CHECK(fd >= 0);
  CHECK(::pwrite(fd, data.data(), data.size(), 0) == static_cast<ssize_t>(data.size()));
  CHECK(::ftruncate(fd, static_cast<off_t>(data.size())) == 0);
  ::close(fd);
}

void source_on_a_file() {
  const auto& o = kLayouts[5];
  const std::string path = temp_file(table(o, 1000, 500000));
  {
    fingrav::amd::GpuMetricsSource src(path);
    // The period depends on the driver's cache: unknown here, measured by the backend.
    CHECK_EQ(src.info().native_period_ns, 0);
    CHECK_EQ(src.info().window_ns, 5'000'000u);
    fingrav::Reading r[4];
    CHECK_EQ(src.poll(r, 4).count, 0u);  // seeds the difference
    rewrite(path, table(o, 1000 + 65536, 600000));
    const auto res = src.poll(r, 4);
    CHECK_EQ(res.count, 1u);
    CHECK_EQ(r[0].source_ts, 600000);
    CHECK_EQ(r[0].window_ns, 1'000'000u);
    CHECK(r[0].power_w[0] == 1000.0f);  // 1 J over 1 ms
    CHECK(r[0].flags == fingrav::kFlagDerived);
    CHECK(std::isnan(r[0].power_w[1]));
    rewrite(path, std::vector<std::uint8_t>(10, 0xAB));
    CHECK(src.poll(r, 4).status == fingrav::PollStatus::kFatalError);
    CHECK(src.last_error().find("gpu_metrics") != std::string::npos);
  }
  ::unlink(path.c_str());
  CHECK_THROWS(fingrav::amd::GpuMetricsSource(path), fingrav::DeviceUnavailable, "amdgpu");
}

void hwmon_text() {
  using fingrav::amd::parse_hwmon_microwatts;
  CHECK_EQ(parse_hwmon_microwatts("123\n", 4), 123u);
  CHECK_EQ(parse_hwmon_microwatts("18446744073709551615", 20), 18446744073709551615ULL);
  CHECK_THROWS(parse_hwmon_microwatts("18446744073709551616", 20), std::invalid_argument, "overflows");
  CHECK_THROWS(parse_hwmon_microwatts("", 0), std::invalid_argument, "empty");
  CHECK_THROWS(parse_hwmon_microwatts("1 2", 3), std::invalid_argument, "not a decimal");
}

}  // namespace

int main() {
  return fingrav_test::run_tests("gpu_metrics", {{"valid_tables", valid_tables},
                                                 {"truncated_and_oversized", truncated_and_oversized},
                                                 {"unknown_revisions", unknown_revisions},
                                                 {"v19_both_encoding_widths", v19_both_encoding_widths},
                                                 {"v19_malformed", v19_malformed},
                                                 {"v19_random_corruption", v19_random_corruption},
                                                 {"random_buffers", random_buffers},
                                                 {"source_on_a_file", source_on_a_file},
                                                 {"hwmon_text", hwmon_text}});
}
