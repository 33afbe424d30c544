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

#include "fingrav/alloc_error.hpp"

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
    // Cache-line aligned storage (operator new[] only guarantees 16 bytes):
    // otherwise a 64-byte Sample straddles two lines, as sample.hpp promises
    // it never does, and a producer writing one slot shares a line with the
    // consumer reading its neighbour. One spare line on each side keeps the
    // slots off lines shared with whatever the allocator puts next to them.
    if (capacity > (SIZE_MAX - 3 * kCacheLine) / sizeof(T)) {
      throw std::invalid_argument("capacity=" + std::to_string(capacity) + ": too many slots of " +
                                  std::to_string(sizeof(T)) + " bytes to address");
    }
    const std::size_t lines = (capacity * sizeof(T) + kCacheLine - 1) / kCacheLine + 2;
    try {
      storage_.reset(new Line[lines]);
    } catch (const std::bad_alloc&) {
      throw AllocationError("capacity=" + std::to_string(capacity) + ": cannot allocate " +
                            format_bytes(bytes_of(lines, kCacheLine)) + " for the ring (" +
                            std::to_string(sizeof(T)) + " bytes per slot); pass a smaller capacity");
    }
    slots_ = reinterpret_cast<Slot*>(storage_[1].bytes);
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
  // count. At most two contiguous copies (the ring may wrap once).
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
    if (n <= kInlineCopyMax) {
      // A consumer that keeps up gets a few items per call, where calling the
      // library memcpy for a variable length costs more than the copy (with
      // 8-byte items it cut bench/ring_bench's batch throughput by ~40%).
      for (std::size_t i = 0; i < n; ++i) std::memcpy(out + i, &slots_[(first + i) & mask_], sizeof(T));
    } else {
      std::memcpy(out, &slots_[first], run1 * sizeof(T));
      if (run1 < n) std::memcpy(out + run1, &slots_[0], (n - run1) * sizeof(T));
    }
    head_.store(head + n, std::memory_order_release);
    return n;
  }

  // Consumer only: pops one item. Returns false when empty. Same protocol as
  // pop_into for one item, without its batch arithmetic and variable-length
  // copy, which dominate a one-at-a-time pop.
  [[nodiscard]] bool try_pop(T& out) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head == tail_cache_) return false;
    }
    std::memcpy(&out, &slots_[head & mask_], sizeof(T));
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

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
  static_assert(kCacheLine % alignof(T) == 0, "slots start on a cache line, so T's alignment must divide it");
  // Storage unit: new Line[] is cache-line aligned (C++17 aligned new).
  struct alignas(kCacheLine) Line {
    unsigned char bytes[kCacheLine];
  };

  // Batches up to this many items are copied item by item (fixed-size,
  // inlined copies) rather than with one variable-length memcpy call.
  static constexpr std::size_t kInlineCopyMax = 8;

  const std::size_t capacity_;
  const std::uint64_t mask_;
  std::unique_ptr<Line[]> storage_;
  Slot* slots_ = nullptr;  // first slot, at the start of storage_[1]

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
