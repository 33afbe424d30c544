#include "fingrav/event_log.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "fingrav/alloc_error.hpp"
#include "fingrav/host_clock.hpp"

namespace fingrav {

EventLog::EventLog(std::size_t capacity) : capacity_(capacity) {
  if (capacity == 0 || capacity > kMaxMarkers) {
    throw std::invalid_argument("capacity=" + std::to_string(capacity) + ": must be in [1, 2^26 = " +
                                std::to_string(kMaxMarkers) + "] markers (" + std::to_string(sizeof(Marker)) +
                                " bytes each, allocated up front: " +
                                format_bytes(bytes_of(kMaxMarkers, sizeof(Marker))) + " at the limit)");
  }
  data_ = allocate(capacity);
}

std::shared_ptr<Marker[]> EventLog::allocate(std::size_t capacity) {
  std::shared_ptr<Marker[]> data;
  try {
    data.reset(new Marker[capacity]);
  } catch (const std::bad_alloc&) {
    throw AllocationError("capacity=" + std::to_string(capacity) + ": cannot allocate " +
                          format_bytes(bytes_of(capacity, sizeof(Marker))) + " for the markers (" +
                          std::to_string(sizeof(Marker)) + " bytes each); pass a smaller capacity");
  }
  // Touch every page now so the first marks do not take page faults.
  std::memset(static_cast<void*>(data.get()), 0, capacity * sizeof(Marker));
  return data;
}

bool EventLog::mark_now(MarkerKind kind, std::int32_t run, std::int32_t execution,
                        std::int32_t kernel_id) noexcept {
  return mark(kind, run, execution, kernel_id, host_now_ns(), 0, false);
}

void EventLog::clear() {
  // Someone still holds the buffer (share()): what they read must not change
  // under them, so new markers go to a new buffer. Allocated before anything
  // changes, so a failure leaves the log as it was.
  if (data_.use_count() > 1) data_ = allocate(capacity_);
  size_.store(0, std::memory_order_release);
  dropped_.store(0, std::memory_order_relaxed);
}

}  // namespace fingrav
