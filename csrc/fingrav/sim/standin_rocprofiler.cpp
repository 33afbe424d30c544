// libfingrav_standin_rocprofiler.so: a stand-in for rocprofiler-sdk, for the
// tests and the simulated application only (never in a shipped tool's path).
// It keeps the SDK's documented contract with tool libraries:
//   - tools are found through ROCP_TOOL_LIBRARIES (':'-separated), and each
//     one's rocprofiler_configure is called with the SDK version, the runtime
//     version string and a priority (its place in the list);
//   - each configure result's initialize runs; the tool creates contexts,
//     buffers, callback threads and configures services, then starts contexts;
//   - agents are listed (a CPU agent first, then FINGRAV_STANDIN_GPUS GPU
//     agents, default 8, with opaque handles unrelated to their ordinals);
//   - a kernel's code-object kernel-symbol LOAD callback reaches every started
//     context that asked for it before any dispatch of that kernel is
//     buffered (and on a context's start for kernels already known);
//   - a buffer's records are delivered on its callback thread when the bytes
//     buffered reach its watermark and on flush (flush waits for delivery);
//     the LOSSLESS policy makes the dispatcher wait for room, DISCARD counts
//     what it drops and reports it as the callback's drop_count;
//   - at fini: every buffer flushed, every tool's finalize called (last
//     configured first), callback threads joined.
// Plus the stand-in C ABI of fingrav/sim/standin_abi.h. The SDK version it
// reports is FINGRAV_STANDIN_ROCP_VERSION (major*10000+minor*100+patch,
// default 10000: 1.0.0), which also selects the callback record layout.
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fingrav/amd/rocprofiler_sdk_api.hpp"
#include "fingrav/sim/standin_abi.h"

namespace rocp = fingrav::amd::rocp;

#define FINGRAV_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr rocp::Status kError = 1;
constexpr rocp::Status kContextNotFound = 2;
constexpr rocp::Status kBufferNotFound = 3;
constexpr rocp::Status kKindNotFound = 4;
constexpr rocp::Status kThreadNotFound = 6;
constexpr rocp::Status kConfigurationLocked = 14;

std::int64_t clock_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// CLOCK_BOOTTIME - CLOCK_MONOTONIC_RAW now: the midpoint of the narrowest of a
// few bracketed reads, so a thread preempted inside one bracket does not shift
// the offset by its time off the CPU.
std::int64_t boottime_offset() {
  std::int64_t best_width = INT64_MAX, best = 0;
  for (int i = 0; i < 4; ++i) {
    const std::int64_t raw0 = clock_ns(CLOCK_MONOTONIC_RAW);
    const std::int64_t boot = clock_ns(CLOCK_BOOTTIME);
    const std::int64_t raw1 = clock_ns(CLOCK_MONOTONIC_RAW);
    if (raw1 - raw0 < best_width) {
      best_width = raw1 - raw0;
      best = boot - (raw0 + (raw1 - raw0) / 2);
    }
    if (best_width < 2'000) break;
  }
  return best;
}

// One batch of records handed to a callback thread.
struct Batch {
  std::uint64_t buffer = 0;
  std::vector<rocp::KernelDispatchRecord> records;
  std::uint64_t drops = 0;
  bool flush_marker = false;
};

// A callback thread: runs buffer callbacks in the order batches arrive.
class Worker {
 public:
  Worker() : thread_([this] { run(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(Batch b) {
    {
      std::lock_guard<std::mutex> l(m_);
      queue_.push_back(std::move(b));
      ++posted_;
    }
    cv_.notify_all();
  }
  // Waits until every batch posted so far has been delivered.
  void wait_idle() {
    std::unique_lock<std::mutex> l(m_);
    const std::uint64_t target = posted_;
    done_cv_.wait(l, [&] { return delivered_ >= target; });
  }
  std::size_t depth() {
    std::lock_guard<std::mutex> l(m_);
    return queue_.size();
  }
  void wait_depth_below(std::size_t n) {
    std::unique_lock<std::mutex> l(m_);
    done_cv_.wait(l, [&] { return queue_.size() < n; });
  }

 private:
  void run();
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::deque<Batch> queue_;
  std::uint64_t posted_ = 0, delivered_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

struct Buffer {
  std::uint64_t id;
  std::uint64_t context;
  std::size_t size, watermark;
  std::int32_t policy;
  rocp::BufferTracingCallback callback;
  void* data;
  std::uint64_t worker = 0;  // 0: the runtime's own delivery thread
  std::vector<rocp::KernelDispatchRecord> pending;
  std::uint64_t drops = 0;
};

struct Context {
  std::uint64_t id;
  bool started = false;
  std::uint64_t dispatch_buffer = 0;  // buffer of the kernel-dispatch service, 0: none
  void (*symbol_callback)() = nullptr;
  void* symbol_data = nullptr;
};

struct Client {
  void* handle = nullptr;
  rocp::ToolConfigureResult* result = nullptr;
  rocp::ClientId id{nullptr, 0};
  bool finalized = false;
};

struct Runtime {
  std::mutex m;  // guards everything below
  std::uint32_t version = 10000;
  std::vector<Client> clients;
  std::unordered_map<std::uint64_t, Context> contexts;
  std::unordered_map<std::uint64_t, Buffer> buffers;
  std::unordered_map<std::uint64_t, std::unique_ptr<Worker>> workers;
  std::uint64_t next_id = 0x5100;
  std::vector<rocp::AgentPrefix> agents;
  std::unordered_map<std::string, std::uint64_t> kernel_ids;
  std::vector<std::pair<std::uint64_t, std::string>> kernels;  // in load order
  std::uint64_t correlation = 0;
  std::uint64_t dispatch_id = 0;
  bool initialised = false, finished = false, configuring = false;
};

Runtime& rt() {
  static Runtime* r = new Runtime();  // never destroyed: tools may call in during exit
  return *r;
}

void deliver(Runtime& r, const Batch& b);

void Worker::run() {
  std::unique_lock<std::mutex> l(m_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    l.unlock();
    deliver(rt(), b);
    l.lock();
    ++delivered_;
    done_cv_.notify_all();
  }
}

void deliver(Runtime& r, const Batch& b) {
  rocp::BufferTracingCallback cb = nullptr;
  void* data = nullptr;
  rocp::ContextId ctx{0};
  {
    std::lock_guard<std::mutex> l(r.m);
    const auto it = r.buffers.find(b.buffer);
    if (it == r.buffers.end()) return;
    cb = it->second.callback;
    data = it->second.data;
    ctx.handle = it->second.context;
  }
  std::vector<rocp::RecordHeader> headers(b.records.size());
  std::vector<rocp::RecordHeader*> ptrs(b.records.size());
  for (std::size_t i = 0; i < b.records.size(); ++i) {
    headers[i].category = rocp::kBufferCategoryTracing;
    headers[i].kind = static_cast<std::uint32_t>(rocp::kBufferTracingKernelDispatch);
    headers[i].payload = const_cast<rocp::KernelDispatchRecord*>(&b.records[i]);
    ptrs[i] = &headers[i];
  }
  cb(ctx, rocp::BufferId{b.buffer}, ptrs.data(), ptrs.size(), data, b.drops);
}

Worker& worker_of(Runtime& r, const Buffer& b) {
  auto& w = r.workers[b.worker];
  if (!w) w = std::make_unique<Worker>();
  return *w;
}

// Hands a buffer's pending records to its thread (caller holds r.m).
Worker* hand_over(Runtime& r, Buffer& b) {
  if (b.pending.empty() && b.drops == 0) return nullptr;
  Batch batch;
  batch.buffer = b.id;
  batch.records.swap(b.pending);
  batch.drops = b.drops;
  b.drops = 0;
  Worker& w = worker_of(r, b);
  w.post(std::move(batch));
  return &w;
}

// Kernel-symbol LOAD (or UNLOAD) callback to one context.
void symbol_callback(Runtime& r, const Context& c, std::uint64_t kernel_id, const std::string& name,
                     std::int32_t phase) {
  rocp::KernelSymbolData sym{sizeof(rocp::KernelSymbolData), kernel_id, 1, name.c_str()};
  const auto tid = static_cast<std::uint64_t>(::gettid());
  if (r.version >= rocp::kVersionThreeWordCorrelation) {
    rocp::CallbackRecordV1 rec{};
    rec.context_id.handle = c.id;
    rec.thread_id = tid;
    rec.kind = rocp::kCallbackTracingCodeObject;
    rec.operation = rocp::kCodeObjectKernelSymbolRegister;
    rec.phase = phase;
    rec.payload = &sym;
    rocp::UserData user{0};
    reinterpret_cast<rocp::CallbackTracingV1>(c.symbol_callback)(rec, &user, c.symbol_data);
  } else {
    rocp::CallbackRecordV0 rec{};
    rec.context_id.handle = c.id;
    rec.thread_id = tid;
    rec.kind = rocp::kCallbackTracingCodeObject;
    rec.operation = rocp::kCodeObjectKernelSymbolRegister;
    rec.phase = phase;
    rec.payload = &sym;
    rocp::UserData user{0};
    reinterpret_cast<rocp::CallbackTracingV0>(c.symbol_callback)(rec, &user, c.symbol_data);
  }
}

std::uint32_t env_u32(const char* name, std::uint32_t fallback) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  return static_cast<std::uint32_t>(std::strtoul(s, nullptr, 10));
}

void flush_all(Runtime& r) {
  std::vector<Worker*> to_wait;
  {
    std::lock_guard<std::mutex> l(r.m);
    for (auto& [id, b] : r.buffers) {
      if (Worker* w = hand_over(r, b)) to_wait.push_back(w);
    }
  }
  for (Worker* w : to_wait) w->wait_idle();
}

}  // namespace

// ---- the rocprofiler-sdk functions tools call ----

FINGRAV_EXPORT rocp::Status rocprofiler_create_context(rocp::ContextId* id) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  if (!r.configuring) return kConfigurationLocked;
  id->handle = ++r.next_id;
  r.contexts[id->handle].id = id->handle;
  return rocp::kStatusSuccess;
}

FINGRAV_EXPORT rocp::Status rocprofiler_create_buffer(rocp::ContextId ctx, std::size_t size, std::size_t watermark,
                                                      std::int32_t policy, rocp::BufferTracingCallback cb, void* data,
                                                      rocp::BufferId* id) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  if (r.contexts.count(ctx.handle) == 0) return kContextNotFound;
  if (cb == nullptr || id == nullptr || watermark > size || size < sizeof(rocp::KernelDispatchRecord)) return kError;
  id->handle = ++r.next_id;
  r.buffers[id->handle] = Buffer{id->handle, ctx.handle, size, watermark, policy, cb, data, 0, {}, 0};
  return rocp::kStatusSuccess;
}

FINGRAV_EXPORT rocp::Status rocprofiler_configure_buffer_tracing_service(rocp::ContextId ctx, std::int32_t kind,
                                                                         const std::int32_t*, std::size_t,
                                                                         rocp::BufferId buffer) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  const auto c = r.contexts.find(ctx.handle);
  if (c == r.contexts.end()) return kContextNotFound;
  if (r.buffers.count(buffer.handle) == 0) return kBufferNotFound;
  if (kind != rocp::kBufferTracingKernelDispatch) return kKindNotFound;  // the only kind the stand-in makes
  c->second.dispatch_buffer = buffer.handle;
  return rocp::kStatusSuccess;
}

FINGRAV_EXPORT rocp::Status rocprofiler_configure_callback_tracing_service(rocp::ContextId ctx, std::int32_t kind,
                                                                           const std::int32_t* ops, std::size_t n,
                                                                           void (*callback)(), void* data) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  const auto c = r.contexts.find(ctx.handle);
  if (c == r.contexts.end()) return kContextNotFound;
  if (kind != rocp::kCallbackTracingCodeObject || callback == nullptr) return kKindNotFound;
  const bool wants_symbols =
      n == 0 || std::find(ops, ops + n, rocp::kCodeObjectKernelSymbolRegister) != ops + n;
  if (wants_symbols) {
    c->second.symbol_callback = callback;
    c->second.symbol_data = data;
  }
  return rocp::kStatusSuccess;
}

FINGRAV_EXPORT rocp::Status rocprofiler_query_available_agents(std::uint32_t version,
                                                               rocp::QueryAgentsCallback cb, std::size_t agent_size,
                                                               void* data) {
  Runtime& r = rt();
  if (version != rocp::kAgentInfoVersion0 || cb == nullptr) return kError;
  // The SDK refuses a struct size larger than its own (296 bytes in 0.5).
  if (agent_size > 296) return kError;
  std::vector<const void*> ptrs;
  {
    std::lock_guard<std::mutex> l(r.m);
    for (const auto& a : r.agents) ptrs.push_back(&a);
  }
  return cb(version, ptrs.data(), ptrs.size(), data);
}

FINGRAV_EXPORT rocp::Status rocprofiler_create_callback_thread(rocp::CallbackThread* t) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  t->handle = ++r.next_id;
  r.workers[t->handle] = std::make_unique<Worker>();
  return rocp::kStatusSuccess;
}

FINGRAV_EXPORT rocp::Status rocprofiler_assign_callback_thread(rocp::BufferId buffer, rocp::CallbackThread t) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  const auto b = r.buffers.find(buffer.handle);
  if (b == r.buffers.end()) return kBufferNotFound;
  if (r.workers.count(t.handle) == 0) return kThreadNotFound;
  b->second.worker = t.handle;
  return rocp::kStatusSuccess;
}

FINGRAV_EXPORT rocp::Status rocprofiler_start_context(rocp::ContextId ctx) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  const auto c = r.contexts.find(ctx.handle);
  if (c == r.contexts.end()) return kContextNotFound;
  if (!c->second.started && c->second.symbol_callback != nullptr) {
    for (const auto& [kid, name] : r.kernels) symbol_callback(r, c->second, kid, name, rocp::kPhaseLoad);
  }
  c->second.started = true;
  return rocp::kStatusSuccess;
}

FINGRAV_EXPORT rocp::Status rocprofiler_stop_context(rocp::ContextId ctx) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  const auto c = r.contexts.find(ctx.handle);
  if (c == r.contexts.end()) return kContextNotFound;
  c->second.started = false;
  return rocp::kStatusSuccess;
}

FINGRAV_EXPORT rocp::Status rocprofiler_flush_buffer(rocp::BufferId buffer) {
  Runtime& r = rt();
  Worker* w = nullptr;
  {
    std::lock_guard<std::mutex> l(r.m);
    const auto b = r.buffers.find(buffer.handle);
    if (b == r.buffers.end()) return kBufferNotFound;
    w = hand_over(r, b->second);
    if (w == nullptr) w = &worker_of(r, b->second);
  }
  // Synchronous, as the SDK's: returns once the callback has had the records.
  w->wait_idle();
  return rocp::kStatusSuccess;
}

// ---- the stand-in C ABI ----

namespace {
void client_finalize(rocp::ClientId id);

void finalize_client(Runtime& r, std::size_t index) {
  rocp::ToolFinalize fini = nullptr;
  void* data = nullptr;
  {
    std::lock_guard<std::mutex> l(r.m);
    Client& c = r.clients[index];
    if (c.finalized || c.result == nullptr) return;
    c.finalized = true;
    fini = c.result->finalize;
    data = c.result->tool_data;
  }
  if (fini != nullptr) fini(data);
}

void client_finalize(rocp::ClientId id) {
  Runtime& r = rt();
  if (id.handle >= 1 && id.handle <= r.clients.size()) finalize_client(r, id.handle - 1);
}

int load_tools(Runtime& r) {
  const char* list = std::getenv("ROCP_TOOL_LIBRARIES");
  std::string paths = list != nullptr ? list : "";
  std::uint32_t priority = 0;
  std::size_t start = 0;
  while (start <= paths.size()) {
    const std::size_t end = std::min(paths.find(':', start), paths.size());
    const std::string path = paths.substr(start, end - start);
    start = end + 1;
    if (path.empty()) continue;
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      std::fprintf(stderr, "stand-in rocprofiler-sdk: cannot load tool %s: %s\n", path.c_str(), ::dlerror());
      return FINGRAV_STANDIN_TOOL_LOAD_FAILED;
    }
    auto configure = reinterpret_cast<rocp::ConfigureFn>(::dlsym(h, rocp::kConfigure));
    if (configure == nullptr) continue;  // not a tool: the SDK skips it too
    Client c;
    c.handle = h;
    c.id.handle = static_cast<std::uint32_t>(r.clients.size() + 1);
    const std::string runtime_version = std::to_string(r.version / 10000) + "." +
                                        std::to_string(r.version / 100 % 100) + "." + std::to_string(r.version % 100);
    c.result = configure(r.version, runtime_version.c_str(), priority++, &c.id);
    r.clients.push_back(c);
  }
  return FINGRAV_STANDIN_OK;
}
}  // namespace

FINGRAV_EXPORT int fingrav_standin_init(void) {
  Runtime& r = rt();
  {
    std::lock_guard<std::mutex> l(r.m);
    if (r.initialised) return FINGRAV_STANDIN_OK;
    r.initialised = true;
    r.version = env_u32("FINGRAV_STANDIN_ROCP_VERSION", 10000);
    r.agents.push_back(rocp::AgentPrefix{sizeof(rocp::AgentPrefix), rocp::AgentId{0xC0FFEE}, 1});
    const std::uint32_t gpus = env_u32("FINGRAV_STANDIN_GPUS", 8);
    for (std::uint32_t i = 0; i < gpus; ++i) {
      r.agents.push_back(rocp::AgentPrefix{sizeof(rocp::AgentPrefix), rocp::AgentId{0xA9E000 + 37ull * (gpus - i)},
                                           rocp::kAgentTypeGpu});
    }
  }
  if (const int rc = load_tools(r); rc != FINGRAV_STANDIN_OK) return rc;
  int rc = FINGRAV_STANDIN_OK;
  for (std::size_t i = 0; i < r.clients.size(); ++i) {
    if (r.clients[i].result == nullptr) continue;
    {
      std::lock_guard<std::mutex> l(r.m);
      r.configuring = true;
    }
    const int status = r.clients[i].result->initialize(&client_finalize, r.clients[i].result->tool_data);
    {
      std::lock_guard<std::mutex> l(r.m);
      r.configuring = false;
    }
    if (status != 0) {
      std::fprintf(stderr, "stand-in rocprofiler-sdk: tool %zu's initialize returned %d\n", i, status);
      rc = FINGRAV_STANDIN_TOOL_REFUSED;
    }
  }
  return rc;
}

FINGRAV_EXPORT int fingrav_standin_dispatch(const char* kernel_name, int64_t start_ns, int64_t end_ns,
                                            int32_t device, uint64_t queue, const uint32_t grid[3],
                                            const uint32_t block[3]) {
  if (kernel_name == nullptr || grid == nullptr || block == nullptr || end_ns < start_ns) {
    return FINGRAV_STANDIN_BAD_ARGUMENT;
  }
  Runtime& r = rt();
  std::unique_lock<std::mutex> l(r.m);
  if (!r.initialised || r.finished) return FINGRAV_STANDIN_NOT_INITIALISED;
  const std::size_t gpus = r.agents.size() - 1;
  if (device < 0 || static_cast<std::size_t>(device) >= gpus) return FINGRAV_STANDIN_BAD_ARGUMENT;
  auto k = r.kernel_ids.find(kernel_name);
  if (k == r.kernel_ids.end()) {
    const std::uint64_t kid = 1000 + r.kernels.size() * 3;
    k = r.kernel_ids.emplace(kernel_name, kid).first;
    r.kernels.emplace_back(kid, kernel_name);
    for (auto& [id, c] : r.contexts) {
      if (c.started && c.symbol_callback != nullptr) symbol_callback(r, c, kid, kernel_name, rocp::kPhaseLoad);
    }
  }
  const std::int64_t offset = boottime_offset();
  rocp::KernelDispatchRecord rec{};
  rec.size = sizeof(rec);
  rec.kind = rocp::kBufferTracingKernelDispatch;
  rec.operation = rocp::kKernelDispatchComplete;
  rec.correlation_internal = ++r.correlation;
  rec.thread_id = static_cast<std::uint64_t>(::gettid());
  rec.start_timestamp = static_cast<std::uint64_t>(start_ns + offset);
  rec.end_timestamp = static_cast<std::uint64_t>(end_ns + offset);
  rec.dispatch_info.size = offsetof(rocp::KernelDispatchInfo, reserved_padding);
  rec.dispatch_info.agent_id = r.agents[1 + static_cast<std::size_t>(device)].id;
  rec.dispatch_info.queue_id.handle = queue;
  rec.dispatch_info.kernel_id = k->second;
  rec.dispatch_info.dispatch_id = ++r.dispatch_id;
  rec.dispatch_info.workgroup_size = rocp::Dim3{block[0], block[1], block[2]};
  rec.dispatch_info.grid_size = rocp::Dim3{grid[0], grid[1], grid[2]};
  for (auto& [id, c] : r.contexts) {
    if (!c.started || c.dispatch_buffer == 0) continue;
    Buffer& b = r.buffers.at(c.dispatch_buffer);
    const std::size_t cap = b.size / sizeof(rec);
    if (b.pending.size() >= cap) {
      if (b.policy != rocp::kBufferPolicyLossless) {
        ++b.drops;
        continue;
      }
      Worker* w = hand_over(r, b);
      l.unlock();
      if (w != nullptr) w->wait_depth_below(2);
      l.lock();
    }
    b.pending.push_back(rec);
    if (b.pending.size() * sizeof(rec) >= b.watermark) {
      Worker* w = hand_over(r, b);
      if (w != nullptr && b.policy == rocp::kBufferPolicyLossless && w->depth() > 4) {
        // Lossless: the dispatcher waits rather than let the backlog grow without bound.
        l.unlock();
        w->wait_depth_below(2);
        l.lock();
      }
    }
  }
  return FINGRAV_STANDIN_OK;
}

FINGRAV_EXPORT void fingrav_standin_flush(void) { flush_all(rt()); }

FINGRAV_EXPORT void fingrav_standin_fini(void) {
  Runtime& r = rt();
  {
    std::lock_guard<std::mutex> l(r.m);
    if (!r.initialised || r.finished) return;
    r.finished = true;
  }
  flush_all(r);
  for (std::size_t i = r.clients.size(); i-- > 0;) finalize_client(r, i);
  {
    std::lock_guard<std::mutex> l(r.m);
    for (auto& [id, c] : r.contexts) {
      if (c.symbol_callback != nullptr) {
        for (const auto& [kid, name] : r.kernels) symbol_callback(r, c, kid, name, rocp::kPhaseUnload);
      }
    }
  }
  std::unordered_map<std::uint64_t, std::unique_ptr<Worker>> workers;
  {
    std::lock_guard<std::mutex> l(r.m);
    workers.swap(r.workers);
  }
  workers.clear();  // joins the callback threads
}
