#include "fingrav/sim/app/truth_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

namespace fingrav::sim::app {

namespace {

std::runtime_error sys_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

void write_all(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw sys_error(path, "cannot create");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool synced = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  if (std::fclose(f) != 0 || !ok || !synced) throw sys_error(path, "cannot write");
}

// A .npy file, format version 1.0 (numpy's NEP 1): magic, header length,
// the header dict padded with spaces to a multiple of 64 bytes, the data.
std::string npy(const std::string& descr, std::size_t rows, const void* data, std::size_t bytes) {
  std::string header = "{'descr': " + descr + ", 'fortran_order': False, 'shape': (" + std::to_string(rows) + ",), }";
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

struct KernelRow {
  char kernel[64];
  std::int64_t count;
  std::int64_t busy_ns;
  double energy_j;
  double mean_power_w;
};
static_assert(sizeof(KernelRow) == 96);

struct EnergyRow {
  std::int64_t t_ns;
  double energy_j;
};

}  // namespace

double EnergyGrid::integral(const TruthSegment& s, std::int64_t a, std::int64_t b) const {
  // Each component follows target + (p0 - target) exp(-(t - t0) / tau) on the
  // segment; the total is (sum of components) (1 + vr_loss) + other_w.
  const double ea = std::exp(-static_cast<double>(a - s.t0) / tau_);
  const double eb = std::exp(-static_cast<double>(b - s.t0) / tau_);
  const double dt = static_cast<double>(b - a);
  double comp = 0;
  for (int c = 0; c < 3; ++c) comp += s.target[c] * dt + (s.p0[c] - s.target[c]) * tau_ * (ea - eb);
  return (comp * (1.0 + vr_) + other_ * dt) * 1e-9;
}

void EnergyGrid::fold(const std::vector<TruthSegment>& segs) {
  for (const TruthSegment& s : segs) {
    if (next_ == INT64_MIN) {
      next_ = s.t0;
      t_.push_back(s.t0);
      e_.push_back(0.0);
      next_ += step_;
    }
    std::int64_t a = s.t0;
    while (next_ <= s.t1) {
      cum_j_ += integral(s, a, next_);
      t_.push_back(next_);
      e_.push_back(cum_j_);
      a = next_;
      next_ += step_;
    }
    cum_j_ += integral(s, a, s.t1);
  }
}

void write_truth(const std::string& device_path, const std::vector<TruthExec>& execs, const EnergyGrid& grid,
                 const TruthMeta& meta) {
  const std::string final_dir = device_path + ".truth";
  const std::string tmp = final_dir + ".tmp-" + std::to_string(::getpid());
  if (::mkdir(tmp.c_str(), 0755) != 0) throw sys_error(tmp, "cannot create the truth folder");

  write_all(tmp + "/executions.npy",
            npy("[('kernel', '|S64'), ('kernel_id', '<i4'), ('run', '<i4'), ('start_ns', '<i8'), ('end_ns', '<i8'), "
                "('energy_j', '<f8'), ('mean_total_w', '<f8'), ('mean_compute_w', '<f8'), ('mean_io_w', '<f8'), "
                "('mean_memory_w', '<f8')]",
                execs.size(), execs.data(), execs.size() * sizeof(TruthExec)));

  std::map<std::string, KernelRow> by_name;
  for (const TruthExec& e : execs) {
    const std::string name(e.kernel, strnlen(e.kernel, sizeof(e.kernel)));
    KernelRow& k = by_name[name];
    std::memcpy(k.kernel, e.kernel, sizeof(k.kernel));
    k.count += 1;
    k.busy_ns += e.end_ns - e.start_ns;
    k.energy_j += e.energy_j;
  }
  std::vector<KernelRow> kernels;
  for (auto& [name, k] : by_name) {
    k.mean_power_w = k.busy_ns > 0 ? k.energy_j / (static_cast<double>(k.busy_ns) * 1e-9) : 0.0;
    kernels.push_back(k);
  }
  write_all(tmp + "/kernels.npy",
            npy("[('kernel', '|S64'), ('count', '<i8'), ('busy_ns', '<i8'), ('energy_j', '<f8'), "
                "('mean_power_w', '<f8')]",
                kernels.size(), kernels.data(), kernels.size() * sizeof(KernelRow)));

  std::vector<EnergyRow> energy(grid.times().size());
  for (std::size_t i = 0; i < energy.size(); ++i) energy[i] = {grid.times()[i], grid.energy_j()[i]};
  write_all(tmp + "/energy.npy", npy("[('t_ns', '<i8'), ('energy_j', '<f8')]", energy.size(), energy.data(),
                                     energy.size() * sizeof(EnergyRow)));

  std::string js = "{\"format\": \"fingrav-sim-truth\", \"version\": 1";
  js += ", \"workload\": " + json_string(meta.workload);
  js += ", \"vendor\": " + json_string(meta.vendor);
  js += ", \"seed\": " + std::to_string(meta.seed);
  js += ", \"pid\": " + std::to_string(::getpid());
  js += ", \"clock\": \"CLOCK_MONOTONIC_RAW\"";
  js += ", \"attach_ns\": " + std::to_string(meta.attach_ns);
  js += ", \"detach_ns\": " + std::to_string(meta.detach_ns);
  js += ", \"dispatched\": " + std::to_string(meta.dispatched);
  js += ", \"dispatch_errors\": " + std::to_string(meta.dispatch_errors);
  js += ", \"logs_published\": " + std::to_string(meta.logs_published);
  js += ", \"signal\": " + std::to_string(meta.signal) + "}\n";
  write_all(tmp + "/meta.json", js);

  // rename() refuses a non-empty target folder: an earlier truth is never written over.
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) throw sys_error(final_dir, "cannot move the truth folder into place");
}

}  // namespace fingrav::sim::app
