// Running out of memory on purpose: a scoped limit on the address space, so
// an allocation of a few GiB fails whatever the machine's overcommit policy,
// and the code's std::bad_alloc path can be checked.
//
// Sanitizer runtimes do not throw std::bad_alloc from operator new (they
// report and abort) and need huge mappings of their own, so these checks run
// only in plain builds; kSanitized says which build this is.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace fingrav_test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// While alive, the process may map only `headroom` bytes more than it has
// now. Single-threaded use only: other threads' allocations would fail too.
class AddressSpaceLimit {
 public:
  explicit AddressSpaceLimit(std::uint64_t headroom) {
    ok_ = ::getrlimit(RLIMIT_AS, &saved_) == 0;
    unsigned long long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    ok_ = ok_ && pages > 0;
    if (!ok_) return;
    rlimit lim = saved_;
    lim.rlim_cur = static_cast<rlim_t>(pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) + headroom);
    if (saved_.rlim_max != RLIM_INFINITY && lim.rlim_cur > saved_.rlim_max) lim.rlim_cur = saved_.rlim_max;
    ok_ = ::setrlimit(RLIMIT_AS, &lim) == 0;
  }
  ~AddressSpaceLimit() {
    if (ok_) ::setrlimit(RLIMIT_AS, &saved_);
  }
  AddressSpaceLimit(const AddressSpaceLimit&) = delete;
  AddressSpaceLimit& operator=(const AddressSpaceLimit&) = delete;

  // Whether the limit is in force (it could not be read or set otherwise).
  bool ok() const noexcept { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

}  // namespace fingrav_test
