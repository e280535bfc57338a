// hang_fixture_test.cpp — states synth does not produce, fabricated record by record through the
// format writers: a healthy job caught mid-collective, a collective every member entered and none
// finished, rings that wrapped at different seqs.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers::hang::fixture_tests {
namespace {

using format::CollectiveDesc;
using format::CollectiveOp;
using format::DataType;
using testing::FakeProcessTable;
using testing::scratch;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

// A hand-driven rank: writes exactly what a test says, on one communicator "tp0".
struct Rank {
  std::unique_ptr<format::FlightRecorderWriter> w;
  int comm = -1;
  int slot = -1;
};

std::vector<Rank> make_ranks(const std::filesystem::path& dir, int n, uint32_t ring = 256) {
  format::RunMetadata meta;
  meta.run_id = "fixture";
  meta.world_size = n;
  meta.tp = n;
  format::CommGroup g{"tp0", {}};
  for (int r = 0; r < n; ++r) g.ranks.push_back(r);
  meta.groups = {g};
  EXPECT_TRUE(format::write_run_metadata(dir, meta).ok());
  std::vector<Rank> ranks(n);
  for (int r = 0; r < n; ++r) {
    format::FlightIdentity id{r, n, r, 4000 + r, "elsewhere", "fixture", kT0};
    format::FlightLayoutParams p;
    p.ring_entries = ring;
    auto w = format::FlightRecorderWriter::create(format::flight_recorder_path(dir, r), id, p);
    EXPECT_TRUE(w.ok());
    ranks[r].w = std::move(*w);
    ranks[r].comm = ranks[r].w->register_comm("tp0", n, r);
    ranks[r].slot = ranks[r].w->claim_thread_slot(100 + r, "main");
    ranks[r].w->set_process_state(format::ProcessState::kRunning);
    ranks[r].w->set_clock(0, 1000);
  }
  return ranks;
}

uint64_t allreduce(Rank& r, int64_t step, int64_t at, bool complete, uint64_t count = 1024,
                   const char* range = "forward/block0/attn") {
  CollectiveDesc d{CollectiveOp::kAllReduceSum, DataType::kFloat32, count, count * 4, -1};
  const uint64_t seq = r.w->collective_enqueue(r.comm, d, step, range, at);
  r.w->collective_start(r.comm, seq, at);
  if (complete) r.w->collective_complete(r.comm, seq, at + kMs);
  return seq;
}

Diagnosis diagnose_dir(const std::filesystem::path& dir) {
  auto run = format::open_run_directory(dir);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  FakeProcessTable procs;
  return diagnose(*run, procs);
}

TEST(HangFixture, HealthyWhileRunningEvenInsideACollective) {
  const auto dir = scratch("fx");
  auto ranks = make_ranks(dir, 2);
  for (int s = 0; s < 5; ++s)
    for (auto& r : ranks) allreduce(r, s, kT0 + s * 100 * kMs, true);
  // Now: rank 0 waits 20 ms in the next all-reduce, rank 1 (a straggler) is still computing.
  const int64_t now = kT0 + 520 * kMs;
  ranks[0].w->push_range(ranks[0].slot, "forward/block0/attn", now - 25 * kMs);
  allreduce(ranks[0], 5, now - 20 * kMs, false);
  ranks[1].w->push_range(ranks[1].slot, "forward/block0/attn", now - 25 * kMs);
  for (auto& r : ranks) r.w->heartbeat(now);
  const Diagnosis d = diagnose_dir(dir);
  EXPECT_EQ(d.verdict, Verdict::kHealthy);
  EXPECT_EQ(exit_code(d), 0);
  EXPECT_EQ(d.ranks[0].state, RankState::kWaiting);
  EXPECT_EQ(d.ranks[1].state, RankState::kRunning);
}

TEST(HangFixture, EveryMemberEnteredNoneFinishedBlamesNoRank) {
  const auto dir = scratch("fx");
  auto ranks = make_ranks(dir, 4);
  for (int s = 0; s < 3; ++s)
    for (auto& r : ranks) allreduce(r, s, kT0 + s * 100 * kMs, true);
  for (size_t i = 0; i < ranks.size(); ++i) allreduce(ranks[i], 3, kT0 + 300 * kMs + int64_t(i) * kMs, false);
  for (auto& r : ranks) r.w->heartbeat(kT0 + 300 * kMs + 45 * kS);
  const Diagnosis d = diagnose_dir(dir);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kStuckInCollective);
  EXPECT_TRUE(d.culprit_ranks.empty());
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp0");
  EXPECT_EQ(d.collective->seq, 3u);
  EXPECT_NE(d.headline.find("no rank is to blame"), std::string::npos) << d.headline;
}

TEST(HangFixture, WrappedRingsAreComparedOnlyWhereTheyOverlap) {
  // Ring of 8. Rank 0 is ahead (seq 0..40 issued, holds 33..40); rank 1 holds 29..36 and lags.
  // A disagreement at seq 30 is outside the window rank 0 still holds: it cannot be judged.
  const auto dir = scratch("fx");
  auto ranks = make_ranks(dir, 2, 8);
  for (int i = 0; i <= 40; ++i) allreduce(ranks[0], i, kT0 + i * kMs, i < 40);
  for (int i = 0; i <= 36; ++i) allreduce(ranks[1], i, kT0 + i * kMs, true, i == 30 ? 2048 : 1024);
  ranks[1].w->push_range(ranks[1].slot, "forward/embed", kT0 + 37 * kMs);
  for (auto& r : ranks) r.w->heartbeat(kT0 + 100 * kS);
  Diagnosis d = diagnose_dir(dir);
  EXPECT_EQ(d.verdict, Verdict::kHang) << d.headline;
  EXPECT_EQ(d.kind, Kind::kLaggingRank);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_EQ(d.collective->seq, 40u);

  // The same runs with the disagreement inside the shared window (seq 34) is a desync.
  const auto dir2 = scratch("fx2");
  auto r2 = make_ranks(dir2, 2, 8);
  for (int i = 0; i <= 40; ++i) allreduce(r2[0], i, kT0 + i * kMs, i < 40);
  for (int i = 0; i <= 36; ++i) allreduce(r2[1], i, kT0 + i * kMs, true, i == 34 ? 2048 : 1024);
  for (auto& r : r2) r.w->heartbeat(kT0 + 100 * kS);
  d = diagnose_dir(dir2);
  EXPECT_EQ(d.verdict, Verdict::kDesync);
  EXPECT_EQ(d.collective->seq, 34u);
  ASSERT_TRUE(d.mismatch);
  EXPECT_EQ(d.mismatch->values_by_rank.at(1), "2048");
}

TEST(HangFixture, OpMismatchBeatsEverythingElse) {
  const auto dir = scratch("fx");
  auto ranks = make_ranks(dir, 3);
  for (int s = 0; s < 4; ++s)
    for (auto& r : ranks) allreduce(r, s, kT0 + s * 100 * kMs, true);
  CollectiveDesc max{CollectiveOp::kAllReduceMax, DataType::kFloat32, 1024, 4096, -1};
  const uint64_t seq = ranks[2].w->collective_enqueue(ranks[2].comm, max, 4, "forward/head", kT0 + 400 * kMs);
  allreduce(ranks[0], 4, kT0 + 400 * kMs, false, 1024, "forward/head");
  allreduce(ranks[1], 4, kT0 + 400 * kMs, false, 1024, "forward/head");
  for (auto& r : ranks) r.w->heartbeat(kT0 + 30 * kS);
  const Diagnosis d = diagnose_dir(dir);
  EXPECT_EQ(d.verdict, Verdict::kDesync);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{2});
  EXPECT_EQ(d.collective->seq, seq);
  EXPECT_EQ(d.mismatch->field, "op");
  EXPECT_EQ(d.mismatch->values_by_rank.at(2), "allreduce_max");
}

}  // namespace
}  // namespace rankscope::analyzers::hang::fixture_tests

namespace rankscope::analyzers::hang::fixture_tests {
namespace {

TEST(HangFixture, KilledJobBlamesTheRankThatAbortedOnItsOwnError) {
  const auto dir = scratch("fx");
  auto ranks = make_ranks(dir, 3);
  for (int s = 0; s < 3; ++s)
    for (auto& r : ranks) allreduce(r, s, kT0 + s * 100 * kMs, true);
  allreduce(ranks[0], 3, kT0 + 300 * kMs, false);
  allreduce(ranks[1], 3, kT0 + 300 * kMs, false);
  ranks[2].w->set_process_state(format::ProcessState::kAborted);  // exited on an error
  for (auto& r : ranks) r.w->heartbeat(kT0 + 301 * kMs);          // then the launcher killed all
  auto run = format::open_run_directory(dir);
  ASSERT_TRUE(run.ok());
  FakeProcessTable procs;
  for (int r = 0; r < 3; ++r) procs.table[{"elsewhere", 4000 + r}] = Liveness::kGone;
  const Diagnosis d = diagnose(*run, procs);
  EXPECT_EQ(d.verdict, Verdict::kCrash) << d.headline;
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{2});
  EXPECT_EQ(d.collective->seq, 3u);
  EXPECT_EQ(d.ranks[2].state, RankState::kAborted);
}

TEST(HangFixture, AJobWhoseProcessesAreAllGoneIsNeverHealthy) {
  const auto dir = scratch("fx");
  auto ranks = make_ranks(dir, 2);
  for (auto& r : ranks) allreduce(r, 0, kT0, true);
  allreduce(ranks[0], 1, kT0 + 100 * kMs, false);
  ranks[1].w->push_range(ranks[1].slot, "forward/embed", kT0 + 90 * kMs);
  for (auto& r : ranks) r.w->heartbeat(kT0 + 150 * kMs);  // killed 50 ms into the wait
  auto run = format::open_run_directory(dir);
  ASSERT_TRUE(run.ok());
  FakeProcessTable procs;
  for (int r = 0; r < 2; ++r) procs.table[{"elsewhere", 4000 + r}] = Liveness::kGone;
  const Diagnosis d = diagnose(*run, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang) << d.headline;
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_NE(d.explanation.find("process is gone"), std::string::npos) << d.explanation;
}

}  // namespace
}  // namespace rankscope::analyzers::hang::fixture_tests

namespace rankscope::analyzers::hang::fixture_tests {
namespace {

TEST(HangFixture, ARankThatFinishedWhileOthersWaitForItLeftACollectiveOut) {
  const auto dir = scratch("fx");
  auto ranks = make_ranks(dir, 2);
  for (int s = 0; s < 9; ++s) allreduce(ranks[0], s, kT0 + s * 100 * kMs, true);
  for (int s = 0; s < 9; ++s) allreduce(ranks[1], s, kT0 + s * 100 * kMs, true);  // and stops there
  allreduce(ranks[0], 9, kT0 + 900 * kMs, false);
  ranks[1].w->set_process_state(format::ProcessState::kFinished);
  for (auto& r : ranks) r.w->heartbeat(kT0 + 60 * kS);
  const Diagnosis d = diagnose_dir(dir);
  EXPECT_EQ(d.verdict, Verdict::kDesync) << d.headline;
  EXPECT_EQ(d.kind, Kind::kCollectiveMismatch);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_EQ(d.collective->seq, 9u);
  ASSERT_TRUE(d.mismatch);
  EXPECT_EQ(d.mismatch->field, "issued");
  EXPECT_EQ(d.mismatch->values_by_rank.at(1), "9");
  EXPECT_EQ(d.mismatch->values_by_rank.at(0), "10");
}

TEST(HangFixture, WaitingForEachOtherOnDifferentCommunicatorsIsADesync) {
  // Rank 0 waits on "tp0" #3 for rank 1; rank 1 skipped it and waits on "dp0" #0 for rank 0.
  const auto dir = scratch("fx");
  format::RunMetadata meta;
  meta.world_size = 2;
  meta.groups = {{"tp0", {0, 1}}, {"dp0", {0, 1}}};
  ASSERT_TRUE(format::write_run_metadata(dir, meta).ok());
  std::unique_ptr<format::FlightRecorderWriter> w[2];
  int tp[2], dp[2];
  for (int r = 0; r < 2; ++r) {
    auto created = format::FlightRecorderWriter::create(format::flight_recorder_path(dir, r),
                                                        {r, 2, r, 4000 + r, "elsewhere", "fx", kT0});
    ASSERT_TRUE(created.ok());
    w[r] = std::move(created).value();
    tp[r] = w[r]->register_comm("tp0", 2, r);
    dp[r] = w[r]->register_comm("dp0", 2, r);
    w[r]->set_process_state(format::ProcessState::kRunning);
    CollectiveDesc d{CollectiveOp::kAllReduceSum, DataType::kFloat32, 8, 32, -1};
    for (int s = 0; s < 3; ++s) w[r]->collective_complete(tp[r], w[r]->collective_enqueue(tp[r], d, s, "", kT0 + s * kMs), kT0 + s * kMs + 1);
  }
  CollectiveDesc d{CollectiveOp::kAllReduceSum, DataType::kFloat32, 8, 32, -1};
  w[0]->collective_enqueue(tp[0], d, 3, "", kT0 + 10 * kMs);
  w[1]->collective_enqueue(dp[1], d, 3, "", kT0 + 10 * kMs);
  for (auto& x : w) x->heartbeat(kT0 + 60 * kS);
  const Diagnosis diag = diagnose_dir(dir);
  EXPECT_EQ(diag.verdict, Verdict::kDesync) << diag.headline;
  EXPECT_EQ(diag.kind, Kind::kCollectiveMismatch);
  ASSERT_TRUE(diag.collective);
  EXPECT_EQ(diag.collective->comm, "tp0");  // innermost of the two
}

}  // namespace
}  // namespace rankscope::analyzers::hang::fixture_tests
