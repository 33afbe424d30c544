// The module body is a list of sections, one register_*() per concept (see
// common.hpp for how the bindings are written). Order matters where a section
// names another's type: TimestampSource (clocks) and PowerSource (sources) are
// registered before the simulator and vendor classes derived from them, and
// every class before the signatures that name it (pybind11 writes a type's
// Python name into a signature only if the type is registered by then). The
// error types come first; none derives from another, so the order of their
// translators does not matter.
#include <pybind11/pybind11.h>

#include "register.hpp"

PYBIND11_MODULE(_core, m) {
  using namespace fingrav::bindings;
  m.doc() = "fingrav-native C++ core: host clock, power sources, sampler thread, event log.";

  register_errors(m);
  register_clocks(m);
  register_sources(m);
  register_sampler(m);
  register_event_log(m);
  register_sim(m);
  register_amd_power(m);
  register_amd_runtime(m);
  register_nvml(m);
  register_cuda(m);
  register_kineto(m);
  register_launch(m);
}
