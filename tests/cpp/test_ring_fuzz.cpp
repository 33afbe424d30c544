// Two-thread fuzz of SpscRing: a producer pushes sequence numbers, a consumer
// pops them with random batch sizes (pop_into) and single pops (try_pop).
// Every number must arrive exactly once and in order. Tiny capacities (1-32)
// make the indices wrap constantly, so every slot is reused under contention.
//
// FINGRAV_FUZZ_ITEMS sets the total item count across capacities (CMake sets
// a smaller one for sanitizer builds, which run 5-20x slower).
#include <array>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "check.hpp"
#include "fingrav/host_clock.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/spsc_ring.hpp"

using fingrav::Sample;
using fingrav::SpscRing;

namespace {

constexpr std::array<std::size_t, 6> kCapacities = {1, 2, 4, 8, 16, 32};

// Backs off after failed attempts: on a 2-core machine shared with other work
// the other side may not be running at all, so pure spinning would waste its
// time slice.
struct Backoff {
  unsigned n = 0;
  void operator()() {
    if (++n % 64 == 0) {
      std::this_thread::yield();
    } else {
      fingrav::cpu_relax();
    }
  }
};

// Runs one producer/consumer pair over `items` items. make(i) builds item i;
// verify(item, i) checks that the item popped at position i is item i.
template <typename T, typename Make, typename Verify>
void fuzz_one(std::size_t capacity, std::uint64_t items, std::uint64_t seed, Make make, Verify verify) {
  SpscRing<T> ring(capacity);
  CHECK_EQ(ring.capacity(), capacity);

  std::thread producer([&] {
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
    Backoff backoff;
    for (std::uint64_t i = 0; i < items;) {
      if (ring.try_push(make(i))) {
        ++i;
        // Occasional pauses vary the interleaving: sometimes the consumer
        // finds the ring empty, sometimes the producer finds it full.
        if (rng() % 1024 == 0) std::this_thread::yield();
      } else {
        backoff();
      }
    }
  });

  std::mt19937_64 rng(seed);
  std::vector<T> buf(2 * capacity + 2);
  std::uint64_t next = 0;
  Backoff backoff;
  while (next < items) {
    std::size_t got = 0;
    if (rng() % 4 == 0) {
      T one{};
      if (ring.try_pop(one)) {
        verify(one, next++);
        got = 1;
      }
    } else {
      // Batch sizes from 0 to 2 * capacity + 1: below, at and above what the
      // ring can hold, so batches span the wrap boundary and hit the cap.
      const std::size_t want = static_cast<std::size_t>(rng() % (2 * capacity + 2));
      got = ring.pop_into(buf.data(), want);
      CHECK_MSG(got <= want, "got=" << got << " want=" << want);
      CHECK_MSG(got <= capacity, "got=" << got << " capacity=" << capacity);
      for (std::size_t k = 0; k < got; ++k) verify(buf[k], next++);
    }
    // From the consumer the fill level is bounded by the capacity.
    CHECK(ring.size_approx() <= capacity);
    if (got == 0) backoff();
  }
  producer.join();
  T extra{};
  CHECK(!ring.try_pop(extra));
  CHECK_EQ(ring.size_approx(), 0u);
}

std::uint64_t per_capacity(std::uint64_t total) {
  const std::uint64_t n = total / kCapacities.size();
  return n < 1000 ? 1000 : n;
}

void fuzz_u64(std::uint64_t total) {
  const std::uint64_t items = per_capacity(total);
  std::uint64_t seed = 1;
  for (const std::size_t cap : kCapacities) {
    fuzz_one<std::uint64_t>(
        cap, items, seed++, [](std::uint64_t i) { return i; },
        [cap](std::uint64_t got, std::uint64_t want) {
          CHECK_MSG(got == want, "capacity=" << cap << ": popped " << got << ", expected " << want);
        });
  }
}

// Sample: 64 bytes, so a torn or stale copy would show up as fields that do
// not agree with each other.
Sample make_sample(std::uint64_t i) {
  Sample s{};
  s.host_ns = static_cast<std::int64_t>(i) * 3 + 1;
  s.host_poll_begin_ns = static_cast<std::int64_t>(i) * 3;
  s.source_ts = -static_cast<std::int64_t>(i);
  s.source_seq = i ^ 0xa5a5a5a5a5a5a5a5ULL;
  s.seq = i;
  for (int c = 0; c < fingrav::kChannelCount; ++c) {
    s.power_w[c] = static_cast<float>(i % 100'000) + static_cast<float>(c) * 0.25f;
  }
  s.flags = static_cast<std::uint32_t>(i * 2654435761u);
  s.window_ns = static_cast<std::uint32_t>(~i);
  return s;
}

void verify_sample(std::size_t cap, const Sample& got, std::uint64_t want) {
  const Sample exp = make_sample(want);
  CHECK_MSG(got.seq == want, "capacity=" << cap << ": popped seq " << got.seq << ", expected " << want);
  CHECK_MSG(got.host_ns == exp.host_ns && got.host_poll_begin_ns == exp.host_poll_begin_ns &&
                got.source_ts == exp.source_ts && got.source_seq == exp.source_seq && got.flags == exp.flags &&
                got.window_ns == exp.window_ns,
            "capacity=" << cap << ": sample " << want << " has fields from another item (host_ns="
                        << got.host_ns << " source_seq=" << got.source_seq << ")");
  for (int c = 0; c < fingrav::kChannelCount; ++c) {
    CHECK_MSG(got.power_w[c] == exp.power_w[c],
              "capacity=" << cap << ": sample " << want << " channel " << c << " = " << got.power_w[c]);
  }
}

void fuzz_sample(std::uint64_t total) {
  const std::uint64_t items = per_capacity(total);
  std::uint64_t seed = 100;
  for (const std::size_t cap : kCapacities) {
    fuzz_one<Sample>(cap, items, seed++, make_sample,
                     [cap](const Sample& got, std::uint64_t want) { verify_sample(cap, got, want); });
  }
}

}  // namespace

int main() {
  const std::uint64_t total = fingrav_test::env_u64("FINGRAV_FUZZ_ITEMS", 4'000'000);
  std::printf("FINGRAV_FUZZ_ITEMS=%llu (uint64 items across capacities; Sample fuzz uses half)\n",
              static_cast<unsigned long long>(total));
  return fingrav_test::run_tests("ring_fuzz", {
                                                  {"u64_sequence", [total] { fuzz_u64(total); }},
                                                  {"sample_payload", [total] { fuzz_sample(total / 2); }},
                                              });
}
