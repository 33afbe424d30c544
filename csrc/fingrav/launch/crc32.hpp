// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320, initial and final
// XOR 0xFFFFFFFF): the checksum of Python's zlib.crc32, which the journal
// reader (python/fingrav_native/files/_journal.py) checks on every record.
// Ours, so the tool libraries link no zlib into an application.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fingrav::launch {

// The CRC-32 of n bytes at data, continuing from `crc` (the value returned for
// the bytes before them; 0 to start), as zlib.crc32(data, crc): so
// crc32(b, m, crc32(a, n)) is the CRC of a's n bytes followed by b's m.
// Slice-by-8 (eight 256-entry tables, eight bytes a step): about 1 ns per
// 8 bytes where the bytewise table takes about 1 ns per byte.
std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc = 0) noexcept;

}  // namespace fingrav::launch
