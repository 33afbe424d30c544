// An allocation sized by a caller's argument that the system refused.
//
// std::bad_alloc says only "std::bad_alloc": nothing about which argument
// asked for how much. AllocationError's what() names the argument, the bytes
// asked for and what to do instead. It still is a std::bad_alloc, so code
// that handles running out of memory keeps working, and pybind11 raises it
// as MemoryError with this message.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <utility>

namespace fingrav {

class AllocationError : public std::bad_alloc {
 public:
  explicit AllocationError(std::string message)
      : message_(std::make_shared<const std::string>(std::move(message))) {}
  const char* what() const noexcept override { return message_->c_str(); }

 private:
  // Shared, so that copying the exception object never allocates.
  std::shared_ptr<const std::string> message_;
};

// A byte count as a person reads it: "512 B", "32.0 MiB", "128.0 GiB";
// UINT64_MAX (bytes_of saturated) is "over 16 EiB".
inline std::string format_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes == UINT64_MAX) return "over 16 EiB";
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

// The bytes of n items of item_size each, saturating instead of wrapping.
inline std::uint64_t bytes_of(std::uint64_t n, std::uint64_t item_size) {
  return item_size != 0 && n > UINT64_MAX / item_size ? UINT64_MAX : n * item_size;
}

}  // namespace fingrav
