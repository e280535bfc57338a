// e2e_moe_test.cpp — the end-to-end acceptance of the MoE incidents on real gpt2-train jobs
// (tiny, CPU, under mpirun; label mpi), diagnosed by hangdoctor and `rankscope skew`:
//  - a2a-miscount: rank 1 expects one row too many back from rank 0 in the combine all_to_all_v;
//    the job stops, and hangdoctor says a2a_count_mismatch with the pair and both counts, read
//    back independently from the two recorders;
//  - a stall in forward/block1/moe/experts on one rank of an EP=2 job: a lagging rank, named with
//    its range, while its peer waits in the all_to_all_v on ep0;
//  - route-skew on 4 ranks with EP=4: skew's top finding is the expert load of the rank that holds
//    the hot expert, with its cost.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "hang_job.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"

namespace rankscope::analyzers::hang {
namespace {

using namespace e2e;
using e2e::Verdict;

const std::vector<std::string> kMoe = {"--moe-experts", "4", "--moe-top-k", "2", "--vocab-size", "1024"};

std::vector<std::string> moe_args(std::vector<std::string> extra) {
  std::vector<std::string> a = kMoe;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(E2eMoe, A2aMiscountIsACountMismatchNamingThePairAndCounts) {
  const auto base = scratch();
  Job job(base, 2, 1, 6, moe_args({"--ep", "2", "--inject", "a2a-miscount:rank=1,step=2,delta=1"}));
  int status = 0;
  job.wait_exit(120, &status);  // the receiving rank refuses the short combine; the job stops
  const Verdict v = hangdoctor(job.run_dir(), false);
  ASSERT_TRUE(v.j.is_object()) << v.text << job.log();
  EXPECT_EQ(v.j.at("verdict"), "desync") << v.text;
  EXPECT_EQ(v.j.at("kind"), "a2a_count_mismatch") << v.text << job.log();
  ASSERT_TRUE(v.j.contains("count_mismatch")) << v.text;
  const auto& m = v.j.at("count_mismatch");
  EXPECT_EQ(m.at("sender"), 0) << v.text;
  EXPECT_EQ(m.at("receiver"), 1) << v.text;
  EXPECT_EQ(m.at("comm"), "ep0") << v.text;
  EXPECT_EQ(m.at("expected_rows").get<int64_t>() - m.at("sent_rows").get<int64_t>(), 1) << v.text;
  EXPECT_NE(v.text.find("rank 0 sends"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("to rank 1, which expects"), std::string::npos) << v.text;
}

TEST(E2eMoe, StallInExpertsIsALaggingRankAtTheAllToAll) {
  const auto base = scratch();
  Job job(base, 2, 1, 20, moe_args({"--ep", "2", "--inject", "stall:rank=1,range=forward/block1/moe/experts,step=2"}));
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "lagging_rank", {1});
  ASSERT_TRUE(v.j.at("collective").is_object()) << v.text;
  EXPECT_EQ(v.j.at("collective").at("comm"), "ep0") << v.text;
  EXPECT_EQ(v.j.at("collective").at("op"), "alltoallv") << v.text;
  EXPECT_EQ(v.j.at("collective").at("seq"), issued_on(job.run_dir(), 1, "ep0")) << v.text;
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), "forward/block1/moe/experts") << v.text;
  EXPECT_EQ(v.j.at("ranks")[0].at("state"), "waiting") << v.text;
}

TEST(E2eMoe, RouteSkewOnEp4IsTheHotExpertsRankWithItsCost) {
  const auto base = scratch();
  // Four experts over EP=4: rank r holds expert r, so expert 2's rank is rank 2.
  Job job(base, 4, 1, 10, moe_args({"--ep", "4", "--inject", "route-skew:expert=2,bias=4"}));
  int status = -1;
  ASSERT_TRUE(job.wait_exit(400, &status)) << job.log();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << job.log();
  analyzers::SkewOptions after_warmup;
  after_warmup.first_step = 2;
  auto report = analyzers::analyze_skew(job.run_dir(), after_warmup);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  for (const auto& f : report->findings) std::printf("finding: [%.1f ms/step] %s\n", f.cost_ms_per_step, f.text.c_str());
  ASSERT_FALSE(report->findings.empty());
  const auto& top = report->findings.front();
  EXPECT_EQ(top.kind, "expert_load") << top.text;
  ASSERT_FALSE(top.ranks.empty());
  EXPECT_EQ(top.ranks.front(), 2) << top.text;
  EXPECT_EQ(top.comm, "ep0") << top.text;
  EXPECT_NE(top.range.find("/moe/experts"), std::string::npos) << top.text;
  EXPECT_GT(top.cost_ms_per_step, 0) << top.text;
  ASSERT_TRUE(report->expert_load);
  EXPECT_EQ(report->expert_load->hottest_expert, 2);
}

}  // namespace
}  // namespace rankscope::analyzers::hang
