// hang_gpt2_fixture_test.cpp — hangdoctor on a checked-in run directory written by the real
// trainer: tests/fixtures/analyzers/hang_gpt2_tp2_stall_embed is
//   mpirun -np 2 gpt2-train --model tiny --data synthetic:zipf --batch 2 --seq-len 32 --steps 20
//          --tp 2 --run-dir run --inject stall:rank=1,range=forward/embed,step=2
// killed about 14 s into the hang (the incident: rank 0 waits in the TP all-reduce while rank 1 is
// still in the embedding). It keeps the classifier honest against the probe's real bytes, and
// keeps this schema version's recorders readable by later hangdoctors.
#include <gtest/gtest.h>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::hang {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/analyzers/hang_gpt2_tp2_stall_embed";

TEST(HangGpt2Fixture, TheIncidentFromRealRecorders) {
  auto run = format::open_run_directory(kFixture);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  testing::FakeProcessTable procs;  // the recording host is not this one: heartbeats decide
  const Diagnosis d = diagnose(*run, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kLaggingRank);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp0");
  EXPECT_EQ(d.collective->seq, 13u);
  EXPECT_EQ(d.collective->op, format::CollectiveOp::kAllReduceSum);
  EXPECT_EQ(d.collective->dtype, format::DataType::kFloat32);
  EXPECT_EQ(d.ranks[1].range, "forward/embed");
  EXPECT_EQ(d.ranks[1].range_stack, (std::vector<std::string>{"step", "forward/embed"}));
  EXPECT_EQ(d.ranks[0].state, RankState::kWaiting);
  EXPECT_EQ(d.ranks[0].last_completed_seq, std::optional<uint64_t>(12));
  EXPECT_EQ(render_text(d).rfind("HANG: rank 1 never entered allreduce #13 on tp0 (32.0 KiB fp32); it is in "
                                 "forward/embed at step 2, idle 1",
                                 0),
            0u)
      << d.headline;
}

TEST(HangGpt2Fixture, SameRunWithOneRankFileMissing) {
  // Copy the fixture without rank 0's recorder: rank 1 alone cannot show a waiter, but it is
  // still read, and the missing rank is reported rather than failing the diagnosis.
  const auto dir = testing::scratch("g2");
  for (const char* f : {"run.json", "rank00001.flight"}) std::filesystem::copy_file(kFixture / f, dir / f);
  auto run = format::open_run_directory(dir);
  ASSERT_TRUE(run.ok());
  testing::FakeProcessTable procs;
  const Diagnosis d = diagnose(*run, procs);
  EXPECT_EQ(d.ranks[0].state, RankState::kMissing);
  EXPECT_EQ(d.ranks[1].range, "forward/embed");
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});  // least progress; no one is seen waiting
}

}  // namespace
}  // namespace rankscope::analyzers::hang
