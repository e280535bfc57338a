// hang_stack_text_test.cpp — the stacks importer on the three texts it reads (py-spy dump,
// faulthandler, the debug server's sections), and the stacks' own verdict: outliers named from two
// still snapshots, none from one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../importers/fr_hangdoctor_run.h"
#include "rankscope/analyzers/hang/joined_verdict.h"
#include "rankscope/analyzers/hang/stack_verdict.h"
#include "rankscope/stacks/stack_import.h"

namespace rankscope::analyzers::hang {
namespace {

constexpr const char* kPySpy = R"TXT(Process 4117: python -u train.py
  --steps 3
Python v3.11.7 (/usr/bin/python3.11)

Thread 4117 (idle): "MainThread"
    stage_forward (train.py:88)
    Stage.forward (train.py:107)
    Module._call_impl (torch/nn/modules/module.py:1798)
    main (train.py:140)
    <module> (train.py:151)
Thread 4195 (active): "Thread-1 (run)"
    Thread.run (threading.py:982)
)TXT";

constexpr const char* kFaultHandler = R"TXT(PARTIAL DATA: 1/2 workers responded
  Rank 1: timeout

=== Rank 0: http://host:41000/handler/dump_traceback? ===
Thread 0x00007f0000000001 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2950 in all_reduce
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/job/train.py", line 60 in train_step
  File "/job/train.py", line 151 in <module>

Current thread 0x00007f0000000002 (most recent call first):
  <no Python frame>
=== Rank 1: http://host:41001/handler/dump_traceback? ===
Error: 500
)TXT";

TEST(StackText, PySpyFramesInnermostFirstWithTheCommandLineSkipped) {
  std::vector<stacks::Snapshot> snaps;
  stacks::parse_stack_text(std::string(kPySpy) + kPySpy, "rank2.txt", snaps);
  ASSERT_EQ(snaps.size(), 2u);
  ASSERT_EQ(snaps[0].threads.size(), 2u);
  const auto& main = snaps[0].threads[0];
  EXPECT_EQ(main.name, "MainThread");
  EXPECT_EQ(main.state, "idle");
  ASSERT_EQ(main.frames.size(), 5u);
  EXPECT_EQ(main.frames[0].function, "stage_forward");
  EXPECT_EQ(main.frames[0].file, "train.py");
  EXPECT_EQ(main.frames[0].line, 88);
  EXPECT_EQ(main.frames[4].function, "<module>");
}

TEST(StackText, DebugServerSectionsAndWhatTheServerFailedToFetch) {
  const auto dir = std::filesystem::temp_directory_path() / "hang_stack_text_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::FILE* f = std::fopen((dir / "stacks_20261202_074500.txt").string().c_str(), "w");
    std::fputs(kFaultHandler, f);
    std::fclose(f);
  }
  ASSERT_TRUE(stacks::looks_like_stacks(dir));
  auto r = stacks::import_stacks({dir});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->ranks.size(), 1u);
  EXPECT_EQ(r->world_size, 2);
  const auto& t = r->ranks.at(0).snapshots.at(0).threads;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].frames.at(0).function, "all_reduce");
  EXPECT_EQ(t[0].frames.at(0).line, 2950);
  EXPECT_TRUE(t[1].current);
  ASSERT_EQ(r->problems.size(), 2u);  // PARTIAL DATA, and rank 1's Error: 500
  const StackSummary s = summarize_stacks(*r);
  EXPECT_EQ(s.ranks.at(0).where, StackWhere::kCollective);
  EXPECT_EQ(s.ranks.at(0).own, "`train_step` at /job/train.py:60");
  std::filesystem::remove_all(dir);
}

stacks::StackImport two_ranks(int snapshots) {
  stacks::StackImport in;
  std::vector<stacks::Snapshot> sleeper, waiter;
  for (int i = 0; i < snapshots; ++i) stacks::parse_stack_text(kPySpy, "rank1.txt", sleeper);
  const std::string waiting = R"TXT(Thread 1 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2950)
    wrapper (torch/distributed/c10d_logger.py:83)
    train_step (train.py:60)
    <module> (train.py:151)
)TXT";
  for (int r : {0, 2}) {
    auto& rs = in.ranks[r];
    rs.rank = r;
    for (int i = 0; i < snapshots; ++i) stacks::parse_stack_text(waiting, "rank.txt", rs.snapshots);
  }
  in.ranks[1].rank = 1;
  in.ranks[1].snapshots = sleeper;
  in.world_size = 3;
  return in;
}

TEST(StackVerdict, TheRankAwayFromTheCollectiveIsNamedWithItsOwnFrame) {
  const StackSummary s = summarize_stacks(two_ranks(2));
  EXPECT_EQ(s.outliers, std::vector<int>{1});
  EXPECT_TRUE(s.outliers_still);
  EXPECT_EQ(s.groups.size(), 2u);
  const Diagnosis d = diagnose_stacks(s);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_NE(d.headline.find("`stage_forward` at train.py:88"), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find("`all_reduce`"), std::string::npos) << d.headline;
}

TEST(StackVerdict, OneSnapshotNamesTheOutlierButRaisesNoAlarm) {
  const Diagnosis d = diagnose_stacks(summarize_stacks(two_ranks(1)));
  EXPECT_EQ(exit_code(d), 0);
  EXPECT_NE(d.headline.find("rank 1"), std::string::npos) << d.headline;
}

// The join on hand-made verdicts: the issue's own example, a disagreement, and the stacks that
// overrule a dump showing a finished collective still open.
Diagnosis verdict(Verdict v, std::vector<int> culprits, std::string headline, int world = 8) {
  Diagnosis d;
  d.verdict = v;
  d.kind = v == Verdict::kHealthy ? Kind::kNone : Kind::kLaggingRank;
  d.culprit_ranks = std::move(culprits);
  d.headline = std::move(headline);
  d.world_size = world;
  for (int r = 0; r < world; ++r) d.ranks.push_back(RankReport{.rank = r});
  return d;
}

TEST(JoinedVerdict, TheDumpsOneOfRanksAndTheLogsOneRankGiveThatRankCitingBoth) {
  JoinInputs in;
  in.dumps = verdict(Verdict::kHang, {4, 5, 6, 7}, "HANG: one of ranks 4-7 never entered allreduce #3");
  in.log = LogVerdict{verdict(Verdict::kHang, {6}, "HANG: rank 6 raised no error while the others timed out"), {}};
  const JoinedVerdict j = join_verdicts(in);
  EXPECT_EQ(j.diagnosis.culprit_ranks, std::vector<int>{6});
  EXPECT_NE(j.diagnosis.headline.find("the dumps name ranks 4-7"), std::string::npos) << j.diagnosis.headline;
  EXPECT_NE(j.diagnosis.headline.find("the log names rank 6"), std::string::npos) << j.diagnosis.headline;
  ASSERT_EQ(j.joined["culprits"].size(), 1u);
  EXPECT_EQ(j.joined["culprits"][0]["evidence"].size(), 2u);
  EXPECT_TRUE(j.joined["disagreements"].empty());
}

TEST(JoinedVerdict, ArtifactsNamingDifferentRanksGiveOneOfTheirUnionAndSaySo) {
  JoinInputs in;
  in.dumps = verdict(Verdict::kHang, {2}, "HANG: rank 2 never entered allreduce #3");
  in.log = LogVerdict{verdict(Verdict::kHang, {5}, "HANG: rank 5 raised no error"), {}};
  const JoinedVerdict j = join_verdicts(in);
  EXPECT_EQ(j.diagnosis.culprit_ranks, (std::vector<int>{2, 5}));
  EXPECT_NE(j.diagnosis.headline.find("one of ranks 2,5"), std::string::npos) << j.diagnosis.headline;
  EXPECT_FALSE(j.joined["disagreements"].empty());
}

TEST(JoinedVerdict, EveryRankPastTheCollectiveInItsStacksOverrulesADumpShowingItOpen) {
  JoinInputs in;
  in.dumps = verdict(Verdict::kHang, {}, "HANG: every rank waits in barrier #9", 2);
  stacks::StackImport st;
  for (int r : {0, 1}) {
    st.ranks[r].rank = r;
    stacks::parse_stack_text(R"TXT(Thread 1 (idle): "MainThread"
    save_checkpoint (train.py:120)
    <module> (train.py:151)
)TXT", "rank.txt", st.ranks[r].snapshots);
  }
  st.world_size = 2;
  in.stacks = summarize_stacks(st);
  const JoinedVerdict j = join_verdicts(in);
  EXPECT_EQ(exit_code(j.diagnosis), 0) << j.diagnosis.headline;
  EXPECT_NE(j.diagnosis.headline.find("Gloo marks an entry done only after wait() returned"), std::string::npos);
}

// The debug server has no authentication: only one on this machine is asked, and one that is not
// there is said in one line (exit 2), after a bounded wait.
TEST(StackLive, ADebugServerElsewhereIsRefusedAndOneNotThereIsSaid) {
  using torch_fr::testing::run_hangdoctor_on;
  const auto far = run_hangdoctor_on({"--torch-debug-server", "10.0.0.7:25999"});
  EXPECT_EQ(far.code, 2);
  EXPECT_NE(far.err.find("only a debug server on this machine"), std::string::npos) << far.err;
  const auto bad = run_hangdoctor_on({"--torch-debug-server", "localhost:http"});
  EXPECT_EQ(bad.code, 2);
  const auto none = run_hangdoctor_on({"--torch-debug-server", "127.0.0.1:1"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("nothing listens"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace rankscope::analyzers::hang
