#include "fingrav/dynlib.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <sstream>
#include <utility>

namespace fingrav {
namespace {

std::string join_tried(const std::string& library, const std::vector<std::string>& tried,
                       const std::string& hint) {
  std::ostringstream os;
  os << "could not load " << library << "; tried:";
  for (const auto& t : tried) os << "\n  " << t;
  if (!hint.empty()) os << "\n" << hint;
  return os.str();
}

std::string env(const std::string& name) {
  const char* v = name.empty() ? nullptr : std::getenv(name.c_str());
  return v ? std::string(v) : std::string();
}

}  // namespace

LibraryNotFound::LibraryNotFound(std::string library, std::vector<std::string> tried, std::string hint)
    : std::runtime_error(join_tried(library, tried, hint)),
      library_(std::move(library)),
      tried_(std::move(tried)),
      hint_(std::move(hint)) {}

std::vector<std::string> rocm_library_dirs() {
  // /opt/rocm is a link to the newest /opt/rocm-x.y.z on ROCm installs;
  // Debian and Ubuntu packages put the libraries in the multiarch folder.
  return {"/opt/rocm/lib", "/opt/rocm/lib64", "/opt/rocm/hip/lib", "/usr/lib/x86_64-linux-gnu",
          "/usr/lib64", "/usr/lib"};
}

std::vector<std::string> nvidia_driver_library_dirs() {
  // Distribution packages, the .run installer, containers with the NVIDIA
  // container toolkit (/usr/local/nvidia), and WSL.
  return {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64",
          "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu/nvidia/current", "/usr/lib/wsl/lib"};
}

DynamicLibrary DynamicLibrary::open(const LibrarySpec& spec) {
  std::vector<std::string> candidates;
  const std::string forced = env(spec.override_env);
  if (!forced.empty()) {
    // An explicit path is the user's decision: no fallback that could hide a typo.
    candidates.push_back(forced);
  } else {
    for (const auto& var : spec.root_env) {
      const std::string root = env(var);
      if (root.empty()) continue;
      for (const char* sub : {"/lib/", "/lib64/"})
        for (const auto& n : spec.names) candidates.push_back(root + sub + n);
    }
    for (const auto& n : spec.names) candidates.push_back(n);  // the loader's own search
    for (const auto& d : spec.dirs)
      for (const auto& n : spec.names) candidates.push_back(d + "/" + n);
  }

  std::vector<std::string> tried;
  for (const auto& c : candidates) {
    dlerror();
    // RTLD_LOCAL: vendor symbols must not interpose on anything else in the
    // process (PyTorch may load its own copy of the same library).
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      DynamicLibrary lib;
      lib.handle_ = h;
      lib.what_ = spec.what;
      lib.path_ = c;
      link_map* lm = nullptr;
      if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != nullptr && lm->l_name && lm->l_name[0])
        lib.path_ = lm->l_name;
      return lib;
    }
    const char* why = dlerror();
    std::string reason = why ? why : "unknown dlopen error";
    // dlerror() usually starts with the name it was given: say it once.
    if (reason.rfind(c + ": ", 0) == 0) reason.erase(0, c.size() + 2);
    tried.push_back(c + ": " + reason);
  }
  std::string hint = spec.install_hint;
  if (!spec.override_env.empty())
    hint += (hint.empty() ? "" : " ") + std::string("Set ") + spec.override_env +
            " to the library's full path to use another copy.";
  throw LibraryNotFound(spec.what, std::move(tried), std::move(hint));
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      path_(std::move(other.path_)),
      what_(std::move(other.what_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* DynamicLibrary::find(std::initializer_list<const char*> names) const noexcept {
  if (handle_ == nullptr) return nullptr;
  for (const char* n : names) {
    if (void* p = dlsym(handle_, n)) return p;
  }
  return nullptr;
}

void* DynamicLibrary::require(std::initializer_list<const char*> names) const {
  if (void* p = find(names)) return p;
  std::ostringstream os;
  os << what_ << " at " << path_ << " lacks the symbol";
  const char* sep = " ";
  for (const char* n : names) {
    os << sep << n;
    sep = " / ";
  }
  os << " (the installed version is too old; update it)";
  throw SymbolNotFound(os.str());
}

}  // namespace fingrav
