// Single-threaded edge cases of SpscRing: capacity validation, full, empty,
// wrap-around, pop_into(max=0), size_approx, and a random walk checked against
// a std::deque model.
#include <cstdint>
#include <deque>
#include <random>
#include <stdexcept>
#include <vector>

#include "check.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/spsc_ring.hpp"

using fingrav::SpscRing;

namespace {

void capacity_validation() {
  for (std::size_t bad : {std::size_t{0}, std::size_t{3}, std::size_t{5}, std::size_t{6}, std::size_t{12},
                          std::size_t{1000}, (std::size_t{1} << 20) + 1}) {
    CHECK_THROWS(SpscRing<std::uint64_t>(bad), std::invalid_argument, "capacity");
  }
  // Too large is refused before anything is allocated.
  CHECK_THROWS(SpscRing<std::uint64_t>(std::size_t{1} << 41), std::invalid_argument, "capacity");
  for (std::size_t cap = 1; cap <= 4096; cap *= 2) {
    SpscRing<std::uint64_t> r(cap);
    CHECK_EQ(r.capacity(), cap);
    CHECK_EQ(r.size_approx(), 0u);
  }
}

void full_ring_refuses_and_keeps_contents() {
  SpscRing<std::uint64_t> r(8);
  for (std::uint64_t i = 0; i < 8; ++i) CHECK(r.try_push(i));
  CHECK_EQ(r.size_approx(), 8u);
  for (int k = 0; k < 3; ++k) CHECK(!r.try_push(999));  // full: refused
  CHECK_EQ(r.size_approx(), 8u);
  std::uint64_t out[16] = {};
  CHECK_EQ(r.pop_into(out, 16), 8u);
  for (std::uint64_t i = 0; i < 8; ++i) CHECK_EQ(out[i], i);  // the refused 999s left no trace
  // One free slot: exactly one push fits again.
  SpscRing<std::uint64_t> one(1);
  CHECK(one.try_push(7));
  CHECK(!one.try_push(8));
  std::uint64_t v = 0;
  CHECK(one.try_pop(v));
  CHECK_EQ(v, 7u);
  CHECK(one.try_push(9));
  CHECK(one.try_pop(v));
  CHECK_EQ(v, 9u);
}

void empty_ring_pops_nothing() {
  SpscRing<std::uint64_t> r(4);
  std::uint64_t out[4] = {11, 22, 33, 44};
  CHECK_EQ(r.pop_into(out, 4), 0u);
  CHECK_EQ(out[0], 11u);  // nothing written on an empty pop
  std::uint64_t v = 55;
  CHECK(!r.try_pop(v));
  CHECK_EQ(v, 55u);
  // Empty again after filling and draining.
  CHECK(r.try_push(1));
  CHECK(r.try_pop(v));
  CHECK(!r.try_pop(v));
  CHECK_EQ(r.pop_into(out, 4), 0u);
  CHECK_EQ(r.size_approx(), 0u);
}

void pop_into_zero_and_partial() {
  SpscRing<std::uint64_t> r(8);
  for (std::uint64_t i = 0; i < 5; ++i) CHECK(r.try_push(i));
  std::uint64_t out[8] = {};
  CHECK_EQ(r.pop_into(out, 0), 0u);  // max=0 takes nothing
  CHECK_EQ(r.size_approx(), 5u);
  CHECK_EQ(r.pop_into(out, 2), 2u);
  CHECK_EQ(out[0], 0u);
  CHECK_EQ(out[1], 1u);
  CHECK_EQ(r.size_approx(), 3u);
  CHECK_EQ(r.pop_into(out, 8), 3u);  // asks for more than there is
  CHECK_EQ(out[0], 2u);
  CHECK_EQ(out[2], 4u);
  CHECK_EQ(r.size_approx(), 0u);
}

void wrap_around_batches() {
  // Capacity 4: advance the indices so that each batch straddles the end of
  // the slot array, and do it many times over (indices far past capacity).
  SpscRing<std::uint64_t> r(4);
  std::uint64_t next_in = 0, next_out = 0;
  std::uint64_t out[4] = {};
  for (int round = 0; round < 10'000; ++round) {
    const std::size_t skew = static_cast<std::size_t>(round % 4);  // 0..3 items pushed and popped alone
    for (std::size_t k = 0; k < skew; ++k) {
      CHECK(r.try_push(next_in++));
      std::uint64_t v = 0;
      CHECK(r.try_pop(v));
      CHECK_EQ(v, next_out++);
    }
    for (int k = 0; k < 4; ++k) CHECK(r.try_push(next_in++));
    CHECK(!r.try_push(12345));
    CHECK_EQ(r.pop_into(out, 4), 4u);  // the batch crosses slot 3 -> slot 0 when skew > 0
    for (int k = 0; k < 4; ++k) CHECK_EQ(out[k], next_out++);
  }
  CHECK(next_in > 4 * 10'000);
  CHECK_EQ(r.size_approx(), 0u);
}

// An odd-sized slot type: the padding and batch memcpy must still work.
struct Odd {
  unsigned char b[3];
};

void odd_sized_items() {
  SpscRing<Odd> r(4);
  for (int round = 0; round < 100; ++round) {
    for (int k = 0; k < 3; ++k) {
      const auto v = static_cast<unsigned char>(round * 3 + k);
      CHECK(r.try_push(Odd{{v, static_cast<unsigned char>(v ^ 0xff), 7}}));
    }
    Odd out[4] = {};
    CHECK_EQ(r.pop_into(out, 4), 3u);
    for (int k = 0; k < 3; ++k) {
      const auto v = static_cast<unsigned char>(round * 3 + k);
      CHECK_EQ(out[k].b[0], v);
      CHECK_EQ(out[k].b[1], static_cast<unsigned char>(v ^ 0xff));
      CHECK_EQ(out[k].b[2], 7);
    }
  }
}

// Random operations against a deque model, for every small capacity.
void random_walk_matches_model() {
  std::mt19937_64 rng(42);
  for (std::size_t cap = 1; cap <= 64; cap *= 2) {
    SpscRing<fingrav::Sample> r(cap);
    std::deque<std::uint64_t> model;
    std::uint64_t next = 0;
    std::vector<fingrav::Sample> out(2 * cap + 1);
    for (int op = 0; op < 50'000; ++op) {
      const auto kind = rng() % 3;
      if (kind == 0) {
        fingrav::Sample s{};
        s.seq = next;
        s.source_seq = next * 7;
        const bool ok = r.try_push(s);
        CHECK_EQ(ok, model.size() < cap);
        if (ok) model.push_back(next++);
      } else if (kind == 1) {
        const std::size_t want = static_cast<std::size_t>(rng() % (2 * cap + 1));
        const std::size_t got = r.pop_into(out.data(), want);
        CHECK_EQ(got, std::min(want, model.size()));
        for (std::size_t k = 0; k < got; ++k) {
          CHECK_EQ(out[k].seq, model.front());
          CHECK_EQ(out[k].source_seq, model.front() * 7);
          model.pop_front();
        }
      } else {
        fingrav::Sample s{};
        const bool ok = r.try_pop(s);
        CHECK_EQ(ok, !model.empty());
        if (ok) {
          CHECK_EQ(s.seq, model.front());
          model.pop_front();
        }
      }
      CHECK_EQ(r.size_approx(), model.size());
    }
  }
}

}  // namespace

int main() {
  return fingrav_test::run_tests("ring_edges", {
                                                   {"capacity_validation", capacity_validation},
                                                   {"full", full_ring_refuses_and_keeps_contents},
                                                   {"empty", empty_ring_pops_nothing},
                                                   {"pop_into_zero_and_partial", pop_into_zero_and_partial},
                                                   {"wrap_around", wrap_around_batches},
                                                   {"odd_sized_items", odd_sized_items},
                                                   {"random_walk_model", random_walk_matches_model},
                                               });
}
