// hang_hosts_test.cpp — host-aware verdicts: a synthetic 16-rank job on four fake
// hosts (synth-node0..3, four ranks each, TP 4 inside a host, DP across hosts) and a fake process
// table that answers for every host, as the gathered per-host process states do. One lagging rank
// on the third host, a SIGKILLed rank on the second, a SIGSTOPped rank on the fourth: each named
// with its host. A whole host stopped or killed, or most of it: one node finding, not N culprits.
// With one host the sentences do not mention hosts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <fstream>

#include <fmt/format.h>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/flight_recorder_layout.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"

namespace rankscope::analyzers::hang {
namespace {

using testing::FakeProcessTable;
using testing::make_run;
using testing::scratch;

constexpr int kRanks = 16, kPerHost = 4;

synth::SynthOptions four_hosts(int ranks_per_host = kPerHost) {
  synth::SynthOptions o;
  o.ranks_per_host = ranks_per_host;
  return o;
}

// Sets a rank's heartbeat in its recorder (even seq word untouched: a consistent section), as a
// process frozen or killed at that instant leaves it.
void set_heartbeat(const std::filesystem::path& dir, int rank, int64_t ns) {
  std::fstream f(format::flight_recorder_path(dir, rank), std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good());
  f.seekp(offsetof(format::FlightHeader, live) + offsetof(format::LiveState, heartbeat_ns));
  f.write(reinterpret_cast<const char*>(&ns), sizeof(ns));
}

// Every rank alive and runnable on its host, except those in `frozen` (stopped) and `gone`.
FakeProcessTable table(const format::RunDirectory& rd, const std::vector<int>& frozen, const std::vector<int>& gone,
                       OsRunState frozen_state = OsRunState::kStopped) {
  FakeProcessTable procs;
  for (const auto& r : rd.ranks) {
    const auto key = std::pair(r.flight->host, int(r.flight->pid));
    const bool is_gone = std::find(gone.begin(), gone.end(), r.rank) != gone.end();
    const bool is_frozen = std::find(frozen.begin(), frozen.end(), r.rank) != frozen.end();
    procs.table[key] = is_gone ? Liveness::kGone : Liveness::kAlive;
    if (!is_gone)
      procs.statuses[key] = ProcessStatus{Liveness::kAlive, is_frozen ? frozen_state : OsRunState::kRunnable,
                                          is_frozen ? "do_signal_stop" : "", 3};
  }
  return procs;
}

// A crash of `first` at step 3, the other ranks in `with` stopping at the same instant.
format::RunDirectory crashed_together(const std::string& tag, int first, const std::vector<int>& with,
                                      int ranks_per_host = kPerHost) {
  auto run = make_run(scratch(tag), kRanks, 6, 4, fmt::format("crash:rank={},step=3", first), four_hosts(ranks_per_host));
  auto before = format::open_run_directory(run.dir);
  EXPECT_TRUE(before.ok());
  const int64_t stopped = before->ranks[size_t(first)].flight->live.heartbeat_ns;
  for (int r : with) set_heartbeat(run.dir, r, stopped);
  auto rd = format::open_run_directory(run.dir);
  EXPECT_TRUE(rd.ok());
  return std::move(rd).value();
}

TEST(HangHosts, ALaggingRankIsNamedWithItsHost) {
  auto run = make_run(scratch("hosts"), kRanks, 6, 4, "stall:rank=9,range=backward/block1/mlp,step=3", four_hosts());
  auto rd = format::open_run_directory(run.dir);
  ASSERT_TRUE(rd.ok());
  FakeProcessTable procs = table(*rd, {}, {});
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kLaggingRank);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{9});
  EXPECT_EQ(d.hosts, 4);
  EXPECT_TRUE(d.nodes.empty());  // its host's other ranks wait for it: not a node problem
  EXPECT_NE(d.headline.find("HANG: rank 9 on synth-node2 never entered"), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find("wait in that"), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find("Ranks 8,10,11 on synth-node2 wait"), std::string::npos) << d.headline;  // waiters carry hosts too
  const auto j = render_json(d);
  EXPECT_EQ(j.at("culprits").at(0).at("rank"), 9);
  EXPECT_EQ(j.at("culprits").at(0).at("host"), "synth-node2");
  EXPECT_EQ(j.at("hosts"), 4);
  EXPECT_TRUE(j.at("node_findings").empty());
  EXPECT_NE(render_text(d).find("rank 9 on synth-node2:"), std::string::npos) << render_text(d);
}

TEST(HangHosts, AKilledRankIsDeadOnItsHost) {
  auto run = make_run(scratch("hosts"), kRanks, 6, 4, "crash:rank=5,step=3", four_hosts());
  auto rd = format::open_run_directory(run.dir);
  ASSERT_TRUE(rd.ok());
  FakeProcessTable procs = table(*rd, {}, {5});
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kCrash);
  EXPECT_EQ(d.kind, Kind::kRankDead);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{5});
  EXPECT_TRUE(d.nodes.empty());
  EXPECT_EQ(d.ranks[5].state, RankState::kDead);
  EXPECT_EQ(d.ranks[5].alive, Liveness::kGone);
  EXPECT_NE(d.headline.find("CRASH: rank 5 on synth-node1 died (pid"), std::string::npos) << d.headline;
  EXPECT_EQ(render_json(d).at("ranks")[5].at("liveness"), "gone");
}

TEST(HangHosts, AStoppedRankIsFrozenOnItsHost) {
  auto run = make_run(scratch("hosts"), kRanks, 6, 4, "crash:rank=13,step=3", four_hosts());
  auto rd = format::open_run_directory(run.dir);
  ASSERT_TRUE(rd.ok());
  FakeProcessTable procs = table(*rd, {13}, {});
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kRankFrozen);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{13});
  EXPECT_TRUE(d.nodes.empty());
  EXPECT_NE(d.headline.find("rank 13's process on synth-node3 is frozen (stopped"), std::string::npos) << d.headline;
  EXPECT_NE(d.explanation.find("still exists on synth-node3"), std::string::npos) << d.explanation;
}

TEST(HangHosts, AWholeNodeStoppedIsOneNodeFinding) {
  const auto rd = crashed_together("hosts", 12, {13, 14, 15});
  FakeProcessTable procs = table(rd, {12, 13, 14, 15}, {});
  const Diagnosis d = diagnose(rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kRankFrozen);
  auto culprits = d.culprit_ranks;
  std::sort(culprits.begin(), culprits.end());
  EXPECT_EQ(culprits, (std::vector<int>{12, 13, 14, 15}));
  ASSERT_EQ(d.nodes.size(), 1u);
  EXPECT_EQ(d.nodes[0].host, "synth-node3");
  EXPECT_EQ(d.nodes[0].state, RankState::kFrozen);
  EXPECT_EQ(d.nodes[0].os_state, OsRunState::kStopped);
  EXPECT_EQ(d.headline.rfind("HANG: node synth-node3: ranks 12-15 all stopped (SIGSTOP or SIGTSTP)", 0), 0u) << d.headline;
  // The collective named is one other hosts wait in (a dp one), not the node's own tp3.
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm.rfind("dp", 0), 0u) << d.collective->comm;
  EXPECT_NE(d.headline.find("Ranks 0 (synth-node0), 4 (synth-node1), 8 (synth-node2) wait"), std::string::npos)
      << d.headline;  // who waits, with hosts
  EXPECT_EQ(d.headline.find("rank 13's process"), std::string::npos) << d.headline;  // not one culprit at a time
  EXPECT_NE(d.explanation.find("look at the node"), std::string::npos) << d.explanation;
  const auto j = render_json(d);
  ASSERT_EQ(j.at("node_findings").size(), 1u);
  EXPECT_EQ(j.at("node_findings")[0].at("host"), "synth-node3");
  EXPECT_EQ(j.at("node_findings")[0].at("ranks"), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(j.at("node_findings")[0].at("host_ranks"), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(j.at("node_findings")[0].at("state"), "frozen");
  EXPECT_EQ(j.at("node_findings")[0].at("os_state"), "stopped");
  EXPECT_NE(render_text(d).find("Node synth-node3: ranks 12-15 of its 4 ranks"), std::string::npos) << render_text(d);
}

TEST(HangHosts, AWholeNodeKilledIsOneNodeFinding) {
  const auto rd = crashed_together("hosts", 4, {5, 6, 7});
  FakeProcessTable procs = table(rd, {}, {4, 5, 6, 7});
  const Diagnosis d = diagnose(rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kCrash);
  EXPECT_EQ(d.kind, Kind::kRankDead);
  ASSERT_EQ(d.nodes.size(), 1u);
  EXPECT_EQ(d.nodes[0].host, "synth-node1");
  EXPECT_EQ(d.nodes[0].alive, Liveness::kGone);
  EXPECT_EQ(d.headline.rfind("CRASH: node synth-node1: ranks 4-7 all gone", 0), 0u) << d.headline;
  EXPECT_EQ(render_json(d).at("node_findings")[0].at("liveness"), "gone");
}

TEST(HangHosts, MostOfANodeStoppedIsStillTheNode) {
  const auto rd = crashed_together("hosts", 12, {13, 14});
  FakeProcessTable procs = table(rd, {12, 13, 14}, {});
  const Diagnosis d = diagnose(rd, procs);
  ASSERT_EQ(d.nodes.size(), 1u);
  EXPECT_EQ(d.nodes[0].ranks, (std::vector<int>{12, 13, 14}));
  EXPECT_NE(d.headline.find("node synth-node3: ranks 12-14 of its 4 ranks (12-15) stopped"), std::string::npos)
      << d.headline;
}

TEST(HangHosts, TwoStoppedRanksOfFourAreNotANodeProblem) {
  const auto rd = crashed_together("hosts", 12, {13});
  FakeProcessTable procs = table(rd, {12, 13}, {});
  const Diagnosis d = diagnose(rd, procs);
  EXPECT_EQ(d.kind, Kind::kRankFrozen);
  EXPECT_TRUE(d.nodes.empty());  // half a host is no clear majority
  EXPECT_EQ(d.headline.find("node "), std::string::npos) << d.headline;
}

TEST(HangHosts, WithOneHostTheWordingDoesNotMentionHosts) {
  const auto rd = crashed_together("hosts", 12, {13, 14, 15}, /*ranks_per_host=*/kRanks);
  FakeProcessTable procs = table(rd, {12, 13, 14, 15}, {});
  const Diagnosis d = diagnose(rd, procs);
  EXPECT_EQ(d.hosts, 1);
  EXPECT_TRUE(d.nodes.empty());
  EXPECT_EQ(d.kind, Kind::kRankFrozen);
  EXPECT_NE(d.headline.find("rank 12's process is frozen (stopped"), std::string::npos) << d.headline;
  EXPECT_EQ(d.headline.find("synth-node"), std::string::npos) << d.headline;
  EXPECT_EQ(d.explanation.find("synth-node"), std::string::npos) << d.explanation;
  EXPECT_TRUE(render_json(d).at("node_findings").empty());
}

}  // namespace
}  // namespace rankscope::analyzers::hang
