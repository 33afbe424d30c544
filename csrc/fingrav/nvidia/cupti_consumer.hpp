// The CUPTI Activity consumer: NVIDIA's half of native launch capture.
//
// CUPTI (the CUDA Profiling Tools Interface) hands a client every kernel the
// GPU ran as an activity record of kind CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
// in buffers the client supplies through cuptiActivityRegisterCallbacks. This
// consumer turns each record into a launch::LaunchRecord and pushes it into a
// launch::LaunchCapture, which writes the capture file beside the power ring.
//
// Built only where the CUPTI headers are found (cmake/FingravCupti.cmake):
// libcupti itself is dlopen'ed at run time and every function resolved by
// dlsym, so nothing CUDA is linked. FINGRAV_CUPTI_LIBRARY names the library to
// open instead of libcupti (the tests point it at the stand-in libcupti).
//
// Records are read as CUpti_ActivityKernel9 (CUPTI 12.x, CUPTI_API_VERSION
// 18-28); CUDA 13.0's CUpti_ActivityKernel10 begins with the same fields, so
// the prefix read here (times, ids, grid, block, name) is the same there.
//
// Clock: CUPTI stamps GPU activity on the host's CLOCK_REALTIME (converted
// from the GPU's clock by CUPTI's own linear interpolation) unless a client
// registers a timestamp callback. The consumer registers none: the callback is
// process-wide, so it would move the stamps of any other CUPTI client in the
// process (torch.profiler's Kineto writes its trace on CLOCK_REALTIME), and
// the capture brackets CLOCK_REALTIME against CLOCK_MONOTONIC_RAW at every
// drain instead (BRRT records), which places the records on the sampler's
// clock with a stated error.
//
// One subscriber: before CUDA 13.3 (drivers before r610) CUPTI allows one
// client per process; cuptiSubscribe returns
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED when another client (Kineto,
// Nsight Systems, Nsight Compute, cuda-gdb, compute-sanitizer) holds it. The
// consumer then registers nothing (registering activity callbacks would steal
// the other client's buffers), writes a NOTE "subscriber_conflict" naming the
// client where the process shows which, prints one line on stderr and closes
// the capture: never a silent empty capture.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fingrav/launch/launch_capture.hpp"
#include "fingrav/launch/launch_record.hpp"

namespace fingrav::nvidia::cupti {

// What start() did.
enum class StartStatus {
  kStarted = 0,             // subscribed, callbacks registered, kernel records enabled
  kPassive = 1,             // FINGRAV_LAUNCH_DIR unset: nothing loaded, nothing captured
  kSubscriberConflict = 2,  // another CUPTI client holds the subscription (NOTE written)
  kUnavailable = 3,         // libcupti could not be opened or lacks a function (NOTE written)
  kCuptiError = 4,          // a CUPTI call failed (NOTE written)
  kCaptureError = 5,        // the capture file could not be opened (stderr says why)
  kAlreadyStarted = 6,      // a second start in the same process: the first one runs on
};

// The fields of one kernel activity record that a LaunchRecord keeps, as
// plain values, so the conversion is testable without CUPTI's structs.
struct KernelFields {
  std::uint64_t start = 0;  // ns on CUPTI's clock; 0: unknown
  std::uint64_t end = 0;
  std::uint32_t correlation_id = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t device_id = 0;
  std::int32_t grid[3] = {0, 0, 0};
  std::int32_t block[3] = {0, 0, 0};
};

// Whether CUPTI gave the record whole: a start and an end, the end not
// before the start. CUPTI leaves both 0 for a kernel it could not time; such a
// record is counted with the vendor's drops (add_vendor_drops) rather than
// written at time 0, and a NOTE "incomplete_records" says how many.
bool has_times(const KernelFields& k) noexcept;

// A kernel record as the capture stores it. grid/block values below 1 (CUPTI
// stores them as int32) are 0, the capture's "unknown".
launch::LaunchRecord to_launch_record(const KernelFields& k, std::uint32_t symbol) noexcept;

// Starts the consumer once per process: opens the capture from the
// environment (LaunchCapture::open_from_env, vendor "cuda", clock
// "CLOCK_REALTIME"), loads libcupti, subscribes, registers the buffer
// callbacks, sets the flush period to the capture's, enables
// CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL and registers an atexit handler that
// flushes CUPTI (cuptiActivityFlushAll, forced) and closes the capture.
// Never throws: a failure is a NOTE in the capture and one line on stderr.
StartStatus start() noexcept;

// Flushes CUPTI's buffers and closes the capture; idempotent (the atexit
// handler calls it too).
void stop() noexcept;

// The name of a status, for messages.
const char* status_name(StartStatus s) noexcept;

}  // namespace fingrav::nvidia::cupti
