// headline_cause_test.cpp — the diff's first line names the deepest cause that carries most of the
// change, whatever the depth of the job's range tree: the framework's op leaves under a range of any
// depth, the job's own "block*/attn" ranges, and communication as a whole.
#include "headline_cause.h"

#include <gtest/gtest.h>

namespace rankscope::analyzers::diff_detail {
namespace {

DiffPart part(const std::string& name, double base, double now) { return {name, base, now, now - base, ""}; }

TEST(HeadlineCause, OneKindOfWorkUnderForwardAndBackwardBeatsTheLargestPart) {
  // Attention at two depths: an op leaf three ranges down in forward, directly under backward.
  RunParts a, b;
  a.range_compute = {{"forward", 8}, {"forward/model/attention", 2}, {"forward/model/attention/[attention]", 1.5},
                     {"forward/model/mlp/[matmul]", 4}, {"backward", 10}, {"backward/[attention]", 1}, {"backward/[matmul]", 8}};
  b.range_compute = {{"forward", 40}, {"forward/model/attention", 30}, {"forward/model/attention/[attention]", 28},
                     {"forward/model/mlp/[matmul]", 8}, {"backward", 110}, {"backward/[attention]", 80}, {"backward/[matmul]", 25}};
  const std::vector<DiffPart> parts = {part("compute in backward", 10, 110), part("compute in forward", 8, 40)};
  const HeadlineCause c = headline_cause(a, b, parts, 132, 0);
  EXPECT_EQ(c.name, "attention, backward and forward");
  EXPECT_DOUBLE_EQ(c.delta_ms, 79 + 26.5);
  EXPECT_NE(c.detail.find("80% of the +132.0 ms"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("backward/[attention] 1.0 ms -> 80.0 ms"), std::string::npos) << c.detail;
}

TEST(HeadlineCause, TheJobsOwnRangesGroupByTheirLastName) {
  // No op leaves: the probe's ranges, "block*/attn" under forward and backward.
  RunParts a, b;
  a.range_compute = {{"forward/block*/attn", 3}, {"forward/block*/mlp", 6}, {"backward/block*/attn", 6}, {"backward/block*/mlp", 12}};
  b.range_compute = {{"forward/block*/attn", 40}, {"forward/block*/mlp", 24}, {"backward/block*/attn", 80}, {"backward/block*/mlp", 48}};
  const std::vector<DiffPart> parts = {part("compute in backward", 18, 128), part("compute in forward", 9, 64)};
  const HeadlineCause c = headline_cause(a, b, parts, 165, 16);
  EXPECT_EQ(c.name, "attn, backward and forward");
  EXPECT_NE(c.detail.find("the sequence length predicts 16.0x"), std::string::npos) << c.detail;
}

TEST(HeadlineCause, APartStaysTheCauseWhenNoKindOfWorkCarriesNearlyAsMuch) {
  RunParts a, b;
  a.range_compute = {{"forward/[matmul]", 10}, {"forward/[norm]", 2}, {"backward/[matmul]", 20}};
  b.range_compute = {{"forward/[matmul]", 11}, {"forward/[norm]", 2.5}, {"backward/[matmul]", 21}};
  std::vector<DiffPart> parts = {part("idle (outside ranges and collectives)", 1, 30), part("compute in forward", 12, 13.5)};
  parts[0].cause = "more time in no range";
  const HeadlineCause c = headline_cause(a, b, parts, 30.5, 0);
  EXPECT_EQ(c.name, "idle (outside ranges and collectives)");
  EXPECT_EQ(c.detail, "more time in no range");
}

TEST(HeadlineCause, WaitAndTransferMovingTogetherAreCommunication) {
  RunParts a, b;
  std::vector<DiffPart> parts = {part("collective wait", 26, 54), part("collective transfer", 24, 47.5),
                                 part("compute in optimizer", 80, 95)};
  parts[1].cause = "16 collective sites a step instead of 1";
  const HeadlineCause c = headline_cause(a, b, parts, 66.5, 0);
  EXPECT_EQ(c.name, "communication");
  EXPECT_DOUBLE_EQ(c.delta_ms, 51.5);
  EXPECT_NE(c.detail.find("16 collective sites a step instead of 1"), std::string::npos) << c.detail;
}

TEST(HeadlineCause, APartThatShrankDoesNotExplainASlowerRun) {
  RunParts a, b;
  const std::vector<DiffPart> parts = {part("compute in backward", 40, 10), part("collective wait", 5, 20)};
  const HeadlineCause c = headline_cause(a, b, parts, -15, 0);
  EXPECT_EQ(c.name, "compute in backward");
  const HeadlineCause slower = headline_cause(a, b, parts, 5, 0);
  EXPECT_EQ(slower.name, "collective wait");
}

}  // namespace
}  // namespace rankscope::analyzers::diff_detail
