#include "fingrav/kineto_scan.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <string>

namespace fingrav::kineto {

namespace {

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();

// A JSON number token as sign, significant digits and a power of ten:
// value = (-1)^neg * digits * 10^exp, digits without leading zeros (empty
// for zero). The exponent saturates far beyond any value that matters here.
struct Decimal {
  bool neg = false;
  std::string digits;
  std::int64_t exp = 0;
};

// Past 10^17 an exponent's digits stop counting: every value there is 0 or out of range alike.
constexpr std::int64_t kExpCap = 100000000000000000;

bool parse_number(const std::string& t, Decimal* d) {
  std::size_t i = 0, n = t.size();
  d->neg = false;
  d->digits.clear();
  d->exp = 0;
  if (i < n && t[i] == '-') {
    d->neg = true;
    ++i;
  }
  if (i >= n || t[i] < '0' || t[i] > '9') return false;
  std::int64_t frac = 0;
  for (; i < n && t[i] >= '0' && t[i] <= '9'; ++i) {
    if (!(d->digits.empty() && t[i] == '0')) d->digits.push_back(t[i]);
  }
  if (i < n && t[i] == '.') {
    ++i;
    if (i >= n || t[i] < '0' || t[i] > '9') return false;
    for (; i < n && t[i] >= '0' && t[i] <= '9'; ++i) {
      if (!(d->digits.empty() && t[i] == '0')) d->digits.push_back(t[i]);
      ++frac;
    }
  }
  std::int64_t e = 0;
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < n && (t[i] == '+' || t[i] == '-')) {
      eneg = t[i] == '-';
      ++i;
    }
    if (i >= n || t[i] < '0' || t[i] > '9') return false;
    for (; i < n && t[i] >= '0' && t[i] <= '9'; ++i) {
      if (e < kExpCap) e = e * 10 + (t[i] - '0');
    }
    if (eneg) e = -e;
  }
  if (i != n) return false;
  d->exp = e - frac;
  // Trailing zeros of the significand move into the exponent (the value is the same).
  while (!d->digits.empty() && d->digits.back() == '0') {
    d->digits.pop_back();
    ++d->exp;
  }
  return true;
}

// Rounds digits (a significand) half-even to its first `keep` digits;
// returns the new significand (it may gain a digit: 999 -> 1000).
std::string round_half_even(const std::string& digits, std::size_t keep, bool* carried) {
  *carried = false;
  std::string head = digits.substr(0, keep);
  const std::string rest = digits.substr(keep);
  int cmp;  // rest against one half
  if (rest.empty()) {
    cmp = -1;
  } else if (rest[0] != '5') {
    cmp = rest[0] > '5' ? 1 : -1;
  } else {
    cmp = rest.find_first_not_of('0', 1) == std::string::npos ? 0 : 1;
  }
  const bool odd = !head.empty() && ((head.back() - '0') % 2 == 1);
  if (cmp > 0 || (cmp == 0 && odd)) {
    int i = static_cast<int>(head.size()) - 1;
    while (i >= 0 && head[static_cast<std::size_t>(i)] == '9') head[static_cast<std::size_t>(i--)] = '0';
    if (i < 0) {
      head.insert(head.begin(), '1');
      *carried = true;
    } else {
      ++head[static_cast<std::size_t>(i)];
    }
  }
  return head;
}

Int128 digits_value(const std::string& digits) {
  Int128 v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

bool micros_to_ns(const std::string& text, Int128* ns) {
  Decimal d;
  if (!parse_number(text, &d)) return false;
  if (d.digits.empty()) {
    *ns = 0;
    return true;
  }
  // Python's default context holds 28 significant digits: abs(d) in the range check and d * 1000 are
  // both d rounded half-even to 28 digits (times 1000 only moves the exponent).
  std::string digits = d.digits;
  std::int64_t exp = d.exp;
  if (digits.size() > 28) {
    bool carried = false;
    const std::int64_t dropped = static_cast<std::int64_t>(digits.size()) - 28;
    digits = round_half_even(digits, 28, &carried);
    exp += dropped;
  }
  // |us| < 2^63 / 1000, i.e. digits * 10^(exp + 3) < 9223372036854775808.
  static const std::string kLimit = "9223372036854775808";
  exp += 3;
  const std::int64_t adjusted = static_cast<std::int64_t>(digits.size()) - 1 + exp;
  if (adjusted > 18) return false;
  if (adjusted == 18) {
    std::string head = digits.substr(0, 19);
    head.resize(19, '0');
    if (head >= kLimit) return false;
  }
  // to_integral_value(): half-even to an integer.
  Int128 v;
  if (exp >= 0) {
    v = digits_value(digits);
    for (std::int64_t k = 0; k < exp; ++k) v *= 10;  // |value| < 2^63: exp is small here
  } else {
    const std::int64_t f = -exp;
    const std::int64_t n = static_cast<std::int64_t>(digits.size());
    if (f > n) {
      v = 0;  // below 0.1: rounds to 0
    } else {
      bool carried = false;
      v = digits_value(round_half_even(digits, static_cast<std::size_t>(n - f), &carried));
    }
  }
  *ns = d.neg ? -v : v;
  return true;
}

bool json_int64(const std::string& text, bool integer_token, std::int64_t* out) {
  Decimal d;
  if (!parse_number(text, &d)) return false;
  if (d.digits.empty()) {
    *out = 0;
    return true;
  }
  if (d.exp < 0) return false;  // not integral (trailing zeros are already in the exponent)
  if (static_cast<std::int64_t>(d.digits.size()) + d.exp > 19) return false;
  Int128 v = digits_value(d.digits);
  for (std::int64_t k = 0; k < d.exp; ++k) v *= 10;
  if (d.neg) v = -v;
  // Python ints take all of int64; a Decimal must satisfy abs(value) <= INT64_MAX.
  const Int128 lo = integer_token ? Int128{kI64Min} : -Int128{kI64Max};
  if (v < lo || v > Int128{kI64Max}) return false;
  *out = static_cast<std::int64_t>(v);
  return true;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void put_utf8(std::string* out, std::uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::uint32_t hex4(const std::string& raw, std::size_t i) {
  std::uint32_t v = 0;
  for (std::size_t k = 0; k < 4; ++k) v = v * 16 + static_cast<std::uint32_t>(hex_value(raw[i + k]));
  return v;
}

}  // namespace

std::string decode_string(const std::string& raw) {
  if (raw.find('\\') == std::string::npos) return raw;
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c != '\\' || i + 1 >= raw.size()) {
      out.push_back(c);
      continue;
    }
    const char e = raw[++i];
    switch (e) {
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        // The text was checked: four hex digits follow.
        std::uint32_t cp = hex4(raw, i + 1);
        i += 4;
        // A high surrogate followed by an escaped low one is one character (as Python's json reads it).
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 < raw.size() && raw[i + 1] == '\\' && raw[i + 2] == 'u') {
          const std::uint32_t lo = hex4(raw, i + 3);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        put_utf8(&out, cp);
        break;
      }
      default: out.push_back(e); break;  // " \ /
    }
  }
  return out;
}

namespace {

// A category as Python's str.lower() makes it, when that is ASCII: ASCII
// letters fold, U+212A KELVIN SIGN folds to 'k', and any other non-ASCII
// character folds to something non-ASCII (false: no category matches).
bool ascii_lower(const std::string& s, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out->push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
    } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x84 &&
               static_cast<unsigned char>(s[i + 2]) == 0xAA) {
      out->push_back('k');
      i += 2;
    } else {
      return false;
    }
  }
  return true;
}

enum class Cat { kOther, kKernel, kRuntime, kStep };

bool is(const std::string& s, const char* lit, std::size_t n) { return s.size() == n && std::memcmp(s.data(), lit, n) == 0; }

Cat classify(const std::string& raw) {
  // Kineto writes these in lower case: matched as they stand before any decoding or folding.
  if (is(raw, "kernel", 6)) return Cat::kKernel;
  if (is(raw, "cpu_op", 6) || is(raw, "user_annotation", 15)) return Cat::kStep;
  if (is(raw, "cuda_runtime", 12)) return Cat::kRuntime;
  if (is(raw, "ac2g", 4) || is(raw, "python_function", 15) || is(raw, "gpu_user_annotation", 19)) return Cat::kOther;
  std::string low;
  if (!ascii_lower(decode_string(raw), &low)) return Cat::kOther;
  if (low == "kernel") return Cat::kKernel;
  if (low == "cuda_runtime" || low == "cuda_driver" || low == "hip_runtime" || low == "runtime") return Cat::kRuntime;
  if (low == "user_annotation" || low == "operator" || low == "cpu_op") return Cat::kStep;
  return Cat::kOther;
}

// Exact ns of ts/dur: 0 ok, 1 not a number of microseconds, 2 out of range.
int micros(const Value& v, Int128* ns) {
  if (v.kind != ValueKind::kNumber) return 1;
  return micros_to_ns(v.text, ns) ? 0 : 2;
}

const char* const kStepPrefix = "ProfilerStep#";

}  // namespace

bool Scanner::SigKey::operator==(const SigKey& o) const { return std::memcmp(v, o.v, sizeof(v)) == 0; }

std::size_t Scanner::SigHash::operator()(const SigKey& k) const {
  std::uint64_t h = 0x9E3779B97F4A7C15ull;
  for (std::int64_t x : k.v) {
    h ^= static_cast<std::uint64_t>(x) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  }
  return static_cast<std::size_t>(h);
}

Scanner::Scanner(Limits limits) : limits_(limits) { stack_.reserve(64); }

std::uint64_t Scanner::kept_bytes() const {
  std::uint64_t b = k_start_.size() * (6 * sizeof(std::int64_t) + sizeof(std::int32_t));
  b += name_bytes_ + names_.size() * 48;  // a name and its map entry
  b += sig_name_.size() * (sizeof(std::int32_t) + 6 * sizeof(std::int64_t) + 80);
  b += (rt_corr_.size() + st_k_.size()) * 3 * sizeof(std::int64_t);
  for (const Value& v : f_) b += v.text.size();
  b += key_.size() + base_.text.size() + scratch_.size();
  return b;
}

void Scanner::keep_check() {
  const std::uint64_t b = kept_bytes();
  peak_kept_ = std::max(peak_kept_, b);
  if (b > limits_.max_kept_bytes) {
    fail(Status::kKept, "what the reader keeps (kernel, launch and step records, kernel names) passed " +
                            std::to_string(limits_.max_kept_bytes) + " bytes at byte " + std::to_string(pos()) +
                            " of the document (event " + std::to_string(cur_event_) + ")");
  }
}

void Scanner::fail(Status s, const std::string& what) {
  if (status_ != Status::kOk) return;
  status_ = s;
  message_ = what;
}

void Scanner::syntax(const char* what) {
  const std::uint64_t at = pos();
  fail(Status::kSyntax, std::string(what) + ": line " + std::to_string(line_) + " column " +
                            std::to_string(at - line_start_ + 1) + " (byte " + std::to_string(at) + ")");
}

void Scanner::reset_events() {
  k_start_.clear();
  k_end_.clear();
  k_device_.clear();
  k_stream_.clear();
  k_corr_.clear();
  k_event_.clear();
  k_sig_.clear();
  name_ids_.clear();
  names_.clear();
  name_bytes_ = 0;
  sig_ids_.clear();
  sig_name_.clear();
  sig_grid_.clear();
  sig_block_.clear();
  rt_corr_.clear();
  rt_ts_.clear();
  rt_end_.clear();
  st_k_.clear();
  st_ts_.clear();
  st_end_.clear();
  kernel_error_ = false;
  error_after_clock_ = false;
  err_event_ = -1;
  err_field_.clear();
  err_problem_ = Problem::kNone;
  err_value_.reset();
  n_events_ = 0;
  cur_event_ = -1;
}

void Scanner::feed(const char* data, std::size_t n) {
  if (failed()) return;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  const unsigned char* end = p + n;
  chunk_ = p;
  cur_ = p;
  while (p < end && !failed()) {
    switch (lex_) {
      case Lex::kBetween: p = structural(p, end); break;
      case Lex::kString: p = lex_string(p, end); break;
      case Lex::kNumber: p = lex_number(p, end); break;
      case Lex::kLiteral: p = lex_literal(p, end); break;
    }
  }
  offset_ += n;
  chunk_ = cur_ = nullptr;
}

const unsigned char* Scanner::structural(const unsigned char* p, const unsigned char* end) {
  while (p < end) {
    const unsigned char c = *p;
    if (c == ' ' || c == '\t' || c == '\r') {
      ++p;
      while (p < end && *p == ' ') ++p;  // indentation comes in runs
      continue;
    }
    cur_ = p;
    if (c == '\n') {
      ++p;
      ++line_;
      line_start_ = pos() + 1;
      continue;
    }
    if (c >= 0x80 && (c < 0xC2 || c > 0xF4)) {
      // Python decodes the whole text before parsing: a byte that starts no UTF-8 character is that error.
      fail(Status::kUtf8, "byte 0x" + std::string(1, "0123456789abcdef"[c >> 4]) +
                              std::string(1, "0123456789abcdef"[c & 15]) + " at byte " + std::to_string(pos()) +
                              " starts no UTF-8 character");
      return end;
    }
    switch (expect_) {
      case Expect::kEof:
        syntax("Extra data");
        return end;
      case Expect::kColon:
        if (c != ':') {
          syntax("Expecting ':' delimiter");
          return end;
        }
        expect_ = Expect::kValue;
        ++p;
        continue;
      case Expect::kCommaOrEnd: {
        const bool object = stack_.back().object;
        if (c == ',') {
          expect_ = object ? Expect::kKey : Expect::kValue;
          ++p;
          continue;
        }
        if ((c == ']' && !object) || (c == '}' && object)) {
          ++p;
          close_container();
          if (failed()) return end;
          continue;
        }
        syntax("Expecting ',' delimiter");
        return end;
      }
      case Expect::kKeyOrEnd:
      case Expect::kKey:
        if (c == '"') {
          const Role r = stack_.back().role;
          in_key_ = true;
          key_escaped_ = false;
          capture_ = r == Role::kRoot || r == Role::kEvent || r == Role::kArgs;
          key_.clear();
          cap_ = &key_;
          lex_ = Lex::kString;
          str_state_ = 0;
          utf8_need_ = 0;
          token_start_ = pos();
          return p + 1;
        }
        if (c == '}' && expect_ == Expect::kKeyOrEnd) {
          ++p;
          close_container();
          if (failed()) return end;
          continue;
        }
        syntax("Expecting property name enclosed in double quotes");
        return end;
      case Expect::kValue:
      case Expect::kValueOrEnd:
        if (c == ']' && expect_ == Expect::kValueOrEnd) {
          ++p;
          close_container();
          if (failed()) return end;
          continue;
        }
        begin_value(static_cast<char>(c));
        if (failed()) return end;
        if (c == '{' || c == '[') {
          ++p;
          continue;
        }
        // A scalar: strings and literals start past their first byte, numbers lex it themselves.
        return lex_ == Lex::kNumber ? p : p + 1;
    }
  }
  return p;
}

void Scanner::begin_value(char c) {
  Slot target = kNone;
  if (stack_.empty()) {
    target = kRootSlot;
  } else {
    Frame& f = stack_.back();
    if (f.object) {
      target = f.key_slot;
    } else if (f.role == Role::kEvents) {
      target = kEventSlot;
    } else if (f.role == Role::kDims) {
      target = kDimItem;
    } else if (f.role == Role::kCount) {
      target = kCountChild;
    }
  }
  Value* v = nullptr;  // the value this token or container is
  Role role = Role::kOther;
  Slot owner = kNone;
  switch (target) {
    case kRootSlot:
      if (c == '{') {
        root_dict_ = true;
        role = Role::kRoot;
      } else if (c == '[') {
        root_list_ = true;
        events_state_ = 1;
        reset_events();
        role = Role::kEvents;
      }
      break;
    case kTraceEvents:
      if (c == '[') {
        events_state_ = 1;
        reset_events();
        role = Role::kEvents;
      } else {
        events_state_ = 2;
      }
      break;
    case kEventSlot:
      cur_event_ = n_events_++;
      if (c == '{') {
        for (int s = kPh; s <= kBlock; ++s) f_[s].reset();
        args_dict_ = false;
        role = Role::kEvent;
      }
      break;
    case kArgsSlot:
      for (int s = kDevice; s <= kBlock; ++s) f_[s].reset();
      args_dict_ = c == '{';
      if (c == '{') {
        role = Role::kArgs;
        f_[kArgsSlot].reset();
        f_[kArgsSlot].kind = ValueKind::kObject;
      } else {
        v = &f_[kArgsSlot];  // kept as written, for the refusal that names it
      }
      break;
    case kBase:
      v = &base_;
      break;
    case kPh:
    case kCat:
    case kName:
    case kTs:
    case kDur:
    case kDevice:
    case kStream:
    case kCorr:
    case kGrid:
    case kBlock:
      v = &f_[target];
      break;
    case kDimItem: {
      Value& d = f_[stack_.back().slot];
      ++d.items;
      if (!(c == '-' || (c >= '0' && c <= '9'))) d.dims_bad = true;
      break;
    }
    case kCountChild: {
      Slot s = stack_.back().slot;
      ++(s == kBase ? base_ : f_[s]).items;
      break;
    }
    default:
      break;
  }
  if (v != nullptr) {
    v->reset();
    owner = target;
    if (c == '{' || c == '[') {
      v->kind = c == '{' ? ValueKind::kObject : ValueKind::kArray;
      role = (c == '[' && (target == kGrid || target == kBlock)) ? Role::kDims : Role::kCount;
    }
  }
  if (c == '{' || c == '[') {
    if (stack_.size() >= limits_.max_depth) {
      fail(Status::kDepth, "nests deeper than " + std::to_string(limits_.max_depth) + " levels at byte " +
                               std::to_string(pos()));
      return;
    }
    stack_.push_back(Frame{c == '{', role, owner, kNone});
    expect_ = c == '{' ? Expect::kKeyOrEnd : Expect::kValueOrEnd;
    return;
  }
  tok_slot_ = target;
  token_start_ = pos();
  in_key_ = false;
  capture_ = false;
  cap_ = nullptr;
  if (v != nullptr) {
    capture_ = true;
    cap_ = &v->text;
  } else if (target == kDimItem) {
    capture_ = true;
    scratch_.clear();
    cap_ = &scratch_;
  }
  if (c == '"') {
    if (v != nullptr) v->kind = ValueKind::kString;
    lex_ = Lex::kString;
    str_state_ = 0;
    utf8_need_ = 0;
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    if (v != nullptr) v->kind = ValueKind::kNumber;
    lex_ = Lex::kNumber;
    num_state_ = 0;
    int_digits_ = 0;
  } else if (c == 't' || c == 'f' || c == 'n' || c == 'N' || c == 'I') {
    static const char* const kLits[] = {"true", "false", "null", "NaN", "Infinity"};
    const int k = c == 't' ? 0 : c == 'f' ? 1 : c == 'n' ? 2 : c == 'N' ? 3 : 4;
    lit_ = kLits[k];
    lit_pos_ = 1;
    lex_ = Lex::kLiteral;
    if (v != nullptr) {
      v->kind = k == 0 ? ValueKind::kTrue : k == 1 ? ValueKind::kFalse : k == 2 ? ValueKind::kNull
                                                                                 : ValueKind::kConstant;
      if (k >= 3) v->text = lit_;
    }
    capture_ = false;
  } else {
    syntax("Expecting value");
  }
}

const unsigned char* Scanner::lex_string(const unsigned char* p, const unsigned char* end) {
  while (p < end) {
    if (str_state_ == 0 && utf8_need_ == 0) {
      const unsigned char* q = p;
      while (q < end) {
        const unsigned char c = *q;
        if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
        ++q;
      }
      if (capture_ && q > p) {
        cap_->append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(q - p));
        if (cap_->size() > limits_.max_kept_bytes) {
          cur_ = q;
          keep_check();
          return end;
        }
      }
      p = q;
      if (p == end) break;
      const unsigned char c = *p;
      cur_ = p;
      if (c == '"') {
        lex_ = Lex::kBetween;
        end_scalar();
        return p + 1;
      }
      if (c < 0x20) {
        syntax("Invalid control character in a string");
        return end;
      }
      if (c == '\\') {
        str_state_ = 1;
        if (in_key_) key_escaped_ = true;
      } else {
        // A UTF-8 lead byte and the range its next byte must fall in (RFC 3629, as Python's decoder).
        utf8_lo_ = 0x80;
        utf8_hi_ = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
          utf8_need_ = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
          utf8_need_ = 2;
          if (c == 0xE0) utf8_lo_ = 0xA0;
          if (c == 0xED) utf8_hi_ = 0x9F;  // no surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
          utf8_need_ = 3;
          if (c == 0xF0) utf8_lo_ = 0x90;
          if (c == 0xF4) utf8_hi_ = 0x8F;
        } else {
          fail(Status::kUtf8, "invalid start byte 0x" + std::string(1, "0123456789abcdef"[c >> 4]) +
                                  std::string(1, "0123456789abcdef"[c & 15]) + " at byte " + std::to_string(pos()));
          return end;
        }
      }
      if (capture_) cap_->push_back(static_cast<char>(c));
      ++p;
      continue;
    }
    const unsigned char c = *p;
    cur_ = p;
    if (utf8_need_ != 0) {
      if (c < utf8_lo_ || c > utf8_hi_) {
        fail(Status::kUtf8, "invalid continuation byte at byte " + std::to_string(pos()));
        return end;
      }
      utf8_lo_ = 0x80;
      utf8_hi_ = 0xBF;
      --utf8_need_;
    } else if (str_state_ == 1) {
      if (c == 'u') {
        str_state_ = 2;
        hex_left_ = 4;
      } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        str_state_ = 0;
      } else {
        syntax("Invalid \\escape");
        return end;
      }
    } else {
      if (hex_value(static_cast<char>(c)) < 0) {
        syntax("Invalid \\uXXXX escape");
        return end;
      }
      if (--hex_left_ == 0) str_state_ = 0;
    }
    if (capture_) cap_->push_back(static_cast<char>(c));
    ++p;
  }
  return p;
}

const unsigned char* Scanner::lex_number(const unsigned char* p, const unsigned char* end) {
  // States: 0 start, 1 after '-', 2 a leading 0, 3 integer digits, 4 after '.', 5 fraction digits,
  // 6 after 'e', 7 after the exponent's sign, 8 exponent digits.
  while (p < end) {
    const unsigned char c = *p;
    const bool digit = c >= '0' && c <= '9';
    int next = -1;
    switch (num_state_) {
      case 0: next = c == '-' ? 1 : c == '0' ? 2 : digit ? 3 : -1; break;
      case 1:
        if (c == 'I') {  // -Infinity
          cur_ = p;
          lex_ = Lex::kLiteral;
          lit_ = "-Infinity";
          lit_pos_ = 2;
          num_state_ = 0;
          if (tok_slot_ == kDimItem) {
            f_[stack_.back().slot].dims_bad = true;
          } else if (tok_slot_ == kBase || (tok_slot_ >= kPh && tok_slot_ <= kBlock)) {
            Value* v = tok_slot_ == kBase ? &base_ : &f_[tok_slot_];
            v->kind = ValueKind::kConstant;
            v->text = lit_;
          }
          capture_ = false;
          return p + 1;
        }
        next = c == '0' ? 2 : digit ? 3 : -1;
        break;
      case 2: next = c == '.' ? 4 : (c == 'e' || c == 'E') ? 6 : 99; break;
      case 3: next = digit ? 3 : c == '.' ? 4 : (c == 'e' || c == 'E') ? 6 : 99; break;
      case 4: next = digit ? 5 : -1; break;
      case 5: next = digit ? 5 : (c == 'e' || c == 'E') ? 6 : 99; break;
      case 6: next = (c == '+' || c == '-') ? 7 : digit ? 8 : -1; break;
      case 7: next = digit ? 8 : -1; break;
      case 8: next = digit ? 8 : 99; break;
      default: break;
    }
    if (next < 0) {
      cur_ = p;
      syntax(num_state_ <= 1 ? "Expecting value" : "Expecting digits in a number");
      return end;
    }
    if (next == 99) {  // the byte ends the number; it is read again as structure
      cur_ = p;
      lex_ = Lex::kBetween;
      end_scalar();
      return p;
    }
    if (next == 3 || next == 2) ++int_digits_;
    num_state_ = static_cast<std::uint8_t>(next);
    if (capture_) {
      cap_->push_back(static_cast<char>(c));
      if (cap_->size() > limits_.max_kept_bytes) {  // a number of gigabytes where a field is read
        cur_ = p;
        keep_check();
        return end;
      }
    }
    ++p;
  }
  return p;
}

const unsigned char* Scanner::lex_literal(const unsigned char* p, const unsigned char* end) {
  while (p < end) {
    cur_ = p;
    if (static_cast<char>(*p) != lit_[lit_pos_]) {
      syntax("Expecting value");
      return end;
    }
    ++p;
    if (lit_[++lit_pos_] == '\0') {
      lex_ = Lex::kBetween;
      end_scalar();
      return p;
    }
  }
  return p;
}

void Scanner::end_scalar() {
  if (in_key_) {
    in_key_ = false;
    key_done();
    expect_ = Expect::kColon;
    return;
  }
  if (num_state_ != 0 && (num_state_ == 2 || num_state_ == 3)) {
    // Python converts an integer token with int(): more digits than its limit are refused.
    if (limits_.max_int_digits != 0 && int_digits_ > limits_.max_int_digits) {
      fail(Status::kSyntax, "Exceeds the limit (" + std::to_string(limits_.max_int_digits) +
                                " digits) for integer string conversion: value has " + std::to_string(int_digits_) +
                                " digits at byte " + std::to_string(token_start_));
      return;
    }
  }
  if (lex_ == Lex::kBetween && num_state_ != 0) {
    const bool integer = num_state_ == 2 || num_state_ == 3;
    if (tok_slot_ == kDimItem) {
      Value& d = f_[stack_.back().slot];
      std::int64_t x = 0;
      if (d.items <= 3 && json_int64(scratch_, integer, &x)) {
        d.dims[d.items - 1] = x;
      } else {
        d.dims_bad = true;
      }
    } else if (tok_slot_ == kBase) {
      base_.integer = integer;
    } else if (tok_slot_ >= kPh && tok_slot_ <= kBlock) {
      f_[tok_slot_].integer = integer;
    }
  }
  num_state_ = 0;
  if (capture_ && cap_->size() > (1u << 16)) keep_check();  // rows check themselves; a long token here
  capture_ = false;
  cap_ = nullptr;
  after_value();
}

void Scanner::after_value() { expect_ = stack_.empty() ? Expect::kEof : Expect::kCommaOrEnd; }

namespace {

// A key's slot in a frame of `role`, from its text with escapes decoded.
bool key_is(const std::string& k, const char* lit) {
  const std::size_t n = std::strlen(lit);
  return k.size() == n && std::memcmp(k.data(), lit, n) == 0;
}

}  // namespace

void Scanner::key_done() {
  Frame& f = stack_.back();
  f.key_slot = kNone;
  if (f.role == Role::kCount) {
    f.key_slot = kCountChild;
    return;
  }
  if (!capture_) return;
  capture_ = false;
  cap_ = nullptr;
  const std::string decoded = key_escaped_ ? decode_string(key_) : std::string();
  const std::string& k = key_escaped_ ? decoded : key_;
  // The keys that matter are 2 to 19 bytes: anything else is skipped at once.
  if (k.size() < 2 || k.size() > 19) return;
  if (f.role == Role::kEvent) {
    switch (k.size()) {
      case 2:
        if (k[0] == 'p' && k[1] == 'h') f.key_slot = kPh;
        else if (k[0] == 't' && k[1] == 's') f.key_slot = kTs;
        break;
      case 3:
        if (key_is(k, "cat")) f.key_slot = kCat;
        else if (key_is(k, "dur")) f.key_slot = kDur;
        break;
      case 4:
        if (key_is(k, "name")) f.key_slot = kName;
        else if (key_is(k, "args")) f.key_slot = kArgsSlot;
        break;
      default:
        break;
    }
  } else if (f.role == Role::kArgs) {
    if (key_is(k, "device")) f.key_slot = kDevice;
    else if (key_is(k, "stream")) f.key_slot = kStream;
    else if (key_is(k, "correlation")) f.key_slot = kCorr;
    else if (key_is(k, "grid")) f.key_slot = kGrid;
    else if (key_is(k, "block")) f.key_slot = kBlock;
  } else if (f.role == Role::kRoot) {
    if (key_is(k, "traceEvents")) f.key_slot = kTraceEvents;
    else if (key_is(k, "baseTimeNanoseconds")) f.key_slot = kBase;
  }
}

void Scanner::close_container() {
  const Frame f = stack_.back();
  stack_.pop_back();
  if (f.role == Role::kEvent) {
    event_done();
  } else if (f.role == Role::kDims) {
    Value& d = f_[f.slot];
    if (d.items == 0 || d.items > 3) d.dims_bad = true;
  }
  after_value();
}

void Scanner::event_done() {
  const Value& ph = f_[kPh];
  if (ph.kind != ValueKind::kString || (ph.text != "X" && decode_string(ph.text) != "X")) return;
  const Value& cat = f_[kCat];
  const Cat k = cat.kind == ValueKind::kString ? classify(cat.text) : Cat::kOther;
  if (k == Cat::kOther) return;
  if (kernel_error_) return;  // the first refused kernel event ends what is kept
  if (k == Cat::kKernel) {
    kernel_event(args_dict_);
    return;
  }
  if (k == Cat::kRuntime) {
    context_event(false, std::string(), args_dict_);
    return;
  }
  const Value& name = f_[kName];
  if (name.kind != ValueKind::kString) return;
  const std::string n = decode_string(name.text);
  if (n.compare(0, std::strlen(kStepPrefix), kStepPrefix) != 0 || n.size() < std::strlen(kStepPrefix)) return;
  context_event(true, n.substr(std::strlen(kStepPrefix)), args_dict_);
}

void Scanner::context_event(bool step, const std::string& n, bool args_dict) {
  // Iterations and launches are optional context: a malformed one is left out, not fatal.
  Int128 ts = 0, d = 0;
  if (micros(f_[kTs], &ts) != 0) return;
  if (f_[kDur].kind != ValueKind::kMissing && micros(f_[kDur], &d) != 0) return;
  const Int128 end = ts + (d > 0 ? d : 0);
  if (end > Int128{kI64Max}) return;  // never on the clock, whatever the base time
  if (step) {
    if (n.empty() || n.size() > 18 || n.find_first_not_of("0123456789") != std::string::npos) return;
    st_k_.push_back(std::stoll(n));
    st_ts_.push_back(static_cast<std::int64_t>(ts));
    st_end_.push_back(static_cast<std::int64_t>(end));
  } else {
    const Value& c = f_[kCorr];
    std::int64_t corr = 0;
    if (!args_dict || c.kind != ValueKind::kNumber || !json_int64(c.text, c.integer, &corr)) return;
    rt_corr_.push_back(corr);
    rt_ts_.push_back(static_cast<std::int64_t>(ts));
    rt_end_.push_back(static_cast<std::int64_t>(end));
  }
  keep_check();
}

void Scanner::kernel_event(bool args_dict) {
  const std::int64_t i = cur_event_;
  auto refuse = [&](const char* field, Problem problem, const Value& v, bool after_clock) {
    kernel_error_ = true;
    error_after_clock_ = after_clock;
    err_event_ = i;
    err_field_ = field;
    err_problem_ = problem;
    err_value_ = v;
  };
  // A kernel's name is its signature: one absent is not guessed (Kineto writes it for every event).
  const Value& name = f_[kName];
  if (name.kind != ValueKind::kString) {
    return refuse("name", Problem::kNotString, name, false);
  }
  Int128 ts = 0, dur = 0;
  int r = micros(f_[kTs], &ts);
  if (r != 0) return refuse("ts", r == 1 ? Problem::kNotMicros : Problem::kMicrosRange, f_[kTs], false);
  r = micros(f_[kDur], &dur);
  if (r != 0) return refuse("dur", r == 1 ? Problem::kNotMicros : Problem::kMicrosRange, f_[kDur], false);
  if (dur < 0) return refuse("dur", Problem::kNegative, f_[kDur], false);
  const Int128 end = ts + dur;
  if (end > Int128{kI64Max}) return refuse("", Problem::kClock, Value(), false);
  // From here a refusal comes after the clock check, which needs the base time (known at the end).
  err_start_ = static_cast<std::int64_t>(ts);
  err_end_ = static_cast<std::int64_t>(end);
  static const Value kAbsent;
  // args absent or null: the trace says nothing of the launch; anything but an object is not guessed at.
  const Value& args = f_[kArgsSlot];
  if (args.kind != ValueKind::kMissing && args.kind != ValueKind::kNull && args.kind != ValueKind::kObject) {
    return refuse("args", Problem::kNotObject, args, true);
  }
  std::int64_t dims[2][3];
  const Slot dim_slots[2] = {kGrid, kBlock};
  const char* const dim_names[2] = {"args.grid", "args.block"};
  for (int j = 0; j < 2; ++j) {
    const Value& v = args_dict ? f_[dim_slots[j]] : kAbsent;
    if (v.kind == ValueKind::kMissing || v.kind == ValueKind::kNull) {
      dims[j][0] = dims[j][1] = dims[j][2] = -1;
    } else if (v.kind == ValueKind::kArray && !v.dims_bad) {
      std::copy(v.dims, v.dims + 3, dims[j]);
    } else {
      return refuse(dim_names[j], Problem::kDims, v, true);
    }
  }
  std::int64_t ids[3];
  const Slot id_slots[3] = {kDevice, kStream, kCorr};
  const char* const id_names[3] = {"args.device", "args.stream", "args.correlation"};
  for (int j = 0; j < 3; ++j) {
    const Value& v = args_dict ? f_[id_slots[j]] : kAbsent;
    ids[j] = -1;  // absent or null: the trace does not say
    if (v.kind == ValueKind::kNumber) {
      if (!json_int64(v.text, v.integer, &ids[j])) return refuse(id_names[j], Problem::kNotInt64, v, true);
    } else if (v.kind != ValueKind::kMissing && v.kind != ValueKind::kNull) {
      // Kineto writes ids as JSON numbers: "7" or true is another writer's guess, not read as one.
      return refuse(id_names[j], Problem::kNotInteger, v, true);
    }
  }
  std::int32_t name_id;
  auto it = name_ids_.find(name.text);
  if (it != name_ids_.end()) {
    name_id = it->second;
  } else {
    name_id = static_cast<std::int32_t>(names_.size());
    name_ids_.emplace(name.text, name_id);
    names_.push_back(name.text);
    name_bytes_ += 2 * name.text.size();
  }
  SigKey key{{name_id, dims[0][0], dims[0][1], dims[0][2], dims[1][0], dims[1][1], dims[1][2]}};
  std::int32_t sig;
  auto st = sig_ids_.find(key);
  if (st != sig_ids_.end()) {
    sig = st->second;
  } else {
    sig = static_cast<std::int32_t>(sig_name_.size());
    sig_ids_.emplace(key, sig);
    sig_name_.push_back(name_id);
    sig_grid_.insert(sig_grid_.end(), dims[0], dims[0] + 3);
    sig_block_.insert(sig_block_.end(), dims[1], dims[1] + 3);
  }
  k_start_.push_back(static_cast<std::int64_t>(ts));
  k_end_.push_back(static_cast<std::int64_t>(end));
  k_device_.push_back(ids[0]);
  k_stream_.push_back(ids[1]);
  k_corr_.push_back(ids[2]);
  k_event_.push_back(i);
  k_sig_.push_back(sig);
  keep_check();
}

Result Scanner::finish() {
  Result out;
  out.bytes = offset_;
  out.events = n_events_;
  cur_ = chunk_ = nullptr;
  if (!failed() && lex_ == Lex::kNumber && (num_state_ == 2 || num_state_ == 3 || num_state_ == 5 ||
                                            num_state_ == 8)) {
    lex_ = Lex::kBetween;
    end_scalar();  // a number at the very end of the document (a bare number: not a trace)
  }
  if (!failed() && (lex_ != Lex::kBetween || expect_ != Expect::kEof)) {
    const char* what = lex_ == Lex::kString ? "Unterminated string starting at"
                       : expect_ == Expect::kCommaOrEnd ? "Expecting ',' delimiter"
                       : expect_ == Expect::kColon ? "Expecting ':' delimiter"
                       : expect_ == Expect::kKey ? "Expecting property name enclosed in double quotes"
                                                 : "Expecting value";
    fail(Status::kSyntax, std::string(what) + ": the document ends at byte " + std::to_string(offset_) +
                              " (line " + std::to_string(line_) + ")");
  }
  out.kept_bytes = peak_kept_;
  if (failed()) {
    out.status = status_;
    out.message = message_;
    return out;
  }
  if (!(root_dict_ || root_list_) || events_state_ != 1) {
    out.status = Status::kNoEvents;
    return out;
  }
  std::int64_t base = 0;
  if (root_dict_ && base_.kind != ValueKind::kMissing) {
    bool ok = false;
    std::string digits;
    if (base_.kind == ValueKind::kNumber && base_.integer) {
      digits = base_.text;
    } else if (base_.kind == ValueKind::kString) {
      digits = decode_string(base_.text);
      if (digits.empty() || digits.size() > 19) digits = "-";  // not what str.isdigit() takes
    }
    if (!digits.empty() && digits.size() <= 19 && digits.find_first_not_of("0123456789") == std::string::npos) {
      const Int128 v = digits_value(digits);
      ok = v <= Int128{kI64Max};
      base = static_cast<std::int64_t>(v);
    }
    if (!ok) {
      out.status = Status::kBadBase;
      out.value = base_;
      return out;
    }
  }
  out.base_ns = base;
  const std::int64_t room = kI64Max - base;  // t is on the clock when base + t <= INT64_MAX
  for (std::size_t j = 0; j < k_end_.size(); ++j) {
    if (k_end_[j] > room) {
      out.status = Status::kBadKernel;
      out.event = k_event_[j];
      out.problem = Problem::kClock;
      return out;
    }
  }
  if (kernel_error_) {
    out.status = Status::kBadKernel;
    out.event = err_event_;
    if (error_after_clock_ && err_end_ > room) {
      out.problem = Problem::kClock;
      return out;
    }
    out.field = err_field_;
    out.problem = err_problem_;
    out.value = err_value_;
    return out;
  }
  if (k_start_.empty()) {
    out.status = Status::kNoKernels;
    return out;
  }
  // Launches: the first runtime call on the clock with each correlation id.
  std::unordered_map<std::int64_t, std::int64_t> launch_of;
  launch_of.reserve(rt_corr_.size());
  for (std::size_t j = 0; j < rt_corr_.size(); ++j) {
    if (rt_end_[j] <= room) launch_of.emplace(rt_corr_[j], base + rt_ts_[j]);
  }
  const std::size_t n = k_start_.size();
  out.launch.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    auto it = launch_of.find(k_corr_[j]);
    out.launch[j] = it == launch_of.end() ? kI64Min : it->second;
    k_start_[j] += base;
    k_end_[j] += base;
  }
  // Steps, by start: a trace that tags one step under two categories lists it twice over the same
  // interval, so an event of a step number is that step again only where it meets the last one of that
  // number. The same number at another time is another iteration (a profiler started afresh, a schedule
  // that repeats): counting it once would merge hundreds of iterations into one.
  std::vector<std::size_t> steps;
  steps.reserve(st_k_.size());
  for (std::size_t j = 0; j < st_k_.size(); ++j) {
    if (st_end_[j] <= room) steps.push_back(j);
  }
  std::stable_sort(steps.begin(), steps.end(), [this](std::size_t a, std::size_t b) {
    return st_ts_[a] != st_ts_[b] ? st_ts_[a] < st_ts_[b] : st_k_[a] < st_k_[b];
  });
  std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>> last;
  for (const std::size_t j : steps) {
    const std::int64_t s = base + st_ts_[j], e = base + st_end_[j];
    auto it = last.find(st_k_[j]);
    if (it != last.end() && (s == it->second.first || s < it->second.second)) continue;
    last[st_k_[j]] = {s, e};
    out.step.push_back(st_k_[j]);
    out.step_start.push_back(s);
    out.step_end.push_back(e);
  }
  out.start = std::move(k_start_);
  out.end = std::move(k_end_);
  out.device = std::move(k_device_);
  out.stream = std::move(k_stream_);
  out.correlation = std::move(k_corr_);
  out.signature = std::move(k_sig_);
  out.sig_name = std::move(sig_name_);
  out.sig_grid = std::move(sig_grid_);
  out.sig_block = std::move(sig_block_);
  out.names = std::move(names_);
  return out;
}

}  // namespace fingrav::kineto
