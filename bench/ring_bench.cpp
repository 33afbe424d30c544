// Ring throughput: fingrav::SpscRing against boost::lockfree::spsc_queue
// and a std::mutex + std::deque queue, one producer thread and one consumer
// thread, all in this binary and this run. Absolute items/s depend on the
// machine and on whatever else it runs, so the figures that matter are the
// ratios between queues measured side by side.
//
// Each trial: the producer pushes n sequence-numbered items one at a time
// (as the sampler does), spinning while the queue is full; the consumer pops
// them one at a time or in batches, checking that every sequence number
// arrives once and in order (a queue that loses or reorders fails the run).
// Trials of the three queues are interleaved within each repetition so a
// burst of load from another process hits all of them alike; the report
// gives the median over repetitions.
//
// On a shared machine a spinning thread that is switched out stalls the other
// one, and the trial then measures the scheduler rather than the queue. So
// trials are short (about a millisecond at full speed), each records whether
// either thread was involuntarily switched out, repetitions continue until
// every queue has --clean such clean trials (or --max-reps or --budget-s runs
// out), and the headline median is over the clean trials.
//
// Usage: ring_bench [--clean N] [--max-reps N] [--budget-s S] [--items N]
//                   [--mutex-items N] [--batch N] [--cpus P,C | --no-pin]
//                   [--json PATH]

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/lockfree/spsc_queue.hpp>
#include <boost/version.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fingrav/host_clock.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/spsc_ring.hpp"

namespace {

// A power of two (our ring needs one). Boost's compile-time capacity is used
// for the baseline because it is Boost's fastest configuration (the modulo
// becomes a compare with a constant), so the comparison does not flatter us.
constexpr std::size_t kCapacity = 4096;

// ------------------------------------------------------------------ items

void set_seq(std::uint64_t& v, std::uint64_t i) noexcept { v = i; }
void set_seq(fingrav::Sample& s, std::uint64_t i) noexcept {
  s.seq = i;
  s.host_ns = static_cast<std::int64_t>(i);  // a second field, as the sampler writes several
}
std::uint64_t seq_of(std::uint64_t v) noexcept { return v; }
std::uint64_t seq_of(const fingrav::Sample& s) noexcept { return s.seq; }

template <typename T>
T first_item() {
  T v{};
  set_seq(v, 0);
  return v;
}
template <>
fingrav::Sample first_item<fingrav::Sample>() {
  fingrav::Sample s{};
  s.source_ts = 1;
  s.source_seq = 1;
  for (float& p : s.power_w) p = 300.0f;
  return s;
}

// ------------------------------------------------------------------ queues
// One interface over the three: push one, pop one, pop up to max into out.

template <typename T>
struct OursQueue {
  static constexpr const char* kName = "fingrav";
  fingrav::SpscRing<T> ring{kCapacity};
  bool push(const T& v) noexcept { return ring.try_push(v); }
  bool pop(T& v) noexcept { return ring.try_pop(v); }
  std::size_t pop_batch(T* out, std::size_t max) noexcept { return ring.pop_into(out, max); }
};

template <typename T>
struct BoostQueue {
  static constexpr const char* kName = "boost";
  boost::lockfree::spsc_queue<T, boost::lockfree::capacity<kCapacity>> q;
  bool push(const T& v) noexcept { return q.push(v); }
  bool pop(T& v) noexcept { return q.pop(v); }
  // Boost's own batch pop, so batch is compared with batch.
  std::size_t pop_batch(T* out, std::size_t max) noexcept { return q.pop(out, max); }
};

// What a straightforward locked queue looks like; bounded at the same capacity
// so "full" means the same thing for all three.
template <typename T>
struct MutexQueue {
  static constexpr const char* kName = "mutex";
  std::mutex mu;
  std::deque<T> q;
  bool push(const T& v) {
    std::lock_guard<std::mutex> lock(mu);
    if (q.size() >= kCapacity) return false;
    q.push_back(v);
    return true;
  }
  bool pop(T& v) {
    std::lock_guard<std::mutex> lock(mu);
    if (q.empty()) return false;
    v = q.front();
    q.pop_front();
    return true;
  }
  std::size_t pop_batch(T* out, std::size_t max) {
    std::lock_guard<std::mutex> lock(mu);
    const std::size_t n = std::min(q.size(), max);
    const auto last = q.begin() + static_cast<std::ptrdiff_t>(n);
    std::copy(q.begin(), last, out);
    q.erase(q.begin(), last);
    return n;
  }
};

// ------------------------------------------------------------------ trial

// single: pop one at a time. batch: pop up to --batch at a time, as fast as
// possible. backoff: pop up to --batch at a time, and after a small batch wait
// about a microsecond without touching the queue before the next pop.
//
// Why three: with a consumer that is faster than the producer the queue sits
// empty and every item costs a cache-line round trip on the shared index and
// slot lines, whatever the queue (the "caught-up" regime); a consumer that
// falls behind streams large batches instead, several times faster. Which
// regime a single or batch trial settles in is partly chance, so their
// trials are bimodal. The backoff consumer, like the sampler's (which drains
// every 100 ms), lets items accumulate, so trials stay in the streaming regime
// and measure what the producer's push costs there, where cached indices are
// meant to pay.
enum class Mode { kSingle, kBatch, kBackoff };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kSingle: return "single";
    case Mode::kBatch: return "batch";
    default: return "backoff";
  }
}

constexpr Mode kModes[] = {Mode::kSingle, Mode::kBatch, Mode::kBackoff};

// About a microsecond of local work: a counted loop that touches no shared memory.
void backoff_wait() noexcept {
  for (int i = 0; i < 2000; ++i) asm volatile("" ::: "memory");
}

struct Options {
  std::size_t clean = 15;                // clean trials wanted per queue and row
  int min_reps = 5;
  int max_reps = 400;
  double budget_s = 150;                  // wall-clock cap for all repetitions
  std::uint64_t items = 200'000;          // per trial, lock-free queues (Sample: a quarter)
  std::uint64_t mutex_items = 10'000;     // per trial, mutex queue (an order slower; Sample: a quarter)
  std::size_t batch = 256;
  bool pin = true;
  int cpu_producer = 0;
  int cpu_consumer = 1;
  std::string json_path;
};

void pin_self(bool pin, int cpu) {
  if (!pin) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) {
    std::fprintf(stderr, "ring_bench: pinning to cpu %d failed: %s (use --cpus or --no-pin)\n", cpu,
                 std::strerror(rc));
    std::exit(2);
  }
}

inline void spin_wait() noexcept { asm volatile("" ::: "memory"); }

// Involuntary context switches of the calling thread so far: a trial in which
// either thread was switched out measured the scheduler as much as the queue.
long involuntary_switches() {
  rusage ru{};
  return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

struct TrialResult {
  double items_per_s = 0;
  bool preempted = false;
};

template <template <typename> class Q, typename T>
TrialResult run_trial(std::uint64_t n, Mode mode, const Options& opt) {
  auto q = std::make_unique<Q<T>>();  // heap: Boost's inline storage is 4097 slots
  // One untimed lap through every slot, so page faults on fresh storage are
  // not charged to short trials.
  {
    T v = first_item<T>();
    for (std::size_t i = 0; i < kCapacity; ++i) {
      if (!q->push(v)) break;
    }
    while (q->pop(v)) {
    }
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  bool in_order = true;
  std::uint64_t received = 0;
  long switches_producer = 0, switches_consumer = 0;
  // The consumer stamps the end when the last item arrives: a join() would
  // add the main thread's wake-up latency, which matters for short trials.
  std::chrono::steady_clock::time_point t_end{};

  // Both threads busy-spin on a full or empty queue, the same for all three
  // queues, with a compiler barrier and no pause instruction (as
  // rigtorp/SPSCQueue's benchmark does): in a KVM guest a pause loop longer
  // than a few microseconds triggers a pause-loop VM exit, which deschedules
  // the vCPU invisibly to the guest and made trials here bimodal.
  std::thread producer([&] {
    pin_self(opt.pin, opt.cpu_producer);
    T item = first_item<T>();
    ready.fetch_add(1, std::memory_order_acq_rel);
    while (!go.load(std::memory_order_acquire)) spin_wait();
    const long sw0 = involuntary_switches();
    for (std::uint64_t i = 0; i < n; ++i) {
      set_seq(item, i);
      while (!q->push(item)) spin_wait();
    }
    switches_producer = involuntary_switches() - sw0;
  });
  std::thread consumer([&] {
    pin_self(opt.pin, opt.cpu_consumer);
    std::vector<T> buf(opt.batch);
    bool ok = true;
    std::uint64_t expected = 0;
    ready.fetch_add(1, std::memory_order_acq_rel);
    while (!go.load(std::memory_order_acquire)) spin_wait();
    const long sw0 = involuntary_switches();
    if (mode == Mode::kSingle) {
      T v{};
      while (expected < n) {
        if (q->pop(v)) {
          ok &= seq_of(v) == expected;  // no branch per item
          ++expected;
        } else {
          spin_wait();
        }
      }
    } else {
      const std::size_t small = mode == Mode::kBackoff ? buf.size() / 4 : 0;
      while (expected < n) {
        const std::size_t k = q->pop_batch(buf.data(), buf.size());
        for (std::size_t j = 0; j < k; ++j) ok &= seq_of(buf[j]) == expected + j;
        expected += k;
        if (k <= small) {
          backoff_wait();
        } else if (k == 0) {
          spin_wait();
        }
      }
    }
    t_end = std::chrono::steady_clock::now();
    switches_consumer = involuntary_switches() - sw0;
    in_order = ok;
    received = expected;
  });

  while (ready.load(std::memory_order_acquire) < 2) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  producer.join();
  consumer.join();
  if (!in_order || received != n) {
    std::fprintf(stderr, "ring_bench: queue '%s' lost or reordered items (received %llu of %llu)\n", Q<T>::kName,
                 static_cast<unsigned long long>(received), static_cast<unsigned long long>(n));
    std::exit(3);
  }
  const double s = std::chrono::duration<double>(t_end - t0).count();
  return {static_cast<double>(n) / s, switches_producer + switches_consumer > 0};
}

// ------------------------------------------------------------------ report

struct Series {
  std::string item, mode, queue;
  std::vector<double> rates;     // items/s, one per repetition
  std::vector<bool> preempted;   // whether that repetition saw an involuntary switch
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::vector<double> clean_rates(const Series& s) {
  std::vector<double> out;
  for (std::size_t i = 0; i < s.rates.size(); ++i) {
    if (!s.preempted[i]) out.push_back(s.rates[i]);
  }
  return out;
}

const Series& find(const std::vector<Series>& all, const std::string& item, const std::string& mode,
                   const std::string& queue) {
  for (const auto& s : all) {
    if (s.item == item && s.mode == mode && s.queue == queue) return s;
  }
  std::fprintf(stderr, "ring_bench: internal error: no series %s/%s/%s\n", item.c_str(), mode.c_str(),
               queue.c_str());
  std::exit(4);
}

std::string json_num(double v) {
  std::ostringstream o;
  o.precision(6);
  o << v;
  return o.str();
}

template <template <typename> class Q, typename T>
void run_into(std::vector<Series>& all, const std::string& item, Mode mode, const Options& opt) {
  const std::string mname = mode_name(mode);
  std::uint64_t n = std::string(Q<T>::kName) == "mutex" ? opt.mutex_items : opt.items;
  // 64-byte items move several times slower: fewer of them keep a trial short
  // enough to have a fair chance of running unpreempted.
  if (sizeof(T) > sizeof(std::uint64_t)) n = std::max<std::uint64_t>(n / 4, 1);
  const TrialResult r = run_trial<Q, T>(n, mode, opt);
  for (auto& s : all) {
    if (s.item == item && s.mode == mname && s.queue == Q<T>::kName) {
      s.rates.push_back(r.items_per_s);
      s.preempted.push_back(r.preempted);
      return;
    }
  }
  all.push_back({item, mname, Q<T>::kName, {r.items_per_s}, {r.preempted}});
}

// One repetition of one item type and mode: the three queues, in an order
// rotated by repetition so none always runs right after the same other.
template <typename T>
void run_rep(std::vector<Series>& all, const std::string& item, Mode mode, int rep, const Options& opt) {
  for (int k = 0; k < 3; ++k) {
    switch ((k + rep) % 3) {
      case 0: run_into<OursQueue, T>(all, item, mode, opt); break;
      case 1: run_into<BoostQueue, T>(all, item, mode, opt); break;
      default: run_into<MutexQueue, T>(all, item, mode, opt); break;
    }
  }
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "ring_bench: %s\nusage: ring_bench [--clean N] [--max-reps N] [--budget-s S] [--items N] "
               "[--mutex-items N] [--batch N] [--cpus P,C | --no-pin] [--json PATH]\n",
               why);
  std::exit(1);
}

std::uint64_t parse_u64(const char* flag, const char* s) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v == 0) {
    usage((std::string(flag) + "=" + s + ": expected a positive integer").c_str());
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((a + ": missing value").c_str());
      return argv[++i];
    };
    if (a == "--clean") {
      o.clean = static_cast<std::size_t>(std::min<std::uint64_t>(parse_u64("--clean", value()), 1000));
    } else if (a == "--max-reps") {
      o.max_reps = static_cast<int>(std::min<std::uint64_t>(parse_u64("--max-reps", value()), 100000));
      o.min_reps = std::min(o.min_reps, o.max_reps);
    } else if (a == "--budget-s") {
      o.budget_s = static_cast<double>(parse_u64("--budget-s", value()));
    } else if (a == "--items") {
      o.items = parse_u64("--items", value());
    } else if (a == "--mutex-items") {
      o.mutex_items = parse_u64("--mutex-items", value());
    } else if (a == "--batch") {
      o.batch = static_cast<std::size_t>(parse_u64("--batch", value()));
    } else if (a == "--cpus") {
      const std::string v = value();
      if (std::sscanf(v.c_str(), "%d,%d", &o.cpu_producer, &o.cpu_consumer) != 2 || o.cpu_producer < 0 ||
          o.cpu_consumer < 0) {
        usage(("--cpus=" + v + ": expected two CPU numbers, producer,consumer").c_str());
      }
    } else if (a == "--no-pin") {
      o.pin = false;
    } else if (a == "--json") {
      o.json_path = value();
    } else if (a == "-h" || a == "--help") {
      usage("help");
    } else {
      usage((a + ": unknown argument").c_str());
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse(argc, argv);
  if (opt.pin) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || !CPU_ISSET(opt.cpu_producer, &allowed) ||
        !CPU_ISSET(opt.cpu_consumer, &allowed) || opt.cpu_producer == opt.cpu_consumer) {
      // Two spinning threads on one CPU measure the scheduler, not the queue.
      std::fprintf(stderr, "ring_bench: cpus %d,%d are not two distinct allowed CPUs; pass --cpus or --no-pin\n",
                   opt.cpu_producer, opt.cpu_consumer);
      return 1;
    }
  }

  std::vector<Series> all;
  // Warm-up (page faults, frequency ramp), not recorded.
  {
    Options warm = opt;
    warm.items = std::max<std::uint64_t>(opt.items / 8, 1);
    warm.mutex_items = std::max<std::uint64_t>(opt.mutex_items / 8, 1);
    std::vector<Series> scratch;
    run_rep<std::uint64_t>(scratch, "u64", Mode::kSingle, 0, warm);
    run_rep<fingrav::Sample>(scratch, "sample", Mode::kBatch, 0, warm);
  }
  // A row (item type, pop mode) is repeated until each of its three queues
  // has opt.clean clean trials; all three run in every repetition of the row
  // so their trials stay interleaved.
  auto row_needs_more = [&](const char* item, const char* mode, int rep) {
    if (rep < opt.min_reps) return true;
    for (const char* q : {"fingrav", "boost", "mutex"}) {
      if (clean_rates(find(all, item, mode, q)).size() < opt.clean) return true;
    }
    return false;
  };
  const auto started = std::chrono::steady_clock::now();
  int reps = 0;
  for (; reps < opt.max_reps; ++reps) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > opt.budget_s) {
      std::fprintf(stderr, "ring_bench: --budget-s %.0f s spent after %d repetitions\n", opt.budget_s, reps);
      break;
    }
    bool any = false;
    for (Mode m : kModes) {
      if (row_needs_more("u64", mode_name(m), reps)) {
        run_rep<std::uint64_t>(all, "u64", m, reps, opt);
        any = true;
      }
    }
    for (Mode m : kModes) {
      if (row_needs_more("sample", mode_name(m), reps)) {
        run_rep<fingrav::Sample>(all, "sample", m, reps, opt);
        any = true;
      }
    }
    if (!any) break;
    if ((reps + 1) % 10 == 0) std::fprintf(stderr, "ring_bench: %d repetitions\n", reps + 1);
  }

  // The targets (>= 1.5x Boost, >= 10x the mutex queue), judged on the headline medians.
  constexpr double kTargetVsBoost = 1.5;
  constexpr double kTargetVsMutex = 10.0;
  // Fewer clean trials than this in any queue of a row and the headline for
  // that row falls back to the median over all its trials.
  constexpr std::size_t kMinClean = 5;

  std::printf("\nSPSC ring throughput, 1 producer + 1 consumer thread%s, capacity %zu, batch %zu, "
              "up to %d repetitions per row (Mitems/s)\n",
              opt.pin ? " (pinned)" : "", kCapacity, opt.batch, reps);
  std::printf("%-6s %-6s %9s %9s %9s %10s %10s  %-13s %-8s %-11s %s\n", "item", "pop", "fingrav", "boost", "mutex",
              "ours/boost", "ours/mutex", "statistic", "clean", "best-of", "targets (>=1.5x boost, >=10x mutex)");
  std::ostringstream rows;
  bool all_met = true;
  bool first = true;
  for (const char* item : {"u64", "sample"}) {
    for (Mode md : kModes) {
      const char* mode = mode_name(md);
      const Series* s3[3] = {&find(all, item, mode, "fingrav"), &find(all, item, mode, "boost"),
                             &find(all, item, mode, "mutex")};
      bool use_clean = true;
      for (const Series* s : s3) use_clean = use_clean && clean_rates(*s).size() >= kMinClean;
      double head[3], best[3];
      for (int i = 0; i < 3; ++i) {
        head[i] = median(use_clean ? clean_rates(*s3[i]) : s3[i]->rates);
        best[i] = *std::max_element(s3[i]->rates.begin(), s3[i]->rates.end());
      }
      const double rb = head[0] / head[1], rm = head[0] / head[2];
      const double best_rb = best[0] / best[1], best_rm = best[0] / best[2];
      const bool met_b = rb >= kTargetVsBoost, met_m = rm >= kTargetVsMutex;
      all_met = all_met && met_b && met_m;
      const char* statistic = use_clean ? "median-clean" : "median-all";
      std::size_t fewest_clean = SIZE_MAX;
      for (const Series* s : s3) fewest_clean = std::min(fewest_clean, clean_rates(*s).size());
      const std::size_t trials = s3[0]->rates.size();
      std::printf("%-6s %-6s %9.1f %9.1f %9.1f %9.2fx %9.1fx  %-13s %3zu/%-4zu %4.2fx/%4.1fx %s / %s\n", item,
                  mode, head[0] / 1e6, head[1] / 1e6, head[2] / 1e6, rb, rm, statistic, fewest_clean, trials,
                  best_rb, best_rm, met_b ? "met" : "MISSED", met_m ? "met" : "MISSED");
      if (!first) rows << ",\n";
      first = false;
      rows << "    {\"item\": \"" << item << "\", \"item_bytes\": "
           << (std::string(item) == "u64" ? sizeof(std::uint64_t) : sizeof(fingrav::Sample)) << ", \"pop\": \""
           << mode << "\", \"statistic\": \"" << statistic << "\", \"trials\": " << trials
           << ", \"fewest_clean_trials\": " << fewest_clean << ",\n     \"items_per_s\": {\"fingrav\": "
           << json_num(head[0]) << ", \"boost\": " << json_num(head[1]) << ", \"mutex\": " << json_num(head[2])
           << "},\n     \"ratio_vs_boost\": " << json_num(rb) << ", \"ratio_vs_mutex\": " << json_num(rm)
           << ", \"met_vs_boost\": " << (met_b ? "true" : "false")
           << ", \"met_vs_mutex\": " << (met_m ? "true" : "false")
           << ",\n     \"best_items_per_s\": {\"fingrav\": " << json_num(best[0]) << ", \"boost\": "
           << json_num(best[1]) << ", \"mutex\": " << json_num(best[2]) << "}, \"best_ratio_vs_boost\": "
           << json_num(best_rb) << ", \"best_ratio_vs_mutex\": " << json_num(best_rm)
           << ",\n     \"median_all_items_per_s\": {\"fingrav\": " << json_num(median(s3[0]->rates))
           << ", \"boost\": " << json_num(median(s3[1]->rates)) << ", \"mutex\": " << json_num(median(s3[2]->rates))
           << "},\n     \"per_trial\": {";
      for (int i = 0; i < 3; ++i) {
        const Series& s = *s3[i];
        rows << (i ? ",\n                " : "") << "\"" << s.queue << "\": {\"items_per_s\": [";
        for (std::size_t k = 0; k < s.rates.size(); ++k) rows << (k ? ", " : "") << json_num(s.rates[k]);
        rows << "], \"preempted\": [";
        for (std::size_t k = 0; k < s.preempted.size(); ++k) rows << (k ? ", " : "") << (s.preempted[k] ? 1 : 0);
        rows << "]}";
      }
      rows << "}}";
    }
  }
  std::printf("all targets %s\n", all_met ? "met" : "NOT met");

  if (!opt.json_path.empty()) {
    std::ofstream f(opt.json_path);
    if (!f) {
      std::fprintf(stderr, "ring_bench: cannot write --json %s\n", opt.json_path.c_str());
      return 1;
    }
    f << "{\n  \"benchmark\": \"spsc_ring_throughput\",\n"
      << "  \"config\": {\"capacity\": " << kCapacity << ", \"batch\": " << opt.batch
      << ", \"max_reps_run\": " << reps << ", \"clean_wanted\": " << opt.clean
      << ", \"items_per_trial\": " << opt.items << ", \"mutex_items_per_trial\": " << opt.mutex_items
      << ", \"pinned\": " << (opt.pin ? "true" : "false") << ", \"cpus\": [" << opt.cpu_producer << ", "
      << opt.cpu_consumer << "], \"min_clean_trials\": " << kMinClean << ", \"compiler\": \"" << __VERSION__
      << "\", \"boost_version\": \"" << BOOST_LIB_VERSION << "\"},\n"
      << "  \"targets\": {\"min_ratio_vs_boost\": " << kTargetVsBoost << ", \"min_ratio_vs_mutex\": "
      << kTargetVsMutex << "},\n"
      << "  \"all_targets_met\": " << (all_met ? "true" : "false") << ",\n"
      << "  \"results\": [\n"
      << rows.str() << "\n  ]\n}\n";
  }
  return 0;
}
