// A dependency-free test harness: CHECK / CHECK_EQ / CHECK_THROWS and a tiny
// runner. A failed check prints file:line with the values and ends the process
// at once with exit code 1: fail-fast keeps the report readable when a check
// fires on a fuzz or worker thread, where unwinding is not an option.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace fingrav_test {

template <typename T>
std::string show(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_enum_v<T>) {
    os << static_cast<long long>(v);
  } else if constexpr (std::is_same_v<T, unsigned char> || std::is_same_v<T, signed char> ||
                       std::is_same_v<T, char>) {
    os << static_cast<int>(v);  // a byte as a number, not a character
  } else {
    os << v;
  }
  return os.str();
}

[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: CHECK FAILED: %s\n", file, line, what.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  // _Exit, not exit: other threads may still run; static destructors must not
  // race with them. Sanitizer reports already printed stay printed.
  std::_Exit(1);
}

// Integer equality that is right across signedness (C++20's cmp_equal).
template <typename A, typename B>
bool int_equal(A a, B b) {
  if constexpr (std::is_signed_v<A> == std::is_signed_v<B>) {
    return a == b;
  } else if constexpr (std::is_signed_v<A>) {
    return a >= 0 && static_cast<std::make_unsigned_t<A>>(a) == b;
  } else {
    return b >= 0 && a == static_cast<std::make_unsigned_t<B>>(b);
  }
}

template <typename A, typename B>
void check_eq(const A& a, const B& b, const char* ea, const char* eb, const char* file, int line) {
  bool equal;
  if constexpr (std::is_integral_v<A> && std::is_integral_v<B>) {
    equal = int_equal(a, b);
  } else {
    equal = (a == b);
  }
  if (!equal) fail(file, line, std::string(ea) + " == " + eb + "  (" + show(a) + " vs " + show(b) + ")");
}

// Returns the value of an unsigned integer environment variable, or fallback.
inline std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || *end != '\0') {
    std::fprintf(stderr, "%s=%s: not an unsigned integer\n", name, s);
    std::_Exit(2);
  }
  return static_cast<std::uint64_t>(v);
}

// Polls pred every millisecond until it holds or timeout passes.
template <typename Pred>
bool wait_for(Pred pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

struct TestCase {
  const char* name;
  std::function<void()> fn;
};

// Runs every case in order; an exception escaping a case fails the run.
inline int run_tests(const char* suite, const std::vector<TestCase>& cases) {
  for (const auto& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    std::printf("[ RUN  ] %s.%s\n", suite, c.name);
    std::fflush(stdout);
    try {
      c.fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[ FAIL ] %s.%s: unexpected exception: %s\n", suite, c.name, e.what());
      return 1;
    } catch (...) {
      std::fprintf(stderr, "[ FAIL ] %s.%s: unexpected non-standard exception\n", suite, c.name);
      return 1;
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    std::printf("[  OK  ] %s.%s (%lld ms)\n", suite, c.name, static_cast<long long>(ms.count()));
    std::fflush(stdout);
  }
  std::printf("%s: %zu cases passed\n", suite, cases.size());
  return 0;
}

}  // namespace fingrav_test

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) ::fingrav_test::fail(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)

// Like CHECK, with a message built by streaming (CHECK_MSG(x > 0, "x=" << x)).
#define CHECK_MSG(cond, msg)                                                                  \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::ostringstream fingrav_check_os_;                                                   \
      fingrav_check_os_ << "CHECK(" #cond "): " << msg;                                       \
      ::fingrav_test::fail(__FILE__, __LINE__, fingrav_check_os_.str());                      \
    }                                                                                         \
  } while (0)

#define CHECK_EQ(a, b) ::fingrav_test::check_eq((a), (b), #a, #b, __FILE__, __LINE__)

// expr must throw exactly `type` (or a subclass) whose what() contains `needle`.
#define CHECK_THROWS(expr, type, needle)                                                           \
  do {                                                                                             \
    bool fingrav_thrown_ = false;                                                                  \
    try {                                                                                          \
      (void)(expr);                                                                                \
    } catch (const type& e) {                                                                      \
      fingrav_thrown_ = true;                                                                      \
      if (std::strstr(e.what(), (needle)) == nullptr) {                                            \
        ::fingrav_test::fail(__FILE__, __LINE__,                                                   \
                             std::string(#expr " threw " #type " without \"") + (needle) +       \
                                 "\" in its message: " + e.what());                               \
      }                                                                                            \
    } catch (const std::exception& e) {                                                            \
      ::fingrav_test::fail(__FILE__, __LINE__,                                                     \
                           std::string(#expr " threw the wrong type (expected " #type "): ") +   \
                               e.what());                                                          \
    }                                                                                              \
    if (!fingrav_thrown_) ::fingrav_test::fail(__FILE__, __LINE__, #expr " did not throw " #type); \
  } while (0)
