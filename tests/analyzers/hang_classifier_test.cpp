// hang_classifier_test.cpp — the fault matrix on synthetic runs: every fault kind, in TP, DP and
// TP x DP layouts, gives the verdict, kind, culprit, collective and culprit range it should.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"

namespace rankscope::analyzers::hang {
namespace {

using testing::FakeProcessTable;
using testing::make_run;
using testing::scratch;

Diagnosis diagnose_dir(const std::filesystem::path& dir, ProcessTable& procs, ClassifyOptions o = {}) {
  auto run = format::open_run_directory(dir);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  return diagnose(*run, procs, o);
}

Diagnosis diagnose_dir(const std::filesystem::path& dir) {
  FakeProcessTable procs;
  return diagnose_dir(dir, procs);
}

const RankReport& rank(const Diagnosis& d, int r) {
  auto it = std::find_if(d.ranks.begin(), d.ranks.end(), [&](const RankReport& x) { return x.rank == r; });
  EXPECT_NE(it, d.ranks.end());
  return *it;
}

// The seq a communicator's members will use next, from rank `r`'s recorder (what the fault hit).
uint64_t issued(const std::filesystem::path& dir, int r, const std::string& comm) {
  auto run = format::open_run_directory(dir);
  return run->ranks[r].flight->comm(comm)->next_seq;
}

TEST(HangClassifier, HealthyFinishedRun) {
  auto run = make_run(scratch("hc"), 4, 5, 2);
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kFinished);
  EXPECT_EQ(d.kind, Kind::kNone);
  EXPECT_TRUE(d.culprit_ranks.empty());
  EXPECT_EQ(exit_code(d), 0);
  EXPECT_EQ(d.headline.rfind("FINISHED:", 0), 0u) << d.headline;
}

TEST(HangClassifier, StallInEmbeddingIsTheIncident) {
  // Rank 0 waits in the TP all-reduce while rank 1 is still in the embedding.
  auto run = make_run(scratch("hc"), 2, 6, 2, "stall:rank=1,range=forward/embed,step=3");
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kLaggingRank);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp0");
  EXPECT_EQ(d.collective->seq, issued(run.dir, 0, "tp0") - 1);
  EXPECT_EQ(d.collective->op, format::CollectiveOp::kAllReduceSum);
  EXPECT_EQ(rank(d, 1).range, "forward/embed");
  EXPECT_EQ(rank(d, 1).step, 3);
  EXPECT_EQ(rank(d, 0).state, RankState::kWaiting);
  EXPECT_NEAR(rank(d, 0).waited_s, 60.0, 1.0);
  EXPECT_EQ(exit_code(d), 1);
  EXPECT_EQ(d.headline.rfind("HANG: rank 1 never entered allreduce #", 0), 0u) << d.headline;
  EXPECT_NE(d.headline.find("it is in forward/embed at step 3, idle 60 s. Rank 0 waits in that allreduce since 60 s."),
            std::string::npos)
      << d.headline;
}

TEST(HangClassifier, NestedTpInDpNamesTheInnermostCommunicator) {
  // 8 ranks: tp2 x dp4. Rank 5 stalls; rank 4 waits on tp2, the DP ranks wait for ranks that wait.
  auto run = make_run(scratch("hc"), 8, 6, 2, "stall:rank=5,range=forward/block1/mlp,step=2");
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{5});
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp2");
  EXPECT_EQ(rank(d, 5).range, "forward/block1/mlp");
  // Downstream DP waiters are not blamed, but they are reported as waiting.
  int waiting = 0;
  for (const auto& r : d.ranks) waiting += r.state == RankState::kWaiting;
  EXPECT_EQ(waiting, 7);
}

TEST(HangClassifier, StallInBackwardIsALaggingRankNotAMissingGradient) {
  auto run = make_run(scratch("hc"), 4, 6, 2, "stall:rank=2,range=backward/block0/mlp,step=4");
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kLaggingRank);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{2});
  EXPECT_EQ(d.collective->comm, "tp1");
  EXPECT_EQ(rank(d, 2).range, "backward/block0/mlp");
  EXPECT_TRUE(d.missing_gradients.empty());
}

TEST(HangClassifier, StallInDataIsAHostStall) {
  auto run = make_run(scratch("hc"), 4, 6, 1, "stall:rank=3,range=data,step=2");  // DP only
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kHostStall);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3});
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "dp0");
  EXPECT_EQ(rank(d, 3).range, "data");
  EXPECT_NE(d.headline.find("host work"), std::string::npos) << d.headline;
}

TEST(HangClassifier, SkipIsADesyncAtTheSkippedSeq) {
  auto run = make_run(scratch("hc"), 2, 6, 2, "skip:rank=1,comm=tp0,seq=38");
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kDesync);
  EXPECT_EQ(d.kind, Kind::kCollectiveMismatch);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});  // a 1:1 tie broken by rank 1's own previous step
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp0");
  EXPECT_EQ(d.collective->seq, 38u);
  ASSERT_TRUE(d.mismatch);
  EXPECT_EQ(d.mismatch->field, "range");
}

TEST(HangClassifier, ResizeIsACountMismatchWithValuesByRank) {
  auto run = make_run(scratch("hc"), 4, 6, 1, "resize:rank=2,comm=dp0,seq=5,factor=2");
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kDesync);
  EXPECT_EQ(d.kind, Kind::kCollectiveMismatch);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{2});  // 3:1 majority
  EXPECT_EQ(d.collective->seq, 5u);
  ASSERT_TRUE(d.mismatch);
  EXPECT_EQ(d.mismatch->field, "count");
  EXPECT_EQ(std::stoull(d.mismatch->values_by_rank.at(2)), 2 * std::stoull(d.mismatch->values_by_rank.at(0)));
}

TEST(HangClassifier, ResizeTieIsBrokenByHistory) {
  auto run = make_run(scratch("hc"), 2, 6, 2, "resize:rank=0,comm=tp0,seq=40,factor=0.5");
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kDesync);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{0});
}

TEST(HangClassifier, CrashByStaleHeartbeatOnAnotherHost) {
  auto run = make_run(scratch("hc"), 4, 6, 2, "crash:rank=3,step=2,range=forward/block0/attn");
  const Diagnosis d = diagnose_dir(run.dir);  // fake table: every host is another host
  EXPECT_EQ(d.verdict, Verdict::kCrash);
  EXPECT_EQ(d.kind, Kind::kRankDead);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3});
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp1");
  EXPECT_EQ(rank(d, 3).state, RankState::kDead);
  EXPECT_EQ(rank(d, 3).range, "forward/block0/attn");
}

TEST(HangClassifier, CrashByPidGoneOnThisHostWithTheRealProcessTable) {
  synth::SynthOptions o;
  o.local_host = true;
  o.live_pid = ::getpid();  // the live ranks are this test process; the crashed one a reaped child
  o.idle_s = 2;             // less than the heartbeat staleness: only the pid tells
  auto run = make_run(scratch("hc"), 2, 6, 1, "crash:rank=0,step=3", o);
  SystemProcessTable procs;
  const Diagnosis d = diagnose_dir(run.dir, procs);
  EXPECT_EQ(d.verdict, Verdict::kCrash);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{0});
  EXPECT_EQ(rank(d, 0).alive, Liveness::kGone);
  EXPECT_EQ(rank(d, 1).alive, Liveness::kAlive);
  EXPECT_NE(d.headline.find("is gone"), std::string::npos) << d.headline;
}

TEST(HangClassifier, KilledJobIsDiagnosedFromItsStateAtDeath) {
  // Every pid gone at once (the launcher was killed): nobody is "the dead rank"; the stall shows.
  auto run = make_run(scratch("hc"), 2, 6, 2, "stall:rank=1,range=forward/embed,step=2");
  FakeProcessTable procs;
  auto rd = format::open_run_directory(run.dir);
  for (const auto& r : rd->ranks) procs.table[{r.flight->host, r.flight->pid}] = Liveness::kGone;
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_NE(d.explanation.find("process is gone"), std::string::npos) << d.explanation;
}

TEST(HangClassifier, DropGradNamesTheParamItsBucketAndTheDpCollective) {
  auto run = make_run(scratch("hc"), 4, 6, 2, "drop-grad:rank=1,param=h.0.mlp.c_fc.weight,step=3");
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kMissingGradient);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  ASSERT_EQ(d.missing_gradients.size(), 1u);
  EXPECT_EQ(d.missing_gradients[0].rank, 1);
  EXPECT_EQ(d.missing_gradients[0].param, "h.0.mlp.c_fc.weight");
  EXPECT_EQ(d.missing_gradients[0].bucket, 1);
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "dp1");
  EXPECT_EQ(rank(d, 1).range, "grad_sync");
}

TEST(HangClassifier, StragglerDelayIsNotAHang) {
  auto run = make_run(scratch("hc"), 2, 6, 2, "delay:rank=1,range=forward/block0/mlp,ms=25");
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kFinished);
  EXPECT_EQ(exit_code(d), 0);
}

TEST(HangClassifier, MissingRankFileIsReportedAndTheRestDiagnosed) {
  auto run = make_run(scratch("hc"), 4, 6, 2, "stall:rank=1,range=forward/embed,step=2");
  std::filesystem::remove(format::flight_recorder_path(run.dir, 3));
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_EQ(rank(d, 3).state, RankState::kMissing);
  EXPECT_FALSE(d.problems.empty());
  EXPECT_NE(d.explanation.find("rank 3 has no readable flight recorder"), std::string::npos) << d.explanation;
}

TEST(HangClassifier, CorruptRankFileIsReportedAndTheRestDiagnosed) {
  auto run = make_run(scratch("hc"), 4, 6, 2, "stall:rank=1,range=forward/embed,step=2");
  {
    std::ofstream f(format::flight_recorder_path(run.dir, 2), std::ios::binary | std::ios::trunc);
    f << std::string(5000, 'x');
  }
  const Diagnosis d = diagnose_dir(run.dir);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_EQ(rank(d, 2).state, RankState::kMissing);
  EXPECT_NE(rank(d, 2).note.find("rank00002.flight"), std::string::npos) << rank(d, 2).note;
}

TEST(HangClassifier, ShortIdleIsHealthyUnlessNoProgressWasObserved) {
  synth::SynthOptions o;
  o.idle_s = 0.5;  // a snapshot half a second into what may or may not be a hang
  auto run = make_run(scratch("hc"), 2, 6, 2, "stall:rank=1,range=forward/embed,step=2", o);
  FakeProcessTable procs;
  EXPECT_EQ(diagnose_dir(run.dir, procs).verdict, Verdict::kHealthy);
  ClassifyOptions watched;
  watched.no_progress_observed = true;
  const Diagnosis d = diagnose_dir(run.dir, procs, watched);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
}

}  // namespace
}  // namespace rankscope::analyzers::hang
