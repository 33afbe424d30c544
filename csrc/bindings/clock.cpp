// Host clock, device clocks (TimestampSource) and the clock sync that brackets
// one with the other.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "common.hpp"
#include "fingrav/clock_sync.hpp"
#include "fingrav/host_clock.hpp"
#include "fingrav/timestamp_source.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

// Brackets as an (n, 3) int64 array (host_before, device_ticks, host_after),
// owning the buffer (no copy).
py::array_t<std::int64_t> brackets_array(std::unique_ptr<Bracket[]> data, std::size_t n) {
  Bracket* raw = data.release();
  py::capsule owner(raw, [](void* p) { delete[] static_cast<Bracket*>(p); });
  return py::array_t<std::int64_t>({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(3)},
                                   {static_cast<py::ssize_t>(sizeof(Bracket)), static_cast<py::ssize_t>(sizeof(std::int64_t))},
                                   reinterpret_cast<std::int64_t*>(raw), owner);
}

// Epoch brackets as an (n, 3) int64 array (mono_before, realtime_ns,
// mono_after), owning the buffer (no copy).
py::array_t<std::int64_t> epoch_brackets_array(std::unique_ptr<EpochBracket[]> data, std::size_t n) {
  EpochBracket* raw = data.release();
  py::capsule owner(raw, [](void* p) { delete[] static_cast<EpochBracket*>(p); });
  return py::array_t<std::int64_t>(
      {static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(3)},
      {static_cast<py::ssize_t>(sizeof(EpochBracket)), static_cast<py::ssize_t>(sizeof(std::int64_t))},
      reinterpret_cast<std::int64_t*>(raw), owner);
}

}  // namespace

void register_clocks(py::module_& m) {
  // ------------------------------------------------------------ host clock
  m.def("host_time_ns", &host_now_ns,
        "Host time now: CLOCK_MONOTONIC_RAW in nanoseconds, the timeline every result is placed on.");

  m.def(
      "wait_until_ns",
      [](std::int64_t target_ns, std::int64_t spin_ns) {
        // Other Python threads run while this one sleeps and spins.
        py::gil_scoped_release nogil;
        return wait_until_ns(target_ns, spin_ns);
      },
      py::arg("target_ns"), py::arg("spin_ns") = 200000,
      "Waits until host time (CLOCK_MONOTONIC_RAW ns) reaches target_ns: sleeps until spin_ns before it, then\n"
      "spins. Returns the host time at wake-up (>= target_ns); a target already past returns at once.");
  m.def(
      "read_epoch_brackets",
      [](py::ssize_t n) {
        if (n < 1 || n > (1 << 24)) throw std::invalid_argument("n=" + std::to_string(n) + ": must be in [1, 2^24]");
        // Allocated before the reads: nothing allocates between them.
        std::unique_ptr<EpochBracket[]> buf(new EpochBracket[static_cast<std::size_t>(n)]);
        {
          py::gil_scoped_release nogil;
          read_epoch_brackets(buf.get(), static_cast<std::size_t>(n));
        }
        return epoch_brackets_array(std::move(buf), static_cast<std::size_t>(n));
      },
      py::arg("n"),
      "n CLOCK_REALTIME reads, each between two host clock reads, back to back: an (n, 3) int64 array of\n"
      "(mono_raw_before_ns, realtime_ns, mono_raw_after_ns). The map from host time (CLOCK_MONOTONIC_RAW)\n"
      "onto the Unix epoch that application traces (torch.profiler) use is fitted from them. The GIL is\n"
      "released while reading.");
  py::class_<HostClockInfo>(m, "HostClockInfo", "Cost and resolution of reading the host clock.")
      .def_readonly("read_cost_ns", &HostClockInfo::read_cost_ns)
      .def_readonly("min_read_cost_ns", &HostClockInfo::min_read_cost_ns)
      .def_readonly("resolution_ns", &HostClockInfo::resolution_ns)
      .def_readonly("observed_step_ns", &HostClockInfo::observed_step_ns)
      .def("__repr__", [](const HostClockInfo& h) {
        return "HostClockInfo(read_cost_ns=" + std::to_string(h.read_cost_ns) +
               ", min_read_cost_ns=" + std::to_string(h.min_read_cost_ns) +
               ", resolution_ns=" + std::to_string(h.resolution_ns) +
               ", observed_step_ns=" + std::to_string(h.observed_step_ns) + ")";
      });
  m.def(
      "measure_host_clock",
      [](std::int64_t reads) {
        py::gil_scoped_release nogil;
        return measure_host_clock(reads);
      },
      py::arg("reads") = 200000, "Measures the host clock's read cost and resolution over `reads` back-to-back reads.");

  // ------------------------------------------------------------ device clocks
  py::class_<TimestampSource, std::shared_ptr<TimestampSource>>(m, "TimestampSource",
                                                                "A device clock readable from the host (interface).")
      .def_property_readonly("name", [](const TimestampSource& t) { return t.timestamp_info().name; })
      .def_property_readonly("clock_domain", [](const TimestampSource& t) { return t.timestamp_info().clock_domain; })
      .def_property_readonly("nominal_tick_ns", [](const TimestampSource& t) { return t.timestamp_info().nominal_tick_ns; })
      .def("read_device_ticks", [](TimestampSource& t) {
        py::gil_scoped_release nogil;
        return t.read_device_ticks();
      }, "One read of the device clock (blocks for the read's latency).");

  // ------------------------------------------------------------ clock sync
  m.def(
      "measure_brackets",
      [](std::shared_ptr<TimestampSource> source, py::ssize_t n) {
        if (!source) throw std::invalid_argument("source: must not be None");
        if (n < 1 || n > (1 << 24)) throw std::invalid_argument("n=" + std::to_string(n) + ": must be in [1, 2^24]");
        std::unique_ptr<Bracket[]> buf(new Bracket[static_cast<std::size_t>(n)]);
        {
          py::gil_scoped_release nogil;
          measure_brackets(*source, buf.get(), static_cast<std::size_t>(n));
        }
        return brackets_array(std::move(buf), static_cast<std::size_t>(n));
      },
      py::arg("source"), py::arg("n"),
      "n bracketed reads of a device clock, back to back: an (n, 3) int64 array of\n"
      "(host_before_ns, device_ticks, host_after_ns). The GIL is released while reading.");

  py::class_<ClockSyncStats>(m, "ClockSyncStats", "Counters of a ClockSyncRecorder.")
      .def_readonly("bursts", &ClockSyncStats::bursts)
      .def_readonly("reads", &ClockSyncStats::reads)
      .def_readonly("drops", &ClockSyncStats::drops)
      .def_readonly("cpu_time_ns", &ClockSyncStats::cpu_time_ns)
      .def_readonly("wall_time_ns", &ClockSyncStats::wall_time_ns)
      .def("__repr__", [](const ClockSyncStats& s) {
        return "ClockSyncStats(bursts=" + std::to_string(s.bursts) + ", reads=" + std::to_string(s.reads) +
               ", drops=" + std::to_string(s.drops) + ")";
      });

  py::class_<ClockSyncRecorder>(m, "ClockSyncRecorder",
                                "Takes a burst of bracketed device-clock reads every interval on a background\n"
                                "thread, so a long campaign can refit its clock map afterwards.")
      .def(py::init([](std::shared_ptr<TimestampSource> source, const py::object& interval_ns,
                       const py::object& burst, const py::object& capacity) {
             // Python ints of any size, named with their range when out of it.
             ClockSyncConfig c;
             c.interval_ns = int_arg(interval_ns, "interval_ns", 1'000'000, 3'600'000'000'000LL,
                                     "in [1000000, 3600000000000] ns (1 ms to 1 h)");
             c.burst = static_cast<std::uint32_t>(int_arg(burst, "burst", 1, 4096));
             c.capacity = static_cast<std::size_t>(
                 int_arg(capacity, "capacity", 16, std::int64_t{1} << 26, "a power of two in [16, 2^26 = 67108864]"));
             return std::make_unique<ClockSyncRecorder>(std::move(source), c);
           }),
           py::arg("source"), py::kw_only(), py::arg("interval_ns") = 250'000'000, py::arg("burst") = 32,
           py::arg("capacity") = 1 << 16)
      .def("start", &ClockSyncRecorder::start, "Starts the thread: a burst at once, then one per interval.")
      .def("stop", [](ClockSyncRecorder& r) {
        {
          py::gil_scoped_release nogil;
          r.stop();
        }
        const std::string err = r.error();
        if (!err.empty()) throw SamplerFailure(err);
      }, "Takes a last burst and joins. Raises SamplerError if the timestamp source failed.")
      .def("drain", [](ClockSyncRecorder& r) {
        std::unique_ptr<Bracket[]> buf;
        std::size_t n;
        {
          py::gil_scoped_release nogil;
          const std::size_t want = r.available();
          buf.reset(new Bracket[want > 0 ? want : 1]);
          n = r.drain(buf.get(), want);
        }
        return brackets_array(std::move(buf), n);
      }, "Moves the recorded brackets into an (n, 3) int64 array (no further copy).")
      .def_property_readonly("available", &ClockSyncRecorder::available)
      .def_property_readonly("running", &ClockSyncRecorder::running)
      .def_property_readonly("started", &ClockSyncRecorder::started)
      .def_property_readonly("error", [](const ClockSyncRecorder& r) -> std::optional<std::string> {
        std::string e = r.error();
        if (e.empty()) return std::nullopt;
        return e;
      })
      .def_property_readonly("interval_ns", [](const ClockSyncRecorder& r) { return r.config().interval_ns; })
      .def_property_readonly("burst", [](const ClockSyncRecorder& r) { return r.config().burst; })
      .def("stats", &ClockSyncRecorder::stats)
      .def("__enter__", [](ClockSyncRecorder& r) -> ClockSyncRecorder& {
        r.start();
        return r;
      }, py::return_value_policy::reference)
      .def("__exit__", [](ClockSyncRecorder& r, const py::object& exc_type, const py::object&, const py::object&) {
        {
          py::gil_scoped_release nogil;
          r.stop();
        }
        const std::string err = r.error();
        if (!err.empty() && exc_type.is_none()) throw SamplerFailure(err);
        return false;
      });
}

}  // namespace fingrav::bindings
