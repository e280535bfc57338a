// skew_straggler_class_test.cpp — the class of a slow rank's finding, on fabricated runs where the
// answer is known: every range of rank 1 takes 1.9x (a shared core), one range of rank 1 takes 20
// ms more (code). (The communication class needs per-rank transfer times that a lock-step
// fabricated run cannot give: every member of a collective finishes together there.)
#include <gtest/gtest.h>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "skew_fake_run.h"

namespace rankscope::analyzers {
namespace {

namespace fs = std::filesystem;

// TP2 x DP2, 12 steps of the standard step; `shape` rewrites each op of rank 1.
SkewReport analyze(const std::string& tag, const std::function<void(testing::FakeOp&)>& shape) {
  testing::FakeRunSpec spec;
  spec.world_size = 4;
  spec.tp = 2;
  spec.steps = 12;
  spec.script = testing::standard_step(2, nullptr);
  for (auto& op : spec.script) shape(op);
  const fs::path dir = testing::fresh_temp_dir(tag);
  testing::write_fake_run(dir, spec);
  auto report = analyze_skew(dir);
  EXPECT_TRUE(report.ok()) << report.status().to_string();
  return report.ok() ? *report : SkewReport{};
}

const Finding* top_on_rank(const SkewReport& r, int rank) {
  for (const auto& f : r.findings)
    if ((f.kind == "late_arrival" || f.kind == "straggler") && f.ranks.front() == rank) return &f;
  return nullptr;
}

TEST(StragglerClass, EveryRangeSlowerByOneFactorIsAUniformSlowdown) {
  const SkewReport r = analyze("class-uniform", [](testing::FakeOp& op) {
    if (op.kind != testing::FakeOp::kCompute) return;
    op.ms = [orig = op.ms](int rank, int64_t step) { return orig(rank, step) * (rank == 1 ? 1.9 : 1.0); };
  });
  const Finding* f = top_on_rank(r, 1);
  ASSERT_NE(f, nullptr) << (r.findings.empty() ? "no findings" : r.findings.front().text);
  EXPECT_EQ(f->cls, "uniform_slowdown") << f->text;
  EXPECT_NEAR(f->slowdown_factor, 1.9, 0.2) << f->text;
  EXPECT_NE(f->text.find("host or device"), std::string::npos) << f->text;
  // The whole rank is slower: no range is named as the cause, in JSON or in the text.
  EXPECT_EQ(f->range, "") << f->text;
}

TEST(StragglerClass, OneSlowRangeIsRangeSpecificAndNamed) {
  testing::FakeRunSpec spec;
  spec.world_size = 4;
  spec.tp = 2;
  spec.steps = 12;
  spec.script = testing::standard_step(2, [](int rank, int64_t) { return rank == 1 ? 20.0 : 0.0; });
  const fs::path dir = testing::fresh_temp_dir("class-range2");
  testing::write_fake_run(dir, spec);
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok());
  const Finding* f = top_on_rank(*report, 1);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->cls, "range_specific") << f->text;
  EXPECT_EQ(f->range, "forward/block0/mlp") << f->text;
}

}  // namespace
}  // namespace rankscope::analyzers
