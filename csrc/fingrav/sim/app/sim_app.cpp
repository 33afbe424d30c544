// fingrav-sim-app: a GPU application on the simulated device, for
// `fingrav run --device sim` and the tests of the native launch capture.
//
// It opens the shared simulated device named by FINGRAV_SIM_DEVICE (created
// by the recorder), runs a real-time SimDevice with its parameters and
// clocks, publishes the logger's logs into the shared ring as they become
// visible to the host, launches a workload on it, and reports every finished
// execution to a stand-in vendor runtime through the stand-in C ABI
// (csrc/fingrav/sim/standin_abi.h), which hands vendor records to whatever
// tool library the runtime loads. At exit (or on SIGTERM/SIGINT) it flushes
// the stand-in, runs its shutdown, and writes the simulator's truth beside
// the device file (truth_file.hpp).
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "fingrav/host_clock.hpp"
#include "fingrav/rng.hpp"
#include "fingrav/sim/app/truth_file.hpp"
#include "fingrav/sim/device.hpp"
#include "fingrav/sim/shared_device.hpp"
#include "fingrav/sim/standin_abi.h"

namespace {

using fingrav::host_now_ns;
namespace sim = fingrav::sim;

// The stand-in C ABI (standin_abi.h), resolved at run time from the library chosen.
using InitFn = decltype(&fingrav_standin_init);
using DispatchFn = decltype(&fingrav_standin_dispatch);
using VoidFn = decltype(&fingrav_standin_flush);
static_assert(std::is_same_v<VoidFn, decltype(&fingrav_standin_fini)>);

constexpr const char* kUsage =
    "usage: fingrav-sim-app --vendor rocm|cuda [--standin PATH] [--workload train-step|gemm-loop]\n"
    "                       [--seconds S (default 1) | --iterations N] [--seed N] [--rate R]\n"
    "Runs a workload on the shared simulated GPU named by FINGRAV_SIM_DEVICE and reports each kernel\n"
    "execution through a stand-in vendor runtime (--standin, else FINGRAV_STANDIN_LIBRARY, else the\n"
    "vendor's stand-in installed with this program in ../lib; for cuda, FINGRAV_CUPTI_LIBRARY is set to it unless\n"
    "set). --rate R (1 to 100000) instead delivers R dispatch records\n"
    "per second without the power model (the overhead bench).\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string vendor;
  std::string standin;
  std::string workload = "train-step";
  double seconds = -1;
  long long iterations = -1;
  std::uint64_t seed = 0;
  double rate = 0;
};

double number_arg(const std::string& name, const char* text, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !(v >= lo && v <= hi)) {
    throw UsageError(name + "=" + text + ": must be a number in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) throw UsageError(a + ": needs a value (or is unknown)");
    const char* v = argv[++i];
    if (a == "--vendor") {
      o.vendor = v;
      if (o.vendor != "rocm" && o.vendor != "cuda") throw UsageError("--vendor=" + o.vendor + ": must be rocm or cuda");
    } else if (a == "--standin") {
      o.standin = v;
    } else if (a == "--workload") {
      o.workload = v;
      if (o.workload != "train-step" && o.workload != "gemm-loop") {
        throw UsageError("--workload=" + o.workload + ": must be train-step or gemm-loop");
      }
    } else if (a == "--seconds") {
      o.seconds = number_arg("--seconds", v, 0.001, 86400);
    } else if (a == "--iterations") {
      o.iterations = static_cast<long long>(number_arg("--iterations", v, 1, 1e9));
    } else if (a == "--seed") {
      o.seed = static_cast<std::uint64_t>(number_arg("--seed", v, 0, 9007199254740992.0));
    } else if (a == "--rate") {
      o.rate = number_arg("--rate", v, 1, 100000);
    } else {
      throw UsageError(a + ": unknown option");
    }
  }
  if (o.vendor.empty()) throw UsageError("--vendor: required (rocm or cuda)");
  if (o.seconds > 0 && o.iterations > 0) throw UsageError("--seconds and --iterations: give one, not both");
  if (o.seconds < 0 && o.iterations < 0) o.seconds = 1.0;
  return o;
}

std::string self_dir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string s(buf, static_cast<std::size_t>(n));
  const auto slash = s.rfind('/');
  return slash == std::string::npos ? "." : s.substr(0, slash);
}

struct Standin {
  void* handle = nullptr;
  InitFn init = nullptr;
  DispatchFn dispatch = nullptr;
  VoidFn flush = nullptr;
  VoidFn fini = nullptr;
  std::string path;
};

Standin load_standin(const Options& o) {
  std::string path = o.standin;
  std::string from = "--standin";
  if (path.empty()) {
    const char* env = std::getenv("FINGRAV_STANDIN_LIBRARY");
    if (env != nullptr && *env != '\0') {
      path = env;
      from = "FINGRAV_STANDIN_LIBRARY";
    }
  }
  if (path.empty()) {
    // Installed as fingrav_native/sim/bin/fingrav-sim-app beside fingrav_native/sim/lib/.
    path = self_dir() + (o.vendor == "rocm" ? "/../lib/libfingrav_standin_rocprofiler.so"
                                            : "/../lib/libfingrav_standin_cupti.so");
    from = "the installed stand-in";
    if (::access(path.c_str(), R_OK) != 0) {
      throw std::runtime_error("no stand-in " + o.vendor + " runtime: give --standin PATH or set "
                               "FINGRAV_STANDIN_LIBRARY (" + path + " does not exist; the stand-ins are built "
                               "with the package: pip install .; the CUDA one only where the CUPTI headers are "
                               "found at build time, which a plain pip install . brings on Linux x86_64)");
    }
  }
  Standin s;
  s.path = path;
  s.handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (s.handle == nullptr) {
    const char* err = ::dlerror();
    throw std::runtime_error(from + "=" + path + ": cannot load the stand-in runtime: " + (err ? err : "?"));
  }
  auto sym = [&](const char* name) {
    void* p = ::dlsym(s.handle, name);
    if (p == nullptr) {
      throw std::runtime_error(from + "=" + path + ": not a stand-in runtime (no " + name +
                               "; see csrc/fingrav/sim/standin_abi.h)");
    }
    return p;
  };
  s.init = reinterpret_cast<InitFn>(sym("fingrav_standin_init"));
  s.dispatch = reinterpret_cast<DispatchFn>(sym("fingrav_standin_dispatch"));
  s.flush = reinterpret_cast<VoidFn>(sym("fingrav_standin_flush"));
  s.fini = reinterpret_cast<VoidFn>(sym("fingrav_standin_fini"));
  // The stand-in is this process's libcupti, as a loaded libcupti.so.12 is a CUDA application's: the
  // injected consumer must open it, not a real libcupti found on its search path (the
  // nvidia-cuda-cupti-cu12 wheel beside the package), which would see no GPU and deliver nothing.
  // One named already is the caller's exact choice and is kept.
  if (o.vendor == "cuda") ::setenv("FINGRAV_CUPTI_LIBRARY", path.c_str(), /*overwrite=*/0);
  return s;
}

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal.store(sig, std::memory_order_relaxed); }

void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

// Grid and block of each kernel as its launch would give them, in blocks;
// ROCm's records count the grid in work-items (as rocprofv3 reports it).
struct Shape {
  std::uint32_t blocks[3];
  std::uint32_t block[3];
  std::uint64_t queue;  // communication kernels on their own stream, as NCCL/RCCL run
};

Shape shape_of(const sim::KernelSpec& k) {
  if (k.kind == "gemm") return {{k.duration_ns > 1e6 ? 4096u : 1024u, 1, 1}, {256, 1, 1}, 1};
  if (k.kind == "gemv") return {{k.duration_ns > 40e3 ? 512u : 256u, 1, 1}, {256, 1, 1}, 1};
  if (k.kind == "collective") return {{64, 1, 1}, {512, 1, 1}, 2};
  return {{304, 1, 1}, {256, 1, 1}, 1};
}

// One iteration of a workload: (kernel preset, back-to-back executions).
std::vector<std::pair<std::string, int>> plan_of(const std::string& workload) {
  if (workload == "gemm-loop") return {{"cb-4k-gemm", 8}};
  // A training step: norms (~26 us), forward GEMMs (~330 us), a
  // memory-bound GEMV (~60 us), the big backward GEMM (~2.3 ms, over the
  // power cap) and a gradient all-reduce over the fabric (~2.5 ms).
  return {{"mb-2k-gemv", 2}, {"cb-4k-gemm", 3}, {"mb-8k-gemv", 2}, {"cb-8k-gemm", 1},
          {"mb-2k-gemv", 2}, {"cb-4k-gemm", 3}, {"mb-8k-gemv", 2}, {"allreduce-512m", 1}};
}

// Publishes the device's logs into the shared ring as they become visible.
class Publisher {
 public:
  Publisher(sim::SimDevice& dev, sim::SharedSimDevice& shared, std::mutex& mu)
      : dev_(dev), shared_(shared), mu_(mu), buf_(fingrav::PowerSource::kMaxReadingsPerPoll) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Publisher() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
    once();  // what became visible up to now
  }
  std::uint64_t published() const { return published_; }

 private:
  void loop() {
    while (!stop_.load(std::memory_order_relaxed)) {
      once();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  void once() {
    std::size_t n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = dev_.published_logs(host_now_ns(), buf_.data(), buf_.size());
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (buf_[i].seq < next_seq_) continue;
      shared_.publish(buf_[i]);
      next_seq_ = buf_[i].seq + 1;
      ++published_;
    }
  }
  sim::SimDevice& dev_;
  sim::SharedSimDevice& shared_;
  std::mutex& mu_;
  std::vector<sim::LogRecord> buf_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t published_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Run {
  const Options& o;
  Standin& standin;
  sim::SimDevice& dev;
  std::mutex& mu;
  sim::app::EnergyGrid grid;
  std::vector<sim::app::TruthExec> execs;
  std::vector<sim::KernelSpec> kernels;
  std::uint64_t dispatched = 0;
  std::uint64_t dispatch_errors = 0;

  void dispatch(const char* name, std::int64_t start, std::int64_t end, const Shape& s) {
    std::uint32_t grid_dims[3];
    for (int d = 0; d < 3; ++d) grid_dims[d] = o.vendor == "rocm" ? s.blocks[d] * s.block[d] : s.blocks[d];
    if (standin.dispatch(name, start, end, 0, s.queue, grid_dims, s.block) != 0) ++dispatch_errors;
    ++dispatched;
  }

  // Moves what the device finished into the truth and reports it; frees the
  // device's records so a long run keeps constant memory.
  void collect() {
    std::vector<sim::ExecRecord> done;
    std::vector<sim::TruthSegment> segs;
    {
      std::lock_guard<std::mutex> lock(mu);
      done = dev.executions();
      segs = dev.truth_segments();
      dev.clear_records();
    }
    grid.fold(segs);
    for (const sim::ExecRecord& r : done) {
      const sim::KernelSpec& k = kernels[static_cast<std::size_t>(r.kernel_id)];
      sim::app::TruthExec t{};
      std::strncpy(t.kernel, k.name.c_str(), sizeof(t.kernel) - 1);
      t.kernel_id = r.kernel_id;
      t.run = r.run;
      t.start_ns = r.start_ns;
      t.end_ns = r.end_ns;
      t.energy_j = r.energy_j;
      t.mean_total_w = r.mean_power_w[0];
      t.mean_compute_w = r.mean_power_w[1];
      t.mean_io_w = r.mean_power_w[2];
      t.mean_memory_w = r.mean_power_w[3];
      execs.push_back(t);
      dispatch(t.kernel, r.start_ns, r.end_ns, shape_of(k));
    }
  }

  bool more(long long done, std::int64_t t0) const {
    if (g_signal.load(std::memory_order_relaxed) != 0) return false;
    if (o.iterations > 0) return done < o.iterations;
    return static_cast<double>(host_now_ns() - t0) < o.seconds * 1e9;
  }

  void workload() {
    const auto plan = plan_of(o.workload);
    std::vector<int> ids;
    for (const auto& [name, count] : plan) ids.push_back(dev.kernel_id(name));
    fingrav::Rng host_rng(o.seed, 11);
    const std::int64_t t0 = host_now_ns();
    for (long long it = 0; more(it, t0); ++it) {
      for (std::size_t j = 0; j < plan.size(); ++j) dev.launch(ids[j], plan[j].second, static_cast<int>(it));
      dev.synchronize();
      collect();
      // The host's own work between steps (data loading, logging): a random
      // gap, so kernels fall at every phase of the logger (paper Section IV-A).
      const double gap_us = host_rng.uniform(200, 1500);
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(gap_us)));
    }
  }

  // The overhead bench's stress mode: R records per second, paced on the
  // host clock, delivered without simulating the kernels.
  void stress() {
    static const char* const names[] = {"stress_gemm", "stress_gemv", "stress_norm", "stress_allreduce"};
    const Shape s{{1024, 1, 1}, {256, 1, 1}, 1};
    const double period = 1e9 / o.rate;
    const std::int64_t t0 = host_now_ns();
    long long n = 0;
    while (more(o.iterations > 0 ? n : 0, t0)) {
      const auto due = static_cast<long long>(static_cast<double>(host_now_ns() - t0) / period);
      if (n >= due) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        continue;
      }
      for (; n < due && (o.iterations <= 0 || n < o.iterations); ++n) {
        const auto start = t0 + static_cast<std::int64_t>(static_cast<double>(n) * period);
        dispatch(names[n % 4], start, start + static_cast<std::int64_t>(period / 2), s);
      }
    }
    collect();
  }
};

int run(const Options& o) {
  const char* env = std::getenv(sim::kSharedDeviceEnv);
  if (env == nullptr || *env == '\0') {
    throw std::runtime_error(std::string(sim::kSharedDeviceEnv) +
                             " is not set: it names the shared simulated device file the recorder creates "
                             "(fingrav run --device sim sets it; fingrav_native.sim.SharedSimGPU.create makes one)");
  }
  std::shared_ptr<sim::SharedSimDevice> shared;
  try {
    shared = sim::SharedSimDevice::open(env);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(sim::kSharedDeviceEnv) + "=" + env + ": " + e.what());
  }
  Standin standin = load_standin(o);
  install_handlers();
  sim::SimDevice dev(shared->params(), /*realtime=*/true, shared->clock_epoch_ns());
  std::mutex mu;
  const sim::SimParams& p = shared->params();
  Run r{o, standin, dev, mu, sim::app::EnergyGrid(100'000, p.tau_power_ns, p.vr_loss, p.other_w), {},
        dev.kernels()};
  shared->attach();
  Publisher pub(dev, *shared, mu);
  if (const int rc = standin.init(); rc != 0) {
    pub.stop();
    shared->detach();
    throw std::runtime_error(standin.path + ": fingrav_standin_init failed with code " + std::to_string(rc));
  }
  if (o.rate > 0) {
    r.stress();
  } else {
    r.workload();
  }
  standin.flush();
  standin.fini();
  {
    std::lock_guard<std::mutex> lock(mu);
    (void)dev.now();  // the device's state up to the end of the run
  }
  pub.stop();
  r.collect();
  sim::app::TruthMeta meta;
  meta.workload = o.rate > 0 ? "stress" : o.workload;
  meta.vendor = o.vendor;
  meta.seed = o.seed;
  meta.attach_ns = shared->attach_ns();
  meta.dispatched = r.dispatched;
  meta.dispatch_errors = r.dispatch_errors;
  meta.logs_published = pub.published();
  meta.signal = g_signal.load(std::memory_order_relaxed);
  shared->detach();
  meta.detach_ns = shared->detach_ns();
  sim::app::write_truth(shared->path(), r.execs, r.grid, meta);
  if (r.dispatch_errors > 0) {
    std::fprintf(stderr, "fingrav-sim-app: the stand-in refused %llu of %llu dispatch records\n",
                 static_cast<unsigned long long>(r.dispatch_errors), static_cast<unsigned long long>(r.dispatched));
  }
  return meta.signal;
}

}  // namespace

int main(int argc, char** argv) {
  int sig = 0;
  try {
    sig = run(parse(argc, argv));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "fingrav-sim-app: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fingrav-sim-app: %s\n", e.what());
    return 1;
  }
  if (sig != 0) {
    // Ended by a signal, cleanly: end as that signal ends a process, so the
    // caller sees why (a shell reports 128 + its number).
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
  return 0;
}
