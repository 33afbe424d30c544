// A streaming reader of torch.profiler (Kineto) Chrome traces: the document is
// fed in chunks of any size, walked as a JSON token stream, and only what a
// kernel trace needs is kept (per kernel event its times, signature and ids;
// per runtime call its correlation id and time; per ProfilerStep#N its
// span). Everything else is checked as JSON and dropped as it passes, so
// memory grows with the kernels, not with the document.
//
// The semantics are those of reading the whole document with Python's json
// (numbers as Decimal, NaN/Infinity as floats, the last of duplicate keys
// winning) and picking the fields event by event, which this replaces:
//  * strict JSON (RFC 8259) as Python's json.loads takes it, plus the tokens
//    NaN, Infinity and -Infinity; text must be UTF-8 (no BOM); an integer of
//    more digits than Python converts (sys.get_int_max_str_digits) is refused;
//  * ts/dur in microseconds become exact integer ns as
//    int((Decimal(text) * 1000).to_integral_value()) does in Python's default
//    decimal context (28 significant digits, half-even, then half-even to an
//    integer), refused when |us| >= 2^63 / 1000;
//  * integers for ids and launch dimensions as Python ints, or Decimals that
//    are integral, within int64.
// Errors are returned as data (what, where, the value as the document had
// it), never thrown: the Python side words them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace fingrav::kineto {

// Sums of two int64 ns (a time and a duration) and 28-digit decimal rounding
// need more than 64 bits; GCC and Clang have a 128-bit integer.
__extension__ typedef __int128 Int128;

// How a JSON value was written; what a message about it needs.
enum class ValueKind : std::uint8_t {
  kMissing = 0,  // the key was absent
  kNull = 1,
  kTrue = 2,
  kFalse = 3,
  kNumber = 4,    // text: the token; integer: no fraction or exponent (Python reads an int)
  kString = 5,    // text: the bytes between the quotes, escapes not decoded
  kArray = 6,     // items: direct children
  kObject = 7,    // items: members (a duplicate key counted each time)
  kConstant = 8,  // text: NaN, Infinity or -Infinity (Python reads a float)
};

struct Value {
  ValueKind kind = ValueKind::kMissing;
  bool integer = false;
  std::string text;
  std::int64_t items = 0;
  // Launch dimensions (a grid or block list): up to three parsed items, and
  // whether any item was not an integer that fits int64 (or there were more).
  std::int64_t dims[3] = {1, 1, 1};
  bool dims_bad = false;
  void reset() {
    kind = ValueKind::kMissing;
    integer = false;
    text.clear();
    items = 0;
    dims[0] = dims[1] = dims[2] = 1;
    dims_bad = false;
  }
};

// Why a kernel event was refused (the Python side words each).
enum class Problem : std::uint8_t {
  kNone = 0,
  kNotString = 1,      // name is not a string (or is absent)
  kNotMicros = 2,      // ts/dur is not a number
  kMicrosRange = 3,    // ts/dur does not fit int64 ns
  kNegative = 4,       // dur < 0
  kClock = 5,          // ts + dur + baseTimeNanoseconds does not fit int64 ns
  kDims = 6,           // args.grid/args.block is not up to three integers
  kNotInt64 = 7,       // args.device/stream/correlation is a number that is not an int64
  kNotInteger = 8,     // args.device/stream/correlation is not a number (a string, a boolean, a list, ...)
  kNotObject = 9,      // args is not an object (nor null)
};

enum class Status : std::uint8_t {
  kOk = 0,
  kSyntax = 1,       // not JSON: message says what and where
  kUtf8 = 2,         // not UTF-8 text: message says where
  kDepth = 3,        // nested deeper than max_depth
  kKept = 4,         // what would be kept exceeds max_kept_bytes
  kNoEvents = 5,     // the document is not a Chrome trace (no traceEvents list)
  kBadBase = 6,      // baseTimeNanoseconds is not an int64 of ns (value)
  kBadKernel = 7,    // a kernel event refused: event, field, problem, value
  kNoKernels = 8,    // no kernel event
};

struct Limits {
  std::uint64_t max_kept_bytes = std::uint64_t{4} << 30;
  std::uint32_t max_depth = 1000;
  std::uint32_t max_int_digits = 4300;  // 0: no limit
};

// What finish() hands out; columns in document order (kernels) or as kept.
struct Result {
  Status status = Status::kOk;
  std::string message;     // kSyntax, kUtf8, kDepth, kKept
  std::int64_t event = -1;  // kBadKernel
  std::string field;       // kBadKernel: "name", "ts", "dur", "args.grid", ...
  Problem problem = Problem::kNone;
  Value value;             // kBadKernel, kBadBase
  std::int64_t base_ns = 0;
  // Per kernel event, in document order: epoch ns (base added), signature,
  // device/stream/correlation (-1 where the trace does not say), the launch
  // (epoch ns of the first runtime call with its correlation id, or INT64_MIN).
  std::vector<std::int64_t> start, end, device, stream, correlation, launch;
  std::vector<std::int32_t> signature;
  // Signatures: name id, grid and block (3 per signature).
  std::vector<std::int32_t> sig_name;
  std::vector<std::int64_t> sig_grid, sig_block;
  // Kernel names as written (bytes between the quotes, escapes not decoded).
  std::vector<std::string> names;
  // ProfilerStep#N annotations kept: N, epoch ns start and end, in document order.
  std::vector<std::int64_t> step, step_start, step_end;
  std::uint64_t kept_bytes = 0;   // the most the scan kept at once
  std::uint64_t bytes = 0;        // the document's bytes
  std::int64_t events = 0;        // elements of traceEvents
};

class Scanner {
 public:
  explicit Scanner(Limits limits);
  // Consumes the next bytes of the document. After an error the rest is
  // ignored (failed() is true; finish() reports the error).
  void feed(const char* data, std::size_t n);
  bool failed() const { return status_ != Status::kOk; }
  // Ends the document and returns what was read (or why not). Call once.
  Result finish();
  // Bytes kept now (columns, names, signatures, the current event's fields).
  std::uint64_t kept_bytes() const;

 private:
  enum class Lex : std::uint8_t { kBetween, kString, kNumber, kLiteral };
  enum class Expect : std::uint8_t { kValue, kValueOrEnd, kKeyOrEnd, kKey, kColon, kCommaOrEnd, kEof };
  enum class Role : std::uint8_t { kOther, kRoot, kEvents, kEvent, kArgs, kDims, kCount };
  // What a value is, by where it stands.
  enum Slot : std::uint8_t {
    kNone = 0, kPh, kCat, kName, kTs, kDur, kArgsSlot, kDevice, kStream, kCorr, kGrid, kBlock,
    kBase, kTraceEvents, kEventSlot, kDimItem, kCountChild, kRootSlot, kSlots
  };
  struct Frame {
    bool object;
    Role role;
    Slot slot;      // kDims/kCount: the value whose items these are
    Slot key_slot;  // objects: what the current member's value is
  };

  const unsigned char* structural(const unsigned char* p, const unsigned char* end);
  const unsigned char* lex_string(const unsigned char* p, const unsigned char* end);
  const unsigned char* lex_number(const unsigned char* p, const unsigned char* end);
  const unsigned char* lex_literal(const unsigned char* p, const unsigned char* end);
  void begin_value(char first);
  void end_scalar();
  void close_container();
  void after_value();
  void key_done();
  void fail(Status s, const std::string& what);
  void syntax(const char* what);
  void keep_check();
  void reset_events();
  void event_done();
  void kernel_event(bool args_dict);
  void context_event(bool step, const std::string& name, bool args_dict);
  void dim_item();
  std::uint64_t pos() const { return offset_ + static_cast<std::uint64_t>(cur_ - chunk_); }

  Limits limits_;
  Status status_ = Status::kOk;
  std::string message_;
  // Lexer.
  Lex lex_ = Lex::kBetween;
  Expect expect_ = Expect::kValue;
  std::vector<Frame> stack_;
  bool in_key_ = false;
  bool key_escaped_ = false;  // the key being lexed has an escape (decode before matching)
  bool capture_ = false;     // keep the current token's bytes in *cap_
  std::string* cap_ = nullptr;
  std::string key_;
  std::string scratch_;      // number tokens nobody keeps are still lexed here (digit count only)
  std::uint8_t str_state_ = 0;   // 0 plain, 1 after '\\', 2..5 \\u hex digits, 6.. UTF-8 continuation
  std::uint8_t utf8_need_ = 0;   // continuation bytes still due
  std::uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the range of the next continuation byte
  std::uint8_t hex_left_ = 0;
  std::uint8_t num_state_ = 0;
  std::uint32_t int_digits_ = 0;
  const char* lit_ = nullptr;    // the literal being matched, and how far
  std::size_t lit_pos_ = 0;
  Slot tok_slot_ = kNone;        // what the token being lexed is
  std::uint64_t offset_ = 0;     // bytes before the current chunk
  const unsigned char* chunk_ = nullptr;
  const unsigned char* cur_ = nullptr;
  std::uint64_t line_ = 1, line_start_ = 0;
  std::uint64_t token_start_ = 0;
  // The document.
  bool root_dict_ = false, root_list_ = false;
  int events_state_ = 0;   // 0 no traceEvents, 1 a list, 2 not a list
  Value base_;
  // The current event's fields (the last of each key).
  Value f_[kSlots];
  bool args_dict_ = false;
  std::int64_t n_events_ = 0;
  std::int64_t cur_event_ = -1;
  // Kept: kernels, runtime calls, steps.
  std::vector<std::int64_t> k_start_, k_end_, k_device_, k_stream_, k_corr_, k_event_;
  std::vector<std::int32_t> k_sig_;
  std::unordered_map<std::string, std::int32_t> name_ids_;
  std::vector<std::string> names_;
  std::uint64_t name_bytes_ = 0;
  struct SigKey {
    std::int64_t v[7];
    bool operator==(const SigKey& o) const;
  };
  struct SigHash {
    std::size_t operator()(const SigKey& k) const;
  };
  std::unordered_map<SigKey, std::int32_t, SigHash> sig_ids_;
  std::vector<std::int32_t> sig_name_;
  std::vector<std::int64_t> sig_grid_, sig_block_;
  std::vector<std::int64_t> rt_corr_, rt_ts_, rt_end_;
  std::vector<std::int64_t> st_k_, st_ts_, st_end_;
  // The first kernel event refused; later kernels are not kept.
  bool kernel_error_ = false;
  bool error_after_clock_ = false;  // the refusal comes after the clock check in the event's order
  std::int64_t err_event_ = -1;
  std::string err_field_;
  Problem err_problem_ = Problem::kNone;
  Value err_value_;
  std::int64_t err_start_ = 0, err_end_ = 0;  // its times, for the clock check
  std::uint64_t peak_kept_ = 0;
};

// Number helpers, exposed for the tests.
// Exact ns of a JSON number of microseconds, as Python's
// int((Decimal(text) * 1000).to_integral_value()) in the default context.
// Returns false when |us| >= 2^63 / 1000 (or the text is not a JSON number).
bool micros_to_ns(const std::string& text, Int128* ns);
// A JSON number that is an integer within int64: an integer token, or a
// decimal one that is integral with |value| <= INT64_MAX (Python's Decimal
// path). Returns false otherwise.
bool json_int64(const std::string& text, bool integer_token, std::int64_t* out);
// The bytes of a JSON string's contents with escapes decoded (UTF-8; a lone
// surrogate escape as its three-byte form). The input must be valid.
std::string decode_string(const std::string& raw);

}  // namespace fingrav::kineto
