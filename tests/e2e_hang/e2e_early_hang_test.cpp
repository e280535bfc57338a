// e2e_early_hang_test.cpp — early hangs get a verdict with no flags: a tiny TP2
// gpt2-train job under mpirun stalls rank 1 at start-up (step 0, init/model), at the first step, at
// the second and at a later one; hangdoctor with no --stuck-after is polled every 0.25 s until it
// says hang. Before this, a stall before ten learned samples waited for --stuck-after's 10 s.
//
// What is asserted is what the user reads: the verdict, the culprit, the kind, where the culprit
// stands (its step and range), a fast-path detection (the probe's learned bound or the peers' wait:
// either is right, and which poll sees its bound first depends on the build type and the machine's
// load), and a bound under 5 s computed from this job's own durations (its stated basis). The wall
// time from the stall's start (rank 1's range begin, from its recorder) to the verdict is printed
// for the report and asserted only against the design budget of 10 s: the machine these tests run
// on is shared and loaded.
#include <gtest/gtest.h>

#include "hang_job.h"

namespace rankscope::analyzers::hang {
namespace {

using namespace e2e;

constexpr double kFastBoundS = 5.0;
constexpr double kDesignBudgetS = 10.0;

void expect_early_verdict(const StallTiming& t, const std::string& what, int64_t step, const std::string& range) {
  ASSERT_TRUE(t.verdict.j.is_object()) << what << "\n" << t.log;
  std::printf("[e2e] %s: stall -> verdict with no flags %.2f s (load %.2f)\n", what.c_str(), t.stall_to_verdict_s,
              load_average_1min());
  EXPECT_EQ(t.verdict.j.at("verdict"), "hang") << t.verdict.j.dump(2);
  EXPECT_EQ(t.verdict.j.at("culprit_ranks"), json(std::vector<int>{1})) << t.verdict.j.dump(2);
  EXPECT_EQ(t.verdict.j.at("kind"), "lagging_rank") << t.verdict.j.dump(2);
  // Where the culprit stands: the step and range the stall was injected at.
  bool culprit_listed = false;
  for (const json& r : t.verdict.j.at("ranks")) {
    if (r.at("rank") != 1) continue;
    culprit_listed = true;
    EXPECT_EQ(r.at("step"), step) << r.dump(2);
    EXPECT_EQ(r.at("range"), range) << r.dump(2);
  }
  EXPECT_TRUE(culprit_listed) << t.verdict.j.dump(2);
  const json& det = t.verdict.j.at("detection");
  ASSERT_TRUE(det.is_object()) << t.verdict.j.dump(2);
  const std::string by = det.at("by");
  EXPECT_TRUE(by == "learned_bound" || by == "peer_wait") << t.verdict.j.dump(2);
  std::printf("[e2e] %s: detected by %s: %s; bound %.2f s (%s)\n", what.c_str(), by.c_str(),
              det.value("what", "").c_str(), det.value("bound_s", -1.0), det.value("basis", "").c_str());
  const double bound_s = det.at("bound_s");
  const double scale_s = det.at("quantile_s");
  EXPECT_GE(bound_s, 3.0);  // never below the floor
  EXPECT_LT(bound_s, kFastBoundS) << det.dump(2);
  // The bound is the job's own scale times a factor (x10 at most), not a constant.
  EXPECT_GT(scale_s, 0.0) << det.dump(2);
  EXPECT_LE(bound_s, std::max(3.0, 10 * scale_s) + 1e-6) << det.dump(2);
  EXPECT_FALSE(det.value("basis", "").empty()) << det.dump(2);
  EXPECT_GE(det.at("open_s").get<double>(), bound_s);
  EXPECT_GT(t.stall_to_verdict_s, 0) << t.log;
  EXPECT_LT(t.stall_to_verdict_s, kDesignBudgetS) << t.log;
}

TEST(E2eEarlyHang, StallAtTheSecondStepIsCalledFromTheFirstStepsTime) {
  const auto base = scratch();
  const StallTiming t = stall_to_verdict(base, 2);
  expect_early_verdict(t, "stall at step 2 in forward/embed", 2, "forward/embed");
}

TEST(E2eEarlyHang, StallAtTheFirstStepNamesTheRankAndWhereItStands) {
  const auto base = scratch();
  const StallTiming t = stall_to_verdict(base, 1);
  expect_early_verdict(t, "stall at step 1 in forward/embed", 1, "forward/embed");
}

TEST(E2eEarlyHang, StallAtStartupIsCalledFromThePeersWait) {
  const auto base = scratch();
  const StallTiming t = stall_to_verdict(base, 0, 0.25, 120, "init/model");
  expect_early_verdict(t, "stall at step 0 (start-up) in init/model", 0, "init/model");
  // Before any step there is no learned duration to bound: only the peers' wait can call it.
  EXPECT_EQ(t.verdict.j.at("detection").at("by"), "peer_wait") << t.verdict.j.dump(2);
}

TEST(E2eEarlyHang, StallAtALaterStepStaysFast) {
  const auto base = scratch();
  const StallTiming t = stall_to_verdict(base, 25);
  expect_early_verdict(t, "stall at step 25 in forward/embed", 25, "forward/embed");
}

}  // namespace
}  // namespace rankscope::analyzers::hang
