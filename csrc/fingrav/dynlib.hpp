// Run-time loading of vendor libraries (NVML, the CUDA driver, HIP, hiprtc).
// The package builds with only a C++ compiler: no vendor header or import
// library is needed at build time. Each backend declares the few C prototypes
// it calls and resolves them here, so a machine without the library still
// imports the package and gets an error that says what was tried and what to
// install.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace fingrav {

// A vendor library could not be opened. what() names the library, every
// candidate tried with the loader's reason, and what to install.
class LibraryNotFound : public std::runtime_error {
 public:
  LibraryNotFound(std::string library, std::vector<std::string> tried, std::string hint);
  const std::string& library() const noexcept { return library_; }
  const std::vector<std::string>& tried() const noexcept { return tried_; }
  const std::string& hint() const noexcept { return hint_; }

 private:
  std::string library_;
  std::vector<std::string> tried_;
  std::string hint_;
};

// The library opened but lacks a symbol we need (too old a driver or runtime).
class SymbolNotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The library is there but the device is not (no GPU, no permission, driver
// not loaded). Raised by backends; what() says which device and why.
class DeviceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where and under which names to look for one library.
struct LibrarySpec {
  std::string what;                 // in words, e.g. "NVML (libnvidia-ml)"
  std::vector<std::string> names;   // unversioned first, then versioned
  std::vector<std::string> dirs;    // install folders tried after the loader's own search
  // Environment variables that name folders to search first, e.g. ROCM_PATH
  // (its lib/ and lib64/ are searched) or CUDA_PATH.
  std::vector<std::string> root_env;
  // Environment variable holding an exact path that overrides the search,
  // e.g. FINGRAV_NVML_LIBRARY. Empty: none.
  std::string override_env;
  std::string install_hint;         // what to install, in words
};

// The usual install folders of ROCm and of the NVIDIA driver, for LibrarySpec::dirs.
std::vector<std::string> rocm_library_dirs();
std::vector<std::string> nvidia_driver_library_dirs();

// A dlopen'ed library, closed on destruction. Movable, not copyable.
class DynamicLibrary {
 public:
  // Tries, in order: the override variable's path; every name in each root
  // variable's lib folders; every name through the loader's own search
  // (LD_LIBRARY_PATH, ld.so.cache); every name in each of spec.dirs.
  // Throws LibraryNotFound listing each attempt and why it failed.
  static DynamicLibrary open(const LibrarySpec& spec);

  DynamicLibrary() = default;
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  bool is_open() const noexcept { return handle_ != nullptr; }
  // The path that opened (as dlinfo reports it where it can, else the candidate).
  const std::string& path() const noexcept { return path_; }
  const std::string& what() const noexcept { return what_; }

  // The first of names the library exports (e.g. {"nvmlInit_v2", "nvmlInit"}:
  // newest versioned name first), or nullptr.
  void* find(std::initializer_list<const char*> names) const noexcept;

  // As find(), but throws SymbolNotFound naming the library and each name.
  void* require(std::initializer_list<const char*> names) const;

  template <typename Fn>
  Fn require_fn(std::initializer_list<const char*> names) const {
    return reinterpret_cast<Fn>(require(names));
  }
  template <typename Fn>
  Fn find_fn(std::initializer_list<const char*> names) const noexcept {
    return reinterpret_cast<Fn>(find(names));
  }

 private:
  void* handle_ = nullptr;
  std::string path_;
  std::string what_;
};

}  // namespace fingrav
