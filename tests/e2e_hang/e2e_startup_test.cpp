// e2e_startup_test.cpp — start-up diagnoses on real gpt2-train jobs under mpirun (TP2xDP2):
//   - a stall in init/model on rank 2: hangdoctor names rank 2, its start-up phase and the
//     collective rank 3 waits in;
//   - a 3 s delay in init/data on rank 1: `rankscope startup` names rank 1 and init/data, with the
//     cost;
//   - CUDA_LAUNCH_BLOCKING=1 and OMP_WAIT_POLICY=ACTIVE on one rank: the findings name them;
//   - d12 with one rank stopped for real (SIGSTOP) early in start-up: not HEALTHY 10 s later.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "hang_job.h"
#include "rankscope/analyzers/startup/startup_report.h"

namespace rankscope::analyzers::hang {
namespace {

using namespace e2e;
using e2e::Verdict;

// Waits until `rank` is inside a collective on `comm` that has not completed.
bool wait_inside(const std::filesystem::path& run_dir, int rank, const std::string& comm, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (auto run = format::open_run_directory(run_dir); run.ok() && rank < int(run->ranks.size()) &&
                                                          run->ranks[rank].flight) {
      if (const auto* c = run->ranks[rank].flight->comm(comm))
        for (const auto& rec : c->ring)
          if (rec.state == format::CollectiveState::kEnqueued || rec.state == format::CollectiveState::kStarted)
            return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(E2eStartup, StallInInitModelNamesTheRankItsPhaseAndTheCollectiveItsPeerWaitsIn) {
  const auto base = scratch();
  Job job(base, 4, 2, 20, {"--inject", "stall:rank=2,range=init/model"});
  ASSERT_TRUE(wait_inside(job.run_dir(), 3, "tp1", 180)) << job.log();
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "lagging_rank", {2});
  expect_collective(v, "tp1", 0);
  EXPECT_EQ(v.j.at("ranks")[2].at("range"), "init/model");
  EXPECT_EQ(v.j.at("ranks")[2].at("step"), 0);  // start-up is step 0
  EXPECT_EQ(v.j.at("ranks")[3].at("state"), "waiting");
  EXPECT_NE(v.text.find("rank 2 is stuck in start-up phase init/model for"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("Rank 3 waits"), std::string::npos) << v.text;
}

TEST(E2eStartup, DelayInInitDataIsTheLateRanksPhaseWithItsCost) {
  const auto base = scratch();
  Job job(base, 4, 2, 3, {"--inject", "delay:rank=1,range=init/data,ms=3000"});
  int status = 0;
  ASSERT_TRUE(job.wait_exit(240, &status)) << job.log();
  ASSERT_EQ(status, 0) << job.log();
  auto report = analyzers::analyze_startup(job.run_dir());
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  const auto& top = report->findings.front();
  EXPECT_EQ(top.kind, "late_rank");
  EXPECT_EQ(top.rank, 1);
  EXPECT_EQ(top.phase, "init/data");
  EXPECT_GT(top.cost_ms, 2000.0) << top.text;
  EXPECT_LT(top.cost_ms, 6000.0) << top.text;
  EXPECT_EQ(report->ranks[1].slowest_phase, "init/data");
  for (const auto& r : report->ranks) {
    ASSERT_TRUE(r.readable) << r.problem;
    ASSERT_TRUE(r.to_first_step_s);
    bool launch = false;
    for (const auto& p : r.phases) launch |= p.name == "init/launch";
    EXPECT_TRUE(launch) << "rank " << r.rank << ": init/launch (from the process's start) missing";
  }
}

TEST(E2eStartup, HarmfulSettingsOnOneRankAreNamed) {
  const auto base = scratch();
  const auto run_dir = base / "run";
  const std::string exe = std::string(RANKSCOPE_BINARY_DIR) + "/bin/gpt2-train";
  const std::string args = " --model tiny --data synthetic:zipf --batch 2 --seq-len 32 --quiet --tp 2 --steps 2 --run-dir " +
                           run_dir.string();
  // MPMD: rank 1 alone gets the settings.
  const std::string cmd = std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ") + RANKSCOPE_MPIEXEC +
                          " --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 1 " + exe + args +
                          " : -np 1 -x CUDA_LAUNCH_BLOCKING=1 -x OMP_WAIT_POLICY=ACTIVE " + exe + args + " : -np 2 " +
                          exe + args + " > " + (base / "job.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto report = analyzers::analyze_startup(run_dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  bool blocking = false, busy_wait = false, differs = false;
  for (const auto& f : report->findings) {
    if (f.kind != "setting") continue;
    blocking |= f.setting == "CUDA_LAUNCH_BLOCKING" && f.rank == 1 && f.text.find("serialises") != std::string::npos;
    busy_wait |= f.setting == "OMP_WAIT_POLICY" && f.rank == 1 && f.text.find("busy-wait") != std::string::npos;
    differs |= f.text.find("differs across ranks") != std::string::npos;
  }
  EXPECT_TRUE(blocking);
  EXPECT_TRUE(busy_wait);
  EXPECT_TRUE(differs);
}

TEST(E2eStartup, D12RankStoppedEarlyIsNotHealthyTenSecondsLater) {
  const auto base = scratch();
  const auto launched = std::chrono::steady_clock::now();
  Job job(base, 4, 2, 20, {"--model", "d12"});
  // Stop rank 3 for real, 1.2 s after launch or once its recorder exists (before that there is no
  // pid to stop: the loaded machine may take longer than 1.2 s to get there).
  int pid = 0;
  const auto give_up = launched + std::chrono::seconds(180);
  while (pid == 0 && std::chrono::steady_clock::now() < give_up) {
    if (auto run = format::open_run_directory(job.run_dir()); run.ok() && run->ranks.size() > 3 && run->ranks[3].flight)
      pid = run->ranks[3].flight->pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(pid, 0) << job.log();
  std::this_thread::sleep_until(std::max(std::chrono::steady_clock::now(), launched + std::chrono::milliseconds(1200)));
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const Verdict v = hangdoctor(job.run_dir(), false);
  ::kill(pid, SIGCONT);
  EXPECT_NE(v.j.value("verdict", ""), "healthy") << v.text;
  EXPECT_EQ(v.j.value("culprit_ranks", json::array()), json::array({3})) << v.text;
}

}  // namespace
}  // namespace rankscope::analyzers::hang
