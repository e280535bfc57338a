// inspect_e2e_test.cpp — `rankscope inspect` on a real 4-rank run (TP=2 x DP=2, MPI collectives
// through the probe): every rank shows its collectives, the ranks of one communicator agree on
// (communicator, seq) and op, and everything completed.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "train_job.h"

namespace {

std::string run_capture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

std::string rankscope_path() { return std::string(RANKSCOPE_BINARY_DIR) + "/bin/rankscope"; }

TEST(InspectE2E, FourRanksShowMatchingCompletedCollectives) {
  const auto run_dir = e2e::fresh_run_dir("inspect_tp2dp2");
  std::string log;
  const int rc = e2e::run_to_end(
      e2e::train_command(4, {"--model", "tiny", "--tp", "2", "--steps", "3", "--batch", "2", "--seq-len", "32",
                             "--data", "synthetic:zipf", "--run-dir", run_dir.string()}),
      run_dir, std::chrono::seconds(240), &log);
  ASSERT_EQ(rc, 0) << log;

  int status = -1;
  const std::string out = run_capture(rankscope_path() + " inspect " + run_dir.string() + " --json --last 1000", &status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["world_size"], 4);
  ASSERT_EQ(j["ranks"].size(), 4u);

  // comm name -> seq -> op as seen by each rank that is a member.
  std::map<std::string, std::map<uint64_t, std::set<std::string>>> ops;
  std::map<std::string, std::set<int>> members;
  std::map<std::string, std::set<uint64_t>> issued_by_comm;
  for (const auto& r : j["ranks"]) {
    ASSERT_TRUE(r["readable"].get<bool>()) << r.dump();
    EXPECT_EQ(r["process_state"], "finished");
    for (const auto& c : r["comms"]) {
      const std::string name = c["name"];
      members[name].insert(r["rank"].get<int>());
      issued_by_comm[name].insert(c["issued"].get<uint64_t>());
      EXPECT_EQ(c["issued"], c["completed"]) << "rank " << r["rank"] << " " << name;
      EXPECT_EQ(c["last"].size(), c["issued"].get<size_t>()) << "rank " << r["rank"] << " " << name;
      for (const auto& col : c["last"]) {
        EXPECT_EQ(col["state"], "completed") << col.dump();
        ops[name][col["seq"].get<uint64_t>()].insert(col["op"].get<std::string>() + "/" +
                                                     std::to_string(col["bytes"].get<uint64_t>()));
      }
    }
  }
  // TP groups are consecutive ranks, DP groups strided.
  EXPECT_EQ(members["tp0"], (std::set<int>{0, 1}));
  EXPECT_EQ(members["tp1"], (std::set<int>{2, 3}));
  EXPECT_EQ(members["dp0"], (std::set<int>{0, 2}));
  EXPECT_EQ(members["dp1"], (std::set<int>{1, 3}));
  for (const auto& [name, issued] : issued_by_comm)
    EXPECT_EQ(issued.size(), 1u) << name << ": members issued different numbers of collectives";
  // Training does its collectives on the TP and DP groups (`world` may carry none).
  for (const char* name : {"tp0", "tp1", "dp0", "dp1"}) EXPECT_GT(*issued_by_comm[name].begin(), 0u) << name;
  for (const auto& [name, by_seq] : ops)
    for (const auto& [seq, variants] : by_seq)
      EXPECT_EQ(variants.size(), 1u) << name << " #" << seq << ": members disagree on op or size";
}

}  // namespace
