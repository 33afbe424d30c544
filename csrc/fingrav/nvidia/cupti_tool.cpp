// libfingrav_cupti_tool.so: the entry points of the CUPTI Activity consumer
// (cupti_consumer.hpp). Only these are exported (cupti_tool.map); the core's
// code linked in stays local, so it never interposes on the _core extension's
// copy when both are in one process.
#include "fingrav/nvidia/cupti_consumer.hpp"

#define FINGRAV_EXPORT extern "C" __attribute__((visibility("default")))

// The CUDA driver's injection contract: with CUDA_INJECTION64_PATH naming
// this library, cuInit dlopens it and calls InitializeInjection once. A
// capture that fails to start never fails the application: the failure is in
// the capture file and on stderr, and 1 (success) is returned regardless.
FINGRAV_EXPORT int InitializeInjection(void) {
  (void)fingrav::nvidia::cupti::start();
  return 1;
}

// In-process use (a program that loads this library itself, before or after
// cuInit): starts the consumer as InitializeInjection does and returns the
// StartStatus code (0 started, 1 passive: FINGRAV_LAUNCH_DIR unset, 2 another
// CUPTI subscriber holds CUPTI, 3 libcupti missing, 4 a CUPTI call failed,
// 5 the capture file could not be opened, 6 already started).
FINGRAV_EXPORT int fingrav_cupti_start(void) { return static_cast<int>(fingrav::nvidia::cupti::start()); }

// Flushes CUPTI and closes the capture now (also done at exit); idempotent.
FINGRAV_EXPORT void fingrav_cupti_stop(void) { fingrav::nvidia::cupti::stop(); }
