// idle_test.cpp — GPU idle time by cause (HTA's host wait / kernel wait / other), per stream and
// for the device, and the host-bound rank, on timelines whose answer is known by construction.
#include <gtest/gtest.h>

#include "kernels_fake_run.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"

namespace rankscope::testing {
namespace idle_test {

// Stream 7, µs (threshold 30 µs):
//   k1 0-100 (launched 0)
//   k2 160-200, launched at 150, after k1 ended: gap 100-160 = 60 host wait
//   k3 210-300, launched at 110, before the gap began: gap 10 < 30 = kernel wait
//   k4 400-450, launched at 120: gap 100 = other
//   k5 460-470, launch not seen: gap 10 = kernel wait
//   k6 600-700, launch not seen: gap 130 = other
// Stream 8: s8 300-400 (launched 290), which fills stream 7's 300-400 gap on the device.
FakeRank mixed_causes() {
  FakeRank r;
  r.ops = {launched("k1", 7, 0, 100, 0, 5),       launched("k2", 7, 160, 200, 150, 155),
           launched("k3", 7, 210, 300, 110, 115), launched("k4", 7, 400, 450, 120, 125),
           unlaunched("k5", 7, 460, 470),         unlaunched("k6", 7, 600, 700),
           launched("s8", 8, 300, 400, 290, 295)};
  return r;
}

// Stream 7: 0-100; 300-400 launched at 250 (host wait 200); 420-500 launched at 410 (host wait 20).
FakeRank starved() {
  FakeRank r;
  r.ops = {launched("k1", 7, 0, 100, 0, 5), launched("k2", 7, 300, 400, 250, 255),
           launched("k3", 7, 420, 500, 410, 415)};
  return r;
}

TEST(KernelsIdle, GapsByCausePerStreamAndForTheDevice) {
  auto report = analyze_fake_run("idle", {mixed_causes(), starved()});
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  const auto& idle = report->ranks[0].idle;
  ASSERT_EQ(idle.streams.size(), 2u);
  const auto& s7 = idle.streams[0];
  EXPECT_EQ(s7.stream, 7u);
  EXPECT_EQ(s7.idle.host_wait_ns, 60'000);
  EXPECT_EQ(s7.idle.kernel_wait_ns, 20'000);
  EXPECT_EQ(s7.idle.other_ns, 230'000);
  EXPECT_EQ(s7.idle.gaps, 5);
  EXPECT_EQ(idle.streams[1].idle.total_ns(), 0) << "one op on stream 8: no gap";
  // The device is busy 300-400 on stream 8, so that gap of stream 7 is not device idle.
  EXPECT_EQ(idle.device.host_wait_ns, 60'000);
  EXPECT_EQ(idle.device.kernel_wait_ns, 20'000);
  EXPECT_EQ(idle.device.other_ns, 130'000);
  EXPECT_EQ(idle.span_ns, 700'000);
  EXPECT_FALSE(idle.host_bound) << "host wait 60 of 700 µs is under 10% of the span";

  const auto& starved_idle = report->ranks[1].idle;
  EXPECT_EQ(starved_idle.device.host_wait_ns, 220'000);
  EXPECT_EQ(starved_idle.device.total_ns(), 220'000);
  EXPECT_TRUE(starved_idle.host_bound);
  EXPECT_DOUBLE_EQ(starved_idle.host_wait_ms_per_step, 0.22);
  bool named = false;
  for (const auto& f : report->findings) {
    if (f.kind != "host_bound") continue;
    named = true;
    EXPECT_EQ(f.ranks, std::vector<int>{1});
    EXPECT_DOUBLE_EQ(f.cost_ms_per_step, 0.22);
    EXPECT_NE(f.text.find("rank 1 is host-bound"), std::string::npos) << f.text;
  }
  EXPECT_TRUE(named);
}

TEST(KernelsIdle, TheKernelWaitThresholdIsAnOption) {
  analyzers::KernelsOptions options;
  options.kernel_wait_threshold_ns = 5'000;  // the 10 µs gaps are now "other"
  auto report = analyze_fake_run("idle-threshold", {mixed_causes()}, options);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->ranks[0].idle.device.kernel_wait_ns, 0);
  EXPECT_EQ(report->ranks[0].idle.device.other_ns, 150'000);
}

// Steps 1 and 5 traced, 2-4 not: the time between them was not seen, so it is not idle time.
TEST(KernelsIdle, NoGapAcrossStepsThatWereNotTraced) {
  FakeRank r;
  r.ops = {launched("k1", 7, 0, 100, 0, 5, 1), launched("k2", 7, 150, 200, 120, 125, 1),
           launched("k3", 7, 4000, 4100, 3990, 3995, 5)};
  auto report = analyze_fake_run("idle-window", {r});
  ASSERT_TRUE(report.ok());
  const auto& idle = report->ranks[0].idle;
  EXPECT_EQ(idle.device.total_ns(), 50'000);
  EXPECT_EQ(idle.device.gaps, 1);
  EXPECT_EQ(idle.streams[0].idle.total_ns(), 50'000);
  EXPECT_EQ(idle.span_ns, 200'000 + 100'000);
  EXPECT_EQ(report->ranks[0].traced_steps, 2);
}

}  // namespace idle_test
}  // namespace rankscope::testing
