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
    CHECK_EQ(m.accumulation_counter, o.acc >= 0 ? 99u : fingrav::amd::kNotSupported32);
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
  b[3] = 9;
  CHECK_THROWS(parse_gpu_metrics(b.data(), b.size()), GpuMetricsFormatError, "revision 1.9 (structure_size 288");
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
                                                 {"random_buffers", random_buffers},
                                                 {"source_on_a_file", source_on_a_file},
                                                 {"hwmon_text", hwmon_text}});
}
