// The CUPTI Activity consumer (libfingrav_cupti_tool.so) against the stand-in
// libcupti (libfingrav_standin_cupti.so), end to end: each case runs this
// program again as a child, an "application" that loads the stand-in CUDA
// runtime, which loads the tool through CUDA_INJECTION64_PATH and calls its
// InitializeInjection as the driver does; the child dispatches kernels at
// known CLOCK_MONOTONIC_RAW times and exits (the tool's atexit handler
// flushes CUPTI and closes the capture). The parent then reads the capture
// file and the child's stderr. A child per case: CUPTI's state is per process.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "fingrav/host_clock.hpp"
#include "fingrav/sim/standin_abi.h"
#include "launch_journal.hpp"

namespace {

using fingrav::launch::LaunchRecord;

// The simulated application's kernels: i-th dispatch's name, stream, device,
// geometry, and times (ns after the child's t0).
const char* const kKernels[] = {"gemm_kernel<float>", "_Z6reduceILi256EEvPKfPf", "softmax", "all_reduce"};
constexpr std::int64_t kSpacingNs = 10'000;
std::int64_t duration_of(std::uint64_t i) { return 1'000 + static_cast<std::int64_t>(i % 7) * 150; }
std::uint64_t stream_of(std::uint64_t i) { return 7 + (i % 3); }
std::int32_t device_of(std::uint64_t i) { return static_cast<std::int32_t>((i / 3) % 2); }
std::uint32_t grid_of(std::uint64_t i) { return 1 + static_cast<std::uint32_t>(i % 1000); }

struct Standin {
  void* handle = nullptr;
  decltype(&fingrav_standin_init) init = nullptr;
  decltype(&fingrav_standin_dispatch) dispatch = nullptr;
  decltype(&fingrav_standin_fini) fini = nullptr;
};

// The stand-in the child loads: the built one, or the copy FINGRAV_TEST_STANDIN
// names (laid out as the nvidia-cuda-cupti-cu12 wheel's libcupti.so.12).
Standin open_standin() {
  Standin s;
  const char* copy = std::getenv("FINGRAV_TEST_STANDIN");
  s.handle = dlopen(copy != nullptr ? copy : STANDIN_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
  CHECK_MSG(s.handle != nullptr, dlerror());
  s.init = reinterpret_cast<decltype(s.init)>(dlsym(s.handle, "fingrav_standin_init"));
  s.dispatch = reinterpret_cast<decltype(s.dispatch)>(dlsym(s.handle, "fingrav_standin_dispatch"));
  s.fini = reinterpret_cast<decltype(s.fini)>(dlsym(s.handle, "fingrav_standin_fini"));
  CHECK(s.init != nullptr && s.dispatch != nullptr && s.fini != nullptr);
  return s;
}

// The child: dispatches n kernels, `per_ms` of them each millisecond of real
// time (0: as fast as it can), then shuts the runtime down and exits.
int child(const std::string& scenario, std::int64_t t0, std::uint64_t n, std::uint64_t per_ms) {
  Standin s = open_standin();
  if (scenario == "conflict") {
    // Another CUPTI client (torch.profiler's Kineto, Nsight) subscribed first.
    using Subscribe = int (*)(void**, void*, void*);
    auto subscribe = reinterpret_cast<Subscribe>(dlsym(s.handle, "cuptiSubscribe"));
    void* handle = nullptr;
    CHECK(subscribe != nullptr);
    CHECK_EQ(subscribe(&handle, nullptr, nullptr), 0);
  }
  CHECK_EQ(s.init(), FINGRAV_STANDIN_OK);
  const auto wall0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    if (per_ms > 0 && i % per_ms == 0) {
      std::this_thread::sleep_until(wall0 + std::chrono::milliseconds(i / per_ms));
    }
    const std::int64_t start = t0 + static_cast<std::int64_t>(i) * kSpacingNs;
    const std::uint32_t grid[3] = {grid_of(i), 2, 1};
    const std::uint32_t block[3] = {256, 1, 1};
    CHECK_EQ(s.dispatch(kKernels[i % 4], start, start + duration_of(i), device_of(i), stream_of(i), grid, block),
             FINGRAV_STANDIN_OK);
  }
  s.fini();
  return 0;  // exit: the tool's atexit handler flushes CUPTI and closes the capture
}

// One child's run; its folder is removed when the case is done.
struct Run {
  std::string dir;
  std::string journal;
  std::string err;  // the child's stderr
  std::int64_t t0 = 0;
  Run() = default;
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  Run(Run&& o) noexcept : dir(std::move(o.dir)), journal(std::move(o.journal)), err(std::move(o.err)), t0(o.t0) {
    o.dir.clear();
  }
  ~Run() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs the child with the capture environment plus `env` ("NAME=value"; "NAME" alone unsets).
Run spawn(const std::string& scenario, std::uint64_t n, std::uint64_t per_ms, const std::vector<std::string>& env) {
  Run run;
  char tmpl[] = "/tmp/fingrav-cupti-XXXXXX";
  CHECK(mkdtemp(tmpl) != nullptr);
  run.dir = tmpl;
  run.t0 = fingrav::host_now_ns();
  const std::string err_path = run.dir + "/stderr.txt";
  const pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    setenv("FINGRAV_LAUNCH_DIR", run.dir.c_str(), 1);
    setenv("CUDA_INJECTION64_PATH", CUPTI_TOOL_PATH, 1);
    setenv("FINGRAV_CUPTI_LIBRARY", STANDIN_CUPTI_PATH, 1);
    for (const auto& e : env) {
      const auto eq = e.find('=');
      if (eq == std::string::npos) {
        unsetenv(e.c_str());
      } else {
        setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
      }
    }
    const int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(97);
    const std::string t0 = std::to_string(run.t0), ns = std::to_string(n), pm = std::to_string(per_ms);
    execl("/proc/self/exe", "test_cupti_tool", "child", scenario.c_str(), t0.c_str(), ns.c_str(), pm.c_str(),
          static_cast<char*>(nullptr));
    _exit(98);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  run.err = slurp(err_path);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "child " << scenario << " ended with status " << status << "; its stderr:\n" << run.err);
  run.journal = run.dir + "/launches." + std::to_string(pid) + ".journal";
  return run;
}

// CLOCK_REALTIME minus CLOCK_MONOTONIC_RAW from the capture's BRRT brackets
// (rows raw_before, realtime, raw_after): the median over every bracket.
std::int64_t realtime_offset(const launch_test::Journal& j) {
  std::vector<std::int64_t> offsets;
  for (const auto& f : j.frames) {
    if (f.tag != "BRRT") continue;
    const std::size_t off = launch_test::npy_data_offset(f.payload);
    for (std::size_t at = off; at + 24 <= f.payload.size(); at += 24) {
      const auto before = launch_test::get_le<std::int64_t>(f.payload, at);
      const auto rt = launch_test::get_le<std::int64_t>(f.payload, at + 8);
      const auto after = launch_test::get_le<std::int64_t>(f.payload, at + 16);
      offsets.push_back(rt - (before + (after - before) / 2));
    }
  }
  CHECK_MSG(!offsets.empty(), "the capture holds no CLOCK_REALTIME brackets");
  std::nth_element(offsets.begin(), offsets.begin() + static_cast<std::ptrdiff_t>(offsets.size() / 2), offsets.end());
  return offsets[offsets.size() / 2];
}

bool has_note(const launch_test::Journal& j, const std::string& key) {
  for (const auto& n : j.notes) {
    if (n.find("\"key\": \"" + key + "\"") != std::string::npos) return true;
  }
  return false;
}

// 10^5 kernels over four names, three streams and two devices, dispatched at
// 10^5 a second: every one arrives, once, with its times, ids and geometry.
void test_data_loss_none_at_1e5_records() {
  constexpr std::uint64_t n = 100'000;
  const Run run = spawn("whole", n, 100, {});
  const auto j = launch_test::read_journal(run.journal);
  CHECK(j.magic_ok);
  CHECK_MSG(j.torn.empty(), j.torn);
  CHECK(j.head.find("\"vendor\": \"cuda\"") != std::string::npos);
  CHECK(j.head.find("\"record_clock\": \"CLOCK_REALTIME\"") != std::string::npos);
  CHECK_EQ(j.records.size(), n);
  CHECK_EQ(launch_test::json_int(j.last_stat, "records"), static_cast<long long>(n));
  CHECK_EQ(launch_test::json_int(j.last_stat, "dropped"), 0);
  CHECK_EQ(launch_test::json_int(j.last_stat, "vendor_dropped"), 0);
  CHECK(launch_test::json_true(j.last_stat, "closed"));
  CHECK_EQ(j.names.size(), 4u);  // each name once
  std::vector<LaunchRecord> recs = j.records;
  std::sort(recs.begin(), recs.end(),
            [](const LaunchRecord& a, const LaunchRecord& b) { return a.correlation_id < b.correlation_id; });
  const std::int64_t offset = realtime_offset(j);
  std::int64_t worst = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const LaunchRecord& r = recs[i];
    CHECK_EQ(r.correlation_id, i + 1);  // the stand-in numbers from 1, in dispatch order
    CHECK_EQ(j.names.at(r.symbol), std::string(kKernels[i % 4]));
    CHECK_EQ(r.queue, stream_of(i));
    CHECK_EQ(r.device, device_of(i));
    CHECK_EQ(r.grid[0], grid_of(i));
    CHECK_EQ(r.grid[1], 2u);
    CHECK_EQ(r.grid[2], 1u);
    CHECK_EQ(r.block[0], 256u);
    CHECK_EQ(r.block[1], 1u);
    // One offset per record: its duration is exact on any clock.
    CHECK_EQ(r.end_ns - r.start_ns, duration_of(i));
    const std::int64_t raw_start = run.t0 + static_cast<std::int64_t>(i) * kSpacingNs;
    worst = std::max(worst, std::abs(r.start_ns - offset - raw_start));
  }
  // Placed back on CLOCK_MONOTONIC_RAW through the capture's own brackets:
  // the error is the widths of the stand-in's conversion and of the brackets
  // (each the narrowest or the median of several) and CLOCK_REALTIME's slew
  // over the run; a wrong clock or unit is off by seconds or more.
  CHECK_MSG(worst < 20'000'000, "worst start error on CLOCK_MONOTONIC_RAW: " << worst << " ns");
  CHECK(has_note(j, "cupti"));
}

// A ring of two slots cannot hold a 4,500-record CUPTI buffer: the records
// that do not fit are counted as dropped, and every dispatch is accounted for.
void test_data_loss_tiny_ring_counts_drops() {
  constexpr std::uint64_t n = 10'000;
  const Run run = spawn("tiny_ring", n, 0, {"FINGRAV_LAUNCH_CAPACITY=2"});
  const auto j = launch_test::read_journal(run.journal);
  CHECK_MSG(j.torn.empty(), j.torn);
  const long long dropped = launch_test::json_int(j.last_stat, "dropped");
  CHECK(dropped > 0);
  CHECK_EQ(static_cast<long long>(j.records.size()) + dropped, static_cast<long long>(n));
  CHECK_EQ(launch_test::json_int(j.last_stat, "vendor_dropped"), 0);
  CHECK(launch_test::json_true(j.last_stat, "closed"));
}

// CUPTI's own losses (its device buffer overflowed: here held to 100 records
// until delivery) reach vendor_dropped through cuptiActivityGetNumDroppedRecords.
void test_data_loss_cupti_drops_reach_vendor_dropped() {
  constexpr std::uint64_t n = 1'000;
  const Run run = spawn("cupti_drops", n, 0, {"FINGRAV_STANDIN_CUPTI_DEVICE_RECORDS=100"});
  const auto j = launch_test::read_journal(run.journal);
  CHECK_MSG(j.torn.empty(), j.torn);
  const long long vendor = launch_test::json_int(j.last_stat, "vendor_dropped");
  CHECK(vendor >= 1);
  CHECK_EQ(static_cast<long long>(j.records.size()) + vendor, static_cast<long long>(n));
  CHECK_EQ(launch_test::json_int(j.last_stat, "dropped"), 0);
}

// Another CUPTI subscriber first (torch.profiler, Nsight): the capture says
// so in a NOTE and the child's stderr says it once; no records, never silently.
void test_unclear_subscriber_conflict_is_noted() {
  const Run run = spawn("conflict", 10, 0, {});
  const auto j = launch_test::read_journal(run.journal);
  CHECK(j.magic_ok);
  CHECK(has_note(j, "subscriber_conflict"));
  CHECK_EQ(j.records.size(), 0u);
  CHECK(launch_test::json_true(j.last_stat, "closed"));
  CHECK_MSG(run.err.find("one subscriber per process") != std::string::npos, run.err);
  CHECK_MSG(run.err.find("torch.profiler") != std::string::npos, run.err);
  CHECK_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);
}

// libcupti missing: a NOTE and a line on stderr naming it, not an empty file.
void test_unclear_missing_libcupti_is_noted() {
  const Run run = spawn("missing", 10, 0, {"FINGRAV_CUPTI_LIBRARY=/nonexistent/libcupti.so"});
  const auto j = launch_test::read_journal(run.journal);
  CHECK(has_note(j, "cupti_unavailable"));
  CHECK_EQ(j.records.size(), 0u);
  CHECK_MSG(run.err.find("FINGRAV_CUPTI_LIBRARY") != std::string::npos || run.err.find("libcupti") != std::string::npos,
            run.err);
}

// A bad FINGRAV_LAUNCH_CAPACITY: stderr names the variable, no file is
// written, and the application runs on (its exit status is untouched; under
// LeakSanitizer the consumer's state must stay reachable on this path too).
void test_unclear_bad_capacity_is_named() {
  const Run run = spawn("bad_capacity", 10, 0, {"FINGRAV_LAUNCH_CAPACITY=3"});
  CHECK(access(run.journal.c_str(), F_OK) != 0);
  CHECK_MSG(run.err.find("FINGRAV_LAUNCH_CAPACITY='3'") != std::string::npos, run.err);
}

// Installed as a wheel: site-packages/fingrav_native/lib/ holds the tool and
// site-packages/nvidia/cuda_cupti/lib/ the CUPTI wheel's libcupti.so.12 (here a
// copy of the stand-in). Without FINGRAV_CUPTI_LIBRARY the tool finds it there.
void test_data_loss_none_with_the_wheels_libcupti() {
  void* system_cupti = dlopen("libcupti.so.12", RTLD_LAZY | RTLD_LOCAL);
  if (system_cupti != nullptr) {
    std::printf("  skipped: this host's loader finds a libcupti.so.12 of its own, which the tool prefers\n");
    dlclose(system_cupti);
    return;
  }
  char tmpl[] = "/tmp/fingrav-site-XXXXXX";
  CHECK(mkdtemp(tmpl) != nullptr);
  const std::filesystem::path site = tmpl;
  std::filesystem::create_directories(site / "fingrav_native" / "lib");
  std::filesystem::create_directories(site / "nvidia" / "cuda_cupti" / "lib");
  const auto tool = site / "fingrav_native" / "lib" / "libfingrav_cupti_tool.so";
  const auto cupti = site / "nvidia" / "cuda_cupti" / "lib" / "libcupti.so.12";
  std::filesystem::copy_file(CUPTI_TOOL_PATH, tool);
  std::filesystem::copy_file(STANDIN_CUPTI_PATH, cupti);
  constexpr std::uint64_t n = 500;
  {
    const Run run = spawn("wheel", n, 0,
                          {"FINGRAV_CUPTI_LIBRARY", "CUDA_INJECTION64_PATH=" + tool.string(),
                           "FINGRAV_TEST_STANDIN=" + cupti.string()});
    const auto j = launch_test::read_journal(run.journal);
    CHECK_EQ(j.records.size(), n);
    bool named = false;
    for (const auto& note : j.notes) named = named || note.find(cupti.filename().string()) != std::string::npos;
    CHECK_MSG(named, "the cupti NOTE does not name the wheel's library");
  }
  std::error_code ec;
  std::filesystem::remove_all(site, ec);
}

// Without FINGRAV_LAUNCH_DIR the tool stays passive: no file, no CUPTI.
void test_silently_wrong_passive_without_launch_dir() {
  const Run run = spawn("passive", 10, 0, {"FINGRAV_LAUNCH_DIR"});
  CHECK(access(run.journal.c_str(), F_OK) != 0);
  CHECK_MSG(run.err.empty(), run.err);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "child") {
    return child(argv[2], std::stoll(argv[3]), std::stoull(argv[4]), std::stoull(argv[5]));
  }
  return fingrav_test::run_tests("cupti_tool", {
      {"test_data_loss_none_at_1e5_records", test_data_loss_none_at_1e5_records},
      {"test_data_loss_tiny_ring_counts_drops", test_data_loss_tiny_ring_counts_drops},
      {"test_data_loss_cupti_drops_reach_vendor_dropped", test_data_loss_cupti_drops_reach_vendor_dropped},
      {"test_unclear_subscriber_conflict_is_noted", test_unclear_subscriber_conflict_is_noted},
      {"test_unclear_missing_libcupti_is_noted", test_unclear_missing_libcupti_is_noted},
      {"test_unclear_bad_capacity_is_named", test_unclear_bad_capacity_is_named},
      {"test_data_loss_none_with_the_wheels_libcupti", test_data_loss_none_with_the_wheels_libcupti},
      {"test_silently_wrong_passive_without_launch_dir", test_silently_wrong_passive_without_launch_dir},
  });
}
