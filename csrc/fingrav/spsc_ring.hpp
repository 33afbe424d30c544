// Single-producer single-consumer lock-free ring, after rigtorp/SPSCQueue.
//
// The sampler thread is the only producer and must never block or spin on a
// slow consumer: try_push fails when the ring is full and the caller counts the
// drop. The consumer drains in batches into caller memory.
//
// Memory ordering: each side loads its own index relaxed (only it writes it),
// loads the other side's index with acquire (to see the slots it published or
// freed) and publishes its own with release. Each side caches the other's index
// so the shared cache line is touched only when the cached value says the ring
// looks full (producer) or empty (consumer).
//
// Indices are free-running 64-bit counters (slot = index & mask): no slack slot
// is needed, the full capacity is usable, and 2^64 pushes never wrap in
// practice (584 years at 1 GHz).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace fingrav {

inline constexpr std::size_t kCacheLine = 64;

template <typename T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "slots are copied with memcpy across threads");

 public:
  // capacity must be a power of two >= 1 (mask indexing; no modulo on the hot path).
  explicit SpscRing(std::size_t capacity)
      : capacity_(capacity), mask_(capacity - 1) {
    if (capacity == 0 || (capacity & (capacity - 1)) != 0) {
      throw std::invalid_argument("capacity=" + std::to_string(capacity) +
                                  ": must be a power of two >= 1");
    }
    if (capacity > (std::size_t{1} << 40)) {
      throw std::invalid_argument("capacity=" + std::to_string(capacity) + ": larger than 2^40 slots");
    }
    // Over-allocate one cache line on each side so the slots never share a
    // line with whatever the allocator puts next to them.
    storage_.reset(new Slot[capacity + 2 * kPadSlots]);
    slots_ = storage_.get() + kPadSlots;
  }

  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // Producer only. Returns false (and changes nothing) when the ring is full.
  [[nodiscard]] bool try_push(const T& value) noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_cache_ == capacity_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (tail - head_cache_ == capacity_) return false;
    }
    std::memcpy(&slots_[tail & mask_], &value, sizeof(T));
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Consumer only. Copies up to max items, oldest first, into out; returns the
  // count. At most two memcpy calls (the ring may wrap once).
  std::size_t pop_into(T* out, std::size_t max) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (tail_cache_ - head < max) {
      // Refresh only when the cached view cannot satisfy the request.
      tail_cache_ = tail_.load(std::memory_order_acquire);
    }
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(tail_cache_ - head, max));
    if (n == 0) return 0;
    const std::size_t first = static_cast<std::size_t>(head & mask_);
    const std::size_t run1 = std::min(n, capacity_ - first);
    std::memcpy(out, &slots_[first], run1 * sizeof(T));
    if (run1 < n) std::memcpy(out + run1, &slots_[0], (n - run1) * sizeof(T));
    head_.store(head + n, std::memory_order_release);
    return n;
  }

  // Consumer only: pops one item. Returns false when empty.
  [[nodiscard]] bool try_pop(T& out) noexcept { return pop_into(&out, 1) == 1; }

  // Approximate fill level. Exact as a lower bound when called from the
  // consumer thread (the producer can only add), exact as an upper bound from
  // the producer thread; from any other thread it is only a hint.
  std::size_t size_approx() const noexcept {
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    const std::uint64_t tail = tail_.load(std::memory_order_acquire);
    return tail >= head ? static_cast<std::size_t>(tail - head) : 0;
  }

  std::size_t capacity() const noexcept { return capacity_; }

 private:
  struct alignas(T) Slot {
    unsigned char bytes[sizeof(T)];
  };
  static_assert(sizeof(Slot) == sizeof(T), "slots must be contiguous Ts for batch memcpy");
  static constexpr std::size_t kPadSlots = (kCacheLine + sizeof(T) - 1) / sizeof(T);

  const std::size_t capacity_;
  const std::uint64_t mask_;
  std::unique_ptr<Slot[]> storage_;
  Slot* slots_ = nullptr;

  // Producer's line: its own index and its cache of the consumer's.
  alignas(kCacheLine) std::atomic<std::uint64_t> tail_{0};
  std::uint64_t head_cache_ = 0;
  // Consumer's line: its own index and its cache of the producer's.
  alignas(kCacheLine) std::atomic<std::uint64_t> head_{0};
  std::uint64_t tail_cache_ = 0;
  // Keep whatever follows this object off the consumer's line.
  char pad_[kCacheLine - sizeof(std::atomic<std::uint64_t>) - sizeof(std::uint64_t)] = {};
};

}  // namespace fingrav
