// The baseline of bench/cupti_overhead.cpp: a CUPTI client that hands CUPTI
// the same 1 MiB buffers as the consumer, walks every record and discards it.
// Loaded as CUDA_INJECTION64_PATH; libcupti from FINGRAV_CUPTI_LIBRARY.
#include <cupti.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>

namespace {
decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
volatile std::uint64_t sink = 0;

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, std::size_t{1} << 20));
  *size = *buffer != nullptr ? std::size_t{1} << 20 : 0;
  *max_records = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    sink = sink + reinterpret_cast<const CUpti_ActivityKernel9*>(r)->start;
  }
  std::free(buffer);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* path = std::getenv("FINGRAV_CUPTI_LIBRARY");
  void* h = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (h == nullptr) return 0;
  next_record = reinterpret_cast<decltype(next_record)>(dlsym(h, "cuptiActivityGetNextRecord"));
  auto reg = reinterpret_cast<decltype(&cuptiActivityRegisterCallbacks)>(dlsym(h, "cuptiActivityRegisterCallbacks"));
  auto enable = reinterpret_cast<decltype(&cuptiActivityEnable)>(dlsym(h, "cuptiActivityEnable"));
  if (next_record == nullptr || reg == nullptr || enable == nullptr) return 0;
  reg(&requested, &completed);
  enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  return 1;
}
