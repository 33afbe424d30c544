#include "fingrav/event_log.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "fingrav/host_clock.hpp"

namespace fingrav {

EventLog::EventLog(std::size_t capacity) : capacity_(capacity) {
  if (capacity == 0 || capacity > (std::size_t{1} << 34)) {
    throw std::invalid_argument("capacity=" + std::to_string(capacity) + ": must be in [1, 2^34] markers");
  }
  data_.reset(new Marker[capacity]);
  // Touch every page now so the first marks do not take page faults.
  std::memset(static_cast<void*>(data_.get()), 0, capacity * sizeof(Marker));
}

bool EventLog::mark_now(MarkerKind kind, std::int32_t run, std::int32_t execution,
                        std::int32_t kernel_id) noexcept {
  return mark(kind, run, execution, kernel_id, host_now_ns(), 0, false);
}

void EventLog::clear() noexcept {
  size_.store(0, std::memory_order_release);
  dropped_.store(0, std::memory_order_relaxed);
}

}  // namespace fingrav
