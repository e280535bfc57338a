// hang_one_process_test.cpp — a job with no peer to lag behind: one process
// stuck in a compute range is stuck_in_compute, in a data range host_stall, never lagging_rank;
// the sentence says where, for how long, and under which activation-recompute setting.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::hang {
namespace {

using testing::FakeProcessTable;
using testing::make_run;
using testing::scratch;

// Sets run.json's model.recompute, as gpt2-train writes it.
void set_recompute(const std::filesystem::path& dir, int recompute) {
  nlohmann::json j;
  std::ifstream(dir / "run.json") >> j;
  j["model"]["recompute"] = recompute;
  std::ofstream(dir / "run.json") << j.dump(2);
}

TEST(HangOneProcess, StuckInBackwardUnderRecomputeIsStuckInCompute) {
  auto run = make_run(scratch("op"), 1, 6, 1, "stall:rank=0,range=backward/block1/mlp,step=3");
  set_recompute(run.dir, 1);
  FakeProcessTable procs;
  auto rd = format::open_run_directory(run.dir);
  ASSERT_TRUE(rd.ok());
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kStuckInCompute);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{0});
  EXPECT_EQ(d.recompute, "1 (GELU)");
  EXPECT_NE(d.headline.find("rank 0 is stuck in compute in backward/block1/mlp at step 3 for 60 s (activation "
                            "recompute 1 (GELU))"),
            std::string::npos)
      << d.headline;
  EXPECT_EQ(d.headline.find("least progress"), std::string::npos) << d.headline;
  EXPECT_NE(d.explanation.find("re-runs its forward"), std::string::npos) << d.explanation;
  const auto j = render_json(d);
  EXPECT_EQ(j.at("kind"), "stuck_in_compute");
  EXPECT_EQ(j.at("recompute"), "1 (GELU)");
  EXPECT_NEAR(j.at("ranks")[0].at("range_s").get<double>(), 60.0, 1.0);
}

TEST(HangOneProcess, StuckInDataIsAHostStall) {
  auto run = make_run(scratch("op"), 1, 6, 1, "stall:rank=0,range=data,step=2");
  FakeProcessTable procs;
  auto rd = format::open_run_directory(run.dir);
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kHostStall);
  EXPECT_NE(d.headline.find("rank 0 is stuck in host work in data at step 2"), std::string::npos) << d.headline;
}

TEST(HangOneProcess, ALaggingRankAmongPeersStaysLagging) {
  // Two ranks, one waits in a collective for the other: a peer is ahead, so lagging_rank.
  auto run = make_run(scratch("op"), 2, 6, 2, "stall:rank=1,range=forward/embed,step=2");
  FakeProcessTable procs;
  auto rd = format::open_run_directory(run.dir);
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.kind, Kind::kLaggingRank);
}

}  // namespace
}  // namespace rankscope::analyzers::hang
