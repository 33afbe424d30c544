// The baseline of bench/launch_overhead.cpp for ROCm: a rocprofiler-sdk client
// configured as libfingrav_rocprofiler_tool.so is (its own context, a 4 MiB
// lossless buffer of kernel dispatches handed over at half full, its own
// callback thread) that walks every record and discards it. Loaded through
// ROCP_TOOL_LIBRARIES; the SDK's functions are the process's (the stand-in).
#include <dlfcn.h>

#include <cstdint>

#include "fingrav/amd/rocprofiler_sdk_api.hpp"

namespace rocp = fingrav::amd::rocp;

namespace {
volatile std::uint64_t sink = 0;
rocp::BufferId g_buffer{0};

template <typename Fn>
Fn sdk(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

void on_buffer(rocp::ContextId, rocp::BufferId, rocp::RecordHeader** headers, std::size_t n, void*, std::uint64_t) {
  for (std::size_t i = 0; i < n; ++i) {
    if (headers[i]->kind != static_cast<std::uint32_t>(rocp::kBufferTracingKernelDispatch)) continue;
    sink = sink + static_cast<const rocp::KernelDispatchRecord*>(headers[i]->payload)->start_timestamp;
  }
}

int init(rocp::ClientFinalize, void*) {
  rocp::ContextId ctx{0};
  constexpr std::size_t kBufferBytes = std::size_t{1} << 22;
  rocp::CallbackThread thread{0};
  if (sdk<rocp::CreateContextFn>(rocp::kCreateContext)(&ctx) != 0 ||
      sdk<rocp::CreateBufferFn>(rocp::kCreateBuffer)(ctx, kBufferBytes, kBufferBytes / 2, rocp::kBufferPolicyLossless,
                                                     on_buffer, nullptr, &g_buffer) != 0 ||
      sdk<rocp::ConfigureBufferTracingFn>(rocp::kConfigureBufferTracing)(ctx, rocp::kBufferTracingKernelDispatch,
                                                                          nullptr, 0, g_buffer) != 0 ||
      sdk<rocp::CreateCallbackThreadFn>(rocp::kCreateCallbackThread)(&thread) != 0 ||
      sdk<rocp::AssignCallbackThreadFn>(rocp::kAssignCallbackThread)(g_buffer, thread) != 0) {
    return -1;
  }
  return sdk<rocp::StartContextFn>(rocp::kStartContext)(ctx) == 0 ? 0 : -1;
}

void fini(void*) { (void)sdk<rocp::FlushBufferFn>(rocp::kFlushBuffer)(g_buffer); }
}  // namespace

extern "C" __attribute__((visibility("default"))) rocp::ToolConfigureResult* rocprofiler_configure(
    std::uint32_t, const char*, std::uint32_t, rocp::ClientId* id) {
  id->name = "fingrav-discard-bench";
  static rocp::ToolConfigureResult result{sizeof(rocp::ToolConfigureResult), init, fini, nullptr};
  return &result;
}
