// libfingrav_rocprofiler_tool.so: a rocprofiler-sdk tool library that captures
// every kernel dispatch of the process it is loaded into (through
// ROCP_TOOL_LIBRARIES, LD_PRELOAD or linking) into a launch journal
// (fingrav/launch/launch_capture.hpp), beside which `fingrav run` records power.
//
// The SDK calls every registered tool's rocprofiler_configure (libtorch
// registers one for Kineto; rocprofv3 is another): this tool keeps to its own
// context, buffer and callback thread, assumes nothing about its priority or
// about being alone, and writes nothing to stdout. Its messages go to stderr,
// and only when FINGRAV_LAUNCH_DIR asks for a capture.
//
// Nothing of the SDK is linked: its functions are resolved when
// rocprofiler_configure runs (from the process, dlsym(RTLD_DEFAULT), then
// dlopen("librocprofiler-sdk.so")), so the library builds and loads without
// ROCm and stays passive there.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fingrav/amd/rocprofiler_sdk_api.hpp"
#include "fingrav/launch/launch_capture.hpp"

namespace rocp = fingrav::amd::rocp;
using fingrav::launch::LaunchCapture;
using fingrav::launch::LaunchRecord;

namespace {

constexpr const char* kToolName = "fingrav-rocprofiler-tool";
constexpr const char* kToolVersion = "1";

bool capture_requested() {
  const char* dir = std::getenv("FINGRAV_LAUNCH_DIR");
  return dir != nullptr && *dir != '\0';
}

void say(const std::string& text) {
  if (capture_requested()) std::fprintf(stderr, "fingrav rocprofiler tool: %s\n", text.c_str());
}

struct Sdk {
  rocp::CreateContextFn create_context = nullptr;
  rocp::CreateBufferFn create_buffer = nullptr;
  rocp::ConfigureBufferTracingFn configure_buffer_tracing = nullptr;
  rocp::ConfigureCallbackTracingFn configure_callback_tracing = nullptr;
  rocp::QueryAgentsFn query_agents = nullptr;
  rocp::CreateCallbackThreadFn create_callback_thread = nullptr;
  rocp::AssignCallbackThreadFn assign_callback_thread = nullptr;
  rocp::StartContextFn start_context = nullptr;
  rocp::StopContextFn stop_context = nullptr;
  rocp::FlushBufferFn flush_buffer = nullptr;

  // Empty when every function resolved, else the first missing name.
  std::string resolve() {
    void* lib = nullptr;
    auto find = [&lib](const char* name) -> void* {
      if (void* p = ::dlsym(RTLD_DEFAULT, name)) return p;
      if (lib == nullptr) lib = ::dlopen("librocprofiler-sdk.so", RTLD_NOW | RTLD_GLOBAL);
      return lib != nullptr ? ::dlsym(lib, name) : nullptr;
    };
    const std::pair<void**, const char*> table[] = {
        {reinterpret_cast<void**>(&create_context), rocp::kCreateContext},
        {reinterpret_cast<void**>(&create_buffer), rocp::kCreateBuffer},
        {reinterpret_cast<void**>(&configure_buffer_tracing), rocp::kConfigureBufferTracing},
        {reinterpret_cast<void**>(&configure_callback_tracing), rocp::kConfigureCallbackTracing},
        {reinterpret_cast<void**>(&query_agents), rocp::kQueryAgents},
        {reinterpret_cast<void**>(&create_callback_thread), rocp::kCreateCallbackThread},
        {reinterpret_cast<void**>(&assign_callback_thread), rocp::kAssignCallbackThread},
        {reinterpret_cast<void**>(&start_context), rocp::kStartContext},
        {reinterpret_cast<void**>(&stop_context), rocp::kStopContext},
        {reinterpret_cast<void**>(&flush_buffer), rocp::kFlushBuffer},
    };
    for (const auto& [slot, name] : table) {
      *slot = find(name);
      if (*slot == nullptr) return name;
    }
    return {};
  }
};

// The tool's state: created by rocprofiler_configure, never destroyed (the
// SDK's callback thread may deliver a last buffer during exit; a destroyed
// object there would be a use after free, a leaked one costs nothing).
struct Tool {
  Sdk sdk;
  LaunchCapture* capture = nullptr;
  std::uint32_t sdk_version = 0;
  rocp::ContextId context{0};
  rocp::BufferId buffer{0};
  bool started = false;
  std::once_flag finalized;
  // Agent handle -> GPU ordinal; written before the context starts, read-only after.
  std::unordered_map<std::uint64_t, std::int32_t> ordinals;
  // Kernel id -> symbol; written by the code-object callback, read by the buffer callback.
  std::mutex kernels_mutex;
  std::unordered_map<std::uint64_t, std::uint32_t> kernels;
  std::atomic<bool> warned_layout{false};
  std::atomic<bool> warned_short{false};
};

Tool* g_tool = nullptr;
std::atomic<bool> g_configured{false};

void note(const std::string& key, const std::string& text) {
  if (g_tool != nullptr && g_tool->capture != nullptr) g_tool->capture->note(key, text);
}

rocp::Status on_agents(std::uint32_t /*version*/, const void** agents, std::size_t n, void* data) {
  auto* tool = static_cast<Tool*>(data);
  // GPU ordinals are the GPU agents in the order the SDK lists them: the
  // order ROCr enumerates them, which HIP's device numbering follows. A
  // HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES) that hides some GPUs from
  // HIP but not from ROCr breaks this (noted in the journal at initialize).
  std::int32_t next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto* a = static_cast<const rocp::AgentPrefix*>(agents[i]);
    if (a == nullptr || a->size < sizeof(rocp::AgentPrefix)) continue;
    if (a->type == rocp::kAgentTypeGpu) tool->ordinals.emplace(a->id.handle, next++);
  }
  return rocp::kStatusSuccess;
}

template <typename Record>
void on_code_object(Record record, rocp::UserData* /*user_data*/, void* data) {
  auto* tool = static_cast<Tool*>(data);
  if (record.kind != rocp::kCallbackTracingCodeObject ||
      record.operation != rocp::kCodeObjectKernelSymbolRegister) {
    if (!tool->warned_layout.exchange(true)) {
      const std::string text = "a code-object callback record reads kind " + std::to_string(record.kind) +
                               ", operation " + std::to_string(record.operation) + " under rocprofiler-sdk " +
                               std::to_string(tool->sdk_version) +
                               "'s layout: not the kernel-symbol record this tool asked for; kernels from it "
                               "are left unnamed";
      note("sdk_layout_mismatch", text);
      say(text);
    }
    return;
  }
  if (record.phase != rocp::kPhaseLoad || record.payload == nullptr) return;
  const auto* sym = static_cast<const rocp::KernelSymbolData*>(record.payload);
  if (sym->size < rocp::kKernelSymbolNeeds || sym->kernel_name == nullptr) return;
  const std::uint32_t id = tool->capture->intern(sym->kernel_name);
  std::lock_guard<std::mutex> lock(tool->kernels_mutex);
  tool->kernels[sym->kernel_id] = id;
}

std::uint32_t symbol_of(Tool* tool, std::uint64_t kernel_id) {
  {
    std::lock_guard<std::mutex> lock(tool->kernels_mutex);
    const auto it = tool->kernels.find(kernel_id);
    if (it != tool->kernels.end()) return it->second;
  }
  // A dispatch whose kernel-symbol record never came: named by its id, so it
  // stays apart from other kernels rather than being dropped.
  const std::uint32_t id = tool->capture->intern("<rocprofiler kernel id " + std::to_string(kernel_id) + ">");
  std::lock_guard<std::mutex> lock(tool->kernels_mutex);
  tool->kernels.emplace(kernel_id, id);
  return id;
}

// Records are ringed in batches of this many (one producer-lock acquisition each).
constexpr std::size_t kPushBatch = 256;

void on_buffer(rocp::ContextId, rocp::BufferId, rocp::RecordHeader** headers, std::size_t n, void* data,
               std::uint64_t drop_count) {
  auto* tool = static_cast<Tool*>(data);
  if (drop_count > 0) tool->capture->add_vendor_drops(drop_count);
  // Per-buffer caches: an application alternates among a few kernels on a few
  // agents, so the symbol table's mutex and both hash lookups are paid once
  // per kernel or agent per buffer, not once per record.
  constexpr std::size_t kCache = 64;
  std::uint64_t cached_kernel[kCache];
  std::uint32_t cached_symbol[kCache];
  std::fill(std::begin(cached_kernel), std::end(cached_kernel), UINT64_MAX);
  std::uint64_t last_agent = UINT64_MAX;
  std::int32_t last_device = -1;
  fingrav::launch::PushBatch<kPushBatch> batch(*tool->capture);
  for (std::size_t i = 0; i < n; ++i) {
    const rocp::RecordHeader* h = headers[i];
    if (h == nullptr || h->category != rocp::kBufferCategoryTracing ||
        h->kind != static_cast<std::uint32_t>(rocp::kBufferTracingKernelDispatch) || h->payload == nullptr) {
      continue;
    }
    const auto* r = static_cast<const rocp::KernelDispatchRecord*>(h->payload);
    if (r->size < rocp::kDispatchRecordNeeds || r->dispatch_info.size < rocp::kDispatchInfoNeeds) {
      // Counted as lost by the vendor side: the SDK handed a record too short to read.
      tool->capture->add_vendor_drops(1);
      if (!tool->warned_short.exchange(true)) {
        note("sdk_layout_mismatch", "a kernel-dispatch record of " + std::to_string(r->size) +
                                        " bytes (dispatch info " + std::to_string(r->dispatch_info.size) +
                                        "): shorter than this tool reads; such records are counted as lost");
      }
      continue;
    }
    const std::uint64_t kernel_id = r->dispatch_info.kernel_id;
    const std::size_t slot = (kernel_id ^ (kernel_id >> 17)) % kCache;
    if (cached_kernel[slot] != kernel_id) {
      cached_symbol[slot] = symbol_of(tool, kernel_id);
      cached_kernel[slot] = kernel_id;
    }
    if (r->dispatch_info.agent_id.handle != last_agent) {
      last_agent = r->dispatch_info.agent_id.handle;
      const auto it = tool->ordinals.find(last_agent);
      last_device = it != tool->ordinals.end() ? it->second : -1;
    }
    LaunchRecord& rec = batch.next();
    rec = LaunchRecord{};
    rec.start_ns = static_cast<std::int64_t>(r->start_timestamp);
    rec.end_ns = static_cast<std::int64_t>(r->end_timestamp);
    rec.correlation_id = r->correlation_internal;
    rec.queue = r->dispatch_info.queue_id.handle;
    rec.symbol = cached_symbol[slot];
    rec.device = last_device;
    const auto& g = r->dispatch_info.grid_size;
    const auto& b = r->dispatch_info.workgroup_size;
    rec.grid[0] = g.x;
    rec.grid[1] = g.y;
    rec.grid[2] = g.z;
    rec.block[0] = b.x;
    rec.block[1] = b.y;
    rec.block[2] = b.z;
  }
}

std::string status_text(const char* call, rocp::Status s) {
  return std::string(call) + " returned status " + std::to_string(s);
}

int tool_initialize(rocp::ClientFinalize /*finalize*/, void* data) {
  auto* tool = static_cast<Tool*>(data);
  auto fail = [tool](const std::string& why) {
    tool->capture->note("sdk_error", why);
    say(why + "; no kernel launches are captured");
    return -1;
  };
  if (const char* hidden = std::getenv("HIP_VISIBLE_DEVICES"); hidden != nullptr && *hidden != '\0') {
    tool->capture->note("device_numbering", std::string("HIP_VISIBLE_DEVICES=") + hidden +
                                                 ": GPU ordinals are ROCr's agent order, which HIP's numbering "
                                                 "follows only when ROCr sees the same devices");
  }
  rocp::Status s = tool->sdk.query_agents(rocp::kAgentInfoVersion0, on_agents, sizeof(rocp::AgentPrefix), tool);
  if (s != rocp::kStatusSuccess) {
    tool->capture->note("sdk_error", status_text(rocp::kQueryAgents, s) + ": devices are recorded as -1");
  }
  if ((s = tool->sdk.create_context(&tool->context)) != rocp::kStatusSuccess) {
    return fail(status_text(rocp::kCreateContext, s));
  }
  const std::int32_t symbol_ops[] = {rocp::kCodeObjectKernelSymbolRegister};
  auto callback = tool->sdk_version >= rocp::kVersionThreeWordCorrelation
                      ? reinterpret_cast<void (*)()>(&on_code_object<rocp::CallbackRecordV1>)
                      : reinterpret_cast<void (*)()>(&on_code_object<rocp::CallbackRecordV0>);
  if ((s = tool->sdk.configure_callback_tracing(tool->context, rocp::kCallbackTracingCodeObject, symbol_ops, 1,
                                                callback, tool)) != rocp::kStatusSuccess) {
    return fail(status_text(rocp::kConfigureCallbackTracing, s));
  }
  // 4 MiB of the SDK's records (about 180 bytes each), handed over at half full.
  constexpr std::size_t kBufferBytes = std::size_t{1} << 22;
  if ((s = tool->sdk.create_buffer(tool->context, kBufferBytes, kBufferBytes / 2, rocp::kBufferPolicyLossless,
                                   on_buffer, tool, &tool->buffer)) != rocp::kStatusSuccess) {
    return fail(status_text(rocp::kCreateBuffer, s));
  }
  if ((s = tool->sdk.configure_buffer_tracing(tool->context, rocp::kBufferTracingKernelDispatch, nullptr, 0,
                                              tool->buffer)) != rocp::kStatusSuccess) {
    return fail(status_text(rocp::kConfigureBufferTracing, s));
  }
  rocp::CallbackThread thread{0};
  if ((s = tool->sdk.create_callback_thread(&thread)) != rocp::kStatusSuccess) {
    return fail(status_text(rocp::kCreateCallbackThread, s));
  }
  if ((s = tool->sdk.assign_callback_thread(tool->buffer, thread)) != rocp::kStatusSuccess) {
    return fail(status_text(rocp::kAssignCallbackThread, s));
  }
  if ((s = tool->sdk.start_context(tool->context)) != rocp::kStatusSuccess) {
    return fail(status_text(rocp::kStartContext, s));
  }
  tool->started = true;
  return 0;
}

void finish(Tool* tool) {
  std::call_once(tool->finalized, [tool] {
    if (tool->started) {
      (void)tool->sdk.flush_buffer(tool->buffer);
      (void)tool->sdk.stop_context(tool->context);
    }
    tool->capture->close();
  });
}

void tool_finalize(void* data) { finish(static_cast<Tool*>(data)); }

// A process that exits without the SDK's finalize (an exit() the runtime does
// not see) still gets its journal closed.
void at_exit() {
  if (g_tool != nullptr && g_tool->capture != nullptr) g_tool->capture->close();
}

// Loaded (LD_PRELOAD, linked) into a process that never ran rocprofiler-sdk:
// said once, at exit, and only when a capture was asked for.
__attribute__((destructor)) void on_unload() {
  if (!g_configured.load() && capture_requested()) {
    say("rocprofiler-sdk never configured this tool (no ROCm runtime with rocprofiler-sdk in this process, "
        "or ROCP_TOOL_LIBRARIES does not name it): no kernel launches were captured");
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) rocp::ToolConfigureResult* rocprofiler_configure(
    std::uint32_t version, const char* runtime_version, std::uint32_t /*priority*/, rocp::ClientId* client_id) {
  // The same library reached twice (ROCP_TOOL_LIBRARIES and LD_PRELOAD): one client is enough.
  if (g_configured.exchange(true)) return nullptr;
  if (!capture_requested()) return nullptr;  // passive: nothing asked for a capture
  if (client_id != nullptr) client_id->name = kToolName;
  auto tool = std::make_unique<Tool>();
  tool->sdk_version = version;
  if (const std::string missing = tool->sdk.resolve(); !missing.empty()) {
    say("rocprofiler-sdk's " + missing + " not found in the process or librocprofiler-sdk.so; passive");
    return nullptr;
  }
  try {
    tool->capture = LaunchCapture::open_from_env("rocm", "CLOCK_BOOTTIME", kToolName, kToolVersion,
                                                 runtime_version != nullptr ? runtime_version : "")
                        .release();
  } catch (const std::exception& e) {
    say(std::string("cannot start the launch capture: ") + e.what());
    return nullptr;
  }
  g_tool = tool.release();
  std::atexit(at_exit);
  static rocp::ToolConfigureResult result{sizeof(rocp::ToolConfigureResult), &tool_initialize, &tool_finalize,
                                          nullptr};
  result.tool_data = g_tool;
  return &result;
}
