// A stand-in vendor library for test_dynlib: it exports a versioned and an
// unversioned name, as NVML and the CUDA driver do.
extern "C" {
__attribute__((visibility("default"))) int fake_vendor_answer_v2() { return 2; }
__attribute__((visibility("default"))) int fake_vendor_answer() { return 1; }
}
