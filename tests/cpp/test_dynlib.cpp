// DynamicLibrary: search order, the override variable, versioned symbol
// names, and the errors that name what was tried.
#include <cstdlib>
#include <string>

#include "check.hpp"
#include "fingrav/dynlib.hpp"

using namespace fingrav;

#ifndef FAKE_VENDOR_PATH
#error "FAKE_VENDOR_PATH must name the built fake vendor library"
#endif

namespace {

std::string dir_of(const std::string& p) { return p.substr(0, p.rfind('/')); }
std::string base_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }

LibrarySpec spec_for(std::vector<std::string> names, std::vector<std::string> dirs) {
  LibrarySpec s;
  s.what = "the fake vendor library";
  s.names = std::move(names);
  s.dirs = std::move(dirs);
  s.override_env = "FINGRAV_FAKE_VENDOR_LIBRARY";
  s.install_hint = "Install fake-vendor.";
  return s;
}

const std::string path = FAKE_VENDOR_PATH;

}  // namespace

int main() {
  unsetenv("FINGRAV_FAKE_VENDOR_LIBRARY");
  return fingrav_test::run_tests("dynlib", {
  {"found in an install folder after the loader's search fails", [] {
    auto lib = DynamicLibrary::open(spec_for({"libfingrav-absent.so", base_of(path)},
                                             {"/nonexistent", dir_of(path)}));
    CHECK(lib.is_open());
    CHECK(lib.path().find(base_of(path)) != std::string::npos);
    // The newest versioned name wins when both exist.
    auto fn = lib.require_fn<int (*)()>({"fake_vendor_answer_v2", "fake_vendor_answer"});
    CHECK_EQ(fn(), 2);
    auto old = lib.require_fn<int (*)()>({"fake_vendor_answer_v3", "fake_vendor_answer"});
    CHECK_EQ(old(), 1);
    CHECK(lib.find({"fake_vendor_missing"}) == nullptr);
  }},

  {"a missing symbol names the library and every name", [] {
    auto lib = DynamicLibrary::open(spec_for({base_of(path)}, {dir_of(path)}));
    try {
      (void)lib.require({"fake_vendor_gone_v2", "fake_vendor_gone"});
      CHECK(false);
    } catch (const SymbolNotFound& e) {
      const std::string w = e.what();
      CHECK(w.find("fake_vendor_gone_v2") != std::string::npos);
      CHECK(w.find("fake_vendor_gone") != std::string::npos);
      CHECK(w.find("the fake vendor library") != std::string::npos);
    }
  }},

  {"absent everywhere: every attempt and the hint are in the error", [] {
    try {
      (void)DynamicLibrary::open(spec_for({"libfingrav-absent.so", "libfingrav-absent.so.1"},
                                          {"/nonexistent-a", "/nonexistent-b"}));
      CHECK(false);
    } catch (const LibraryNotFound& e) {
      CHECK_EQ(e.tried().size(), std::size_t{6});  // 2 names x (loader + 2 folders)
      // Each attempt names its candidate once, then the loader's reason.
      const std::string& first = e.tried()[0];
      CHECK(first.rfind("libfingrav-absent.so: ", 0) == 0);
      CHECK(first.find("libfingrav-absent.so", 1) == std::string::npos);
      const std::string w = e.what();
      CHECK(w.find("/nonexistent-b/libfingrav-absent.so.1") != std::string::npos);
      CHECK(w.find("Install fake-vendor.") != std::string::npos);
      CHECK(w.find("FINGRAV_FAKE_VENDOR_LIBRARY") != std::string::npos);
    }
  }},

  {"the override path is used alone, without fallback", [] {
    setenv("FINGRAV_FAKE_VENDOR_LIBRARY", path.c_str(), 1);
    auto lib = DynamicLibrary::open(spec_for({"libfingrav-absent.so"}, {}));
    CHECK(lib.is_open());
    setenv("FINGRAV_FAKE_VENDOR_LIBRARY", "/nonexistent/libfake.so", 1);
    try {
      (void)DynamicLibrary::open(spec_for({base_of(path)}, {dir_of(path)}));
      CHECK(false);
    } catch (const LibraryNotFound& e) {
      CHECK_EQ(e.tried().size(), std::size_t{1});
    }
    unsetenv("FINGRAV_FAKE_VENDOR_LIBRARY");
  }},

  {"root variables put their lib folder first", [] {
    setenv("FINGRAV_FAKE_ROOT", (dir_of(path) + "/..").c_str(), 1);
    LibrarySpec s = spec_for({base_of(path)}, {});
    s.root_env = {"FINGRAV_FAKE_ROOT"};
    // The library is not under <root>/lib, so that attempt fails and is listed,
    // then the loader's search by bare name fails too (not on its path).
    try {
      (void)DynamicLibrary::open(s);
      CHECK(false);
    } catch (const LibraryNotFound& e) {
      CHECK_EQ(e.tried().size(), std::size_t{3});
      CHECK(e.tried()[0].find("/../lib/") != std::string::npos);
    }
    unsetenv("FINGRAV_FAKE_ROOT");
  }},

  {"moving keeps one owner", [] {
    auto a = DynamicLibrary::open(spec_for({base_of(path)}, {dir_of(path)}));
    DynamicLibrary b = std::move(a);
    CHECK(!a.is_open());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    CHECK(b.is_open());
    CHECK(b.find({"fake_vendor_answer"}) != nullptr);
  }},
  });
}
