// Another rocprofiler-sdk client in the same process (as libtorch's Kineto
// client is): its own context and buffer of kernel dispatches, on the
// runtime's default delivery thread. At finalize it writes how many dispatch
// records it got, and the sum of their correlation ids, to OTHER_TOOL_OUT.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fingrav/amd/rocprofiler_sdk_api.hpp"

namespace rocp = fingrav::amd::rocp;

namespace {
std::atomic<std::uint64_t> g_records{0}, g_sum{0};
rocp::BufferId g_buffer{0};

template <typename Fn>
Fn sdk(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

void on_buffer(rocp::ContextId, rocp::BufferId, rocp::RecordHeader** headers, std::size_t n, void*, std::uint64_t) {
  for (std::size_t i = 0; i < n; ++i) {
    if (headers[i]->kind != static_cast<std::uint32_t>(rocp::kBufferTracingKernelDispatch)) continue;
    const auto* r = static_cast<const rocp::KernelDispatchRecord*>(headers[i]->payload);
    g_records.fetch_add(1);
    g_sum.fetch_add(r->correlation_internal);
  }
}

int init(rocp::ClientFinalize, void*) {
  rocp::ContextId ctx{0};
  if (sdk<rocp::CreateContextFn>(rocp::kCreateContext)(&ctx) != 0) return -1;
  if (sdk<rocp::CreateBufferFn>(rocp::kCreateBuffer)(ctx, 1 << 16, 1 << 15, rocp::kBufferPolicyLossless, on_buffer,
                                                     nullptr, &g_buffer) != 0) {
    return -1;
  }
  if (sdk<rocp::ConfigureBufferTracingFn>(rocp::kConfigureBufferTracing)(ctx, rocp::kBufferTracingKernelDispatch,
                                                                          nullptr, 0, g_buffer) != 0) {
    return -1;
  }
  return sdk<rocp::StartContextFn>(rocp::kStartContext)(ctx) == 0 ? 0 : -1;
}

void fini(void*) {
  (void)sdk<rocp::FlushBufferFn>(rocp::kFlushBuffer)(g_buffer);
  if (const char* out = std::getenv("OTHER_TOOL_OUT")) {
    if (FILE* f = std::fopen(out, "w")) {
      std::fprintf(f, "%llu %llu\n", static_cast<unsigned long long>(g_records.load()),
                   static_cast<unsigned long long>(g_sum.load()));
      std::fclose(f);
    }
  }
}
}  // namespace

extern "C" __attribute__((visibility("default"))) rocp::ToolConfigureResult* rocprofiler_configure(
    std::uint32_t, const char*, std::uint32_t, rocp::ClientId* id) {
  id->name = "other-client";
  static rocp::ToolConfigureResult result{sizeof(rocp::ToolConfigureResult), init, fini, nullptr};
  return &result;
}
