// One simulated GPU shared by two processes, as a real GPU is shared by the
// application that launches on it and the tool that reads its power sensor.
//
// The recorder (parent) creates a file holding the device's parameters (the
// seed and every SimParams value, by param_table()'s names), the host time
// its clocks are anchored at, and a ring of power logs. The simulated
// application (the producer, fingrav-sim-app) opens it, runs a real-time
// SimDevice with those parameters and clock epoch, and publishes each log
// into the ring when it becomes visible to the host (logger_publish_ns). The
// parent reads the ring through SharedSimPowerSource (the same SourceInfo as
// SimPowerSource) and the device clock through SharedSimTimestampSource
// (computed from the same ClockModel, with the simulated read latency).
//
// The ring is single-producer and never blocks the producer, as a sensor's
// buffer never waits for a reader: the producer writes slot i % capacity,
// then publishes head = i + 1 (release). A reader copies the newest slots
// and re-reads head; slots the producer may have lapped meanwhile are
// discarded (the seqlock discipline, head acting as the sequence). Every
// word in shared memory is a lock-free std::atomic, so the two processes
// (and TSan) see no data race.
//
// Before an application attaches, and after it detaches, the ring receives
// nothing: the power source then returns no readings, and state() says
// plainly whether an application is attached (kWaiting, kAttached,
// kDetached). No idle power is invented for those spans.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fingrav/power_source.hpp"
#include "fingrav/rng.hpp"
#include "fingrav/sim/clock_model.hpp"
#include "fingrav/sim/device.hpp"
#include "fingrav/timestamp_source.hpp"

namespace fingrav::sim {

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the shared ring needs lock-free 64-bit atomics");
static_assert(std::atomic<std::int64_t>::is_always_lock_free, "the shared ring needs lock-free 64-bit atomics");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "the shared ring needs lock-free 32-bit atomics");

inline constexpr char kSharedMagic[8] = {'F', 'G', 'S', 'I', 'M', 'D', 'E', 'V'};
inline constexpr std::uint32_t kSharedVersion = 1;
inline constexpr std::size_t kSharedMaxParams = 128;
inline constexpr std::size_t kSharedParamNameBytes = 56;
inline constexpr std::uint64_t kSharedDefaultCapacity = 1u << 14;  // 16 s of 1 ms logs
inline constexpr std::uint64_t kSharedMaxCapacity = 1u << 24;
// The environment variable naming the file, set by `fingrav run --device sim`.
inline constexpr const char* kSharedDeviceEnv = "FINGRAV_SIM_DEVICE";

enum class SharedState : std::uint32_t { kWaiting = 0, kAttached = 1, kDetached = 2 };

struct SharedParam {
  char name[kSharedParamNameBytes];
  double value;
};
static_assert(sizeof(SharedParam) == 64);

// The file's first bytes. Plain fields are written once, before any reader
// maps the file; the atomics change while both processes run.
struct SharedHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;
  std::uint64_t capacity;     // ring slots, a power of two
  std::uint32_t slot_bytes;
  std::uint32_t param_count;
  std::int64_t clock_epoch_ns;  // host time (CLOCK_MONOTONIC_RAW) the device and logger clocks are anchored at
  std::uint64_t file_bytes;
  alignas(64) std::atomic<std::uint64_t> head;  // logs published so far
  std::atomic<std::uint32_t> state;             // SharedState
  std::atomic<std::int32_t> producer_pid;
  std::atomic<std::int64_t> attach_ns;
  std::atomic<std::int64_t> detach_ns;
  alignas(64) SharedParam params[kSharedMaxParams];
};

// One LogRecord as seven atomic words (sizeof(LogRecord) == 56), padded to a cache line.
inline constexpr std::size_t kSlotWords = 7;
struct SharedSlot {
  std::atomic<std::uint64_t> w[8];
};
static_assert(sizeof(LogRecord) == kSlotWords * 8, "a log is copied as seven 64-bit words");
static_assert(sizeof(SharedSlot) == 64);

class SharedSimDevice {
 public:
  // Creates the file (never over an existing one: O_EXCL) with the
  // device's parameters and an empty ring of `capacity` logs (a power of
  // two in [16, 2^24]); the clocks are anchored at the creation instant.
  // Throws std::invalid_argument naming the argument, std::runtime_error
  // naming the path and errno's text.
  static std::shared_ptr<SharedSimDevice> create(const std::string& path, const SimParams& params,
                                                 std::uint64_t capacity = kSharedDefaultCapacity);
  // Opens an existing shared device file. Throws std::runtime_error saying
  // why the file is not one (missing, too short, wrong magic or version,
  // unknown parameter).
  static std::shared_ptr<SharedSimDevice> open(const std::string& path);

  SharedSimDevice(const SharedSimDevice&) = delete;
  SharedSimDevice& operator=(const SharedSimDevice&) = delete;
  ~SharedSimDevice();

  const std::string& path() const noexcept { return path_; }
  const SimParams& params() const noexcept { return params_; }
  std::int64_t clock_epoch_ns() const noexcept { return header_->clock_epoch_ns; }
  std::uint64_t capacity() const noexcept { return capacity_; }

  // Producer side (the application). attach() claims the device (one
  // application per device: a second attach throws std::runtime_error);
  // publish() never blocks; detach() marks the end (idempotent).
  void attach();
  void publish(const LogRecord& r) noexcept;
  void detach() noexcept;

  // Reader side (the recorder).
  SharedState state() const noexcept;
  std::int32_t producer_pid() const noexcept;
  std::int64_t attach_ns() const noexcept;
  std::int64_t detach_ns() const noexcept;
  std::uint64_t published() const noexcept;
  // The newest logs (at most max, oldest first) whose slots were not
  // overwritten while they were copied.
  std::size_t newest(LogRecord* out, std::size_t max) const noexcept;

 private:
  SharedSimDevice(std::string path, int fd, void* base, std::size_t bytes);

  std::string path_;
  int fd_;
  void* base_;
  std::size_t bytes_;
  SharedHeader* header_;
  SharedSlot* slots_;
  std::uint64_t capacity_ = 0;
  SimParams params_{};
  bool attached_here_ = false;
};

// The shared device's logger as a PowerSource: the same SourceInfo as
// SimPowerSource (name "sim", clock domain sim-device or sim-logger, the
// logger's period and tick), so a PowerRecorder records it unchanged.
class SharedSimPowerSource final : public PowerSource {
 public:
  SharedSimPowerSource(std::shared_ptr<SharedSimDevice> device, std::uint32_t depth);
  const SourceInfo& info() const noexcept override { return info_; }
  PollResult poll(Reading* out, std::size_t max) override;

 private:
  std::shared_ptr<SharedSimDevice> dev_;
  std::uint32_t depth_;
  SourceInfo info_;
  std::vector<LogRecord> buf_;
};

// The shared device's clock as a TimestampSource: the tick count is the
// same ClockModel the application's SimDevice keeps, and each read really
// takes the simulated round trip (read_rtt_ns, jitter, outliers,
// asymmetry), as SimDevice::read_clock does in real time.
class SharedSimTimestampSource final : public TimestampSource {
 public:
  explicit SharedSimTimestampSource(std::shared_ptr<SharedSimDevice> device);
  const TimestampInfo& timestamp_info() const noexcept override { return info_; }
  std::int64_t read_device_ticks() override { return read().device_ticks; }
  Bracket read();

 private:
  std::shared_ptr<SharedSimDevice> dev_;
  TimestampInfo info_;
  ClockModel clock_;
  Rng rng_;
};

}  // namespace fingrav::sim
