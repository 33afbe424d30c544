// libfingrav_standin_cupti.so: a stand-in libcupti for the simulator and the
// tests, never in a shipped tool's path. Compiled against the real CUPTI
// headers, it exports the CUPTI functions the consumer
// (csrc/fingrav/nvidia/cupti_consumer.cpp) resolves, with their documented
// behaviour (cupti_activity.h, cupti_callbacks.h of CUPTI 12):
//   - one subscriber: a second cuptiSubscribe returns
//     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED until the first unsubscribes;
//   - records of CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL laid into the buffers
//     the client hands out through its buffer-requested callback, each in the
//     header's CUpti_ActivityKernel9 layout at 8-byte alignment, read back with
//     cuptiActivityGetNextRecord; full buffers are completed on a worker
//     thread, as CUPTI does, and so is a partial one every flush period
//     (cuptiActivityFlushPeriod); cuptiActivityFlushAll completes and delivers
//     every buffer before it returns;
//   - drops: a record that finds no buffer (the client returned none, or one
//     too small) is dropped and counted, and so is one beyond the device-side
//     limit FINGRAV_STANDIN_CUPTI_DEVICE_RECORDS (records held undelivered;
//     unset or 0: no limit), as CUPTI's device buffer overflows;
//     cuptiActivityGetNumDroppedRecords returns the count since its last call.
// Beside them, the stand-in C ABI (standin_abi.h): fingrav_standin_init loads
// CUDA_INJECTION64_PATH and calls its InitializeInjection, as the driver does
// at cuInit; dispatch converts CLOCK_MONOTONIC_RAW to CUPTI's CLOCK_REALTIME
// by an offset read when it converts; flush; fini (deliver, then stop the
// worker: the CUDA injection contract has no finalize entry, the tool's own
// atexit handler closes its capture).
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "fingrav/sim/standin_abi.h"

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using KernelRecord = CUpti_ActivityKernel9;
constexpr std::size_t kRecordBytes =
    (sizeof(KernelRecord) + ACTIVITY_RECORD_ALIGNMENT - 1) / ACTIVITY_RECORD_ALIGNMENT * ACTIVITY_RECORD_ALIGNMENT;

std::int64_t now_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// CLOCK_REALTIME minus CLOCK_MONOTONIC_RAW now: the realtime read between two
// raw reads, the narrowest of a few tries, so a preemption between the reads
// (milliseconds on a loaded host) does not move the converted times.
std::int64_t realtime_minus_raw() {
  std::int64_t best_width = INT64_MAX, offset = 0;
  for (int k = 0; k < 8 && best_width > 2'000; ++k) {
    const std::int64_t before = now_ns(CLOCK_MONOTONIC_RAW);
    const std::int64_t rt = now_ns(CLOCK_REALTIME);
    const std::int64_t after = now_ns(CLOCK_MONOTONIC_RAW);
    if (after - before < best_width) {
      best_width = after - before;
      offset = rt - (before + (after - before) / 2);
    }
  }
  return offset;
}

struct Buffer {
  uint8_t* data = nullptr;
  std::size_t size = 0;
  std::size_t used = 0;
  std::size_t records = 0;
  std::size_t max_records = 0;
};

struct Subscriber {
  CUpti_CallbackFunc callback;
  void* userdata;
};

// The runtime's state; allocated once and never freed, so a tool's atexit
// handler that flushes after this library's static destructors ran still
// finds it.
struct Runtime {
  std::mutex mu;
  std::condition_variable work;       // the worker waits on it
  std::condition_variable delivered;  // FlushAll waits on it
  bool initialised = false;
  bool finished = false;
  bool worker_running = false;
  bool worker_stop = false;
  std::unique_ptr<Subscriber> subscriber;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  bool kernels_enabled = false;
  uint32_t flush_period_ms = 0;
  Buffer current;
  std::deque<Buffer> ready;  // completed, awaiting delivery
  std::uint64_t queued = 0;  // buffers ever queued for delivery
  std::uint64_t done = 0;    // buffers delivered
  std::size_t held = 0;      // records in buffers not yet delivered
  std::size_t device_limit = 0;
  std::size_t dropped = 0;   // since the last cuptiActivityGetNumDroppedRecords
  std::uint32_t next_correlation = 1;
  std::unordered_map<std::string, std::unique_ptr<std::string>> names;  // stable name pointers
  std::thread worker;
  void* tool = nullptr;
};

Runtime& rt() {
  static Runtime* r = new Runtime();
  return *r;
}

// Under r.mu: the current buffer, if it holds records (or `forced`), joins the
// delivery queue.
void retire_current(Runtime& r, bool forced) {
  if (r.current.data == nullptr) return;
  if (r.current.records == 0 && !forced) return;
  r.ready.push_back(r.current);
  r.current = Buffer{};
  ++r.queued;
  r.work.notify_all();
}

// Delivers every queued buffer; called with the lock held, released around
// the client's callback (which calls back into the runtime).
void deliver_ready(Runtime& r, std::unique_lock<std::mutex>& lock) {
  while (!r.ready.empty()) {
    Buffer b = r.ready.front();
    r.ready.pop_front();
    auto complete = r.complete;
    lock.unlock();
    if (complete != nullptr) complete(nullptr, 0, b.data, b.size, b.used);
    lock.lock();
    r.held -= std::min(r.held, b.records);
    ++r.done;
    r.delivered.notify_all();
  }
}

void worker_loop() {
  Runtime& r = rt();
  std::unique_lock<std::mutex> lock(r.mu);
  while (!r.worker_stop) {
    if (r.ready.empty()) {
      // One wait per pass (no predicate loop), so a flush period set while
      // waiting takes effect at the next wake-up.
      if (r.flush_period_ms > 0) {
        const auto period = std::chrono::milliseconds(r.flush_period_ms);
        if (r.work.wait_for(lock, period) == std::cv_status::timeout && r.ready.empty()) {
          retire_current(r, false);  // a flush period passed
        }
      } else {
        r.work.wait(lock);
      }
    }
    deliver_ready(r, lock);
  }
  deliver_ready(r, lock);
}

// Under r.mu: a buffer with room for one more record, or false (record dropped).
bool room_for_record(Runtime& r) {
  Buffer& b = r.current;
  const bool full = b.data != nullptr &&
                    (b.used + kRecordBytes > b.size || (b.max_records > 0 && b.records >= b.max_records));
  if (full) retire_current(r, true);
  if (r.current.data == nullptr) {
    Buffer fresh;
    if (r.request != nullptr) r.request(&fresh.data, &fresh.size, &fresh.max_records);
    if (fresh.data == nullptr || fresh.size < kRecordBytes) {
      // CUPTI keeps no buffer the client did not give it whole.
      return false;
    }
    r.current = fresh;
  }
  return true;
}

const char* intern_name(Runtime& r, const char* name) {
  auto it = r.names.find(name);
  if (it == r.names.end()) it = r.names.emplace(name, std::make_unique<std::string>(name)).first;
  return it->second->c_str();
}

std::size_t env_size(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
}

void flush_all(bool forced) {
  Runtime& r = rt();
  std::unique_lock<std::mutex> lock(r.mu);
  retire_current(r, forced);
  if (!r.worker_running) {
    deliver_ready(r, lock);
    return;
  }
  const std::uint64_t target = r.queued;
  r.delivered.wait(lock, [&r, target] { return r.done >= target || !r.worker_running; });
  deliver_ready(r, lock);
}

}  // namespace

// ---------------------------------------------------------------- CUPTI API

STANDIN_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_INVALID_KIND: *str = "CUPTI_ERROR_INVALID_KIND"; break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = static_cast<uint64_t>(now_ns(CLOCK_REALTIME));
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                          void* userdata) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.subscriber) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  r.subscriber = std::make_unique<Subscriber>(Subscriber{callback, userdata});
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(r.subscriber.get());
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.subscriber || reinterpret_cast<CUpti_SubscriberHandle>(r.subscriber.get()) != subscriber) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  r.subscriber.reset();
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                          CUpti_BuffersCallbackCompleteFunc completed) {
  if (requested == nullptr || completed == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.mu);
  r.request = requested;
  r.complete = completed;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_KERNEL) {
    return CUPTI_ERROR_INVALID_KIND;  // the stand-in records kernels only
  }
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.mu);
  r.kernels_enabled = true;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::size_t at = 0;
  if (*record != nullptr) {
    const auto* cur = reinterpret_cast<const uint8_t*>(*record);
    if ((*record)->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) return CUPTI_ERROR_INVALID_KIND;
    at = static_cast<std::size_t>(cur - buffer) + kRecordBytes;
  }
  if (at + kRecordBytes > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at);
  if ((*record)->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) return CUPTI_ERROR_INVALID_KIND;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.mu);
  *dropped = r.dropped;
  r.dropped = 0;
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  flush_all((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
  return CUPTI_SUCCESS;
}

STANDIN_EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t time_ms) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.mu);
  r.flush_period_ms = time_ms;
  r.work.notify_all();
  return CUPTI_SUCCESS;
}

// ---------------------------------------------------------------- stand-in C ABI

STANDIN_EXPORT int fingrav_standin_init(void) {
  Runtime& r = rt();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.initialised) return FINGRAV_STANDIN_OK;
    r.initialised = true;
    r.device_limit = env_size("FINGRAV_STANDIN_CUPTI_DEVICE_RECORDS");
    r.worker_running = true;
    r.worker = std::thread(worker_loop);
  }
  // As cuInit: CUDA_INJECTION64_PATH names one library; "none" or empty: no tool.
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr || *path == '\0' || std::strcmp(path, "none") == 0) return FINGRAV_STANDIN_OK;
  void* tool = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (tool == nullptr) {
    const char* why = dlerror();
    std::fprintf(stderr, "stand-in CUDA: cannot load CUDA_INJECTION64_PATH=%s: %s\n", path, why ? why : "?");
    return FINGRAV_STANDIN_TOOL_LOAD_FAILED;
  }
  using Init = int (*)(void);
  auto init = reinterpret_cast<Init>(dlsym(tool, "InitializeInjection"));
  if (init == nullptr) {
    std::fprintf(stderr, "stand-in CUDA: %s exports no InitializeInjection\n", path);
    return FINGRAV_STANDIN_TOOL_LOAD_FAILED;
  }
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.tool = tool;
  }
  return init() != 0 ? FINGRAV_STANDIN_OK : FINGRAV_STANDIN_TOOL_REFUSED;
}

STANDIN_EXPORT int fingrav_standin_dispatch(const char* kernel_name, int64_t start_ns, int64_t end_ns, int32_t device,
                                            uint64_t queue, const uint32_t grid[3], const uint32_t block[3]) {
  if (kernel_name == nullptr || grid == nullptr || block == nullptr || end_ns < start_ns) {
    return FINGRAV_STANDIN_BAD_ARGUMENT;
  }
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.initialised || r.finished) return FINGRAV_STANDIN_NOT_INITIALISED;
  const std::uint32_t correlation = r.next_correlation++;
  if (!r.kernels_enabled) return FINGRAV_STANDIN_OK;  // no client asked for kernels
  if (r.device_limit > 0 && r.held >= r.device_limit) {
    ++r.dropped;
    return FINGRAV_STANDIN_OK;
  }
  if (!room_for_record(r)) {
    ++r.dropped;
    return FINGRAV_STANDIN_OK;
  }
  // CUPTI's clock: CLOCK_REALTIME; the offset from the device's
  // CLOCK_MONOTONIC_RAW read now, as the conversion happens.
  const std::int64_t offset = realtime_minus_raw();
  KernelRecord k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = static_cast<uint64_t>(start_ns + offset);
  k.end = static_cast<uint64_t>(end_ns + offset);
  k.completed = k.end;
  k.deviceId = static_cast<uint32_t>(device);
  k.contextId = 1;
  k.streamId = static_cast<uint32_t>(queue);
  k.gridX = static_cast<int32_t>(grid[0]);
  k.gridY = static_cast<int32_t>(grid[1]);
  k.gridZ = static_cast<int32_t>(grid[2]);
  k.blockX = static_cast<int32_t>(block[0]);
  k.blockY = static_cast<int32_t>(block[1]);
  k.blockZ = static_cast<int32_t>(block[2]);
  k.correlationId = correlation;
  k.name = intern_name(r, kernel_name);
  Buffer& b = r.current;
  std::memcpy(b.data + b.used, &k, sizeof k);
  b.used += kRecordBytes;
  ++b.records;
  ++r.held;
  return FINGRAV_STANDIN_OK;
}

STANDIN_EXPORT void fingrav_standin_flush(void) { flush_all(false); }

STANDIN_EXPORT void fingrav_standin_fini(void) {
  Runtime& r = rt();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.initialised || r.finished) return;
  }
  flush_all(false);
  std::thread worker;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.finished = true;
    r.worker_stop = true;
    r.work.notify_all();
    worker = std::move(r.worker);
  }
  if (worker.joinable()) worker.join();
  std::lock_guard<std::mutex> lock(r.mu);
  r.worker_running = false;
  r.delivered.notify_all();
}
