// scaling_e2e_test.cpp — acceptance of the scaling report on a real sweep (label mpi: it shares
// the gpt2-train e2e setup): gpt2-train --sweep-seq-len 128,256,512,1024 on `tiny` (tiny_sweep.h),
// then `rankscope scaling` and a forecast of T=1024 from the points below it.
//
// What it asserts holds whatever else the machine is doing: the sweep index, the attention kind,
// the FLOP model's attention share growing with T, naive attention's memory growing faster than
// linear (allocation sizes, not timings), slopes for every aggregated range and a forecast with an
// interval. What the timings say (attention's slope above 1.5, the MLP's near 1, the superlinear
// finding, the forecast interval holding the measured T=1024 step) depends on the load of a shared
// 2-core machine: bench/analyzers/scaling_sweep_bench prints those numbers (label bench).
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "rankscope/analyzers/scaling/scaling_analyzer.h"
#include "rankscope/analyzers/scaling/sweep.h"
#include "tiny_sweep.h"

namespace rankscope::analyzers {
namespace {

TEST(ScalingE2E, TinySweepReportsEveryPointRangeAndForecast) {
  auto sweep = tiny_sweep::run("scaling_sweep_tiny");
  ASSERT_TRUE(sweep.ok()) << sweep.status().to_string();

  auto index = read_sweep(*sweep);
  ASSERT_TRUE(index.ok()) << index.status().to_string();
  EXPECT_TRUE(index->from_index);  // the trainer wrote sweep.json
  ASSERT_EQ(index->points.size(), 4u);

  auto report = analyze_scaling(*sweep);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->attention, "naive");  // the CPU's --attention auto, recorded in run.json
  // The (B,NH,T,T) buffers make memory's growing part superlinear (measured ~1.65 over 256..1024).
  ASSERT_TRUE(report->memory_exponent.has_value());
  EXPECT_GT(*report->memory_exponent, 1.3);
  ASSERT_EQ(report->points.size(), 4u);
  double previous_share = 0;
  for (const auto& p : report->points) {
    std::printf("T=%lld step %.1f ms, %.0f tokens/s\n", (long long)p.seq_len, p.step_ms, p.tokens_per_s);
    EXPECT_GT(p.step_ms, 0);
    EXPECT_GT(p.tokens_per_s, 0);
    ASSERT_TRUE(p.attention_share_flops.has_value());
    EXPECT_GT(*p.attention_share_flops, previous_share) << "the T^2 term's share grows with T";
    previous_share = *p.attention_share_flops;
  }
  for (const char* name : {"forward/block*/attn", "forward/block*/mlp", "backward/block*/attn"}) {
    const ScalingRange* r = tiny_sweep::find_range(*report, name);
    ASSERT_NE(r, nullptr) << name;
    EXPECT_TRUE(r->aggregated);
    ASSERT_EQ(r->slopes.size(), 3u) << name;
    for (const auto& s : r->slopes) EXPECT_TRUE(s.has_value()) << name << ": every point has the range";
  }

  auto forecast = tiny_sweep::forecast_top_from_lower(*index, "scaling_sweep_tiny_to512");
  ASSERT_TRUE(forecast.ok()) << forecast.status().to_string();
  ASSERT_EQ(forecast->forecasts.size(), 1u);
  const ScalingForecast& f = forecast->forecasts[0];
  EXPECT_EQ(f.seq_len, tiny_sweep::kTopSeqLen);
  EXPECT_TRUE(f.extrapolated);
  EXPECT_GT(f.step_ms.value, 0);
  EXPECT_LE(f.step_ms.low, f.step_ms.value);
  EXPECT_GE(f.step_ms.high, f.step_ms.value);
  EXPECT_FALSE(f.quadratic_range.empty());
  EXPECT_FALSE(f.text.empty());
}

}  // namespace
}  // namespace rankscope::analyzers
