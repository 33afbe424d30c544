// NvmlPowerSource against the fake libnvidia-ml (tests/fakes/fake_nvml.c),
// here so the sample hand-out, the energy derivation, a sampler thread
// polling while another thread feeds the driver buffer, and a sampler polling
// sensors that refresh more slowly than it polls run under TSan and ASan+UBSan
// too. The Python tests cover the same source in more detail.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "fingrav/nvidia/nvml.hpp"
#include "fingrav/sampler.hpp"

using namespace fingrav;

#ifndef FAKE_NVML_PATH
#error "FAKE_NVML_PATH must name the built fake NVML library"
#endif

namespace {

// The fake's control functions, from the same loaded copy the core opens.
struct Fake {
  void* h = nullptr;
  void (*reset)() = nullptr;
  void (*push_sample)(unsigned, unsigned long long, unsigned) = nullptr;
  void (*set_sample_capacity)(unsigned, unsigned) = nullptr;
  void (*set_field)(unsigned, unsigned, long long, unsigned long long) = nullptr;
  void (*set_device_count)(unsigned) = nullptr;
  void (*set_refresh)(unsigned, unsigned long long, unsigned) = nullptr;
  void (*set_memory)(unsigned, int, unsigned) = nullptr;

  template <typename F>
  void bind(F& f, const char* name) {
    void* p = dlsym(h, name);
    if (p == nullptr) fingrav_test::fail(__FILE__, __LINE__, std::string("fake lacks ") + name);
    f = reinterpret_cast<F>(p);
  }
  Fake() {
    h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) fingrav_test::fail(__FILE__, __LINE__, dlerror());
    bind(reset, "fake_nvml_reset");
    bind(push_sample, "fake_nvml_push_sample");
    bind(set_sample_capacity, "fake_nvml_set_sample_capacity");
    bind(set_field, "fake_nvml_set_field");
    bind(set_device_count, "fake_nvml_set_device_count");
    bind(set_refresh, "fake_nvml_set_refresh");
    bind(set_memory, "fake_nvml_set_memory");
  }
  ~Fake() { dlclose(h); }
};

float watts(unsigned mw) { return static_cast<float>(mw / 1000.0); }

}  // namespace

int main() {
  setenv("FINGRAV_NVML_LIBRARY", FAKE_NVML_PATH, 1);
  Fake fake;
  return fingrav_test::run_tests("nvml", {
  {"samples leave oldest first, at most max per poll, each once", [&] {
    fake.reset();
    fake.set_sample_capacity(0, 1000);
    // The driver's history before the source: it gives the period (1 us
    // here) but is not handed out.
    for (unsigned k = 0; k < 20; ++k) fake.push_sample(0, 80 + k, 700'000);
    NvmlPowerSource src(0, NvmlMode::kSamples);
    for (unsigned k = 0; k < 300; ++k) fake.push_sample(0, 100 + k, 50'000 + k);
    CHECK_EQ(src.info().clock_domain, std::string("nvml-host-us"));
    CHECK_EQ(src.info().tick_ns, 1000.0);
    CHECK_EQ(src.info().native_period_ns, 1000);
    std::vector<Reading> buf(PowerSource::kMaxReadingsPerPoll);
    std::vector<Reading> got;
    for (;;) {
      const PollResult r = src.poll(buf.data(), 100);
      CHECK(r.status == PollStatus::kOk);
      CHECK(r.count <= 100);
      if (r.count == 0) break;
      got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(r.count));
    }
    CHECK_EQ(got.size(), 300u);
    for (unsigned k = 0; k < 300; ++k) {
      CHECK_EQ(got[k].source_ts, 100 + static_cast<std::int64_t>(k));
      CHECK_EQ(got[k].power_w[kTotal], watts(50'000 + k));
      CHECK(std::isnan(got[k].power_w[kCompute]));
    }
  }},

  {"energy: power is the exact difference quotient, flagged derived", [&] {
    fake.reset();
    fake.set_field(0, nvml_abi::NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 1'000'000, 500);
    NvmlPowerSource src(0, NvmlMode::kEnergy);
    Reading r[4];
    CHECK_EQ(src.poll(r, 4).count, 0u);  // baseline
    fake.set_field(0, nvml_abi::NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 1'050'000, 600);
    CHECK_EQ(src.poll(r, 4).count, 0u);  // the first move anchors the baseline
    fake.set_field(0, nvml_abi::NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 1'100'000, 600);
    CHECK_EQ(src.poll(r, 4).count, 0u);  // not moved, whatever the stamp
    fake.set_field(0, nvml_abi::NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 1'300'000, 100'600);  // 100 J in 0.25 s
    const PollResult p = src.poll(r, 4);
    CHECK_EQ(p.count, 1u);
    CHECK_EQ(r[0].power_w[kTotal], 400.0f);
    CHECK_EQ(r[0].window_ns, 250'000'000u);
    CHECK_EQ(r[0].flags, static_cast<std::uint32_t>(kFlagDerived));
  }},

  {"memory scope: one poll reads total and memory, the channel is the memory field's", [&] {
    fake.reset();
    fake.set_memory(0, 1, 90'000);
    fake.set_field(0, nvml_abi::NVML_FI_DEV_POWER_INSTANT, 1'000, 400'000);
    NvmlPowerSource src(0, NvmlMode::kInstant, NvmlScope::kGpu);
    CHECK(src.memory_channel());
    CHECK_EQ(src.info().channel_mask, (1u << kTotal) | (1u << kMemory));
    Reading r[2];
    CHECK_EQ(src.poll(r, 2).count, 0u);  // baseline
    fake.set_memory(0, 1, 120'000);       // only memory moved: still a new reading
    fake.set_field(0, nvml_abi::NVML_FI_DEV_POWER_INSTANT, 2'000, 400'000);
    CHECK_EQ(src.poll(r, 2).count, 1u);
    CHECK_EQ(r[0].power_w[kTotal], 400.0f);
    CHECK_EQ(r[0].power_w[kMemory], 120.0f);
    CHECK(std::isnan(r[0].power_w[kCompute]) && std::isnan(r[0].power_w[kIo]));
  }},

  {"memory scope refused or 0: the channel is absent (NaN), never 0, and says why", [&] {
    for (int on : {0, 1}) {  // NOT_SUPPORTED (an older driver), then SUCCESS with 0 W (no memory rail)
      fake.reset();
      fake.set_memory(0, on, 0);
      fake.set_field(0, nvml_abi::NVML_FI_DEV_POWER_INSTANT, 1'000, 400'000);
      NvmlPowerSource src(0, NvmlMode::kInstant);
      CHECK(!src.memory_channel());
      CHECK_EQ(src.info().channel_mask, 1u << kTotal);
      CHECK(src.memory_reference().find(on ? "answered 0" : "Not Supported") != std::string::npos);
      Reading r[2];
      CHECK_EQ(src.poll(r, 2).count, 0u);
      fake.set_field(0, nvml_abi::NVML_FI_DEV_POWER_INSTANT, 2'000, 410'000);
      CHECK_EQ(src.poll(r, 2).count, 1u);
      CHECK(std::isnan(r[0].power_w[kMemory]));
    }
  }},

  {"no device: DeviceUnavailable", [&] {
    fake.reset();
    fake.set_device_count(0);
    CHECK_THROWS(NvmlPowerSource(0, NvmlMode::kSamples), DeviceUnavailable, "sees 0 GPU");
    fake.set_device_count(1);
  }},

  {"a sampler thread polls while the driver buffer fills", [&] {
    fake.reset();
    fake.set_sample_capacity(0, 4000);
    auto src = std::make_shared<NvmlPowerSource>(0, NvmlMode::kSamples);
    SamplerConfig cfg;
    cfg.period_ns = 100'000;
    cfg.capacity = 1 << 14;
    Sampler s(src, cfg);
    s.start();
    const unsigned n = 3000;
    for (unsigned k = 0; k < n; ++k) {
      fake.push_sample(0, 10 + 3ull * k, 1000 + k);
      if (k % 100 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::vector<Sample> got(n + 16);
    std::size_t have = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (have < n && std::chrono::steady_clock::now() < deadline) {
      have += s.drain(got.data() + have, got.size() - have);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    s.stop();
    have += s.drain(got.data() + have, got.size() - have);
    CHECK_EQ(have, static_cast<std::size_t>(n));
    for (unsigned k = 0; k < n; ++k) {
      CHECK_EQ(got[k].source_ts, 10 + 3 * static_cast<std::int64_t>(k));
      CHECK_EQ(got[k].power_w[kTotal], watts(1000 + k));
    }
    CHECK_EQ(s.stats().read_errors, 0u);
  }},

  {"a sampler keeps only the refreshes of a value it polls faster", [&] {
    fake.reset();
    fake.set_refresh(0, 50'000, 300'000);  // every value refreshed every 50 ms
    for (NvmlMode mode : {NvmlMode::kUsage, NvmlMode::kEnergy}) {
      auto src = std::make_shared<NvmlPowerSource>(0, mode);
      SamplerConfig cfg;
      cfg.period_ns = 1'000'000;
      cfg.capacity = 1 << 12;
      Sampler s(src, cfg);
      s.start();
      std::this_thread::sleep_for(std::chrono::milliseconds(420));
      s.stop();
      std::vector<Sample> got(1 << 12);
      got.resize(s.drain(got.data(), got.size()));
      // ~8 refreshes, less the baseline (and the energy anchor): far fewer than the ~400 polls.
      CHECK(got.size() >= 4 && got.size() <= 14);
      std::vector<std::int64_t> steps;
      for (std::size_t i = 1; i < got.size(); ++i) steps.push_back(got[i].source_ts - got[i - 1].source_ts);
      std::nth_element(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2), steps.end());
      const std::int64_t median_us = steps[steps.size() / 2];
      CHECK(median_us >= 40'000 && median_us <= 60'000);
      if (mode == NvmlMode::kEnergy) {
        // A poll delayed on a loaded host pairs a refresh's energy with another's time, so one log may read
        // 250 or 375 W; over the logs' whole span the energy still averages 300 W, and no log is empty.
        double joules = 0.0, seconds = 0.0;
        for (std::size_t i = 1; i < got.size(); ++i) {
          const double dt = 1e-6 * static_cast<double>(got[i].source_ts - got[i - 1].source_ts);
          CHECK(got[i].power_w[kTotal] > 0.0f);
          joules += static_cast<double>(got[i].power_w[kTotal]) * dt;
          seconds += dt;
        }
        CHECK(seconds > 0.0 && std::fabs(joules / seconds - 300.0) < 30.0);
      }
    }
    fake.set_refresh(0, 0, 0);
  }},
  });
}
