#include "fingrav/nvidia/cupti_consumer.hpp"

#include <cupti.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fingrav/dynlib.hpp"

namespace fingrav::nvidia::cupti {
namespace {

// The kernel record layout read (see the header).
using KernelRecord = CUpti_ActivityKernel9;

// Activity buffers handed to CUPTI: 1 MiB holds about 4,500 kernel records,
// so at 10^5 launches per second CUPTI completes about 22 buffers a second;
// the flush period bounds how long a record waits in a buffer that is not full.
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

// Each function from its declaration in the CUPTI headers, so a signature
// can never drift from the library's.
struct Api {
  DynamicLibrary lib;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) num_dropped = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityFlushPeriod) flush_period = nullptr;  // optional (CUDA 11.1+)
};

// The folder of this tool library (dladdr of one of its functions), or "".
std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_folder), &info) == 0 || info.dli_fname == nullptr) return {};
  std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

LibrarySpec cupti_spec() {
  LibrarySpec spec;
  spec.what = "CUPTI (libcupti)";
  // Built against CUPTI 12's headers: its library first; CUDA 13's keeps the
  // record prefix read here (see the header).
  spec.names = {"libcupti.so.12", "libcupti.so", "libcupti.so.13"};
  // Installed in the wheel as site-packages/fingrav_native/lib/: the
  // nvidia-cuda-cupti-cu12 wheel's library is then site-packages/nvidia/cuda_cupti/lib.
  const std::string here = own_folder();
  if (!here.empty()) spec.dirs.push_back(here + "/../../nvidia/cuda_cupti/lib");
  spec.dirs.push_back("/usr/local/cuda/extras/CUPTI/lib64");
  spec.dirs.push_back("/usr/local/cuda/lib64");
  spec.root_env = {"CUDA_PATH", "CUDA_HOME"};
  spec.override_env = "FINGRAV_CUPTI_LIBRARY";
  spec.install_hint =
      "install CUPTI: `pip install nvidia-cuda-cupti-cu12` (the wheel torch uses), or the CUDA toolkit's "
      "extras/CUPTI; FINGRAV_CUPTI_LIBRARY=<path of libcupti.so> names it exactly";
  return spec;
}

// CUPTI 12 (the headers' major) first: a copy already loaded (torch loads the
// wheel's) or on the loader's path, else the wheel's beside this package;
// only then any other copy (a toolkit's unversioned libcupti.so, CUDA 13's).
DynamicLibrary open_cupti() {
  const LibrarySpec spec = cupti_spec();
  LibrarySpec twelve = spec;
  twelve.names = {"libcupti.so.12"};
  twelve.root_env.clear();
  try {
    return DynamicLibrary::open(twelve);
  } catch (const LibraryNotFound&) {
    return DynamicLibrary::open(spec);  // its error lists every attempt
  }
}

Api load_api() {
  Api a;
  a.lib = open_cupti();
  a.get_version = a.lib.require_fn<decltype(a.get_version)>({"cuptiGetVersion"});
  a.result_string = a.lib.require_fn<decltype(a.result_string)>({"cuptiGetResultString"});
  a.subscribe = a.lib.require_fn<decltype(a.subscribe)>({"cuptiSubscribe"});
  a.register_callbacks = a.lib.require_fn<decltype(a.register_callbacks)>({"cuptiActivityRegisterCallbacks"});
  a.enable = a.lib.require_fn<decltype(a.enable)>({"cuptiActivityEnable"});
  a.next_record = a.lib.require_fn<decltype(a.next_record)>({"cuptiActivityGetNextRecord"});
  a.num_dropped = a.lib.require_fn<decltype(a.num_dropped)>({"cuptiActivityGetNumDroppedRecords"});
  a.flush_all = a.lib.require_fn<decltype(a.flush_all)>({"cuptiActivityFlushAll"});
  a.flush_period = a.lib.find_fn<decltype(a.flush_period)>({"cuptiActivityFlushPeriod"});
  return a;
}

// Kernel names by the pointer CUPTI hands out, checked against a copy of the
// name: CUPTI keeps one string per function, so the pointer almost always
// hits, and the copy guards against an address reused for another name.
class NameCache {
 public:
  std::uint32_t id(launch::LaunchCapture& capture, const char* name) {
    if (name == nullptr) name = "(unnamed kernel)";
    auto it = by_ptr_.find(name);
    if (it != by_ptr_.end() && it->second.name == name) return it->second.id;
    const std::uint32_t sym = capture.intern(name);
    // Bounded: a runtime that handed out a fresh pointer per record would
    // otherwise grow the cache with every launch (the capture's own table
    // still holds each name once).
    if (by_ptr_.size() >= kMaxEntries) by_ptr_.clear();
    by_ptr_[name] = Entry{name, sym};
    return sym;
  }

 private:
  static constexpr std::size_t kMaxEntries = 1 << 16;
  struct Entry {
    std::string name;
    std::uint32_t id;
  };
  std::unordered_map<const char*, Entry> by_ptr_;
};

// The consumer's process-wide state: CUPTI's buffer callbacks carry no user
// data. Allocated once and never freed, so a buffer CUPTI completes from its
// own thread during exit never meets a destroyed object.
struct State {
  Api api;
  std::unique_ptr<launch::LaunchCapture> capture;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::mutex mu;  // serialises buffer completions (CUPTI may complete from several threads)
  NameCache names;
  std::uint64_t incomplete = 0;  // under mu
  bool incomplete_noted = false;
  std::atomic<bool> stopped{false};
  std::mutex stop_mu;
};

std::atomic<State*> g_state{nullptr};
std::atomic<bool> g_started{false};
std::atomic<State*> g_owned{nullptr};  // keeps the state reachable (never freed, see State)

std::string result_text(const Api& api, CUptiResult r) {
  const char* s = nullptr;
  if (api.result_string != nullptr && api.result_string(r, &s) == CUPTI_SUCCESS && s != nullptr) {
    return std::string(s) + " (" + std::to_string(static_cast<int>(r)) + ")";
  }
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

void say(const std::string& line) noexcept {
  std::fprintf(stderr, "fingrav cupti: %s\n", line.c_str());
  std::fflush(stderr);
}

// Who else is a CUPTI client, as far as the libraries loaded in the process
// tell: CUPTI 12 names no other subscriber.
int collect_object(dl_phdr_info* info, std::size_t, void* data) {
  auto* names = static_cast<std::vector<std::string>*>(data);
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') names->emplace_back(info->dlpi_name);
  return 0;
}

std::string other_subscriber() {
  std::vector<std::string> objects;
  dl_iterate_phdr(&collect_object, &objects);
  std::vector<std::string> found;
  auto add = [&found](const char* who) {
    for (const auto& f : found) {
      if (f == who) return;
    }
    found.emplace_back(who);
  };
  for (const auto& o : objects) {
    if (o.find("libkineto") != std::string::npos || o.find("libtorch_cuda") != std::string::npos) {
      add("torch.profiler (Kineto, loaded with libtorch_cuda)");
    } else if (o.find("ToolsInjection") != std::string::npos) {
      add("Nsight Systems (its injection library is loaded)");
    } else if (o.find("InterceptorInjectionTarget") != std::string::npos || o.find("libnvperf") != std::string::npos) {
      add("Nsight Compute or another profiler (its injection library is loaded)");
    } else if (o.find("sanitizer-collection") != std::string::npos || o.find("libsanitizer-public") != std::string::npos) {
      add("compute-sanitizer");
    }
  }
  if (found.empty()) {
    return "another CUPTI client (torch.profiler/Kineto, Nsight Systems, Nsight Compute, cuda-gdb or "
           "compute-sanitizer; the process does not show which)";
  }
  std::string out;
  for (const auto& f : found) out += (out.empty() ? "" : "; ") + f;
  return out;
}

// CUPTI's callbacks (C linkage not required: passed by pointer).
void CUPTIAPI subscriber_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Buffers handed back by CUPTI, kept for the next request: CUPTI completes a
// partial buffer every flush period, and a fresh 1 MiB allocation each time
// is a fresh mapping whose pages fault in again as records land (most of the
// consumer's CPU at 10^4 records a second). Leaked at exit on purpose: a
// callback may still run during static destruction.
struct BufferPool {
  static constexpr std::size_t kKeep = 8;
  std::mutex mu;
  void* free[kKeep] = {};
  std::size_t n = 0;
};

BufferPool& buffer_pool() {
  static BufferPool* pool = new BufferPool;
  return *pool;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = nullptr;
  {
    BufferPool& pool = buffer_pool();
    std::lock_guard<std::mutex> lock(pool.mu);
    if (pool.n > 0) p = pool.free[--pool.n];
  }
  // 8-byte aligned, as CUPTI requires (ACTIVITY_RECORD_ALIGNMENT). A failed
  // allocation hands CUPTI no buffer: it then drops records and counts them,
  // which reaches the capture through cuptiActivityGetNumDroppedRecords.
  if (p == nullptr) p = std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes);
  *buffer = static_cast<uint8_t*>(p);
  *size = p != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void release_buffer(uint8_t* buffer) {
  if (buffer == nullptr) return;
  {
    BufferPool& pool = buffer_pool();
    std::lock_guard<std::mutex> lock(pool.mu);
    if (pool.n < BufferPool::kKeep) {
      pool.free[pool.n++] = buffer;
      return;
    }
  }
  std::free(buffer);
}

void consume(State& st, uint8_t* buffer, size_t valid) {
  launch::LaunchCapture& cap = *st.capture;
  // Ringed in batches (one producer-lock acquisition each), as CUPTI hands
  // records over a buffer at a time.
  constexpr std::size_t kPushBatch = 256;
  launch::PushBatch<kPushBatch> batch(cap);
  CUpti_Activity* rec = nullptr;
  while (st.api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const KernelRecord*>(rec);
    KernelFields f;
    f.start = k->start;
    f.end = k->end;
    f.correlation_id = k->correlationId;
    f.stream_id = k->streamId;
    f.device_id = k->deviceId;
    f.grid[0] = k->gridX;
    f.grid[1] = k->gridY;
    f.grid[2] = k->gridZ;
    f.block[0] = k->blockX;
    f.block[1] = k->blockY;
    f.block[2] = k->blockZ;
    if (!has_times(f)) {
      ++st.incomplete;
      cap.add_vendor_drops(1);
      continue;
    }
    const std::uint32_t symbol = st.names.id(cap, k->name);
    batch.next() = to_launch_record(f, symbol);
  }
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  State* st = g_state.load(std::memory_order_acquire);
  if (st != nullptr && buffer != nullptr) {
    std::lock_guard<std::mutex> lock(st->mu);
    try {
      if (valid > 0) consume(*st, buffer, valid);
      size_t dropped = 0;
      if (st->api.num_dropped(context, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
        st->capture->add_vendor_drops(dropped);
      }
      if (st->incomplete > 0 && !st->incomplete_noted) {
        st->capture->note("incomplete_records",
                          "CUPTI delivered kernel records without a start or an end; they are counted in "
                          "vendor_dropped");
        st->incomplete_noted = true;
      }
    } catch (const std::exception& e) {
      say(std::string("reading an activity buffer failed: ") + e.what());
    }
  }
  release_buffer(buffer);
}

void stop_at_exit() { stop(); }

// Records a failure: NOTE in the capture, one line on stderr, capture closed.
StartStatus fail(launch::LaunchCapture& cap, StartStatus status, const char* key, const std::string& text) {
  try {
    cap.note(key, text);
  } catch (const std::exception&) {
    // The line on stderr below still says it.
  }
  say(text + "; capture " + cap.path() + " holds no kernel records");
  cap.close();
  return status;
}

StartStatus start_with(State& st) {
  launch::LaunchCapture& cap = *st.capture;
  uint32_t version = 0;
  (void)st.api.get_version(&version);
  cap.note("cupti", "libcupti " + st.api.lib.path() + ", CUPTI API version " + std::to_string(version) +
                        "; kernel records read as CUpti_ActivityKernel9 (built against CUPTI_API_VERSION " +
                        std::to_string(CUPTI_API_VERSION) + "); timestamps on CLOCK_REALTIME");
  CUptiResult r = st.api.subscribe(&st.subscriber, &subscriber_callback, nullptr);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    return fail(cap, StartStatus::kSubscriberConflict, "subscriber_conflict",
                "CUPTI allows one subscriber per process before CUDA 13.3 and another holds it: " +
                    other_subscriber() + "; no kernel launches are captured (run without it, e.g. without "
                    "torch.profiler or Nsight, to capture them)");
  }
  if (r != CUPTI_SUCCESS) {
    return fail(cap, StartStatus::kCuptiError, "cupti_error", "cuptiSubscribe failed: " + result_text(st.api, r));
  }
  g_state.store(&st, std::memory_order_release);
  r = st.api.register_callbacks(&buffer_requested, &buffer_completed);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    return fail(cap, StartStatus::kSubscriberConflict, "subscriber_conflict",
                "cuptiActivityRegisterCallbacks refused a second CUPTI client: " + other_subscriber());
  }
  if (r != CUPTI_SUCCESS) {
    return fail(cap, StartStatus::kCuptiError, "cupti_error",
                "cuptiActivityRegisterCallbacks failed: " + result_text(st.api, r));
  }
  if (st.api.flush_period != nullptr) {
    // Records in a buffer that is not yet full reach the file within half a
    // second (and the writer's own period), so a killed application keeps all
    // but its last second; a shorter period only wakes the runtime's delivery
    // more often for the same records (about 130 ns a record more at 10^4/s
    // with 100 ms, measured by bench/launch_overhead_bench.py).
    (void)st.api.flush_period(500);
  }
  r = st.api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    return fail(cap, StartStatus::kSubscriberConflict, "subscriber_conflict",
                "cuptiActivityEnable refused a second CUPTI client: " + other_subscriber());
  }
  if (r != CUPTI_SUCCESS) {
    return fail(cap, StartStatus::kCuptiError, "cupti_error",
                "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) failed: " + result_text(st.api, r));
  }
  return StartStatus::kStarted;
}

}  // namespace

bool has_times(const KernelFields& k) noexcept { return k.start != 0 && k.end != 0 && k.end >= k.start; }

launch::LaunchRecord to_launch_record(const KernelFields& k, std::uint32_t symbol) noexcept {
  launch::LaunchRecord r{};
  r.start_ns = static_cast<std::int64_t>(k.start);
  r.end_ns = static_cast<std::int64_t>(k.end);
  r.correlation_id = k.correlation_id;
  r.queue = k.stream_id;
  r.symbol = symbol;
  r.device = static_cast<std::int32_t>(k.device_id);
  for (int i = 0; i < 3; ++i) {
    r.grid[i] = k.grid[i] > 0 ? static_cast<std::uint32_t>(k.grid[i]) : 0u;
    r.block[i] = k.block[i] > 0 ? static_cast<std::uint32_t>(k.block[i]) : 0u;
  }
  return r;
}

StartStatus start() noexcept {
  const char* dir = std::getenv("FINGRAV_LAUNCH_DIR");
  if (dir == nullptr || *dir == '\0') return StartStatus::kPassive;
  if (g_started.exchange(true)) return StartStatus::kAlreadyStarted;
  State* st = nullptr;
  try {
    st = new State();
  } catch (const std::bad_alloc&) {
    say("out of memory starting the CUPTI consumer");
    return StartStatus::kCaptureError;
  }
  g_owned.store(st);
  std::string unavailable;
  try {
    st->api = load_api();
  } catch (const std::exception& e) {
    unavailable = e.what();
  }
  std::string runtime_version;
  if (unavailable.empty()) {
    uint32_t v = 0;
    if (st->api.get_version(&v) == CUPTI_SUCCESS) runtime_version = "CUPTI API " + std::to_string(v);
  }
  try {
    st->capture = launch::LaunchCapture::open_from_env("cuda", "CLOCK_REALTIME", "libfingrav_cupti_tool",
                                                       FINGRAV_CUPTI_TOOL_VERSION, runtime_version);
  } catch (const std::exception& e) {
    say(std::string("cannot open the launch capture: ") + e.what());
    return StartStatus::kCaptureError;
  }
  if (!st->capture) return StartStatus::kPassive;
  std::atexit(&stop_at_exit);
  try {
    if (!unavailable.empty()) {
      return fail(*st->capture, StartStatus::kUnavailable, "cupti_unavailable", unavailable);
    }
    return start_with(*st);
  } catch (const std::exception& e) {
    return fail(*st->capture, StartStatus::kCuptiError, "cupti_error", std::string("starting failed: ") + e.what());
  }
}

void stop() noexcept {
  State* st = g_state.load(std::memory_order_acquire);
  if (st == nullptr || st->stopped.exchange(true)) return;
  // Forced: also the buffers CUPTI is still filling, so the last records
  // before exit reach the file.
  (void)st->api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(st->mu);
  st->capture->close();
}

const char* status_name(StartStatus s) noexcept {
  switch (s) {
    case StartStatus::kStarted: return "started";
    case StartStatus::kPassive: return "passive";
    case StartStatus::kSubscriberConflict: return "subscriber_conflict";
    case StartStatus::kUnavailable: return "cupti_unavailable";
    case StartStatus::kCuptiError: return "cupti_error";
    case StartStatus::kCaptureError: return "capture_error";
    case StartStatus::kAlreadyStarted: return "already_started";
  }
  return "unknown";
}

}  // namespace fingrav::nvidia::cupti
