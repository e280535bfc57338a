// skew_fixture_test.cpp — the skew report and the trace export on a checked-in run directory
// (tests/fixtures/analyzers/skew_tp2_delay, event-stream schema v1; see skew_make_fixture.cpp for
// what it holds). Guards the readers against format drift: these bytes do not change with the code.
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/reports/chrome_trace.h"

namespace rankscope::analyzers {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "analyzers" / "skew_tp2_delay";

TEST(SkewFixture, NamesRankOneAndItsMlp) {
  auto report = analyze_skew(kFixture);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->world_size, 2);
  EXPECT_EQ(report->steps, 12);
  EXPECT_TRUE(report->problems.empty());
  ASSERT_EQ(report->findings.size(), 2u);
  const Finding& top = report->findings[0];
  EXPECT_EQ(top.kind, "late_arrival");
  EXPECT_EQ(top.ranks, std::vector<int>{1});
  EXPECT_EQ(top.range, "forward/block0/mlp");
  EXPECT_NEAR(top.cost_ms_per_step, 18.0 * 10 / 12, 0.05);  // late in 10 of 12 steps
  EXPECT_EQ(report->findings[1].kind, "counter_imbalance");
  // The clean steps show in the individual score of rank 1: its best step is 18 ms faster.
  EXPECT_LT(report->ranks[1].individual_score, 0.9);
  EXPECT_NEAR(report->ranks[1].clock_offset_ms, 2500.0, 1e-9);
}

TEST(SkewFixture, WindowAfterWarmUp) {
  SkewOptions o;
  o.first_step = 2;
  o.last_step = 11;
  auto report = analyze_skew(kFixture, o);
  ASSERT_TRUE(report.ok());
  EXPECT_NEAR(report->findings.at(0).cost_ms_per_step, 18.0, 0.05);
  EXPECT_NEAR(report->ranks[1].individual_score, 1.0, 1e-9);
}

TEST(SkewFixture, ExportsTwoRanksWithTracedRanges) {
  std::ostringstream out;
  auto summary = reports::export_chrome_trace(kFixture, out);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto trace = nlohmann::json::parse(out.str());
  int ranges = 0;
  for (const auto& e : trace["traceEvents"]) ranges += e.value("cat", "") == "range";
  // 2 ranks x 2 traced steps x (data, embed, 2x(attn, mlp), head, backward: head, 2x(mlp, attn), embed, grad_sync, optimizer)
  EXPECT_EQ(ranges, 2 * 2 * 15);
  EXPECT_EQ(summary->ranks, 2);
}

}  // namespace
}  // namespace rankscope::analyzers
