#include "common.hpp"

#include <string>

#include "fingrav/dynlib.hpp"
#include "fingrav/sample.hpp"
#include "register.hpp"

namespace fingrav::bindings {

py::dtype make_dtype(std::initializer_list<std::tuple<const char*, const char*, std::size_t>> fields,
                     std::size_t itemsize) {
  py::list names, formats, offsets;
  for (const auto& [name, fmt, off] : fields) {
    names.append(name);
    formats.append(fmt);
    offsets.append(off);
  }
  py::dict spec;
  spec["names"] = names;
  spec["formats"] = formats;
  spec["offsets"] = offsets;
  spec["itemsize"] = itemsize;
  return py::dtype::from_args(spec);
}

py::dtype sample_dtype() {
  static const py::dtype* dt = new py::dtype(make_dtype(
      {{"host_ns", "<i8", offsetof(Sample, host_ns)},
       {"host_poll_begin_ns", "<i8", offsetof(Sample, host_poll_begin_ns)},
       {"source_ts", "<i8", offsetof(Sample, source_ts)},
       {"source_seq", "<u8", offsetof(Sample, source_seq)},
       {"seq", "<u8", offsetof(Sample, seq)},
       {"total", "<f4", offsetof(Sample, power_w) + 0 * sizeof(float)},
       {"compute", "<f4", offsetof(Sample, power_w) + 1 * sizeof(float)},
       {"io", "<f4", offsetof(Sample, power_w) + 2 * sizeof(float)},
       {"memory", "<f4", offsetof(Sample, power_w) + 3 * sizeof(float)},
       {"flags", "<u4", offsetof(Sample, flags)},
       {"window_ns", "<u4", offsetof(Sample, window_ns)}},
      sizeof(Sample)));
  return *dt;
}

std::size_t non_negative(py::ssize_t v, const char* name) {
  if (v < 0) throw std::invalid_argument(std::string(name) + "=" + std::to_string(v) + ": must be >= 0");
  return static_cast<std::size_t>(v);
}

std::int64_t int_arg(const py::handle& v, const char* name, std::int64_t lo, std::int64_t hi, const char* rule) {
  const std::string valid = rule ? std::string(rule) : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  // bool is an int subclass, but True is not a count or an id.
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr())) {
    throw py::type_error(std::string(name) + "=" + py::repr(v).cast<std::string>() + ": must be an integer, " +
                         valid);
  }
  const py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0 || x < lo || x > hi) {
    // A huge value is shown by its size: its digits would bury the message
    // (and str() refuses ints of over 4300 digits).
    const auto bits = overflow != 0 ? i.attr("bit_length")().cast<long long>() : 0;
    const std::string shown =
        bits > 256 ? std::string(i < py::int_(0) ? "<a negative " : "<a ") + std::to_string(bits) + "-bit integer>"
                   : py::str(i).cast<std::string>();
    throw std::invalid_argument(std::string(name) + "=" + shown + ": must be " + valid);
  }
  return static_cast<std::int64_t>(x);
}

py::object rooted_bases(PyObject* standard_base) {
  // The package's error root lives in Python (fingrav_native/_errors.py, which
  // imports nothing compiled), so one `except FingravError` also catches what
  // the core raises. PyErr_NewException takes a tuple of bases; importing the
  // root here, at module init, makes the relation hold from the first moment
  // the class exists.
  const py::object root = py::module_::import("fingrav_native._errors").attr("FingravError");
  return py::make_tuple(py::handle(standard_base), root);
}

void register_errors(py::module_& m) {
  const py::object runtime = rooted_bases(PyExc_RuntimeError);
  py::register_exception<SamplerFailure>(m, "SamplerError", runtime);
  // A missing vendor library or device: the message names the library, the
  // paths tried and what to install (see dynlib.hpp).
  py::register_exception<LibraryNotFound>(m, "LibraryNotFoundError", runtime);
  py::register_exception<SymbolNotFound>(m, "SymbolNotFoundError", runtime);
  py::register_exception<DeviceUnavailable>(m, "DeviceUnavailableError", runtime);
}

}  // namespace fingrav::bindings
