// hang_a2a_counts_test.cpp — hangdoctor on MoE runs (rankscope synth --moe-experts): an
// all_to_all_v whose per-peer counts disagree is a2a_count_mismatch naming sender, receiver, what
// was sent and what was expected (exact counts, and the sketch beyond 32 peers); it outranks the
// crash that follows; a healthy MoE run has none; a rank stalled in its experts, or one that never
// enters the dispatch, is a lagging rank.
#include <gtest/gtest.h>

#include <algorithm>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::hang {
namespace {

using testing::FakeProcessTable;
using testing::make_run;
using testing::scratch;

synth::SynthOptions moe(int experts, int ep) {
  synth::SynthOptions o;
  o.moe_experts = experts;
  o.ep = ep;
  o.layers = 2;
  return o;
}

Diagnosis diagnose_dir(const std::filesystem::path& dir, FakeProcessTable& table) {
  auto run = format::open_run_directory(dir);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  return diagnose(*run, table);
}

// The rows rank `sender` routes to the experts of `receiver` at the faulted call, from the healthy
// counts the other members recorded (an independent read of the recorder, not the classifier's).
uint64_t recorded_send(const std::filesystem::path& dir, int sender, int receiver_in_comm, const std::string& comm,
                       uint64_t seq) {
  auto run = format::open_run_directory(dir);
  const auto* c = run->ranks[size_t(sender)].flight->comm(comm);
  const auto* p = c ? c->find_counts(seq) : nullptr;
  EXPECT_NE(p, nullptr);
  return p && p->exact ? p->detail->send[size_t(receiver_in_comm)] : 0;
}

TEST(HangA2aCounts, MiscountNamesTheSenderReceiverAndBothCounts) {
  auto run = make_run(scratch("a2a"), 4, 10, 1, "a2a-miscount:rank=1,step=4,peer=2,delta=3", moe(4, 4));
  FakeProcessTable table;
  const Diagnosis d = diagnose_dir(run.dir, table);
  EXPECT_EQ(d.verdict, Verdict::kDesync);
  ASSERT_EQ(d.kind, Kind::kA2aCountMismatch) << d.headline;
  ASSERT_TRUE(d.count_mismatch);
  const CountMismatch& m = *d.count_mismatch;
  EXPECT_EQ(m.sender, 2);
  EXPECT_EQ(m.receiver, 1);
  EXPECT_EQ(m.comm, "ep0");
  EXPECT_EQ(m.evidence, "exact");
  EXPECT_EQ(m.row_elements, 128u);  // run.json model.channels
  ASSERT_TRUE(m.sent && m.expected);
  EXPECT_EQ(*m.sent, recorded_send(run.dir, 2, 1, "ep0", m.seq));
  EXPECT_EQ(int64_t(*m.expected) - int64_t(*m.sent), 3 * 128);
  EXPECT_EQ(m.difference, -3 * 128);
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->op, format::CollectiveOp::kAllToAllV);
  EXPECT_EQ(d.collective->range, "forward/block0/moe/combine");
  EXPECT_EQ(d.culprit_ranks, (std::vector<int>{1, 2}));
  EXPECT_NE(d.headline.find("rank 2 sends " + std::to_string(*m.sent / 128) + " rows"), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find("to rank 1, which expects " + std::to_string(*m.expected / 128) + " rows"), std::string::npos)
      << d.headline;
  const auto j = render_json(d);
  EXPECT_EQ(j["kind"], "a2a_count_mismatch");
  EXPECT_EQ(j["count_mismatch"]["sender"], 2);
  EXPECT_EQ(j["count_mismatch"]["receiver"], 1);
  EXPECT_EQ(j["count_mismatch"]["expected_rows"], *m.expected / 128);
  EXPECT_EQ(exit_code(d), 1);
}

// The calls are matched by seq whatever order a recorder lists them in: with every member's list
// reversed (as a damaged file could hold them), the same pair, counts and call are named.
TEST(HangA2aCounts, CallsListedOutOfOrderAreMatchedBySeq) {
  auto run = make_run(scratch("a2a"), 4, 10, 1, "a2a-miscount:rank=1,step=4,peer=2,delta=3", moe(4, 4));
  FakeProcessTable table;
  const Diagnosis in_order = diagnose_dir(run.dir, table);
  ASSERT_TRUE(in_order.count_mismatch) << in_order.headline;
  auto reversed = format::open_run_directory(run.dir);
  ASSERT_TRUE(reversed.ok());
  size_t lists = 0;
  for (auto& rank : reversed->ranks)
    for (auto& c : rank.flight->comms)
      if (c.peer_counts.size() > 1) {
        std::reverse(c.peer_counts.begin(), c.peer_counts.end());
        ++lists;
      }
  ASSERT_GE(lists, 4u);
  const Diagnosis d = diagnose(*reversed, table);
  ASSERT_TRUE(d.count_mismatch) << d.headline;
  EXPECT_EQ(d.count_mismatch->sender, in_order.count_mismatch->sender);
  EXPECT_EQ(d.count_mismatch->receiver, in_order.count_mismatch->receiver);
  EXPECT_EQ(d.count_mismatch->seq, in_order.count_mismatch->seq);
  EXPECT_EQ(d.count_mismatch->sent, in_order.count_mismatch->sent);
  EXPECT_EQ(d.count_mismatch->expected, in_order.count_mismatch->expected);
}

TEST(HangA2aCounts, OutranksTheCrashThatFollows) {
  auto run = make_run(scratch("a2a"), 4, 10, 1, "a2a-miscount:rank=3,step=2,peer=0,delta=-2", moe(8, 4));
  FakeProcessTable table;
  table.table[{"synth-node0", 100003}] = Liveness::kGone;  // MPI's truncation error killed it
  const Diagnosis d = diagnose_dir(run.dir, table);
  ASSERT_EQ(d.kind, Kind::kA2aCountMismatch) << d.headline;
  EXPECT_EQ(d.count_mismatch->sender, 0);
  EXPECT_EQ(d.count_mismatch->receiver, 3);
  EXPECT_EQ(d.count_mismatch->difference, 2 * 128);
}

TEST(HangA2aCounts, HealthyMoeRunHasNoMismatchThoughRanksSendDifferentTotals) {
  synth::SynthOptions o = moe(4, 2);
  o.hot_expert = 3;
  auto run = make_run(scratch("a2a"), 4, 6, 1, "", o);
  FakeProcessTable table;
  const Diagnosis d = diagnose_dir(run.dir, table);
  EXPECT_EQ(d.verdict, Verdict::kFinished) << d.headline;
  EXPECT_FALSE(d.count_mismatch);
}

TEST(HangA2aCounts, RankStalledInItsExpertsIsALaggingRankAtTheCombine) {
  auto run = make_run(scratch("a2a"), 4, 10, 1, "stall:rank=2,range=forward/block1/moe/experts,step=3", moe(4, 4));
  FakeProcessTable table;
  const Diagnosis d = diagnose_dir(run.dir, table);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kLaggingRank) << d.headline;
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{2});
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "ep0");
  EXPECT_EQ(d.collective->op, format::CollectiveOp::kAllToAllV);
  EXPECT_EQ(d.collective->range, "forward/block1/moe/combine");
  EXPECT_EQ(d.ranks[2].range, "forward/block1/moe/experts");
  EXPECT_NE(d.headline.find("forward/block1/moe/experts"), std::string::npos) << d.headline;
}

TEST(HangA2aCounts, RankThatNeverEntersTheDispatchIsALaggingRank) {
  auto run = make_run(scratch("a2a"), 4, 10, 1, "stall:rank=3,range=forward/block0/moe/router,step=5", moe(8, 4));
  FakeProcessTable table;
  const Diagnosis d = diagnose_dir(run.dir, table);
  EXPECT_EQ(d.kind, Kind::kLaggingRank) << d.headline;
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3});
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "ep0");
  EXPECT_EQ(d.collective->op, format::CollectiveOp::kAllToAll);  // the counts exchange opens the dispatch
  EXPECT_EQ(d.collective->range, "forward/block0/moe/dispatch");
  EXPECT_FALSE(d.count_mismatch);
}

TEST(HangA2aCounts, BeyondTheExactBoundTheSketchLocatesThePair) {
  // 40 ranks in one ep group: more peers than the recorder keeps exactly.
  auto run = make_run(scratch("a2a"), 40, 4, 1, "a2a-miscount:rank=17,step=2,peer=31,delta=5", moe(40, 40));
  FakeProcessTable table;
  const Diagnosis d = diagnose_dir(run.dir, table);
  ASSERT_EQ(d.kind, Kind::kA2aCountMismatch) << d.headline;
  const CountMismatch& m = *d.count_mismatch;
  EXPECT_EQ(m.evidence, "sketch");
  EXPECT_EQ(m.sender, 31);
  EXPECT_EQ(m.receiver, 17);
  EXPECT_FALSE(m.sent);
  EXPECT_EQ(m.difference, -5 * 128);
  // 64 ranks on 8 synthetic hosts: both ranks are named with their host.
  EXPECT_NE(d.headline.find("rank 31 on synth-node3 sends 5 rows fewer to rank 17 on synth-node2"), std::string::npos)
      << d.headline;
}

}  // namespace
}  // namespace rankscope::analyzers::hang
