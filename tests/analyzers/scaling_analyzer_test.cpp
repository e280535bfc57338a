// scaling_analyzer_test.cpp — the fit, the sweep reader and the scaling report on a fabricated
// sweep whose attention grows as 0.2 + 0.001 T + 2e-5 T^2 ms per block and whose MLP is linear.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "rankscope/analyzers/scaling/flop_model.h"
#include "rankscope/analyzers/scaling/memory_growth.h"
#include "rankscope/analyzers/scaling/quadratic_fit.h"
#include "rankscope/analyzers/scaling/scaling_analyzer.h"
#include "rankscope/analyzers/scaling/scaling_json.h"
#include "rankscope/analyzers/scaling/sweep.h"
#include "skew_fake_run.h"

namespace rankscope::analyzers {
namespace {

namespace fs = std::filesystem;

TEST(QuadraticFit, RecoversExactCoefficients) {
  const std::vector<double> T = {128, 256, 512, 1024, 2048};
  std::vector<double> t;
  for (double x : T) t.push_back(3.0 + 0.01 * x + 4e-5 * x * x);
  const QuadraticFit f = fit_quadratic(T, t);
  EXPECT_NEAR(f.c, 3.0, 1e-6);
  EXPECT_NEAR(f.a, 0.01, 1e-9);
  EXPECT_NEAR(f.b, 4e-5, 1e-12);
  EXPECT_NEAR(f.r2, 1.0, 1e-12);
  ASSERT_TRUE(f.crossover().has_value());
  EXPECT_NEAR(*f.crossover(), 250.0, 1e-6);
}

TEST(QuadraticFit, FewPointsAndNoise) {
  const std::vector<double> T2 = {100, 200}, t2 = {5, 9};
  const QuadraticFit line = fit_quadratic(T2, t2);
  EXPECT_NEAR(line.c, 1.0, 1e-9);
  EXPECT_NEAR(line.a, 0.04, 1e-12);
  EXPECT_EQ(line.b, 0.0);
  EXPECT_FALSE(line.crossover().has_value());
  // A purely quadratic series: the linear coefficient is rounding noise and crosses nothing.
  const std::vector<double> Tq = {128, 256, 512, 1024};
  std::vector<double> tq;
  for (double x : Tq) tq.push_back(0.1 + 1e-5 * x * x);
  EXPECT_FALSE(fit_quadratic(Tq, tq).crossover().has_value());
  const std::vector<double> T = {1, 2, 3, 4, 5, 6}, noisy = {1.1, 1.9, 3.2, 3.8, 5.1, 6.3};
  const QuadraticFit f = fit_quadratic(T, noisy);
  EXPECT_GT(f.r2, 0.95);
  EXPECT_LT(f.r2, 1.0);
}

TEST(QuadraticFit, LogLogSlopes) {
  const std::vector<double> T = {128, 256, 512}, t = {1, 2, 8};
  const auto s = log_log_slopes(T, t);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_NEAR(*s[0], 1.0, 1e-12);
  EXPECT_NEAR(*s[1], 2.0, 1e-12);
  const std::vector<double> zero = {0, 1, 2};
  EXPECT_FALSE(log_log_slopes(T, zero)[0].has_value());
}

TEST(FlopModel, AttentionShareGrowsWithT) {
  auto shape = gpt_shape_from_json({{"layers", 12}, {"channels", 768}, {"padded_vocab_size", 50304}});
  ASSERT_TRUE(shape.has_value());
  const double s1 = attention_flop_share(*shape, 128), s2 = attention_flop_share(*shape, 8192);
  EXPECT_GT(s2, s1);
  // By hand at T=1024: 12*(8C^2 + 2TC) / (12*(24C^2 + 2TC) + 2*C*50304).
  const double C = 768, T = 1024;
  EXPECT_NEAR(attention_flop_share(*shape, T), 12 * (8 * C * C + 2 * T * C) / (12 * (24 * C * C + 2 * T * C) + 2 * C * 50304), 1e-12);
  EXPECT_FALSE(gpt_shape_from_json({{"layers", 12}}).has_value());
}

constexpr int64_t kSeqLens[] = {128, 256, 512, 1024};

// attention(T): run.json model.attention of the point at T, or null to leave the field out (old runs).
// memory(T): the point's mem.peak_bytes (the default grows linearly: 1e6 T, plus the step index).
fs::path write_sweep(bool with_index, const std::function<const char*(int64_t)>& attention = {},
                     const std::function<double(int64_t)>& memory = {}) {
  const fs::path sweep = testing::fresh_temp_dir("scaling-sweep");
  std::vector<SweepPoint> points;
  for (int64_t T : kSeqLens) {
    testing::FakeRunSpec spec;
    spec.world_size = 1;
    spec.tp = 1;
    spec.steps = 5;
    const double Td = double(T);
    spec.script = testing::standard_step(
        2, nullptr, [Td](int, int64_t) { return 0.2 + 0.001 * Td + 2e-5 * Td * Td; },
        [Td](int, int64_t) { return 0.004 * Td; });
    const double mem = memory ? memory(T) : 1e6 * Td;
    spec.counters = [mem](int, int64_t s) {
      return std::vector<std::pair<std::string, double>>{{"mem.peak_bytes", mem + double(s)}};
    };
    spec.training = {{"seq_len", T}, {"batch", 4}};
    spec.model = {{"layers", 2}, {"heads", 4}, {"channels", 128}, {"vocab_size", 50257}};
    if (const char* kind = attention ? attention(T) : nullptr) spec.model["attention"] = kind;
    spec.kernel_fraction = 0.5;  // as if on a GPU: half of each range is kernel time
    const fs::path dir = sweep / sweep_point_dir_name(T);
    testing::write_fake_run(dir, spec);
    points.push_back({T, dir});
  }
  if (with_index) EXPECT_TRUE(write_sweep_index(sweep, points).ok());
  return sweep;
}

const ScalingRange* find_range(const ScalingReport& r, const std::string& name) {
  for (const auto& x : r.ranges) {
    if (x.name == name) return &x;
  }
  return nullptr;
}

TEST(MemoryGrowth, ExponentOfTheGrowingPartWhateverTheFixedPart) {
  auto at = [](double fixed, double k, double e) {
    return [=](double T) { return fixed + k * std::pow(T, e); };
  };
  for (double e : {1.0, 1.5, 2.0}) {
    for (double fixed : {0.0, 5e8}) {
      const auto m = at(fixed, 1e3, e);
      auto got = memory_growth_exponent(512, m(512), 1024, m(1024), 2048, m(2048));
      ASSERT_TRUE(got.has_value());
      EXPECT_NEAR(*got, e, 1e-6) << "fixed " << fixed;
      got = memory_growth_exponent(100, m(100), 300, m(300), 400, m(400));  // uneven spacing
      ASSERT_TRUE(got.has_value());
      EXPECT_NEAR(*got, e, 1e-6);
    }
  }
  // Linear plus a quadratic part: between 1 and 2, rising with T.
  const auto mixed = [](double T) { return 1e9 + 1e5 * T + 20.0 * T * T; };
  const double low = *memory_growth_exponent(256, mixed(256), 512, mixed(512), 1024, mixed(1024));
  const double high = *memory_growth_exponent(1024, mixed(1024), 2048, mixed(2048), 4096, mixed(4096));
  EXPECT_GT(low, 1.0);
  EXPECT_LT(low, high);
  EXPECT_LT(high, 2.0);
  EXPECT_FALSE(memory_growth_exponent(1, 5, 2, 5, 4, 6).has_value()) << "no growth at the first step";
  EXPECT_FALSE(memory_growth_exponent(1, 5, 2, 6, 4, 6).has_value()) << "no growth at the second step";
  EXPECT_FALSE(memory_growth_exponent(2, 5, 1, 6, 4, 7).has_value()) << "T not increasing";
  EXPECT_DOUBLE_EQ(*memory_growth_exponent(1, 0, 2, 1, 3, 1e9), kMaxGrowthExponent) << "clamped";
}

TEST(ScalingAnalyzer, QuadraticMemoryIsAMemoryCliffLinearIsNot) {
  auto linear = analyze_scaling(write_sweep(true));
  ASSERT_TRUE(linear.ok()) << linear.status().to_string();
  EXPECT_FALSE(linear->points[1].memory_exponent.has_value()) << "needs three points";
  ASSERT_TRUE(linear->memory_exponent.has_value());
  EXPECT_NEAR(*linear->memory_exponent, 1.0, 1e-3);
  for (const auto& f : linear->findings) EXPECT_NE(f.kind, "memory_cliff") << f.text;

  // Naive attention's shape: 400 MiB fixed, activations linear, (B,NH,T,T) quadratic.
  auto naive = analyze_scaling(write_sweep(true, {}, [](int64_t T) {
    return 400.0 * 1048576 + 2e5 * double(T) + 300.0 * double(T) * double(T);
  }));
  ASSERT_TRUE(naive.ok()) << naive.status().to_string();
  ASSERT_TRUE(naive->memory_exponent.has_value());
  EXPECT_GT(*naive->memory_exponent, 1.5);
  const ScalingFinding* cliff = nullptr;
  for (const auto& f : naive->findings)
    if (f.kind == "memory_cliff") cliff = &f;
  ASSERT_NE(cliff, nullptr);
  EXPECT_DOUBLE_EQ(cliff->slope, *naive->memory_exponent);
  EXPECT_NE(cliff->text.find("T=1024"), std::string::npos) << cliff->text;
  const auto j = to_json(*naive);
  EXPECT_DOUBLE_EQ(j["memory_exponent"].get<double>(), *naive->memory_exponent);
  EXPECT_TRUE(j["points"][0]["memory_exponent"].is_null());
}

TEST(ScalingAnalyzer, FitsAttentionAsQuadraticAndMlpAsLinear) {
  const fs::path sweep = write_sweep(true);
  auto report = analyze_scaling(sweep);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_EQ(report->points.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const ScalingPoint& p = report->points[i];
    EXPECT_EQ(p.seq_len, kSeqLens[i]);
    EXPECT_NEAR(p.tokens_per_s, 4.0 * double(p.seq_len) / (p.step_ms / 1e3), 1e-6);
    ASSERT_TRUE(p.peak_mem_bytes.has_value());
    EXPECT_DOUBLE_EQ(*p.peak_mem_bytes, 1e6 * double(p.seq_len) + 4);  // the largest step's value
    ASSERT_TRUE(p.attention_share_flops.has_value());
    ASSERT_TRUE(p.attention_share_measured.has_value());
  }
  EXPECT_GT(report->points[3].attention_share_measured.value(), report->points[0].attention_share_measured.value());

  const ScalingRange* attn = find_range(*report, "forward/block*/attn");
  ASSERT_NE(attn, nullptr);
  EXPECT_TRUE(attn->aggregated);
  // Two blocks: the aggregate is twice one block's 0.2 + 0.001 T + 2e-5 T^2.
  EXPECT_NEAR(attn->fit.c, 0.4, 1e-3);
  EXPECT_NEAR(attn->fit.a, 0.002, 1e-5);
  EXPECT_NEAR(attn->fit.b, 4e-5, 1e-8);
  EXPECT_GT(attn->fit.r2, 0.9999);
  ASSERT_EQ(attn->slopes.size(), 3u);
  EXPECT_GT(attn->slopes.back().value(), 1.5);
  EXPECT_NEAR(attn->fit.crossover().value(), 50.0, 0.5);

  const ScalingRange* mlp = find_range(*report, "forward/block*/mlp");
  ASSERT_NE(mlp, nullptr);
  for (const auto& s : mlp->slopes) {
    EXPECT_GT(s.value(), 0.8);
    EXPECT_LT(s.value(), 1.2);
  }
  const ScalingRange* kernels = find_range(*report, "forward/block*/attn [gpu kernels]");
  ASSERT_NE(kernels, nullptr);
  EXPECT_NEAR(kernels->fit.b, 0.5 * attn->fit.b, 1e-8);
  EXPECT_GT(kernels->slopes.back().value(), 1.5);
  const ScalingRange* one_block = find_range(*report, "forward/block1/attn");
  ASSERT_NE(one_block, nullptr);
  EXPECT_FALSE(one_block->aggregated);

  ASSERT_FALSE(report->findings.empty());
  bool attn_flagged = false, mlp_flagged = false, cliff = false;
  for (const auto& f : report->findings) {
    if (f.kind == "superlinear_range" && f.range == "forward/block*/attn") {
      attn_flagged = true;
      EXPECT_NE(f.text.find("forward/block*/attn grows as T^1.9; at T=1024 it is"), std::string::npos) << f.text;
      // Beyond linear growth from T=512: 2 blocks x (t(1024) - 2 t(512)) with t = 0.2 + 0.001 T + 2e-5 T^2.
      auto t = [](double T) { return 0.2 + 0.001 * T + 2e-5 * T * T; };
      EXPECT_NEAR(f.cost_ms_per_step, 2 * (t(1024) - 2 * t(512)), 0.01);
    }
    if (f.range == "forward/block*/mlp" && f.kind == "superlinear_range") mlp_flagged = true;
    if (f.kind == "throughput_cliff") cliff = true;
  }
  EXPECT_TRUE(attn_flagged);
  EXPECT_FALSE(mlp_flagged);
  EXPECT_TRUE(cliff);

  const nlohmann::json j = to_json(*report);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["points"].size(), 4u);
  EXPECT_TRUE(j["points"][0].contains("peak_mem_bytes"));
  EXPECT_TRUE(j["ranges"][0].contains("crossover_T"));
  if (auto violation = testing::schema_violation(j, "scaling_report.schema.json")) {
    EXPECT_EQ(*violation, "");
  } else {
    std::printf("python3-jsonschema not installed; schema check skipped\n");
  }
}

TEST(Forecast, ExactQuadraticIsForecastExactlyAndTheIntervalWidensBeyondTheData) {
  auto t = [](double T) { return 3.0 + 0.01 * T + 1e-5 * T * T; };
  const std::vector<double> T = {128, 256, 512}, y = {t(128), t(256), t(512)};
  const Estimate exact = forecast_quadratic(T, y, 2048, 0.0);
  EXPECT_NEAR(exact.value, t(2048), 1e-6);
  // Three points, no noise: nothing but the model-error floor beyond the data (10% each side).
  EXPECT_NEAR(exact.high - exact.low, 0.2 * t(2048), 1e-6);
  EXPECT_NEAR(forecast_quadratic(T, y, 384, 0.0).high, t(384), 1e-6);  // inside the data: no floor
  // With measured noise the interval grows with the leverage, far faster beyond the data.
  const Estimate near = forecast_quadratic(T, y, 512, 0.1), far = forecast_quadratic(T, y, 4096, 0.1);
  EXPECT_LT(near.high - near.low, far.high - far.low);
  EXPECT_GT(fit_leverage(T, 4096), 100 * fit_leverage(T, 512));
  EXPECT_NEAR(fit_leverage(T, 512), 1.0, 1e-9);  // a 3-term fit through 3 points interpolates each
  // Residuals size it when there are more points than terms.
  const std::vector<double> T5 = {128, 256, 384, 512, 640}, y5 = {t(128) + 0.5, t(256) - 0.5, t(384) + 0.5, t(512) - 0.5, t(640) + 0.5};
  const Estimate noisy = forecast_quadratic(T5, y5, 1024, 0.0);
  EXPECT_GT(noisy.high - noisy.low, 1.0);
  EXPECT_LT(noisy.low, t(1024));
  EXPECT_GT(noisy.high, t(1024));
}

TEST(Forecast, SweepTo512ForecastsTheMeasured1024AndNamesTheQuadraticRange) {
  const fs::path full = write_sweep(true);
  // The same runs without the top point: forecast what the 1024 run measured.
  const fs::path partial = testing::fresh_temp_dir("scaling-partial");
  std::vector<SweepPoint> points;
  for (int64_t T : {128, 256, 512}) points.push_back({T, fs::absolute(full / sweep_point_dir_name(T))});
  ASSERT_TRUE(write_sweep_index(partial, points).ok());
  ScalingOptions options;
  options.forecast_seq_lens = {1024, 4096};
  auto report = analyze_scaling(partial, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  auto measured = analyze_scaling(full);
  ASSERT_TRUE(measured.ok());
  ASSERT_EQ(report->forecasts.size(), 2u);
  const ScalingForecast& f = report->forecasts[0];
  EXPECT_EQ(f.seq_len, 1024);
  EXPECT_TRUE(f.extrapolated);
  const ScalingPoint& top = measured->points.back();
  EXPECT_NEAR(f.step_ms.value, top.step_ms, 0.02 * top.step_ms);
  EXPECT_LE(f.step_ms.low, top.step_ms + 1e-9);
  EXPECT_GE(f.step_ms.high, top.step_ms - 1e-9);
  ASSERT_TRUE(f.tokens_per_s.has_value());
  EXPECT_NEAR(f.tokens_per_s->value, top.tokens_per_s, 0.02 * top.tokens_per_s);
  ASSERT_TRUE(f.peak_mem_bytes.has_value());
  EXPECT_NEAR(f.peak_mem_bytes->value, *top.peak_mem_bytes, 1e-3 * *top.peak_mem_bytes);
  // Attention holds the only T^2 term of the fake runs (backward's is the larger: it runs longer).
  EXPECT_EQ(f.quadratic_range, "backward/block*/attn");
  EXPECT_GT(report->forecasts[1].quadratic_range_share, f.quadratic_range_share);
  EXPECT_NE(f.text.find("backward/block*/attn's T^2 term is"), std::string::npos) << f.text;
  const nlohmann::json j = to_json(*report);
  EXPECT_EQ(j["forecasts"][0]["seq_len"], 1024);
  EXPECT_EQ(j["forecasts"][0]["quadratic_range"], "backward/block*/attn");
  if (auto violation = testing::schema_violation(j, "scaling_report.schema.json")) EXPECT_EQ(*violation, "");
  // One point cannot be extrapolated: a problem, not a guess.
  const fs::path single = testing::fresh_temp_dir("scaling-single");
  ASSERT_TRUE(write_sweep_index(single, {{128, fs::absolute(full / sweep_point_dir_name(128))}}).ok());
  auto lone = analyze_scaling(single, options);
  ASSERT_TRUE(lone.ok());
  EXPECT_TRUE(lone->forecasts.empty());
  ASSERT_FALSE(lone->problems.empty());
  EXPECT_NE(lone->problems.back().find("at least two points"), std::string::npos);
}

TEST(ScalingAnalyzer, NamesTheAttentionKindOfTheSweep) {
  auto flash = analyze_scaling(write_sweep(true, [](int64_t) { return "flash"; }));
  ASSERT_TRUE(flash.ok()) << flash.status().to_string();
  EXPECT_EQ(flash->attention, "flash");
  for (const auto& p : flash->points) EXPECT_EQ(p.attention, "flash");
  EXPECT_EQ(to_json(*flash)["attention"], "flash");
  EXPECT_EQ(to_json(*flash)["points"][0]["attention"], "flash");

  auto old = analyze_scaling(write_sweep(true));  // runs without model.attention
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->attention, "unknown");
  EXPECT_EQ(old->points[0].attention, "unknown");

  auto mixed = analyze_scaling(write_sweep(true, [](int64_t T) { return T == 1024 ? "naive" : "flash"; }));
  ASSERT_TRUE(mixed.ok()) << mixed.status().to_string();
  EXPECT_EQ(mixed->attention, "mixed (flash, naive)");
  bool said = false;
  for (const auto& problem : mixed->problems) said |= problem.find("different attention kinds") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(ScalingAnalyzer, SweepWithoutIndexIsDiscovered) {
  const fs::path sweep = write_sweep(false);
  auto s = read_sweep(sweep);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_FALSE(s->from_index);
  ASSERT_EQ(s->points.size(), 4u);
  EXPECT_EQ(s->points[0].seq_len, 128);
  EXPECT_EQ(s->points[3].seq_len, 1024);
}

TEST(ScalingAnalyzer, BadSweepsSayWhy) {
  const fs::path empty = testing::fresh_temp_dir("scaling-empty");
  auto none = read_sweep(empty);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no sweep points"), std::string::npos);
  EXPECT_FALSE(read_sweep(empty / "missing").ok());
  std::ofstream(empty / "sweep.json") << R"({"schema_version": 9, "points": []})";
  auto future = read_sweep(empty);
  ASSERT_FALSE(future.ok());
  EXPECT_EQ(future.status().code(), StatusCode::kUnsupported);
  std::ofstream(empty / "sweep.json", std::ios::trunc)
      << R"({"schema_version": 1, "points": [{"seq_len": 64, "run_dir": "a"}, {"seq_len": 64, "run_dir": "b"}]})";
  auto twice = read_sweep(empty);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("appears twice"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::analyzers
