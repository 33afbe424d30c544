#include "fingrav/sim/shared_device.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>

#include "fingrav/host_clock.hpp"

namespace fingrav::sim {

namespace {

constexpr std::size_t kHeaderBytes = (sizeof(SharedHeader) + 4095) / 4096 * 4096;

std::runtime_error sys_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

std::size_t file_bytes_for(std::uint64_t capacity) {
  return kHeaderBytes + static_cast<std::size_t>(capacity) * sizeof(SharedSlot);
}

inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

SharedSimDevice::SharedSimDevice(std::string path, int fd, void* base, std::size_t bytes)
    : path_(std::move(path)),
      fd_(fd),
      base_(base),
      bytes_(bytes),
      header_(static_cast<SharedHeader*>(base)),
      slots_(reinterpret_cast<SharedSlot*>(static_cast<char*>(base) + kHeaderBytes)) {}

SharedSimDevice::~SharedSimDevice() {
  if (attached_here_) detach();
  ::munmap(base_, bytes_);
  ::close(fd_);
}

std::shared_ptr<SharedSimDevice> SharedSimDevice::create(const std::string& path, const SimParams& params,
                                                         std::uint64_t capacity) {
  if (capacity < 16 || capacity > kSharedMaxCapacity || (capacity & (capacity - 1)) != 0) {
    throw std::invalid_argument("capacity=" + std::to_string(capacity) +
                                ": must be a power of two in [16, 2^24] logs");
  }
  validate_params(params);
  const auto& table = param_table();
  if (table.size() > kSharedMaxParams) throw std::logic_error("shared device: more parameters than the header holds");
  if (path.empty()) throw std::invalid_argument("path: must not be empty");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      throw std::invalid_argument("path=" + path + ": exists; a shared device file is never written over "
                                  "(remove it or choose another path)");
    }
    throw sys_error(path, "cannot create the shared device file");
  }
  const std::size_t bytes = file_bytes_for(capacity);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const auto err = sys_error(path, "cannot size the shared device file");
    ::close(fd);
    ::unlink(path.c_str());
    throw err;
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const auto err = sys_error(path, "cannot map the shared device file");
    ::close(fd);
    ::unlink(path.c_str());
    throw err;
  }
  // The file is zero-filled by ftruncate; construct the atomics in place.
  auto* h = new (base) SharedHeader{};
  h->version = kSharedVersion;
  h->header_bytes = static_cast<std::uint32_t>(kHeaderBytes);
  h->capacity = capacity;
  h->slot_bytes = sizeof(SharedSlot);
  h->param_count = static_cast<std::uint32_t>(table.size());
  h->clock_epoch_ns = host_now_ns();
  h->file_bytes = bytes;
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i].name.size() >= kSharedParamNameBytes) throw std::logic_error("shared device: parameter name too long");
    std::memcpy(h->params[i].name, table[i].name.data(), table[i].name.size());
    h->params[i].value = table[i].get(params);
  }
  auto* slots = reinterpret_cast<SharedSlot*>(static_cast<char*>(base) + kHeaderBytes);
  for (std::uint64_t i = 0; i < capacity; ++i) new (&slots[i]) SharedSlot{};
  // The magic last: a file cut short before this point is refused by open().
  std::memcpy(h->magic, kSharedMagic, sizeof(kSharedMagic));
  if (::msync(base, kHeaderBytes, MS_SYNC) != 0) {
    const auto err = sys_error(path, "cannot write the shared device header");
    ::munmap(base, bytes);
    ::close(fd);
    ::unlink(path.c_str());
    throw err;
  }
  std::shared_ptr<SharedSimDevice> dev(new SharedSimDevice(path, fd, base, bytes));
  dev->capacity_ = capacity;
  dev->params_ = params;
  return dev;
}

std::shared_ptr<SharedSimDevice> SharedSimDevice::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw sys_error(path, "cannot open the shared simulated device file");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const auto err = sys_error(path, "cannot stat the shared simulated device file");
    ::close(fd);
    throw err;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  auto refuse = [&](const std::string& why) {
    ::close(fd);
    return std::runtime_error(path + ": not a shared simulated device file (" + why + ")");
  };
  if (size < kHeaderBytes) throw refuse("shorter than its header");
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const auto err = sys_error(path, "cannot map the shared simulated device file");
    ::close(fd);
    throw err;
  }
  auto* h = static_cast<SharedHeader*>(base);
  std::string why;
  if (std::memcmp(h->magic, kSharedMagic, sizeof(kSharedMagic)) != 0) {
    why = "no FGSIMDEV magic";
  } else if (h->version != kSharedVersion) {
    why = "version " + std::to_string(h->version) + ", this build reads version " + std::to_string(kSharedVersion);
  } else if (h->header_bytes != kHeaderBytes || h->slot_bytes != sizeof(SharedSlot) ||
             h->capacity < 16 || h->capacity > kSharedMaxCapacity || (h->capacity & (h->capacity - 1)) != 0 ||
             h->file_bytes != file_bytes_for(h->capacity) || size != h->file_bytes) {
    why = "its layout or size does not match its header";
  } else if (h->param_count > kSharedMaxParams) {
    why = "too many parameters";
  }
  SimParams p;
  if (why.empty()) {
    const auto& table = param_table();
    for (std::uint32_t i = 0; i < h->param_count && why.empty(); ++i) {
      const std::string name(h->params[i].name, strnlen(h->params[i].name, kSharedParamNameBytes));
      const auto it = std::find_if(table.begin(), table.end(), [&](const ParamEntry& e) { return e.name == name; });
      if (it == table.end()) {
        why = "unknown parameter '" + name + "'";
      } else {
        it->set(p, h->params[i].value);
      }
    }
  }
  if (why.empty()) {
    try {
      validate_params(p);
    } catch (const std::invalid_argument& e) {
      why = std::string("invalid parameter: ") + e.what();
    }
  }
  if (!why.empty()) {
    ::munmap(base, size);
    throw refuse(why);
  }
  std::shared_ptr<SharedSimDevice> dev(new SharedSimDevice(path, fd, base, size));
  dev->capacity_ = h->capacity;
  dev->params_ = p;
  return dev;
}

void SharedSimDevice::attach() {
  auto expected = static_cast<std::uint32_t>(SharedState::kWaiting);
  if (!header_->state.compare_exchange_strong(expected, static_cast<std::uint32_t>(SharedState::kAttached),
                                              std::memory_order_acq_rel)) {
    throw std::runtime_error(path_ + ": another application (pid " + std::to_string(producer_pid()) +
                             ") has already run on this simulated device; each run creates its own");
  }
  header_->producer_pid.store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed);
  header_->attach_ns.store(host_now_ns(), std::memory_order_release);
  attached_here_ = true;
}

void SharedSimDevice::publish(const LogRecord& r) noexcept {
  std::uint64_t words[kSlotWords];
  std::memcpy(words, &r, sizeof(words));
  const std::uint64_t i = header_->head.load(std::memory_order_relaxed);
  SharedSlot& s = slots_[i & (capacity_ - 1)];
  // The seqlock's writer fence: a reader that sees any of these stores
  // (after its acquire fence) also sees head == i, so it knows slot i's old
  // content (log i - capacity) may be torn.
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t k = 0; k < kSlotWords; ++k) s.w[k].store(words[k], std::memory_order_relaxed);
  header_->head.store(i + 1, std::memory_order_release);
}

void SharedSimDevice::detach() noexcept {
  if (!attached_here_) return;
  attached_here_ = false;
  header_->detach_ns.store(host_now_ns(), std::memory_order_relaxed);
  header_->state.store(static_cast<std::uint32_t>(SharedState::kDetached), std::memory_order_release);
  (void)::msync(base_, bytes_, MS_ASYNC);
}

SharedState SharedSimDevice::state() const noexcept {
  return static_cast<SharedState>(header_->state.load(std::memory_order_acquire));
}
std::int32_t SharedSimDevice::producer_pid() const noexcept {
  return header_->producer_pid.load(std::memory_order_relaxed);
}
std::int64_t SharedSimDevice::attach_ns() const noexcept { return header_->attach_ns.load(std::memory_order_acquire); }
std::int64_t SharedSimDevice::detach_ns() const noexcept { return header_->detach_ns.load(std::memory_order_acquire); }
std::uint64_t SharedSimDevice::published() const noexcept { return header_->head.load(std::memory_order_acquire); }

std::size_t SharedSimDevice::newest(LogRecord* out, std::size_t max) const noexcept {
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::uint64_t h1 = header_->head.load(std::memory_order_acquire);
    const std::uint64_t n = std::min<std::uint64_t>({static_cast<std::uint64_t>(max), h1, capacity_});
    const std::uint64_t first = h1 - n;
    for (std::uint64_t i = 0; i < n; ++i) {
      const SharedSlot& s = slots_[(first + i) & (capacity_ - 1)];
      std::uint64_t words[kSlotWords];
      for (std::size_t k = 0; k < kSlotWords; ++k) words[k] = s.w[k].load(std::memory_order_relaxed);
      std::memcpy(&out[i], words, sizeof(words));
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    const std::uint64_t h2 = header_->head.load(std::memory_order_relaxed);
    // Logs with index <= h2 - capacity may have been overwritten during the copy.
    const std::uint64_t safe_from = h2 >= capacity_ ? h2 - capacity_ + 1 : 0;
    if (first >= safe_from) return static_cast<std::size_t>(n);
    if (safe_from < h1) {
      const auto skip = static_cast<std::size_t>(safe_from - first);
      std::memmove(out, out + skip, static_cast<std::size_t>(n - skip) * sizeof(LogRecord));
      return static_cast<std::size_t>(n) - skip;
    }
    cpu_pause();  // lapped entirely (a reader descheduled for a whole ring): read again
  }
  return 0;
}

// ------------------------------------------------------------------ sources

SharedSimPowerSource::SharedSimPowerSource(std::shared_ptr<SharedSimDevice> device, std::uint32_t depth)
    : dev_(std::move(device)), depth_(depth) {
  if (!dev_) throw std::invalid_argument("device: must not be None");
  if (depth < 1 || depth > kMaxReadingsPerPoll) {
    throw std::invalid_argument("depth=" + std::to_string(depth) + ": must be in [1, " +
                                std::to_string(kMaxReadingsPerPoll) + "]");
  }
  info_ = sim_source_info(dev_->params());
  buf_.resize(kMaxReadingsPerPoll);
}

PollResult SharedSimPowerSource::poll(Reading* out, std::size_t max) {
  const std::size_t want = std::min<std::size_t>(depth_, max);
  const std::size_t n = dev_->newest(buf_.data(), want);
  for (std::size_t i = 0; i < n; ++i) to_reading(buf_[i], out[i]);
  return {n, PollStatus::kOk};
}

SharedSimTimestampSource::SharedSimTimestampSource(std::shared_ptr<SharedSimDevice> device)
    : dev_(std::move(device)) {
  if (!dev_) throw std::invalid_argument("device: must not be None");
  const SimParams& p = dev_->params();
  clock_ = ClockModel(p.device_clock, dev_->clock_epoch_ns(), "device");
  // Its own stream: the application's device draws its reads from stream 5.
  rng_ = Rng(p.seed, 7);
  info_.name = "sim";
  info_.clock_domain = "sim-device";
  info_.nominal_tick_ns = p.device_clock.tick_ns;
}

Bracket SharedSimTimestampSource::read() {
  const SimParams& p = dev_->params();
  double rtt = p.read_rtt_ns + rng_.exponential(p.read_jitter_ns);
  if (rng_.bernoulli(p.read_outlier_prob)) rtt += rng_.exponential(p.read_outlier_ns);
  const std::int64_t hb = host_now_ns();
  const std::int64_t at = hb + static_cast<std::int64_t>(std::llround(p.read_asymmetry * rtt));
  while (host_now_ns() < at) cpu_pause();
  const std::int64_t ticks = clock_.ticks(host_now_ns());
  const std::int64_t done = hb + static_cast<std::int64_t>(std::ceil(rtt));
  while (host_now_ns() < done) cpu_pause();
  return {hb, ticks, host_now_ns()};
}

}  // namespace fingrav::sim
