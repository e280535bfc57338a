// e2e_hang_test.cpp — the acceptance matrix of hangdoctor on real jobs: gpt2-train (tiny, CPU)
// under mpirun with 2 and 4 ranks, TP and DP, each --inject fault, diagnosed live with
// `hangdoctor RUN_DIR --wait S --json FILE`. Each test checks verdict, kind, culprit rank,
// collective (comm, seq, op) and the culprit's range; the expected seq is read independently from
// the culprit's own flight recorder. The time from the hang to the verdict is printed.
#include <gtest/gtest.h>

#include "hang_job.h"

namespace rankscope::analyzers::hang {
namespace {

using namespace e2e;
using e2e::Verdict;  // the verdict of one hangdoctor run, not analyzers::hang::Verdict

TEST(E2eHang, StallInEmbeddingTp2) {
  const auto base = scratch();
  Job job(base, 2, 2, 20, {"--inject", "stall:rank=1,range=forward/embed,step=2"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true, /*stacks=*/true);
  expect_verdict(v, "hang", "lagging_rank", {1});
  expect_collective(v, "tp0", issued_on(job.run_dir(), 1, "tp0"));
  const auto& c = v.j.at("collective");
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), "forward/embed");
  EXPECT_EQ(v.j.at("ranks")[0].at("state"), "waiting");
  EXPECT_EQ(v.j.at("ranks")[0].at("seq"), c.at("seq"));
  EXPECT_EQ(v.text.rfind("HANG: rank 1 never entered allreduce #", 0), 0u) << job.log();
  // --stacks: the culprit's native stacks, with function names, stored as run-directory evidence.
  ASSERT_TRUE(v.j.at("ranks")[1].contains("stacks_file")) << v.text;
  std::ifstream in(job.run_dir() / v.j.at("ranks")[1].at("stacks_file").get<std::string>());
  const std::string stacks(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(stacks.find("on_range_enter"), std::string::npos) << stacks;  // the injected stall's frame
}

TEST(E2eHang, StallInBackwardTp2Dp2) {
  const auto base = scratch();
  Job job(base, 4, 2, 20, {"--inject", "stall:rank=3,range=backward/block1/mlp,step=2"});
  ASSERT_TRUE(job.wait_step(1, 4, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "lagging_rank", {3});
  expect_collective(v, "tp1", issued_on(job.run_dir(), 3, "tp1"));  // innermost, not the DP ranks downstream
  EXPECT_EQ(v.j.at("ranks")[3].at("range"), "backward/block1/mlp");
}

TEST(E2eHang, StallInDataIsAHostStallDp2) {
  const auto base = scratch();
  Job job(base, 2, 1, 20, {"--inject", "stall:rank=1,range=data,step=2"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "host_stall", {1});
  expect_collective(v, "dp0", issued_on(job.run_dir(), 1, "dp0"));
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), "data");
}

// MPI matches calls by order, so the skipping rank's shifted calls pair with the others' until an
// op or size differs (then MPI aborts the job). The desync began at the skipped seq.
TEST(E2eHang, SkipTp2) {
  const auto base = scratch();
  Job job(base, 2, 2, 20, {"--inject", "skip:rank=1,comm=tp0,seq=15"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "desync", "collective_mismatch", {1});
  expect_collective(v, "tp0", 15);
  const auto& c = v.j.at("collective");
  ASSERT_TRUE(v.j.at("mismatch").is_object()) << v.text;
  EXPECT_EQ(v.j.at("mismatch").at("field"), "range");
  const auto& by_rank = v.j.at("mismatch").at("values_by_rank");
  EXPECT_NE(by_rank.at("0"), by_rank.at("1"));
  EXPECT_EQ(c.at("range"), by_rank.at("0"));  // the call the others made at the skipped seq
}

TEST(E2eHang, ResizeTp2) {
  const auto base = scratch();
  Job job(base, 2, 2, 20, {"--inject", "resize:rank=1,comm=tp0,seq=15,factor=2"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "desync", "collective_mismatch", {1});
  expect_collective(v, "tp0", 15);
  const auto& c = v.j.at("collective");
  EXPECT_EQ(v.j.at("mismatch").at("field"), "count");
  const auto& by_rank = v.j.at("mismatch").at("values_by_rank");
  EXPECT_EQ(std::stoull(by_rank.at("1").get<std::string>()), 2 * std::stoull(by_rank.at("0").get<std::string>()));
  // The culprit is inside the resized call: its innermost range is that call's site.
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), c.at("range"));
}

TEST(E2eHang, CrashTp2Dp2) {
  const auto base = scratch();
  Job job(base, 4, 2, 20, {"--inject", "crash:rank=2,step=2"}, /*keep_survivors=*/true);
  ASSERT_TRUE(job.wait_step(1, 4, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "crash", "rank_dead", {2});
  expect_collective(v, "tp1", issued_on(job.run_dir(), 2, "tp1"));
  EXPECT_EQ(v.j.at("ranks")[2].at("alive"), false);
  EXPECT_EQ(v.j.at("ranks")[3].at("alive"), true);
  EXPECT_EQ(v.j.at("ranks")[2].at("range"), "step");  // it died entering the step
}

TEST(E2eHang, DropGradDp2) {
  const auto base = scratch();
  Job job(base, 2, 1, 20, {"--inject", "drop-grad:rank=1,param=h.0.mlp.c_fc.weight,step=2"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "missing_gradient", {1});
  expect_collective(v, "dp0", issued_on(job.run_dir(), 1, "dp0"));
  ASSERT_EQ(v.j.at("missing_gradients").size(), 1u) << v.text;
  const auto& g = v.j.at("missing_gradients")[0];
  EXPECT_EQ(g.at("rank"), 1);
  EXPECT_EQ(g.at("param"), "h.0.mlp.c_fc.weight");
  auto run = format::open_run_directory(job.run_dir());
  int bucket = -2;
  for (const auto& p : run->ranks[1].flight->params)
    if (p.name == "h.0.mlp.c_fc.weight") bucket = p.bucket;
  EXPECT_EQ(g.at("bucket"), bucket);
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), "grad_sync");
}

TEST(E2eHang, StragglerDelayIsHealthyThenFinished) {
  const auto base = scratch();
  Job job(base, 2, 2, 12, {"--inject", "delay:rank=1,range=forward/block0/mlp,ms=40"});
  ASSERT_TRUE(job.wait_step(3, 2, 60)) << job.log();
  const Verdict live = hangdoctor(job.run_dir(), false);
  EXPECT_EQ(live.j.at("verdict"), "healthy") << live.text;
  EXPECT_EQ(live.code, 0);
  ASSERT_TRUE(job.wait_exit(120)) << job.log();
  const Verdict done = hangdoctor(job.run_dir(), false);
  EXPECT_EQ(done.j.at("verdict"), "finished") << done.text;
  EXPECT_EQ(done.code, 0);
}

TEST(E2eHang, CleanRunFinished) {
  const auto base = scratch();
  Job job(base, 2, 2, 5, {});
  int status = 0;
  ASSERT_TRUE(job.wait_exit(120, &status)) << job.log();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << job.log();
  const Verdict v = hangdoctor(job.run_dir(), true);  // --wait on a finished job returns at once
  EXPECT_EQ(v.j.at("verdict"), "finished") << v.text;
  EXPECT_EQ(v.code, 0);
}

}  // namespace
}  // namespace rankscope::analyzers::hang
