// hang_test_support.h — helpers shared by the synth and hang tests: a scratch directory per test,
// a fake process table (dynolog-style fake inputs) and a one-call synthetic run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/synth/synth.h"

namespace rankscope::analyzers::hang::testing {

inline std::filesystem::path scratch(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::temp_directory_path() /
             ("rs_h5_" + tag + "_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Answers from a table: (host, pid) -> liveness; everything else kUnknown (another host).
class FakeProcessTable final : public ProcessTable {
 public:
  std::map<std::pair<std::string, int>, Liveness> table;
  std::string host = "fakehost";
  Liveness liveness(const std::string& h, int pid) override {
    auto it = table.find({h, pid});
    return it == table.end() ? Liveness::kUnknown : it->second;
  }
  std::string local_host() override { return host; }
  // (host, pid) -> what /proc would say; absent: liveness only.
  std::map<std::pair<std::string, int>, ProcessStatus> statuses;
  ProcessStatus status(const std::string& h, int pid) override {
    auto it = statuses.find({h, pid});
    if (it != statuses.end()) return it->second;
    ProcessStatus s;
    s.alive = liveness(h, pid);
    return s;
  }
};

struct SynthRun {
  std::filesystem::path dir;
  synth::SynthSummary summary;
};

// Writes a synthetic run into `dir`; `fault` in --fault syntax or "" for a healthy job.
inline SynthRun make_run(const std::filesystem::path& dir, int ranks, int steps, int tp, const std::string& fault = "",
                         synth::SynthOptions options = {}) {
  options.ranks = ranks;
  options.steps = steps;
  options.tp = tp;
  options.start_ns = 1'700'000'000'000'000'000;
  if (!fault.empty()) {
    auto f = synth::parse_fault(fault);
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (f.ok()) options.fault = *f;
  }
  auto s = synth::write_synthetic_run(dir, options);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return {dir, s.ok() ? *s : synth::SynthSummary{}};
}

}  // namespace rankscope::analyzers::hang::testing
