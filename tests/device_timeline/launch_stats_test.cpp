// launch_stats_test.cpp — CUDA launch statistics (HTA's cpu duration, gpu duration, launch delay,
// outliers, short kernels) on a timeline whose answer is known by construction; and the JSON.
#include <gtest/gtest.h>

#include "kernels_fake_run.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"
#include "rankscope/analyzers/device_timeline/kernels_json.h"

namespace rankscope::testing {
namespace launch_stats_test {

// µs:             call       op        cpu  gpu  delay (op begin - call end, clipped at 0)
//   a             0-10       5-25      10   20   0
//   slow_launch   20-100     100-110   80   10   0      call over 50 µs: a runtime outlier
//   queued        110-115    315-325   5    10   200    delay over 100 µs
//   tiny          120-130    400-403   10   3    270    delay outlier; gpu < cpu: a short kernel
//   ex            140-145    410-420   5    10   265    delay outlier (cuLaunchKernelEx)
//   lost          -          500-510   (launch not seen)
FakeRank launches() {
  FakeRank r;
  FakeOp ex = launched("ex_kernel", 7, 410, 420, 140, 145);
  ex.api = "cuLaunchKernelEx";
  r.ops = {launched("a_kernel", 7, 5, 25, 0, 10),
           launched("slow_launch_kernel", 7, 100, 110, 20, 100),
           launched("queued_kernel", 7, 315, 325, 110, 115),
           launched("tiny_kernel", 7, 400, 403, 120, 130),
           ex,
           unlaunched("lost_kernel", 7, 500, 510)};
  return r;
}

TEST(KernelsLaunchStats, DurationsDelaysAndOutliersHtasWay) {
  analyzers::KernelsOptions options;
  options.outliers_named = 2;
  auto report = analyze_fake_run("launches", {launches()}, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  const auto& l = report->ranks[0].launches;
  EXPECT_EQ(l.launches, 5);
  EXPECT_EQ(l.ops_without_launch, 1);
  EXPECT_EQ(l.cpu.min_ns, 5'000);
  EXPECT_EQ(l.cpu.median_ns, 10'000);
  EXPECT_EQ(l.cpu.max_ns, 80'000);
  EXPECT_EQ(l.gpu.min_ns, 3'000);
  EXPECT_EQ(l.gpu.max_ns, 20'000);
  EXPECT_EQ(l.delay.min_ns, 0);
  EXPECT_EQ(l.delay.median_ns, 200'000);
  EXPECT_EQ(l.delay.max_ns, 270'000);
  EXPECT_EQ(l.short_kernels, 1);
  EXPECT_EQ(l.runtime_outliers, 1);
  EXPECT_EQ(l.delay_outliers, 3);
  ASSERT_EQ(l.longest_calls.size(), 1u);
  EXPECT_EQ(l.longest_calls[0].api, "cudaLaunchKernel");
  EXPECT_EQ(l.longest_calls[0].kernel, "slow_launch_kernel");
  EXPECT_EQ(l.longest_calls[0].cpu_ns, 80'000);
  EXPECT_DOUBLE_EQ(l.longest_calls[0].at_ms, 0.02);
  ASSERT_EQ(l.longest_delays.size(), 2u) << "outliers_named = 2";
  EXPECT_EQ(l.longest_delays[0].kernel, "tiny_kernel");
  EXPECT_EQ(l.longest_delays[1].kernel, "ex_kernel");
  EXPECT_EQ(l.longest_delays[1].api, "cuLaunchKernelEx");
  ASSERT_EQ(l.apis.size(), 2u);
  EXPECT_EQ(l.apis[0], std::make_pair(std::string("cudaLaunchKernel"), int64_t(4)));
  EXPECT_EQ(l.apis[1], std::make_pair(std::string("cuLaunchKernelEx"), int64_t(1)));

  bool named = false;
  for (const auto& f : report->findings) {
    if (f.kind != "launch_outliers") continue;
    named = true;
    EXPECT_NE(f.text.find("cudaLaunchKernel of slow_launch_kernel on rank 0 at step 1"), std::string::npos) << f.text;
    EXPECT_DOUBLE_EQ(f.cost_ms_per_step, 0.03) << "80 µs against the 50 µs cutoff, one step";
  }
  EXPECT_TRUE(named);

  const nlohmann::json j = analyzers::kernels_report_json(*report);
  EXPECT_EQ(j["schema_version"], analyzers::kKernelsJsonSchemaVersion);
  EXPECT_EQ(j["kind"], "rankscope.kernels");
  const auto& jl = j["ranks"][0]["launches"];
  EXPECT_DOUBLE_EQ(jl["cpu_us"]["max"].get<double>(), 80.0);
  EXPECT_DOUBLE_EQ(jl["delay_us"]["median"].get<double>(), 200.0);
  EXPECT_EQ(jl["longest_calls"][0]["kernel"], "slow_launch_kernel");
  EXPECT_EQ(j["ranks"][0]["overlap"]["ratio"], nullptr) << "no communication kernel: null, not 0";
}

}  // namespace launch_stats_test
}  // namespace rankscope::testing
