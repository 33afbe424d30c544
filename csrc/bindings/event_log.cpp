// The event log: execution and run markers, handed out as read-only views of
// a buffer the view keeps alive and that never changes (no copy).
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

  m.attr("MAX_MARKERS") = kMaxMarkers;

  py::class_<EventLog>(m, "EventLog",
                       "Append-only log of execution/run markers: preallocated, no lock, one writer thread.")
      .def(py::init([](const py::object& capacity) {
             return std::make_unique<EventLog>(static_cast<std::size_t>(
                 int_arg(capacity, "capacity", 1, static_cast<std::int64_t>(kMaxMarkers),
                         "in [1, 2^26 = 67108864] markers (32 bytes each, allocated up front)")));
           }),
           py::arg("capacity") = 1 << 20)
      .def(
          "mark",
          [](EventLog& log, const py::object& kind_arg, const py::object& run, const py::object& execution,
             const py::object& kernel_id, const py::object& host_ns, const py::object& device_ts) {
            // Every number is a Python int checked here against the int32 /
            // int64 field it goes into, so a value out of range is named with
            // its range instead of failing overload resolution.
            MarkerKind kind;
            try {
              kind = kind_arg.cast<MarkerKind>();
            } catch (const py::cast_error&) {
              throw py::type_error("kind=" + py::repr(kind_arg).cast<std::string>() +
                                   ": must be a MarkerKind (e.g. MarkerKind.EXEC_BEGIN)");
            }
            const auto r = static_cast<std::int32_t>(
                int_arg(run, "run", 0, INT32_MAX, "in [0, 2^31 - 1 = 2147483647] (an int32 run id)"));
            const auto e = static_cast<std::int32_t>(int_arg(
                execution, "execution", -1, INT32_MAX, "in [-1, 2^31 - 1 = 2147483647] (-1 for a run marker)"));
            const auto k = static_cast<std::int32_t>(
                int_arg(kernel_id, "kernel_id", INT32_MIN, INT32_MAX, "in [-2^31, 2^31 - 1] (int32)"));
            const std::int64_t t = host_ns.is_none() ? host_now_ns()
                                                     : int_arg(host_ns, "host_ns", 0, INT64_MAX,
                                                               "in [0, 2^63 - 1] ns (the host clock, int64)");
            const std::int64_t d =
                device_ts.is_none() ? 0
                                    : int_arg(device_ts, "device_ts", INT64_MIN, INT64_MAX,
                                              "in [-2^63, 2^63 - 1] ticks (int64)");
            if (!log.mark(kind, r, e, k, t, d, !device_ts.is_none())) {
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
          [](const EventLog& log) {
            const auto n = static_cast<py::ssize_t>(log.size());
            // The view's base owns a reference to the buffer itself, not to
            // the log: clear() leaves a held buffer alone (event_log.hpp), so
            // these n markers never change, even after clear() and new marks.
            using Buffer = std::shared_ptr<const Marker[]>;
            auto held = std::make_unique<Buffer>(log.share());
            const Marker* data = held->get();
            py::capsule owner(held.get(), [](void* p) { delete static_cast<Buffer*>(p); });
            held.release();  // the capsule owns it now
            py::array arr(marker_dtype(), {n}, {static_cast<py::ssize_t>(sizeof(Marker))}, data, owner);
            // A view of published, immutable markers: never written through.
            arr.attr("setflags")(py::arg("write") = false);
            return arr;
          },
          "A read-only MARKER_DTYPE view (no copy) of the markers published so far; it never changes\n"
          "afterwards, whatever the log does next.")
      .def("clear", &EventLog::clear,
           "Forgets all markers. Arrays from markers() keep theirs: a buffer still viewed is left to them\n"
           "and new markers go to a fresh one.")
      .def_property_readonly("capacity", &EventLog::capacity)
      .def_property_readonly("dropped", &EventLog::dropped)
      .def("__len__", &EventLog::size);
}

}  // namespace fingrav::bindings
