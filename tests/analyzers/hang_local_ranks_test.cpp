// hang_local_ranks_test.cpp — `hangdoctor --py-spy`'s two halves on a fabricated /proc and a fake
// py-spy: which processes are a job's ranks (not their DataLoader workers, not another job's), and
// each rank's stacks read from py-spy's output, a rank it cannot read said as a problem.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "rankscope/stacks/local_ranks.h"
#include "skew_fake_run.h"

namespace rankscope::stacks {
namespace {

namespace fs = std::filesystem;

void add_process(const fs::path& proc, int pid, int ppid, const std::map<std::string, std::string>& env) {
  const fs::path dir = proc / std::to_string(pid);
  fs::create_directories(dir);
  std::ofstream(dir / "stat") << pid << " (pt_main thread) S " << ppid << " 1 1 0 -1\n";
  std::ofstream environ(dir / "environ", std::ios::binary);
  for (const auto& [k, v] : env) environ << k << '=' << v << '\0';
}

std::map<std::string, std::string> rank_env(int rank, const std::string& run_id) {
  return {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", run_id}, {"PATH", "/usr/bin"}};
}

TEST(LocalRanks, RanksOfTheJobWithoutTheirDataLoaderWorkers) {
  const fs::path proc = testing::fresh_temp_dir("local-ranks") / "proc";
  add_process(proc, 50, 1, {{"PATH", "/usr/bin"}});  // torchrun itself: no RANK
  add_process(proc, 101, 50, rank_env(1, "job-a"));
  add_process(proc, 100, 50, rank_env(0, "job-a"));
  add_process(proc, 102, 101, rank_env(1, "job-a"));  // rank 1's DataLoader worker
  fs::create_directories(proc / "self");               // not a pid
  auto ranks = find_local_ranks(proc);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  ASSERT_EQ(ranks->size(), 2u);
  EXPECT_EQ((*ranks)[0].rank, 0);
  EXPECT_EQ((*ranks)[0].pid, 100);
  EXPECT_EQ((*ranks)[1].pid, 101);
  EXPECT_EQ((*ranks)[1].world_size, 2);
  EXPECT_EQ((*ranks)[1].job, "job-a");

  add_process(proc, 200, 1, rank_env(0, "job-b"));
  auto two = find_local_ranks(proc);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("2 PyTorch jobs run on this machine: job-a (2 ranks), job-b (1 rank)"),
            std::string::npos) << two.status().message();

  auto none = find_local_ranks(proc / "no-such");
  EXPECT_FALSE(none.ok());
}

TEST(LocalRanks, PySpyOfEveryRankAndWhatItCouldNotRead) {
  const fs::path dir = testing::fresh_temp_dir("local-ranks-pyspy");
  const fs::path fake = dir / "py-spy";
  std::ofstream(fake) << "#!/bin/sh\n"
                         "# usage as py-spy: dump --nonblocking --pid PID\n"
                         "if [ \"$4\" = 101 ]; then echo 'Error: Permission Denied: try running as root'; exit 1; fi\n"
                         "echo \"Process $4: python train.py\"\n"
                         "echo 'Python v3.11.7 (/usr/bin/python3.11)'\n"
                         "echo\n"
                         "echo \"Thread $4 (idle): \\\"MainThread\\\"\"\n"
                         "echo '    stage_forward (train.py:88)'\n"
                         "echo '    <module> (train.py:151)'\n";
  fs::permissions(fake, fs::perms::owner_all);
  const std::vector<LocalRank> ranks = {{0, 100, 2, "job-a"}, {1, 101, 2, "job-a"}};
  auto r = sample_with_py_spy(ranks, 2, 0.01, fake.string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->ranks.size(), 1u);
  const RankStacks& rank0 = r->ranks.at(0);
  ASSERT_EQ(rank0.snapshots.size(), 2u);  // one a round
  EXPECT_EQ(rank0.snapshots[0].threads.at(0).frames.at(0).function, "stage_forward");
  EXPECT_EQ(r->world_size, 2);
  ASSERT_EQ(r->problems.size(), 2u);
  EXPECT_EQ(r->problems[0], "py-spy could not read rank 1 (pid 101): Error: Permission Denied: try running as root");
  EXPECT_NE(r->summary.find("2 snapshots in 2 rounds"), std::string::npos) << r->summary;

  auto missing = sample_with_py_spy(ranks, 1, 0.0, (dir / "no-py-spy").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("not found (pip install py-spy"), std::string::npos) << missing.status().message();
}

}  // namespace
}  // namespace rankscope::stacks
