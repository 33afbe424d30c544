// The simulated GPU (csrc/fingrav/sim): SimDevice, its power logger and its
// clock as a PowerSource and a TimestampSource, and the record dtypes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "fingrav/power_source.hpp"
#include "fingrav/sample.hpp"
#include "fingrav/sim/device.hpp"
#include "fingrav/sim/kernels.hpp"
#include "fingrav/sim/shared_device.hpp"
#include "fingrav/timestamp_source.hpp"
#include "register.hpp"

namespace fingrav::bindings {
namespace {

py::dtype exec_dtype() {
  using fingrav::sim::ExecRecord;
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"run", "<i4", offsetof(ExecRecord, run)},
       {"index", "<i4", offsetof(ExecRecord, index)},
       {"kernel_id", "<i4", offsetof(ExecRecord, kernel_id)},
       {"warm_index", "<i4", offsetof(ExecRecord, warm_index)},
       {"start_ns", "<i8", offsetof(ExecRecord, start_ns)},
       {"end_ns", "<i8", offsetof(ExecRecord, end_ns)},
       {"begin_marker_ticks", "<i8", offsetof(ExecRecord, begin_marker_ticks)},
       {"end_marker_ticks", "<i8", offsetof(ExecRecord, end_marker_ticks)},
       {"host_launch_ns", "<i8", offsetof(ExecRecord, host_launch_ns)},
       {"host_sync_ns", "<i8", offsetof(ExecRecord, host_sync_ns)},
       {"energy_j", "<f8", offsetof(ExecRecord, energy_j)},
       {"mean_total_w", "<f8", offsetof(ExecRecord, mean_power_w) + 0 * sizeof(double)},
       {"mean_compute_w", "<f8", offsetof(ExecRecord, mean_power_w) + 1 * sizeof(double)},
       {"mean_io_w", "<f8", offsetof(ExecRecord, mean_power_w) + 2 * sizeof(double)},
       {"mean_memory_w", "<f8", offsetof(ExecRecord, mean_power_w) + 3 * sizeof(double)},
       {"mean_freq", "<f8", offsetof(ExecRecord, mean_freq)},
       {"duration_factor", "<f8", offsetof(ExecRecord, duration_factor)}},
      sizeof(ExecRecord)));
  return *dt;
}

py::dtype log_dtype() {
  using fingrav::sim::LogRecord;
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"sample_ns", "<i8", offsetof(LogRecord, sample_ns)},
       {"publish_ns", "<i8", offsetof(LogRecord, publish_ns)},
       {"logger_ticks", "<i8", offsetof(LogRecord, logger_ticks)},
       {"seq", "<u8", offsetof(LogRecord, seq)},
       {"total", "<f4", offsetof(LogRecord, power_w) + 0 * sizeof(float)},
       {"compute", "<f4", offsetof(LogRecord, power_w) + 1 * sizeof(float)},
       {"io", "<f4", offsetof(LogRecord, power_w) + 2 * sizeof(float)},
       {"memory", "<f4", offsetof(LogRecord, power_w) + 3 * sizeof(float)},
       {"window_ns", "<u4", offsetof(LogRecord, window_ns)}},
      sizeof(LogRecord)));
  return *dt;
}

py::dtype firmware_dtype() {
  using fingrav::sim::FirmwareRecord;
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"t_ns", "<i8", offsetof(FirmwareRecord, t_ns)},
       {"power_avg_w", "<f8", offsetof(FirmwareRecord, power_avg_w)},
       {"power_ppt_w", "<f8", offsetof(FirmwareRecord, power_ppt_w)},
       {"activity", "<f8", offsetof(FirmwareRecord, activity)},
       {"freq", "<f8", offsetof(FirmwareRecord, freq)},
       {"temp_k", "<f8", offsetof(FirmwareRecord, temp_k)},
       {"throttled", "<i4", offsetof(FirmwareRecord, throttled)}},
      sizeof(FirmwareRecord)));
  return *dt;
}

fingrav::sim::SimParams params_from_dict(const py::dict& overrides) {
  fingrav::sim::SimParams p;
  const auto& table = fingrav::sim::param_table();
  for (const auto& item : overrides) {
    const auto name = py::str(item.first).cast<std::string>();
    const auto it = std::find_if(table.begin(), table.end(), [&](const auto& e) { return e.name == name; });
    if (it == table.end()) {
      throw std::invalid_argument(name + ": unknown simulator parameter (see fingrav_native.sim.parameters())");
    }
    double v;
    try {
      v = item.second.cast<double>();
    } catch (const py::cast_error&) {
      throw std::invalid_argument(name + ": must be a number");
    }
    it->set(p, v);
  }
  fingrav::sim::validate_params(p);
  return p;
}

py::dict kernel_to_dict(const fingrav::sim::KernelSpec& k) {
  py::dict d;
  d["name"] = k.name;
  d["kind"] = k.kind;
  d["duration_ns"] = k.duration_ns;
  d["freq_sensitivity"] = k.freq_sensitivity;
  py::list shape;
  for (const auto& s : k.shape) shape.append(py::make_tuple(s.end, s.compute, s.io, s.memory));
  d["shape"] = shape;
  d["exec_cv"] = k.exec_cv;
  d["outlier_prob"] = k.outlier_prob;
  d["outlier_factor"] = k.outlier_factor;
  d["cold_factor"] = k.cold_factor;
  d["cold_decay"] = k.cold_decay;
  d["launch_gap_ns"] = k.launch_gap_ns;
  d["run_cv"] = k.run_cv;
  d["slow_mode_prob"] = k.slow_mode_prob;
  d["slow_mode_min"] = k.slow_mode_min;
  d["slow_mode_max"] = k.slow_mode_max;
  return d;
}

fingrav::sim::KernelSpec kernel_from_dict(const py::dict& d) {
  fingrav::sim::KernelSpec k;
  static const char* const known[] = {"name", "kind", "duration_ns", "freq_sensitivity", "shape", "exec_cv",
                                      "outlier_prob", "outlier_factor", "cold_factor", "cold_decay",
                                      "launch_gap_ns", "run_cv", "slow_mode_prob", "slow_mode_min", "slow_mode_max"};
  for (const auto& item : d) {
    const auto key = py::str(item.first).cast<std::string>();
    if (std::find(std::begin(known), std::end(known), key) == std::end(known)) {
      throw std::invalid_argument(key + ": unknown kernel field");
    }
  }
  if (!d.contains("name")) throw std::invalid_argument("name: a kernel needs a name");
  k.name = d["name"].cast<std::string>();
  if (d.contains("kind")) k.kind = d["kind"].cast<std::string>();
  auto num = [&](const char* key, double& field) {
    if (!d.contains(key)) return;
    try {
      field = d[key].cast<double>();
    } catch (const py::cast_error&) {
      throw std::invalid_argument(std::string(key) + ": must be a number");
    }
  };
  num("duration_ns", k.duration_ns);
  num("freq_sensitivity", k.freq_sensitivity);
  num("exec_cv", k.exec_cv);
  num("outlier_prob", k.outlier_prob);
  num("outlier_factor", k.outlier_factor);
  num("cold_factor", k.cold_factor);
  num("cold_decay", k.cold_decay);
  num("launch_gap_ns", k.launch_gap_ns);
  num("run_cv", k.run_cv);
  num("slow_mode_prob", k.slow_mode_prob);
  num("slow_mode_min", k.slow_mode_min);
  num("slow_mode_max", k.slow_mode_max);
  if (d.contains("shape")) {
    for (const auto& seg : d["shape"]) {
      auto t = seg.cast<py::sequence>();
      if (t.size() != 4) throw std::invalid_argument("shape: each segment is (end, compute, io, memory)");
      k.shape.push_back({t[0].cast<double>(), t[1].cast<double>(), t[2].cast<double>(), t[3].cast<double>()});
    }
  } else {
    k.shape = {{1.0, 0.8, 0.3, 0.3}};
  }
  fingrav::sim::validate_kernel(k);
  return k;
}

template <typename F>
py::array_t<std::int64_t> map_i64(const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& in, F f) {
  py::array_t<std::int64_t> out(in.size());
  auto* o = out.mutable_data();
  const auto* i = in.data();
  for (py::ssize_t k = 0; k < in.size(); ++k) o[k] = f(i[k]);
  return out;
}

const char* state_name(sim::SharedState s) {
  switch (s) {
    case sim::SharedState::kWaiting: return "waiting";
    case sim::SharedState::kAttached: return "attached";
    case sim::SharedState::kDetached: return "detached";
  }
  return "unknown";
}

void register_shared_sim(py::module_& m) {
  m.attr("SHARED_SIM_DEVICE_ENV") = sim::kSharedDeviceEnv;
  m.attr("SHARED_SIM_DEFAULT_CAPACITY") = sim::kSharedDefaultCapacity;
  py::class_<sim::SharedSimDevice, std::shared_ptr<sim::SharedSimDevice>>(
      m, "SharedSimDevice",
      "A simulated GPU shared with an application process through a file (see fingrav_native.sim.SharedSimGPU).")
      .def_static("create", [](const std::string& path, const py::dict& params, const py::object& capacity) {
             const auto c = static_cast<std::uint64_t>(
                 int_arg(capacity, "capacity", 16, sim::kSharedMaxCapacity, "a power of two in [16, 2^24] logs"));
             auto p = params_from_dict(params);
             py::gil_scoped_release nogil;
             return sim::SharedSimDevice::create(path, p, c);
           }, py::arg("path"), py::arg("params") = py::dict(), py::kw_only(),
           py::arg("capacity") = sim::kSharedDefaultCapacity,
           "Creates the shared device file (never over an existing file).")
      .def_static("open", &sim::SharedSimDevice::open, py::arg("path"), "Opens an existing shared device file.")
      .def_property_readonly("path", &sim::SharedSimDevice::path)
      .def_property_readonly("params", [](const sim::SharedSimDevice& d) {
        py::dict out;
        for (const auto& e : sim::param_table()) out[py::str(e.name)] = e.get(d.params());
        return out;
      })
      .def_property_readonly("clock_epoch_ns", &sim::SharedSimDevice::clock_epoch_ns)
      .def_property_readonly("capacity", &sim::SharedSimDevice::capacity)
      .def_property_readonly("state", [](const sim::SharedSimDevice& d) { return std::string(state_name(d.state())); },
                             "'waiting' (no application yet), 'attached' or 'detached' (it ended).")
      .def_property_readonly("producer_pid", &sim::SharedSimDevice::producer_pid)
      .def_property_readonly("attach_ns", &sim::SharedSimDevice::attach_ns)
      .def_property_readonly("detach_ns", &sim::SharedSimDevice::detach_ns)
      .def_property_readonly("published", &sim::SharedSimDevice::published, "Logs the application published.")
      .def("newest", [](const sim::SharedSimDevice& d, const py::object& n_arg) {
             const auto n = static_cast<std::size_t>(int_arg(n_arg, "n", 1, 1 << 24, "in [1, 2^24]"));
             std::vector<sim::LogRecord> out(n);
             out.resize(d.newest(out.data(), n));
             return vector_array(log_dtype(), std::move(out));
           }, py::arg("n"), "The newest n logs in the ring (LOG_DTYPE), oldest first.");

  py::class_<sim::SharedSimPowerSource, PowerSource, std::shared_ptr<sim::SharedSimPowerSource>>(
      m, "SharedSimPowerSource", "A shared simulated device's power logger as a PowerSource for the Sampler.")
      .def(py::init<std::shared_ptr<sim::SharedSimDevice>, std::uint32_t>(), py::arg("device"), py::kw_only(),
           py::arg("depth") = 1);

  py::class_<sim::SharedSimTimestampSource, TimestampSource, std::shared_ptr<sim::SharedSimTimestampSource>>(
      m, "SharedSimTimestampSource", "A shared simulated device's clock as a TimestampSource.")
      .def(py::init<std::shared_ptr<sim::SharedSimDevice>>(), py::arg("device"))
      .def("read", [](sim::SharedSimTimestampSource& t) {
        Bracket b;
        {
          py::gil_scoped_release nogil;
          b = t.read();
        }
        return py::make_tuple(b.host_before, b.device_ticks, b.host_after);
      }, "One bracketed read: (host_before_ns, device_ticks, host_after_ns).");
}

}  // namespace

void register_sim(py::module_& m) {
  namespace sim = fingrav::sim;
  m.attr("EXEC_DTYPE") = exec_dtype();
  m.attr("LOG_DTYPE") = log_dtype();
  m.attr("FIRMWARE_DTYPE") = firmware_dtype();
  m.attr("SIM_MAX_PENDING_EXECUTIONS") = sim::kMaxPendingExecutions;

  m.def("sim_parameters", [] {
    sim::SimParams defaults;
    py::list out;
    for (const auto& e : sim::param_table()) out.append(py::make_tuple(e.name, e.get(defaults), e.doc));
    return out;
  }, "Every simulator parameter as (name, default, doc).");
  m.def("sim_kernel_presets", [] {
    py::list out;
    for (const auto& k : sim::kernel_presets()) out.append(kernel_to_dict(k));
    return out;
  }, "The built-in kernels (the paper's cases) as dicts.");

  py::class_<sim::SimDevice, std::shared_ptr<sim::SimDevice>>(m, "SimDevice",
      "The simulated GPU (see fingrav_native.sim for the friendly wrapper).")
      .def(py::init([](const py::dict& params, bool realtime) {
             return std::make_shared<sim::SimDevice>(params_from_dict(params), realtime);
           }),
           py::arg("params") = py::dict(), py::kw_only(), py::arg("realtime") = false)
      .def_property_readonly("realtime", &sim::SimDevice::realtime)
      .def_property_readonly("params", [](const sim::SimDevice& d) {
        py::dict out;
        for (const auto& e : sim::param_table()) out[py::str(e.name)] = e.get(d.params());
        return out;
      })
      .def("add_kernel", [](sim::SimDevice& d, const py::dict& spec) { return d.add_kernel(kernel_from_dict(spec)); },
           py::arg("spec"), "Registers a user-defined kernel; returns its id.")
      .def("kernel_id", &sim::SimDevice::kernel_id, py::arg("name"))
      .def("kernels", [](const sim::SimDevice& d) {
        py::list out;
        for (const auto& k : d.kernels()) out.append(kernel_to_dict(k));
        return out;
      })
      .def("now", &sim::SimDevice::now, py::call_guard<py::gil_scoped_release>())
      .def("advance", &sim::SimDevice::advance, py::arg("ns"), py::call_guard<py::gil_scoped_release>())
      .def("launch", [](sim::SimDevice& d, const py::object& kernel, const py::object& count, const py::object& run) {
             // Python ints of any size, named with their range when out of
             // it; the device checks the rest (queue limit, kernel ids).
             const auto k = static_cast<int>(int_arg(kernel, "kernel", 0, INT32_MAX, "a kernel id >= 0"));
             const auto c = static_cast<int>(int_arg(count, "count", 1, sim::kMaxPendingExecutions,
                                                     "in [1, 2^20 = 1048576] executions per launch (each is "
                                                     "queued, simulated and recorded); launch fewer"));
             const auto r = static_cast<int>(
                 int_arg(run, "run", 0, INT32_MAX, "in [0, 2^31 - 1 = 2147483647] (an int32 run id)"));
             py::gil_scoped_release nogil;
             d.launch(k, c, r);
           }, py::arg("kernel"), py::arg("count"), py::arg("run"),
           "Enqueues `count` back-to-back executions of kernel id `kernel` for run `run`; returns at once.")
      .def("synchronize", &sim::SimDevice::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("busy", &sim::SimDevice::busy, py::call_guard<py::gil_scoped_release>())
      .def("read_clock", [](sim::SimDevice& d) {
        Bracket b;
        {
          py::gil_scoped_release nogil;
          b = d.read_clock();
        }
        return py::make_tuple(b.host_before, b.device_ticks, b.host_after);
      }, "One bracketed read: (host_before_ns, device_ticks, host_after_ns).")
      .def("read_clocks", [](sim::SimDevice& d, const py::object& n_arg) {
        // The bound of measure_brackets: an absurd n is named, not a
        // MemoryError from the output array.
        const auto n = static_cast<py::ssize_t>(int_arg(n_arg, "n", 1, 1 << 24, "in [1, 2^24]"));
        py::array_t<std::int64_t> out({n, static_cast<py::ssize_t>(3)});
        auto* o = out.mutable_data();
        py::gil_scoped_release nogil;
        for (py::ssize_t i = 0; i < n; ++i) {
          const Bracket b = d.read_clock();
          o[3 * i] = b.host_before;
          o[3 * i + 1] = b.device_ticks;
          o[3 * i + 2] = b.host_after;
        }
        return out;
      }, py::arg("n"), "A burst of n back-to-back bracketed reads as an (n, 3) int64 array.")
      .def("device_ticks_at", [](const sim::SimDevice& d, const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& t) {
        return map_i64(t, [&](std::int64_t h) { return d.device_ticks_at(h); });
      }, py::arg("host_ns"), "True device clock ticks at host times.")
      .def("logger_ticks_at", [](const sim::SimDevice& d, const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& t) {
        return map_i64(t, [&](std::int64_t h) { return d.logger_ticks_at(h); });
      }, py::arg("host_ns"), "True logger clock ticks at host times.")
      .def("host_at_device_ticks", py::vectorize([](const sim::SimDevice* d, double ticks) { return d->host_at_device_ticks(ticks); }),
           py::arg("ticks"), "True host time (float ns) at which the device clock reads `ticks`.")
      .def("host_at_logger_ticks", py::vectorize([](const sim::SimDevice* d, double ticks) { return d->host_at_logger_ticks(ticks); }),
           py::arg("ticks"), "True host time (float ns) at which the logger clock reads `ticks`.")
      .def("truth_power", [](sim::SimDevice& d, const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& t) {
        py::array_t<float> out({t.size(), static_cast<py::ssize_t>(4)});
        float* o = out.mutable_data();
        const std::int64_t* ti = t.data();
        const auto n = static_cast<std::size_t>(t.size());
        py::gil_scoped_release nogil;
        d.truth_power(ti, n, o);
        return out;
      }, py::arg("host_ns"), "Exact power (total, compute, io, memory) at host times, as an (n, 4) array.")
      .def("executions", [](sim::SimDevice& d, py::ssize_t first) {
             return vector_array(exec_dtype(), d.executions(non_negative(first, "first")));
           }, py::arg("first") = 0, "Execution records (EXEC_DTYPE), skipping the first `first`.")
      .def("execution_count", &sim::SimDevice::execution_count, "How many execution records there are.")
      .def("logs", [](sim::SimDevice& d) { return vector_array(log_dtype(), d.logs()); })
      .def("observed_samples", [](sim::SimDevice& d, std::optional<std::int64_t> from_publish_ns) {
             return vector_array(sample_dtype(), d.observed_samples(from_publish_ns.value_or(INT64_MIN)));
           }, py::arg("from_publish_ns") = py::none(),
           "The logs (published at or after from_publish_ns) as a sampler polling every poll_period_ns\n"
           "would have drained them (SAMPLE_DTYPE).")
      .def("firmware", [](sim::SimDevice& d) { return vector_array(firmware_dtype(), d.firmware()); })
      .def("clear_records", &sim::SimDevice::clear_records)
      .def("current_freq", &sim::SimDevice::current_freq)
      .def("current_temp_rise_k", &sim::SimDevice::current_temp_rise_k,
           "Die temperature above ambient, kelvin (the leakage model's input).");

  py::class_<sim::SimPowerSource, PowerSource, std::shared_ptr<sim::SimPowerSource>>(
      m, "SimPowerSource", "A real-time SimDevice's power logger as a PowerSource for the Sampler.")
      .def(py::init<std::shared_ptr<sim::SimDevice>, std::uint32_t>(), py::arg("device"), py::kw_only(),
           py::arg("depth") = 1);

  py::class_<sim::SimTimestampSource, TimestampSource, std::shared_ptr<sim::SimTimestampSource>>(
      m, "SimTimestampSource", "A SimDevice's clock as a TimestampSource.")
      .def(py::init<std::shared_ptr<sim::SimDevice>>(), py::arg("device"));

  register_shared_sim(m);
}

}  // namespace fingrav::bindings
