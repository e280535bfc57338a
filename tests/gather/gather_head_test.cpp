// gather_head_test.cpp — the head of a gather on simulated node answers (node_simulator.h): the
// verdict names the culprit alone (not the slow node, not the ranks nobody could see) and the nodes
// of a dead switch are one finding; unreachable nodes are grouped by what kept them silent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "gather_test_support.h"
#include "rankscope/analyzers/hang/gather_wording.h"
#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/format/rank_list.h"
#include "rankscope/gather/node_simulator.h"

namespace rankscope::gather {
namespace {

namespace fs = std::filesystem;

using testing::scratch;

struct HeadVerdict {
  int rc = -1;
  nlohmann::json json;
  std::string text;
};

HeadVerdict hangdoctor_json(const fs::path& dir) {
  const std::string d = dir.string(), j = (dir.parent_path() / "verdict.json").string();
  std::vector<std::string_view> args{d, "--json", j};
  rankscope::cli::HangdoctorEnv env;
  env.out = std::tmpfile();
  env.err = std::tmpfile();
  HeadVerdict v;
  v.rc = rankscope::cli::run_hangdoctor(args, env);
  std::rewind(env.out);
  for (int c; (c = std::fgetc(env.out)) != EOF;) v.text.push_back(char(c));
  std::fclose(env.out);
  std::fclose(env.err);
  std::ifstream in(j);
  v.json = nlohmann::json::parse(in, nullptr, false);
  return v;
}

TEST(GatherHead, SimulatedJobNamesTheCulpritAndTheDeadSwitchAsOneFinding) {
  const auto root = scratch("sim");
  SimulatedJob job;
  job.nodes = 128;
  job.culprit = 40 * 8 + 5;
  job.slow_node = 10;
  job.dead_switch_first = 64;
  job.dead_switch_nodes = 32;
  auto sim = simulate_gather(job);
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_EQ(sim->dead_hosts.size(), 32u);
  GatherOptions o;
  o.out_dir = root / "gathered";
  auto record = merge_node_answers(sim->answers, o);
  ASSERT_TRUE(record.ok()) << record.status().message();
  EXPECT_EQ(record->answered(), 96);
  EXPECT_EQ(record->ranks_missing, sim->dead_ranks);
  // Every unreachable node knows its ranks from run.json's hosts.
  for (const auto& n : record->nodes)
    if (!n.answered) EXPECT_EQ(n.missing_ranks.size(), 8u) << n.host;

  const HeadVerdict v = hangdoctor_json(root / "gathered");
  ASSERT_TRUE(v.json.is_object()) << v.text;
  EXPECT_EQ(v.rc, 1);
  EXPECT_EQ(v.json["verdict"], "hang");
  EXPECT_EQ(v.json["culprit_ranks"], nlohmann::json::array({job.culprit})) << v.text;
  EXPECT_EQ(v.json["collective"]["comm"], "tp40");
  // One finding for the switch's 32 nodes, with their 256 ranks.
  int unreachable = 0;
  for (const auto& line : v.json["gather"]["findings"]) {
    const std::string s = line.get<std::string>();
    if (s.find("unreachable") == std::string::npos) continue;
    ++unreachable;
    EXPECT_NE(s.find("32 nodes are unreachable"), std::string::npos) << s;
    EXPECT_NE(s.find("n[00064-00095]"), std::string::npos) << s;
    EXPECT_NE(s.find(format::compress_ranks(sim->dead_ranks)), std::string::npos) << s;
  }
  EXPECT_EQ(unreachable, 1) << v.text;
  // The ranks nobody saw are said to be unseen, never blamed; the slow node arrived: not blamed.
  for (const auto& r : v.json["ranks"]) {
    const int rank = r["rank"];
    if (rank >= 64 * 8 && rank < 96 * 8) EXPECT_EQ(r["state"], "missing") << rank;
    if (rank / 8 == 10) EXPECT_EQ(r["state"], "waiting") << rank;
  }
  fs::remove_all(root);
}

// Without the dead switch the culprit is named as well, and no finding speaks of unreachable nodes.
TEST(GatherHead, SimulatedJobWithEveryNodeAnswering) {
  const auto root = scratch("all");
  SimulatedJob job;
  job.nodes = 16;
  job.dead_switch_nodes = 0;
  auto sim = simulate_gather(job);
  ASSERT_TRUE(sim.ok());
  GatherOptions o;
  o.out_dir = root / "gathered";
  auto record = merge_node_answers(sim->answers, o);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->answered(), 16);
  const HeadVerdict v = hangdoctor_json(root / "gathered");
  ASSERT_TRUE(v.json.is_object()) << v.text;
  EXPECT_EQ(v.json["culprit_ranks"], nlohmann::json::array({sim->culprit})) << v.text;
  EXPECT_EQ(v.text.find("unreachable"), std::string::npos) << v.text;
  fs::remove_all(root);
}

TEST(GatherHead, UnreachableNodesAreGroupedByWhatKeptThemSilent) {
  format::GatherRecord r;
  r.world_size = 40;
  auto node = [&](const std::string& host, const std::string& reason, std::vector<int> missing) {
    format::GatheredNode n;
    n.host = host;
    n.reason = reason;
    n.missing_ranks = std::move(missing);
    r.nodes.push_back(n);
  };
  node("gpu07", "no answer within the 20.0 s deadline", {28, 29, 30, 31});
  node("gpu05", "no answer within the 20.0 s deadline", {20, 21, 22, 23});
  node("gpu06", "no answer within the 20.0 s deadline", {24, 25, 26, 27});
  node("login", "exit 255: ssh: connect to host login port 22: Connection refused", {32, 33});
  const auto lines = analyzers::hang::gather_findings(r);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "3 nodes are unreachable (no answer within the 20.0 s deadline), gpu[05-07]: their ranks 20-31 "
                      "are unseen");
  EXPECT_EQ(lines[1], "node login is unreachable (exit 255: ssh: connect to host login port 22: Connection refused): its "
                      "ranks 32,33 are unseen");
  EXPECT_EQ(analyzers::hang::compress_hosts({"n001", "n002", "n003", "n010", "head", "x9"}), "head,n[001-003,010],x9");
}

}  // namespace
}  // namespace rankscope::gather
