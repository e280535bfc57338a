// hang_early_verdict_test.cpp — hangdoctor's verdict with no flags on hangs in the first steps and
// at start-up, before the probes learned much: a TP2 job whose rank 0 waits in an all_reduce that
// rank 1 never issued, written as two flight recorders by the format writer. The bound is the
// job's own (how far into the step the waiter got, its whole start-up, or the published step
// bound), never below the floor; a rank still inside that bound is not blamed.
#include <optional>

#include <gtest/gtest.h>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers::hang {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000 * kMs;
constexpr int64_t kStart = 1'700'000'000'000'000'000;  // both processes start here (one clock)

// Rank 0 waits in all_reduce #history on tp0 from forward/embed; rank 1 never issued it.
struct Scenario {
  int64_t now = 0;                     // both heartbeats: the snapshot's reference
  int history = 2;                     // all_reduces both completed before (forward/embed)
  int64_t waiter_step = 1;
  int64_t waiter_step_begin = 0;
  int64_t waiter_enqueue = 0;
  int64_t idle_step = 1;
  bool idle_in_step = true;            // rank 1's outermost range is `step` (else start-up)
  std::string idle_range = "forward/embed";
  int64_t idle_since = 0;              // rank 1 opened idle_range (its last activity)
  std::optional<format::BoundDesc> step_bound;  // published by both ranks
};

void write_rank(const std::filesystem::path& dir, int rank, const Scenario& s) {
  format::FlightIdentity id;
  id.rank = rank;
  id.world_size = 2;
  id.pid = 1000 + rank;
  id.host = "fakehost";
  id.run_id = "early";
  id.start_ns = kStart;
  auto w = format::FlightRecorderWriter::create(format::flight_recorder_path(dir, rank), id);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  auto& f = **w;
  f.set_clock(0, 1000);
  f.set_process_state(format::ProcessState::kRunning);
  f.register_comm("world", 2, rank);
  const int tp = f.register_comm("tp0", 2, rank);
  format::CollectiveDesc d;
  d.op = format::CollectiveOp::kAllReduceSum;
  d.dtype = format::DataType::kFloat32;
  d.count = 64;
  d.bytes = 256;
  for (int i = 0; i < s.history; ++i) {
    const int64_t t = kStart + 100 * kMs + i * 10 * kMs;
    const uint64_t seq = f.collective_enqueue(tp, d, 0, "forward/embed", t);
    f.collective_complete(tp, seq, t + kMs);
  }
  const int main = f.claim_thread_slot(2000 + rank, "main");
  if (rank == 0) {
    f.set_step(s.waiter_step, s.waiter_step_begin);
    f.push_range(main, "step", s.waiter_step_begin);
    f.push_range(main, "forward/embed", s.waiter_enqueue - kMs);
    f.collective_enqueue(tp, d, s.waiter_step, "forward/embed", s.waiter_enqueue);
  } else {
    if (s.idle_in_step) {
      f.set_step(s.idle_step, s.idle_since - 5 * kMs);
      f.push_range(main, "step", s.idle_since - 5 * kMs);
    } else {
      f.set_step(s.idle_step, 0);
    }
    f.push_range(main, s.idle_range, s.idle_since);
  }
  if (s.step_bound) f.write_bound(0, *s.step_bound);
  f.heartbeat(s.now);
}

Diagnosis diagnose_scenario(const Scenario& s) {
  const auto dir = testing::scratch("early");
  format::RunMetadata meta;
  meta.run_id = "early";
  meta.world_size = 2;
  meta.tp = 2;
  meta.groups = {{"world", {0, 1}}, {"tp0", {0, 1}}};
  meta.hosts = {"fakehost", "fakehost"};
  EXPECT_TRUE(format::write_run_metadata(dir, meta).ok());
  write_rank(dir, 0, s);
  write_rank(dir, 1, s);
  auto run = format::open_run_directory(dir);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  testing::FakeProcessTable processes;  // another host: liveness unknown, as for a remote job
  return diagnose(*run, processes);
}

// What the probe publishes for the step after start-up (step 0, init): its duration as the basis of
// a bound, with no training step learned. Init is no scale for a training step: hangdoctor skips it.
format::BoundDesc startup_step_bound(int64_t startup_ns) {
  format::BoundDesc b;
  b.kind = format::BoundKind::kStep;
  b.site = "step";
  b.samples = 0;
  b.warmup = 10;
  b.quantile_ns = startup_ns;
  b.bound_ns = 10 * startup_ns;
  b.quantile_permille = 1000;
  b.window = 64;
  return b;
}

// The first step: rank 1 stalls on entering forward/embed; rank 0 got there 20 ms into the step.
Scenario first_step(int64_t idle_for) {
  Scenario s;
  s.step_bound = startup_step_bound(5 * kS);
  s.waiter_step_begin = kStart + 1 * kS;
  s.waiter_enqueue = s.waiter_step_begin + 20 * kMs;
  s.idle_since = s.waiter_step_begin + 5 * kMs;
  s.now = s.idle_since + idle_for;
  return s;
}

TEST(EarlyVerdict, FirstStepStallIsCalledPastTheFloor) {
  const Diagnosis d = diagnose_scenario(first_step(3'200 * kMs));
  EXPECT_EQ(d.verdict, Verdict::kHang) << render_text(d);
  EXPECT_EQ(d.kind, Kind::kLaggingRank);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  ASSERT_TRUE(d.detection.has_value());
  EXPECT_EQ(d.detection->by, "peer_wait");
  EXPECT_EQ(d.detection->rank, 1);
  EXPECT_DOUBLE_EQ(d.detection->bound_s, 3.0);       // 10 x 20 ms is under the floor
  EXPECT_NEAR(d.detection->quantile_s, 0.020, 1e-9);  // how far into the step rank 0 got
  EXPECT_NEAR(d.detection->open_s, 3.2, 1e-9);
  EXPECT_NE(d.detection->basis.find("20.0 ms into the step, x3, floor 3 s"), std::string::npos) << d.detection->basis;
  EXPECT_NE(d.detection->what.find("rank 1 idle in forward/embed at step 1 while its peer waits in allreduce #2 on tp0"),
            std::string::npos)
      << d.detection->what;
  const std::string text = render_text(d);
  EXPECT_NE(text.find("Detected from its peers: "), std::string::npos) << text;
}

TEST(EarlyVerdict, FirstStepInsideTheFloorIsHealthy) {
  const Diagnosis d = diagnose_scenario(first_step(2'500 * kMs));
  EXPECT_EQ(d.verdict, Verdict::kHealthy) << render_text(d);
  EXPECT_FALSE(d.detection.has_value());
}

// Peers that only just entered the collective are not blocked yet, however idle the rank looks.
TEST(EarlyVerdict, PeersThatJustArrivedAreNotBlockedYet) {
  Scenario s = first_step(4 * kS);
  s.waiter_enqueue = s.now - 500 * kMs;
  const Diagnosis d = diagnose_scenario(s);
  EXPECT_EQ(d.verdict, Verdict::kHealthy) << render_text(d);
}

// A rank that keeps opening ranges is working, however long its peer has waited.
TEST(EarlyVerdict, ARankStillProgressingIsNotBlamed) {
  Scenario s = first_step(0);
  s.idle_since = s.waiter_enqueue + 3'500 * kMs;  // it opened a range just now
  s.now = s.idle_since + 500 * kMs;
  const Diagnosis d = diagnose_scenario(s);
  EXPECT_EQ(d.verdict, Verdict::kHealthy) << render_text(d);
}

// Step 0: rank 1 stalls in init/model; rank 0 finished start-up (0.8 s) and waits in step 1.
TEST(EarlyVerdict, StartupStallIsCalledPastTheFloor) {
  Scenario s;
  s.history = 0;
  s.idle_in_step = false;
  s.idle_step = 0;
  s.idle_range = "init/model";
  s.idle_since = kStart + 300 * kMs;
  s.waiter_step_begin = kStart + 780 * kMs;
  s.waiter_enqueue = kStart + 800 * kMs;
  s.now = s.waiter_enqueue + 3'100 * kMs;
  const Diagnosis d = diagnose_scenario(s);
  EXPECT_EQ(d.verdict, Verdict::kHang) << render_text(d);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  ASSERT_TRUE(d.detection.has_value());
  EXPECT_EQ(d.detection->by, "peer_wait");
  EXPECT_DOUBLE_EQ(d.detection->bound_s, 3.0);
  EXPECT_NEAR(d.detection->quantile_s, 0.8, 1e-9);
  EXPECT_NE(d.detection->basis.find("whole start-up took 0.80 s"), std::string::npos) << d.detection->basis;
}

// A slow start-up (8 s on the waiter: loading, first touch) widens the bound to 8 s: a rank 7.5 s
// into init/model is not blamed yet, one 8.5 s into it is.
TEST(EarlyVerdict, SlowStartupWidensTheBound) {
  Scenario s;
  s.history = 0;
  s.idle_in_step = false;
  s.idle_step = 0;
  s.idle_range = "init/model";
  s.idle_since = kStart + 4 * kS;
  s.waiter_step_begin = kStart + 7'990 * kMs;
  s.waiter_enqueue = kStart + 8 * kS;
  s.now = s.idle_since + 7'500 * kMs;
  Diagnosis d = diagnose_scenario(s);
  EXPECT_EQ(d.verdict, Verdict::kHealthy) << render_text(d);
  s.now = s.idle_since + 8'500 * kMs;
  d = diagnose_scenario(s);
  EXPECT_EQ(d.verdict, Verdict::kHang) << render_text(d);
  ASSERT_TRUE(d.detection.has_value());
  EXPECT_DOUBLE_EQ(d.detection->bound_s, 8.0);
}

// Later steps: the step bound the probes published (10 x the longest of two 1.5 s steps: 15 s)
// sets the peers' scale: 3 x 1.5 s = 4.5 s idle while every peer waits.
TEST(EarlyVerdict, PublishedStepBoundSetsTheScale) {
  Scenario s = first_step(4'200 * kMs);
  s.waiter_step = s.idle_step = 3;
  format::BoundDesc b = startup_step_bound(1'500 * kMs);
  b.samples = 2;
  s.step_bound = b;
  Diagnosis d = diagnose_scenario(s);
  EXPECT_EQ(d.verdict, Verdict::kHealthy) << render_text(d);
  s.now = s.idle_since + 4'700 * kMs;
  d = diagnose_scenario(s);
  EXPECT_EQ(d.verdict, Verdict::kHang) << render_text(d);
  ASSERT_TRUE(d.detection.has_value());
  EXPECT_EQ(d.detection->by, "peer_wait");
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_DOUBLE_EQ(d.detection->bound_s, 4.5);
  EXPECT_EQ(d.detection->basis, "rank 0's longest 1500.0 ms of 2 steps x3, floor 3 s");
}

// Once a rank's own step passes the bound its probe learned, that is the detection, with its basis.
TEST(EarlyVerdict, LearnedStepBoundStatesItsBasis) {
  Scenario s = first_step(6'100 * kMs);
  s.waiter_step = s.idle_step = 3;
  s.step_bound = startup_step_bound(600 * kMs);
  s.step_bound->samples = 2;  // 10 x the longest of two 600 ms steps: 6 s
  s.waiter_enqueue = s.now - 500 * kMs;  // the peer just arrived: the peers' rule does not apply yet
  const Diagnosis d = diagnose_scenario(s);
  EXPECT_EQ(d.verdict, Verdict::kHang) << render_text(d);
  ASSERT_TRUE(d.detection.has_value());
  EXPECT_EQ(d.detection->by, "learned_bound");
  EXPECT_EQ(d.detection->basis, "longest 600.0 ms of 2 steps");
  EXPECT_DOUBLE_EQ(d.detection->bound_s, 6.0);
}

}  // namespace
}  // namespace rankscope::analyzers::hang
