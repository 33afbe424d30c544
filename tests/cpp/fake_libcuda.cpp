// A stand-in for the CUDA driver (libcuda.so.1) so the loader, the error
// paths and the marker/clock logic run without a GPU (tests/test_nvidia.py
// builds it with the system compiler and loads it via FINGRAV_CUDA_LIBRARY).
//
// It exports the symbols fingrav's CudaDriver resolves, under the same
// versioned names, and keeps the driver's contract where the caller could
// get it wrong:
// - every context-bound call fails with CUDA_ERROR_INVALID_CONTEXT (201)
//   unless a context was pushed on the calling thread;
// - cuMemHostAlloc takes only DEVICEMAP|PORTABLE here (what the probe needs);
// - cuModuleLoadDataEx checks the PTX names both probe entries and honours
//   the JIT log options (FAKE_CUDA_JIT_FAIL=1 makes it fail with a log);
// - a launch of fingrav_stamp "runs" at once: it stores a fake %globaltimer
//   (CLOCK_MONOTONIC_RAW plus a fixed offset, rounded down to the timer's
//   update step when one is set) into slots[i]; fingrav_timer_step stores
//   the step n times.
// FAKE_CUDA_INIT_RESULT sets what cuInit returns (e.g. 34, the stub library);
// FAKE_CUDA_DEVICES the device count; FAKE_CUDA_TIMER_STEP_NS the update step
// of the fake %globaltimer (unset: stamps exact, steps read 32 ns; 1000 models
// the GPUs whose timer moves once a microsecond).
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using CUresult = int;
constexpr long long kDeviceClockOffsetNs = 1'000'000'000'000LL;  // the fake GPU clock runs 1000 s ahead
thread_local int g_ctx_depth = 0;
int g_ctx_token = 0;
int g_module_token = 0;
int g_stamp_fn = 0;
int g_step_fn = 0;

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : dflt;
}

long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

bool no_ctx() { return g_ctx_depth <= 0; }

struct FakeEvent {
  long long t = -1;
};

}  // namespace

#define API extern "C" __attribute__((visibility("default")))

API CUresult cuInit(unsigned flags) { return flags != 0 ? 1 : env_int("FAKE_CUDA_INIT_RESULT", 0); }
API CUresult cuDriverGetVersion(int* v) {
  *v = 12040;
  return 0;
}
API CUresult cuGetErrorName(CUresult r, const char** s) {
  switch (r) {
    case 0: *s = "CUDA_SUCCESS"; return 0;
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 34: *s = "CUDA_ERROR_STUB_LIBRARY"; return 0;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
    case 218: *s = "CUDA_ERROR_INVALID_PTX"; return 0;
    default: *s = nullptr; return 1;
  }
}
API CUresult cuGetErrorString(CUresult r, const char** s) {
  switch (r) {
    case 34: *s = "CUDA driver is a stub library"; return 0;
    case 100: *s = "no CUDA-capable device is detected"; return 0;
    case 218: *s = "a PTX JIT compilation failed"; return 0;
    default: return cuGetErrorName(r, s);
  }
}
API CUresult cuDeviceGetCount(int* n) {
  *n = env_int("FAKE_CUDA_DEVICES", 1);
  return 0;
}
API CUresult cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= env_int("FAKE_CUDA_DEVICES", 1)) return 101;
  *d = ordinal;
  return 0;
}
API CUresult cuDeviceGetName(char* name, int len, int dev) {
  std::string s = "Fake NVIDIA H100 " + std::to_string(dev);
  std::strncpy(name, s.c_str(), static_cast<std::size_t>(len));
  return 0;
}
API CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 75: *v = 9; return 0;       // compute capability major
    case 76: *v = 0; return 0;       // minor
    case 13: *v = 1980000; return 0;  // clock rate kHz
    case 36: *v = 2619000; return 0;  // memory clock kHz
    case 16: *v = 132; return 0;     // SMs
    case 19: *v = 1; return 0;       // can map host memory
    default: return 1;
  }
}
API CUresult cuDeviceGetPCIBusId(char* bus, int len, int dev) {
  std::snprintf(bus, static_cast<std::size_t>(len), "0000:%02X:00.0", 0x18 + dev);
  return 0;
}
API CUresult cuDeviceGetUuid_v2(unsigned char* uuid, int dev) {
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<unsigned char>(0xa0 + i + dev);
  return 0;
}
API CUresult cuDeviceTotalMem_v2(std::size_t* bytes, int) {
  *bytes = std::size_t{80} << 30;
  return 0;
}
API CUresult cuDevicePrimaryCtxRetain(void** ctx, int) {
  *ctx = &g_ctx_token;
  return 0;
}
API CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
API CUresult cuCtxPushCurrent_v2(void* ctx) {
  if (ctx != &g_ctx_token) return 201;
  ++g_ctx_depth;
  return 0;
}
API CUresult cuCtxPopCurrent_v2(void** ctx) {
  if (no_ctx()) return 201;
  --g_ctx_depth;
  if (ctx) *ctx = &g_ctx_token;
  return 0;
}
API CUresult cuMemHostAlloc(void** p, std::size_t bytes, unsigned flags) {
  if (no_ctx()) return 201;
  if (flags != 0x3u) return 1;  // the probe needs DEVICEMAP (0x2) | PORTABLE (0x1)
  *p = std::calloc(1, bytes);
  return *p ? 0 : 2;
}
API CUresult cuMemFreeHost(void* p) {
  std::free(p);
  return 0;
}
API CUresult cuMemHostGetDevicePointer_v2(unsigned long long* d, void* p, unsigned flags) {
  if (no_ctx()) return 201;
  if (flags != 0) return 1;
  *d = reinterpret_cast<unsigned long long>(p);
  return 0;
}
API CUresult cuModuleLoadDataEx(void** mod, const void* image, unsigned n, int* opts, void** vals) {
  if (no_ctx()) return 201;
  const char* ptx = static_cast<const char*>(image);
  const bool ok = std::strstr(ptx, ".entry fingrav_stamp(") && std::strstr(ptx, ".entry fingrav_timer_step(") &&
                  std::strstr(ptx, "%globaltimer") && env_int("FAKE_CUDA_JIT_FAIL", 0) == 0;
  if (ok) {
    *mod = &g_module_token;
    return 0;
  }
  char* err = nullptr;
  std::size_t err_size = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (opts[i] == 5) err = static_cast<char*>(vals[i]);
    if (opts[i] == 6) err_size = reinterpret_cast<std::size_t>(vals[i]);
  }
  if (err && err_size > 0) std::strncpy(err, "ptxas fatal   : fake JIT failure for the test", err_size);
  return 218;
}
API CUresult cuModuleUnload(void*) { return 0; }
API CUresult cuModuleGetFunction(void** fn, void*, const char* name) {
  if (no_ctx()) return 201;
  if (std::strcmp(name, "fingrav_stamp") == 0) *fn = &g_stamp_fn;
  else if (std::strcmp(name, "fingrav_timer_step") == 0) *fn = &g_step_fn;
  else return 500;
  return 0;
}
API CUresult cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned, void*, void** args, void**) {
  if (no_ctx()) return 201;
  if (gx * gy * gz != 1 || bx * by * bz != 1) return 1;
  auto* base = reinterpret_cast<std::uint64_t*>(*static_cast<unsigned long long*>(args[0]));
  const std::uint32_t arg = *static_cast<std::uint32_t*>(args[1]);
  // Unset: stamps are not rounded and the step reads 32 ns (what the older
  // tests assume); set: stamps move in steps of that many ns.
  const long long step = env_int("FAKE_CUDA_TIMER_STEP_NS", 0);
  if (fn == &g_stamp_fn) {
    long long t = now_ns() + kDeviceClockOffsetNs;
    if (step > 0) t -= t % step;
    __atomic_store_n(base + arg, static_cast<std::uint64_t>(t), __ATOMIC_RELEASE);
    return 0;
  }
  if (fn == &g_step_fn) {
    for (std::uint32_t i = 0; i < arg; ++i) base[i] = static_cast<std::uint64_t>(step > 0 ? step : 32);
    return 0;
  }
  return 400;
}
API CUresult cuStreamCreate(void** s, unsigned flags) {
  if (no_ctx()) return 201;
  if (flags != 0x1u) return 1;  // the clock source asks for a non-blocking stream
  *s = std::malloc(1);
  return 0;
}
API CUresult cuStreamDestroy_v2(void* s) {
  std::free(s);
  return 0;
}
API CUresult cuStreamSynchronize(void*) { return no_ctx() ? 201 : 0; }
API CUresult cuStreamQuery(void*) { return no_ctx() ? 201 : 0; }
API CUresult cuEventCreate(void** e, unsigned) {
  if (no_ctx()) return 201;
  *e = new FakeEvent;
  return 0;
}
API CUresult cuEventDestroy_v2(void* e) {
  delete static_cast<FakeEvent*>(e);
  return 0;
}
API CUresult cuEventRecord(void* e, void*) {
  if (no_ctx()) return 201;
  static_cast<FakeEvent*>(e)->t = now_ns();
  return 0;
}
API CUresult cuEventSynchronize(void*) { return no_ctx() ? 201 : 0; }
API CUresult cuEventElapsedTime_v2(float* ms, void* a, void* b) {
  if (no_ctx()) return 201;
  const auto* ea = static_cast<FakeEvent*>(a);
  const auto* eb = static_cast<FakeEvent*>(b);
  if (ea->t < 0 || eb->t < 0) return 400;
  *ms = static_cast<float>(static_cast<double>(eb->t - ea->t) / 1e6);
  return 0;
}
