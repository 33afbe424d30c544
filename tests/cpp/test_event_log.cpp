// EventLog: one writer marking while a reader thread checks that every
// published marker [0, size()) is complete, plus full-log, clear() and
// capacity validation.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>

#include "check.hpp"
#include "fingrav/alloc_error.hpp"
#include "fingrav/event_log.hpp"
#include "fingrav/host_clock.hpp"
#include "memory_limit.hpp"

using namespace fingrav;

namespace {

// Marker i is fully determined by i, so a reader can tell a torn or
// unpublished marker from a complete one.
struct Expected {
  MarkerKind kind;
  std::int32_t run, execution, kernel_id;
  std::int64_t host_ns, device_ts;
  bool has_device_ts;
};

Expected expected(std::size_t i) {
  const auto run = static_cast<std::int32_t>(i);
  Expected e{};
  e.kind = static_cast<MarkerKind>(i % 4);
  e.run = run;
  e.execution = run * 2;
  e.kernel_id = run ^ 0x5a5a;
  e.host_ns = static_cast<std::int64_t>(i) * 3 + 7;
  e.has_device_ts = (i % 3) != 0;
  e.device_ts = e.has_device_ts ? static_cast<std::int64_t>(i) * 5 - 1 : 0;
  return e;
}

bool write(EventLog& log, std::size_t i) {
  const Expected e = expected(i);
  return log.mark(e.kind, e.run, e.execution, e.kernel_id, e.host_ns, e.has_device_ts ? e.device_ts : 12345,
                  e.has_device_ts);
}

void check_marker(const Marker& m, std::size_t i) {
  const Expected e = expected(i);
  CHECK_MSG(m.run == e.run && m.execution == e.execution && m.kernel_id == e.kernel_id &&
                m.host_ns == e.host_ns && m.device_ts == e.device_ts &&
                m.kind == static_cast<std::uint8_t>(e.kind) &&
                m.flags == (e.has_device_ts ? kMarkerHasDeviceTs : 0) && m.reserved == 0,
            "marker " << i << " incomplete or wrong: run=" << m.run << " execution=" << m.execution
                      << " kernel_id=" << m.kernel_id << " host_ns=" << m.host_ns << " device_ts=" << m.device_ts
                      << " kind=" << int{m.kind} << " flags=" << int{m.flags});
}

void concurrent_reader_sees_complete_markers() {
  const std::size_t cap = static_cast<std::size_t>(fingrav_test::env_u64("FINGRAV_FUZZ_ITEMS", 4'000'000) / 4);
  EventLog log(cap);
  std::atomic<bool> writer_done{false};
  std::uint64_t reads = 0;
  std::thread reader([&] {
    std::size_t checked = 0;  // [0, checked) verified at least once
    std::mt19937_64 rng(3);
    for (;;) {
      const bool done = writer_done.load(std::memory_order_acquire);
      const std::size_t n = log.size();
      CHECK(n >= checked);  // the size never goes back (no clear() here)
      CHECK(n <= log.capacity());
      const Marker* d = log.data();
      for (std::size_t i = checked; i < n; ++i) check_marker(d[i], i);
      // Published markers stay as they were: re-check a few older ones.
      for (int k = 0; k < 8 && n > 0; ++k) {
        const std::size_t i = static_cast<std::size_t>(rng() % n);
        check_marker(d[i], i);
      }
      checked = n;
      ++reads;
      if (done) break;
    }
    CHECK_EQ(checked, log.capacity());
    // Every index once more, now that the log is full.
    for (std::size_t i = 0; i < log.size(); ++i) check_marker(log.data()[i], i);
  });
  for (std::size_t i = 0; i < cap; ++i) {
    CHECK(write(log, i));
    if (i % 4096 == 0) std::this_thread::yield();  // let the reader interleave on a busy machine
  }
  writer_done.store(true, std::memory_order_release);
  reader.join();
  CHECK(reads > 1);
  CHECK_EQ(log.dropped(), 0u);
}

void full_log_refuses_and_counts() {
  EventLog log(5);
  for (std::size_t i = 0; i < 5; ++i) CHECK(write(log, i));
  CHECK_EQ(log.size(), 5u);
  CHECK(!write(log, 5));
  CHECK(!log.mark_now(MarkerKind::kRunEnd, 0, -1, 0));
  CHECK_EQ(log.dropped(), 2u);
  CHECK_EQ(log.size(), 5u);  // refused markers leave the log as it was
  for (std::size_t i = 0; i < 5; ++i) check_marker(log.data()[i], i);
}

void clear_resets() {
  EventLog log(4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(write(log, i));
  CHECK(!write(log, 4));
  CHECK_EQ(log.dropped(), 1u);
  const Marker* before = log.data();
  log.clear();
  CHECK_EQ(log.size(), 0u);
  CHECK_EQ(log.dropped(), 0u);
  CHECK_EQ(log.capacity(), 4u);
  CHECK(log.data() == before);  // storage is reused, not reallocated
  for (std::size_t i = 0; i < 4; ++i) CHECK(write(log, i));
  CHECK_EQ(log.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) check_marker(log.data()[i], i);
}

void mark_now_uses_the_host_clock() {
  EventLog log(2);
  const std::int64_t t0 = host_now_ns();
  CHECK(log.mark_now(MarkerKind::kExecBegin, 3, 4, 5));
  const std::int64_t t1 = host_now_ns();
  const Marker& m = log.data()[0];
  CHECK(m.host_ns >= t0 && m.host_ns <= t1);
  CHECK_EQ(m.flags, 0);
  CHECK_EQ(m.device_ts, 0);
  CHECK_EQ(m.run, 3);
  CHECK_EQ(m.execution, 4);
  CHECK_EQ(m.kernel_id, 5);
  CHECK_EQ(m.kind, static_cast<std::uint8_t>(MarkerKind::kExecBegin));
}

void capacity_validation() {
  CHECK_THROWS(EventLog(0), std::invalid_argument, "capacity");
  CHECK_THROWS(EventLog((std::size_t{1} << 34) + 1), std::invalid_argument, "capacity");
  // The maximum is allocated and touched up front, so it is a real bound:
  // 2^26 markers (2 GiB); above it the error says so before allocating.
  CHECK_THROWS(EventLog(kMaxMarkers + 1), std::invalid_argument,
               "capacity=67108865: must be in [1, 2^26 = 67108864] markers (32 bytes each, allocated up front: "
               "2.0 GiB at the limit)");
  CHECK_THROWS(EventLog(std::size_t{1} << 34), std::invalid_argument, "capacity=17179869184");
  EventLog one(1);
  CHECK_EQ(one.capacity(), 1u);
  CHECK_EQ(one.size(), 0u);
}

// A shared buffer never changes: clear() gives the log a new one while the
// old is held, and reuses the buffer once nobody holds it.
void shared_markers_never_change() {
  EventLog log(4);
  for (std::size_t i = 0; i < 3; ++i) CHECK(write(log, i));
  std::shared_ptr<const Marker[]> held = log.share();
  const std::size_t n = log.size();
  CHECK(held.get() == log.data());
  CHECK(write(log, 3));  // appending leaves the shared prefix alone
  for (std::size_t i = 0; i < n; ++i) check_marker(held[i], i);

  log.clear();
  CHECK(log.data() != held.get());  // a new buffer: the held one is theirs
  CHECK_EQ(log.size(), 0u);
  CHECK_EQ(log.capacity(), 4u);
  for (std::size_t i = 0; i < 4; ++i) CHECK(write(log, 100 + i));
  for (std::size_t i = 0; i < n; ++i) check_marker(held[i], i);  // unchanged
  for (std::size_t i = 0; i < 4; ++i) check_marker(log.data()[i], 100 + i);

  // A second holder of the new buffer, then a clear with both released.
  std::shared_ptr<const Marker[]> second = log.share();
  log.clear();
  CHECK(log.data() != second.get());
  check_marker(second[0], 100);
  held.reset();
  second.reset();
  const Marker* own = log.data();
  log.clear();
  CHECK(log.data() == own);  // nobody holds it: reused, nothing allocated
}

// clear() needing a new buffer and not getting one: an AllocationError
// naming capacity, and the log exactly as it was.
void clear_without_memory_leaves_the_log() {
  if (fingrav_test::kSanitized) {
    std::printf("  (skipped: sanitizer runtimes abort instead of throwing std::bad_alloc)\n");
    return;
  }
  CHECK_THROWS(
      [] {
        fingrav_test::AddressSpaceLimit limit(std::uint64_t{256} << 20);
        CHECK(limit.ok());
        return EventLog(kMaxMarkers);
      }(),
      AllocationError, "capacity=67108864: cannot allocate 2.0 GiB for the markers (32 bytes each)");
  EventLog log(std::size_t{5} << 20);  // 160 MiB
  CHECK(write(log, 0));
  CHECK(write(log, 1));
  auto held = log.share();
  const Marker* before = log.data();
  {
    fingrav_test::AddressSpaceLimit limit(std::uint64_t{100} << 20);  // a second buffer does not fit
    CHECK(limit.ok());
    CHECK_THROWS(log.clear(), AllocationError, "capacity=5242880: cannot allocate 160.0 MiB");
  }
  CHECK(log.data() == before);
  CHECK_EQ(log.size(), 2u);
  check_marker(log.data()[1], 1);
  CHECK(write(log, 2));
  held.reset();
  {
    fingrav_test::AddressSpaceLimit limit(std::uint64_t{100} << 20);
    log.clear();  // nobody holds it now: reused, nothing to allocate
  }
  CHECK(log.data() == before);
  CHECK_EQ(log.size(), 0u);
}

}  // namespace

int main() {
  return fingrav_test::run_tests("event_log", {
                                                  {"concurrent_reader", concurrent_reader_sees_complete_markers},
                                                  {"full_log", full_log_refuses_and_counts},
                                                  {"clear", clear_resets},
                                                  {"mark_now", mark_now_uses_the_host_clock},
                                                  {"capacity_validation", capacity_validation},
                                                  {"shared_markers_never_change", shared_markers_never_change},
                                                  {"clear_without_memory", clear_without_memory_leaves_the_log},
                                              });
}
