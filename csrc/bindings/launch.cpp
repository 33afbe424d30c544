// Native launch capture: the bracketed reads of its record clocks, exactly as
// the tool libraries take them, and its journal's CRC-32.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "common.hpp"
#include "fingrav/launch/crc32.hpp"
#include "fingrav/launch/launch_capture.hpp"
#include "register.hpp"

namespace fingrav::bindings {

void register_launch(py::module_& m) {
  m.def(
      "launch_clock_brackets",
      [](const std::string& clock, py::ssize_t n_arg) {
        const int id = launch::record_clock_id(clock);
        if (id < 0) {
          throw std::invalid_argument("clock='" + clock + "': must be 'CLOCK_BOOTTIME' or 'CLOCK_REALTIME'");
        }
        if (n_arg < 1 || n_arg > (1 << 24)) {
          throw std::invalid_argument("n=" + std::to_string(n_arg) + ": must be in [1, 2^24]");
        }
        const auto n = static_cast<std::size_t>(n_arg);
        auto rows = std::make_unique<std::int64_t[]>(3 * n);
        {
          py::gil_scoped_release nogil;
          launch::read_clock_brackets(id, rows.get(), n);
        }
        std::int64_t* raw = rows.release();
        py::capsule owner(raw, [](void* p) { delete[] static_cast<std::int64_t*>(p); });
        return py::array_t<std::int64_t>({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(3)}, raw, owner);
      },
      py::arg("clock"), py::arg("n"),
      "n bracketed reads of a launch record clock ('CLOCK_BOOTTIME': rocprofiler-sdk's, 'CLOCK_REALTIME':\n"
      "CUPTI's) as the launch capture takes them at each flush: an (n, 3) int64 array of (CLOCK_MONOTONIC_RAW\n"
      "before, the clock, CLOCK_MONOTONIC_RAW after), ns. ValueError naming clock or n (in [1, 2^24]).");
  m.def(
      "journal_crc32",
      [](const py::bytes& data, std::int64_t crc_arg) {
        if (crc_arg < 0 || crc_arg > 0xFFFFFFFFLL) {
          throw std::invalid_argument("crc=" + std::to_string(crc_arg) + ": must be in [0, 2^32 - 1]");
        }
        const auto crc = static_cast<std::uint32_t>(crc_arg);
        char* buf = nullptr;
        py::ssize_t len = 0;
        if (PYBIND11_BYTES_AS_STRING_AND_SIZE(data.ptr(), &buf, &len) != 0) throw py::error_already_set();
        return launch::crc32(buf, static_cast<std::size_t>(len), crc);
      },
      py::arg("data"), py::arg("crc") = 0,
      "The CRC-32 the launch journal frames each record with (the native tools' slice-by-8), continuing from\n"
      "crc: equal to zlib.crc32(data, crc) by contract.");
}

}  // namespace fingrav::bindings
