#include "fingrav/nvidia/cuda_driver.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "fingrav/host_clock.hpp"

namespace fingrav::nvidia {
namespace {

// Entry points and the symbols tried. The first symbol is what cuda.h's
// `#define <api> <api>_v2` maps the API name to (CUDA 12.x/13.0), so a binary
// compiled against the header calls the same function we do; the unversioned
// name follows for drivers older than the versioned symbol.
// Parameter types as declared in cuda.h (names dropped).
const std::vector<CudaPrototype> kPrototypes = {
    {"cuInit", {"cuInit"}, "unsigned int"},
    {"cuDriverGetVersion", {"cuDriverGetVersion"}, "int *"},
    {"cuGetErrorString", {"cuGetErrorString"}, "CUresult, const char **"},
    {"cuGetErrorName", {"cuGetErrorName"}, "CUresult, const char **"},
    {"cuDeviceGetCount", {"cuDeviceGetCount"}, "int *"},
    {"cuDeviceGet", {"cuDeviceGet"}, "CUdevice *, int"},
    {"cuDeviceGetName", {"cuDeviceGetName"}, "char *, int, CUdevice"},
    {"cuDeviceGetAttribute", {"cuDeviceGetAttribute"}, "int *, CUdevice_attribute, CUdevice"},
    {"cuDeviceGetPCIBusId", {"cuDeviceGetPCIBusId"}, "char *, int, CUdevice"},
    {"cuDeviceGetUuid", {"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, "CUuuid *, CUdevice"},
    {"cuDeviceTotalMem", {"cuDeviceTotalMem_v2"}, "size_t *, CUdevice"},
    {"cuDevicePrimaryCtxRetain", {"cuDevicePrimaryCtxRetain"}, "CUcontext *, CUdevice"},
    {"cuDevicePrimaryCtxRelease", {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, "CUdevice"},
    {"cuCtxPushCurrent", {"cuCtxPushCurrent_v2"}, "CUcontext"},
    {"cuCtxPopCurrent", {"cuCtxPopCurrent_v2"}, "CUcontext *"},
    {"cuMemHostAlloc", {"cuMemHostAlloc"}, "void **, size_t, unsigned int"},
    {"cuMemFreeHost", {"cuMemFreeHost"}, "void *"},
    {"cuMemHostGetDevicePointer", {"cuMemHostGetDevicePointer_v2"}, "CUdeviceptr *, void *, unsigned int"},
    {"cuModuleLoadDataEx", {"cuModuleLoadDataEx"}, "CUmodule *, const void *, unsigned int, CUjit_option *, void **"},
    {"cuModuleUnload", {"cuModuleUnload"}, "CUmodule"},
    {"cuModuleGetFunction", {"cuModuleGetFunction"}, "CUfunction *, CUmodule, const char *"},
    {"cuLaunchKernel", {"cuLaunchKernel"},
     "CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
     "unsigned int, CUstream, void **, void **"},
    {"cuStreamCreate", {"cuStreamCreate"}, "CUstream *, unsigned int"},
    {"cuStreamDestroy", {"cuStreamDestroy_v2"}, "CUstream"},
    {"cuStreamSynchronize", {"cuStreamSynchronize"}, "CUstream"},
    {"cuStreamQuery", {"cuStreamQuery"}, "CUstream"},
    {"cuEventCreate", {"cuEventCreate"}, "CUevent *, unsigned int"},
    {"cuEventDestroy", {"cuEventDestroy_v2"}, "CUevent"},
    {"cuEventRecord", {"cuEventRecord"}, "CUevent, CUstream"},
    {"cuEventSynchronize", {"cuEventSynchronize"}, "CUevent"},
    {"cuEventElapsedTime", {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, "float *, CUevent, CUevent"},
};

#define FINGRAV_CONST(x) {#x, static_cast<long long>(x)}
const std::vector<CudaConstant> kConstants = {
    FINGRAV_CONST(CUDA_SUCCESS),
    FINGRAV_CONST(CUDA_ERROR_INVALID_VALUE),
    FINGRAV_CONST(CUDA_ERROR_NOT_INITIALIZED),
    FINGRAV_CONST(CUDA_ERROR_STUB_LIBRARY),
    FINGRAV_CONST(CUDA_ERROR_DEVICE_UNAVAILABLE),
    FINGRAV_CONST(CUDA_ERROR_NO_DEVICE),
    FINGRAV_CONST(CUDA_ERROR_INVALID_DEVICE),
    FINGRAV_CONST(CUDA_ERROR_INVALID_PTX),
    FINGRAV_CONST(CUDA_ERROR_JIT_COMPILER_NOT_FOUND),
    FINGRAV_CONST(CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
    FINGRAV_CONST(CUDA_ERROR_OPERATING_SYSTEM),
    FINGRAV_CONST(CUDA_ERROR_NOT_READY),
    FINGRAV_CONST(CUDA_ERROR_NOT_PERMITTED),
    FINGRAV_CONST(CUDA_ERROR_NOT_SUPPORTED),
    FINGRAV_CONST(CUDA_ERROR_SYSTEM_NOT_READY),
    FINGRAV_CONST(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH),
    FINGRAV_CONST(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE),
    FINGRAV_CONST(CU_MEMHOSTALLOC_PORTABLE),
    FINGRAV_CONST(CU_MEMHOSTALLOC_DEVICEMAP),
    FINGRAV_CONST(CU_STREAM_NON_BLOCKING),
    FINGRAV_CONST(CU_EVENT_DEFAULT),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
    FINGRAV_CONST(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    FINGRAV_CONST(CU_JIT_INFO_LOG_BUFFER),
    FINGRAV_CONST(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES),
    FINGRAV_CONST(CU_JIT_ERROR_LOG_BUFFER),
    FINGRAV_CONST(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES),
};
#undef FINGRAV_CONST

// The probe, in PTX so the driver JITs it for whatever GPU is present: no
// nvcc, no fatbinary. PTX ISA 6.0 / sm_50 is the lowest that every driver
// since CUDA 9 accepts and that JITs forward to Volta..Hopper and later
// (%globaltimer needs sm_30+, PTX 3.1+).
//
// fingrav_stamp(u64* slots, u32 i): slots[i] = %globaltimer. The store is
// volatile (never cached or merged) to host-mapped memory, then membar.sys
// (fence.sc.sys on sm_70+) orders it before anything the GPU does after the
// kernel, so a host that sees the kernel complete sees the value.
//
// fingrav_timer_step(u64* out, u32 n): n times, wait for %globaltimer to
// change (a), then to change again (b), and store b - a: one update step,
// timed with no memory access in between. Each wait gives up after 2^24
// reads (stores 0) so a frozen timer cannot hang the GPU.
const char kProbePtx[] = R"PTX(//
// fingrav-native marker probe (hand-written PTX; see cuda_driver.cpp)
//
.version 6.0
.target sm_50
.address_size 64

.visible .entry fingrav_stamp(
	.param .u64 fingrav_stamp_slots,
	.param .u32 fingrav_stamp_index
)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<6>;

	ld.param.u64 	%rd1, [fingrav_stamp_slots];
	ld.param.u32 	%r1, [fingrav_stamp_index];
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.u32 	%rd3, %r1, 8;
	add.s64 	%rd4, %rd2, %rd3;
	mov.u64 	%rd5, %globaltimer;
	st.volatile.global.u64 	[%rd4], %rd5;
	membar.sys;
	ret;
}

.visible .entry fingrav_timer_step(
	.param .u64 fingrav_timer_step_out,
	.param .u32 fingrav_timer_step_n
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<10>;

	ld.param.u64 	%rd1, [fingrav_timer_step_out];
	ld.param.u32 	%r1, [fingrav_timer_step_n];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r2, 0;
	setp.eq.u32 	%p1, %r1, 0;
	@%p1 bra 	DONE;
LOOP:
	mov.u64 	%rd3, %globaltimer;
	mov.u32 	%r3, 0;
WAIT_A:
	mov.u64 	%rd4, %globaltimer;
	add.u32 	%r3, %r3, 1;
	setp.ne.u64 	%p2, %rd4, %rd3;
	@%p2 bra 	GOT_A;
	setp.lt.u32 	%p3, %r3, 16777216;
	@%p3 bra 	WAIT_A;
	mov.u64 	%rd7, 0;
	bra.uni 	STORE;
GOT_A:
	mov.u32 	%r3, 0;
WAIT_B:
	mov.u64 	%rd5, %globaltimer;
	add.u32 	%r3, %r3, 1;
	setp.ne.u64 	%p2, %rd5, %rd4;
	@%p2 bra 	GOT_B;
	setp.lt.u32 	%p3, %r3, 16777216;
	@%p3 bra 	WAIT_B;
	mov.u64 	%rd7, 0;
	bra.uni 	STORE;
GOT_B:
	sub.s64 	%rd7, %rd5, %rd4;
STORE:
	mul.wide.u32 	%rd8, %r2, 8;
	add.s64 	%rd9, %rd2, %rd8;
	st.volatile.global.u64 	[%rd9], %rd7;
	add.u32 	%r2, %r2, 1;
	setp.lt.u32 	%p1, %r2, %r1;
	@%p1 bra 	LOOP;
	membar.sys;
DONE:
	ret;
}
)PTX";

template <typename Fn>
void resolve(const DynamicLibrary& lib, Fn& slot, const char* api) {
  const auto& p = *std::find_if(kPrototypes.begin(), kPrototypes.end(),
                                [&](const CudaPrototype& q) { return std::string(q.api) == api; });
  void* sym = nullptr;
  for (const char* s : p.symbols)
    if ((sym = lib.find({s})) != nullptr) break;
  if (sym == nullptr) {
    std::ostringstream os;
    os << lib.what() << " at " << lib.path() << " lacks the symbol";
    const char* sep = " ";
    for (const char* s : p.symbols) {
      os << sep << s;
      sep = " / ";
    }
    os << " (the installed NVIDIA driver is too old; update it)";
    throw SymbolNotFound(os.str());
  }
  slot = reinterpret_cast<Fn>(sym);
}

std::mutex g_driver_mu;
std::shared_ptr<CudaDriver> g_driver;  // guarded by g_driver_mu

std::mutex g_ctx_mu;
std::map<int, std::weak_ptr<PrimaryContext>> g_contexts;  // guarded by g_ctx_mu
std::map<int, std::weak_ptr<ProbeModule>> g_modules;      // guarded by g_ctx_mu

// One primary-context holder and one loaded module per device, shared by
// every probe, source and event timer of the process.
std::shared_ptr<PrimaryContext> context_for(int device) {
  auto drv = CudaDriver::get();
  std::lock_guard<std::mutex> lock(g_ctx_mu);
  if (auto c = g_contexts[device].lock()) return c;
  auto c = std::make_shared<PrimaryContext>(std::move(drv), device);
  g_contexts[device] = c;
  return c;
}

std::shared_ptr<ProbeModule> module_for(int device) {
  auto ctx = context_for(device);
  std::lock_guard<std::mutex> lock(g_ctx_mu);
  if (auto m = g_modules[device].lock()) return m;
  auto m = std::make_shared<ProbeModule>(std::move(ctx));
  g_modules[device] = m;
  return m;
}

CUstream as_stream(std::uintptr_t handle) { return reinterpret_cast<CUstream>(handle); }

}  // namespace

const std::vector<CudaPrototype>& cuda_prototypes() { return kPrototypes; }
const std::vector<CudaConstant>& cuda_constants() { return kConstants; }
const char* probe_ptx() noexcept { return kProbePtx; }

LibrarySpec CudaDriver::library_spec() {
  LibrarySpec s;
  s.what = "the CUDA driver (libcuda)";
  // libcuda.so.1 first: it is what the driver installs; the unversioned
  // libcuda.so is a development link, and in a toolkit's stubs folder it is
  // a stub that cuInit rejects (CUDA_ERROR_STUB_LIBRARY).
  s.names = {"libcuda.so.1", "libcuda.so"};
  s.dirs = nvidia_driver_library_dirs();
  s.override_env = "FINGRAV_CUDA_LIBRARY";
  s.install_hint =
      "Install the NVIDIA driver (it ships libcuda.so.1); the CUDA toolkit is not needed. "
      "In a container, start it with the NVIDIA container toolkit (--gpus all).";
  return s;
}

std::string CudaDriver::library_path() { return DynamicLibrary::open(library_spec()).path(); }

CudaDriver::CudaDriver(DynamicLibrary lib) : lib_(std::move(lib)) {
  resolve(lib_, api_.cuInit, "cuInit");
  resolve(lib_, api_.cuDriverGetVersion, "cuDriverGetVersion");
  resolve(lib_, api_.cuGetErrorString, "cuGetErrorString");
  resolve(lib_, api_.cuGetErrorName, "cuGetErrorName");
  resolve(lib_, api_.cuDeviceGetCount, "cuDeviceGetCount");
  resolve(lib_, api_.cuDeviceGet, "cuDeviceGet");
  resolve(lib_, api_.cuDeviceGetName, "cuDeviceGetName");
  resolve(lib_, api_.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(lib_, api_.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
  // The UUID only helps match NVML's device; a driver without it still works.
  api_.cuDeviceGetUuid = lib_.find_fn<decltype(api_.cuDeviceGetUuid)>({"cuDeviceGetUuid_v2", "cuDeviceGetUuid"});
  resolve(lib_, api_.cuDeviceTotalMem, "cuDeviceTotalMem");
  resolve(lib_, api_.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(lib_, api_.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease");
  resolve(lib_, api_.cuCtxPushCurrent, "cuCtxPushCurrent");
  resolve(lib_, api_.cuCtxPopCurrent, "cuCtxPopCurrent");
  resolve(lib_, api_.cuMemHostAlloc, "cuMemHostAlloc");
  resolve(lib_, api_.cuMemFreeHost, "cuMemFreeHost");
  resolve(lib_, api_.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer");
  resolve(lib_, api_.cuModuleLoadDataEx, "cuModuleLoadDataEx");
  resolve(lib_, api_.cuModuleUnload, "cuModuleUnload");
  resolve(lib_, api_.cuModuleGetFunction, "cuModuleGetFunction");
  resolve(lib_, api_.cuLaunchKernel, "cuLaunchKernel");
  resolve(lib_, api_.cuStreamCreate, "cuStreamCreate");
  resolve(lib_, api_.cuStreamDestroy, "cuStreamDestroy");
  resolve(lib_, api_.cuStreamSynchronize, "cuStreamSynchronize");
  resolve(lib_, api_.cuStreamQuery, "cuStreamQuery");
  resolve(lib_, api_.cuEventCreate, "cuEventCreate");
  resolve(lib_, api_.cuEventDestroy, "cuEventDestroy");
  resolve(lib_, api_.cuEventRecord, "cuEventRecord");
  resolve(lib_, api_.cuEventSynchronize, "cuEventSynchronize");
  resolve(lib_, api_.cuEventElapsedTime, "cuEventElapsedTime");
}

std::string explain_init_failure(CUresult r) {
  switch (r) {
    case CUDA_ERROR_NO_DEVICE:
      return "the driver sees no NVIDIA GPU: check nvidia-smi and CUDA_VISIBLE_DEVICES; in a container, "
             "start it with --gpus all (NVIDIA container toolkit)";
    case CUDA_ERROR_STUB_LIBRARY:
      return "the libcuda that loaded is the CUDA toolkit's link-time stub (lib64/stubs), not the driver: "
             "remove the stubs folder from LD_LIBRARY_PATH, or set FINGRAV_CUDA_LIBRARY to the driver's "
             "libcuda.so.1, or install the NVIDIA driver";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "libcuda and the loaded kernel driver do not match, or the driver is too old: update the NVIDIA "
             "driver (reboot, or reload the nvidia module, after an upgrade)";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return "a CUDA forward-compatibility libcuda loaded on a GPU that does not support it: use the "
             "driver's own libcuda.so.1";
    case CUDA_ERROR_SYSTEM_NOT_READY:
      return "the system is not ready (on NVSwitch systems, start nvidia-fabricmanager)";
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return "the GPU is busy or unavailable (compute mode exclusive-process with another user, or a fault)";
    case CUDA_ERROR_OPERATING_SYSTEM:
    case CUDA_ERROR_NOT_PERMITTED:
      return "the operating system refused access: check permissions on /dev/nvidia*";
    default:
      return "check that the NVIDIA driver is installed and loaded (nvidia-smi)";
  }
}

std::shared_ptr<CudaDriver> CudaDriver::get() {
  std::lock_guard<std::mutex> lock(g_driver_mu);
  if (g_driver) return g_driver;
  auto drv = std::make_shared<CudaDriver>(DynamicLibrary::open(library_spec()));
  const CUresult r = drv->api_.cuInit(0);
  if (r != CUDA_SUCCESS) {
    throw DeviceUnavailable("cuInit failed for " + drv->path() + ": " + drv->describe(r) + "; " +
                            explain_init_failure(r));
  }
  g_driver = drv;
  return drv;
}

std::string CudaDriver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  std::ostringstream os;
  if (api_.cuGetErrorName != nullptr && api_.cuGetErrorName(r, &name) == CUDA_SUCCESS && name != nullptr)
    os << name << " (" << r << ")";
  else
    os << "CUDA error " << r;
  if (api_.cuGetErrorString != nullptr && api_.cuGetErrorString(r, &text) == CUDA_SUCCESS && text != nullptr)
    os << ": " << text;
  return os.str();
}

void CudaDriver::check(CUresult r, const char* what) const {
  if (r != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + " failed: " + describe(r));
}

int CudaDriver::driver_version() const {
  int v = 0;
  check(api_.cuDriverGetVersion(&v), "cuDriverGetVersion");
  return v;
}

int CudaDriver::device_count() const {
  int n = 0;
  check(api_.cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

CUdevice CudaDriver::device(int index) const {
  const int n = device_count();
  if (index < 0 || index >= n) {
    throw DeviceUnavailable("device=" + std::to_string(index) + ": the CUDA driver sees " + std::to_string(n) +
                            " device(s) (indices follow CUDA_VISIBLE_DEVICES)");
  }
  CUdevice d = 0;
  check(api_.cuDeviceGet(&d, index), "cuDeviceGet");
  return d;
}

CudaDeviceInfo CudaDriver::device_info(int index) const {
  const CUdevice d = device(index);
  CudaDeviceInfo info;
  info.index = index;
  char buf[256] = {};
  check(api_.cuDeviceGetName(buf, static_cast<int>(sizeof buf) - 1, d), "cuDeviceGetName");
  info.name = buf;
  char bus[64] = {};
  check(api_.cuDeviceGetPCIBusId(bus, static_cast<int>(sizeof bus) - 1, d), "cuDeviceGetPCIBusId");
  info.pci_bus_id = bus;
  if (api_.cuDeviceGetUuid != nullptr) {
    CUuuid u{};
    if (api_.cuDeviceGetUuid(&u, d) == CUDA_SUCCESS) {
      // NVML spells the same 16 bytes as GPU-8-4-4-4-12 lowercase hex.
      char s[64];
      const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
      std::snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                    b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
      info.uuid = s;
    }
  }
  auto attr = [&](CUdevice_attribute a, const char* what) {
    int v = 0;
    check(api_.cuDeviceGetAttribute(&v, a, d), what);
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  info.clock_rate_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "cuDeviceGetAttribute(CLOCK_RATE)");
  info.memory_clock_rate_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "cuDeviceGetAttribute(MEMORY_CLOCK_RATE)");
  info.multiprocessors = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  info.can_map_host_memory = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, "cuDeviceGetAttribute(CAN_MAP_HOST_MEMORY)") != 0;
  check(api_.cuDeviceTotalMem(&info.total_memory, d), "cuDeviceTotalMem");
  return info;
}

// ---------------------------------------------------------------- primary context

PrimaryContext::PrimaryContext(std::shared_ptr<CudaDriver> driver, int index)
    : driver_(std::move(driver)), index_(index) {
  dev_ = driver_->device(index);
  // The primary context is the one the CUDA runtime (PyTorch, CuPy) uses:
  // retaining it shares their streams and memory instead of creating a rival.
  const CUresult r = driver_->api().cuDevicePrimaryCtxRetain(&ctx_, dev_);
  if (r != CUDA_SUCCESS) {
    throw DeviceUnavailable("cuDevicePrimaryCtxRetain(device " + std::to_string(index) +
                            ") failed: " + driver_->describe(r) + "; " + explain_init_failure(r));
  }
}

PrimaryContext::~PrimaryContext() {
  if (ctx_ != nullptr) (void)driver_->api().cuDevicePrimaryCtxRelease(dev_);
}

PrimaryContext::Scope::Scope(const PrimaryContext& ctx) : ctx_(ctx) {
  ctx_.driver().check(ctx_.driver().api().cuCtxPushCurrent(ctx_.get()), "cuCtxPushCurrent");
  pushed_ = true;
}

PrimaryContext::Scope::Scope(const PrimaryContext& ctx, std::nothrow_t) noexcept
    : ctx_(ctx), pushed_(ctx.driver().api().cuCtxPushCurrent(ctx.get()) == CUDA_SUCCESS) {}

PrimaryContext::Scope::~Scope() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  (void)ctx_.driver().api().cuCtxPopCurrent(&popped);
}

// ---------------------------------------------------------------- module

ProbeModule::ProbeModule(std::shared_ptr<PrimaryContext> ctx) : ctx_(std::move(ctx)) {
  const auto& drv = ctx_->driver();
  PrimaryContext::Scope scope(*ctx_);
  // JIT with both logs captured: a PTX the driver rejects is reported with
  // the JIT's own words, not just CUDA_ERROR_INVALID_PTX.
  char info_log[4096] = {};
  char error_log[4096] = {};
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  // Size options are passed by value in the pointer slot (the driver API's
  // convention for CUjit_option values).
  void* values[] = {info_log, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof info_log - 1)),
                    error_log, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof error_log - 1))};
  const CUresult r = drv.api().cuModuleLoadDataEx(&module_, kProbePtx, 4, opts, values);
  if (r != CUDA_SUCCESS) {
    std::string msg = "cuModuleLoadDataEx (JIT of the %globaltimer probe PTX) failed: " + drv.describe(r);
    if (error_log[0] != '\0') msg += "\nJIT error log:\n" + std::string(error_log);
    if (info_log[0] != '\0') msg += "\nJIT info log:\n" + std::string(info_log);
    throw std::runtime_error(msg);
  }
  try {
    drv.check(drv.api().cuModuleGetFunction(&stamp_, module_, "fingrav_stamp"), "cuModuleGetFunction(fingrav_stamp)");
    drv.check(drv.api().cuModuleGetFunction(&timer_step_, module_, "fingrav_timer_step"),
              "cuModuleGetFunction(fingrav_timer_step)");
  } catch (...) {
    (void)drv.api().cuModuleUnload(module_);
    throw;
  }
}

ProbeModule::~ProbeModule() {
  PrimaryContext::Scope scope(*ctx_, std::nothrow);
  (void)ctx_->driver().api().cuModuleUnload(module_);
}

// ---------------------------------------------------------------- mapped slots

MappedSlots::MappedSlots(std::shared_ptr<PrimaryContext> ctx, std::size_t count) : ctx_(std::move(ctx)), count_(count) {
  if (count == 0 || count > (std::size_t{1} << 28)) {
    throw std::invalid_argument("slots=" + std::to_string(count) + ": must be in [1, 2^28]");
  }
  const auto& drv = ctx_->driver();
  PrimaryContext::Scope scope(*ctx_);
  void* p = nullptr;
  // DEVICEMAP: the GPU can address it; PORTABLE: pinned for every context,
  // so a framework that makes another context current does not unpin it.
  drv.check(drv.api().cuMemHostAlloc(&p, count * sizeof(std::uint64_t), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
            "cuMemHostAlloc(DEVICEMAP|PORTABLE)");
  host_ = static_cast<std::uint64_t*>(p);
  const CUresult r = drv.api().cuMemHostGetDevicePointer(&device_, p, 0);
  if (r != CUDA_SUCCESS) {
    (void)drv.api().cuMemFreeHost(p);
    drv.check(r, "cuMemHostGetDevicePointer");
  }
  fill(kUnwrittenSlot);
}

MappedSlots::~MappedSlots() {
  PrimaryContext::Scope scope(*ctx_, std::nothrow);
  (void)ctx_->driver().api().cuMemFreeHost(host_);
}

void MappedSlots::fill(std::uint64_t v) noexcept {
  for (std::size_t i = 0; i < count_; ++i) __atomic_store_n(host_ + i, v, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

// ---------------------------------------------------------------- marker probe

CudaMarkerProbe::CudaMarkerProbe(int device, std::size_t slots)
    : module_(module_for(device)), slots_(module_->context_ptr(), slots) {}

std::size_t CudaMarkerProbe::check_slot(std::size_t i) const {
  if (i >= slots_.size()) {
    throw std::out_of_range("slot=" + std::to_string(i) + ": the probe has " + std::to_string(slots_.size()) +
                            " slots");
  }
  return i;
}

void CudaMarkerProbe::stamp(std::uintptr_t stream, std::size_t slot) {
  check_slot(slot);
  const auto& ctx = module_->context();
  PrimaryContext::Scope scope(ctx);
  CUdeviceptr base = slots_.device();
  auto index = static_cast<std::uint32_t>(slot);
  void* args[] = {&base, &index};
  ctx.driver().check(ctx.driver().api().cuLaunchKernel(module_->stamp(), 1, 1, 1, 1, 1, 1, 0, as_stream(stream), args,
                                                       nullptr),
                     "cuLaunchKernel(fingrav_stamp)");
}

void CudaMarkerProbe::copy_to(std::uint64_t* out, std::size_t first, std::size_t n) const {
  if (first > slots_.size() || n > slots_.size() - first) {
    throw std::out_of_range("slots [" + std::to_string(first) + ", " + std::to_string(first + n) +
                            "): the probe has " + std::to_string(slots_.size()));
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = slots_.load(first + i);
}

void CudaMarkerProbe::synchronize(std::uintptr_t stream) {
  const auto& ctx = module_->context();
  PrimaryContext::Scope scope(ctx);
  ctx.driver().check(ctx.driver().api().cuStreamSynchronize(as_stream(stream)), "cuStreamSynchronize");
}

// ---------------------------------------------------------------- globaltimer source

GlobaltimerSource::GlobaltimerSource(int device, std::int64_t timeout_ns)
    : module_(module_for(device)), slots_(module_->context_ptr(), 64), timeout_ns_(timeout_ns) {
  if (timeout_ns <= 0) throw std::invalid_argument("timeout_ns=" + std::to_string(timeout_ns) + ": must be > 0");
  const auto& ctx = module_->context();
  PrimaryContext::Scope scope(ctx);
  ctx.driver().check(ctx.driver().api().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING),
                     "cuStreamCreate(NON_BLOCKING)");
  info_.name = "nvidia-globaltimer:" + std::to_string(device);
  info_.clock_domain = "nvidia-globaltimer";
  info_.nominal_tick_ns = 1.0;  // %globaltimer counts nanoseconds (its update step is coarser)
}

GlobaltimerSource::~GlobaltimerSource() {
  const auto& ctx = module_->context();
  PrimaryContext::Scope scope(ctx, std::nothrow);
  (void)ctx.driver().api().cuStreamSynchronize(stream_);
  (void)ctx.driver().api().cuStreamDestroy(stream_);
}

std::int64_t GlobaltimerSource::read_device_ticks() {
  const auto& ctx = module_->context();
  const auto& api = ctx.driver().api();
  // Rotate through the slots so a late write from an earlier, timed-out
  // read can never be taken for this one.
  const std::size_t slot = next_;
  next_ = (next_ + 1) % slots_.size();
  __atomic_store_n(slots_.host() + slot, kUnwrittenSlot, __ATOMIC_SEQ_CST);
  {
    PrimaryContext::Scope scope(ctx);
    CUdeviceptr base = slots_.device();
    auto index = static_cast<std::uint32_t>(slot);
    void* args[] = {&base, &index};
    ctx.driver().check(api.cuLaunchKernel(module_->stamp(), 1, 1, 1, 1, 1, 1, 0, stream_, args, nullptr),
                       "cuLaunchKernel(fingrav_stamp)");
  }
  // Spin on the mapped slot rather than cuStreamSynchronize: the host sees
  // the value as soon as it lands, without the completion path's latency.
  const std::int64_t deadline = host_now_ns() + timeout_ns_;
  std::uint32_t spins = 0;
  for (;;) {
    const std::uint64_t v = slots_.load(slot);
    if (v != kUnwrittenSlot) return static_cast<std::int64_t>(v);
    if ((++spins & 0x3ffu) == 0) {
      // Now and then, ask the stream whether the probe failed.
      PrimaryContext::Scope scope(ctx);
      const CUresult q = api.cuStreamQuery(stream_);
      if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY) ctx.driver().check(q, "the %globaltimer probe");
      if (q == CUDA_SUCCESS && slots_.load(slot) == kUnwrittenSlot) {
        throw std::runtime_error("the %globaltimer probe completed without writing its slot (host-mapped memory "
                                 "not coherent on this system?)");
      }
      if (host_now_ns() > deadline) {
        throw std::runtime_error("the %globaltimer probe did not complete within " + std::to_string(timeout_ns_) +
                                 " ns (GPU busy with a long kernel, or hung)");
      }
    }
  }
}

std::vector<std::uint64_t> GlobaltimerSource::measure_steps(std::uint32_t n) {
  if (n == 0 || n > (1u << 20)) throw std::invalid_argument("n=" + std::to_string(n) + ": must be in [1, 2^20]");
  MappedSlots out(module_->context_ptr(), n);
  const auto& ctx = module_->context();
  {
    PrimaryContext::Scope scope(ctx);
    CUdeviceptr base = out.device();
    std::uint32_t count = n;
    void* args[] = {&base, &count};
    ctx.driver().check(ctx.driver().api().cuLaunchKernel(module_->timer_step(), 1, 1, 1, 1, 1, 1, 0, stream_, args,
                                                         nullptr),
                       "cuLaunchKernel(fingrav_timer_step)");
    ctx.driver().check(ctx.driver().api().cuStreamSynchronize(stream_), "cuStreamSynchronize");
  }
  std::vector<std::uint64_t> steps(n);
  for (std::uint32_t i = 0; i < n; ++i) steps[i] = out.load(i);
  return steps;
}

// ---------------------------------------------------------------- events

CudaEventTimer::CudaEventTimer(int device, std::size_t count) : ctx_(context_for(device)) {
  if (count == 0 || count > (std::size_t{1} << 24)) {
    throw std::invalid_argument("count=" + std::to_string(count) + ": must be in [1, 2^24]");
  }
  const auto& drv = ctx_->driver();
  PrimaryContext::Scope scope(*ctx_);
  events_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    CUevent e = nullptr;
    const CUresult r = drv.api().cuEventCreate(&e, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
      for (CUevent x : events_) (void)drv.api().cuEventDestroy(x);
      drv.check(r, "cuEventCreate");
    }
    events_.push_back(e);
  }
}

CudaEventTimer::~CudaEventTimer() {
  PrimaryContext::Scope scope(*ctx_, std::nothrow);
  for (CUevent e : events_) (void)ctx_->driver().api().cuEventDestroy(e);
}

std::size_t CudaEventTimer::check_index(std::size_t i, const char* name) const {
  if (i >= events_.size()) {
    throw std::out_of_range(std::string(name) + "=" + std::to_string(i) + ": the timer has " +
                            std::to_string(events_.size()) + " events");
  }
  return i;
}

void CudaEventTimer::record(std::uintptr_t stream, std::size_t index) {
  check_index(index, "index");
  PrimaryContext::Scope scope(*ctx_);
  ctx_->driver().check(ctx_->driver().api().cuEventRecord(events_[index], as_stream(stream)), "cuEventRecord");
}

void CudaEventTimer::synchronize(std::size_t index) {
  check_index(index, "index");
  PrimaryContext::Scope scope(*ctx_);
  ctx_->driver().check(ctx_->driver().api().cuEventSynchronize(events_[index]), "cuEventSynchronize");
}

float CudaEventTimer::elapsed_ms(std::size_t start, std::size_t end) const {
  check_index(start, "start");
  check_index(end, "end");
  PrimaryContext::Scope scope(*ctx_);
  float ms = 0;
  ctx_->driver().check(ctx_->driver().api().cuEventElapsedTime(&ms, events_[start], events_[end]),
                       "cuEventElapsedTime");
  return ms;
}

}  // namespace fingrav::nvidia
