// breakdown_test.cpp — kernel time by kind, the top kernels per kind, and their spread across ranks,
// on timelines whose answer is known by construction.
#include <gtest/gtest.h>

#include "kernels_fake_run.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"

namespace rankscope::testing {
namespace breakdown_test {

using format::KernelClass;

// µs: gemm 0-100 and 200-`gemm2_end`; gelu 250-300 on stream 8 (inside the second gemm: adds to
// the sum, not to busy time); softmax `softmax_at`+20; an NCCL all-gather 100 µs; a 30 µs memcpy.
FakeRank rank_with(double gemm2_end, double softmax_at) {
  FakeRank r;
  r.ops = {unlaunched("gemm", 7, 0, 100),
           unlaunched("gemm", 7, 200, gemm2_end),
           unlaunched("gelu", 8, 250, 300),
           unlaunched("softmax", 7, softmax_at, softmax_at + 20),
           unlaunched("ncclDevKernel_AllGather_RING_LL", 11, 1000, 1100),
           unlaunched("Memcpy HtoD (Pageable -> Device)", 9, 1200, 1230)};
  return r;
}

TEST(KernelsBreakdown, TimeByKindTopKernelsAndTheSpreadAcrossRanks) {
  // gemm per rank: 100 + 300 = 400, 100 + 700 = 800, 100 + 2300 = 2400 µs.
  analyzers::KernelsOptions options;
  options.top_kernels = 2;
  auto report =
      analyze_fake_run("breakdown", {rank_with(500, 600), rank_with(900, 950), rank_with(2500, 2600)}, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();

  const auto& kinds = report->ranks[0].kinds;
  ASSERT_EQ(kinds.size(), 3u);
  EXPECT_EQ(kinds[0].kind, KernelClass::kCompute);
  EXPECT_EQ(kinds[0].count, 4);
  EXPECT_EQ(kinds[0].total_ns, 470'000);
  EXPECT_EQ(kinds[0].busy_ns, 420'000) << "gelu runs inside the second gemm";
  ASSERT_EQ(kinds[0].top.size(), 2u);
  EXPECT_EQ(kinds[0].top[0].name, "gemm");
  EXPECT_EQ(kinds[0].top[0].count, 2);
  EXPECT_EQ(kinds[0].top[0].total_ns, 400'000);
  EXPECT_EQ(kinds[0].top[0].min_ns, 100'000);
  EXPECT_EQ(kinds[0].top[0].max_ns, 300'000);
  EXPECT_EQ(kinds[0].top[0].rule, "default");
  EXPECT_EQ(kinds[0].top[1].name, "gelu");
  EXPECT_EQ(kinds[0].others_ns, 20'000) << "softmax is past the top 2";
  EXPECT_EQ(kinds[1].kind, KernelClass::kCommunication);
  EXPECT_EQ(kinds[1].total_ns, 100'000);
  EXPECT_EQ(kinds[1].top.at(0).rule, "nccl");
  EXPECT_EQ(kinds[2].kind, KernelClass::kMemory);
  EXPECT_EQ(kinds[2].total_ns, 30'000);

  // Compute per step: 0.47, 0.87, 2.47 ms.
  ASSERT_EQ(report->kind_spread.size(), 3u);
  const auto& compute = report->kind_spread[0].ms_per_step;
  EXPECT_DOUBLE_EQ(compute.min, 0.47);
  EXPECT_EQ(compute.min_rank, 0);
  EXPECT_DOUBLE_EQ(compute.median, 0.87);
  EXPECT_DOUBLE_EQ(compute.max, 2.47);
  EXPECT_EQ(compute.max_rank, 2);
  EXPECT_DOUBLE_EQ(report->kind_spread[1].ms_per_step.max, report->kind_spread[1].ms_per_step.min);

  const analyzers::KernelSpread* gemm = nullptr;
  bool softmax_listed = false;
  for (const auto& k : report->kernel_spread) {
    if (k.name == "gemm") gemm = &k;
    softmax_listed |= k.name == "softmax";
  }
  ASSERT_NE(gemm, nullptr);
  EXPECT_DOUBLE_EQ(gemm->ms_per_step.min, 0.4);
  EXPECT_DOUBLE_EQ(gemm->ms_per_step.median, 0.8);
  EXPECT_DOUBLE_EQ(gemm->ms_per_step.max, 2.4);
  EXPECT_EQ(gemm->ms_per_step.max_rank, 2);
  EXPECT_FALSE(softmax_listed) << "in no rank's top 2";

  // Rank 2 computes 1.6 ms a step more than the median rank; ranks 0 and 1 also have their
  // all-gather (1000-1100 µs) beside no compute kernel, which costs less (0.1 ms a step).
  ASSERT_EQ(report->findings.size(), 2u);
  EXPECT_EQ(report->findings[0].kind, "kernel_spread");
  EXPECT_EQ(report->findings[0].ranks, std::vector<int>{2});
  EXPECT_NEAR(report->findings[0].cost_ms_per_step, 1.6, 1e-9);
  EXPECT_EQ(report->findings[1].kind, "low_overlap");
  EXPECT_EQ(report->findings[1].ranks, (std::vector<int>{0, 1}));
}

}  // namespace breakdown_test
}  // namespace rankscope::testing
