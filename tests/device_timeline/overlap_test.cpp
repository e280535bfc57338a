// overlap_test.cpp — compute/communication overlap (HTA's ratio) on timelines whose answer is
// known by construction, including the user's --comm-kernel patterns.
#include <gtest/gtest.h>

#include "kernels_fake_run.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"

namespace rankscope::testing {
namespace overlap_test {

using analyzers::analyze_kernels;
using analyzers::KernelsOptions;

constexpr const char* kAllReduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// One step's ops, shifted by `at` µs: NCCL 100-300 beside compute `comp_begin`-400 (a nested
// kernel on a third stream adds nothing) and a memcpy 100-200 (memory: neither side).
std::vector<FakeOp> step_ops(double at, int64_t step, double comp_begin) {
  return {unlaunched(kAllReduce, 11, at + 100, at + 300, step),
          unlaunched("gemm_kernel", 7, at + comp_begin, at + 400, step),
          unlaunched("gelu_kernel", 8, at + 290, at + 295, step),
          unlaunched("Memcpy DtoD (Device -> Device)", 9, at + 100, at + 200, step)};
}

TEST(KernelsOverlap, ShareOfCommunicationTimeBesideComputeHtasWay) {
  const auto dir = kernels_test_dir("overlap");
  FakeRank r0, r1, r2;
  for (int64_t s = 1; s <= 2; ++s) {
    for (auto& o : step_ops(double(s - 1) * kFakeStepUs, s, 200)) r0.ops.push_back(o);  // overlap 200-300
    for (auto& o : step_ops(double(s - 1) * kFakeStepUs, s, 280)) r1.ops.push_back(o);  // overlap 280-300
  }
  r2.ops = {unlaunched("gemm_kernel", 7, 0, 100)};  // no communication kernel at all
  write_kernels_run(dir, {r0, r1, r2});
  auto report = analyze_kernels(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_EQ(report->ranks.size(), 3u);

  const auto& o0 = report->ranks[0].overlap;
  EXPECT_EQ(report->ranks[0].traced_steps, 2);
  EXPECT_EQ(o0.communication_ns, 2 * 200'000);
  EXPECT_EQ(o0.compute_ns, 2 * 200'000);
  EXPECT_EQ(o0.overlap_ns, 2 * 100'000);
  ASSERT_TRUE(o0.ratio.has_value());
  EXPECT_DOUBLE_EQ(*o0.ratio, 0.5);
  EXPECT_DOUBLE_EQ(o0.exposed_ms_per_step, 0.1);

  const auto& o1 = report->ranks[1].overlap;
  ASSERT_TRUE(o1.ratio.has_value());
  EXPECT_DOUBLE_EQ(*o1.ratio, 0.1);
  EXPECT_DOUBLE_EQ(o1.exposed_ms_per_step, 0.18);

  EXPECT_FALSE(report->ranks[2].overlap.ratio.has_value()) << "no communication: no ratio (HTA divides by zero)";

  // 0.5 is not below the default threshold of 0.5; 0.1 is: one finding, rank 1, its exposed time.
  ASSERT_FALSE(report->findings.empty());
  const auto& f = report->findings.front();
  EXPECT_EQ(f.kind, "low_overlap");
  EXPECT_EQ(f.ranks, std::vector<int>{1});
  EXPECT_DOUBLE_EQ(f.cost_ms_per_step, 0.18);
  EXPECT_NE(f.text.find("10%"), std::string::npos) << f.text;
  std::filesystem::remove_all(dir);
}

TEST(KernelsOverlap, AUserPatternMakesAKernelCommunication) {
  const auto dir = kernels_test_dir("overlap-user");
  FakeRank r;
  r.ops = {unlaunched("my_moe_dispatch_kernel", 12, 0, 100), unlaunched("expert_gemm", 7, 50, 150)};
  write_kernels_run(dir, {r});
  auto plain = analyze_kernels(dir);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->ranks[0].overlap.ratio.has_value()) << "built-in rules: both are compute";

  KernelsOptions options;
  options.comm_kernel_patterns = {"moe_dispatch"};
  auto user = analyze_kernels(dir, options);
  ASSERT_TRUE(user.ok());
  ASSERT_TRUE(user->ranks[0].overlap.ratio.has_value());
  EXPECT_DOUBLE_EQ(*user->ranks[0].overlap.ratio, 0.5);
  const auto& comm = user->ranks[0].kinds[1];
  ASSERT_EQ(comm.top.size(), 1u);
  EXPECT_EQ(comm.top[0].name, "my_moe_dispatch_kernel");
  EXPECT_EQ(comm.top[0].rule, "user:moe_dispatch") << "the rule that classified it is named";

  options.comm_kernel_patterns = {"moe_(dispatch"};
  auto bad = analyze_kernels(dir, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().user_text().find("moe_(dispatch"), std::string::npos) << bad.status().user_text();
  std::filesystem::remove_all(dir);
}

}  // namespace overlap_test
}  // namespace rankscope::testing
