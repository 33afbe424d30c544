// The Sampler thread: lifecycle, validation, exactly-once delivery under CPU
// load, and the counters for drops, duplicates, source gaps and errors. Uses
// SyntheticSource, whose reading k is a known function of k, so every sample
// can be checked field by field.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "fingrav/alloc_error.hpp"
#include "fingrav/host_clock.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/sampler.hpp"
#include "fingrav/synthetic_source.hpp"
#include "memory_limit.hpp"

using namespace fingrav;
using fingrav_test::wait_for;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kPatience{10'000};  // generous: sanitizer builds on a loaded 2-core machine

// Threads that spin until destroyed, so the sampler and the consumer compete
// for the CPUs as they would next to a busy application.
class CpuLoad {
 public:
  explicit CpuLoad(int threads) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        std::uint64_t x = 1;
        while (!stop_.load(std::memory_order_relaxed)) {
          for (int k = 0; k < 1000; ++k) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        }
        sink_.fetch_add(x, std::memory_order_relaxed);
      });
    }
  }
  ~CpuLoad() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> sink_{0};
  std::vector<std::thread> threads_;
};

std::shared_ptr<SyntheticSource> make_source(std::int64_t period_ns, std::uint32_t depth) {
  SyntheticConfig c;
  c.period_ns = period_ns;
  c.depth = depth;
  return std::make_shared<SyntheticSource>(c);
}

SamplerConfig make_config(std::int64_t period_ns, std::size_t capacity) {
  SamplerConfig c;
  c.period_ns = period_ns;
  c.capacity = capacity;
  return c;
}

void drain_into(Sampler& s, std::vector<Sample>& out) {
  Sample buf[97];  // odd size: batches end at arbitrary ring positions
  for (;;) {
    const std::size_t n = s.drain(buf, 97);
    if (n == 0) return;
    out.insert(out.end(), buf, buf + n);
  }
}

// Every sample agrees with the reading the synthetic source defines for its
// source_seq, and the source sequence is gap-free except where the sampler
// counted (and flagged) readings it never saw.
void check_payload(const std::vector<Sample>& v, const SyntheticSource& src) {
  const auto& cfg = src.config();
  for (const Sample& s : v) {
    CHECK_MSG(s.source_ts == cfg.ts_offset + static_cast<std::int64_t>(s.source_seq) * cfg.period_ns,
              "source_seq=" << s.source_seq << " source_ts=" << s.source_ts);
    for (int c = 0; c < kChannelCount; ++c) {
      CHECK_MSG(s.power_w[c] == src.value(s.source_seq, c),
                "source_seq=" << s.source_seq << " channel " << c << ": " << s.power_w[c] << " vs "
                              << src.value(s.source_seq, c));
    }
    CHECK_MSG(s.host_poll_begin_ns <= s.host_ns, "poll began after it ended: " << s.host_poll_begin_ns << " > "
                                                                                << s.host_ns);
    // A reading cannot be seen before it appears.
    CHECK_MSG(src.appear_host_ns(s.source_seq) <= s.host_ns,
              "reading " << s.source_seq << " seen at " << s.host_ns << " before it appeared at "
                         << src.appear_host_ns(s.source_seq));
    CHECK_EQ(s.window_ns, cfg.window_ns);
  }
}

// All accepted readings were drained: Sample::seq is 0..n-1 with no gap,
// and source_seq gaps add up to source_missed.
void check_complete(const std::vector<Sample>& v, const SamplerStats& st) {
  CHECK_EQ(st.drops, 0u);
  CHECK_EQ(v.size(), st.samples);
  CHECK_EQ(st.drained, st.samples);
  std::uint64_t missed = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    CHECK_MSG(v[i].seq == i, "sample " << i << " has seq " << v[i].seq);
    if (i == 0) {
      CHECK_EQ(v[i].source_seq, 0u);  // the first poll sees reading 0
      CHECK_EQ(v[i].flags & kFlagSourceGap, 0u);
      continue;
    }
    CHECK_MSG(v[i].source_seq > v[i - 1].source_seq,
              "source_seq not increasing at " << i << ": " << v[i - 1].source_seq << " then " << v[i].source_seq);
    const std::uint64_t gap = v[i].source_seq - v[i - 1].source_seq - 1;
    missed += gap;
    CHECK_MSG(((v[i].flags & kFlagSourceGap) != 0) == (gap > 0),
              "sample " << i << ": gap " << gap << " but flags " << v[i].flags);
  }
  CHECK_EQ(missed, st.source_missed);
}

// ------------------------------------------------------------------ lifecycle

void lifecycle() {
  auto src = make_source(100'000, 4);
  Sampler s(src, make_config(50'000, 1024));
  CHECK(!s.started());
  CHECK(!s.running());
  s.stop();  // before start: a no-op
  CHECK(!s.started());
  CHECK(!src->in_use());
  s.start();
  CHECK(s.started());
  CHECK(s.running());
  CHECK(src->in_use());
  CHECK_THROWS(s.start(), std::logic_error, "already");
  std::this_thread::sleep_for(milliseconds(5));
  s.stop();
  CHECK(s.started());
  CHECK(!s.running());
  CHECK(!src->in_use());
  s.stop();  // idempotent
  s.stop();
  CHECK_THROWS(s.start(), std::logic_error, "already");  // a sampler runs once
  CHECK(s.error().empty());
  CHECK(s.stats().polls > 0);
}

void source_in_use_by_two_samplers() {
  auto src = make_source(100'000, 4);
  Sampler a(src, make_config(50'000, 1024));
  Sampler b(src, make_config(50'000, 1024));
  a.start();
  CHECK_THROWS(b.start(), std::logic_error, "already being polled");
  CHECK(!b.started());  // the refused start left b untouched
  a.stop();
  CHECK(!src->in_use());
  b.start();  // free again once a released it
  CHECK(src->in_use());
  b.stop();
  CHECK(!src->in_use());
  CHECK(a.error().empty());
  CHECK(b.error().empty());
}

void destructor_stops_a_running_sampler() {
  auto src = make_source(100'000, 4);
  {
    Sampler s(src, make_config(20'000, 1024));
    s.start();
    std::this_thread::sleep_for(milliseconds(2));
  }  // ~Sampler joins the thread
  CHECK(!src->in_use());
  CHECK(src->polls() > 0);
}

void invalid_config() {
  auto src = make_source(100'000, 1);
  CHECK_THROWS(Sampler(src, make_config(19'999, 1024)), std::invalid_argument, "period_ns");
  CHECK_THROWS(Sampler(src, make_config(0, 1024)), std::invalid_argument, "period_ns");
  CHECK_THROWS(Sampler(src, make_config(-1, 1024)), std::invalid_argument, "period_ns");
  CHECK_THROWS(Sampler(src, make_config(1'000'000'001, 1024)), std::invalid_argument, "period_ns");
  CHECK_THROWS(Sampler(src, make_config(20'000, 0)), std::invalid_argument, "capacity");
  CHECK_THROWS(Sampler(src, make_config(20'000, 8)), std::invalid_argument, "capacity");  // < kMinCapacity
  CHECK_THROWS(Sampler(src, make_config(20'000, 24)), std::invalid_argument, "capacity");
  CHECK_THROWS(Sampler(src, make_config(20'000, 1000)), std::invalid_argument, "capacity");
  // Above the documented maximum: refused by name before anything is
  // allocated (2^31 asked 128 GiB and ended in std::bad_alloc).
  CHECK_THROWS(Sampler(src, make_config(20'000, kMaxCapacity * 2)), std::invalid_argument,
               "capacity=134217728: must be at most 2^26 = 67108864 samples (64 bytes each: 8.0 GiB asked, "
               "4.0 GiB at the limit)");
  CHECK_THROWS(Sampler(src, make_config(20'000, std::size_t{1} << 31)), std::invalid_argument, "128.0 GiB asked");
  CHECK_THROWS(Sampler(src, make_config(20'000, std::size_t{1} << 63)), std::invalid_argument, "over 16 EiB asked");
  CHECK_THROWS(Sampler(nullptr, make_config(20'000, 1024)), std::invalid_argument, "source");
  SamplerConfig c = make_config(20'000, 1024);
  c.cpu = -2;
  CHECK_THROWS(Sampler(src, c), std::invalid_argument, "cpu");
  c.cpu = CPU_SETSIZE;
  CHECK_THROWS(Sampler(src, c), std::invalid_argument, "cpu");
  // A CPU outside the allowed set (the highest one, unless this machine is huge).
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  CHECK_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (!CPU_ISSET(CPU_SETSIZE - 1, &allowed)) {
    c.cpu = CPU_SETSIZE - 1;
    CHECK_THROWS(Sampler(src, c), std::invalid_argument, "cpu");
  }
  // The bounds themselves are accepted.
  Sampler lo(src, make_config(kMinPeriodNs, kMinCapacity));
  Sampler hi(src, make_config(kMaxPeriodNs, std::size_t{1} << 16));
  CHECK(!src->in_use());  // constructing does not acquire the source
}

// The ring's allocation failing below the maximum: a std::bad_alloc whose
// message names capacity and the bytes, not the bare "std::bad_alloc".
void ring_allocation_failure_names_capacity() {
  if (fingrav_test::kSanitized) {
    std::printf("  (skipped: sanitizer runtimes abort instead of throwing std::bad_alloc)\n");
    return;
  }
  auto src = make_source(1'000'000, 1);
  {
    fingrav_test::AddressSpaceLimit limit(std::uint64_t{256} << 20);
    CHECK(limit.ok());
    CHECK_THROWS(Sampler(src, make_config(20'000, kMaxCapacity)), AllocationError,
                 "capacity=67108864: cannot allocate 4.0 GiB for the ring (64 bytes per slot); "
                 "pass a smaller capacity");
    bool caught = false;
    try {
      Sampler s(src, make_config(20'000, kMaxCapacity));
    } catch (const std::bad_alloc& e) {  // still a bad_alloc for code that handles those
      caught = std::string(e.what()).rfind("capacity=", 0) == 0;
    }
    CHECK(caught);
    Sampler small(src, make_config(20'000, 1024));  // what fits still works
    CHECK_EQ(small.config().capacity, 1024u);
  }
  // The largest ring is allocated, not touched: it costs address space only
  // (a small machine may refuse even that; then the error names capacity).
  try {
    Sampler largest(src, make_config(20'000, kMaxCapacity));
    CHECK_EQ(largest.config().capacity, kMaxCapacity);
  } catch (const AllocationError& e) {
    CHECK(std::string(e.what()).rfind("capacity=67108864: cannot allocate", 0) == 0);
  }
}

void pinned_to_an_allowed_cpu() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  CHECK_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = -1;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &allowed)) {
      cpu = i;
      break;
    }
  }
  CHECK(cpu >= 0);
  auto src = make_source(100'000, 8);
  SamplerConfig c = make_config(50'000, 1024);
  c.cpu = cpu;
  Sampler s(src, c);
  s.start();
  std::this_thread::sleep_for(milliseconds(5));
  s.stop();
  CHECK_MSG(s.error().empty(), s.error());
  CHECK(s.stats().polls > 0);
}

// ------------------------------------------------------------------ delivery

// A sampler at 50 us next to three spinning threads, a consumer draining
// concurrently and querying stats: every reading arrives exactly once.
void every_reading_once_under_load() {
  CpuLoad load(3);
  // depth 128 x 1 ms = 128 ms of readings kept by the source, so even a
  // sampler preempted on a loaded machine sees every reading; the ring holds
  // 256 ms, so a consumer that keeps up loses nothing.
  auto src = make_source(1'000'000, 128);
  Sampler s(src, make_config(50'000, 256));
  std::vector<Sample> got;
  std::atomic<bool> done{false};
  std::thread consumer([&] {
    Sample buf[64];
    std::uint64_t last_polls = 0;
    while (!done.load(std::memory_order_acquire)) {
      const std::size_t n = s.drain(buf, 64);
      got.insert(got.end(), buf, buf + n);
      // Readers the Python layer uses while the thread runs.
      const SamplerStats st = s.stats();
      CHECK(st.polls >= last_polls);
      last_polls = st.polls;
      // Counters are bumped once per poll, after its pushes: while running,
      // drained may lead samples by at most the poll in flight.
      CHECK_MSG(st.drained <= st.samples + st.drops + PowerSource::kMaxReadingsPerPoll,
                "drained " << st.drained << " samples " << st.samples << " drops " << st.drops);
      (void)s.available();
      (void)s.running();
      CHECK(s.error().empty());
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  s.start();
  std::this_thread::sleep_for(milliseconds(300));
  s.stop();
  done.store(true, std::memory_order_release);
  consumer.join();
  drain_into(s, got);
  const SamplerStats st = s.stats();
  CHECK_MSG(s.error().empty(), s.error());
  CHECK_MSG(got.size() > 30, "only " << got.size() << " samples in 300 ms at a 1 ms source period");
  check_complete(got, st);
  CHECK_EQ(st.source_missed, 0u);  // the buffered source (depth 128) covered every stall
  check_payload(got, *src);
  CHECK(st.duplicates > 0);  // polls at 20x the source rate re-read the buffer
}

// drain() is documented as safe from several threads at once.
void two_consumers_split_the_stream() {
  // 200k readings/s; the ring holds 0.3 s of them, so two consumers
  // starved by a loaded machine still lose nothing.
  auto src = make_source(5'000, 128);
  Sampler s(src, make_config(20'000, std::size_t{1} << 16));
  std::vector<Sample> a, b;
  std::atomic<bool> done{false};
  auto consume = [&](std::vector<Sample>& mine) {
    Sample buf[16];
    while (!done.load(std::memory_order_acquire)) {
      const std::size_t n = s.drain(buf, 16);
      for (std::size_t i = 0; i < n; ++i) {
        // Each consumer sees its own share in order.
        CHECK(mine.empty() || mine.back().seq < buf[i].seq);
        mine.push_back(buf[i]);
      }
      if (n == 0) std::this_thread::yield();
    }
  };
  std::thread ta(consume, std::ref(a)), tb(consume, std::ref(b));
  s.start();
  std::this_thread::sleep_for(milliseconds(100));
  s.stop();
  done.store(true, std::memory_order_release);
  ta.join();
  tb.join();
  std::vector<Sample> all;
  drain_into(s, all);
  std::vector<char> seen(all.size() + a.size() + b.size(), 0);
  for (const auto* part : {&a, &b, &all}) {
    for (const Sample& x : *part) {
      CHECK_MSG(x.seq < seen.size(), "seq " << x.seq << " out of range");
      CHECK_MSG(!seen[x.seq], "seq " << x.seq << " delivered twice");
      seen[x.seq] = 1;
    }
  }
  const SamplerStats st = s.stats();
  CHECK_EQ(st.drops, 0u);
  CHECK_EQ(seen.size(), st.samples);
  CHECK_EQ(st.drained, st.samples);
}

// Many short runs, stopped at random moments (some before the thread has
// polled at all), under load: start/stop never loses or duplicates a sample.
void start_stop_cycles_under_load() {
  CpuLoad load(2);
  std::mt19937 rng(7);
  for (int cycle = 0; cycle < 25; ++cycle) {
    // The ring holds 0.3 s of readings: a stop() delayed by load drops nothing.
    auto src = make_source(20'000, 128);
    Sampler s(src, make_config(20'000, 1 << 14));
    s.start();
    const int us = static_cast<int>(rng() % 3000);
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
    s.stop();
    CHECK_MSG(s.error().empty(), s.error());
    CHECK(!s.running());
    CHECK(!src->in_use());
    std::vector<Sample> got;
    drain_into(s, got);
    const SamplerStats st = s.stats();
    CHECK(st.polls >= 1);  // the final poll always runs
    CHECK(!got.empty());
    check_complete(got, st);
    check_payload(got, *src);
  }
}

// ------------------------------------------------------------------ counters

// Nobody drains a 16-slot ring: the 17th reading on is dropped and counted,
// and Sample::seq still numbers the dropped ones, so drained arrays show the
// gap. Checks samples + drops + source_missed against the number of readings
// the synthetic source had produced when the final poll ran.
void drops_counted_with_a_tiny_ring() {
  auto src = make_source(20'000, 128);
  Sampler s(src, make_config(100'000, kMinCapacity));
  s.start();
  CHECK(wait_for([&] { return s.stats().drops > 100; }, kPatience));
  CHECK_EQ(s.available(), kMinCapacity);
  // Read before draining: every one of these drops happened before the drain.
  const std::uint64_t drops_before = s.stats().drops;
  // One drain call: a loop would also pick up what the sampler pushes into
  // the freed slots meanwhile.
  std::vector<Sample> first(4 * kMinCapacity);
  first.resize(s.drain(first.data(), first.size()));
  CHECK_EQ(first.size(), kMinCapacity);
  for (std::size_t i = 0; i < first.size(); ++i) CHECK_EQ(first[i].seq, i);  // the oldest were kept
  // Let the ring fill up again (16 more fit; then it drops again).
  CHECK(wait_for([&] { return s.stats().samples >= 2 * kMinCapacity; }, kPatience));
  const std::int64_t before_stop = host_now_ns();
  s.stop();
  const std::int64_t after_stop = host_now_ns();
  std::vector<Sample> second;
  drain_into(s, second);
  const SamplerStats st = s.stats();
  CHECK_MSG(s.error().empty(), s.error());
  CHECK(!second.empty());
  CHECK_EQ(first.size() + second.size(), st.samples);
  CHECK_EQ(st.drained, st.samples);
  // The first sample after the drain skips the seqs of the dropped readings.
  CHECK_MSG(second.front().seq >= kMinCapacity + drops_before,
            "seq " << second.front().seq << " after " << drops_before << " drops");
  for (std::size_t i = 1; i < second.size(); ++i) CHECK(second[i].seq > second[i - 1].seq);
  CHECK(st.drops >= drops_before);
  check_payload(first, *src);
  check_payload(second, *src);
  if (st.source_missed == 0) {
    // Every reading accepted, in order, from reading 0: seq == source_seq.
    for (const auto* part : {&first, &second}) {
      for (const Sample& x : *part) CHECK_EQ(x.seq, x.source_seq);
    }
  }
  // Readings 0..newest were each pushed, dropped, or missed; newest is the
  // reading current at the final poll, which ran inside stop().
  const std::int64_t t0 = src->appear_host_ns(0);
  const auto produced_lo = static_cast<std::uint64_t>((before_stop - t0) / 20'000 + 1);
  const auto produced_hi = static_cast<std::uint64_t>((after_stop - t0) / 20'000 + 1);
  const std::uint64_t accounted = st.samples + st.drops + st.source_missed;
  CHECK_MSG(produced_lo <= accounted && accounted <= produced_hi,
            "samples+drops+missed=" << accounted << " not in [" << produced_lo << ", " << produced_hi << "]");
}

// stop() polls once more, so readings produced up to the stop are kept even
// when the next scheduled poll is far away (a 1 s period here), and it
// returns promptly instead of waiting for that poll.
void final_poll_on_stop() {
  auto src = make_source(1'000, 128);  // a reading every microsecond
  Sampler s(src, make_config(kMaxPeriodNs, 1024));
  s.start();
  CHECK(wait_for([&] { return s.stats().polls >= 1; }, kPatience));
  std::this_thread::sleep_for(milliseconds(5));
  const std::int64_t before_stop = host_now_ns();
  s.stop();
  const std::int64_t stop_ns = host_now_ns() - before_stop;
  CHECK_MSG(stop_ns < 500'000'000, "stop() took " << stop_ns << " ns at a 1 s period");
  std::vector<Sample> got;
  drain_into(s, got);
  const SamplerStats st = s.stats();
  CHECK_EQ(st.polls, 2u);  // the first scheduled poll and the final one
  CHECK_EQ(st.samples, 1u + 128u);  // reading 0, then the newest 128
  CHECK_EQ(got.size(), st.samples);
  // The newest reading kept is at least the one current when stop() began.
  const std::int64_t t0 = src->appear_host_ns(0);
  const auto current = static_cast<std::uint64_t>((before_stop - t0) / 1'000);
  CHECK_MSG(got.back().source_seq >= current, "last kept reading " << got.back().source_seq
                                                                   << " older than the one current at stop, " << current);
  CHECK_EQ(st.source_missed, got.back().source_seq + 1 - st.samples);
  CHECK(got[1].flags & kFlagSourceGap);
  check_complete(got, st);
  check_payload(got, *src);
}

// A "latest value" source (depth 1) polled 50x faster than it updates: the
// repeats are counted as duplicates, never stored.
void duplicates_counted_with_depth_one() {
  auto src = make_source(1'000'000, 1);
  Sampler s(src, make_config(20'000, 1024));
  s.start();
  // Waits on the counters rather than a fixed time: on a loaded machine the
  // polls may come further apart than 20 us.
  CHECK(wait_for([&] { return s.stats().duplicates >= 20 && s.stats().samples >= 3; }, kPatience));
  s.stop();
  std::vector<Sample> got;
  drain_into(s, got);
  const SamplerStats st = s.stats();
  CHECK(st.duplicates >= 20);
  // Each poll of a depth-1 source returns exactly one reading.
  CHECK_EQ(st.samples + st.duplicates, st.polls);
  CHECK_EQ(st.polls, src->polls());
  CHECK(st.samples >= 2);
  check_complete(got, st);
  check_payload(got, *src);
}

void transient_errors_counted() {
  SyntheticConfig c;
  c.period_ns = 500'000;
  c.depth = 1;
  c.transient_error_every = 4;
  auto src = std::make_shared<SyntheticSource>(c);
  Sampler s(src, make_config(20'000, 1024));
  s.start();
  CHECK(wait_for([&] { return s.stats().polls >= 40; }, kPatience));
  s.stop();
  std::vector<Sample> got;
  drain_into(s, got);
  const SamplerStats st = s.stats();
  CHECK_MSG(s.error().empty(), "a transient error must not stop the sampler: " << s.error());
  CHECK(st.read_errors >= 10);
  CHECK_EQ(st.read_errors, st.polls / 4);
  CHECK_EQ(st.samples + st.duplicates, st.polls - st.read_errors);
  CHECK_MSG(st.last_read_error.find("transient") != std::string::npos, st.last_read_error);
  check_complete(got, st);
  check_payload(got, *src);
}

void fatal_error_stops_the_thread() {
  for (std::uint64_t at : {std::uint64_t{1}, std::uint64_t{5}}) {
    SyntheticConfig c;
    c.period_ns = 100'000;
    c.depth = 1;
    c.fatal_error_at_poll = at;
    auto src = std::make_shared<SyntheticSource>(c);
    Sampler s(src, make_config(20'000, 1024));
    s.start();
    CHECK(wait_for([&] { return !s.running(); }, kPatience));  // ended on its own
    CHECK(s.started());
    CHECK(!src->in_use());  // the ended thread handed the source back, before any stop()
    const std::string err = s.error();
    CHECK_MSG(err.find("fatal") != std::string::npos, "error() = '" << err << "'");
    CHECK_MSG(err.find("synthetic") != std::string::npos, "error() names the source: '" << err << "'");
    s.stop();  // still fine, still idempotent
    s.stop();
    CHECK(!src->in_use());
    const SamplerStats st = s.stats();
    CHECK_EQ(st.polls, at);  // no final poll after a fatal error
    CHECK_EQ(st.samples + st.duplicates, at - 1);
    CHECK_EQ(s.error(), err);
    std::vector<Sample> got;
    drain_into(s, got);
    CHECK_EQ(got.size(), st.samples);  // what arrived before the failure is kept
  }
}

class ThrowingSource final : public PowerSource {
 public:
  ThrowingSource() {
    info_.name = "thrower";
    info_.clock_domain = "test";
    info_.has_sequence = true;
  }
  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t max) override {
    CHECK(max >= 1);
    if (++polls_ == 3) throw std::runtime_error("device vanished");
    out[0] = Reading{};
    out[0].source_seq = polls_;
    return {1, PollStatus::kOk};
  }

 private:
  SourceInfo info_;
  std::uint64_t polls_ = 0;
};

void throwing_source_is_a_fatal_error() {
  auto src = std::make_shared<ThrowingSource>();
  Sampler s(src, make_config(20'000, 1024));
  s.start();
  CHECK(wait_for([&] { return !s.running(); }, kPatience));
  s.stop();
  const std::string err = s.error();
  CHECK_MSG(err.find("device vanished") != std::string::npos, err);
  CHECK_MSG(err.find("thrower") != std::string::npos, err);
  CHECK_EQ(s.stats().samples, 2u);
}

// A source without a sequence counter: new readings are recognised by their
// timestamp.
class LatestValueSource final : public PowerSource {
 public:
  LatestValueSource() {
    info_.name = "latest";
    info_.clock_domain = "test";
    info_.has_sequence = false;
  }
  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t) override {
    out[0] = Reading{};
    out[0].source_ts = host_now_ns() / 500'000;  // a new value every 500 us
    out[0].power_w[0] = static_cast<float>(out[0].source_ts % 1000);
    return {1, PollStatus::kOk};
  }

 private:
  SourceInfo info_;
};

void dedup_by_timestamp_without_sequence() {
  auto src = std::make_shared<LatestValueSource>();
  Sampler s(src, make_config(20'000, 1024));
  s.start();
  CHECK(wait_for([&] { return s.stats().duplicates >= 5 && s.stats().samples >= 3; }, kPatience));
  s.stop();
  std::vector<Sample> got;
  drain_into(s, got);
  const SamplerStats st = s.stats();
  CHECK(st.duplicates > 0);
  CHECK_EQ(st.source_missed, 0u);  // no sequence: gaps cannot be known
  CHECK_EQ(st.samples + st.duplicates, st.polls);
  CHECK_EQ(got.size(), st.samples);
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK_EQ(got[i].seq, i);
    if (i > 0) CHECK(got[i].source_ts > got[i - 1].source_ts);
    CHECK_EQ(got[i].power_w[0], static_cast<float>(got[i].source_ts % 1000));
  }
}

// A poll that stalls for 5 ms at a 200 us period: the sampler skips the
// missed slots and counts them, instead of bursting polls to catch up.
class StallingSource final : public PowerSource {
 public:
  StallingSource() {
    info_.name = "stalling";
    info_.clock_domain = "test";
    info_.has_sequence = true;
  }
  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t) override {
    if (++polls_ == 3) std::this_thread::sleep_for(milliseconds(5));
    out[0] = Reading{};
    out[0].source_seq = polls_;
    return {1, PollStatus::kOk};
  }

 private:
  SourceInfo info_;
  std::uint64_t polls_ = 0;
};

void deadline_misses_skip_slots() {
  auto src = std::make_shared<StallingSource>();
  Sampler s(src, make_config(200'000, 1024));
  s.start();
  CHECK(wait_for([&] { return s.stats().polls >= 10; }, kPatience));
  s.stop();
  const SamplerStats st = s.stats();
  CHECK_MSG(st.deadline_misses >= 20, "deadline_misses=" << st.deadline_misses << " after a 5 ms stall");
  // Each period slot is either polled or counted missed, once: together they
  // cannot exceed the slots in the thread's lifetime.
  const std::uint64_t slots = static_cast<std::uint64_t>(st.wall_time_ns / 200'000) + 2;
  CHECK_MSG(st.polls - 1 + st.deadline_misses <= slots,
            "polls " << st.polls << " + misses " << st.deadline_misses << " > " << slots << " slots");
  CHECK_EQ(st.samples, st.polls);  // every poll had a new reading
}

void stats_sanity() {
  auto src = make_source(100'000, 8);
  Sampler s(src, make_config(100'000, 1024));
  CHECK_EQ(s.stats().polls, 0u);  // before start: all zero
  CHECK_EQ(s.stats().wall_time_ns, 0);
  s.start();
  std::this_thread::sleep_for(milliseconds(20));
  const SamplerStats mid = s.stats();  // while running: CPU time of a live thread
  CHECK(mid.wall_time_ns > 0);
  std::this_thread::sleep_for(milliseconds(30));
  s.stop();
  const SamplerStats st = s.stats();
  CHECK(st.polls > 0);
  CHECK(st.polls >= mid.polls);
  CHECK(st.samples > 0);
  CHECK_MSG(st.jitter_p50_ns <= st.jitter_p90_ns && st.jitter_p90_ns <= st.jitter_p99_ns &&
                st.jitter_p99_ns <= st.jitter_max_ns,
            "jitter p50=" << st.jitter_p50_ns << " p90=" << st.jitter_p90_ns << " p99=" << st.jitter_p99_ns
                          << " max=" << st.jitter_max_ns);
  CHECK(st.jitter_p50_ns >= 0);
  CHECK_MSG(st.cpu_time_ns > 0, "cpu_time_ns=" << st.cpu_time_ns);
  CHECK(st.cpu_time_ns >= mid.cpu_time_ns);
  CHECK(st.wall_time_ns >= 40'000'000);
  // One thread cannot use more CPU than wall time (1 ms for clock granularity).
  CHECK_MSG(st.cpu_time_ns <= st.wall_time_ns + 1'000'000,
            "cpu " << st.cpu_time_ns << " > wall " << st.wall_time_ns);
  // Loose upper bound: a loaded machine stretches the achieved period, but
  // not by 200x on average.
  CHECK_MSG(st.mean_period_ns > 50'000 && st.mean_period_ns < 20'000'000, "mean_period_ns=" << st.mean_period_ns);
  CHECK_EQ(st.buffered, st.samples);  // nothing drained yet
  CHECK_EQ(s.stats().cpu_time_ns, st.cpu_time_ns);  // frozen after the thread ended
  std::vector<Sample> got;
  drain_into(s, got);
  CHECK_EQ(s.stats().buffered, 0u);
  CHECK_EQ(s.stats().drained, got.size());
}

}  // namespace

int main() {
  return fingrav_test::run_tests("sampler", {
                                                {"lifecycle", lifecycle},
                                                {"source_in_use", source_in_use_by_two_samplers},
                                                {"destructor_stops", destructor_stops_a_running_sampler},
                                                {"invalid_config", invalid_config},
                                                {"ring_allocation_failure", ring_allocation_failure_names_capacity},
                                                {"pinned_cpu", pinned_to_an_allowed_cpu},
                                                {"every_reading_once_under_load", every_reading_once_under_load},
                                                {"two_consumers", two_consumers_split_the_stream},
                                                {"start_stop_cycles_under_load", start_stop_cycles_under_load},
                                                {"final_poll_on_stop", final_poll_on_stop},
                                                {"drops_tiny_ring", drops_counted_with_a_tiny_ring},
                                                {"duplicates_depth_one", duplicates_counted_with_depth_one},
                                                {"transient_errors", transient_errors_counted},
                                                {"fatal_error", fatal_error_stops_the_thread},
                                                {"throwing_source", throwing_source_is_a_fatal_error},
                                                {"dedup_by_timestamp", dedup_by_timestamp_without_sequence},
                                                {"deadline_misses", deadline_misses_skip_slots},
                                                {"stats_sanity", stats_sanity},
                                            });
}
