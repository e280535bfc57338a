// probe_test_util.h — a scratch run directory per test, Options that ignore the environment, and a
// probe that traces step 0 with a given kernel tracer.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "rankscope/probe/kernel_tracer.h"
#include "rankscope/probe/probe.h"

namespace rankscope::probe::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rs_probe_XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!::getenv("RANKSCOPE_KEEP_TEST_DIRS")) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Options for a test probe: explicit run dir, no environment, a watchdog that stays quiet.
inline Options test_options(const std::filesystem::path& run_dir, int rank = 0, int world_size = 1) {
  Options o;
  o.read_environment = false;
  o.run_dir = run_dir;
  o.run_id = "test-run";
  o.rank = rank;
  o.world_size = world_size;
  o.watchdog_timeout_s = 600;
  o.watchdog_poll_s = 0.02;
  return o;
}

// A probe writing into `run_dir` that records step 0 in full detail (every range and kernel) and
// times kernels with `tracer`; nullptr, with the reason as a test failure, if either does not start.
inline std::unique_ptr<Probe> kernel_traced_probe(const std::filesystem::path& run_dir,
                                                  std::unique_ptr<KernelTracer> tracer) {
  Options o = test_options(run_dir);
  o.trace_step_begin = 0;
  o.trace_step_end = 0;
  auto created = Probe::create(o);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (!created.ok()) return nullptr;
  Status started = (*created)->set_kernel_tracer(std::move(tracer));
  EXPECT_TRUE(started.ok()) << started.to_string();
  if (!started.ok()) return nullptr;
  return std::move(*created);
}

// A scratch run directory with a kernel-traced probe in it, and the tracer the probe owns, typed so
// the test can drive it: `KernelTracedRun<FakeTracer> run;` or `KernelTracedRun<> run(real_tracer)`.
template <class Tracer = KernelTracer>
struct KernelTracedRun {
  KernelTracedRun() : KernelTracedRun(std::make_unique<Tracer>()) {}
  explicit KernelTracedRun(std::unique_ptr<Tracer> owned)
      : tracer(owned.get()), probe(kernel_traced_probe(dir.path(), std::move(owned))) {}
  ScratchDir dir;
  Tracer* tracer;
  std::unique_ptr<Probe> probe;  // nullptr when it did not start (already a test failure)
};

}  // namespace rankscope::probe::testing
