// fixture_compat_test.cpp — every supported schema version's checked-in run directory still reads.
// tests/fixtures/format/v1 was written by make_format_fixture at schema version 1 of all three files.
#include <gtest/gtest.h>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::format {
namespace {

const std::filesystem::path kV1 = std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/format/v1";

TEST(FixtureCompat, V1RunDirectoryReads) {
  auto run = open_run_directory(kV1);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_TRUE(run->problems.empty()) << run->problems.front();
  ASSERT_EQ(run->world_size, 2);
  ASSERT_TRUE(run->metadata.has_value());
  EXPECT_EQ(run->metadata->tp, 2);
  const auto& r0 = *run->ranks[0].flight;
  const auto& r1 = *run->ranks[1].flight;
  EXPECT_EQ(r0.pid, 1000);
  EXPECT_EQ(r1.host, "fixture-host");
  // Rank 0 waits in tp0 allreduce #1; rank 1 never entered it and sits in forward/embed.
  ASSERT_NE(r0.comm("tp0"), nullptr);
  EXPECT_EQ(r0.comm("tp0")->next_seq, 2u);
  EXPECT_EQ(r0.comm("tp0")->last()->state, CollectiveState::kEnqueued);
  EXPECT_EQ(r1.comm("tp0")->next_seq, 1u);
  ASSERT_EQ(r1.main_thread()->stack.size(), 2u);
  EXPECT_EQ(r1.main_thread()->stack[1].name, "forward/embed");
  EXPECT_EQ(r0.params[0].name, "wte.weight");
  // Written before the learned-bounds section existed: none, and no warning.
  EXPECT_TRUE(r0.bounds.empty());
  EXPECT_TRUE(r0.warnings.empty());
}

TEST(FixtureCompat, V1EventStreamReads) {
  for (int rank = 0; rank < 2; ++rank) {
    auto s = read_event_stream(kV1 / (rank == 0 ? "rank00000.events" : "rank00001.events"));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    ASSERT_EQ(s->steps.size(), 1u);
    ASSERT_EQ(s->steps[0].counters.size(), 1u);
    EXPECT_EQ(s->steps[0].counters[0].value, rank == 0 ? 3942.0 : 154.0);
    EXPECT_EQ(s->name(s->steps[0].collectives[0].comm_id), "tp0");
  }
}

}  // namespace
}  // namespace rankscope::format
