// What every binding file shares. These files (csrc/bindings/) are the only
// ones that include pybind11. Thin: cast arguments, release the GIL, call
// plain C++. Arrays leave C++ without a copy: drained samples are handed to
// numpy together with a capsule that owns their memory, and marker views keep
// the EventLog's buffer alive through theirs (a buffer never reused while
// viewed). No array handed out changes afterwards.
//
// module.cpp calls one register_*() per concept (register.hpp); helpers one
// file alone needs stay in that file's anonymous namespace.
#pragma once

// numpy.h and stl.h in every file, so each type caster is the same in all.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace fingrav::bindings {

// Raised to Python as fingrav_native.SamplerError: the sampler thread failed.
struct SamplerFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A numpy structured dtype from (name, format, offset) triples and an item
// size; built through numpy itself so field offsets are exactly ours.
py::dtype make_dtype(std::initializer_list<std::tuple<const char*, const char*, std::size_t>> fields,
                     std::size_t itemsize);

// SAMPLE_DTYPE: what the Sampler drains and SimDevice.observed_samples returns.
py::dtype sample_dtype();

// (standard_base, fingrav_native.FingravError): the bases of a compiled error
// class, so it is caught both as the standard error and by the package's root.
py::object rooted_bases(PyObject* standard_base);

// Hands a heap array of T to numpy; the capsule deletes it with the array.
template <typename T>
py::array owning_array(const py::dtype& dt, std::unique_ptr<T[]> data, std::size_t n) {
  T* raw = data.release();
  py::capsule owner(raw, [](void* p) { delete[] static_cast<T*>(p); });
  return py::array(dt, {static_cast<py::ssize_t>(n)}, {static_cast<py::ssize_t>(sizeof(T))}, raw, owner);
}

// Moves a vector of records into a numpy array (no copy: the capsule owns
// the vector).
template <typename T>
py::array vector_array(const py::dtype& dt, std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array(dt, {static_cast<py::ssize_t>(owned->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                   owned->data(), owner);
}

// v as a size, or a ValueError naming the argument when it is negative.
std::size_t non_negative(py::ssize_t v, const char* name);

// An integer argument in [lo, hi]. Takes a Python int of any size, or
// anything with __index__ (numpy integers), so an out-of-range value is
// named in a ValueError ("run=4294967296: must be in [0, 2147483647]") rather
// than refused by overload resolution ("incompatible function arguments").
// A bool, float or other non-integer is a TypeError naming the argument.
// `rule`, when given, says what is valid in place of "in [lo, hi]" (e.g.
// "a power of two in [16, 67108864]"); the caller then checks the rest.
std::int64_t int_arg(const py::handle& v, const char* name, std::int64_t lo, std::int64_t hi,
                     const char* rule = nullptr);

}  // namespace fingrav::bindings
