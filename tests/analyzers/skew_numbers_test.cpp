// skew_numbers_test.cpp — step numbers from an event stream are distrusted: a run whose steps span
// 0 to INT64_MAX gives a report with the span held at INT64_MAX and a heatmap of a few bins, no
// wrapped step count or label (analyzers/skew/src/heatmap.cpp, format/saturating.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/format/event_stream.h"
#include "skew_fake_run.h"

namespace rankscope::analyzers {
namespace {

namespace fs = std::filesystem;

TEST(SkewNumbers, StepsSpanningInt64AreHeldNotWrapped) {
  const fs::path dir = testing::fresh_temp_dir("skew-steps-span");
  auto w = testing::one_rank_run(dir, "span", 0);
  const uint32_t fwd = w->intern(format::NameKind::kRange, "forward");
  for (const int64_t n : {int64_t(0), int64_t(1), INT64_MAX - 1, INT64_MAX}) {
    format::StepRecord step;
    step.step = n;
    step.begin_ns = 1'000'000'000 + (n % 1000) * 20'000'000;
    step.end_ns = step.begin_ns + 10'000'000;
    step.ranges.push_back({fwd, 1, 2'000'000, 0});
    w->write_step(step);
  }
  ASSERT_TRUE(w->flush().ok());
  w.reset();
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->first_step, 0);
  EXPECT_EQ(report->last_step, INT64_MAX);
  EXPECT_EQ(report->steps, INT64_MAX);  // INT64_MAX + 1, held
  const Heatmap& h = report->heatmap;
  ASSERT_FALSE(h.step_labels.empty());
  EXPECT_LE(h.step_labels.size(), 1000u);
  EXPECT_EQ(h.step_labels.front().rfind("0-", 0), 0u) << h.step_labels.front();
  for (const auto& label : h.step_labels) EXPECT_NE(label.front(), '-') << label;  // no wrapped, negative step
  EXPECT_NE(h.step_labels.back().find("9223372036854775807"), std::string::npos) << h.step_labels.back();
  // Every step fell in a bin: the first and the last bins hold a time.
  ASSERT_EQ(h.values_ms.size(), 1u);
  EXPECT_FALSE(std::isnan(h.values_ms[0].front()));
  EXPECT_FALSE(std::isnan(h.values_ms[0].back()));
  (void)to_json(*report).dump();
}

TEST(SkewNumbers, ACollectiveIsOneSiteWhicheverRangeItStartsIn) {
  // DDP's first all-reduce of a step starts inside `backward` in some steps and inside a deeper
  // range in others: it is the same collective (group, op, order in the step), one site, named by
  // the range it starts in most often.
  const fs::path dir = testing::fresh_temp_dir("skew-site-identity");
  auto w = testing::one_rank_run(dir, "sites", 0);
  const uint32_t backward = w->intern(format::NameKind::kRange, "backward");
  const uint32_t inner = w->intern(format::NameKind::kRange, "backward/layer0");
  const uint32_t dp = w->intern(format::NameKind::kComm, "dp0");
  for (int64_t n = 1; n <= 6; ++n) {
    format::StepRecord step;
    step.step = n;
    step.begin_ns = 1'000'000'000 + n * 20'000'000;
    step.end_ns = step.begin_ns + 10'000'000;
    step.ranges.push_back({backward, 1, 8'000'000, 0});
    step.ranges.push_back({inner, 1, 2'000'000, 0});
    for (uint64_t k = 0; k < 2; ++k) {
      format::CollectiveEvent c{};
      c.comm_id = dp;
      c.op = uint8_t(format::CollectiveOp::kAllReduceSum);
      c.state = uint8_t(format::CollectiveState::kCompleted);
      c.range_id = k == 0 && n % 3 == 0 ? inner : backward;
      c.seq = uint64_t(2 * n) + k;
      c.bytes = 1 << 20;
      c.enqueue_ns = c.start_ns = step.begin_ns + 3'000'000 + int64_t(k) * 3'000'000;
      c.end_ns = c.enqueue_ns + 1'000'000;
      step.collectives.push_back(c);
    }
    w->write_step(step);
  }
  ASSERT_TRUE(w->flush().ok());
  w.reset();
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_EQ(report->collectives.size(), 2u);
  for (const CollectiveSite& site : report->collectives) {
    EXPECT_EQ(site.instances, 6) << "site " << site.ordinal;
    EXPECT_EQ(site.range, "backward") << "site " << site.ordinal;
  }
}

TEST(SkewNumbers, ACollectivesRateIsItsBytesOverTheTimeAfterTheLastArrival) {
  // 8 ranks in TP groups of 4; rank 1 is 3 ms late into every forward MLP all-reduce. Its peers wait
  // there, but the transfer after the last arrival is the scripted 0.2 ms (TP) or 0.5 ms (DP): the
  // rate is 4096 B over that, never over the wait, and an all-reduce's bus rate is 2(n-1)/n of it.
  const fs::path dir = testing::fresh_temp_dir("skew-bandwidth");
  testing::FakeRunSpec spec;
  spec.world_size = 8;
  spec.tp = 4;
  spec.steps = 6;
  spec.script = testing::standard_step(1, [](int r, int64_t) { return r == 1 ? 3.0 : 0.0; });
  testing::write_fake_run(dir, spec);
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->collectives.empty());
  for (const CollectiveSite& site : report->collectives) {
    const bool tp = site.comm.rfind("tp", 0) == 0;
    const double n = tp ? 4 : 2, transfer = tp ? 0.2 : 0.5;
    EXPECT_NEAR(site.transfer_ms, transfer, 1e-3) << site.comm << " #" << site.ordinal;
    EXPECT_NEAR(site.algbw_gbps, 4096 / (transfer * 1e6), 1e-6) << site.comm;
    EXPECT_NEAR(site.busbw_gbps, site.algbw_gbps * 2 * (n - 1) / n, 1e-6) << site.comm;
  }
  ASSERT_EQ(report->groups.size(), 6u);  // tp0 tp1 dp0..dp3
  for (const GroupBandwidth& g : report->groups) {
    const bool tp = g.comm.rfind("tp", 0) == 0;
    const double calls = tp ? 5 : 1;  // TP: forward embed, attn, mlp; backward mlp, attn. DP: grad_sync
    EXPECT_EQ(g.ranks, tp ? 4 : 2) << g.comm;
    EXPECT_NEAR(g.calls_per_step, calls, 1e-9) << g.comm;
    EXPECT_NEAR(g.bytes_per_step, 4096 * calls, 1e-6) << g.comm;
    EXPECT_NEAR(g.transfer_ms_per_step, (tp ? 0.2 : 0.5) * calls, 1e-3) << g.comm;
    EXPECT_NEAR(g.algbw_gbps, 4096 / ((tp ? 0.2 : 0.5) * 1e6), 1e-6) << g.comm;
  }
  if (auto why = testing::schema_violation(to_json(*report), "skew_report.schema.json")) EXPECT_EQ(*why, "");
}

}  // namespace
}  // namespace rankscope::analyzers
