// fingrav-sim-app end to end, in a child process as `fingrav run` runs it:
// the parent creates the shared device and reads its power source while the
// application runs; every log it published is in the ring, in order, and
// every execution in its truth was reported once through the stand-in ABI
// (tests/fakes/standin_record.c), between init and fini. Built with the
// sanitizers in CI, so the application's threads run under TSan and ASan.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "fingrav/sim/device.hpp"
#include "fingrav/sim/shared_device.hpp"

extern char** environ;

namespace {

using fingrav::sim::SharedSimDevice;
using fingrav::sim::SharedState;

std::string temp_path(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/fingrav-simapp-" + std::to_string(::getpid()) + "-" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Rows of a .npy file the application wrote: its header's shape, "(N,)".
long npy_rows(const std::string& path) {
  const std::string s = slurp(path);
  const auto at = s.find("'shape': (");
  CHECK(s.rfind("\x93NUMPY", 0) == 0 && at != std::string::npos);
  return std::stol(s.substr(at + 10));
}

void app_publishes_and_reports_on_the_shared_device() {
  const std::string path = temp_path("gpu.sim");
  const std::string calls = path + ".calls";
  fingrav::sim::SimParams p;
  p.seed = 3;
  auto dev = SharedSimDevice::create(path, p, 4096);
  fingrav::sim::SharedSimPowerSource src(dev, 64);

  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) env_store.emplace_back(*e);
  env_store.push_back(std::string(fingrav::sim::kSharedDeviceEnv) + "=" + path);
  env_store.push_back("FINGRAV_TEST_STANDIN_OUT=" + calls);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {SIM_APP_PATH, "--vendor", "rocm", "--standin", STANDIN_RECORD_PATH,
                                   "--seconds", "0.4"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  CHECK_EQ(::posix_spawn(&pid, SIM_APP_PATH, nullptr, nullptr, argv.data(), envp.data()), 0);

  // The recorder's side while it runs: polls see only whole logs, in order.
  fingrav::Reading out[fingrav::PowerSource::kMaxReadingsPerPoll];
  std::uint64_t newest = 0;
  bool any = false;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    const auto r = src.poll(out, 64);
    for (std::size_t i = 1; i < r.count; ++i) CHECK_EQ(out[i].source_seq, out[i - 1].source_seq + 1);
    if (r.count > 0) {
      if (any) CHECK(out[r.count - 1].source_seq >= newest);
      newest = out[r.count - 1].source_seq;
      any = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(any);
  CHECK(dev->state() == SharedState::kDetached);

  // Every log the application published is still in the ring (4096 > 400), numbered 0, 1, 2, ...
  const std::uint64_t published = dev->published();
  CHECK(published >= 300 && published <= 4096);
  std::vector<fingrav::sim::LogRecord> all(published);
  CHECK_EQ(dev->newest(all.data(), all.size()), static_cast<std::size_t>(published));
  for (std::uint64_t i = 0; i < published; ++i) {
    CHECK_EQ(all[i].seq, i);
    if (i > 0) CHECK(all[i].publish_ns > all[i - 1].publish_ns);
    CHECK(all[i].power_w[0] > 100.0f && all[i].power_w[0] < 1500.0f);
  }

  // The stand-in saw init, one dispatch per execution of the truth, flush, fini.
  std::ifstream f(calls);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  CHECK(lines.size() >= 4);
  CHECK_EQ(lines.front(), std::string("init"));
  CHECK_EQ(lines[lines.size() - 2], std::string("flush"));
  CHECK_EQ(lines.back(), std::string("fini"));
  const long executions = npy_rows(path + ".truth/executions.npy");
  CHECK(executions >= 20);
  CHECK_EQ(static_cast<long>(lines.size()) - 3, executions);
  CHECK(slurp(path + ".truth/meta.json").find("\"logs_published\": " + std::to_string(published)) !=
        std::string::npos);

  for (const char* name : {"executions.npy", "kernels.npy", "energy.npy", "meta.json"}) {
    ::unlink((path + ".truth/" + name).c_str());
  }
  ::rmdir((path + ".truth").c_str());
  ::unlink(calls.c_str());
  dev.reset();
  ::unlink(path.c_str());
}

}  // namespace

int main() {
  return fingrav_test::run_tests("sim_app", {
                                                {"app_publishes_and_reports_on_the_shared_device",
                                                 app_publishes_and_reports_on_the_shared_device},
                                            });
}
