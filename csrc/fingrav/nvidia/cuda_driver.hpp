// NVIDIA clocks and markers through the CUDA driver API (libcuda.so.1),
// loaded at run time: no CUDA toolkit, no cuda.h, no nvcc at build time.
//
// - CudaDriver: the loaded library, its entry points (versioned names where
//   cuda.h maps the API name to a _v2), cuInit, and device facts.
// - CudaMarkerProbe: a hand-written PTX kernel that stores %globaltimer into
//   host-mapped memory, enqueued on the workload's own stream before and
//   after each execution (GPU-side begin/end markers).
// - GlobaltimerSource: a TimestampSource whose one read enqueues the probe on
//   a private stream and spins on the mapped slot; clock_sync brackets it.
// - CudaEventTimer: CUDA events around executions, a second marker source.
//
// Everything runs in the device's *primary* context, the one PyTorch and CuPy
// use, so stream handles from either framework are valid here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "fingrav/dynlib.hpp"
#include "fingrav/timestamp_source.hpp"

namespace fingrav::nvidia {

// ---- Types and constants, declared from the CUDA driver API's contract
// (cuda.h of CUDA 12.9 / 13.0, the "Driver API" reference). Values are
// checked against a real cuda.h by tests/test_nvidia.py.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2 on 64-bit hosts
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUjit_option = int;
using CUdevice_attribute = int;
struct CUuuid {
  char bytes[16];
};

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
constexpr CUresult CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr CUresult CUDA_ERROR_OPERATING_SYSTEM = 304;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr CUresult CUDA_ERROR_NOT_PERMITTED = 800;
constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
constexpr CUresult CUDA_ERROR_SYSTEM_NOT_READY = 802;
constexpr CUresult CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803;
constexpr CUresult CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804;

constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DEFAULT = 0x0;

constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;

constexpr CUjit_option CU_JIT_INFO_LOG_BUFFER = 3;
constexpr CUjit_option CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

// One declared entry point, for the header check: the API name as cuda.h
// spells it, the symbols tried (newest versioned name first; the first is
// what cuda.h's #define maps the API name to), and the parameter types.
struct CudaPrototype {
  const char* api;
  std::vector<const char*> symbols;
  const char* params;  // comma-separated types, as in cuda.h without names
};
const std::vector<CudaPrototype>& cuda_prototypes();

struct CudaConstant {
  const char* name;
  long long value;
};
const std::vector<CudaConstant>& cuda_constants();

// The entry points, resolved once per process.
struct CudaApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice);
  CUresult (*cuDeviceGetUuid)(CUuuid*, CUdevice);  // optional (nullptr if absent)
  CUresult (*cuDeviceTotalMem)(std::size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext*);
  CUresult (*cuMemHostAlloc)(void**, std::size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned);
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, CUjit_option*, void**);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
};

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;  // "dddd:bb:dd.f" as cuDeviceGetPCIBusId writes it
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (NVML's spelling); empty if unknown
  int cc_major = 0, cc_minor = 0;
  int clock_rate_khz = 0;
  int memory_clock_rate_khz = 0;
  int multiprocessors = 0;
  std::size_t total_memory = 0;
  bool can_map_host_memory = false;
};

// The loaded driver library. open() tries, in order: FINGRAV_CUDA_LIBRARY;
// libcuda.so.1 then libcuda.so through the loader and the driver's install
// folders. Throws LibraryNotFound, SymbolNotFound, or DeviceUnavailable when
// cuInit fails (no device, the toolkit's stub library, a too-old driver).
class CudaDriver {
 public:
  // The process-wide driver (opened and initialised once; later calls return
  // the same object, or retry when the first attempt failed).
  static std::shared_ptr<CudaDriver> get();
  // Opens the library without cuInit: where it is, for reports.
  static std::string library_path();
  static LibrarySpec library_spec();

  const CudaApi& api() const noexcept { return api_; }
  const std::string& path() const noexcept { return lib_.path(); }
  int driver_version() const;  // e.g. 12040 for CUDA 12.4
  int device_count() const;
  CudaDeviceInfo device_info(int index) const;
  CUdevice device(int index) const;  // validated ordinal -> CUdevice

  // "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected".
  std::string describe(CUresult r) const;
  // Throws std::runtime_error "<what>: <describe(r)>" unless r is CUDA_SUCCESS.
  void check(CUresult r, const char* what) const;

  explicit CudaDriver(DynamicLibrary lib);  // resolves symbols; use get()

 private:
  DynamicLibrary lib_;
  CudaApi api_{};
};

// What a failed cuInit means and what to do, for DeviceUnavailable messages.
std::string explain_init_failure(CUresult r);

// The device's primary context, retained for this object's lifetime.
class PrimaryContext {
 public:
  PrimaryContext(std::shared_ptr<CudaDriver> driver, int index);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;

  // Makes the context current on this thread for a scope (push/pop), so a
  // caller's own current context (PyTorch's, on its thread) is restored.
  class Scope {
   public:
    explicit Scope(const PrimaryContext& ctx);
    // For destructors: never throws; a failed push is remembered and not popped.
    Scope(const PrimaryContext& ctx, std::nothrow_t) noexcept;
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const PrimaryContext& ctx_;
    bool pushed_ = false;
  };

  const CudaDriver& driver() const noexcept { return *driver_; }
  const std::shared_ptr<CudaDriver>& driver_ptr() const noexcept { return driver_; }
  int index() const noexcept { return index_; }
  CUcontext get() const noexcept { return ctx_; }

 private:
  std::shared_ptr<CudaDriver> driver_;
  int index_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
};

// The probe's PTX text (two kernels: fingrav_stamp and fingrav_timer_step).
const char* probe_ptx() noexcept;

// A slot that no probe has written yet.
constexpr std::uint64_t kUnwrittenSlot = ~std::uint64_t{0};

// The PTX module with the probe kernels, loaded into a primary context. JIT
// failures report the driver's error log.
class ProbeModule {
 public:
  explicit ProbeModule(std::shared_ptr<PrimaryContext> ctx);
  ~ProbeModule();
  ProbeModule(const ProbeModule&) = delete;
  ProbeModule& operator=(const ProbeModule&) = delete;
  const PrimaryContext& context() const noexcept { return *ctx_; }
  const std::shared_ptr<PrimaryContext>& context_ptr() const noexcept { return ctx_; }
  CUfunction stamp() const noexcept { return stamp_; }
  CUfunction timer_step() const noexcept { return timer_step_; }

 private:
  std::shared_ptr<PrimaryContext> ctx_;
  CUmodule module_ = nullptr;
  CUfunction stamp_ = nullptr;
  CUfunction timer_step_ = nullptr;
};

// Host memory mapped into the device's address space (pinned, device-mapped,
// portable): the probe writes it over PCIe/NVLink-C2C, the host reads it
// without a copy.
class MappedSlots {
 public:
  MappedSlots(std::shared_ptr<PrimaryContext> ctx, std::size_t count);
  ~MappedSlots();
  MappedSlots(const MappedSlots&) = delete;
  MappedSlots& operator=(const MappedSlots&) = delete;
  std::size_t size() const noexcept { return count_; }
  std::uint64_t* host() const noexcept { return host_; }
  CUdeviceptr device() const noexcept { return device_; }
  // An acquire load: the device's store, once seen, is complete.
  std::uint64_t load(std::size_t i) const noexcept { return __atomic_load_n(host_ + i, __ATOMIC_ACQUIRE); }
  void fill(std::uint64_t v) noexcept;

 private:
  std::shared_ptr<PrimaryContext> ctx_;
  std::size_t count_;
  std::uint64_t* host_ = nullptr;
  CUdeviceptr device_ = 0;
};

// GPU-side markers: stamp(stream, i) enqueues the probe that stores
// %globaltimer (ns) into slot i once everything before it on the stream is
// done, and before anything after it starts.
class CudaMarkerProbe {
 public:
  CudaMarkerProbe(int device, std::size_t slots);
  std::size_t size() const noexcept { return slots_.size(); }
  int device() const noexcept { return module_->context().index(); }
  // Throws std::out_of_range naming slot; std::runtime_error on a launch error.
  void stamp(std::uintptr_t stream, std::size_t slot);
  void reset() noexcept { slots_.fill(kUnwrittenSlot); }
  std::uint64_t value(std::size_t i) const { return slots_.load(check_slot(i)); }
  void copy_to(std::uint64_t* out, std::size_t first, std::size_t n) const;
  void synchronize(std::uintptr_t stream);

 private:
  std::size_t check_slot(std::size_t i) const;
  std::shared_ptr<ProbeModule> module_;
  MappedSlots slots_;
};

// %globaltimer as a TimestampSource. One read: enqueue the probe on a private
// non-blocking stream (so it never waits behind work on the legacy default
// stream) and spin on the mapped slot until the GPU has written it.
//
// Why a launch per read rather than a persistent kernel polling a mailbox: a
// resident kernel would take an SM (and its power) from the workload under
// study and keep the GPU out of idle, which is what FinGraV measures against;
// brackets are taken around runs, not inside them, so a few microseconds of
// launch latency only widens the bracket, and clock_sync keeps the tightest.
class GlobaltimerSource : public TimestampSource {
 public:
  explicit GlobaltimerSource(int device, std::int64_t timeout_ns = 1'000'000'000);
  ~GlobaltimerSource() override;
  const TimestampInfo& timestamp_info() const noexcept override { return info_; }
  std::int64_t read_device_ticks() override;
  // n update steps of %globaltimer (ns between two consecutive changes,
  // measured inside one kernel; 0 where the timer did not move within 2^24
  // reads). The minimum is the timer's update granularity.
  std::vector<std::uint64_t> measure_steps(std::uint32_t n);
  int device() const noexcept { return module_->context().index(); }

 private:
  std::shared_ptr<ProbeModule> module_;
  MappedSlots slots_;
  CUstream stream_ = nullptr;
  std::size_t next_ = 0;
  std::int64_t timeout_ns_;
  TimestampInfo info_;
};

// CUDA events (timing enabled) recorded on a stream: a second, independent
// marker source whose elapsed times cross-check the probe's.
class CudaEventTimer {
 public:
  CudaEventTimer(int device, std::size_t count);
  ~CudaEventTimer();
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;
  std::size_t size() const noexcept { return events_.size(); }
  void record(std::uintptr_t stream, std::size_t index);
  void synchronize(std::size_t index);
  // Milliseconds from event `start` to event `end` (both recorded and done).
  float elapsed_ms(std::size_t start, std::size_t end) const;

 private:
  std::size_t check_index(std::size_t i, const char* name) const;
  std::shared_ptr<PrimaryContext> ctx_;
  std::vector<CUevent> events_;
};

}  // namespace fingrav::nvidia
