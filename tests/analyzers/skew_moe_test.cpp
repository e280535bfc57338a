// skew_moe_test.cpp — rankscope skew on MoE runs (rankscope synth --moe-experts): the rank holding
// a hot expert receives the most tokens, and the expert_load finding is the top one, on that rank,
// with the cost its extra expert time has per step; tokens per expert over steps and the balanced
// what-if are in the JSON (valid against the schema) and the HTML report's data.
#include <gtest/gtest.h>

#include <numeric>

#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/reports/html_report.h"
#include "rankscope/synth/synth.h"
#include "skew_fake_run.h"

namespace rankscope::analyzers {
namespace {

struct MoeRun {
  std::filesystem::path dir;
  synth::SynthOptions options;
};

MoeRun hot_expert_run(int hot_expert, int steps) {
  MoeRun run;
  run.dir = testing::fresh_temp_dir("skew-moe");
  synth::SynthOptions& o = run.options;
  o.ranks = 4;
  o.steps = steps;
  o.layers = 2;
  o.moe_experts = 8;
  o.ep = 4;
  o.hot_expert = hot_expert;
  o.hot_bias = 1.5;
  o.start_ns = 1'700'000'000'000'000'000;
  auto s = synth::write_synthetic_run(run.dir, o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return run;
}

TEST(SkewMoe, ExpertLoadIsTheTopFindingOnTheRankHoldingTheHotExpert) {
  const MoeRun run = hot_expert_run(5, 12);  // experts 4-5 live on rank 2 (2 per rank)
  auto report = analyze_skew(run.dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  const Finding& top = report->findings.front();
  EXPECT_EQ(top.kind, "expert_load") << top.text;
  ASSERT_EQ(top.ranks.size(), 2u);
  EXPECT_EQ(top.ranks[0], 2);
  EXPECT_EQ(top.comm, "ep0");
  EXPECT_NE(top.range.find("forward/block"), std::string::npos);
  EXPECT_NE(top.range.find("/moe/experts"), std::string::npos);
  EXPECT_NE(top.text.find("rank 2 received"), std::string::npos) << top.text;
  EXPECT_NE(top.text.find("holds experts 4-5"), std::string::npos) << top.text;

  // Its cost against the synthetic model: expert time is proportional to the rows received
  // (6 ms forward + 12 ms backward per MoE block at the mean load of T*K = 512 rows per block).
  const auto& ranks = report->ranks;
  double mean_tokens = 0;
  for (const auto& r : ranks) mean_tokens += r.counters.at("moe.tokens_received") / 4.0;
  const double hot_tokens = ranks[2].counters.at("moe.tokens_received");
  EXPECT_GT(hot_tokens, 1.2 * mean_tokens);
  const double blocks = 2, per_block_rows = 512;
  const double expected_cost = (hot_tokens - mean_tokens) / per_block_rows * (6 + 12);
  EXPECT_NEAR(top.cost_ms_per_step, expected_cost, 0.15 * expected_cost);

  ASSERT_TRUE(report->expert_load);
  const ExpertLoad& x = *report->expert_load;
  EXPECT_EQ(x.experts, 8);
  EXPECT_EQ(x.hottest_expert, 5);
  EXPECT_GT(x.share[5], 1.5 / 8);
  ASSERT_EQ(x.tokens.size(), 8u);
  ASSERT_EQ(x.step_labels.size(), x.tokens[5].size());
  EXPECT_GE(x.step_labels.size(), 10u);
  // Every step's tokens over experts add up to what the ranks routed: T*K per MoE block per rank.
  for (size_t s = 0; s < x.step_labels.size(); ++s) {
    double sum = 0;
    for (const auto& e : x.tokens) sum += e[s];
    EXPECT_DOUBLE_EQ(sum, 4 * blocks * per_block_rows) << "step " << x.step_labels[s];
  }
  ASSERT_TRUE(x.balanced);
  EXPECT_NEAR(x.balanced->step_ms - x.balanced->estimated_step_ms, top.cost_ms_per_step, 1e-9);
  EXPECT_GT(x.ms_per_token, 0);
}

TEST(SkewMoe, BalancedRoutingHasNoExpertLoadFinding) {
  const MoeRun run = hot_expert_run(-1, 8);
  auto report = analyze_skew(run.dir);
  ASSERT_TRUE(report.ok());
  for (const auto& f : report->findings) EXPECT_NE(f.kind, "expert_load") << f.text;
  ASSERT_TRUE(report->expert_load);
  EXPECT_LT(report->expert_load->imbalance, 1.2);
}

TEST(SkewMoe, JsonMatchesTheSchemaAndTheHtmlCarriesTheHeatmapData) {
  const MoeRun run = hot_expert_run(1, 6);
  auto report = analyze_skew(run.dir);
  ASSERT_TRUE(report.ok());
  const nlohmann::json j = to_json(*report);
  ASSERT_TRUE(j.contains("expert_load"));
  EXPECT_EQ(j["expert_load"]["tokens"].size(), 8u);
  EXPECT_EQ(j["findings"][0]["kind"], "expert_load");
  if (auto violation = testing::schema_violation(j, "skew_report.schema.json")) {
    EXPECT_EQ(*violation, "");
  }
  auto html = reports::render_html_report(j, "moe");
  ASSERT_TRUE(html.ok()) << html.status().to_string();
  // The data the heatmap is drawn from, inline, and the code that draws it.
  const std::string tokens = j["expert_load"]["tokens"].dump();
  EXPECT_NE(html->find("\"expert_load\":"), std::string::npos);
  EXPECT_NE(html->find(tokens.substr(0, 40)), std::string::npos);
  EXPECT_NE(html->find("Tokens per expert, expert"), std::string::npos);
}

TEST(SkewMoe, ScalingFoldsNestedMoeRangesOverBlocks) {
  // rankscope scaling fits each range and its block* aggregate: the MoE phases nest one level below
  // the block and keep their phase name.
  EXPECT_EQ(block_wildcard("forward/block11/moe/experts"), "forward/block*/moe/experts");
  EXPECT_EQ(block_wildcard("backward/block3/moe/dispatch"), "backward/block*/moe/dispatch");
  EXPECT_EQ(parent_range("forward/block3/moe/combine"), "forward/block3/moe");
}

}  // namespace
}  // namespace rankscope::analyzers
