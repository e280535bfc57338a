// probe_learned_bounds_test.cpp — the fast hang detector: the robust quantile and its bound, the
// bounds published in the flight recorder, and a collective and a step running past their learned
// bound reported as suspected_hang (once each), long before the fixed timeout.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "../../probe/src/learned_bounds.h"
#include "probe_test_util.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/probe.h"

namespace rankscope::probe {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(DurationBound, WarmsUpThenTakesARobustQuantile) {
  BoundPolicy p;
  p.floor_s = 0.001;
  p.factor = 10;
  p.warmup = 5;
  DurationBound b(p);
  for (int i = 0; i < 4; ++i) b.add(2 * kMs);
  EXPECT_FALSE(b.armed());
  EXPECT_EQ(b.bound_ns(), 0);
  b.add(2 * kMs);
  EXPECT_TRUE(b.armed());
  EXPECT_EQ(b.quantile_ns(), 2 * kMs);
  EXPECT_EQ(b.bound_ns(), 20 * kMs);
  // One slow outlier among 64 does not move the p95; a lasting shift does.
  for (int i = 0; i < 58; ++i) b.add(2 * kMs);
  b.add(900 * kMs);
  EXPECT_EQ(b.quantile_ns(), 2 * kMs);
  for (int i = 0; i < 64; ++i) b.add(5 * kMs);
  EXPECT_EQ(b.quantile_ns(), 5 * kMs);
  EXPECT_EQ(b.bound_ns(), 50 * kMs);
}

TEST(DurationBound, NeverBelowTheFloor) {
  BoundPolicy p;
  p.floor_s = 3;
  p.warmup = 1;
  DurationBound b(p);
  b.add(1 * kMs);
  EXPECT_EQ(b.bound_ns(), 3'000 * kMs);
}

format::FlightRecorderSnapshot wait_for(const std::filesystem::path& dir, format::WatchdogKind kind, uint32_t events,
                                        double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  format::FlightRecorderSnapshot last;
  while (std::chrono::steady_clock::now() < end) {
    auto fr = format::read_flight_recorder(format::flight_recorder_path(dir, 0));
    if (fr.ok()) {
      last = *fr;
      if (fr->watchdog.kind == kind && fr->watchdog.event_count >= events) return last;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return last;
}

TEST(ProbeLearnedBounds, StuckCollectiveAndStepAreSuspectedBeforeTheTimeout) {
  testing::ScratchDir dir;
  Options o = testing::test_options(dir.path());
  o.watchdog_timeout_s = 300;  // the ceiling, far away
  o.watchdog_poll_s = 0.02;
  o.watchdog_stacks = false;
  o.hang_floor_s = 0.3;
  o.hang_warmup = 5;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Probe& probe = **created;
  CommHandle tp = probe.register_comm("tp0", 2, 0);
  format::CollectiveDesc d;
  d.op = format::CollectiveOp::kAllReduceSum;
  d.dtype = format::DataType::kFloat32;
  d.count = 16;
  d.bytes = 64;
  for (int step = 0; step < 8; ++step) {
    probe.begin_step(step);
    probe.push_range("step");
    probe.push_range("forward/embed");
    CollectiveHandle h = probe.collective_enqueue(tp, d);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    probe.collective_complete(h);
    probe.pop_range();
    probe.pop_range();
    probe.end_step();
    std::this_thread::sleep_for(std::chrono::milliseconds(25));  // let the watchdog learn each step
  }
  // The watchdog learns on its own tick: wait (generously, the machine may be loaded) until it has.
  Result<format::FlightRecorderSnapshot> fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  for (int i = 0; i < 500; ++i) {
    fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
    ASSERT_TRUE(fr.ok());
    const auto* s = fr->bound(format::BoundKind::kCollective, "tp0", "forward/embed");
    const auto* st = fr->bound(format::BoundKind::kStep);
    if (s && s->samples == 8 && st && st->samples == 7) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto* site = fr->bound(format::BoundKind::kCollective, "tp0", "forward/embed");
  ASSERT_NE(site, nullptr);
  EXPECT_TRUE(site->armed());
  EXPECT_EQ(site->samples, 8u);
  EXPECT_EQ(site->bound_ns, 300 * kMs);  // 10 x ~2 ms is under the floor
  EXPECT_GE(site->quantile_ns, 2 * kMs);
  const auto* step = fr->bound(format::BoundKind::kStep);
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->samples, 7u);  // steps 1..7: the first step is not learned
  EXPECT_TRUE(step->armed());
  EXPECT_EQ(fr->watchdog.kind, format::WatchdogKind::kNone);

  // Now the collective never completes.
  const auto t0 = std::chrono::steady_clock::now();
  probe.begin_step(8);
  probe.push_range("step");
  probe.push_range("forward/embed");
  CollectiveHandle stuck = probe.collective_enqueue(tp, d);
  auto seen = wait_for(dir.path(), format::WatchdogKind::kSuspectedHang, 1, 10);
  const double after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(seen.watchdog.kind, format::WatchdogKind::kSuspectedHang) << seen.watchdog.message;
  EXPECT_EQ(seen.watchdog.comm_seq, stuck.seq);
  EXPECT_NE(seen.watchdog.message.find("called from 'forward/embed'"), std::string::npos) << seen.watchdog.message;
  EXPECT_NE(seen.watchdog.message.find("past its learned bound 0.300 s"), std::string::npos) << seen.watchdog.message;
  EXPECT_GE(after_s, 0.3);
  std::printf("suspected %.3f s after the collective began (bound 0.3 s)\n", after_s);
  // Reported once: the step (long only because of it) is not reported on top.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  EXPECT_EQ(fr->watchdog.event_count, 1u);
  probe.collective_complete(stuck);
  probe.pop_range();
  probe.pop_range();
  probe.end_step();

  // A step stuck in compute, no collective open: the step bound.
  probe.begin_step(9);
  probe.push_range("step");
  probe.push_range("forward/block0/mlp");
  seen = wait_for(dir.path(), format::WatchdogKind::kSuspectedHang, 2, 10);
  EXPECT_EQ(seen.watchdog.event_count, 2u);
  EXPECT_EQ(seen.watchdog.comm_index, -1);
  EXPECT_NE(seen.watchdog.message.find("step 9 (innermost range 'forward/block0/mlp')"), std::string::npos)
      << seen.watchdog.message;
  probe.pop_range();
  probe.pop_range();
  probe.end_step();
}

TEST(ProbeLearnedBounds, OffMeansNoBoundsAndNoSuspicion) {
  testing::ScratchDir dir;
  Options o = testing::test_options(dir.path());
  o.watchdog_poll_s = 0.02;
  o.learned_bounds = false;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok());
  Probe& probe = **created;
  for (int step = 0; step < 4; ++step) {
    probe.begin_step(step);
    probe.end_step();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  ASSERT_TRUE(fr.ok());
  EXPECT_TRUE(fr->bounds.empty());
}

}  // namespace
}  // namespace rankscope::probe
