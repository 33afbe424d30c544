// libfingrav_rocprofiler_tool.so against the stand-in rocprofiler-sdk: the
// tool is found through ROCP_TOOL_LIBRARIES, every dispatch reaches the launch
// journal with its name, GPU ordinal, queue, sizes and times converted to
// CLOCK_BOOTTIME; a tiny ring counts its drops; another client in the same
// process gets every record too. One case per process (argv[1]).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "check.hpp"
#include "fingrav/sim/standin_abi.h"
#include "launch_journal.hpp"

namespace {

std::int64_t now(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

std::string temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/fingrav-rocp-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  CHECK(::mkdtemp(buf.data()) != nullptr);
  return buf.data();
}

const std::vector<std::string> kNames = {"gemm_f16_128x128", "void reduce<float, 256>(float const*, float*)",
                                         "elementwise_add", "softmax_fwd", "layernorm_bwd"};

struct Dispatch {
  std::string name;
  std::int64_t start, end;
  std::int32_t device;
  std::uint64_t queue;
  std::uint32_t grid[3], block[3];
};

Dispatch dispatch_of(std::uint64_t i, std::int64_t t0) {
  Dispatch d;
  d.name = kNames[(i * 7) % kNames.size()];
  d.start = t0 + static_cast<std::int64_t>(i) * 10'000;
  d.end = d.start + 2'000 + static_cast<std::int64_t>(i % 13) * 100;
  d.device = static_cast<std::int32_t>(i % 3);
  d.queue = 0x7000 + i % 4;
  d.grid[0] = 1024 * static_cast<std::uint32_t>(1 + i % 5);
  d.grid[1] = 1;
  d.grid[2] = 1;
  d.block[0] = 256;
  d.block[1] = 1;
  d.block[2] = 1;
  return d;
}

// Runs n dispatches through the stand-in and returns (raw->boottime offset before, after).
std::pair<std::int64_t, std::int64_t> run(std::uint64_t n, std::int64_t t0) {
  const std::int64_t before = now(CLOCK_BOOTTIME) - now(CLOCK_MONOTONIC_RAW);
  CHECK_EQ(fingrav_standin_init(), 0);
  for (std::uint64_t i = 0; i < n; ++i) {
    const Dispatch d = dispatch_of(i, t0);
    CHECK_EQ(fingrav_standin_dispatch(d.name.c_str(), d.start, d.end, d.device, d.queue, d.grid, d.block), 0);
  }
  fingrav_standin_fini();
  const std::int64_t after = now(CLOCK_BOOTTIME) - now(CLOCK_MONOTONIC_RAW);
  return {before, after};
}

launch_test::Journal the_journal(const std::string& dir) {
  const std::string path = dir + "/launches." + std::to_string(::getpid()) + ".journal";
  struct stat st{};
  CHECK_MSG(::stat(path.c_str(), &st) == 0, "no journal at " << path);
  return launch_test::read_journal(path);
}

void check_records(const launch_test::Journal& j, std::uint64_t n, std::int64_t t0, std::pair<std::int64_t, std::int64_t> off) {
  CHECK_MSG(j.torn.empty(), j.torn);
  CHECK_EQ(j.records.size(), n);
  std::vector<int> seen(n, 0);
  const std::int64_t lo = std::min(off.first, off.second) - 50'000, hi = std::max(off.first, off.second) + 50'000;
  for (const auto& r : j.records) {
    // The stand-in numbers correlation ids 1, 2, ... in dispatch order.
    CHECK(r.correlation_id >= 1 && r.correlation_id <= n);
    const std::uint64_t i = r.correlation_id - 1;
    ++seen[i];
    const Dispatch d = dispatch_of(i, t0);
    CHECK_MSG(r.start_ns - d.start >= lo && r.start_ns - d.start <= hi,
              "record " << i << ": BOOTTIME start " << r.start_ns << " is not MONOTONIC_RAW " << d.start
                        << " + the clocks' offset [" << lo << ", " << hi << "]");
    CHECK_EQ(r.end_ns - r.start_ns, d.end - d.start);
    CHECK(r.symbol < j.names.size());
    CHECK_EQ(j.names[r.symbol], d.name);
    CHECK_EQ(r.device, d.device);
    CHECK_EQ(r.queue, d.queue);
    for (int k = 0; k < 3; ++k) {
      CHECK_EQ(r.grid[k], d.grid[k]);
      CHECK_EQ(r.block[k], d.block[k]);
    }
  }
  for (int s : seen) CHECK_EQ(s, 1);
  CHECK_EQ(j.names.size(), kNames.size());  // each name stored once
  CHECK(j.head.find("\"vendor\": \"rocm\"") != std::string::npos);
  CHECK(j.head.find("\"record_clock\": \"CLOCK_BOOTTIME\"") != std::string::npos);
  CHECK(j.bracket_rows > 0);
}

int all_records(std::uint64_t n) {
  const std::string dir = temp_dir();
  ::setenv("FINGRAV_LAUNCH_DIR", dir.c_str(), 1);
  ::setenv("ROCP_TOOL_LIBRARIES", TOOL_PATH, 1);
  const std::int64_t t0 = now(CLOCK_MONOTONIC_RAW);
  const auto off = run(n, t0);
  const auto j = the_journal(dir);
  check_records(j, n, t0, off);
  CHECK_EQ(launch_test::json_int(j.last_stat, "dropped"), 0);
  CHECK_EQ(launch_test::json_int(j.last_stat, "vendor_dropped"), 0);
  CHECK(launch_test::json_true(j.last_stat, "closed"));
  CHECK(j.notes.empty());
  return 0;
}

int tiny_ring() {
  const std::string dir = temp_dir();
  ::setenv("FINGRAV_LAUNCH_DIR", dir.c_str(), 1);
  ::setenv("FINGRAV_LAUNCH_CAPACITY", "4", 1);
  ::setenv("ROCP_TOOL_LIBRARIES", TOOL_PATH, 1);
  constexpr std::uint64_t n = 20000;
  (void)run(n, now(CLOCK_MONOTONIC_RAW));
  const auto j = the_journal(dir);
  const long long dropped = launch_test::json_int(j.last_stat, "dropped");
  // The SDK hands ~11,000 records per buffer callback: a 4-slot ring keeps few.
  CHECK_MSG(dropped > 0, "a 4-slot ring took " << n << " records without a drop");
  CHECK_EQ(static_cast<std::uint64_t>(dropped) + j.records.size(), n);
  CHECK_EQ(launch_test::json_int(j.last_stat, "records"), static_cast<long long>(j.records.size()));
  return 0;
}

int two_tools() {
  const std::string dir = temp_dir();
  const std::string out = dir + "/other.txt";
  ::setenv("FINGRAV_LAUNCH_DIR", dir.c_str(), 1);
  ::setenv("OTHER_TOOL_OUT", out.c_str(), 1);
  ::setenv("ROCP_TOOL_LIBRARIES", (std::string(OTHER_TOOL_PATH) + ":" + TOOL_PATH).c_str(), 1);
  constexpr std::uint64_t n = 30000;
  const std::int64_t t0 = now(CLOCK_MONOTONIC_RAW);
  const auto off = run(n, t0);
  check_records(the_journal(dir), n, t0, off);
  unsigned long long count = 0, sum = 0;
  FILE* f = std::fopen(out.c_str(), "r");
  CHECK(f != nullptr);
  CHECK_EQ(std::fscanf(f, "%llu %llu", &count, &sum), 2);
  std::fclose(f);
  CHECK_EQ(count, n);
  CHECK_EQ(sum, n * (n + 1) / 2);
  return 0;
}

int passive() {
  // No FINGRAV_LAUNCH_DIR: the tool declines to be configured and writes nothing.
  const std::string dir = temp_dir();
  ::unsetenv("FINGRAV_LAUNCH_DIR");
  ::setenv("ROCP_TOOL_LIBRARIES", TOOL_PATH, 1);
  (void)run(100, now(CLOCK_MONOTONIC_RAW));
  CHECK_EQ(std::system(("test -z \"$(ls -A " + dir + ")\"").c_str()), 0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all_records";
  const std::uint64_t n = fingrav_test::env_u64("FINGRAV_TOOL_DISPATCHES", 100000);
  int rc = 1;
  if (which == "all_records") {
    rc = all_records(n);
  } else if (which == "sdk_0_5") {
    // rocprofiler-sdk 0.5 (ROCm 6.3): the two-word callback record layout.
    ::setenv("FINGRAV_STANDIN_ROCP_VERSION", "500", 1);
    rc = all_records(20000);
  } else if (which == "tiny_ring") {
    rc = tiny_ring();
  } else if (which == "two_tools") {
    rc = two_tools();
  } else if (which == "passive") {
    rc = passive();
  } else {
    std::fprintf(stderr, "unknown case %s\n", which.c_str());
    return 2;
  }
  std::printf("rocprofiler_tool.%s: passed\n", which.c_str());
  return rc;
}
