// A minimal reader of launch journals for the C++ tests: the frames, the
// records of every LNCH, the names of every SYMB and the last STAT's numbers.
// Independent of LaunchCapture's writer code (its own CRC, its own parse), so a
// framing mistake in one is not mirrored by the other.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fingrav/launch/launch_record.hpp"

namespace launch_test {

inline std::uint32_t crc32_bitwise(const std::string& s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

struct Frame {
  std::string tag;
  std::string payload;
};

struct Journal {
  bool magic_ok = false;
  std::vector<Frame> frames;
  std::string torn;  // why reading stopped early; empty when the file ended on a frame boundary
  std::vector<fingrav::launch::LaunchRecord> records;
  std::vector<std::string> names;
  std::string last_stat;
  std::string head;
  std::size_t bracket_rows = 0;
  std::vector<std::string> notes;
};

template <typename T>
T get_le(const std::string& s, std::size_t at) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(static_cast<unsigned char>(s[at + i])) << (8 * i));
  return v;
}

// The JSON string literals of `text` after `key` up to the closing bracket
// (the writer's SYMB names); \" \\ and \uXXXX below 0x80 are decoded.
inline std::vector<std::string> json_strings_after(const std::string& text, const std::string& key) {
  std::vector<std::string> out;
  std::size_t i = text.find(key);
  if (i == std::string::npos) return out;
  i = text.find('[', i);
  while (i < text.size() && text[i] != ']') {
    if (text[i] != '"') { ++i; continue; }
    std::string s;
    ++i;
    while (i < text.size() && text[i] != '"') {
      if (text[i] == '\\') {
        const char e = text[i + 1];
        if (e == 'u') {
          s.push_back(static_cast<char>(std::stoi(text.substr(i + 2, 4), nullptr, 16)));
          i += 6;
          continue;
        }
        s.push_back(e);
        i += 2;
        continue;
      }
      s.push_back(text[i++]);
    }
    ++i;
    out.push_back(s);
  }
  return out;
}

inline std::size_t npy_data_offset(const std::string& npy) {
  return 10 + get_le<std::uint16_t>(npy, 8);
}

inline Journal read_journal(const std::string& path) {
  Journal j;
  std::ifstream f(path, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  j.magic_ok = data.size() >= 8 && std::memcmp(data.data(), "FGJRNL1\n", 8) == 0;
  std::size_t pos = 8;
  while (pos < data.size()) {
    if (data.size() - pos < 16) { j.torn = "frame cut short"; break; }
    Frame fr{data.substr(pos, 4), {}};
    const auto len = get_le<std::uint64_t>(data, pos + 4);
    const auto crc = get_le<std::uint32_t>(data, pos + 12);
    if (len > data.size() - pos - 16) { j.torn = "payload cut short"; break; }
    fr.payload = data.substr(pos + 16, len);
    if (crc32_bitwise(fr.payload) != crc) { j.torn = "crc mismatch"; break; }
    pos += 16 + len;
    if (fr.tag == "LNCH") {
      const std::size_t off = npy_data_offset(fr.payload);
      const std::size_t n = (fr.payload.size() - off) / sizeof(fingrav::launch::LaunchRecord);
      for (std::size_t i = 0; i < n; ++i) {
        fingrav::launch::LaunchRecord r{};
        std::memcpy(&r, fr.payload.data() + off + i * sizeof r, sizeof r);
        j.records.push_back(r);
      }
    } else if (fr.tag == "SYMB") {
      for (auto& s : json_strings_after(fr.payload, "\"names\"")) j.names.push_back(s);
    } else if (fr.tag == "STAT") {
      j.last_stat = fr.payload;
    } else if (fr.tag == "HEAD") {
      j.head = fr.payload;
    } else if (fr.tag == "BRBT" || fr.tag == "BRRT") {
      j.bracket_rows += (fr.payload.size() - npy_data_offset(fr.payload)) / 24;
    } else if (fr.tag == "NOTE") {
      j.notes.push_back(fr.payload);
    }
    j.frames.push_back(std::move(fr));
  }
  return j;
}

// The integer after "key": in a JSON object written without nesting.
inline long long json_int(const std::string& text, const std::string& key) {
  const std::size_t i = text.find("\"" + key + "\":");
  if (i == std::string::npos) return -1;
  return std::stoll(text.substr(i + key.size() + 3));
}

inline bool json_true(const std::string& text, const std::string& key) {
  return text.find("\"" + key + "\": true") != std::string::npos;
}

}  // namespace launch_test
