// JitterHistogram: the log-linear bucket mapping and quantiles.
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "check.hpp"
#include "fingrav/sampler.hpp"

using fingrav::JitterHistogram;

namespace {

// The properties every value must satisfy: it lies in its bucket, the bucket
// is the first whose upper edge reaches it, and the bucket is at most 1/16 of
// its values wide.
void check_value(std::uint64_t v) {
  const int b = JitterHistogram::bucket_of(v);
  CHECK_MSG(b >= 0 && b < JitterHistogram::kBuckets, "v=" << v << " bucket " << b);
  const std::uint64_t hi = JitterHistogram::bucket_upper(b);
  CHECK_MSG(v <= hi, "v=" << v << " above its bucket's upper edge " << hi);
  if (b > 0) {
    const std::uint64_t prev_hi = JitterHistogram::bucket_upper(b - 1);
    CHECK_MSG(prev_hi < v, "v=" << v << " fits in bucket " << b - 1 << " (upper " << prev_hi << ")");
    // Past the exact range a bucket is at most 1/16 of its values wide.
    if (v >= 16) CHECK_MSG((hi - prev_hi) * 16 <= v, "v=" << v << " bucket width " << hi - prev_hi);
  }
  CHECK_EQ(JitterHistogram::bucket_of(hi), b);  // round trip
}

void bucket_round_trip() {
  for (std::uint64_t v = 0; v < 200'000; ++v) check_value(v);
  for (int bit = 0; bit < 63; ++bit) {
    const std::uint64_t p = std::uint64_t{1} << bit;
    check_value(p);
    check_value(p - 1);
    check_value(p + 1);
  }
  check_value(static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200'000; ++i) check_value(rng() >> (rng() % 64));
  // Exact below 16; buckets are contiguous and strictly increasing.
  for (std::uint64_t v = 0; v < 16; ++v) CHECK_EQ(JitterHistogram::bucket_upper(JitterHistogram::bucket_of(v)), v);
  const int top = JitterHistogram::bucket_of(static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  for (int b = 1; b <= top; ++b) {
    CHECK(JitterHistogram::bucket_upper(b) > JitterHistogram::bucket_upper(b - 1));
    CHECK_EQ(JitterHistogram::bucket_of(JitterHistogram::bucket_upper(b - 1) + 1), b);
  }
}

void relative_error_bound() {
  // The reported edge overestimates a value by at most 1/16 (6.25%).
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100'000; ++i) {
    const std::uint64_t v = 16 + (rng() >> (rng() % 60 + 4));
    const std::uint64_t hi = JitterHistogram::bucket_upper(JitterHistogram::bucket_of(v));
    CHECK_MSG(static_cast<double>(hi - v) <= static_cast<double>(v) / 16.0, "v=" << v << " upper=" << hi);
  }
}

void quantiles_on_known_data() {
  auto h = std::make_unique<JitterHistogram>();
  CHECK_EQ(h->quantile(0.5), 0);  // empty
  CHECK_EQ(h->count(), 0u);
  for (std::int64_t v = 1; v <= 1000; ++v) h->record(v);
  CHECK_EQ(h->count(), 1000u);
  CHECK_EQ(h->max(), 1000);
  CHECK_EQ(h->quantile(0.0), 1);   // smallest value, exact bucket
  CHECK_EQ(h->quantile(1.0), 1000);  // capped at the true maximum
  const std::int64_t p50 = h->quantile(0.5), p90 = h->quantile(0.9), p99 = h->quantile(0.99);
  // Each is the upper edge of the bucket holding the true quantile: at least
  // the true value, at most 1/16 above it.
  CHECK_MSG(p50 >= 500 && p50 <= 500 + 500 / 16, "p50=" << p50);
  CHECK_MSG(p90 >= 900 && p90 <= 900 + 900 / 16, "p90=" << p90);
  CHECK_MSG(p99 >= 990 && p99 <= 1000, "p99=" << p99);
  CHECK(p50 <= p90 && p90 <= p99 && p99 <= h->max());
  // Out-of-range q is clamped, not an error.
  CHECK_EQ(h->quantile(-1.0), h->quantile(0.0));
  CHECK_EQ(h->quantile(2.0), h->quantile(1.0));

  // Negative lateness (an early poll) counts as 0.
  auto g = std::make_unique<JitterHistogram>();
  g->record(-50);
  g->record(-1);
  g->record(7);
  CHECK_EQ(g->count(), 3u);
  CHECK_EQ(g->quantile(0.5), 0);
  CHECK_EQ(g->quantile(1.0), 7);
  CHECK_EQ(g->max(), 7);

  // The rank rounds up: of {10, 20, 30}, the median is the 2nd value, and
  // q = 0.34 already needs 2 observations at or below it.
  auto r = std::make_unique<JitterHistogram>();
  for (std::int64_t v : {10, 20, 30}) r->record(v);
  CHECK_EQ(r->quantile(0.5), 20);
  CHECK_EQ(r->quantile(0.34), 20);
  CHECK_EQ(r->quantile(0.33), 10);
  CHECK_EQ(r->quantile(0.67), 30);

  // One huge outlier does not move the median.
  auto k = std::make_unique<JitterHistogram>();
  for (int i = 0; i < 99; ++i) k->record(1000);
  k->record(1'000'000'000);
  CHECK(k->quantile(0.5) >= 1000 && k->quantile(0.5) <= 1000 + 1000 / 16);
  CHECK_EQ(k->quantile(1.0), 1'000'000'000);
  CHECK_EQ(k->max(), 1'000'000'000);
}

}  // namespace

int main() {
  return fingrav_test::run_tests("jitter_histogram", {
                                                         {"bucket_round_trip", bucket_round_trip},
                                                         {"relative_error_bound", relative_error_bound},
                                                         {"quantiles_on_known_data", quantiles_on_known_data},
                                                     });
}
