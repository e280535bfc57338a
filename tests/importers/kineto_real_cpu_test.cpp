// kineto_real_cpu_test.cpp — real PyTorch 2.15 profiler traces of CPU jobs on Gloo
// (tests/fixtures/kineto/real-cpu/, made by scripts/kineto-jobs/make_traces.py, record_shapes on;
// truth.json beside each run says what was done to it): each Gloo collective carries its bytes from
// the annotation's "Input Dims" and "Input type"; the framework's ops are the leaves of the host
// timeline; the straggler, its class and range are named and nothing under the run's noise is; a
// pair of runs is explained by the cause a person would act on (attention for a longer sequence,
// more calls of the same bytes for a smaller DDP bucket).
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rankscope/analyzers/diff/run_diff.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
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

TEST(KinetoRealCpu, AFolderWithItsNotesBesideTheTracesImportsTheTracesAndSaysWhatItSkipped) {
  const fs::path run = scratch("folder");
  auto summary = import_kineto({kRealCpu / "no_ranges"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->world_size, 4);
  bool said = false;
  for (const std::string& w : summary->warnings) said = said || w.find("truth.json: JSON, but not a profiler trace") != std::string::npos;
  EXPECT_TRUE(said);
  // Named on its own, the same file is refused: the user asked for it.
  auto alone = import_kineto({kRealCpu / "no_ranges/truth.json"}, scratch("alone"));
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().to_string().find("not a PyTorch profiler trace"), std::string::npos);
}

const analyzers::Finding* finding_on(const analyzers::SkewReport& r, int rank) {
  for (const auto& f : r.findings)
    if ((f.kind == "late_arrival" || f.kind == "straggler") && f.ranks.front() == rank) return &f;
  return nullptr;
}

TEST(KinetoRealCpu, ExtraComputeInOneRangeIsThatRanksOnlyFindingWithItsRange) {
  // Rank 2 runs 24 extra matmuls inside `forward` (truth.json); 4 ranks share 2 cores.
  auto report = analyzers::analyze_skew(import_run(kRealCpu / "straggler_range", "straggler"));
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  const analyzers::Finding& top = report->findings.front();
  EXPECT_EQ(top.ranks.front(), 2) << top.text;
  EXPECT_EQ(top.cls, "range_specific") << top.text;
  EXPECT_EQ(top.range, "forward") << top.text;
  EXPECT_NE(top.text.find("x the run's noise"), std::string::npos) << top.text;
  // No other rank is named: their differences are the shared cores' jitter, said in one line.
  for (int rank : {0, 1, 3}) EXPECT_EQ(finding_on(*report, rank), nullptr) << "rank " << rank;
}

TEST(KinetoRealCpu, AThrottledRankIsAUniformSlowdownWhoseTimeIsComputeNotTransfer) {
  // Rank 1 runs a third of the time (SIGSTOP/SIGCONT, as a CPU quota would hold it).
  auto report = analyzers::analyze_skew(import_run(kRealCpu / "throttled_rank", "throttled"));
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  const analyzers::Finding& top = report->findings.front();
  EXPECT_EQ(top.ranks.front(), 1) << top.text;
  EXPECT_EQ(top.cls, "uniform_slowdown") << top.text;
  EXPECT_EQ(top.range, "") << top.text;  // the whole rank, no range of it
  for (int rank : {0, 2, 3}) EXPECT_EQ(finding_on(*report, rank), nullptr) << "rank " << rank;
  // Its time is compute: more than twice its peers', while what it spends moving data is theirs.
  const analyzers::RankSkew& slow = report->ranks[1];
  for (int peer : {0, 2, 3}) {
    const analyzers::RankSkew& p = report->ranks[size_t(peer)];
    EXPECT_GT(slow.compute_ms, 2 * p.compute_ms) << "rank " << peer;
    EXPECT_LT(slow.collective_transfer_ms, 1.5 * p.collective_transfer_ms + 1.0) << "rank " << peer;
  }
}

TEST(KinetoRealCpu, AJobWithNoRangesOfItsOwnGetsItsOpsAsComputeAndNoFinding) {
  // A healthy DDP job with no record_function: the ops are its compute, not idle time.
  const fs::path run = import_run(kRealCpu / "no_ranges", "no-ranges");
  auto report = analyzers::analyze_skew(run);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->findings.empty()) << report->findings.front().text;
  for (const analyzers::RankSkew& rs : report->ranks) {
    EXPECT_GT(rs.compute_ms, 4 * rs.idle_ms) << "rank " << rs.rank;
    bool matmul = false;
    for (const auto& [range, ms] : rs.range_compute_ms) matmul = matmul || (range.ends_with("[matmul]") && ms > 0);
    EXPECT_TRUE(matmul) << "rank " << rs.rank << " has no [matmul] leaf";
  }
}

TEST(KinetoRealCpu, ALongerSequencesDiffNamesAttentionFirst) {
  // T 128 -> 512, everything else equal: attention is most of the growth, forward and backward.
  auto diff = analyzers::diff_runs(import_run(kRealCpu / "seqlen/base", "seq-base"), import_run(kRealCpu / "seqlen/new", "seq-new"));
  ASSERT_TRUE(diff.ok()) << diff.status().to_string();
  EXPECT_NE(diff->headline.find("most of it is attention, "), std::string::npos) << diff->headline;
  EXPECT_NE(diff->headline.find("backward/[attention]"), std::string::npos) << diff->headline;
  EXPECT_NE(diff->headline.find("/[attention]"), diff->headline.rfind("/[attention]")) << "forward's attention too: " << diff->headline;
}

TEST(KinetoRealCpu, ASmallerDdpBucketNamesNoStraggler) {
  // More calls of the same bytes slow every rank alike: no rank is named.
  auto diff = analyzers::diff_runs(import_run(kRealCpu / "bucket/base", "b-base"), import_run(kRealCpu / "bucket/new", "b-new"));
  ASSERT_TRUE(diff.ok()) << diff.status().to_string();
  EXPECT_NE(diff->headline.find("most of it is communication"), std::string::npos) << diff->headline;
  for (const auto& p : diff->parts) EXPECT_EQ(p.cause.find("straggler"), std::string::npos) << p.name << ": " << p.cause;
}

}  // namespace
}  // namespace rankscope::kineto
