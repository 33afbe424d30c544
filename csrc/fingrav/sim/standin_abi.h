/* The C ABI every stand-in vendor runtime (libfingrav_standin_rocprofiler.so,
 * libfingrav_standin_cupti.so) exposes beside its vendor API, so the simulated
 * application can drive it. Simulator side only: never in a shipped tool.
 *
 * Lifecycle: fingrav_standin_init once (loads the tool the way the real
 * runtime does: rocprofiler-sdk from ROCP_TOOL_LIBRARIES, CUDA from
 * CUDA_INJECTION64_PATH, and runs its entry point), any number of
 * fingrav_standin_dispatch, fingrav_standin_flush whenever, then
 * fingrav_standin_fini (delivers what is buffered, then the runtime's
 * shutdown: the tool's finalize). */
#ifndef FINGRAV_SIM_STANDIN_ABI_H
#define FINGRAV_SIM_STANDIN_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes of fingrav_standin_init and fingrav_standin_dispatch. */
enum {
  FINGRAV_STANDIN_OK = 0,
  FINGRAV_STANDIN_TOOL_LOAD_FAILED = 1,  /* a named tool library did not dlopen */
  FINGRAV_STANDIN_TOOL_REFUSED = 2,      /* the tool's entry point returned an error */
  FINGRAV_STANDIN_NOT_INITIALISED = 3,   /* dispatch before init, or after fini */
  FINGRAV_STANDIN_BAD_ARGUMENT = 4       /* a null name, end before start, a null grid or block */
};

/* Loads and starts the tool(s); 0 or an error code above (its reason on stderr).
 * No tool named is not an error: dispatches are then accepted and discarded. */
int fingrav_standin_init(void);

/* One completed kernel execution. start_ns/end_ns on CLOCK_MONOTONIC_RAW, as
 * the simulated device keeps time; the stand-in converts them to its vendor's
 * record clock (CLOCK_BOOTTIME for rocprofiler-sdk, CLOCK_REALTIME for CUPTI)
 * by an offset read when it converts, assigns the correlation id, buffers the
 * record and delivers it through the tool's callbacks as the real runtime does
 * (when its buffer is full and on flush). grid/block: three values each. */
int fingrav_standin_dispatch(const char* kernel_name, int64_t start_ns, int64_t end_ns, int32_t device,
                             uint64_t queue, const uint32_t grid[3], const uint32_t block[3]);

/* Delivers every buffered record to the tool now. */
void fingrav_standin_flush(void);

/* Delivers what is buffered, then the runtime's shutdown (the tool's finalize). Idempotent. */
void fingrav_standin_fini(void);

#ifdef __cplusplus
}
#endif

#endif /* FINGRAV_SIM_STANDIN_ABI_H */
