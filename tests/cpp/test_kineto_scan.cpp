// The streaming Kineto scanner: exact microsecond-to-ns rounding (Python's
// 28-digit Decimal context), int64 ids, and the same result whatever the
// chunks the document arrives in. The Python tests compare it with a
// whole-document json.loads reading; these pin the core without Python.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "fingrav/kineto_scan.hpp"

using namespace fingrav::kineto;

namespace {

std::int64_t ns(const char* text) {
  Int128 v = 0;
  CHECK(micros_to_ns(text, &v));
  return static_cast<std::int64_t>(v);
}

const char* const kDoc =
    "{\"traceEvents\": [\n"
    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"ts\": 1.5, \"dur\": 9, \"args\": {\"a\": [[1], {}]}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 2.25, \"dur\": 1,"
    " \"args\": {\"correlation\": 7}},\n"
    "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#4\", \"ts\": 1, \"dur\": 100},\n"
    "  {\"ph\": \"X\", \"cat\": \"Kernel\", \"name\": \"g\\u00e9mm \\\"q\\\"\", \"ts\": 3.0005, \"dur\": 4.0015,"
    " \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 7, \"grid\": [8, 1.0, 2e0], \"block\": [256]}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"\xe6\xbc\xa2\", \"ts\": -1e-3, \"dur\": 0, \"args\": null},\n"
    "  {\"ph\": \"i\", \"cat\": \"kernel\", \"name\": 5, \"ts\": true}, NaN, -Infinity, [true, false, null]\n"
    "], \"baseTimeNanoseconds\": \"1700000000000000000\"}";

Result scan(const std::string& doc, std::size_t chunk) {
  Scanner s(Limits{});
  for (std::size_t i = 0; i < doc.size(); i += chunk) s.feed(doc.data() + i, std::min(chunk, doc.size() - i));
  return s.finish();
}

void same(const Result& a, const Result& b) {
  CHECK_EQ(static_cast<int>(a.status), static_cast<int>(b.status));
  CHECK(a.start == b.start && a.end == b.end && a.launch == b.launch && a.signature == b.signature);
  CHECK(a.device == b.device && a.stream == b.stream && a.correlation == b.correlation);
  CHECK(a.names == b.names && a.sig_grid == b.sig_grid && a.sig_block == b.sig_block);
  CHECK(a.step == b.step && a.step_start == b.step_start && a.step_end == b.step_end);
}

}  // namespace

int main() {
  return fingrav_test::run_tests("kineto_scan", {
      {"micros_round_as_decimal_does", [] {
         CHECK_EQ(ns("1.0005"), 1000);  // half-even: 1000.5 -> 1000
         CHECK_EQ(ns("1.0015"), 1002);
         CHECK_EQ(ns("-1.0005"), -1000);
         CHECK_EQ(ns("2.5e-3"), 2);
         CHECK_EQ(ns("1E+3"), 1000000);
         CHECK_EQ(ns("0.0000001"), 0);
         CHECK_EQ(ns("1e-99999999999999999999"), 0);
         // 28 significant digits first (1.500...0e-3 us), then half-even to 2 ns.
         CHECK_EQ(ns("1.4999999999999999999999999999999e-3"), 2);
         CHECK_EQ(ns("123456789012345678901234567890e-15"), 123456789012345679);
         CHECK_EQ(ns("9223372036854775.807"), INT64_MAX);
         Int128 v = 0;
         CHECK(micros_to_ns("9223372036854775.807999999999", &v) && v == Int128{INT64_MAX} + 1);
         CHECK(!micros_to_ns("9223372036854775.8079999999999", &v));  // 29 digits: abs() rounds it to the limit
         CHECK(!micros_to_ns("-9223372036854775.808", &v));
         CHECK(!micros_to_ns("1e999999999", &v));
         CHECK(!micros_to_ns("1.", &v) && !micros_to_ns("", &v) && !micros_to_ns("--1", &v));
       }},
      {"int64_as_python_reads_it", [] {
         std::int64_t v = 0;
         CHECK(json_int64("-9223372036854775808", true, &v) && v == INT64_MIN);
         CHECK(!json_int64("-9223372036854775808.0", false, &v));  // a Decimal needs abs() <= INT64_MAX
         CHECK(json_int64("9223372036854775807.000", false, &v) && v == INT64_MAX);
         CHECK(!json_int64("9223372036854775808", true, &v));
         CHECK(json_int64("1.5e1", false, &v) && v == 15);
         CHECK(!json_int64("1.5", false, &v) && !json_int64("1e-30", false, &v) && !json_int64("1e30", false, &v));
         CHECK(json_int64("0e999999999999999999999", false, &v) && v == 0);
       }},
      {"strings_decode_as_json_does", [] {
         CHECK_EQ(decode_string("a\\u00e9\\n\\/"), std::string("a\xc3\xa9\n/"));
         CHECK_EQ(decode_string("\\ud83d\\ude00"), std::string("\xf0\x9f\x98\x80"));
         CHECK_EQ(decode_string("\\ud800x").size(), std::size_t{4});  // a lone surrogate stays (3 bytes) + x
       }},
      {"a_document_reads_the_same_in_any_chunks", [] {
         const Result whole = scan(kDoc, 1 << 20);
         CHECK_EQ(static_cast<int>(whole.status), 0);
         CHECK_EQ(whole.start.size(), std::size_t{2});
         const std::int64_t base = 1700000000000000000;
         CHECK_EQ(whole.start[0], base + 3000);  // 3000.5 ns: half-even
         CHECK_EQ(whole.end[0], base + 3000 + 4002);
         CHECK_EQ(whole.start[1], base - 1);
         CHECK_EQ(whole.launch[0], base + 2250);
         CHECK_EQ(whole.launch[1], INT64_MIN);  // args null: no correlation id
         CHECK_EQ(whole.correlation[1], -1);
         CHECK(whole.sig_grid == (std::vector<std::int64_t>{8, 1, 2, -1, -1, -1}));
         CHECK(whole.sig_block == (std::vector<std::int64_t>{256, 1, 1, -1, -1, -1}));
         CHECK_EQ(whole.names[0], std::string("g\\u00e9mm \\\"q\\\""));  // as written: Python decodes names
         CHECK(whole.step == std::vector<std::int64_t>{4} && whole.step_end[0] == base + 101000);
         CHECK_EQ(whole.events, 9);
         for (std::size_t chunk : {1, 2, 3, 5, 7, 13, 64}) same(scan(kDoc, chunk), whole);
       }},
      {"kept_memory_does_not_grow_with_ignored_events", [] {
         std::string doc = "{\"traceEvents\": [";
         for (int i = 0; i < 20000; ++i) {
           doc += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op" + std::to_string(i) +
                  "\", \"ts\": 1, \"dur\": 2, \"args\": {\"x\": \"" + std::string(100, 'y') + "\"}},";
         }
         doc += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": 2}]}";
         const Result r = scan(doc, 4096);
         CHECK_EQ(static_cast<int>(r.status), 0);
         CHECK(r.kept_bytes < 1024);
       }},
      {"malformed_documents_are_refused", [] {
         for (const char* bad : {"", "{", "[1,]", "[01]", "[1.]", "[-]", "[tru]", "[\"\\x\"]", "[\"a\nb\"]",
                                 "{\"a\" 1}", "[] x", "[\"\\ud83d\\u12g4\"]", "[\"\xff\"]", "[\"\xed\xa0\x80\"]"}) {
           const Result r = scan(bad, 1);
           CHECK(r.status == Status::kSyntax || r.status == Status::kUtf8);
         }
         std::string deep(2000, '[');
         CHECK(scan(deep, 100).status == Status::kDepth);
         CHECK(scan("{\"traceEvents\": 5}", 3).status == Status::kNoEvents);
         CHECK(scan("{\"traceEvents\": []}", 3).status == Status::kNoKernels);
         CHECK(scan("{\"traceEvents\": [], \"baseTimeNanoseconds\": -1}", 3).status == Status::kBadBase);
       }},
      {"mutated_documents_never_crash", [] {
         // Under the sanitizers (FINGRAV_SANITIZER=address) this is the scanner's memory-safety fuzz: bytes
         // flipped, inserted and cut, fed in random chunks; each result must be a status, never a crash.
         std::mt19937_64 rng(28);
         const std::string base = kDoc;
         const char alphabet[] = "{}[]:,\"\\u0123456789.eE+-tfnNI \n\x80\xc3\xa9\xff";
         for (int iter = 0; iter < 20000; ++iter) {
           std::string doc = base;
           const int edits = 1 + static_cast<int>(rng() % 4);
           for (int e = 0; e < edits && !doc.empty(); ++e) {
             const std::size_t at = rng() % doc.size();
             const char c = alphabet[rng() % (sizeof(alphabet) - 1)];
             switch (rng() % 3) {
               case 0: doc[at] = c; break;
               case 1: doc.insert(doc.begin() + static_cast<std::ptrdiff_t>(at), c); break;
               default: doc.resize(at); break;
             }
           }
           const Result r = scan(doc, 1 + rng() % 17);
           CHECK(static_cast<int>(r.status) <= static_cast<int>(Status::kNoKernels));
         }
       }},
      {"ids_of_another_type_are_refused_not_read_as_unknown", [] {
         const std::string head = "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"g\", "
                                  "\"ts\": 1, \"dur\": 2, \"args\": ";
         const char* const ids[] = {"{\"device\": \"0\"}", "{\"stream\": true}", "{\"correlation\": [1]}"};
         const char* const fields[] = {"args.device", "args.stream", "args.correlation"};
         for (int j = 0; j < 3; ++j) {
           const Result r = scan(head + ids[j] + "}]}", 5);
           CHECK_EQ(static_cast<int>(r.status), static_cast<int>(Status::kBadKernel));
           CHECK_EQ(static_cast<int>(r.problem), static_cast<int>(Problem::kNotInteger));
           CHECK(r.field == fields[j]);
         }
         Result r = scan(head + "\"x\"}]}", 3);
         CHECK_EQ(static_cast<int>(r.problem), static_cast<int>(Problem::kNotObject));
         CHECK(r.field == "args");
         r = scan(head + "{\"device\": null}}]}", 4);  // null: the trace does not say
         CHECK_EQ(static_cast<int>(r.status), static_cast<int>(Status::kOk));
         CHECK_EQ(r.device[0], -1);
       }},
  });
}
