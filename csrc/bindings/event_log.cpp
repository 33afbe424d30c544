// The event log: execution and run markers, handed out as views (no copy).
#include <pybind11/native_enum.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "common.hpp"
#include "fingrav/event_log.hpp"
#include "fingrav/host_clock.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

py::dtype marker_dtype() {
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"host_ns", "<i8", offsetof(Marker, host_ns)},
       {"device_ts", "<i8", offsetof(Marker, device_ts)},
       {"run", "<i4", offsetof(Marker, run)},
       {"execution", "<i4", offsetof(Marker, execution)},
       {"kernel_id", "<i4", offsetof(Marker, kernel_id)},
       {"kind", "u1", offsetof(Marker, kind)},
       {"flags", "u1", offsetof(Marker, flags)}},
      sizeof(Marker)));
  return *dt;
}

}  // namespace

void register_event_log(py::module_& m) {
  m.attr("MARKER_DTYPE") = marker_dtype();
  m.attr("MARKER_HAS_DEVICE_TS") = static_cast<std::uint32_t>(kMarkerHasDeviceTs);

  py::native_enum<MarkerKind>(m, "MarkerKind", "enum.IntEnum", "What a marker marks.")
      .value("EXEC_BEGIN", MarkerKind::kExecBegin)
      .value("EXEC_END", MarkerKind::kExecEnd)
      .value("RUN_BEGIN", MarkerKind::kRunBegin)
      .value("RUN_END", MarkerKind::kRunEnd)
      .finalize();

  py::class_<EventLog>(m, "EventLog",
                       "Append-only log of execution/run markers: preallocated, no lock, one writer thread.")
      .def(py::init([](py::ssize_t capacity) { return std::make_unique<EventLog>(non_negative(capacity, "capacity")); }),
           py::arg("capacity") = 1 << 20)
      .def(
          "mark",
          [](EventLog& log, MarkerKind kind, std::int32_t run, std::int32_t execution, std::int32_t kernel_id,
             std::optional<std::int64_t> host_ns, std::optional<std::int64_t> device_ts) {
            const std::int64_t t = host_ns ? *host_ns : host_now_ns();
            if (!log.mark(kind, run, execution, kernel_id, t, device_ts.value_or(0), device_ts.has_value())) {
              throw std::runtime_error("mark(): the EventLog is full (capacity=" + std::to_string(log.capacity()) +
                                       ", dropped=" + std::to_string(log.dropped()) +
                                       "); create it with a larger capacity");
            }
          },
          py::arg("kind"), py::arg("run"), py::arg("execution") = -1, py::arg("kernel_id") = 0, py::kw_only(),
          py::arg("host_ns") = py::none(), py::arg("device_ts") = py::none(),
          "Appends a marker stamped with the host clock now (or host_ns); device_ts in the device clock if known.")
      .def(
          "markers",
          [](py::object self) {
            auto& log = self.cast<EventLog&>();
            py::array arr(marker_dtype(), {static_cast<py::ssize_t>(log.size())},
                          {static_cast<py::ssize_t>(sizeof(Marker))}, log.data(), self);
            // A view of published, immutable markers: never written through.
            arr.attr("setflags")(py::arg("write") = false);
            return arr;
          },
          "A read-only MARKER_DTYPE view (no copy) of the markers published so far.")
      .def("clear", &EventLog::clear, "Forgets all markers; earlier views see their slots reused.")
      .def_property_readonly("capacity", &EventLog::capacity)
      .def_property_readonly("dropped", &EventLog::dropped)
      .def("__len__", &EventLog::size);
}

}  // namespace fingrav::bindings
