// scaling_e2e_test.cpp — acceptance of the scaling report on a real sweep (label mpi: it shares
// the gpt2-train e2e setup): gpt2-train --sweep-seq-len 128,256,512,1024 on `tiny`, one process
// on the CPU, then `rankscope scaling`: the aggregated forward/block*/attn range grows with a
// log-log slope > 1.5 at the top of the sweep (its T^2 attention), forward/block*/mlp with a slope
// between 0.8 and 1.2 (linear in T). One OpenMP thread: on a shared 2-core machine a second
// thread mostly measures the other processes. Batch 4: on this machine GELU's time per element
// rises ~1.5x as its buffer grows from 1 to 2 MB (256K to 512K floats), which at batch 1 puts a
// cache step (mlp slope ~1.4) right at the top of the sweep; at batch 4 it falls at T=128..256.
// Then the forecast: the points up to 512 alone, forecast at 1024, and the interval must hold what
// the 1024 run measured (how close the value lands depends on the machine's load; the interval is
// sized by the points' measured noise, so it says so).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "rankscope/analyzers/scaling/scaling_analyzer.h"
#include "rankscope/analyzers/scaling/sweep.h"
#include "train_job.h"

namespace rankscope::analyzers {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const ScalingRange* find_range(const ScalingReport& r, const std::string& name) {
  for (const auto& x : r.ranges) {
    if (x.name == name) return &x;
  }
  return nullptr;
}

TEST(ScalingE2E, TinySweepAttentionIsSuperlinearMlpLinear) {
  setenv("OMP_NUM_THREADS", "1", 1);
  const fs::path sweep = e2e::fresh_run_dir("scaling_sweep_tiny");
  const std::vector<std::string> args = {"--model", "tiny", "--vocab-size", "1024", "--data", "synthetic:zipf",
                                         "--batch", "4", "--steps", "8", "--quiet", "--sweep-seq-len",
                                         "128,256,512,1024", "--run-dir", sweep.string()};
  std::string out;
  ASSERT_EQ(e2e::run_to_end(e2e::train_command(0, args), sweep, 600s, &out), 0) << out;

  auto index = read_sweep(sweep);
  ASSERT_TRUE(index.ok()) << index.status().to_string();
  EXPECT_TRUE(index->from_index);  // the trainer wrote sweep.json
  ASSERT_EQ(index->points.size(), 4u);

  auto report = analyze_scaling(sweep);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->attention, "naive");  // the CPU's --attention auto, recorded in run.json
  // The (B,NH,T,T) buffers make memory's growing part superlinear (measured ~1.65 over 256..1024).
  ASSERT_TRUE(report->memory_exponent.has_value());
  EXPECT_GT(*report->memory_exponent, 1.3);
  for (const auto& p : report->points) {
    std::printf("T=%lld step %.1f ms, %.0f tokens/s\n", (long long)p.seq_len, p.step_ms, p.tokens_per_s);
    EXPECT_GT(p.tokens_per_s, 0);
    EXPECT_TRUE(p.attention_share_flops.has_value());
  }
  const ScalingRange* attn = find_range(*report, "forward/block*/attn");
  const ScalingRange* mlp = find_range(*report, "forward/block*/mlp");
  ASSERT_NE(attn, nullptr);
  ASSERT_NE(mlp, nullptr);
  for (const ScalingRange* r : {attn, mlp}) {
    std::printf("%s:", r->name.c_str());
    for (const auto& s : r->slopes) std::printf(" %.2f", s.value_or(-1));
    std::printf("  (c %.3g a %.3g b %.3g R^2 %.3f)\n", r->fit.c, r->fit.a, r->fit.b, r->fit.r2);
  }
  ASSERT_EQ(attn->slopes.size(), 3u);
  EXPECT_GT(attn->slopes.back().value_or(0), 1.5);
  EXPECT_GT(mlp->slopes.back().value_or(0), 0.8);
  EXPECT_LT(mlp->slopes.back().value_or(9), 1.2);
  bool flagged = false;
  for (const auto& f : report->findings) flagged |= f.kind == "superlinear_range" && f.range == "forward/block*/attn";
  EXPECT_TRUE(flagged);

  // The forecast: the sweep up to 512 alone predicts what the T=1024 run measured.
  const fs::path partial = e2e::fresh_run_dir("scaling_sweep_tiny_to512");
  std::vector<SweepPoint> lower(index->points.begin(), index->points.begin() + 3);
  for (auto& p : lower) p.run_dir = fs::absolute(p.run_dir);
  ASSERT_TRUE(write_sweep_index(partial, lower).ok());
  ScalingOptions options;
  options.forecast_seq_lens = {1024};
  auto forecast = analyze_scaling(partial, options);
  ASSERT_TRUE(forecast.ok()) << forecast.status().to_string();
  ASSERT_EQ(forecast->forecasts.size(), 1u);
  const ScalingForecast& f = forecast->forecasts[0];
  const ScalingPoint& measured = report->points.back();
  std::printf("forecast %s\nmeasured T=1024: step %.1f ms, %.0f tokens/s\n", f.text.c_str(), measured.step_ms, measured.tokens_per_s);
  EXPECT_LE(f.step_ms.low, measured.step_ms);
  EXPECT_GE(f.step_ms.high, measured.step_ms);
  EXPECT_FALSE(f.quadratic_range.empty());
}

}  // namespace
}  // namespace rankscope::analyzers
