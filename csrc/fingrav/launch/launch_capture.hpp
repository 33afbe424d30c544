// LaunchCapture: the vendor-neutral half of native launch capture. A tool
// library (rocprofiler-sdk, CUPTI) pushes LaunchRecords from the vendor's
// callback thread; a writer thread drains them into a journal file every
// flush period, with the kernel names (once per symbol), the vendor's and
// our own drop counts and bursts of clock brackets of the record clock
// against CLOCK_MONOTONIC_RAW (the power sampler's clock), so the records can
// be placed beside the power logs.
//
// File format (read by fingrav_native.files.read_launches): the framing of
// python/fingrav_native/files/_journal.py (8 magic bytes, then records of
// <4s tag, u64 length, u32 CRC-32> + payload), with the records
//   HEAD  JSON {"format": "fingrav-launches", "version": 1, "vendor", "record_clock", "pid",
//         "tool", "tool_version", "runtime_version" (when known), "capacity"}   first
//   SYMB  JSON {"first": k, "names": [...]}   ids k, k+1, ...; before any LNCH that uses them
//   LNCH  .npy (1.0) of LaunchRecord (LAUNCH_DTYPE), one per drain
//   BRBT / BRRT  .npy int64 (n, 3): (raw_before, record clock, raw_after), a burst
//         taken every flush period; a period with nothing to write keeps its
//         burst in memory for the next write (at the latest kMaxHeldBracketRows on)
//   NOTE  JSON {"key", "text"}
//   STAT  JSON {"records", "dropped", "vendor_dropped", "closed"}   after each drain that writes; the last wins
// A drain writes only when something arrived (records, names, notes, drops)
// or at close; a writer whose drain found nothing sleeps kIdlePeriodNs (or the
// flush period, if longer) until a push wakes it, so an idle capture takes a
// burst of brackets a second rather than every flush period. Each drain is one
// writev(2) to a file opened O_APPEND, so a killed process keeps every drain
// that returned; fsync at most once a second and at close.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fingrav/launch/launch_record.hpp"
#include "fingrav/spsc_ring.hpp"

namespace fingrav::launch {

// The first bytes of every journal (python/fingrav_native/_outputs.py's JOURNAL_MAGIC).
inline constexpr char kJournalMagic[8] = {'F', 'G', 'J', 'R', 'N', 'L', '1', '\n'};

// How often an idle writer (its last drain found nothing) wakes to take its
// clock brackets, when the flush period is shorter.
inline constexpr std::int64_t kIdlePeriodNs = 1'000'000'000;

// Bracket rows an idle capture holds in memory before it writes them anyway
// (at the defaults, a burst of 8 each idle second: one write every 128 s).
inline constexpr std::size_t kMaxHeldBracketRows = 1024;

// The largest ring a capture accepts (records): 2^26 x 72 bytes is 4.5 GiB.
inline constexpr std::size_t kMaxCapacity = std::size_t{1} << 26;

// The clock_gettime id of a record clock named as CaptureOptions::record_clock
// ("CLOCK_BOOTTIME", "CLOCK_REALTIME"); -1 for any other name.
int record_clock_id(std::string_view name) noexcept;

// n bracketed reads, back to back, into rows[3i..3i+2]: (CLOCK_MONOTONIC_RAW
// before, clock_id, CLOCK_MONOTONIC_RAW after). What each drain writes as its
// BRBT/BRRT record, and what `fingrav sync` measures the record clocks with.
void read_clock_brackets(int clock_id, std::int64_t* rows, std::size_t n) noexcept;

struct CaptureOptions {
  std::string path;                          // the journal to create (O_EXCL: never written over)
  std::string vendor;                        // "rocm" or "cuda"
  std::string record_clock = "CLOCK_BOOTTIME";  // or "CLOCK_REALTIME"
  std::size_t capacity = std::size_t{1} << 16;  // ring slots, a power of two in [2, kMaxCapacity]
  std::int64_t flush_period_ns = 100'000'000;    // writer drains this often while records arrive; in [1 ms, 10 s]
  std::string tool;                          // the tool library's name
  std::string tool_version;
  std::string runtime_version;               // the vendor runtime's, when known (empty: left out)
  std::size_t brackets_per_flush = 8;        // clock brackets taken at each drain, in [1, 1024]
};

class LaunchCapture;

// Records gathered on the producer's stack and ringed N at a time through
// LaunchCapture::push_batch; what is gathered is ringed at the latest when the
// batch goes out of scope (an exception included), so nothing is lost uncounted.
template <std::size_t N>
class PushBatch {
 public:
  explicit PushBatch(LaunchCapture& capture) noexcept : capture_(capture) {}
  PushBatch(const PushBatch&) = delete;
  PushBatch& operator=(const PushBatch&) = delete;
  ~PushBatch() { flush(); }
  // The next record to fill; ringed on the call after the batch fills.
  LaunchRecord& next() noexcept {
    if (queued_ == N) flush();
    return records_[queued_++];
  }
  inline void flush() noexcept;

 private:
  LaunchCapture& capture_;
  std::size_t queued_ = 0;
  LaunchRecord records_[N];
};

class LaunchCapture {
 public:
  // Creates the file, writes its header and starts the writer thread.
  // Throws std::invalid_argument naming a bad option, std::system_error when
  // the file cannot be created (it exists, the folder is missing).
  static std::unique_ptr<LaunchCapture> open(const CaptureOptions& options);

  // From the environment: FINGRAV_LAUNCH_DIR (a folder; the file is
  // launches.<pid>.journal in it) and FINGRAV_LAUNCH_CAPACITY (optional ring
  // size). FINGRAV_LAUNCH_DIR unset or empty: nullptr (the tool stays
  // passive). Throws as open(), and std::invalid_argument naming
  // FINGRAV_LAUNCH_CAPACITY when it is not a power of two in range.
  static std::unique_ptr<LaunchCapture> open_from_env(std::string_view vendor, std::string_view record_clock,
                                                      std::string_view tool = {}, std::string_view tool_version = {},
                                                      std::string_view runtime_version = {});

  LaunchCapture(const LaunchCapture&) = delete;
  LaunchCapture& operator=(const LaunchCapture&) = delete;
  ~LaunchCapture();

  // The id of name, the same for every call with the same name; thread-safe.
  // A new name is written to the file (SYMB) before any drain that could hold
  // a record using it.
  std::uint32_t intern(std::string_view name);

  // Producer side; any thread (a tiny spin lock serialises producers, since a
  // vendor may deliver from several threads). Never blocks on the writer: a
  // full ring (or a closed capture) counts a drop and returns false.
  bool push(const LaunchRecord& record) noexcept;

  // push() for n records at once, under one acquisition of the producer lock
  // and one fill check (a vendor hands its records over in buffers of
  // thousands). Those that find the ring full are counted as drops; returns
  // how many were ringed.
  std::size_t push_batch(const LaunchRecord* records, std::size_t n) noexcept;

  // A note for the reader, e.g. key "subscriber_conflict"; thread-safe.
  void note(std::string_view key, std::string_view text);

  // Records the vendor runtime itself says it lost (its buffer overflowed).
  void add_vendor_drops(std::uint64_t n) noexcept;

  // Final drain, STAT with closed=true, fsync, close. Idempotent and
  // thread-safe; also run by the destructor.
  void close() noexcept;

  const std::string& path() const noexcept { return options_.path; }
  std::uint64_t records_written() const noexcept { return written_.load(std::memory_order_relaxed); }
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }
  // The first write error (errno text), empty while none; writing stops at it.
  std::string write_error() const;

 private:
  LaunchCapture(const CaptureOptions& options, int fd, int clock_id);
  void writer_loop();
  // Writes what arrived; false when there was nothing to write (the brackets kept for later).
  bool drain(bool final_drain);
  void append(const std::string& bytes, bool sync);
  void append(iovec* parts, int count, bool sync);

  const CaptureOptions options_;
  const int clock_id_;
  int fd_;
  SpscRing<LaunchRecord> ring_;
  std::atomic_flag push_lock_ = ATOMIC_FLAG_INIT;

  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> vendor_dropped_{0};
  std::atomic<std::uint64_t> written_{0};
  std::atomic<bool> closing_{false};
  std::atomic<bool> kicked_{false};  // a producer found the ring half full: drain early
  std::atomic<bool> armed_{false};   // the writer sleeps its idle period: the next push wakes it
  std::atomic<bool> closed_{false};

  // Symbols and notes: taken by the writer at each drain.
  std::mutex table_mutex_;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::vector<std::string> names_;     // by id
  std::size_t names_written_ = 0;      // ids below this are in the file (writer only)
  std::vector<std::pair<std::string, std::string>> pending_notes_;

  // Writer thread control.
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::mutex close_mutex_;
  std::thread writer_;

  // Writer-only state.
  std::vector<LaunchRecord> batch_;
  std::vector<std::int64_t> pending_brackets_;  // rows of 3, taken since the last write
  std::uint64_t stat_dropped_ = 0;              // the counts the last STAT wrote
  std::uint64_t stat_vendor_dropped_ = 0;
  std::int64_t last_sync_ns_ = 0;
  mutable std::mutex error_mutex_;
  std::string write_error_;
};

template <std::size_t N>
void PushBatch<N>::flush() noexcept {
  (void)capture_.push_batch(records_, queued_);  // a refusal is counted by the capture
  queued_ = 0;
}

}  // namespace fingrav::launch
