// kineto_real_cpu_test.cpp — real PyTorch 2.15 profiler traces of CPU jobs on Gloo
// (tests/fixtures/kineto/real-cpu/, made by scripts/kineto-jobs/make_traces.py, record_shapes on):
// each Gloo collective carries its bytes from the annotation's "Input Dims" and "Input type", and a
// pair of runs that differ only in DDP's bucket size is explained by the calls, not by more bytes.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rankscope/analyzers/diff/run_diff.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/kineto/kineto_import.h"

namespace rankscope::kineto {
namespace {

namespace fs = std::filesystem;

const fs::path kRealCpu = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto/real-cpu";

fs::path scratch(const std::string& name) {
  static int counter = 0;
  const fs::path p =
      fs::temp_directory_path() / ("rs-kineto-cpu-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(p);
  return p;
}

// The run's rank traces (truth.json beside them is the fixture's, not a trace).
std::vector<fs::path> rank_traces(const fs::path& dir) {
  std::vector<fs::path> out;
  for (int r = 0; fs::exists(dir / ("rank" + std::to_string(r) + ".json.gz")); ++r)
    out.push_back(dir / ("rank" + std::to_string(r) + ".json.gz"));
  return out;
}

fs::path import_run(const fs::path& traces, const std::string& name) {
  const fs::path run = scratch(name);
  auto summary = import_kineto(rank_traces(traces), run);
  EXPECT_TRUE(summary.ok()) << summary.status().to_string();
  return run;
}

TEST(KinetoRealCpu, GlooCollectivesCarryTheBytesOfTheirInputs) {
  // DDP with bucket_cap_mb=1: 16 gradient all-reduces a step of 262,656 floats each.
  const fs::path run = import_run(kRealCpu / "bucket/new", "bucket-new");
  for (int rank = 0; rank < 4; ++rank) {
    auto stream = format::read_event_stream(format::event_stream_path(run, rank));
    ASSERT_TRUE(stream.ok()) << stream.status().to_string();
    ASSERT_FALSE(stream->steps.empty());
    for (const auto& step : stream->steps) {
      uint64_t bytes = 0;
      for (const auto& c : step.collectives) bytes += c.bytes;
      EXPECT_EQ(step.collectives.size(), 16u) << "rank " << rank << " step " << step.step;
      EXPECT_EQ(bytes, 16u * 262656u * 4u) << "rank " << rank << " step " << step.step;
    }
  }
}

TEST(KinetoRealCpu, ASmallerDdpBucketIsMoreCallsOfTheSameBytes) {
  const fs::path base = import_run(kRealCpu / "bucket/base", "bucket-base");
  const fs::path now = import_run(kRealCpu / "bucket/new", "bucket-new");
  auto diff = analyzers::diff_runs(base, now);
  ASSERT_TRUE(diff.ok()) << diff.status().to_string();
  EXPECT_NE(diff->headline.find("16 collective sites a step instead of 1 (15 more allreduce on gloo)"), std::string::npos)
      << diff->headline;
  EXPECT_NE(diff->headline.find("the same 16.81 MB a step, split into 16x as many calls"), std::string::npos) << diff->headline;
}

}  // namespace
}  // namespace rankscope::kineto
