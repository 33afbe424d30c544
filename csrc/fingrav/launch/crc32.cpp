#include "fingrav/launch/crc32.hpp"

#include <array>
#include <cstring>

namespace fingrav::launch {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "slice-by-8 reads eight bytes as a little-endian word");

constexpr std::uint32_t kPoly = 0xEDB88320u;

// t[0] is the bytewise table; t[k][b] is the CRC register after byte b is
// followed by k zero bytes, so eight table lookups advance eight bytes at once
// (Kounavis and Berry, "A Systematic Approach to Building High Performance
// Software-Based CRC Generators", ISCC 2005).
struct Tables {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (kPoly ^ (c >> 1)) : (c >> 1);
      t[0][i] = c;
    }
    for (std::size_t k = 1; k < 8; ++k) {
      for (std::size_t i = 0; i < 256; ++i) t[k][i] = t[0][t[k - 1][i] & 0xFFu] ^ (t[k - 1][i] >> 8);
    }
  }
};
constexpr Tables kTables{};

}  // namespace

std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc) noexcept {
  const auto& t = kTables.t;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, 8);  // any alignment; one load
    w ^= c;
    c = t[7][w & 0xFFu] ^ t[6][(w >> 8) & 0xFFu] ^ t[5][(w >> 16) & 0xFFu] ^ t[4][(w >> 24) & 0xFFu] ^
        t[3][(w >> 32) & 0xFFu] ^ t[2][(w >> 40) & 0xFFu] ^ t[1][(w >> 48) & 0xFFu] ^ t[0][w >> 56];
  }
  for (; n > 0; --n, ++p) c = t[0][(c ^ *p) & 0xFFu] ^ (c >> 8);
  return ~c;
}

}  // namespace fingrav::launch
