// e2e_diagnosis_test.cpp — hangdoctor one level deeper, on real gpt2-train processes (issue 15):
//   - a rank SIGSTOPped mid-run is "frozen (stopped): no thread runs", not "alive, running";
//   - one process stuck in backward/block1/mlp under activation recompute is stuck_in_compute,
//     with where, how long and the recompute setting in the sentence.
#include <gtest/gtest.h>

#include "hang_job.h"

namespace rankscope::hang {
namespace {

using namespace e2e;
using e2e::Verdict;

// Polls `hangdoctor RUN_DIR` (no flags) until `done` accepts its verdict or `seconds` pass.
template <class Done>
Verdict poll_hangdoctor(const std::filesystem::path& run_dir, double seconds, Done done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  Verdict v;
  while (std::chrono::steady_clock::now() < end) {
    v = hangdoctor(run_dir, false);
    if (v.j.is_object() && done(v)) return v;
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  }
  return v;
}

TEST(E2eDiagnosis, SigstoppedRankIsFrozen) {
  const auto base = scratch();
  Job job(base, 2, 2, 1000000, {});
  ASSERT_TRUE(job.wait_step(3, 2, 120)) << job.log();
  auto run = format::open_run_directory(job.run_dir());
  ASSERT_TRUE(run.ok());
  const int pid = run->ranks[1].flight->pid;
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  // Its heartbeat goes stale (10 s behind rank 0's) and the verdict names the frozen process.
  const Verdict v = poll_hangdoctor(job.run_dir(), 90, [](const Verdict& x) { return x.j.at("kind") == "rank_frozen"; });
  ::kill(pid, SIGCONT);
  expect_verdict(v, "hang", "rank_frozen", {1});
  EXPECT_EQ(v.j.at("ranks")[1].at("state"), "frozen") << v.text;
  EXPECT_EQ(v.j.at("ranks")[1].at("os_state"), "stopped") << v.text;
  EXPECT_EQ(v.j.at("ranks")[1].at("alive"), true) << v.text;
  EXPECT_NE(v.j.at("headline").get<std::string>().find("rank 1's process is frozen (stopped"), std::string::npos) << v.text;
  EXPECT_NE(v.j.at("headline").get<std::string>().find("no thread runs"), std::string::npos) << v.text;
}

TEST(E2eDiagnosis, OneProcessStuckInBackwardUnderRecompute) {
  const auto base = scratch();
  Job job(base, 1, 1, 20, {"--recompute", "1", "--inject", "stall:rank=0,range=backward/block1/mlp,step=3"});
  ASSERT_TRUE(job.wait_step(3, 1, 120)) << job.log();
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "stuck_in_compute", {0});
  EXPECT_EQ(v.j.at("ranks")[0].at("range"), "backward/block1/mlp") << v.text;
  EXPECT_EQ(v.j.at("recompute"), "1 (GELU)") << v.text;
  const std::string headline = v.j.at("headline");
  EXPECT_NE(headline.find("rank 0 is stuck in compute in backward/block1/mlp at step 3 for "), std::string::npos) << headline;
  EXPECT_NE(headline.find("(activation recompute 1 (GELU))"), std::string::npos) << headline;
  EXPECT_GE(v.j.at("ranks")[0].at("range_s").get<double>(), 3.0) << v.text;
}

}  // namespace
}  // namespace rankscope::hang
