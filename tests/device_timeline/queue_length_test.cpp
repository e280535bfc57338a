// queue_length_test.cpp — the launch queue per stream (launched, not yet started: HTA's queue
// length) on a timeline whose answer is known by construction.
#include <gtest/gtest.h>

#include "kernels_fake_run.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"

namespace rankscope::testing {
namespace queue_length_test {

// Stream 7: four calls at 0, 1, 2, 3 µs; their kernels begin at 10, 20, 30, 40 (10 µs each).
// Length: 1 at 0, 2 at 1, 3 at 2, 4 at 3, 3 at 10, 2 at 20, 1 at 30, 0 at 40.
// Stream 9: an op whose recorded begin (99) precedes its call (100): it leaves the queue as it
// enters, never a negative length.
FakeRank queued() {
  FakeRank r;
  for (int i = 0; i < 4; ++i)
    r.ops.push_back(launched("k" + std::to_string(i), 7, 10.0 * (i + 1), 10.0 * (i + 2), i, i + 0.5));
  r.ops.push_back(launched("early", 9, 99, 105, 100, 101));
  return r;
}

TEST(KernelsQueueLength, MaximumTimeAtItAndMeanPerStream) {
  analyzers::KernelsOptions options;
  options.cuda_queue_limit = 3;
  auto report = analyze_fake_run("queue", {queued()}, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  const auto& queues = report->ranks[0].queues;
  ASSERT_EQ(queues.size(), 2u);
  const auto& q = queues[0];
  EXPECT_EQ(q.stream, 7u);
  EXPECT_EQ(q.launches, 4);
  EXPECT_EQ(q.max_length, 4);
  EXPECT_EQ(q.time_at_max_ns, 7'000) << "4 from 3 to 10 µs";
  EXPECT_EQ(q.time_at_limit_ns, 18'000) << "3 or more from 2 to 20 µs";
  EXPECT_DOUBLE_EQ(q.mean_length, 94.0 / 40.0);
  ASSERT_EQ(q.series.size(), 8u);
  EXPECT_EQ(q.series[3], std::make_pair(0.003, 4));
  EXPECT_EQ(q.series.back(), std::make_pair(0.040, 0));

  const auto& early = queues[1];
  EXPECT_EQ(early.stream, 9u);
  EXPECT_EQ(early.max_length, 0);
  for (const auto& [at, n] : early.series) EXPECT_GE(n, 0);
}

TEST(KernelsQueueLength, AShortSeriesKeepsThePeak) {
  analyzers::KernelsOptions options;
  options.queue_series_points = 4;
  auto report = analyze_fake_run("queue-series", {queued()}, options);
  ASSERT_TRUE(report.ok());
  const auto& series = report->ranks[0].queues[0].series;
  ASSERT_EQ(series.size(), 4u);
  int peak = 0;
  for (const auto& [at, n] : series) peak = std::max(peak, n);
  EXPECT_EQ(peak, 4);
  EXPECT_DOUBLE_EQ(series.front().first, 0.0);
}

}  // namespace queue_length_test
}  // namespace rankscope::testing
