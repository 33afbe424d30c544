// Power sources and the sampler thread: the record dtypes, SourceInfo,
// PowerSource, SyntheticSource, SamplerStats, Sampler.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "common.hpp"
#include "fingrav/power_source.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/sampler.hpp"
#include "fingrav/synthetic_source.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

const char* const kChannelNames[kChannelCount] = {"total", "compute", "io", "memory"};

py::list channel_list(std::uint32_t mask) {
  py::list out;
  for (int c = 0; c < kChannelCount; ++c) {
    if (mask & (1u << c)) out.append(kChannelNames[c]);
  }
  return out;
}

py::dtype reading_dtype() {
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"source_ts", "<i8", offsetof(Reading, source_ts)},
       {"source_seq", "<u8", offsetof(Reading, source_seq)},
       {"total", "<f4", offsetof(Reading, power_w) + 0 * sizeof(float)},
       {"compute", "<f4", offsetof(Reading, power_w) + 1 * sizeof(float)},
       {"io", "<f4", offsetof(Reading, power_w) + 2 * sizeof(float)},
       {"memory", "<f4", offsetof(Reading, power_w) + 3 * sizeof(float)},
       {"flags", "<u4", offsetof(Reading, flags)},
       {"window_ns", "<u4", offsetof(Reading, window_ns)}},
      sizeof(Reading)));
  return *dt;
}

}  // namespace

void register_sources(py::module_& m) {
  m.attr("SAMPLE_DTYPE") = sample_dtype();
  m.attr("READING_DTYPE") = reading_dtype();
  m.attr("CHANNELS") = py::make_tuple("total", "compute", "io", "memory");
  m.attr("FLAG_SOURCE_GAP") = static_cast<std::uint32_t>(kFlagSourceGap);
  m.attr("FLAG_DERIVED") = static_cast<std::uint32_t>(kFlagDerived);

  py::class_<SourceInfo>(m, "SourceInfo", "What a power source provides and in which clock domain.")
      .def_readonly("name", &SourceInfo::name)
      .def_readonly("clock_domain", &SourceInfo::clock_domain)
      .def_readonly("channel_mask", &SourceInfo::channel_mask)
      .def_readonly("native_period_ns", &SourceInfo::native_period_ns)
      .def_readonly("tick_ns", &SourceInfo::tick_ns)
      .def_readonly("has_sequence", &SourceInfo::has_sequence)
      .def_readonly("window_ns", &SourceInfo::window_ns)
      .def_property_readonly("channels", [](const SourceInfo& i) { return channel_list(i.channel_mask); })
      .def("__repr__", [](const SourceInfo& i) {
        return "SourceInfo(name='" + i.name + "', clock_domain='" + i.clock_domain +
               "', native_period_ns=" + std::to_string(i.native_period_ns) +
               ", channels=" + py::str(channel_list(i.channel_mask)).cast<std::string>() + ")";
      });

  py::class_<PowerSource, std::shared_ptr<PowerSource>>(m, "PowerSource",
                                                        "A source of power readings (interface).")
      .def_property_readonly("info", &PowerSource::info, py::return_value_policy::copy)
      .def_property_readonly("in_use", &PowerSource::in_use)
      .def(
          "poll",
          [](PowerSource& src) {
            // Direct polling, as a pure-Python tool would do it. Refused while
            // a sampler owns the source: sources are single-threaded.
            if (!src.try_acquire()) {
              throw std::runtime_error("poll(): the source '" + src.info().name +
                                       "' is being polled by a running sampler");
            }
            std::unique_ptr<Reading[]> buf(new Reading[PowerSource::kMaxReadingsPerPoll]);
            PollResult res;
            try {
              py::gil_scoped_release nogil;
              res = src.poll(buf.get(), PowerSource::kMaxReadingsPerPoll);
            } catch (...) {
              src.release();
              throw;
            }
            src.release();
            if (res.status != PollStatus::kOk) {
              const std::string why = src.last_error();
              throw std::runtime_error("poll(): source '" + src.info().name + "' reported " +
                                       (res.status == PollStatus::kFatalError ? "a fatal" : "a transient") +
                                       " error: " + why);
            }
            return owning_array(reading_dtype(), std::move(buf), res.count);
          },
          "Polls the source once from this thread; returns READING_DTYPE records, oldest first.");

  py::class_<SyntheticSource, PowerSource, std::shared_ptr<SyntheticSource>>(
      m, "SyntheticSource",
      "Deterministic test source: reading k appears k periods after the first poll, with total power\n"
      "base_w + amplitude_w * sin(2 pi (k mod cycle) / cycle) and compute/io/memory = 0.6/0.25/0.15 of it.\n"
      "depth=1 behaves like a latest-value file (gpu_metrics); depth>1 like a sample buffer (NVML).")
      .def(py::init([](std::int64_t period_ns, std::int64_t depth, std::int64_t channel_mask, double base_w,
                       double amplitude_w, std::int64_t cycle, std::int64_t ts_offset, std::int64_t window_ns,
                       std::int64_t transient_error_every, std::int64_t fatal_error_at_poll) {
             // Signed on the Python side so a negative value is named in a
             // ValueError rather than rejected as an unmatched overload.
             auto in_range = [](std::int64_t v, std::int64_t hi, const char* name) {
               if (v < 0 || v > hi) {
                 throw std::invalid_argument(std::string(name) + "=" + std::to_string(v) + ": must be in [0, " +
                                             std::to_string(hi) + "]");
               }
               return v;
             };
             constexpr std::int64_t u32 = 0xFFFFFFFFLL;
             SyntheticConfig c;
             c.period_ns = period_ns;
             c.depth = static_cast<std::uint32_t>(in_range(depth, u32, "depth"));
             c.channel_mask = static_cast<std::uint32_t>(in_range(channel_mask, u32, "channel_mask"));
             c.base_w = base_w;
             c.amplitude_w = amplitude_w;
             c.cycle = cycle;
             c.ts_offset = ts_offset;
             c.window_ns = static_cast<std::uint32_t>(in_range(window_ns, u32, "window_ns"));
             c.transient_error_every =
                 static_cast<std::uint64_t>(in_range(transient_error_every, INT64_MAX, "transient_error_every"));
             c.fatal_error_at_poll = static_cast<std::uint64_t>(in_range(fatal_error_at_poll, INT64_MAX, "fatal_error_at_poll"));
             return std::make_shared<SyntheticSource>(c);
           }),
           py::kw_only(), py::arg("period_ns") = 1'000'000, py::arg("depth") = 1,
           py::arg("channel_mask") = kAllChannels, py::arg("base_w") = 300.0, py::arg("amplitude_w") = 100.0,
           py::arg("cycle") = 50, py::arg("ts_offset") = 0, py::arg("window_ns") = 0,
           py::arg("transient_error_every") = 0, py::arg("fatal_error_at_poll") = 0)
      .def("value", [](const SyntheticSource& src, const py::int_& k, int channel) {
             // k spans the whole unsigned 64-bit sequence space; a negative
             // k is named rather than rejected as an overload mismatch.
             if (k < py::int_(0)) throw std::invalid_argument("k=" + py::str(k).cast<std::string>() + ": must be >= 0");
             return src.value(k.cast<std::uint64_t>(), channel);
           }, py::arg("k"), py::arg("channel"),
           "Power of channel `channel` (0..3) in reading k, as the documented waveform gives it.")
      .def("appear_host_ns", [](const SyntheticSource& src, std::int64_t k) {
             if (k < 0) throw std::invalid_argument("k=" + std::to_string(k) + ": must be >= 0");
             return src.appear_host_ns(static_cast<std::uint64_t>(k));
           }, py::arg("k"),
           "Host time at which reading k appears; -1 before the first poll.")
      .def_property_readonly("polls", &SyntheticSource::polls);
}

void register_sampler(py::module_& m) {
  m.attr("MIN_PERIOD_NS") = kMinPeriodNs;
  m.attr("MAX_PERIOD_NS") = kMaxPeriodNs;
  m.attr("MIN_CAPACITY") = kMinCapacity;
  m.attr("MAX_CAPACITY") = kMaxCapacity;

  py::class_<SamplerStats>(m, "SamplerStats", "Counters and timing of one sampler run.")
      .def_readonly("polls", &SamplerStats::polls)
      .def_readonly("samples", &SamplerStats::samples)
      .def_readonly("duplicates", &SamplerStats::duplicates)
      .def_readonly("drops", &SamplerStats::drops)
      .def_readonly("source_missed", &SamplerStats::source_missed)
      .def_readonly("read_errors", &SamplerStats::read_errors)
      .def_readonly("deadline_misses", &SamplerStats::deadline_misses)
      .def_readonly("drained", &SamplerStats::drained)
      .def_readonly("jitter_p50_ns", &SamplerStats::jitter_p50_ns)
      .def_readonly("jitter_p90_ns", &SamplerStats::jitter_p90_ns)
      .def_readonly("jitter_p99_ns", &SamplerStats::jitter_p99_ns)
      .def_readonly("jitter_max_ns", &SamplerStats::jitter_max_ns)
      .def_readonly("mean_period_ns", &SamplerStats::mean_period_ns)
      .def_readonly("cpu_time_ns", &SamplerStats::cpu_time_ns)
      .def_readonly("wall_time_ns", &SamplerStats::wall_time_ns)
      .def_readonly("buffered", &SamplerStats::buffered)
      .def_readonly("last_read_error", &SamplerStats::last_read_error)
      .def_property_readonly("cpu_fraction",
                             [](const SamplerStats& s) {
                               return s.wall_time_ns > 0 ? static_cast<double>(s.cpu_time_ns) /
                                                               static_cast<double>(s.wall_time_ns)
                                                         : 0.0;
                             },
                             "Sampler thread CPU time / wall time (1.0 = one whole core).")
      .def("as_dict", [](const SamplerStats& s) {
        py::dict d;
        d["polls"] = s.polls;
        d["samples"] = s.samples;
        d["duplicates"] = s.duplicates;
        d["drops"] = s.drops;
        d["source_missed"] = s.source_missed;
        d["read_errors"] = s.read_errors;
        d["deadline_misses"] = s.deadline_misses;
        d["drained"] = s.drained;
        d["jitter_p50_ns"] = s.jitter_p50_ns;
        d["jitter_p90_ns"] = s.jitter_p90_ns;
        d["jitter_p99_ns"] = s.jitter_p99_ns;
        d["jitter_max_ns"] = s.jitter_max_ns;
        d["mean_period_ns"] = s.mean_period_ns;
        d["cpu_time_ns"] = s.cpu_time_ns;
        d["wall_time_ns"] = s.wall_time_ns;
        d["buffered"] = s.buffered;
        d["last_read_error"] = s.last_read_error;
        return d;
      })
      .def("__repr__", [](const SamplerStats& s) {
        return "SamplerStats(polls=" + std::to_string(s.polls) + ", samples=" + std::to_string(s.samples) +
               ", duplicates=" + std::to_string(s.duplicates) + ", drops=" + std::to_string(s.drops) +
               ", source_missed=" + std::to_string(s.source_missed) +
               ", read_errors=" + std::to_string(s.read_errors) +
               ", deadline_misses=" + std::to_string(s.deadline_misses) +
               ", jitter_p99_ns=" + std::to_string(s.jitter_p99_ns) + ")";
      });

  py::class_<Sampler>(m, "Sampler",
                      "Polls one power source on a background C++ thread and buffers new readings in a\n"
                      "lock-free ring. Use as a context manager, or start()/stop(); drain() any time.")
      .def(py::init([](std::shared_ptr<PowerSource> source, const py::object& period_ns, const py::object& capacity,
                       const py::object& cpu) {
             // Python ints of any size: an absurd value is named with its
             // range, not refused as an overload mismatch; the core then
             // checks the finer rules (a power of two, the allowed CPUs).
             SamplerConfig c;
             c.period_ns = int_arg(period_ns, "period_ns", kMinPeriodNs, kMaxPeriodNs,
                                   "in [20000, 1000000000] ns (20 us to 1 s)");
             c.capacity = static_cast<std::size_t>(int_arg(
                 capacity, "capacity", 0, INT64_MAX, "a power of two in [16, 2^26 = 67108864] (64-byte samples)"));
             c.cpu = cpu.is_none() ? -1
                                   : static_cast<int>(int_arg(cpu, "cpu", 0, INT32_MAX,
                                                              ">= 0, or None for no pinning"));
             return std::make_unique<Sampler>(std::move(source), c);
           }),
           py::arg("source"), py::kw_only(), py::arg("period_ns") = 1'000'000, py::arg("capacity") = 1 << 16,
           py::arg("cpu") = py::none())
      .def("start", &Sampler::start, "Starts the sampler thread. A sampler runs once.")
      .def(
          "stop",
          [](Sampler& s) {
            {
              py::gil_scoped_release nogil;
              s.stop();
            }
            const std::string err = s.error();
            if (!err.empty()) throw SamplerFailure(err);
          },
          "Stops and joins the thread (one last poll first). Raises SamplerError if the thread failed.")
      .def(
          "drain",
          [](Sampler& s, const py::object& max) {
            const std::size_t limit =
                max.is_none() ? std::size_t(-1) : static_cast<std::size_t>(int_arg(max, "max", 0, INT64_MAX));
            std::unique_ptr<Sample[]> buf;
            std::size_t n = 0;
            {
              py::gil_scoped_release nogil;
              // available() is an exact lower bound for the consumer, so the
              // buffer is sized once and filled completely.
              const std::size_t want = std::min(s.available(), limit);
              buf.reset(new Sample[want > 0 ? want : 1]);
              n = s.drain(buf.get(), want);
            }
            if (n == 0 && limit != 0 && !s.running()) {
              if (!s.started()) throw std::runtime_error("drain(): the sampler was never started; call start() first");
              // The thread may have ended (pushing its final poll) between
              // sizing the buffer and draining: once it has ended,
              // available() is exact, so look once more. Nothing there: an
              // empty array (a stopped sampler drained to the end is not an
              // error; stop() reports a failed thread).
              py::gil_scoped_release nogil;
              const std::size_t want = std::min(s.available(), limit);
              if (want > 0) {
                buf.reset(new Sample[want]);
                n = s.drain(buf.get(), want);
              }
            }
            // Each call hands numpy a buffer of its own, never reused: the
            // array owns its samples and nothing changes them afterwards.
            return owning_array(sample_dtype(), std::move(buf), n);
          },
          py::arg("max") = py::none(),
          "Moves buffered samples (at most `max`) into a new SAMPLE_DTYPE array that owns them, without a\n"
          "further copy; empty once a stopped sampler is drained.")
      .def(
          "drain_into",
          [](Sampler& s, py::array out) {
            if (!out.dtype().equal(sample_dtype())) {
              throw std::invalid_argument("out: dtype must be SAMPLE_DTYPE, got " +
                                          py::str(out.dtype()).cast<std::string>());
            }
            if (out.ndim() != 1 || !(out.flags() & py::array::c_style) || !out.writeable()) {
              throw std::invalid_argument("out: must be a writeable, C-contiguous 1-D array");
            }
            auto* dst = static_cast<Sample*>(out.mutable_data());
            const auto cap = static_cast<std::size_t>(out.shape(0));
            std::size_t n;
            {
              py::gil_scoped_release nogil;
              n = s.drain(dst, cap);
            }
            // Same contract as drain(): look once more in case the thread
            // ended between the two calls; 0 once a stopped sampler is drained.
            if (n == 0 && cap != 0 && !s.running()) {
              if (!s.started()) throw std::runtime_error("drain_into(): the sampler was never started; call start() first");
              py::gil_scoped_release nogil;
              n = s.drain(dst, cap);
            }
            return n;
          },
          py::arg("out"),
          "Moves up to len(out) samples into `out` (SAMPLE_DTYPE); returns how many (0 once a stopped sampler\n"
          "is drained).")
      .def_property_readonly("available", &Sampler::available, "Samples waiting in the ring.")
      .def_property_readonly("running", &Sampler::running)
      .def_property_readonly("started", &Sampler::started)
      .def_property_readonly("error", [](const Sampler& s) -> std::optional<std::string> {
        std::string e = s.error();
        if (e.empty()) return std::nullopt;
        return e;
      })
      .def_property_readonly("period_ns", [](const Sampler& s) { return s.config().period_ns; })
      .def_property_readonly("capacity", [](const Sampler& s) { return s.config().capacity; })
      .def_property_readonly("cpu", [](const Sampler& s) -> std::optional<int> {
        if (s.config().cpu < 0) return std::nullopt;
        return s.config().cpu;
      })
      .def_property_readonly("source", [](const Sampler& s) { return s.source(); })
      .def("stats", &Sampler::stats, "A snapshot of the counters; valid while running and after stop().")
      .def("__enter__", [](Sampler& s) -> Sampler& {
        s.start();
        return s;
      }, py::return_value_policy::reference)
      .def("__exit__", [](Sampler& s, const py::object& exc_type, const py::object&, const py::object&) {
        {
          py::gil_scoped_release nogil;
          s.stop();
        }
        // An exception already leaving the with-block wins; otherwise a
        // thread failure surfaces here.
        const std::string err = s.error();
        if (!err.empty() && exc_type.is_none()) throw SamplerFailure(err);
        return false;
      });
}

}  // namespace fingrav::bindings
