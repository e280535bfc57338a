// nccl_plugin_events_test.cpp — steps rebuilt from collective rings (format/src/nccl_plugin_events.h).
//
// Rings are built by hand: a DDP-like rank whose world communicator runs three bucket all-reduces per
// iteration (100, 100 and 24 bytes) after a pause (optimizer, data), and a tp communicator with two
// collectives per iteration whose ring has wrapped. The rebuilt stream is read back like a file.
#include <gtest/gtest.h>

#include "nccl_plugin_events.h"
#include "rankscope/format/event_stream.h"

namespace rankscope::format {
namespace {

constexpr int64_t kMs = 1'000'000;

CollectiveSnapshot record(uint64_t seq, CollectiveOp op, uint64_t bytes, int64_t enqueue, int64_t duration) {
  CollectiveSnapshot c;
  c.seq = seq;
  c.op = op;
  c.bytes = bytes;
  c.state = CollectiveState::kCompleted;
  c.enqueue_ns = enqueue;
  c.start_ns = enqueue;
  c.end_ns = enqueue + duration;
  return c;
}

// `iterations` iterations starting at t0; the world ring keeps everything, tp's only its last `tp_kept`.
FlightRecorderSnapshot ddp_rank(int iterations, int first_iteration_seq_offset, size_t tp_kept) {
  FlightRecorderSnapshot f;
  f.rank = 0;
  f.start_ns = 1;
  CommSnapshot world, tp;
  world.name = "world";
  world.size = 4;
  tp.name = "tp0";
  tp.size = 2;
  // A broadcast at init (seq 0) shifts the world's pattern by `first_iteration_seq_offset`.
  int64_t t = 1000 * kMs;
  uint64_t wseq = 0, tseq = 0;
  for (int k = 0; k < first_iteration_seq_offset; ++k) world.ring.push_back(record(wseq++, CollectiveOp::kBroadcast, 7, t += kMs, kMs));
  for (int i = 0; i < iterations; ++i) {
    t += 50 * kMs;  // the pause between iterations: forward, optimizer, data
    tp.ring.push_back(record(tseq++, CollectiveOp::kAllReduce, 4096, t, 2 * kMs));
    tp.ring.push_back(record(tseq++, CollectiveOp::kAllGather, 2048, t + 3 * kMs, 2 * kMs));
    t += 10 * kMs;
    for (uint64_t bytes : {100u, 100u, 24u}) {
      world.ring.push_back(record(wseq++, CollectiveOp::kAllReduce, bytes, t, 3 * kMs));
      t += 4 * kMs;  // backward between buckets: shorter than the pause
    }
  }
  if (tp.ring.size() > tp_kept) tp.ring.erase(tp.ring.begin(), tp.ring.end() - long(tp_kept));
  f.comms = {world, tp};
  return f;
}

struct Steps : EventStreamVisitor {
  std::vector<StepRecord> steps;
  std::vector<std::string> names = {""};
  void on_name(uint32_t id, NameKind, std::string_view n) override {
    names.resize(std::max<size_t>(names.size(), id + 1));
    names[id] = std::string(n);
  }
  void on_step(const StepRecord& s) override { steps.push_back(s); }
};

Steps read(const RebuiltEvents& e) {
  Steps v;
  auto scan = scan_event_stream_bytes(e.bytes, "rebuilt", v);
  EXPECT_TRUE(scan.ok()) << scan.status().message();
  return v;
}

TEST(NcclPluginEvents, PeriodIsTheBucketPatternAndStepsStartAfterThePause) {
  const RebuiltEvents e = rebuild_events_from_rings(ddp_rank(8, 1, 1000), 4);
  EXPECT_EQ(e.anchor, "world");
  EXPECT_EQ(e.period, 3);
  const Steps v = read(e);
  // 8 iterations: 7 whole steps between the first bucket of each (the last is unfinished).
  ASSERT_EQ(v.steps.size(), 7u);
  EXPECT_EQ(e.steps, 7);
  for (size_t k = 0; k < v.steps.size(); ++k) {
    const StepRecord& s = v.steps[k];
    EXPECT_EQ(s.step, int64_t(k)) << "seq 1 + 3k opens step k: the broadcast at seq 0 is not one";
    // Each step: 3 world buckets of its iteration, then the next iteration's 2 tp collectives.
    ASSERT_EQ(s.collectives.size(), 5u) << "step " << s.step;
    EXPECT_EQ(v.names[s.collectives.front().comm_id], "world");
    EXPECT_EQ(s.collectives.front().bytes, 100u);
    EXPECT_EQ(s.collectives.front().seq, 1 + 3 * k);
    EXPECT_EQ(s.end_ns - s.begin_ns, 12 * kMs + 50 * kMs + 10 * kMs);
  }
}

TEST(NcclPluginEvents, StepsOlderThanAWrappedRingAreLeftOut) {
  // tp keeps its last 6 records (iterations 5-7): steps 0-4 begin before its oldest record, step 7 is
  // unfinished; steps 5 and 6 are whole.
  const Steps v = read(rebuild_events_from_rings(ddp_rank(8, 0, 6), 4));
  ASSERT_EQ(v.steps.size(), 2u);
  EXPECT_EQ(v.steps[0].step, 5);
  EXPECT_EQ(v.steps[1].step, 6);
  for (const auto& s : v.steps) EXPECT_EQ(s.collectives.size(), 5u) << "step " << s.step;
}

TEST(NcclPluginEvents, TooFewRecordsRebuildNoStep) {
  const RebuiltEvents e = rebuild_events_from_rings(ddp_rank(1, 0, 1000), 4);
  EXPECT_EQ(e.period, 0) << "three buckets are not two periods of anything but... one of them";
  EXPECT_EQ(e.steps, 0);
  EXPECT_TRUE(read(e).steps.empty());
  EXPECT_EQ(rebuild_events_from_rings(FlightRecorderSnapshot{}, 1).steps, 0);
}

}  // namespace
}  // namespace rankscope::format
