// One completed kernel execution as a vendor's profiling runtime reported it
// (rocprofiler-sdk's kernel-dispatch record, CUPTI's concurrent-kernel
// activity), reduced to what attribution needs. Vendor-neutral: the tool
// libraries fill it, LaunchCapture rings and writes it.
//
// The layout is mirrored field for field by fingrav_native.records.LAUNCH_DTYPE
// (the file stores it as a structured .npy), so any change here changes the
// file format's version.
#pragma once

#include <cstdint>
#include <type_traits>

namespace fingrav::launch {

// LaunchRecord::flags bits.
enum LaunchFlag : std::uint32_t {
  // start_ns/end_ns were clamped or otherwise adjusted by the vendor runtime
  // (rocprofiler-sdk clamps its stamps between packet rewrite and completion).
  kLaunchVendorAdjusted = 1u << 0,
};

struct LaunchRecord {
  std::int64_t start_ns;          // on the capture's record clock (HEAD's record_clock), ns
  std::int64_t end_ns;
  std::uint64_t correlation_id;   // the vendor's own (rocprofiler-sdk internal id, CUPTI correlationId)
  std::uint64_t queue;            // HSA queue id (ROCm) or CUDA stream id
  std::uint32_t symbol;           // id from LaunchCapture::intern
  std::int32_t device;            // GPU ordinal as the runtime numbers devices; -1 unknown
  std::uint32_t grid[3];          // ROCm: work-items (as rocprofv3 reports); CUDA: blocks; 0 unknown
  std::uint32_t block[3];         // work-items per workgroup / threads per block; 0 unknown
  std::uint32_t flags;            // LaunchFlag bits
  std::uint32_t reserved;         // zero; keeps the record a multiple of 8 bytes
};
static_assert(std::is_trivially_copyable_v<LaunchRecord>, "records are memcpy'd through the ring");
static_assert(std::is_standard_layout_v<LaunchRecord>);
// The fields named by the capture contract add to 68 bytes; with the padding
// word the record is 72, mirrored by LAUNCH_DTYPE's itemsize.
static_assert(sizeof(LaunchRecord) == 72, "LaunchRecord's layout is mirrored by LAUNCH_DTYPE");
static_assert(alignof(LaunchRecord) == 8);

}  // namespace fingrav::launch
