// The project's own declarations of the part of AMD's rocprofiler-sdk that the
// launch-capture tool (csrc/fingrav/amd/rocprofiler_tool.cpp) and its stand-in
// runtime use. The SDK's headers are in no package this project can install,
// so these are written from the SDK's documented API and ABI facts, not copied.
//
// Follows rocprofiler-sdk 0.4.0 (ROCm 6.2) to 1.0.0 (ROCm 7.x). Checked against:
//   - the rocprofiler-sdk repository at tags rocm-6.2.0 and rocm-6.2.2 and its
//     0.5.0 tree (include/rocprofiler-sdk/{fwd,registration,buffer,buffer_tracing,
//     callback_tracing,context,internal_threading,agent}.h): enum values, struct
//     field order and types, function signatures;
//   - the rocprofiler-sdk 1.0.0 documentation (ROCm 7.x) and code built against
//     it (rocm-systems' serialisation of rocprofiler_correlation_id_t, Triton's
//     Proton subset of buffer_tracing.h): in 1.0 the correlation id of a
//     *callback* record gained a third word ("ancestor"), while the buffered
//     kernel-dispatch record carries the two-word async correlation id, so its
//     layout is unchanged from 0.4 to 1.0.
// Enums are appended to, never renumbered, across these versions (the SDK's
// ABI promise); the values used here are spelled out and static_assert'ed
// nowhere else, so a reviewer can check each against the SDK's header.
//
// Versioning the SDK does itself, and how it is handled here:
//   - structs handed to the tool start with a uint64 `size` (the SDK's own
//     sizeof): the tool reads a field only when `size` covers it;
//   - rocprofiler_configure receives `version` = major*10000 + minor*100 +
//     patch: it selects the callback record's layout (before/after 1.0.0), and
//     a record whose kind/operation do not read as expected in that layout is
//     refused (noted in the journal; kernels then go unnamed), never misread;
//   - agents are queried as version 0 with the size of the prefix used here
//     (the SDK accepts any size up to its own).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fingrav::amd::rocp {

// rocprofiler_status_t: 0 is success; any other value an error.
using Status = int;
inline constexpr Status kStatusSuccess = 0;

// rocprofiler_buffer_category_t
inline constexpr std::uint32_t kBufferCategoryTracing = 1;
// rocprofiler_agent_type_t
inline constexpr std::uint32_t kAgentTypeGpu = 2;
// rocprofiler_agent_version_t: ROCPROFILER_AGENT_INFO_VERSION_0
inline constexpr std::uint32_t kAgentInfoVersion0 = 1;
// rocprofiler_callback_phase_t: LOAD == ENTER, UNLOAD == EXIT
inline constexpr std::int32_t kPhaseLoad = 1;
inline constexpr std::int32_t kPhaseUnload = 2;
// rocprofiler_callback_tracing_kind_t: ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT
inline constexpr std::int32_t kCallbackTracingCodeObject = 10;
// rocprofiler_code_object_operation_t: ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER
inline constexpr std::int32_t kCodeObjectKernelSymbolRegister = 2;
// rocprofiler_buffer_tracing_kind_t: ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH
inline constexpr std::int32_t kBufferTracingKernelDispatch = 11;
// rocprofiler_kernel_dispatch_operation_t: ROCPROFILER_KERNEL_DISPATCH_COMPLETE
inline constexpr std::int32_t kKernelDispatchComplete = 2;
// rocprofiler_buffer_policy_t: ROCPROFILER_BUFFER_POLICY_LOSSLESS (the SDK blocks rather than drop)
inline constexpr std::int32_t kBufferPolicyLossless = 2;

// The version rocprofiler_configure receives from which the callback record
// carries a three-word correlation id.
inline constexpr std::uint32_t kVersionThreeWordCorrelation = 10000;

struct ContextId { std::uint64_t handle; };
struct BufferId { std::uint64_t handle; };
struct AgentId { std::uint64_t handle; };
struct QueueId { std::uint64_t handle; };
struct CallbackThread { std::uint64_t handle; };
union UserData {
  std::uint64_t value;
  void* ptr;
};
struct Dim3 { std::uint32_t x, y, z; };

// rocprofiler_client_id_t: filled by the SDK; the tool may set name.
struct ClientId {
  const char* name;
  std::uint32_t handle;
};

using ClientFinalize = void (*)(ClientId);
using ToolInitialize = int (*)(ClientFinalize finalize, void* tool_data);
using ToolFinalize = void (*)(void* tool_data);

// rocprofiler_tool_configure_result_t
struct ToolConfigureResult {
  std::size_t size;
  ToolInitialize initialize;
  ToolFinalize finalize;
  void* tool_data;
};

// rocprofiler_record_header_t: category and kind (or their hash), then the payload.
struct RecordHeader {
  std::uint32_t category;
  std::uint32_t kind;
  void* payload;
};
static_assert(sizeof(RecordHeader) == 16);

// rocprofiler_kernel_dispatch_info_t (0.4-1.0): 56 bytes of fields, then 56 reserved.
struct KernelDispatchInfo {
  std::uint64_t size;
  AgentId agent_id;
  QueueId queue_id;
  std::uint64_t kernel_id;
  std::uint64_t dispatch_id;
  std::uint32_t private_segment_size;
  std::uint32_t group_segment_size;
  Dim3 workgroup_size;
  Dim3 grid_size;  // work-items, as rocprofv3 reports it
  std::uint8_t reserved_padding[56];
};
static_assert(offsetof(KernelDispatchInfo, workgroup_size) == 48);
static_assert(offsetof(KernelDispatchInfo, grid_size) == 60);
static_assert(sizeof(KernelDispatchInfo) == 128);

// rocprofiler_buffer_tracing_kernel_dispatch_record_t (0.4-1.0; the async correlation id is two words).
struct KernelDispatchRecord {
  std::uint64_t size;
  std::int32_t kind;
  std::int32_t operation;
  std::uint64_t correlation_internal;
  UserData correlation_external;
  std::uint64_t thread_id;
  std::uint64_t start_timestamp;  // ns, CLOCK_BOOTTIME
  std::uint64_t end_timestamp;
  KernelDispatchInfo dispatch_info;
};
static_assert(offsetof(KernelDispatchRecord, start_timestamp) == 40);
static_assert(offsetof(KernelDispatchRecord, dispatch_info) == 56);

// The fields of a dispatch record the tool reads, by the end offset `size` must reach.
inline constexpr std::size_t kDispatchRecordNeeds = offsetof(KernelDispatchRecord, end_timestamp) + 8;
inline constexpr std::size_t kDispatchInfoNeeds = offsetof(KernelDispatchInfo, grid_size) + sizeof(Dim3);

// rocprofiler_callback_tracing_record_t before 1.0.0 (two-word correlation id) ...
struct CallbackRecordV0 {
  ContextId context_id;
  std::uint64_t thread_id;
  std::uint64_t correlation_internal;
  UserData correlation_external;
  std::int32_t kind;
  std::int32_t operation;
  std::int32_t phase;
  void* payload;
};
static_assert(offsetof(CallbackRecordV0, kind) == 32 && offsetof(CallbackRecordV0, payload) == 48);
static_assert(sizeof(CallbackRecordV0) == 56);

// ... and from 1.0.0 (a third word, the ancestor id).
struct CallbackRecordV1 {
  ContextId context_id;
  std::uint64_t thread_id;
  std::uint64_t correlation_internal;
  UserData correlation_external;
  std::uint64_t correlation_ancestor;
  std::int32_t kind;
  std::int32_t operation;
  std::int32_t phase;
  void* payload;
};
static_assert(offsetof(CallbackRecordV1, kind) == 40 && offsetof(CallbackRecordV1, payload) == 56);
static_assert(sizeof(CallbackRecordV1) == 64);

// rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t: the prefix read here.
struct KernelSymbolData {
  std::uint64_t size;
  std::uint64_t kernel_id;
  std::uint64_t code_object_id;
  const char* kernel_name;
};
inline constexpr std::size_t kKernelSymbolNeeds = sizeof(KernelSymbolData);

// rocprofiler_agent_v0_t: the prefix read here (the SDK's is 296 bytes in 0.5).
struct AgentPrefix {
  std::uint64_t size;
  AgentId id;
  std::uint32_t type;
};
static_assert(offsetof(AgentPrefix, type) == 16);

using BufferTracingCallback = void (*)(ContextId context, BufferId buffer, RecordHeader** headers,
                                       std::size_t num_headers, void* data, std::uint64_t drop_count);
using CallbackTracingV0 = void (*)(CallbackRecordV0 record, UserData* user_data, void* data);
using CallbackTracingV1 = void (*)(CallbackRecordV1 record, UserData* user_data, void* data);
using QueryAgentsCallback = Status (*)(std::uint32_t version, const void** agents, std::size_t num_agents,
                                       void* user_data);

// The SDK's functions the tool calls, resolved at run time by these names.
using CreateContextFn = Status (*)(ContextId*);
using CreateBufferFn = Status (*)(ContextId, std::size_t size, std::size_t watermark, std::int32_t policy,
                                  BufferTracingCallback, void* data, BufferId*);
using ConfigureBufferTracingFn = Status (*)(ContextId, std::int32_t kind, const std::int32_t* operations,
                                            std::size_t count, BufferId);
// The callback's record type depends on the SDK's version: passed as a plain function pointer.
using ConfigureCallbackTracingFn = Status (*)(ContextId, std::int32_t kind, const std::int32_t* operations,
                                              std::size_t count, void (*callback)(), void* data);
using QueryAgentsFn = Status (*)(std::uint32_t version, QueryAgentsCallback, std::size_t agent_size, void* data);
using CreateCallbackThreadFn = Status (*)(CallbackThread*);
using AssignCallbackThreadFn = Status (*)(BufferId, CallbackThread);
using StartContextFn = Status (*)(ContextId);
using StopContextFn = Status (*)(ContextId);
using FlushBufferFn = Status (*)(BufferId);
using ConfigureFn = ToolConfigureResult* (*)(std::uint32_t version, const char* runtime_version,
                                             std::uint32_t priority, ClientId* client_id);

inline constexpr const char* kCreateContext = "rocprofiler_create_context";
inline constexpr const char* kCreateBuffer = "rocprofiler_create_buffer";
inline constexpr const char* kConfigureBufferTracing = "rocprofiler_configure_buffer_tracing_service";
inline constexpr const char* kConfigureCallbackTracing = "rocprofiler_configure_callback_tracing_service";
inline constexpr const char* kQueryAgents = "rocprofiler_query_available_agents";
inline constexpr const char* kCreateCallbackThread = "rocprofiler_create_callback_thread";
inline constexpr const char* kAssignCallbackThread = "rocprofiler_assign_callback_thread";
inline constexpr const char* kStartContext = "rocprofiler_start_context";
inline constexpr const char* kStopContext = "rocprofiler_stop_context";
inline constexpr const char* kFlushBuffer = "rocprofiler_flush_buffer";
inline constexpr const char* kConfigure = "rocprofiler_configure";

}  // namespace fingrav::amd::rocp
