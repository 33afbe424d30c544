// The streaming Kineto trace reader (fingrav/kineto_scan.hpp): Python feeds
// the document's bytes in chunks (plain or gunzipped), the scan runs without
// the GIL, and finish() hands the kept columns to numpy without a copy.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "common.hpp"
#include "fingrav/kineto_scan.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

// One scan: feed() any number of times, then finish() once. A lock keeps two
// threads from feeding one scanner at once (the GIL is released inside).
struct ScanHandle {
  explicit ScanHandle(kineto::Limits l) : scanner(l) {}
  kineto::Scanner scanner;
  std::mutex lock;
  bool finished = false;
};

template <typename T>
py::array column(std::vector<T>&& v) {
  return vector_array(py::dtype::of<T>(), std::move(v));
}

py::dict value_dict(const kineto::Value& v) {
  py::dict d;
  d["kind"] = static_cast<int>(v.kind);
  d["integer"] = v.integer;
  d["text"] = py::bytes(v.text);
  d["items"] = v.items;
  return d;
}

py::dict result_dict(kineto::Result&& r) {
  py::dict d;
  d["status"] = static_cast<int>(r.status);
  d["message"] = r.message;
  d["event"] = r.event;
  d["field"] = r.field;
  d["problem"] = static_cast<int>(r.problem);
  d["value"] = value_dict(r.value);
  d["base_ns"] = r.base_ns;
  d["kept_bytes"] = r.kept_bytes;
  d["bytes"] = r.bytes;
  d["events"] = r.events;
  d["start"] = column(std::move(r.start));
  d["end"] = column(std::move(r.end));
  d["device"] = column(std::move(r.device));
  d["stream"] = column(std::move(r.stream));
  d["correlation"] = column(std::move(r.correlation));
  d["launch"] = column(std::move(r.launch));
  d["signature"] = column(std::move(r.signature));
  d["sig_name"] = column(std::move(r.sig_name));
  d["sig_grid"] = column(std::move(r.sig_grid));
  d["sig_block"] = column(std::move(r.sig_block));
  d["step"] = column(std::move(r.step));
  d["step_start"] = column(std::move(r.step_start));
  d["step_end"] = column(std::move(r.step_end));
  py::list names;
  for (const std::string& n : r.names) names.append(py::bytes(n));
  d["names"] = names;
  return d;
}

}  // namespace

void register_kineto(py::module_& m) {
  py::class_<ScanHandle>(m, "KinetoScanner",
                         "A streaming reader of Kineto Chrome traces: feed the JSON's bytes, then finish().")
      .def(py::init([](const py::object& max_kept_bytes, const py::object& max_depth,
                       const py::object& max_int_digits) {
             kineto::Limits l;
             l.max_kept_bytes = static_cast<std::uint64_t>(
                 int_arg(max_kept_bytes, "max_kept_bytes", 1, std::int64_t{1} << 50));
             l.max_depth = static_cast<std::uint32_t>(int_arg(max_depth, "max_depth", 1, 1 << 24));
             l.max_int_digits = static_cast<std::uint32_t>(
                 int_arg(max_int_digits, "max_int_digits", 0, std::int64_t{1} << 31));
             return std::make_unique<ScanHandle>(l);
           }),
           py::arg("max_kept_bytes"), py::arg("max_depth"), py::arg("max_int_digits"))
      .def(
          "feed",
          [](ScanHandle& h, const py::buffer& data) {
            py::buffer_info info = data.request();
            if (info.ndim != 1 || info.itemsize != 1 || (info.size > 1 && info.strides[0] != 1)) {
              throw py::value_error("data: expected contiguous bytes");
            }
            const auto* p = static_cast<const char*>(info.ptr);
            const auto n = static_cast<std::size_t>(info.size);
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> g(h.lock);
            if (h.finished) throw std::logic_error("KinetoScanner: finish() was called; the scan is over");
            h.scanner.feed(p, n);
          },
          py::arg("data"), "Scan the document's next bytes (chunks may split any token).")
      .def_property_readonly(
          "failed", [](ScanHandle& h) { return h.scanner.failed(); },
          "Whether the bytes so far are already refused (the rest need not be fed).")
      .def(
          "finish",
          [](ScanHandle& h) {
            kineto::Result r;
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(h.lock);
              if (h.finished) throw std::logic_error("KinetoScanner: finish() was already called");
              h.finished = true;
              r = h.scanner.finish();
            }
            return result_dict(std::move(r));
          },
          "End the document: a dict with the status, the error's details or the kept columns.");
}

}  // namespace fingrav::bindings
