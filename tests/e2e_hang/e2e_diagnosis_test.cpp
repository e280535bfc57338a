// e2e_diagnosis_test.cpp — hangdoctor one level deeper, on real gpt2-train processes:
//   - a rank SIGSTOPped mid-run is "frozen (stopped): no thread runs", not "alive, running";
//   - one process stuck in backward/block1/mlp under activation recompute is stuck_in_compute,
//     with where, how long and the recompute setting in the sentence;
//   - learned bounds: a TP2 stall in forward/embed is called by hangdoctor with no flags from the
//     bounds the probes learned (the time from the stall to the verdict is printed; the numbers
//     over 10 runs are hang_verdict_bench's), and a clean 300-step run beside two busy processes
//     raises no suspicion, in the probe or in hangdoctor.
#include <gtest/gtest.h>

#include "hang_job.h"

namespace rankscope::analyzers::hang {
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

TEST(E2eDiagnosis, LearnedBoundsCallAStallWithNoFlags) {
  const auto base = scratch();
  const StallTiming t = stall_to_verdict(base);
  ASSERT_TRUE(t.verdict.j.is_object()) << t.log;
  std::printf("[e2e] stall in forward/embed -> verdict with no flags: %.2f s (load %.2f)\n", t.stall_to_verdict_s,
              load_average_1min());
  expect_verdict(t.verdict, "hang", "lagging_rank", {1});
  const json& det = t.verdict.j.at("detection");
  ASSERT_TRUE(det.is_object()) << t.verdict.j.dump(2);
  EXPECT_EQ(det.at("by"), "learned_bound") << t.verdict.j.dump(2);
  EXPECT_GE(det.at("open_s").get<double>(), det.at("bound_s").get<double>());
  EXPECT_GE(det.at("bound_s").get<double>(), 3.0);  // the default floor
  EXPECT_GT(t.stall_to_verdict_s, 0) << t.log;
  // The probes wrote the evidence when the bound passed: a suspected_hang record and stacks.
  auto run = format::open_run_directory(base / "run");
  ASSERT_TRUE(run.ok());
  int suspected = 0;
  for (const auto& r : run->ranks) {
    if (r.flight->watchdog.kind != format::WatchdogKind::kSuspectedHang) continue;
    ++suspected;
    EXPECT_NE(r.flight->watchdog.message.find("past its learned bound"), std::string::npos) << r.flight->watchdog.message;
    EXPECT_FALSE(r.flight->watchdog.stacks_file.empty());
  }
  EXPECT_GE(suspected, 1);
}

TEST(E2eDiagnosis, CleanRunUnderLoadRaisesNoSuspicion) {
  const auto base = scratch();
  BusyLoad load(2);
  Job job(base, 2, 2, 300, {});
  int polls = 0, alarms = 0;
  std::string alarm;
  int status = 0;
  while (!job.wait_exit(0.5, &status)) {
    if (!std::filesystem::exists(job.run_dir() / "run.json")) continue;
    const Verdict v = [&] {
      // Quietly: a healthy report every half second would drown the log.
      std::vector<std::string> argv = {job.run_dir().string(), "--json", (base / "d.json").string()};
      std::vector<std::string_view> args(argv.begin(), argv.end());
      std::FILE* devnull = std::fopen("/dev/null", "w");
      cli::HangdoctorEnv env;
      env.out = devnull;
      env.err = devnull;
      Verdict x;
      x.code = cli::run_hangdoctor(args, env);
      std::fclose(devnull);
      std::ifstream in(base / "d.json");
      if (in) x.j = json::parse(in, nullptr, false);
      return x;
    }();
    ++polls;
    if (v.code == 1 && v.j.is_object() && v.j.value("verdict", "") != "finished") {
      ++alarms;
      alarm = v.j.dump(2);
    }
  }
  std::printf("[e2e] clean 300-step run beside 2 busy processes: %d hangdoctor polls, %d alarms, load %.2f\n", polls,
              alarms, load_average_1min());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << job.log();
  EXPECT_EQ(alarms, 0) << alarm;
  EXPECT_GT(polls, 3);
  auto run = format::open_run_directory(job.run_dir());
  ASSERT_TRUE(run.ok());
  for (const auto& r : run->ranks) {
    EXPECT_NE(r.flight->watchdog.kind, format::WatchdogKind::kSuspectedHang) << r.flight->watchdog.message;
    const auto* step = r.flight->bound(format::BoundKind::kStep);
    ASSERT_NE(step, nullptr);
    EXPECT_TRUE(step->armed());
    EXPECT_GE(step->samples, 250u);
    EXPECT_GE(r.flight->bounds.size(), 3u);  // the step and at least two collective call sites
  }
}

}  // namespace
}  // namespace rankscope::analyzers::hang
