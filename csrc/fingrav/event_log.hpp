// Launch markers: the begin and end of every execution (and run) as the
// application saw them, with a host timestamp always and a device timestamp
// when the backend has a GPU-side marker.
//
// Append-only, preallocated, one writer (the application thread that launches
// kernels): mark() is a few stores and one release, no lock, no allocation.
// Readers on any thread see a consistent prefix [0, size()). A full log
// refuses the marker and counts it; it never grows on the hot path.
//
// A published marker never changes: share() hands out the buffer itself
// (the Python binding's markers() views it without a copy), and clear()
// reuses the buffer only when nobody holds it; otherwise it starts a new
// one, leaving the shared buffer as it was.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace fingrav {

enum class MarkerKind : std::uint8_t {
  kExecBegin = 0,
  kExecEnd = 1,
  kRunBegin = 2,
  kRunEnd = 3,
};

enum MarkerFlag : std::uint8_t {
  kMarkerHasDeviceTs = 1u << 0,  // device_ts holds a value in the backend's device clock
};

struct Marker {
  std::int64_t host_ns;    // CLOCK_MONOTONIC_RAW when the marker was taken
  std::int64_t device_ts;  // device clock ticks; meaningful only with kMarkerHasDeviceTs
  std::int32_t run;
  std::int32_t execution;  // -1 for run markers
  std::int32_t kernel_id;
  std::uint8_t kind;       // MarkerKind
  std::uint8_t flags;      // MarkerFlag bits
  std::uint16_t reserved;
};
static_assert(std::is_trivially_copyable_v<Marker>);
static_assert(std::is_standard_layout_v<Marker>);
static_assert(sizeof(Marker) == 32, "Marker layout is mirrored by a numpy dtype");

// 2^26 markers of 32 bytes: 2 GiB, touched up front (33 million executions'
// begin and end markers). A larger request is a mistake, refused by name.
inline constexpr std::size_t kMaxMarkers = std::size_t{1} << 26;

class EventLog {
 public:
  // capacity in [1, kMaxMarkers] markers, allocated up front. Throws
  // std::invalid_argument, or AllocationError (a std::bad_alloc naming
  // capacity) when the memory cannot be had.
  explicit EventLog(std::size_t capacity);
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Writer thread only. Returns false (and counts a drop) when full.
  [[nodiscard]] bool mark(MarkerKind kind, std::int32_t run, std::int32_t execution, std::int32_t kernel_id,
                          std::int64_t host_ns, std::int64_t device_ts, bool has_device_ts) noexcept {
    const std::size_t i = size_.load(std::memory_order_relaxed);
    if (i == capacity_) {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return false;
    }
    Marker& m = data_[i];
    m.host_ns = host_ns;
    m.device_ts = has_device_ts ? device_ts : 0;
    m.run = run;
    m.execution = execution;
    m.kernel_id = kernel_id;
    m.kind = static_cast<std::uint8_t>(kind);
    m.flags = has_device_ts ? kMarkerHasDeviceTs : 0;
    m.reserved = 0;
    // Publishes the marker: a reader that sees size > i sees it complete.
    size_.store(i + 1, std::memory_order_release);
    return true;
  }

  // Writer thread only: marks with the host clock read now.
  [[nodiscard]] bool mark_now(MarkerKind kind, std::int32_t run, std::int32_t execution,
                              std::int32_t kernel_id) noexcept;

  // Any thread: the number of published markers; [data(), data() + size())
  // is immutable from then on. data() is valid until the next clear().
  std::size_t size() const noexcept { return size_.load(std::memory_order_acquire); }
  const Marker* data() const noexcept { return data_.get(); }
  // The buffer itself, kept alive by the pointer: its first size() markers
  // (as size() was before this call) never change, whatever the log does
  // next. Not concurrently with clear(), which may replace the buffer.
  std::shared_ptr<const Marker[]> share() const noexcept { return data_; }
  std::size_t capacity() const noexcept { return capacity_; }
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  // Writer thread only: forget all markers. The buffer is reused unless
  // share() handed it out and it is still held: then a new one (allocated
  // and touched here, so it may throw AllocationError, leaving the log as it
  // was) takes its place and the holders keep what they saw.
  void clear();

 private:
  static std::shared_ptr<Marker[]> allocate(std::size_t capacity);

  const std::size_t capacity_;
  std::shared_ptr<Marker[]> data_;
  std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace fingrav
