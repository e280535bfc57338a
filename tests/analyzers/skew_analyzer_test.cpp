// skew_analyzer_test.cpp — the skew report on run directories fabricated with the format writers.
//
// The scenario of the issue: two TP ranks, rank 1 spends 18 ms more in forward/block0/mlp before
// the TP all-reduce; embed.local_tokens 3900 vs 196 with contiguous vocab shards. Ranks' clocks
// differ by seconds, so nothing here works unless the ClockRecord offsets are applied.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/format/run_directory_layout.h"
#include "skew_fake_run.h"

namespace rankscope::analyzers {
namespace {

namespace fs = std::filesystem;
using testing::FakeRunSpec;

FakeRunSpec tp2_delay_spec(double delay_ms, double tokens0, double tokens1, const char* vocab_shard) {
  FakeRunSpec spec;
  spec.world_size = 2;
  spec.tp = 2;
  spec.steps = 10;
  spec.script = testing::standard_step(2, [delay_ms](int r, int64_t) { return r == 1 ? delay_ms : 0.0; });
  spec.counters = [tokens0, tokens1](int r, int64_t) {
    return std::vector<std::pair<std::string, double>>{{"embed.local_tokens", r == 0 ? tokens0 : tokens1}};
  };
  // Rank 1's clock runs 3 s ahead of rank 0's.
  spec.clock_offset_ns = [](int r) { return r == 1 ? int64_t(-3'000'000'000) : int64_t(0); };
  spec.training = {{"seq_len", 64}, {"batch", 4}, {"vocab_shard", vocab_shard}};
  return spec;
}

const CollectiveSite* site_after(const SkewReport& report, const std::string& comm, const std::string& range) {
  for (const auto& s : report.collectives) {
    if (s.comm == comm && s.range == range) return &s;
  }
  return nullptr;
}

const SiteRank* site_rank(const CollectiveSite& s, int rank) {
  for (const auto& r : s.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

TEST(SkewAnalyzer, LateArrivalNamesTheRankTheRangeAndTheCost) {
  const fs::path dir = testing::fresh_temp_dir("skew-delay");
  testing::write_fake_run(dir, tp2_delay_spec(18.0, 3900, 196, "contiguous"));
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  const Finding& top = report->findings.front();
  EXPECT_EQ(top.kind, "late_arrival");
  EXPECT_EQ(top.ranks, std::vector<int>{1});
  EXPECT_EQ(top.range, "forward/block0/mlp");
  EXPECT_EQ(top.comm, "tp0");
  EXPECT_NEAR(top.cost_ms_per_step, 18.0, 0.05);
  EXPECT_NE(top.text.find("rank 1 arrives last at tp0 allreduce after forward/block0/mlp by 18.0 ms median"),
            std::string::npos) << top.text;
  EXPECT_NE(top.text.find("its forward/block0/mlp takes 18.0 ms longer than its peers'"), std::string::npos) << top.text;
  // Who waits for it, where: tp0 is ranks 0 and 1, so rank 0, in the all-reduce inside the mlp range (a CPU
  // run: no device breakdown, so the wait is not called GPU idle).
  ASSERT_EQ(top.waiters.size(), 1u) << top.text;
  EXPECT_EQ(top.waiters[0].rank, 0);
  EXPECT_EQ(top.waiters[0].range, "forward/block0/mlp");
  EXPECT_NEAR(top.waiters[0].wait_ms, 18.0, 0.01);
  EXPECT_FALSE(top.waiters[0].gpu_idle);
  EXPECT_NE(top.text.find("rank 0 waits for it 18.0 ms a step in allreduce inside forward/block0/mlp"), std::string::npos) << top.text;

  // Arrival-based: the fast rank waits, the slow one does not.
  const CollectiveSite* site = site_after(*report, "tp0", "forward/block0/mlp");
  ASSERT_NE(site, nullptr);
  EXPECT_EQ(site->instances, 10);
  EXPECT_NEAR(site_rank(*site, 0)->arrival_rel_last_ms, -18.0, 0.01);
  EXPECT_NEAR(site_rank(*site, 0)->wait_ms, 18.0, 0.01);
  EXPECT_NEAR(site_rank(*site, 1)->arrival_rel_last_ms, 0.0, 0.01);
  EXPECT_DOUBLE_EQ(site_rank(*site, 1)->last_fraction, 1.0);
  EXPECT_DOUBLE_EQ(site_rank(*site, 0)->last_fraction, 0.0);

  // Per-rank split: rank 0 waits 18 ms a step, rank 1 computes 18 ms more; both see the same step.
  const RankSkew& r0 = report->ranks[0];
  const RankSkew& r1 = report->ranks[1];
  EXPECT_NEAR(r0.collective_wait_ms, 18.0, 0.01);
  EXPECT_NEAR(r1.collective_wait_ms, 0.0, 0.01);
  EXPECT_NEAR(r1.compute_ms - r0.compute_ms, 18.0, 0.01);
  EXPECT_NEAR(r0.step_ms_median, r1.step_ms_median, 0.01);
  EXPECT_NEAR(r0.compute_ms + r0.collective_wait_ms + r0.collective_transfer_ms + r0.idle_ms, r0.step_ms_median, 0.01);
  EXPECT_NEAR(r1.range_compute_ms.at("forward/block0/mlp") - r0.range_compute_ms.at("forward/block0/mlp"), 18.0, 0.01);
  EXPECT_GT(r0.top_level_ms.at("forward"), 0.0);
  EXPECT_GT(r1.top_level_ms.at("backward"), r1.top_level_ms.at("forward") * 0.5);
  EXPECT_NEAR(r1.clock_offset_ms, -3000.0, 1e-9);

  // Straggler scores exclude communication: rank 0 is the fastest, rank 1 is slower by 18 ms.
  EXPECT_DOUBLE_EQ(r0.relative_score, 1.0);
  EXPECT_NEAR(r1.relative_score, r0.noncomm_ms_median / (r0.noncomm_ms_median + 18.0), 1e-3);
  EXPECT_NEAR(r1.individual_score, 1.0, 1e-9);  // every step of rank 1 is alike

  // What-if: without the late arrival a step is 18 ms shorter.
  ASSERT_TRUE(report->what_if.has_value());
  EXPECT_EQ(report->what_if->rank, 1);
  EXPECT_NEAR(report->what_if->step_ms - report->what_if->estimated_step_ms, 18.0, 0.05);
}

TEST(SkewAnalyzer, ContiguousVocabShardsGiveACounterFinding) {
  const fs::path dir = testing::fresh_temp_dir("skew-counter");
  testing::write_fake_run(dir, tp2_delay_spec(0.0, 3900, 196, "contiguous"));
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  auto it = std::find_if(report->findings.begin(), report->findings.end(),
                         [](const Finding& f) { return f.kind == "counter_imbalance"; });
  ASSERT_NE(it, report->findings.end());
  EXPECT_EQ(it->counter, "embed.local_tokens");
  EXPECT_EQ(it->comm, "tp0");
  EXPECT_EQ(it->ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(it->text.find("embed.local_tokens imbalance 20:1 across tp0 (rank 0: 3900, rank 1: 196 per step): "
                          "vocab shards are contiguous and real token ids are skewed; use --vocab-shard strided"),
            std::string::npos) << it->text;
  // Lookups cost the same on both ranks here: say so, with the range and its times.
  EXPECT_NE(it->text.find("the imbalance is real but costs nothing measurable here: forward/embed takes"),
            std::string::npos) << it->text;
  ASSERT_EQ(report->counters.size(), 1u);
  EXPECT_NEAR(report->counters[0].imbalance, 3900.0 / ((3900.0 + 196.0) / 2), 1e-9);
  EXPECT_EQ(report->counters[0].max_rank, 0);
}

TEST(SkewAnalyzer, UnattributedKernelTimeCountersAreNoCounterFinding) {
  // gpu.kernel_ns_outside_ranges is kernel time the probe could not book to a range: one rank with
  // some and its peer with none is what the device breakdown reports, not a work imbalance. A work
  // counter with the same split beside it still gives the finding, so the check is not vacuous.
  FakeRunSpec spec = tp2_delay_spec(0.0, 1, 1, "strided");
  spec.counters = [](int r, int64_t) {
    return std::vector<std::pair<std::string, double>>{{"gpu.kernel_ns_outside_ranges", r == 0 ? 4e6 : 1e3},
                                                       {"mlp.tokens", r == 0 ? 4000.0 : 1.0}};
  };
  const fs::path dir = testing::fresh_temp_dir("skew-counter-gpu");
  testing::write_fake_run(dir, spec);
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  std::vector<std::string> flagged;
  for (const Finding& f : report->findings) {
    if (f.kind == "counter_imbalance") flagged.push_back(f.counter);
  }
  EXPECT_EQ(flagged, (std::vector<std::string>{"mlp.tokens"}));
}

TEST(SkewAnalyzer, CounterImbalanceWhoseRangeCostsMoreIsGivenThatCost) {
  // Rank 0 routes 4x the MLP tokens and its forward/block0/mlp takes 12 ms more per step.
  FakeRunSpec spec = tp2_delay_spec(0.0, 1, 1, "strided");
  spec.script = testing::standard_step(2, [](int r, int64_t) { return r == 0 ? 12.0 : 0.0; });
  spec.counters = [](int r, int64_t) {
    return std::vector<std::pair<std::string, double>>{{"mlp.tokens", r == 0 ? 4000.0 : 1000.0}};
  };
  const fs::path dir = testing::fresh_temp_dir("skew-counter-cost");
  testing::write_fake_run(dir, spec);
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  auto it = std::find_if(report->findings.begin(), report->findings.end(),
                         [](const Finding& f) { return f.kind == "counter_imbalance"; });
  ASSERT_NE(it, report->findings.end());
  EXPECT_EQ(it->range, "forward/block0/mlp") << it->text;
  EXPECT_NEAR(it->cost_ms_per_step, 6.0, 1.0) << it->text;  // beyond the group's mean: half the 12 ms
  EXPECT_NE(it->text.find("it costs"), std::string::npos) << it->text;
  EXPECT_NE(it->text.find("on rank 0 vs"), std::string::npos) << it->text;
}

TEST(SkewAnalyzer, BalancedRunHasNoFindings) {
  const fs::path dir = testing::fresh_temp_dir("skew-balanced");
  testing::write_fake_run(dir, tp2_delay_spec(0.0, 2050, 2046, "strided"));
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  for (const auto& f : report->findings) ADD_FAILURE() << "unexpected finding: " << f.text;
  EXPECT_FALSE(report->what_if.has_value());
  EXPECT_NEAR(report->counters.at(0).imbalance, 2050.0 / 2048.0, 1e-9);
}

TEST(SkewAnalyzer, DelayOnOneRankOfFourIsOneFindingNotItsEchoes) {
  // tp=2, dp=2: rank 3's delay holds up rank 2 at tp1 and then both at their DP all-reduce.
  FakeRunSpec spec;
  spec.world_size = 4;
  spec.tp = 2;
  spec.steps = 8;
  spec.script = testing::standard_step(2, [](int r, int64_t) { return r == 3 ? 10.0 : 0.0; });
  auto report = analyze_skew([&] {
    const fs::path dir = testing::fresh_temp_dir("skew-four");
    testing::write_fake_run(dir, spec);
    return dir;
  }());
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  for (const auto& f : report->findings) std::printf("finding: %s\n", f.text.c_str());
  ASSERT_EQ(report->findings.size(), 1u);
  const Finding& f = report->findings[0];
  EXPECT_EQ(f.ranks, std::vector<int>{3});
  EXPECT_EQ(f.range, "forward/block0/mlp");
  EXPECT_NEAR(f.cost_ms_per_step, 10.0, 0.05);
  EXPECT_NEAR(report->what_if->step_ms - report->what_if->estimated_step_ms, 10.0, 0.05);
  // Rank 2 waits for rank 3 at tp1; rank 0 waits for rank 2 at dp0.
  EXPECT_NEAR(report->ranks[2].collective_wait_ms, 10.0, 0.01);
  EXPECT_NEAR(report->ranks[0].collective_wait_ms, 10.0, 0.01);
  EXPECT_NEAR(report->ranks[3].collective_wait_ms, 0.0, 0.01);
}

TEST(SkewAnalyzer, StepWindowLimitsTheSteps) {
  const fs::path dir = testing::fresh_temp_dir("skew-window");
  FakeRunSpec spec = tp2_delay_spec(0.0, 1, 1, "strided");
  // Rank 1 is late only in steps 5..6.
  spec.script = testing::standard_step(2, [](int r, int64_t s) { return r == 1 && (s == 5 || s == 6) ? 7.0 : 0.0; });
  testing::write_fake_run(dir, spec);
  SkewOptions window;
  window.first_step = 5;
  window.last_step = 7;
  auto inside = analyze_skew(dir, window);
  ASSERT_TRUE(inside.ok()) << inside.status().to_string();
  EXPECT_EQ(inside->first_step, 5);
  EXPECT_EQ(inside->last_step, 7);
  EXPECT_EQ(inside->ranks[1].steps, 3);
  ASSERT_FALSE(inside->findings.empty());
  EXPECT_NEAR(inside->findings[0].cost_ms_per_step, 7.0 * 2 / 3, 0.05);
  window.first_step = 0;
  window.last_step = 4;
  auto before = analyze_skew(dir, window);
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->findings.empty());
  window.first_step = 100;
  window.last_step = 200;
  auto none = analyze_skew(dir, window);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no step records in the step window"), std::string::npos);
}

TEST(SkewAnalyzer, MissingOrTruncatedRankIsAProblemNotAFailure) {
  const fs::path dir = testing::fresh_temp_dir("skew-missing");
  FakeRunSpec spec = tp2_delay_spec(0.0, 1, 1, "strided");
  spec.world_size = 4;
  testing::write_fake_run(dir, spec);
  fs::remove(format::event_stream_path(dir, 2));
  fs::resize_file(format::event_stream_path(dir, 3), fs::file_size(format::event_stream_path(dir, 3)) / 2);
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->ranks[2].present);
  EXPECT_TRUE(report->ranks[3].present);
  EXPECT_LT(report->ranks[3].steps, report->ranks[0].steps);
  const bool mentions_rank2 = std::any_of(report->problems.begin(), report->problems.end(),
                                          [](const std::string& p) { return p.find("rank 2") != std::string::npos; });
  EXPECT_TRUE(mentions_rank2);
  EXPECT_FALSE(analyze_skew(dir / "does-not-exist").ok());
}

TEST(SkewAnalyzer, ParseSteps) {
  auto ab = parse_steps("3-9");
  ASSERT_TRUE(ab.ok());
  EXPECT_EQ(ab->first, 3);
  EXPECT_EQ(ab->second, 9);
  auto one = parse_steps("4");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->first, 4);
  EXPECT_EQ(one->second, 4);
  for (const char* bad : {"", "x", "5-3", "1-", "-2", "1-2-3"}) {
    auto r = parse_steps(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_NE(r.status().message().find("--steps"), std::string::npos);
  }
}

TEST(SkewAnalyzer, JsonCarriesTheSchemaFields) {
  const fs::path dir = testing::fresh_temp_dir("skew-json");
  testing::write_fake_run(dir, tp2_delay_spec(18.0, 3900, 196, "contiguous"));
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok());
  const nlohmann::json j = to_json(*report);
  EXPECT_EQ(j["schema_version"], 3);
  EXPECT_EQ(j["kind"], "rankscope.skew");
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["ranks"][1]["rank"], 1);
  EXPECT_TRUE(j["ranks"][1]["breakdown_ms"].contains("collective_wait"));
  EXPECT_GT(j["ranks"][0]["breakdown_ms"]["collective_wait"].get<double>(), 17.9);
  EXPECT_EQ(j["findings"][0]["ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(j["findings"][0]["range"], "forward/block0/mlp");
  EXPECT_EQ(j["counters"][0]["name"], "embed.local_tokens");
  EXPECT_EQ(j["heatmap"]["values_ms"].size(), 2u);
  EXPECT_EQ(j["heatmap"]["values_ms"][0].size(), 10u);
  EXPECT_FALSE(j["step_detail"]["collectives"].empty());
  EXPECT_EQ(j["step_detail"]["collectives"][0]["ranks"].size(), 2u);
}

TEST(SkewAnalyzer, JsonMatchesTheSchema) {
  const fs::path dir = testing::fresh_temp_dir("skew-schema");
  FakeRunSpec spec = tp2_delay_spec(18.0, 3900, 196, "contiguous");
  spec.world_size = 4;
  testing::write_fake_run(dir, spec);
  fs::remove(format::event_stream_path(dir, 3));  // an absent rank must validate too
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok());
  nlohmann::json j = to_json(*report);
  auto violation = testing::schema_violation(j, "skew_report.schema.json");
  if (!violation) GTEST_SKIP() << "python3-jsonschema not installed; schema check skipped";
  EXPECT_EQ(*violation, "");
  j["findings"][0]["kind"] = "made_up";  // the check can fail
  EXPECT_NE(*testing::schema_violation(j, "skew_report.schema.json"), "");
}

}  // namespace
}  // namespace rankscope::analyzers
