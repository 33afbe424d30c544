#include "fingrav/amd/hip.hpp"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "fingrav/host_clock.hpp"

namespace fingrav::amd {

// ---------------------------------------------------------------- prototypes
// Declared from hip_runtime_api.h / hiprtc.h (ROCm 5.2 and 6.x). hipError_t
// and hiprtcResult are C enums (int); the handle types (hipStream_t,
// hipModule_t, hipFunction_t, hipEvent_t, hiprtcProgram) are opaque pointers.
using hipError = int;
using hiprtcResult = int;
constexpr int kHipSuccess = 0;
constexpr unsigned kHipHostMallocMapped = 0x2;           // hipHostMallocMapped
constexpr unsigned kHipHostMallocCoherent = 0x40000000;  // hipHostMallocCoherent (fine-grained)
constexpr unsigned kHipStreamNonBlocking = 0x1;          // hipStreamNonBlocking

struct HipApi {
  DynamicLibrary lib;
  hipError (*hipInit)(unsigned);
  hipError (*hipGetDeviceCount)(int*);
  hipError (*hipSetDevice)(int);
  hipError (*hipDeviceGet)(int*, int);
  hipError (*hipDeviceGetName)(char*, int, int);
  hipError (*hipDeviceGetAttribute)(int*, int, int);
  hipError (*hipHostMalloc)(void**, std::size_t, unsigned);
  hipError (*hipHostFree)(void*);
  hipError (*hipHostGetDevicePointer)(void**, void*, unsigned);
  hipError (*hipModuleLoadData)(void**, const void*);
  hipError (*hipModuleUnload)(void*);
  hipError (*hipModuleGetFunction)(void**, void*, const char*);
  hipError (*hipModuleLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, void*, void**, void**);
  hipError (*hipStreamCreateWithFlags)(void**, unsigned);
  hipError (*hipStreamSynchronize)(void*);
  hipError (*hipStreamDestroy)(void*);
  hipError (*hipEventCreate)(void**);
  hipError (*hipEventRecord)(void*, void*);
  hipError (*hipEventSynchronize)(void*);
  hipError (*hipEventElapsedTime)(float*, void*, void*);
  hipError (*hipEventDestroy)(void*);
  const char* (*hipGetErrorString)(hipError);
  const char* (*hipGetErrorName)(hipError);
  hipError (*hipRuntimeGetVersion)(int*);
  hipError (*hipDeviceSynchronize)();

  std::string describe(hipError e) const {
    const char* name = hipGetErrorName ? hipGetErrorName(e) : nullptr;
    const char* text = hipGetErrorString(e);
    std::string s = name ? name : "hipError";
    s += " (" + std::to_string(e) + ")";
    if (text && (!name || std::strcmp(text, name) != 0)) s += ": " + std::string(text);
    return s;
  }
  void check(hipError e, const char* call) const {
    if (e != kHipSuccess) throw std::runtime_error(std::string(call) + " failed: " + describe(e));
  }
};

struct HiprtcApi {
  DynamicLibrary lib;
  hiprtcResult (*hiprtcCreateProgram)(void**, const char*, const char*, int, const char**, const char**);
  hiprtcResult (*hiprtcCompileProgram)(void*, int, const char**);
  hiprtcResult (*hiprtcGetCodeSize)(void*, std::size_t*);
  hiprtcResult (*hiprtcGetCode)(void*, char*);
  hiprtcResult (*hiprtcGetProgramLogSize)(void*, std::size_t*);
  hiprtcResult (*hiprtcGetProgramLog)(void*, char*);
  hiprtcResult (*hiprtcDestroyProgram)(void**);
  const char* (*hiprtcGetErrorString)(hiprtcResult);

  void check(hiprtcResult r, const char* call) const {
    if (r != 0) {
      const char* s = hiprtcGetErrorString(r);
      throw std::runtime_error(std::string(call) + " failed: " + (s ? s : "hiprtc error") + " (" +
                               std::to_string(r) + ")");
    }
  }
};

namespace {

const char* const kHipHint =
    "Install the HIP runtime: ROCm (https://rocm.docs.amd.com, package hip-runtime-amd) or "
    "Debian/Ubuntu's libamdhip64-5; set ROCM_PATH if ROCm is not in /opt/rocm.";

// libamdhip64 starts threads and registers exit handlers; unloading it while
// they exist crashes at exit, so once loaded it stays (RTLD_NODELETE on a
// second, deliberately unreleased handle).
void pin(const DynamicLibrary& lib) {
  (void)dlopen(lib.path().c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

template <typename Fn>
void need(const DynamicLibrary& lib, Fn& fn, std::initializer_list<const char*> names) {
  fn = lib.require_fn<Fn>(names);
}

void fill_hiprtc(HiprtcApi& a) {
  const auto& l = a.lib;
  need(l, a.hiprtcCreateProgram, {"hiprtcCreateProgram"});
  need(l, a.hiprtcCompileProgram, {"hiprtcCompileProgram"});
  need(l, a.hiprtcGetCodeSize, {"hiprtcGetCodeSize"});
  need(l, a.hiprtcGetCode, {"hiprtcGetCode"});
  need(l, a.hiprtcGetProgramLogSize, {"hiprtcGetProgramLogSize"});
  need(l, a.hiprtcGetProgramLog, {"hiprtcGetProgramLog"});
  need(l, a.hiprtcDestroyProgram, {"hiprtcDestroyProgram"});
  need(l, a.hiprtcGetErrorString, {"hiprtcGetErrorString"});
}

bool valid_arch(const std::string& arch) {
  // gfx<digits/hex>[:feature(+|-)]...; e.g. gfx90a, gfx942:sramecc+:xnack-, gfx1100.
  if (arch.size() < 6 || arch.size() > 64 || arch.compare(0, 3, "gfx") != 0) return false;
  std::size_t i = 3;
  while (i < arch.size() && std::isxdigit(static_cast<unsigned char>(arch[i]))) ++i;
  if (i < 6) return false;
  while (i < arch.size()) {
    if (arch[i] != ':') return false;
    const std::size_t start = ++i;
    while (i < arch.size() && std::isalnum(static_cast<unsigned char>(arch[i]))) ++i;
    if (i == start || i >= arch.size() || (arch[i] != '+' && arch[i] != '-')) return false;
    ++i;
  }
  return true;
}

}  // namespace

LibrarySpec hip_library_spec() {
  LibrarySpec s;
  s.what = "the HIP runtime (libamdhip64)";
  s.names = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"};
  s.dirs = rocm_library_dirs();
  s.root_env = {"ROCM_PATH", "HIP_PATH"};
  s.override_env = "FINGRAV_HIP_LIBRARY";
  s.install_hint = kHipHint;
  return s;
}

LibrarySpec hiprtc_library_spec() {
  LibrarySpec s;
  s.what = "hiprtc (libhiprtc)";
  s.names = {"libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5"};
  s.dirs = rocm_library_dirs();
  s.root_env = {"ROCM_PATH", "HIP_PATH"};
  s.override_env = "FINGRAV_HIPRTC_LIBRARY";
  s.install_hint =
      "Install hiprtc: ROCm 6+ ships libhiprtc.so (package hip-runtime-amd); on ROCm 5 it is part of "
      "libamdhip64 (Debian/Ubuntu: libamdhip64-5 with libhiprtc-builtins5, libamd-comgr2 and "
      "rocm-device-libs).";
  return s;
}

std::shared_ptr<const HipApi> load_hip() {
  auto a = std::make_shared<HipApi>();
  a->lib = DynamicLibrary::open(hip_library_spec());
  pin(a->lib);
  const auto& l = a->lib;
  need(l, a->hipInit, {"hipInit"});
  need(l, a->hipGetDeviceCount, {"hipGetDeviceCount"});
  need(l, a->hipSetDevice, {"hipSetDevice"});
  need(l, a->hipDeviceGet, {"hipDeviceGet"});
  need(l, a->hipDeviceGetName, {"hipDeviceGetName"});
  need(l, a->hipDeviceGetAttribute, {"hipDeviceGetAttribute"});
  // hipHostMalloc is deprecated in ROCm 6 in favour of hipHostAlloc (same
  // arguments and flag values); either will do.
  need(l, a->hipHostMalloc, {"hipHostMalloc", "hipHostAlloc"});
  need(l, a->hipHostFree, {"hipHostFree", "hipFreeHost"});
  need(l, a->hipHostGetDevicePointer, {"hipHostGetDevicePointer"});
  need(l, a->hipModuleLoadData, {"hipModuleLoadData"});
  need(l, a->hipModuleUnload, {"hipModuleUnload"});
  need(l, a->hipModuleGetFunction, {"hipModuleGetFunction"});
  need(l, a->hipModuleLaunchKernel, {"hipModuleLaunchKernel"});
  need(l, a->hipStreamCreateWithFlags, {"hipStreamCreateWithFlags"});
  need(l, a->hipStreamSynchronize, {"hipStreamSynchronize"});
  need(l, a->hipStreamDestroy, {"hipStreamDestroy"});
  need(l, a->hipEventCreate, {"hipEventCreate"});
  need(l, a->hipEventRecord, {"hipEventRecord"});
  need(l, a->hipEventSynchronize, {"hipEventSynchronize"});
  need(l, a->hipEventElapsedTime, {"hipEventElapsedTime"});
  need(l, a->hipEventDestroy, {"hipEventDestroy"});
  need(l, a->hipGetErrorString, {"hipGetErrorString"});
  a->hipGetErrorName = l.find_fn<const char* (*)(hipError)>({"hipGetErrorName"});
  need(l, a->hipRuntimeGetVersion, {"hipRuntimeGetVersion"});
  need(l, a->hipDeviceSynchronize, {"hipDeviceSynchronize"});
  return a;
}

std::shared_ptr<const HiprtcApi> load_hiprtc() {
  auto a = std::make_shared<HiprtcApi>();
  const LibrarySpec rtc = hiprtc_library_spec();
  std::vector<std::string> tried;
  try {
    a->lib = DynamicLibrary::open(rtc);
  } catch (const LibraryNotFound& e) {
    // An explicit FINGRAV_HIPRTC_LIBRARY is the user's choice: no fallback.
    const char* forced = std::getenv(rtc.override_env.c_str());
    if (forced && *forced) throw;
    tried = e.tried();
  }
  if (!a->lib.is_open()) {
    // ROCm 5 builds hiprtc into libamdhip64.
    try {
      DynamicLibrary hip = DynamicLibrary::open(hip_library_spec());
      if (hip.find({"hiprtcCreateProgram"}) == nullptr) {
        tried.push_back(hip.path() + ": loaded, but it does not export hiprtcCreateProgram (ROCm 6+ "
                        "keeps hiprtc in libhiprtc.so)");
      } else {
        a->lib = std::move(hip);
      }
    } catch (const LibraryNotFound& e) {
      tried.insert(tried.end(), e.tried().begin(), e.tried().end());
    }
    if (!a->lib.is_open())
      throw LibraryNotFound("hiprtc (libhiprtc, or inside libamdhip64 on ROCm 5)", std::move(tried),
                            rtc.install_hint + " Set FINGRAV_HIPRTC_LIBRARY to the library's full path to "
                            "use another copy.");
  }
  pin(a->lib);
  fill_hiprtc(*a);
  return a;
}

HipRuntimeInfo hip_runtime_info() {
  auto api = load_hip();
  HipRuntimeInfo info;
  info.library_path = api->lib.path();
  if (api->hipRuntimeGetVersion(&info.runtime_version) != kHipSuccess) info.runtime_version = 0;
  hipError e = api->hipInit(0);
  if (e != kHipSuccess) {
    info.init_error = "hipInit failed: " + api->describe(e);
    return info;
  }
  int n = 0;
  e = api->hipGetDeviceCount(&n);
  if (e != kHipSuccess) {
    info.init_error = "hipGetDeviceCount failed: " + api->describe(e);
    return info;
  }
  info.device_count = n;
  for (int i = 0; i < n; ++i) {
    HipDeviceInfo d;
    d.index = i;
    int dev = 0;
    char name[256] = {};
    if (api->hipDeviceGet(&dev, i) == kHipSuccess &&
        api->hipDeviceGetName(name, static_cast<int>(sizeof name) - 1, dev) == kHipSuccess)
      d.name = name;
    int khz = 0;
    if (api->hipDeviceGetAttribute(&khz, kHipDeviceAttributeWallClockRate, i) == kHipSuccess && khz > 0)
      d.wall_clock_rate_khz = khz;
    info.devices.push_back(std::move(d));
  }
  return info;
}

const char* const kProbeKernelName = "fingrav_probe";

const std::string& probe_source() {
  // One thread writes one slot. __threadfence_system() makes the store visible
  // to the host (fine-grained, host-coherent memory) before the kernel's end,
  // so a host spinning on the slot sees it as early as possible.
  static const std::string src =
      "extern \"C\" __global__ void fingrav_probe(unsigned long long* slots, unsigned int slot) {\n"
      "  slots[slot] = wall_clock64();\n"
      "  __threadfence_system();\n"
      "}\n";
  return src;
}

std::vector<char> compile_probe(const std::string& arch) {
  if (!valid_arch(arch))
    throw std::invalid_argument("arch='" + arch + "': not a gfx target such as gfx90a, gfx942 or "
                                "gfx942:sramecc+:xnack-");
  auto rtc = load_hiprtc();
  void* prog = nullptr;
  rtc->check(rtc->hiprtcCreateProgram(&prog, probe_source().c_str(), "fingrav_probe.hip", 0, nullptr,
                                      nullptr),
             "hiprtcCreateProgram");
  struct Destroy {
    const HiprtcApi& api;
    void*& p;
    ~Destroy() { api.hiprtcDestroyProgram(&p); }
  } guard{*rtc, prog};
  const std::string offload = "--offload-arch=" + arch;
  const char* opts[] = {offload.c_str(), "-O3"};
  const hiprtcResult r = rtc->hiprtcCompileProgram(prog, 2, opts);
  if (r != 0) {
    std::size_t n = 0;
    std::string log;
    if (rtc->hiprtcGetProgramLogSize(prog, &n) == 0 && n > 0) {
      log.resize(n);
      if (rtc->hiprtcGetProgramLog(prog, &log[0]) != 0) log.clear();
      while (!log.empty() && log.back() == '\0') log.pop_back();
    }
    const char* s = rtc->hiprtcGetErrorString(r);
    throw std::runtime_error("hiprtc could not compile the marker probe for " + arch + " (" +
                             rtc->lib.path() + "): " + (s ? s : "error") + "\n" + log);
  }
  std::size_t size = 0;
  rtc->check(rtc->hiprtcGetCodeSize(prog, &size), "hiprtcGetCodeSize");
  if (size == 0) throw std::runtime_error("hiprtc produced an empty code object for " + arch);
  std::vector<char> code(size);
  rtc->check(rtc->hiprtcGetCode(prog, code.data()), "hiprtcGetCode");
  return code;
}

std::shared_ptr<const HipApi> open_hip_device(int device) {
  if (device < 0) throw std::invalid_argument("device=" + std::to_string(device) + ": must be >= 0");
  auto api = load_hip();
  hipError e = api->hipInit(0);
  if (e != kHipSuccess)
    throw DeviceUnavailable("HIP (" + api->lib.path() + ") found no usable AMD GPU: hipInit failed: " +
                            api->describe(e) + ". Check that the amdgpu driver is loaded, /dev/kfd and "
                            "/dev/dri/renderD* exist and your user is in the 'render' group.");
  int n = 0;
  e = api->hipGetDeviceCount(&n);
  if (e != kHipSuccess || n == 0)
    throw DeviceUnavailable("HIP (" + api->lib.path() + ") found no AMD GPU: " +
                            (e != kHipSuccess ? api->describe(e) : std::string("0 devices")));
  if (device >= n)
    throw DeviceUnavailable("device=" + std::to_string(device) + ": HIP sees " + std::to_string(n) +
                            " device(s) (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES narrow them)");
  api->check(api->hipSetDevice(device), "hipSetDevice");
  return api;
}

// ---------------------------------------------------------------- markers
HipMarkerProbe::HipMarkerProbe(int device, std::size_t slots, const std::string& arch)
    : device_(device), arch_(arch), n_(slots) {
  if (slots == 0 || slots > (std::size_t{1} << 24))
    throw std::invalid_argument("slots=" + std::to_string(slots) + ": must be in [1, 2^24]");
  // Compile first: a bad arch or a missing hiprtc is reported without touching the device.
  const std::vector<char> code = compile_probe(arch);
  api_ = open_hip_device(device);
  const HipApi& a = *api_;
  try {
    void* host = nullptr;
    a.check(a.hipHostMalloc(&host, n_ * sizeof(std::uint64_t), kHipHostMallocMapped | kHipHostMallocCoherent),
            "hipHostMalloc");
    host_ = static_cast<std::uint64_t*>(host);
    reset();
    a.check(a.hipHostGetDevicePointer(&device_ptr_, host_, 0), "hipHostGetDevicePointer");
    a.check(a.hipModuleLoadData(&module_, code.data()), "hipModuleLoadData (the marker probe)");
    a.check(a.hipModuleGetFunction(&function_, module_, kProbeKernelName), "hipModuleGetFunction");
  } catch (...) {
    if (module_) a.hipModuleUnload(module_);
    if (host_) a.hipHostFree(host_);
    throw;
  }
  int khz = 0;
  if (a.hipDeviceGetAttribute(&khz, kHipDeviceAttributeWallClockRate, device_) == kHipSuccess && khz > 0)
    rate_khz_ = khz;
}

HipMarkerProbe::~HipMarkerProbe() {
  // Probes still queued write into host_: wait for the device before freeing.
  api_->hipSetDevice(device_);
  api_->hipDeviceSynchronize();
  if (module_) api_->hipModuleUnload(module_);
  if (host_) api_->hipHostFree(host_);
}

void HipMarkerProbe::stamp(std::uintptr_t stream, std::size_t slot) {
  if (slot >= n_)
    throw std::out_of_range("slot=" + std::to_string(slot) + ": the probe has " + std::to_string(n_) + " slots");
  // The current device is per thread in HIP: set it so stream 0 means ours.
  api_->check(api_->hipSetDevice(device_), "hipSetDevice");
  void* ptr = device_ptr_;
  unsigned int index = static_cast<unsigned int>(slot);
  void* args[] = {&ptr, &index};
  api_->check(api_->hipModuleLaunchKernel(function_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<void*>(stream),
                                          args, nullptr),
              "hipModuleLaunchKernel (marker probe)");
}

std::uint64_t HipMarkerProbe::slot(std::size_t i) const {
  if (i >= n_) throw std::out_of_range("slot=" + std::to_string(i) + ": the probe has " + std::to_string(n_) + " slots");
  return __atomic_load_n(host_ + i, __ATOMIC_ACQUIRE);
}

void HipMarkerProbe::reset() noexcept {
  for (std::size_t i = 0; i < n_; ++i) __atomic_store_n(host_ + i, std::uint64_t{0}, __ATOMIC_RELEASE);
}

// ---------------------------------------------------------------- events
HipEventTimer::HipEventTimer(int device, std::size_t events) : device_(device) {
  if (events < 2 || events > (std::size_t{1} << 20))
    throw std::invalid_argument("events=" + std::to_string(events) + ": must be in [2, 2^20]");
  api_ = open_hip_device(device);
  events_.reserve(events);
  try {
    for (std::size_t i = 0; i < events; ++i) {
      void* ev = nullptr;
      api_->check(api_->hipEventCreate(&ev), "hipEventCreate");
      events_.push_back(ev);
    }
  } catch (...) {
    for (void* ev : events_) api_->hipEventDestroy(ev);
    throw;
  }
}

HipEventTimer::~HipEventTimer() {
  for (void* ev : events_) api_->hipEventDestroy(ev);
}

void HipEventTimer::record(std::uintptr_t stream, std::size_t index) {
  if (index >= events_.size())
    throw std::out_of_range("index=" + std::to_string(index) + ": the timer has " + std::to_string(events_.size()) + " events");
  api_->check(api_->hipSetDevice(device_), "hipSetDevice");
  api_->check(api_->hipEventRecord(events_[index], reinterpret_cast<void*>(stream)), "hipEventRecord");
}

void HipEventTimer::synchronize(std::size_t index) {
  if (index >= events_.size())
    throw std::out_of_range("index=" + std::to_string(index) + ": the timer has " + std::to_string(events_.size()) + " events");
  api_->check(api_->hipEventSynchronize(events_[index]), "hipEventSynchronize");
}

float HipEventTimer::elapsed_ms(std::size_t from, std::size_t to) {
  if (from >= events_.size() || to >= events_.size())
    throw std::out_of_range("from/to: the timer has " + std::to_string(events_.size()) + " events");
  float ms = 0;
  api_->check(api_->hipEventElapsedTime(&ms, events_[from], events_[to]), "hipEventElapsedTime");
  return ms;
}

// ---------------------------------------------------------------- timestamps
HipTimestampSource::HipTimestampSource(int device, const std::string& arch, std::int64_t timeout_ns)
    : probe_(device, 1, arch), timeout_ns_(timeout_ns) {
  if (timeout_ns <= 0) throw std::invalid_argument("timeout_ns=" + std::to_string(timeout_ns) + ": must be > 0");
  const HipApi& a = probe_.api();
  // Non-blocking: the probe must not wait behind the null stream's work (the
  // workload under test), or a read would measure the workload.
  a.check(a.hipStreamCreateWithFlags(&stream_, kHipStreamNonBlocking), "hipStreamCreateWithFlags");
  info_.name = "hip-probe device " + std::to_string(device);
  info_.clock_domain = "amd-gpu-wallclock";
  const int khz = probe_.wall_clock_rate_khz();
  info_.nominal_tick_ns = khz > 0 ? 1e6 / khz : 10.0;
}

HipTimestampSource::~HipTimestampSource() {
  const HipApi& a = probe_.api();
  a.hipStreamSynchronize(stream_);
  a.hipStreamDestroy(stream_);
}

std::int64_t HipTimestampSource::read_device_ticks() {
  probe_.reset();
  probe_.stamp(reinterpret_cast<std::uintptr_t>(stream_), 0);
  // Spin on the mapped slot rather than hipStreamSynchronize: the slot turns
  // non-zero as soon as the store lands, before the runtime notices the
  // kernel ended, which keeps the bracket's far side tight.
  const std::int64_t deadline = host_now_ns() + timeout_ns_;
  std::uint64_t v = 0;
  while ((v = probe_.slot(0)) == 0) {
    if (host_now_ns() > deadline)
      throw std::runtime_error("the HIP marker probe did not write the wall clock within " +
                               std::to_string(timeout_ns_) + " ns on device " + std::to_string(probe_.device()));
    cpu_relax();
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace fingrav::amd
