// LaunchCapture: every pushed record and interned name reaches the journal,
// a full ring counts its drops, close() is idempotent, and a file cut short in
// the middle of a record keeps every whole record before the cut.
//
// With FINGRAV_LAUNCH_FIXTURE=PATH set it also writes a small journal there
// (the Python reader's round-trip fixture, tests/data/launches_cpp.journal).
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "check.hpp"
#include "fingrav/host_clock.hpp"
#include "fingrav/launch/crc32.hpp"
#include "fingrav/launch/launch_capture.hpp"
#include "launch_journal.hpp"

using fingrav::launch::CaptureOptions;
using fingrav::launch::LaunchCapture;
using fingrav::launch::LaunchRecord;

namespace {

std::string temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/fingrav-launch-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return std::string(buf.data());
}

CaptureOptions options(const std::string& path, std::size_t capacity = 1024) {
  CaptureOptions o;
  o.path = path;
  o.vendor = "rocm";
  o.record_clock = "CLOCK_BOOTTIME";
  o.capacity = capacity;
  o.flush_period_ns = 5'000'000;
  o.tool = "test";
  o.tool_version = "0";
  return o;
}

LaunchRecord record_of(std::uint64_t i, std::uint32_t symbol) {
  LaunchRecord r{};
  r.start_ns = static_cast<std::int64_t>(i) * 1000 + 17;
  r.end_ns = r.start_ns + 500 + static_cast<std::int64_t>(i % 7);
  r.correlation_id = i + 1;
  r.queue = i % 3;
  r.symbol = symbol;
  r.device = static_cast<std::int32_t>(i % 2);
  r.grid[0] = static_cast<std::uint32_t>(i);
  r.grid[1] = 2;
  r.grid[2] = 3;
  r.block[0] = 256;
  r.block[1] = 1;
  r.block[2] = 1;
  return r;
}

void records_and_symbols_arrive() {
  const std::string path = temp_dir() + "/a.journal";
  // A ring larger than all the records, so no drop depends on the writer's scheduling.
  auto cap = LaunchCapture::open(options(path, 1 << 16));
  // Names a JSON writer must escape, and bytes that are not UTF-8.
  const std::vector<std::string> names = {"kernel_a", "void k<\"q\">(float*)", "tab\there", "bad\xff\xfe"};
  std::vector<std::uint32_t> ids;
  for (const auto& n : names) ids.push_back(cap->intern(n));
  CHECK_EQ(cap->intern("kernel_a"), ids[0]);
  // Two producers at once (the spin lock), pausing now and then so drains interleave with pushes.
  constexpr std::uint64_t kPer = 20000;
  auto produce = [&](std::uint64_t base) {
    for (std::uint64_t i = 0; i < kPer; ++i) {
      CHECK_MSG(cap->push(record_of(base + i, ids[(base + i) % ids.size()])), "push refused at " << i);
      if (i % 1024 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(6));
    }
  };
  std::thread t1(produce, 0), t2(produce, kPer);
  t1.join();
  t2.join();
  cap->note("subscriber_conflict", "another \"tool\"");
  cap->add_vendor_drops(5);
  cap->close();
  CHECK(cap->closed());
  const auto j = launch_test::read_journal(path);
  CHECK(j.magic_ok);
  CHECK_MSG(j.torn.empty(), j.torn);
  CHECK_EQ(j.frames.front().tag, std::string("HEAD"));
  CHECK(j.head.find("\"format\": \"fingrav-launches\"") != std::string::npos);
  CHECK(j.head.find("\"record_clock\": \"CLOCK_BOOTTIME\"") != std::string::npos);
  CHECK_EQ(launch_test::json_int(j.head, "capacity"), 65536);
  CHECK_EQ(launch_test::json_int(j.head, "pid"), ::getpid());
  CHECK_EQ(j.records.size(), 2 * kPer);
  std::vector<int> seen(2 * kPer, 0);
  for (const auto& r : j.records) {
    const std::uint64_t i = r.correlation_id - 1;
    CHECK(i < 2 * kPer);
    ++seen[i];
    const LaunchRecord e = record_of(i, ids[i % ids.size()]);
    CHECK_EQ(std::memcmp(&r, &e, sizeof r), 0);
  }
  for (int s : seen) CHECK_EQ(s, 1);
  CHECK_EQ(j.names.size(), names.size());
  CHECK_EQ(j.names[0], names[0]);
  CHECK_EQ(j.names[1], names[1]);
  CHECK_EQ(j.names[2], names[2]);
  CHECK(j.names[3].rfind("bad", 0) == 0);
  // SYMB comes before the first LNCH that could use it.
  std::size_t first_symb = j.frames.size(), first_lnch = j.frames.size();
  for (std::size_t i = 0; i < j.frames.size(); ++i) {
    if (j.frames[i].tag == "SYMB" && first_symb == j.frames.size()) first_symb = i;
    if (j.frames[i].tag == "LNCH" && first_lnch == j.frames.size()) first_lnch = i;
  }
  CHECK(first_symb < first_lnch);
  CHECK_EQ(launch_test::json_int(j.last_stat, "records"), 2 * kPer);
  CHECK_EQ(launch_test::json_int(j.last_stat, "dropped"), 0);
  CHECK_EQ(launch_test::json_int(j.last_stat, "vendor_dropped"), 5);
  CHECK(launch_test::json_true(j.last_stat, "closed"));
  CHECK(j.bracket_rows >= 8);
  CHECK_EQ(j.notes.size(), 1u);
  CHECK(j.notes[0].find("\"key\": \"subscriber_conflict\"") != std::string::npos);
}

void tiny_ring_counts_drops() {
  const std::string path = temp_dir() + "/b.journal";
  auto o = options(path, 2);
  o.flush_period_ns = 10'000'000'000LL;  // the writer drains only when a push finds the ring half full
  auto cap = LaunchCapture::open(o);
  const std::uint32_t id = cap->intern("k");
  // Push until the ring refuses one: a refusal is counted at once, never blocks.
  std::uint64_t pushed = 0, accepted = 0;
  while (cap->dropped() == 0 && pushed < 10'000'000) accepted += cap->push(record_of(pushed++, id)) ? 1 : 0;
  CHECK_EQ(cap->dropped(), 1u);
  CHECK_EQ(accepted, pushed - 1);
  for (int i = 0; i < 10; ++i) accepted += cap->push(record_of(pushed++, id)) ? 1 : 0;
  const std::uint64_t dropped = cap->dropped();
  cap->close();
  const auto j = launch_test::read_journal(path);
  CHECK_EQ(j.records.size(), accepted);
  CHECK_EQ(accepted + dropped, pushed);
  CHECK_EQ(launch_test::json_int(j.last_stat, "records"), static_cast<long long>(accepted));
  CHECK_EQ(launch_test::json_int(j.last_stat, "dropped"), static_cast<long long>(dropped));
}

void close_is_idempotent() {
  const std::string path = temp_dir() + "/c.journal";
  auto cap = LaunchCapture::open(options(path));
  CHECK(cap->push(record_of(0, cap->intern("k"))));
  cap->close();
  struct stat st1{};
  CHECK_EQ(::stat(path.c_str(), &st1), 0);
  cap->close();
  // A record after close is refused and counted, never silently lost.
  CHECK(!cap->push(record_of(1, 0)));
  CHECK_EQ(cap->dropped(), 1u);
  std::thread other([&] { cap->close(); });
  other.join();
  struct stat st2{};
  CHECK_EQ(::stat(path.c_str(), &st2), 0);
  CHECK_EQ(st1.st_size, st2.st_size);
  cap.reset();  // the destructor's close is a no-op too
  const auto j = launch_test::read_journal(path);
  CHECK_EQ(j.records.size(), 1u);
  CHECK_MSG(j.torn.empty(), j.torn);
}

void cut_short_keeps_whole_records() {
  const std::string dir = temp_dir();
  const std::string path = dir + "/d.journal";
  auto cap = LaunchCapture::open(options(path));
  const std::uint32_t id = cap->intern("k");
  for (std::uint64_t i = 0; i < 300; ++i) {
    CHECK(cap->push(record_of(i, id)));
    if (i % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cap->close();
  const auto whole = launch_test::read_journal(path);
  CHECK(whole.frames.size() > 6);
  // Cut inside every frame after the header: in its frame header, and in its payload.
  std::size_t offset = 8;
  for (std::size_t f = 0; f < whole.frames.size(); ++f) {
    const std::size_t size = 16 + whole.frames[f].payload.size();
    if (f > 0) {
      for (std::size_t cut : {offset + 5, offset + 16 + whole.frames[f].payload.size() / 2}) {
        const std::string cut_path = dir + "/cut.journal";
        CHECK_EQ(std::system(("head -c " + std::to_string(cut) + " " + path + " > " + cut_path).c_str()), 0);
        const auto j = launch_test::read_journal(cut_path);
        CHECK(!j.torn.empty());
        CHECK_EQ(j.frames.size(), f);
        std::size_t expect = 0;
        for (std::size_t k = 0; k < f; ++k) {
          if (whole.frames[k].tag == "LNCH") {
            expect += (whole.frames[k].payload.size() - launch_test::npy_data_offset(whole.frames[k].payload)) /
                      sizeof(LaunchRecord);
          }
        }
        CHECK_EQ(j.records.size(), expect);
        for (std::size_t k = 0; k < j.records.size(); ++k) CHECK_EQ(j.records[k].correlation_id, k + 1);
      }
    }
    offset += size;
  }
}

void bad_options_are_named() {
  const std::string dir = temp_dir();
  auto o = options(dir + "/e.journal");
  o.vendor = "intel";
  CHECK_THROWS(LaunchCapture::open(o), std::invalid_argument, "vendor='intel'");
  o = options(dir + "/e.journal", 3);
  CHECK_THROWS(LaunchCapture::open(o), std::invalid_argument, "capacity=3");
  o = options(dir + "/e.journal");
  o.record_clock = "CLOCK_MONOTONIC";
  CHECK_THROWS(LaunchCapture::open(o), std::invalid_argument, "record_clock='CLOCK_MONOTONIC'");
  // O_EXCL: a journal already there is never written over.
  auto first = LaunchCapture::open(options(dir + "/e.journal"));
  CHECK_THROWS(LaunchCapture::open(options(dir + "/e.journal")), std::system_error, "e.journal");
  first->close();
  ::unsetenv("FINGRAV_LAUNCH_DIR");
  CHECK(LaunchCapture::open_from_env("rocm", "CLOCK_BOOTTIME") == nullptr);
  ::setenv("FINGRAV_LAUNCH_DIR", dir.c_str(), 1);
  ::setenv("FINGRAV_LAUNCH_CAPACITY", "1000", 1);
  CHECK_THROWS(LaunchCapture::open_from_env("rocm", "CLOCK_BOOTTIME"), std::invalid_argument,
               "FINGRAV_LAUNCH_CAPACITY='1000'");
  ::setenv("FINGRAV_LAUNCH_CAPACITY", "8", 1);
  auto env = LaunchCapture::open_from_env("rocm", "CLOCK_BOOTTIME");
  CHECK(env != nullptr);
  CHECK_EQ(env->path(), dir + "/launches." + std::to_string(::getpid()) + ".journal");
  env->close();
  ::unsetenv("FINGRAV_LAUNCH_DIR");
  ::unsetenv("FINGRAV_LAUNCH_CAPACITY");
}

void write_fixture() {
  const char* path = std::getenv("FINGRAV_LAUNCH_FIXTURE");
  if (path == nullptr || *path == '\0') return;
  ::unlink(path);
  auto cap = LaunchCapture::open(options(path));
  const std::uint32_t a = cap->intern("gemm_kernel");
  const std::uint32_t b = cap->intern("void reduce<\"x\">(float*)");
  for (std::uint64_t i = 0; i < 6; ++i) CHECK(cap->push(record_of(i, i % 2 ? b : a)));
  cap->add_vendor_drops(1);
  cap->note("subscriber_conflict", "fixture");
  cap->close();
}

// The journal's CRC-32 against its definition (the bitwise shift register of
// launch_journal.hpp): every length 0..300 at every start offset 0..7 (the
// slice-by-8 main loop, its tail and unaligned loads), the standard check
// value, and continuation across any split.
void crc32_matches_the_definition() {
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  std::string buf(310, '\0');
  for (auto& c : buf) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    c = static_cast<char>(x);
  }
  for (std::size_t off = 0; off < 8; ++off) {
    for (std::size_t n = 0; n <= 300; ++n) {
      const std::string piece = buf.substr(off, n);
      CHECK_EQ(fingrav::launch::crc32(buf.data() + off, n), launch_test::crc32_bitwise(piece));
      const std::size_t cut = n / 3;
      CHECK_EQ(fingrav::launch::crc32(buf.data() + off + cut, n - cut, fingrav::launch::crc32(buf.data() + off, cut)),
               launch_test::crc32_bitwise(piece));
    }
  }
  CHECK_EQ(fingrav::launch::crc32("123456789", 9), 0xCBF43926u);  // zlib.crc32(b"123456789")
}


// An idle capture (nothing pushed) writes nothing between drains: each write
// is an inode update in the file system's journal, the fixed per-second cost
// of a capture beside an application that launches little. Its clock
// brackets are kept in memory and written with the next drain; a record
// pushed to the idle writer wakes it and is written within a flush period.
void idle_capture_writes_nothing_and_keeps_its_brackets() {
  const std::string path = temp_dir() + "/idle.journal";
  auto cap = LaunchCapture::open(options(path));  // a 5 ms flush period
  const std::uint32_t id = cap->intern("k");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the name's drain
  struct stat before{};
  CHECK_EQ(::stat(path.c_str(), &before), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // 40 flush periods with nothing to write
  struct stat after{};
  CHECK_EQ(::stat(path.c_str(), &after), 0);
  CHECK_MSG(after.st_size == before.st_size,
            "an idle capture wrote " << (after.st_size - before.st_size) << " bytes in 40 flush periods");
  const std::int64_t pushed_ns = fingrav::host_now_ns();
  CHECK(cap->push(record_of(0, id)));
  // Written well before the idle period ends (one flush period, plus a busy host's scheduling).
  const auto t0 = std::chrono::steady_clock::now();
  struct stat written{};
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(900)) {
    CHECK_EQ(::stat(path.c_str(), &written), 0);
    if (written.st_size > after.st_size) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK_MSG(written.st_size > after.st_size, "a record pushed to an idle capture was not written within 0.9 s");
  cap->close();
  const auto j = launch_test::read_journal(path);
  CHECK_EQ(j.records.size(), 1u);
  // The brackets taken while idle reached the file: some were read before the push.
  std::size_t before_push = 0;
  for (const auto& fr : j.frames) {
    if (fr.tag != "BRBT") continue;
    const std::size_t off = launch_test::npy_data_offset(fr.payload);
    for (std::size_t at = off; at + 24 <= fr.payload.size(); at += 24) {
      std::int64_t raw_before = 0;
      std::memcpy(&raw_before, fr.payload.data() + at, 8);
      if (raw_before < pushed_ns) ++before_push;
    }
  }
  CHECK_MSG(before_push >= 8, "only " << before_push << " bracket rows from before the push reached the file");
}

}  // namespace

int main() {
  return fingrav_test::run_tests("launch_capture", {
                                                       {"records_and_symbols_arrive", records_and_symbols_arrive},
                                                       {"tiny_ring_counts_drops", tiny_ring_counts_drops},
                                                       {"close_is_idempotent", close_is_idempotent},
                                                       {"cut_short_keeps_whole_records", cut_short_keeps_whole_records},
                                                       {"bad_options_are_named", bad_options_are_named},
                                                       {"write_fixture", write_fixture},
                                                       {"crc32_matches_the_definition",
                                                        crc32_matches_the_definition},
                                                       {"idle_capture_writes_nothing_and_keeps_its_brackets",
                                                        idle_capture_writes_nothing_and_keeps_its_brackets},
                                                   });
}
