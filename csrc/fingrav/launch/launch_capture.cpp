#include "fingrav/launch/launch_capture.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>

#include "fingrav/host_clock.hpp"
#include "fingrav/launch/crc32.hpp"

namespace fingrav::launch {
namespace {

template <typename T>
void put_le(std::string& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// A record's 16-byte frame (tag, payload length, the payload's CRC-32).
void frame_header(std::string& out, const char tag[4], std::uint64_t length, std::uint32_t crc) {
  out.append(tag, 4);
  put_le<std::uint64_t>(out, length);
  put_le<std::uint32_t>(out, crc);
}

void frame(std::string& out, const char tag[4], const std::string& payload) {
  frame_header(out, tag, payload.size(), crc32(payload.data(), payload.size()));
  out += payload;
}

// Length of the valid UTF-8 sequence starting at s[i], or 0.
std::size_t utf8_length(std::string_view s, std::size_t i) noexcept {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (b >= 0xC2 && b <= 0xDF) { n = 2; cp = b & 0x1Fu; }
  else if (b >= 0xE0 && b <= 0xEF) { n = 3; cp = b & 0x0Fu; }
  else if (b >= 0xF0 && b <= 0xF4) { n = 4; cp = b & 0x07u; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (c & 0x3Fu);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

// A JSON string literal. Bytes that are not UTF-8 (a mangled name in some
// other encoding) become U+FFFD, so one odd name cannot make the whole file
// unreadable as JSON.
void json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b == '"' || b == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(b));
      ++i;
    } else if (b < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(b));
      out += buf;
      ++i;
    } else if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
    } else if (const std::size_t n = utf8_length(s, i); n > 0) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out.push_back('"');
}

// A .npy (format 1.0) holding `count` items of the structured or plain dtype
// `descr`, shape `shape`; data appended after by the caller.
std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string dict = "{'descr': " + descr + ", 'fortran_order': False, 'shape': " + shape + ", }";
  // numpy pads the header with spaces and a newline so the data starts on a
  // 64-byte boundary (10 bytes of magic, version and length come first).
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  put_le<std::uint16_t>(out, static_cast<std::uint16_t>(dict.size()));
  out += dict;
  return out;
}

// LAUNCH_DTYPE's descr, field for field as LaunchRecord.
constexpr const char* kLaunchDescr =
    "[('start_ns', '<i8'), ('end_ns', '<i8'), ('correlation_id', '<u8'), ('queue', '<u8'), "
    "('symbol', '<u4'), ('device', '<i4'), ('grid', '<u4', (3,)), ('block', '<u4', (3,)), "
    "('flags', '<u4'), ('reserved', '<u4')]";

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the file stores records as little-endian bytes");

std::int64_t read_clock(int clock_id) noexcept {
  timespec ts{};
  (void)::clock_gettime(clock_id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

}  // namespace

int record_clock_id(std::string_view name) noexcept {
  if (name == "CLOCK_BOOTTIME") return CLOCK_BOOTTIME;
  if (name == "CLOCK_REALTIME") return CLOCK_REALTIME;
  return -1;
}

void read_clock_brackets(int clock_id, std::int64_t* rows, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    rows[3 * i] = host_now_ns();
    rows[3 * i + 1] = read_clock(clock_id);
    rows[3 * i + 2] = host_now_ns();
  }
}

std::unique_ptr<LaunchCapture> LaunchCapture::open(const CaptureOptions& options) {
  if (options.path.empty()) throw std::invalid_argument("path: empty; name the launch journal to create");
  if (options.vendor != "rocm" && options.vendor != "cuda") {
    throw std::invalid_argument("vendor='" + options.vendor + "': must be 'rocm' or 'cuda'");
  }
  const int clock_id = record_clock_id(options.record_clock);
  if (clock_id < 0) {
    throw std::invalid_argument("record_clock='" + options.record_clock +
                                "': must be 'CLOCK_BOOTTIME' or 'CLOCK_REALTIME'");
  }
  const std::size_t cap = options.capacity;
  if (cap < 2 || cap > kMaxCapacity || (cap & (cap - 1)) != 0) {
    throw std::invalid_argument("capacity=" + std::to_string(cap) + ": must be a power of two in [2, 2^26]");
  }
  if (options.flush_period_ns < 1'000'000 || options.flush_period_ns > 10'000'000'000LL) {
    throw std::invalid_argument("flush_period_ns=" + std::to_string(options.flush_period_ns) +
                                ": must be in [1 ms, 10 s]");
  }
  if (options.brackets_per_flush < 1 || options.brackets_per_flush > 1024) {
    throw std::invalid_argument("brackets_per_flush=" + std::to_string(options.brackets_per_flush) +
                                ": must be in [1, 1024]");
  }
  const int fd = ::open(options.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    throw std::system_error(err, std::generic_category(), "cannot create the launch journal " + options.path);
  }
  std::unique_ptr<LaunchCapture> capture;
  try {
    capture.reset(new LaunchCapture(options, fd, clock_id));
  } catch (...) {
    ::close(fd);
    ::unlink(options.path.c_str());
    throw;
  }
  return capture;
}

std::unique_ptr<LaunchCapture> LaunchCapture::open_from_env(std::string_view vendor, std::string_view record_clock,
                                                            std::string_view tool, std::string_view tool_version,
                                                            std::string_view runtime_version) {
  const char* dir = std::getenv("FINGRAV_LAUNCH_DIR");
  if (dir == nullptr || *dir == '\0') return nullptr;
  CaptureOptions o;
  o.path = std::string(dir) + "/launches." + std::to_string(::getpid()) + ".journal";
  o.vendor = std::string(vendor);
  o.record_clock = std::string(record_clock);
  o.tool = std::string(tool);
  o.tool_version = std::string(tool_version);
  o.runtime_version = std::string(runtime_version);
  if (const char* cap = std::getenv("FINGRAV_LAUNCH_CAPACITY"); cap != nullptr && *cap != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(cap, &end, 10);
    if (errno != 0 || end == cap || *end != '\0' || v < 2 || v > kMaxCapacity || (v & (v - 1)) != 0) {
      throw std::invalid_argument(std::string("FINGRAV_LAUNCH_CAPACITY='") + cap +
                                  "': must be a power of two in [2, 2^26] (records in the ring)");
    }
    o.capacity = static_cast<std::size_t>(v);
  }
  return open(o);
}

LaunchCapture::LaunchCapture(const CaptureOptions& options, int fd, int clock_id)
    : options_(options), clock_id_(clock_id), fd_(fd), ring_(options.capacity) {
  batch_.reserve(options.capacity);  // address space only: pages are touched as drains grow the batch
  std::string head;
  head.append(kJournalMagic, sizeof kJournalMagic);
  std::string json = "{\"format\": \"fingrav-launches\", \"version\": 1, \"vendor\": ";
  json_string(json, options.vendor);
  json += ", \"record_clock\": ";
  json_string(json, options.record_clock);
  json += ", \"pid\": " + std::to_string(::getpid()) + ", \"tool\": ";
  json_string(json, options.tool);
  json += ", \"tool_version\": ";
  json_string(json, options.tool_version);
  if (!options.runtime_version.empty()) {
    json += ", \"runtime_version\": ";
    json_string(json, options.runtime_version);
  }
  json += ", \"capacity\": " + std::to_string(options.capacity) + "}";
  frame(head, "HEAD", json);
  append(head, true);
  if (const std::string err = write_error(); !err.empty()) {
    throw std::system_error(std::make_error_code(std::errc::io_error),
                            "cannot write the launch journal's header to " + options.path + ": " + err);
  }
  writer_ = std::thread([this] { writer_loop(); });
}

LaunchCapture::~LaunchCapture() { close(); }

std::uint32_t LaunchCapture::intern(std::string_view name) {
  std::lock_guard<std::mutex> lock(table_mutex_);
  const auto it = ids_.find(std::string(name));
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(names_.back(), id);
  return id;
}

bool LaunchCapture::push(const LaunchRecord& record) noexcept {
  while (push_lock_.test_and_set(std::memory_order_acquire)) cpu_relax();
  // Checked under the lock: close() sets closing_ and then takes the lock once,
  // so a record pushed here is either before the final drain or counted.
  const bool ok = !closing_.load(std::memory_order_relaxed) && ring_.try_push(record);
  push_lock_.clear(std::memory_order_release);
  if (!ok) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (armed_.load(std::memory_order_relaxed) && armed_.exchange(false, std::memory_order_acq_rel)) {
    wake_.notify_one();  // the writer sleeps its idle period: the first record wakes it
  }
  if (ring_.size_approx() >= options_.capacity / 2 && !kicked_.exchange(true, std::memory_order_acq_rel)) {
    // Half full: drain now rather than at the next period (a vendor hands over
    // its buffer in bursts of thousands). notify_one never blocks; a wake-up
    // lost to the race with the writer's wait costs at most one period.
    wake_.notify_one();
  }
  return ok;
}

std::size_t LaunchCapture::push_batch(const LaunchRecord* records, std::size_t n) noexcept {
  if (n == 0) return 0;
  while (push_lock_.test_and_set(std::memory_order_acquire)) cpu_relax();
  std::size_t ok = 0;
  if (!closing_.load(std::memory_order_relaxed)) {
    while (ok < n && ring_.try_push(records[ok])) ++ok;
  }
  push_lock_.clear(std::memory_order_release);
  if (ok < n) dropped_.fetch_add(n - ok, std::memory_order_relaxed);
  if (ok > 0 && armed_.load(std::memory_order_relaxed) && armed_.exchange(false, std::memory_order_acq_rel)) {
    wake_.notify_one();  // as in push(): the first record wakes an idle writer
  }
  if ((ok < n || ring_.size_approx() >= options_.capacity / 2) && !kicked_.exchange(true, std::memory_order_acq_rel)) {
    wake_.notify_one();  // as in push(): drain now, not at the next period
  }
  return ok;
}

void LaunchCapture::note(std::string_view key, std::string_view text) {
  std::lock_guard<std::mutex> lock(table_mutex_);
  pending_notes_.emplace_back(std::string(key), std::string(text));
}

void LaunchCapture::add_vendor_drops(std::uint64_t n) noexcept {
  vendor_dropped_.fetch_add(n, std::memory_order_relaxed);
}

std::string LaunchCapture::write_error() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return write_error_;
}

void LaunchCapture::append(const std::string& bytes, bool sync) {
  iovec one{const_cast<char*>(bytes.data()), bytes.size()};
  append(&one, 1, sync);
}

void LaunchCapture::append(iovec* parts, int count, bool sync) {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!write_error_.empty()) return;
  }
  // One writev(2) a drain, so the records travel from the batch to the page
  // cache without being copied into a buffer first; a short write (a signal,
  // a full disk) resumes where it stopped.
  while (count > 0) {
    const ssize_t n = ::writev(fd_, parts, count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      std::lock_guard<std::mutex> lock(error_mutex_);
      write_error_ = errno_text(err);
      return;
    }
    auto left = static_cast<std::size_t>(n);
    while (count > 0 && left >= parts->iov_len) {
      left -= parts->iov_len;
      ++parts;
      --count;
    }
    if (count > 0) {
      parts->iov_base = static_cast<char*>(parts->iov_base) + left;
      parts->iov_len -= left;
    }
  }
  const std::int64_t now = host_now_ns();
  // The page cache already outlives a killed process; fsync bounds what a power cut loses.
  if (sync || now - last_sync_ns_ >= 1'000'000'000LL) {
    (void)::fsync(fd_);
    last_sync_ns_ = now;
  }
}

void LaunchCapture::writer_loop() {
  // Active: a drain every flush period. Idle (the last drain found nothing to
  // write): a burst of brackets every idle period, and the first push into
  // the ring disarms armed_ and wakes the writer, which then drains one flush
  // period later, as when active. An idle capture so costs a wake-up a second
  // rather than ten (each one, on a busy host, tens of microseconds of CPU).
  const auto period = std::chrono::nanoseconds(options_.flush_period_ns);
  const auto idle_period = std::chrono::nanoseconds(std::max<std::int64_t>(options_.flush_period_ns, kIdlePeriodNs));
  std::unique_lock<std::mutex> lock(wake_mutex_);
  bool idle = false;
  while (!stop_) {
    if (idle) {
      armed_.store(true, std::memory_order_seq_cst);
      // Checked after arming: a push that came before it saw armed_ false.
      // A wake-up lost to the race with the wait costs at most one idle period.
      const bool woken = wake_.wait_for(lock, idle_period, [this] {
        return stop_ || kicked_.load(std::memory_order_acquire) || !armed_.load(std::memory_order_acquire) ||
               ring_.size_approx() > 0;
      });
      armed_.store(false, std::memory_order_relaxed);
      if (stop_) break;
      if (woken && !kicked_.load(std::memory_order_acquire)) {
        idle = false;  // records arrived: drain them one flush period from now, with what follows them
        continue;
      }
    } else {
      wake_.wait_for(lock, period, [this] { return stop_ || kicked_.load(std::memory_order_acquire); });
      if (stop_) break;
    }
    lock.unlock();
    kicked_.store(false, std::memory_order_release);
    idle = !drain(false);
    lock.lock();
  }
}

bool LaunchCapture::drain(bool final_drain) {
  // Records first, then the symbols: every name interned before a record was
  // pushed is in the table by the time that record is popped here. The batch
  // grows to the largest drain seen rather than to the ring's capacity: a
  // 2^16-slot ring would otherwise cost 4.7 MB of zeroing and page faults in
  // a capture that never holds more than a few thousand records at a time.
  // size_approx() is a lower bound on the consumer side, so what arrives
  // after it is read waits for the next drain.
  const std::size_t avail = ring_.size_approx();
  if (batch_.size() < avail) batch_.resize(avail);
  const std::size_t n = avail > 0 ? ring_.pop_into(batch_.data(), avail) : 0;
  std::vector<std::string> new_names;
  std::size_t first = 0;
  std::vector<std::pair<std::string, std::string>> notes;
  {
    std::lock_guard<std::mutex> lock(table_mutex_);
    first = names_written_;
    new_names.assign(names_.begin() + static_cast<std::ptrdiff_t>(first), names_.end());
    names_written_ = names_.size();
    notes.swap(pending_notes_);
  }
  // A burst of brackets every period: (raw before, record clock, raw after),
  // back to back, so the clock fit has their density over the whole capture.
  const std::size_t nb = options_.brackets_per_flush;
  const std::size_t held = pending_brackets_.size();
  pending_brackets_.resize(held + 3 * nb);
  read_clock_brackets(clock_id_, pending_brackets_.data() + held, nb);
  const std::uint64_t dropped = dropped_.load(std::memory_order_relaxed);
  const std::uint64_t vendor_dropped = vendor_dropped_.load(std::memory_order_relaxed);
  // Nothing arrived and nothing changed: the brackets wait in memory for the
  // next drain that writes, so an idle period costs no write(2) (each one an
  // inode update in the file system's journal) and no fsync; a long idle
  // stretch still writes them every kMaxHeldBracketRows.
  if (!final_drain && n == 0 && new_names.empty() && notes.empty() && dropped == stat_dropped_ &&
      vendor_dropped == stat_vendor_dropped_ && pending_brackets_.size() < 3 * kMaxHeldBracketRows) {
    return false;
  }
  std::string out;
  if (!new_names.empty()) {
    std::string json = "{\"first\": " + std::to_string(first) + ", \"names\": [";
    for (std::size_t i = 0; i < new_names.size(); ++i) {
      if (i > 0) json += ", ";
      json_string(json, new_names[i]);
    }
    json += "]}";
    frame(out, "SYMB", json);
  }
  for (const auto& [key, text] : notes) {
    std::string json = "{\"key\": ";
    json_string(json, key);
    json += ", \"text\": ";
    json_string(json, text);
    json += "}";
    frame(out, "NOTE", json);
  }
  // The records are written from the batch itself (the middle part of the
  // writev); their CRC continues the .npy header's.
  const char* records = reinterpret_cast<const char*>(batch_.data());
  const std::size_t record_bytes = n * sizeof(LaunchRecord);
  if (n > 0) {
    const std::string npy = npy_header(kLaunchDescr, "(" + std::to_string(n) + ",)");
    frame_header(out, "LNCH", npy.size() + record_bytes, crc32(records, record_bytes, crc32(npy.data(), npy.size())));
    out += npy;
  }
  std::string tail;
  const std::size_t rows = pending_brackets_.size() / 3;
  std::string npy = npy_header("'<i8'", "(" + std::to_string(rows) + ", 3)");
  npy.append(reinterpret_cast<const char*>(pending_brackets_.data()), pending_brackets_.size() * sizeof(std::int64_t));
  pending_brackets_.clear();
  frame(tail, clock_id_ == CLOCK_BOOTTIME ? "BRBT" : "BRRT", npy);
  const std::uint64_t written = written_.load(std::memory_order_relaxed) + n;
  written_.store(written, std::memory_order_relaxed);
  stat_dropped_ = dropped;
  stat_vendor_dropped_ = vendor_dropped;
  const std::string stat = "{\"records\": " + std::to_string(written) + ", \"dropped\": " + std::to_string(dropped) +
                           ", \"vendor_dropped\": " + std::to_string(vendor_dropped) +
                           ", \"closed\": " + (final_drain ? "true" : "false") + "}";
  frame(tail, "STAT", stat);
  iovec parts[3] = {{out.data(), out.size()}, {const_cast<char*>(records), record_bytes}, {tail.data(), tail.size()}};
  append(parts, 3, final_drain);
  return true;
}

void LaunchCapture::close() noexcept {
  std::lock_guard<std::mutex> close_lock(close_mutex_);
  if (closed_.load(std::memory_order_acquire)) return;
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  // Refuse new pushes, then wait out a producer already inside push().
  closing_.store(true, std::memory_order_release);
  while (push_lock_.test_and_set(std::memory_order_acquire)) cpu_relax();
  push_lock_.clear(std::memory_order_release);
  try {
    drain(true);
  } catch (...) {
    // Out of memory building the last drain: the file keeps what earlier drains wrote.
  }
  if (fd_ >= 0) {
    (void)::fsync(fd_);
    ::close(fd_);
    fd_ = -1;
  }
  closed_.store(true, std::memory_order_release);
}

}  // namespace fingrav::launch
