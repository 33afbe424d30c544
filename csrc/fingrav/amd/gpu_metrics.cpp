#include "fingrav/amd/gpu_metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "fingrav/amd/gpu_metrics_layouts.hpp"
#include "fingrav/dynlib.hpp"
#include "fingrav/host_clock.hpp"

namespace fingrav::amd {

namespace {

using layouts::Header;
using layouts::V1_4;
using layouts::V1_5;
using layouts::V1_6a;
using layouts::V1_6b;
using layouts::V1_7;
using layouts::V1_8;

const char* const kLayout14 = "1.4";
const char* const kLayout15 = "1.5";
const char* const kLayout16a = "1.6 (device-wide VCN/JPEG activity)";
const char* const kLayout16b = "1.6 (per-partition xcp_stats)";
const char* const kLayout17 = "1.7";
const char* const kLayout18 = "1.8";
const char* const kLayout19 = "1.9 (attribute-encoded)";

template <typename T>
T load(const std::uint8_t* data) {
  T v;
  std::memcpy(&v, data, sizeof(T));  // the buffer carries no alignment guarantee
  return v;
}

// Copies the fields every 1.4+ layout has, wherever that layout puts them.
template <typename S>
void fill_common(const S& s, GpuMetrics& m) {
  m.temperature_hotspot_c = s.temperature_hotspot;
  m.temperature_mem_c = s.temperature_mem;
  m.temperature_vrsoc_c = s.temperature_vrsoc;
  m.curr_socket_power_w = s.curr_socket_power;
  m.average_gfx_activity_pct = s.average_gfx_activity;
  m.average_umc_activity_pct = s.average_umc_activity;
  m.energy_accumulator = s.energy_accumulator;
  m.system_clock_counter = s.system_clock_counter;
  m.firmware_timestamp = s.firmware_timestamp;
  m.gfxclk_lock_status = s.gfxclk_lock_status;
  for (int i = 0; i < layouts::kMaxGfxClks; ++i) m.current_gfxclk_raw[i] = s.current_gfxclk[i];
  m.current_uclk_mhz = s.current_uclk;
}

template <typename S>
GpuMetrics decode(const std::uint8_t* data, const char* name) {
  const S s = load<S>(data);
  GpuMetrics m;
  m.format_revision = s.common_header.format_revision;
  m.content_revision = s.common_header.content_revision;
  m.structure_size = s.common_header.structure_size;
  m.layout = name;
  fill_common(s, m);
  if constexpr (std::is_same_v<S, V1_4> || std::is_same_v<S, V1_5> || std::is_same_v<S, V1_6a>) {
    m.throttle_status = s.throttle_status;
  }
  if constexpr (!std::is_same_v<S, V1_4> && !std::is_same_v<S, V1_5>) {
    // A u32 counter; all ones is the driver's "not supported" at that width.
    m.accumulation_counter = s.accumulation_counter == kNotSupported32 ? kNotSupported64 : s.accumulation_counter;
  }
  if constexpr (std::is_same_v<S, V1_6b> || std::is_same_v<S, V1_7> || std::is_same_v<S, V1_8>) {
    m.num_partition = s.num_partition;
  }
  return m;
}

// ------------------------------------------------------------ format 1.9
// The definitions, from drivers/gpu/drm/amd/include/kgd_pp_interface.h
// (amd-gfx "[PATCH v4 1/7] drm/amdgpu/pm: Add definition for gpu_metrics
// v1.9", Lijo Lazar, 15 September 2025; ROCm/amdgpu 0ce779bf):
//
//   AMDGPU_METRICS_ENC_ATTR(unit, type, id, inst) =
//       unit << 24 | type << 20 | id << 10 | inst      (unit 8, type 4, id 10, inst 10 bits)
//
// where inst is the number of values that follow ("A field is encoded by its
// id, type and number of instances"). The header declares
// `struct gpu_metrics_v1_9 { header; int attr_count; struct gpu_metrics_attr
// metrics_attrs[]; }` with a void* per attribute, but that struct is only a
// description: the driver writes the __packed struct that
// DECLARE_SMU_METRICS_CLASS builds (drivers/gpu/drm/amd/pm/swsmu/smu_cmn.h,
// "[PATCH v4 2/7] drm/amd/pm: Add helper functions for gpu metrics", merged
// as c3cd00fea6d6; SMU 13.0.6 uses it since b4f748f22d31, "drm/amd/pm: Use
// gpu metrics 1.9 for SMUv13.0.6"): header, int attr_count, then per field
// `NAME##_ftype` followed at once by the value or array, no padding
// anywhere. That patch's revisions disagree on the width of NAME##_ftype:
// u32 as first posted (v1, v2), u64 from v4 ("Fix ftype as u64 to match
// encoding field"), and an encoding never uses its upper 32 bits. So nothing
// here assumes an offset: the table is walked encoding by encoding, with both
// widths tried (see decode_v19).
namespace v19 {

constexpr unsigned kUnitShift = 24, kTypeShift = 20, kIdShift = 10;
constexpr std::uint64_t kUnitMask = 0xFF, kTypeMask = 0xF, kIdMask = 0x3FF, kInstMask = 0x3FF;

// enum amdgpu_metrics_attr_type: U8, S8, U16, S16, U32, S32, U64, S64.
constexpr unsigned kTypeCount = 8;
constexpr std::size_t kTypeBytes[kTypeCount] = {1, 1, 2, 2, 4, 4, 8, 8};
constexpr bool kTypeSigned[kTypeCount] = {false, true, false, true, false, true, false, true};
const char* const kTypeNames[kTypeCount] = {"U8", "S8", "U16", "S16", "U32", "S32", "U64", "S64"};

// enum amdgpu_metrics_attr_unit (the members this parser checks).
constexpr unsigned kUnitNone = 0, kUnitPower1 = 3 /* W */, kUnitTime1 = 4 /* ns */, kUnitTime2 = 5 /* 10 ns */;

// enum amdgpu_metrics_attr_id: the ids this parser reads. The kernel's list is
// append-only so far (later ids, e.g. TEMPERATURE_HBM, are numbered
// differently in torvalds/linux and ROCm/amdgpu), and these are all among the
// first 39, which every revision numbers alike.
enum Id : unsigned {
  kTemperatureHotspot = 0,
  kTemperatureMem = 1,
  kTemperatureVrsoc = 2,
  kCurrSocketPower = 3,
  kAverageGfxActivity = 4,
  kAverageUmcActivity = 5,
  kEnergyAccumulator = 7,
  kSystemClockCounter = 8,
  kAccumulationCounter = 9,
  kGfxclkLockStatus = 15,
  kFirmwareTimestamp = 32,
  kCurrentGfxclk = 33,
  kCurrentUclk = 37,
  kNumPartition = 38,
};

struct Attr {
  unsigned unit, type, id, inst;
  std::size_t value_offset;  // where its first value starts in the table
};

// Header (4 bytes) then int attr_count.
constexpr std::size_t kFixedBytes = 8;

// Walks the table with encodings of `tag_bytes` bytes. Returns "" and fills
// `out`, or why these bytes are not such a table.
std::string walk(const std::uint8_t* data, std::size_t size, std::size_t tag_bytes, std::vector<Attr>& out) {
  out.clear();
  const std::int32_t count = load<std::int32_t>(data + 4);
  if (count < 0) return "attr_count is " + std::to_string(count) + ", negative";
  const std::size_t room = (size - kFixedBytes) / tag_bytes;
  if (static_cast<std::size_t>(count) > room) {
    return "attr_count " + std::to_string(count) + " needs at least " +
           std::to_string(static_cast<std::size_t>(count) * tag_bytes) + " bytes of encodings but the table has " +
           std::to_string(size - kFixedBytes) + " after its header";
  }
  out.reserve(static_cast<std::size_t>(count));
  std::size_t pos = kFixedBytes;
  for (std::int32_t i = 0; i < count; ++i) {
    if (size - pos < tag_bytes) {
      return "attribute " + std::to_string(i) + "'s encoding at byte " + std::to_string(pos) + " is cut off";
    }
    std::uint64_t enc = 0;
    if (tag_bytes == 8) {
      enc = load<std::uint64_t>(data + pos);
      if ((enc >> 32) != 0) {
        return "attribute " + std::to_string(i) + "'s encoding at byte " + std::to_string(pos) +
               " sets bits above 31, which AMDGPU_METRICS_ENC_ATTR never does";
      }
    } else {
      enc = load<std::uint32_t>(data + pos);
    }
    Attr a{static_cast<unsigned>((enc >> kUnitShift) & kUnitMask),
           static_cast<unsigned>((enc >> kTypeShift) & kTypeMask),
           static_cast<unsigned>((enc >> kIdShift) & kIdMask),
           static_cast<unsigned>(enc & kInstMask),
           pos + tag_bytes};
    if (a.inst == 0) {
      // The driver encodes 1 per scalar and the array size per array; a zero
      // count is what a misread encoding width tends to produce.
      return "attribute " + std::to_string(i) + " (id " + std::to_string(a.id) +
             ") has no values (inst 0), which the driver never encodes";
    }
    if (a.type >= kTypeCount) {
      // The value's width is unknown, so nothing after it can be found.
      return "attribute " + std::to_string(i) + " (id " + std::to_string(a.id) + ") has type " +
             std::to_string(a.type) + ", not one of the 8 types of enum amdgpu_metrics_attr_type";
    }
    const std::size_t bytes = static_cast<std::size_t>(a.inst) * kTypeBytes[a.type];
    if (size - a.value_offset < bytes) {
      return "attribute " + std::to_string(i) + " (id " + std::to_string(a.id) + ", " + std::to_string(a.inst) + " x " +
             kTypeNames[a.type] + ") runs " + std::to_string(bytes - (size - a.value_offset)) +
             " bytes past the end of the table";
    }
    out.push_back(a);
    pos = a.value_offset + bytes;
  }
  if (pos != size) {
    return std::to_string(count) + " attributes end at byte " + std::to_string(pos) + " but structure_size is " +
           std::to_string(size);
  }
  return {};
}

const char* id_name(unsigned id) {
  switch (id) {
    case kTemperatureHotspot: return "temperature_hotspot";
    case kTemperatureMem: return "temperature_mem";
    case kTemperatureVrsoc: return "temperature_vrsoc";
    case kCurrSocketPower: return "curr_socket_power";
    case kAverageGfxActivity: return "average_gfx_activity";
    case kAverageUmcActivity: return "average_umc_activity";
    case kEnergyAccumulator: return "energy_accumulator";
    case kSystemClockCounter: return "system_clock_counter";
    case kAccumulationCounter: return "accumulation_counter";
    case kGfxclkLockStatus: return "gfxclk_lock_status";
    case kFirmwareTimestamp: return "firmware_timestamp";
    case kCurrentGfxclk: return "current_gfxclk";
    case kCurrentUclk: return "current_uclk";
    case kNumPartition: return "num_partition";
    default: return nullptr;
  }
}

[[noreturn]] void fail(const std::string& why) {
  throw GpuMetricsFormatError("gpu_metrics 1.9: " + why +
                              "; the table is malformed or of a layout this parser does not know (report the "
                              "amdgpu driver version)");
}

// Value `k` of attribute `a`, widened to 64 bits; `all_ones` says whether it
// is the driver's "not supported" fill at its own width. A negative signed
// value is refused: none of the fields read here can be negative.
std::uint64_t value(const std::uint8_t* data, const Attr& a, unsigned k, bool& all_ones) {
  const std::size_t w = kTypeBytes[a.type];
  const std::uint8_t* p = data + a.value_offset + k * w;
  std::uint64_t v = 0;
  switch (w) {
    case 1: v = load<std::uint8_t>(p); break;
    case 2: v = load<std::uint16_t>(p); break;
    case 4: v = load<std::uint32_t>(p); break;
    default: v = load<std::uint64_t>(p); break;
  }
  const std::uint64_t ones = w == 8 ? kNotSupported64 : (std::uint64_t{1} << (8 * w)) - 1;
  all_ones = v == ones;
  if (!all_ones && kTypeSigned[a.type] && ((v >> (8 * w - 1)) & 1u)) {
    fail(std::string(id_name(a.id)) + " is negative (" + kTypeNames[a.type] + ")");
  }
  return v;
}

// Stores a scalar attribute into a field of type T: all ones (at the
// attribute's width) becomes T's all ones; a value T cannot hold is refused.
template <typename T>
void store(const std::uint8_t* data, const Attr& a, T& field) {
  if (a.inst != 1) {
    fail(std::string(id_name(a.id)) + " has " + std::to_string(a.inst) + " values where the kernel defines one");
  }
  bool ones = false;
  const std::uint64_t v = value(data, a, 0, ones);
  if (ones) {
    field = std::numeric_limits<T>::max();
    return;
  }
  if (v >= std::numeric_limits<T>::max()) {
    // max() itself is this parser's "not supported": a real value may not alias it.
    fail(std::string(id_name(a.id)) + " = " + std::to_string(v) + " does not fit " + std::to_string(8 * sizeof(T)) +
         " bits");
  }
  field = static_cast<T>(v);
}

// Nanoseconds per tick of a time attribute.
std::int64_t time_unit_ns(const Attr& a) {
  if (a.unit == kUnitTime1) return 1;
  if (a.unit == kUnitTime2) return 10;
  fail(std::string(id_name(a.id)) + " has unit " + std::to_string(a.unit) +
       ", not a time unit (AMDGPU_METRICS_UNIT_TIME_1, ns, or TIME_2, 10 ns)");
}

GpuMetrics decode_v19(const std::uint8_t* data, std::size_t size) {
  // Try the current (8-byte) encodings and the earlier (4-byte) ones: a real
  // table fits one. 4-byte ones read as 8-byte ones set bits above 31, and
  // 8-byte ones read as 4-byte ones put a zero word where a value or an
  // encoding should be (a zero encoding has no values, refused), so the
  // wrong width fails the walk in practice; if both ever fit, the table is
  // ambiguous and refused. (A table broken so that only the wrong width fits
  // cannot be told from a good one; the source then sees its layout change
  // between reads, which is fatal.)
  std::vector<Attr> wide, narrow;
  const std::string why8 = walk(data, size, 8, wide);
  const std::string why4 = walk(data, size, 4, narrow);
  if (why8.empty() && why4.empty() && !wide.empty()) {
    // (Both fit trivially when attr_count is 0: nothing to decode, nothing ambiguous.)
    fail("its bytes read consistently with both 8-byte and 4-byte attribute encodings (" +
         std::to_string(wide.size()) + " attributes either way)");
  }
  if (!why8.empty() && !why4.empty()) {
    fail("with 8-byte encodings, " + why8 + "; with 4-byte encodings, " + why4);
  }
  const bool is8 = why8.empty();
  const std::vector<Attr>& attrs = is8 ? wide : narrow;

  GpuMetrics m;
  const Header h = load<Header>(data);
  m.format_revision = h.format_revision;
  m.content_revision = h.content_revision;
  m.structure_size = h.structure_size;
  m.layout = std::string(kLayout19) + (is8 ? ", 8-byte encodings" : ", 4-byte encodings");
  m.attribute_count = static_cast<std::uint32_t>(attrs.size());
  m.encoding_bytes = static_cast<std::uint8_t>(is8 ? 8 : 4);

  bool seen[64] = {};  // ids read here are all below 64
  for (const Attr& a : attrs) {
    const char* name = id_name(a.id);
    if (name == nullptr) continue;  // an attribute this parser does not read: skipped whole
    if (seen[a.id]) fail(std::string(name) + " appears twice: which one holds the value is ambiguous");
    seen[a.id] = true;
    switch (a.id) {
      case kTemperatureHotspot: store(data, a, m.temperature_hotspot_c); break;
      case kTemperatureMem: store(data, a, m.temperature_mem_c); break;
      case kTemperatureVrsoc: store(data, a, m.temperature_vrsoc_c); break;
      case kCurrSocketPower:
        if (a.unit != kUnitPower1) {
          fail("curr_socket_power has unit " + std::to_string(a.unit) + ", not watts (AMDGPU_METRICS_UNIT_POWER_1)");
        }
        store(data, a, m.curr_socket_power_w);
        break;
      case kAverageGfxActivity: store(data, a, m.average_gfx_activity_pct); break;
      case kAverageUmcActivity: store(data, a, m.average_umc_activity_pct); break;
      case kEnergyAccumulator:
        // The 2^-16 J count of formats 1.4-1.8 ("Energy (15.259uJ (2^-16)
        // units)"); enum amdgpu_metrics_attr_unit has no energy unit, and the
        // driver encodes it as AMDGPU_METRICS_UNIT_NONE. Another unit would
        // be a new meaning.
        if (a.unit != kUnitNone) {
          fail("energy_accumulator has unit " + std::to_string(a.unit) +
               ", not the unit-less 2^-16 J count (AMDGPU_METRICS_UNIT_NONE)");
        }
        store(data, a, m.energy_accumulator);
        break;
      case kSystemClockCounter: {
        std::uint64_t raw = kNotSupported64;
        store(data, a, raw);
        const std::int64_t unit = time_unit_ns(a);
        if (raw != kNotSupported64 && raw > kNotSupported64 / static_cast<std::uint64_t>(unit)) {
          fail("system_clock_counter = " + std::to_string(raw) + " overflows 64 bits in ns");
        }
        m.system_clock_counter = raw == kNotSupported64 ? raw : raw * static_cast<std::uint64_t>(unit);
        break;
      }
      case kAccumulationCounter: store(data, a, m.accumulation_counter); break;
      case kGfxclkLockStatus: store(data, a, m.gfxclk_lock_status); break;
      case kFirmwareTimestamp:
        m.firmware_tick_ns = time_unit_ns(a);
        store(data, a, m.firmware_timestamp);
        break;
      case kCurrentGfxclk:
        // One value per XCC; this struct keeps MAX_GFX_CLKS (8) of them, as
        // the fixed layouts do.
        for (unsigned k = 0; k < a.inst && k < static_cast<unsigned>(layouts::kMaxGfxClks); ++k) {
          bool ones = false;
          const std::uint64_t v = value(data, a, k, ones);
          if (!ones && v >= kNotSupported16) fail("current_gfxclk[" + std::to_string(k) + "] does not fit 16 bits");
          m.current_gfxclk_raw[k] = ones ? kNotSupported16 : static_cast<std::uint16_t>(v);
        }
        break;
      case kCurrentUclk: store(data, a, m.current_uclk_mhz); break;
      case kNumPartition: store(data, a, m.num_partition); break;
      default: break;
    }
  }
  return m;
}

}  // namespace v19

std::string sizes_of(std::uint8_t frev, std::uint8_t crev) {
  std::string out;
  for (const auto& l : gpu_metrics_layouts()) {
    if (l.format_revision != frev || l.content_revision != crev) continue;
    if (!out.empty()) out += " or ";
    out += std::to_string(l.structure_size) + " (" + l.name + ")";
  }
  return out;
}

std::string revision(std::uint8_t frev, std::uint8_t crev) {
  return std::to_string(frev) + "." + std::to_string(crev);
}

}  // namespace

const std::vector<GpuMetricsLayout>& gpu_metrics_layouts() {
  static const std::vector<GpuMetricsLayout> layouts = {
      {1, 4, static_cast<std::uint16_t>(sizeof(V1_4)), kLayout14},
      {1, 5, static_cast<std::uint16_t>(sizeof(V1_5)), kLayout15},
      {1, 6, static_cast<std::uint16_t>(sizeof(V1_6a)), kLayout16a},
      {1, 6, static_cast<std::uint16_t>(sizeof(V1_6b)), kLayout16b},
      {1, 7, static_cast<std::uint16_t>(sizeof(V1_7)), kLayout17},
      {1, 8, static_cast<std::uint16_t>(sizeof(V1_8)), kLayout18},
      {1, 9, 0, kLayout19},
  };
  return layouts;
}

std::vector<std::uint16_t> GpuMetrics::current_gfxclk_mhz() const {
  std::vector<std::uint16_t> out;
  for (const auto v : current_gfxclk_raw) {
    if (v != kNotSupported16) out.push_back(v);
  }
  return out;
}

GpuMetrics parse_gpu_metrics(const std::uint8_t* data, std::size_t size) {
  if (data == nullptr || size < sizeof(Header)) {
    throw GpuMetricsFormatError("gpu_metrics: " + std::to_string(size) +
                                " bytes, shorter than the 4-byte header; nothing to parse");
  }
  const Header h = load<Header>(data);
  const std::string rev = revision(h.format_revision, h.content_revision);
  if (h.format_revision == 1 && h.content_revision == 9) {
    // Attribute-encoded: any structure_size, but the bytes read must be it.
    if (size != h.structure_size) {
      throw GpuMetricsFormatError("gpu_metrics: revision 1.9 header says structure_size " +
                                  std::to_string(h.structure_size) + " but " + std::to_string(size) +
                                  " bytes were read" +
                                  (size < h.structure_size ? " (truncated)" : " (trailing bytes)"));
    }
    if (size < v19::kFixedBytes) {
      throw GpuMetricsFormatError("gpu_metrics: revision 1.9 table of " + std::to_string(size) +
                                  " bytes has no room for its attr_count (8 bytes with the header)");
    }
    return v19::decode_v19(data, size);
  }
  const std::string known = sizes_of(h.format_revision, h.content_revision);
  if (known.empty()) {
    throw GpuMetricsFormatError("gpu_metrics: format revision " + rev + " (structure_size " +
                                std::to_string(h.structure_size) + ", " + std::to_string(size) +
                                " bytes read) is not supported; this parser knows revisions 1.4 to 1.9");
  }
  const GpuMetricsLayout* layout = nullptr;
  for (const auto& l : gpu_metrics_layouts()) {
    if (l.format_revision == h.format_revision && l.content_revision == h.content_revision &&
        l.structure_size == h.structure_size) {
      layout = &l;
    }
  }
  if (layout == nullptr) {
    throw GpuMetricsFormatError("gpu_metrics: revision " + rev + " with structure_size " +
                                std::to_string(h.structure_size) + " matches no known layout (expected " + known +
                                "); " + std::to_string(size) + " bytes read");
  }
  if (size != h.structure_size) {
    throw GpuMetricsFormatError("gpu_metrics: revision " + rev + " header says structure_size " +
                                std::to_string(h.structure_size) + " but " + std::to_string(size) +
                                " bytes were read" + (size < h.structure_size ? " (truncated)" : " (trailing bytes)"));
  }
  // Each layout has its own size, so the size picks the struct.
  switch (h.structure_size) {
    case sizeof(V1_4): return decode<V1_4>(data, layout->name);
    case sizeof(V1_5): return decode<V1_5>(data, layout->name);
    case sizeof(V1_6a): return decode<V1_6a>(data, layout->name);
    case sizeof(V1_6b): return decode<V1_6b>(data, layout->name);
    case sizeof(V1_7): return decode<V1_7>(data, layout->name);
    case sizeof(V1_8): return decode<V1_8>(data, layout->name);
    default: break;
  }
  throw GpuMetricsFormatError("gpu_metrics: internal error: layout " + std::string(layout->name) + " has no decoder");
}


// --------------------------------------------------------------- files

namespace {

// Opens a sysfs file read-only; a missing file or no permission is a
// DeviceUnavailable that says where and what is needed.
int open_sysfs(const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) return fd;
  const int err = errno;
  std::string why = path + ": " + std::strerror(err) + ". ";
  if (err == ENOENT || err == ENOTDIR) {
    why += std::string("No ") + what +
           " file there: the amdgpu kernel driver must be loaded and bound to the GPU (modprobe amdgpu; "
           "see `lspci -k`), and the GPU's firmware must provide it.";
  } else if (err == EACCES || err == EPERM) {
    why += "Reading it needs permission (run as a user allowed to read the amdgpu sysfs files, e.g. in the "
           "'render' or 'video' group, or as root).";
  } else {
    why += "The amdgpu driver did not let it be opened.";
  }
  throw DeviceUnavailable(why);
}

// One pread of the whole file from offset 0. Returns bytes read, or -1 with errno.
ssize_t read_whole(int fd, std::uint8_t* buf, std::size_t cap) {
  for (;;) {
    const ssize_t n = ::pread(fd, buf, cap, 0);
    if (n >= 0 || errno != EINTR) return n;
  }
}

bool valid_ts(std::uint64_t v) { return v != 0 && v != kNotSupported64; }

}  // namespace

GpuMetricsSource::GpuMetricsSource(std::string path, GpuMetricsChannel channel, GpuMetricsClock clock)
    : path_(std::move(path)), channel_(channel), clock_(clock) {
  // A page: the driver never returns more (it truncates at PAGE_SIZE - 1),
  // and one spare byte tells "exactly structure_size" from "more than that".
  buf_.resize(4097);
  fd_ = open_sysfs(path_, "gpu_metrics");
  try {
    if (!read_table(first_)) {
      if (pending_status_ == PollStatus::kFatalError) throw GpuMetricsFormatError(last_error_);
      throw DeviceUnavailable(path_ + ": " + last_error_);
    }
    if (clock_ == GpuMetricsClock::kAuto) {
      // Some firmware leaves firmware_timestamp unset (all ones) or zero:
      // fall back to the driver's boottime stamp rather than dedupe on a constant.
      clock_ = valid_ts(first_.firmware_timestamp) ? GpuMetricsClock::kFirmware : GpuMetricsClock::kBoottime;
    } else if (clock_ == GpuMetricsClock::kFirmware && !valid_ts(first_.firmware_timestamp)) {
      throw DeviceUnavailable(path_ + ": clock='firmware' but this firmware leaves firmware_timestamp unset (" +
                              std::to_string(first_.firmware_timestamp) + "); use clock='boottime' or 'auto'");
    }
    if (channel_ == GpuMetricsChannel::kEnergy && first_.energy_accumulator == kNotSupported64) {
      throw DeviceUnavailable(path_ + ": channel='energy' but this firmware does not report the energy "
                              "accumulator; use channel='socket'");
    }
    if (channel_ == GpuMetricsChannel::kSocket && first_.curr_socket_power_w == kNotSupported16) {
      throw DeviceUnavailable(path_ + ": channel='socket' but this firmware does not report curr_socket_power; "
                              "use channel='energy'");
    }
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  const bool fw = clock_ == GpuMetricsClock::kFirmware;
  info_.name = std::string("amd gpu_metrics ") + first_.layout + " (" +
               (channel_ == GpuMetricsChannel::kEnergy ? "energy" : "socket") + ") " + path_;
  // The firmware clock's tick: 10 ns in 1.4-1.8, the field's unit in 1.9.
  info_.clock_domain = fw ? (first_.firmware_tick_ns == 1 ? "amd-pmfw-1ns" : "amd-pmfw-10ns") : "boottime";
  info_.tick_ns = fw ? static_cast<double>(first_.firmware_tick_ns) : 1.0;
  info_.channel_mask = 1u << kTotal;
  // Unknown here (0): the PMFW refreshes its metrics about once a
  // millisecond (paper Section III), but drivers since December 2025 serve
  // one cached table for SMU_GPU_METRICS_CACHE_INTERVAL (5 ms, rounded up to
  // jiffies) and older ones build one per read, so the period a reader sees
  // depends on the driver. The backend measures it from distinct firmware
  // timestamps while the GPU is idle (fingrav_native.backends.amd).
  info_.native_period_ns = 0;
  info_.has_sequence = false;
  // Energy readings average over the gap to the previous table, and each
  // carries that gap as its own window; the declared default is the
  // documented cache interval, the shortest gap on a caching driver.
  // curr_socket_power is documented by the kernel only as "Power (Watts)":
  // no window is declared (0).
  info_.window_ns = channel_ == GpuMetricsChannel::kEnergy ? static_cast<std::uint32_t>(kDriverCacheIntervalNs) : 0u;
}

GpuMetricsSource::~GpuMetricsSource() {
  if (fd_ >= 0) ::close(fd_);
}

GpuMetricsStats GpuMetricsSource::stats() const noexcept {
  GpuMetricsStats s;
  s.reads = reads_.load(std::memory_order_relaxed);
  s.tables = tables_.load(std::memory_order_relaxed);
  s.emitted = emitted_.load(std::memory_order_relaxed);
  s.unpaired = unpaired_.load(std::memory_order_relaxed);
  s.energy_resets = energy_resets_.load(std::memory_order_relaxed);
  s.long_gaps = long_gaps_.load(std::memory_order_relaxed);
  return s;
}

bool GpuMetricsSource::read_table(GpuMetrics& out) {
  const ssize_t n = read_whole(fd_, buf_.data(), buf_.size());
  if (n < 0) {
    const int err = errno;
    last_error_ = "read " + path_ + ": " + std::strerror(err);
    // The device is gone (unplugged, driver unbound): no later read will work.
    pending_status_ = (err == ENODEV || err == ENOENT || err == ENXIO) ? PollStatus::kFatalError
                                                                       : PollStatus::kTransientError;
    return false;
  }
  try {
    out = parse_gpu_metrics(buf_.data(), static_cast<std::size_t>(n));
  } catch (const GpuMetricsFormatError& e) {
    last_error_ = path_ + ": " + e.what();
    pending_status_ = PollStatus::kFatalError;
    return false;
  }
  reads_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

PollResult GpuMetricsSource::fail(PollStatus status, std::string why) {
  last_error_ = std::move(why);
  return {0, status};
}

PollResult GpuMetricsSource::poll(Reading* out, std::size_t max) {
  if (max == 0) return {};
  GpuMetrics m;
  if (!read_table(m)) return {0, pending_status_};
  if (m.structure_size != first_.structure_size || m.layout != first_.layout ||
      m.firmware_tick_ns != first_.firmware_tick_ns) {
    return fail(PollStatus::kFatalError, path_ + ": the gpu_metrics layout changed from " + first_.layout + " to " +
                                             m.layout + " while sampling (driver reloaded?)");
  }
  const bool fw = clock_ == GpuMetricsClock::kFirmware;
  std::int64_t ts;
  bool is_new;
  if (fw) {
    if (!valid_ts(m.firmware_timestamp)) {
      return fail(PollStatus::kFatalError, path_ + ": firmware_timestamp became unset (" +
                                               std::to_string(m.firmware_timestamp) + ") while sampling");
    }
    ts = static_cast<std::int64_t>(m.firmware_timestamp);
    if (have_prev_ && ts < prev_ts_) {
      // The PMFW clock restarted (GPU reset): readings before and after are
      // on different clocks, and a clock map fitted on one is wrong for the other.
      return fail(PollStatus::kFatalError,
                  path_ + ": firmware_timestamp went backwards from " + std::to_string(prev_ts_) + " to " +
                      std::to_string(ts) + " (the power-management firmware restarted, e.g. a GPU reset); "
                      "restart the measurement so the clock map is fitted again");
    }
    is_new = !have_prev_ || ts != prev_ts_;
    if (!is_new && m.energy_accumulator != seen_energy_) {
      // New data under an old stamp: this firmware does not advance the
      // timestamp, and deduplicating on it would merge distinct readings.
      seen_energy_ = m.energy_accumulator;
      if (++stuck_tables_ >= kStuckTablesLimit) {
        return fail(PollStatus::kFatalError,
                    path_ + ": firmware_timestamp stayed at " + std::to_string(ts) + " while the energy accumulator "
                    "changed " + std::to_string(stuck_tables_) + " times: this firmware does not advance its "
                    "timestamp; construct the source with clock='boottime'");
      }
    }
  } else {
    // No firmware clock: a table is new when the firmware's accumulators
    // moved; it is stamped with the driver's boottime at the first read that
    // saw it (late by up to one poll period).
    ts = static_cast<std::int64_t>(m.system_clock_counter);
    is_new = !have_prev_ || m.energy_accumulator != prev_energy_ || m.accumulation_counter != prev_acc_;
    if (have_prev_ && is_new && ts <= prev_ts_) {
      return fail(PollStatus::kFatalError, path_ + ": system_clock_counter did not advance (" +
                                               std::to_string(prev_ts_) + " then " + std::to_string(ts) + ")");
    }
  }

  if (!is_new) {
    // The same table again: hand back the reading already returned, which
    // the sampler counts as a duplicate.
    if (!have_last_) return {};
    out[0] = last_;
    return {1, PollStatus::kOk};
  }
  tables_.fetch_add(1, std::memory_order_relaxed);
  stuck_tables_ = 0;
  seen_energy_ = m.energy_accumulator;

  Reading r;
  r.source_ts = ts;
  r.source_seq =
      m.accumulation_counter != kNotSupported64 ? m.accumulation_counter : tables_.load(std::memory_order_relaxed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto& p : r.power_w) p = nan;

  const bool had_prev = have_prev_;
  const std::int64_t dt_ticks = ts - prev_ts_;
  const std::uint64_t prev_energy = prev_energy_;
  have_prev_ = true;
  prev_ts_ = ts;
  prev_energy_ = m.energy_accumulator;
  prev_acc_ = m.accumulation_counter;

  if (channel_ == GpuMetricsChannel::kSocket) {
    if (m.curr_socket_power_w == kNotSupported16) {
      return fail(PollStatus::kTransientError, path_ + ": curr_socket_power not reported in this table");
    }
    r.power_w[kTotal] = static_cast<float>(m.curr_socket_power_w);
    r.window_ns = 0;
  } else {
    if (!had_prev) {
      // The first table has no predecessor to difference against.
      unpaired_.fetch_add(1, std::memory_order_relaxed);
      return {};
    }
    const double tick = fw ? static_cast<double>(first_.firmware_tick_ns) : 1.0;
    const double window_ns = static_cast<double>(dt_ticks) * tick;
    if (window_ns > static_cast<double>(std::numeric_limits<std::uint32_t>::max())) {
      long_gaps_.fetch_add(1, std::memory_order_relaxed);
      unpaired_.fetch_add(1, std::memory_order_relaxed);
      return fail(PollStatus::kTransientError,
                  path_ + ": " + std::to_string(window_ns * 1e-9) +
                      " s between consecutive tables, longer than a reading's window can hold (4.29 s); "
                      "no reading over that gap, derivation restarts");
    }
    // Unsigned difference: a 64-bit wrap of the accumulator comes out right.
    const std::uint64_t de = m.energy_accumulator - prev_energy;
    // W = dE[J] / dt[s] = de * 2^-16 / (window_ns * 1e-9), in one rounding-friendly order.
    const double watts = static_cast<double>(de) * 1e9 / (65536.0 * window_ns);
    if (!(watts <= kMaxPlausibleW)) {
      energy_resets_.fetch_add(1, std::memory_order_relaxed);
      unpaired_.fetch_add(1, std::memory_order_relaxed);
      return fail(PollStatus::kTransientError,
                  path_ + ": energy accumulator went from " + std::to_string(prev_energy) + " to " +
                      std::to_string(m.energy_accumulator) + " over " + std::to_string(window_ns) +
                      " ns, which is no physical power (accumulator reset?); derivation restarts");
    }
    r.power_w[kTotal] = static_cast<float>(watts);
    r.flags = kFlagDerived;
    r.window_ns = static_cast<std::uint32_t>(window_ns);
  }
  last_ = r;
  have_last_ = true;
  emitted_.fetch_add(1, std::memory_order_relaxed);
  out[0] = r;
  return {1, PollStatus::kOk};
}

// --------------------------------------------------------------- hwmon

std::uint64_t parse_hwmon_microwatts(const char* text, std::size_t size) {
  std::size_t end = size;
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) --end;
  if (end == 0) throw std::invalid_argument("hwmon power file: empty");
  if (end > 20) throw std::invalid_argument("hwmon power file: '" + std::string(text, end) + "' is too long");
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < end; ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') {
      throw std::invalid_argument("hwmon power file: '" + std::string(text, end) + "' is not a decimal microwatt count");
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      throw std::invalid_argument("hwmon power file: '" + std::string(text, end) + "' overflows 64 bits");
    }
    v = v * 10 + digit;
  }
  return v;
}

HwmonPowerSource::HwmonPowerSource(std::string path) : path_(std::move(path)) {
  const auto slash = path_.find_last_of('/');
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  averaged_ = base.find("average") != std::string::npos;
  fd_ = open_sysfs(path_, "hwmon power");
  std::uint64_t uw = 0;
  if (!read_value(uw)) {
    ::close(fd_);
    fd_ = -1;
    throw DeviceUnavailable(path_ + ": " + last_error_);
  }
  info_.name = "amd hwmon " + base + " " + path_;
  // The value is stamped with host time at the read that first saw it.
  info_.clock_domain = "host-monotonic-raw";
  info_.tick_ns = 1.0;
  info_.channel_mask = 1u << kTotal;
  info_.native_period_ns = 0;  // the driver asks the firmware on each read; its refresh rate is not documented
  info_.has_sequence = false;
  // power1_average's averaging window is the firmware's and is not
  // documented by the kernel; power1_input is documented as instantaneous.
  info_.window_ns = 0;
}

HwmonPowerSource::~HwmonPowerSource() {
  if (fd_ >= 0) ::close(fd_);
}

bool HwmonPowerSource::read_value(std::uint64_t& uw) {
  char text[64];
  const ssize_t n = read_whole(fd_, reinterpret_cast<std::uint8_t*>(text), sizeof(text));
  if (n < 0) {
    last_error_ = "read " + path_ + ": " + std::strerror(errno);
    return false;
  }
  try {
    uw = parse_hwmon_microwatts(text, static_cast<std::size_t>(n));
  } catch (const std::invalid_argument& e) {
    last_error_ = path_ + ": " + e.what();
    return false;
  }
  return true;
}

std::uint64_t HwmonPowerSource::read_microwatts() {
  std::uint64_t uw = 0;
  if (!read_value(uw)) throw std::runtime_error(last_error_);
  return uw;
}

PollResult HwmonPowerSource::poll(Reading* out, std::size_t max) {
  if (max == 0) return {};
  std::uint64_t uw = 0;
  if (!read_value(uw)) return {0, PollStatus::kTransientError};
  const std::int64_t now = host_now_ns();
  if (have_last_ && uw == last_uw_) {
    // Unchanged: most likely the firmware has not refreshed the value yet.
    out[0] = last_;
    return {1, PollStatus::kOk};
  }
  Reading r;
  r.source_ts = now;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto& p : r.power_w) p = nan;
  r.power_w[kTotal] = static_cast<float>(static_cast<double>(uw) * 1e-6);
  r.window_ns = 0;
  last_ = r;
  last_uw_ = uw;
  have_last_ = true;
  out[0] = r;
  return {1, PollStatus::kOk};
}

}  // namespace fingrav::amd
