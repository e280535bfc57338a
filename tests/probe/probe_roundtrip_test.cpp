// probe_roundtrip_test.cpp — what the probe writes reads back through the format library:
// steps, range aggregates, collectives, counters, the capture window, gradients, the flight recorder.
#include <chrono>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/probe.h"

namespace rankscope::probe {
namespace {

using testing::ScratchDir;
using testing::test_options;

void spin_for(std::chrono::microseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

const format::RangeAggregate* find_range(const format::EventStream& es, const format::StepRecord& step,
                                         std::string_view name) {
  for (const auto& r : step.ranges)
    if (es.name(r.name_id) == name) return &r;
  return nullptr;
}

format::CollectiveDesc allreduce(uint64_t count) {
  format::CollectiveDesc d;
  d.op = format::CollectiveOp::kAllReduceSum;
  d.dtype = format::DataType::kFloat32;
  d.count = count;
  d.bytes = count * 4;
  return d;
}

TEST(ProbeRoundTrip, StepsRangesCollectivesAndCountersReadBack) {
  ScratchDir dir;
  Options o = test_options(dir.path(), /*rank=*/2, /*world=*/4);
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Probe& probe = **created;
  EXPECT_TRUE(probe.enabled());
  EXPECT_EQ(probe.rank(), 2);

  CommHandle world = probe.register_comm("world", 4, 2);
  CommHandle dp = probe.register_comm("dp0", 2, 1);
  ASSERT_TRUE(world.valid());
  ASSERT_TRUE(dp.valid());

  for (int64_t step = 0; step < 3; ++step) {
    probe.begin_step(step);
    {
      ScopedRange s(&probe, "step");
      for (int layer = 0; layer < 2; ++layer) {
        ScopedRange f(&probe, "forward/block");
        spin_for(std::chrono::microseconds(200));
      }
      {
        ScopedRange g(&probe, "grad_sync");
        CollectiveHandle h = probe.collective_enqueue(dp, allreduce(1000));
        probe.collective_start(h);
        probe.collective_complete(h);
        CollectiveHandle w = probe.collective_enqueue(world, allreduce(1));
        probe.collective_complete(w);
      }
      probe.counter("embed.local_tokens", 100.0 + static_cast<double>(step));
      probe.counter_add("loader.batches", 1);
      probe.counter_add("loader.batches", 2);
    }
    probe.end_step();
  }
  probe.shutdown();

  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 2));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  EXPECT_TRUE(es->scan.ended);
  EXPECT_FALSE(es->scan.truncated_tail);
  EXPECT_EQ(es->scan.header.rank, 2);
  EXPECT_EQ(es->scan.header.world_size, 4);
  ASSERT_EQ(es->steps.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    const format::StepRecord& step = es->steps[static_cast<size_t>(i)];
    EXPECT_EQ(step.step, i);
    EXPECT_LT(step.begin_ns, step.end_ns);
    const auto* fwd = find_range(*es, step, "forward/block");
    ASSERT_NE(fwd, nullptr);
    EXPECT_EQ(fwd->count, 2u);
    EXPECT_GE(fwd->total_ns, 2 * 200'000);
    const auto* whole = find_range(*es, step, "step");
    ASSERT_NE(whole, nullptr);
    EXPECT_EQ(whole->count, 1u);
    EXPECT_GE(whole->total_ns, fwd->total_ns);
    EXPECT_LE(whole->total_ns, step.end_ns - step.begin_ns);

    ASSERT_EQ(step.collectives.size(), 2u);
    const format::CollectiveEvent& c = step.collectives[0];
    EXPECT_EQ(es->name(c.comm_id), "dp0");
    EXPECT_EQ(c.seq, static_cast<uint64_t>(i));  // per-communicator numbering
    EXPECT_EQ(c.op, static_cast<uint8_t>(format::CollectiveOp::kAllReduceSum));
    EXPECT_EQ(c.state, static_cast<uint8_t>(format::CollectiveState::kCompleted));
    EXPECT_EQ(c.bytes, 4000u);
    EXPECT_EQ(es->name(c.range_id), "grad_sync");
    EXPECT_LE(c.enqueue_ns, c.start_ns);
    EXPECT_LE(c.start_ns, c.end_ns);
    const format::CollectiveEvent& w = step.collectives[1];
    EXPECT_EQ(es->name(w.comm_id), "world");
    EXPECT_EQ(w.start_ns, w.enqueue_ns);  // never started separately: a blocking CPU collective

    std::map<std::string, double> counters;
    for (const auto& cv : step.counters) counters[std::string(es->name(cv.name_id))] = cv.value;
    EXPECT_DOUBLE_EQ(counters["embed.local_tokens"], 100.0 + static_cast<double>(i));
    EXPECT_DOUBLE_EQ(counters["loader.batches"], 3.0);
  }
  EXPECT_TRUE(es->traces.empty());  // no capture window asked for

  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 2));
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  EXPECT_EQ(fr->rank, 2);
  EXPECT_EQ(fr->world_size, 4);
  EXPECT_EQ(fr->run_id, "test-run");
  EXPECT_EQ(fr->live.process_state, format::ProcessState::kFinished);
  EXPECT_EQ(fr->live.step, 2);
  EXPECT_EQ(fr->live.collectives_issued, 6u);
  EXPECT_EQ(fr->live.collectives_completed, 6u);
  const format::CommSnapshot* dp0 = fr->comm("dp0");
  ASSERT_NE(dp0, nullptr);
  EXPECT_EQ(dp0->size, 2);
  EXPECT_EQ(dp0->rank_in_comm, 1);
  EXPECT_EQ(dp0->next_seq, 3u);
  ASSERT_NE(dp0->last(), nullptr);
  EXPECT_EQ(dp0->last()->range, "grad_sync");
  EXPECT_EQ(dp0->last()->state, format::CollectiveState::kCompleted);
  ASSERT_NE(fr->main_thread(), nullptr);
  EXPECT_EQ(fr->main_thread()->name, "main");
  EXPECT_EQ(fr->main_thread()->depth, 0u);
}

TEST(ProbeRoundTrip, CaptureWindowKeepsEveryRangeInstanceAndGradientArrival) {
  ScratchDir dir;
  Options o = test_options(dir.path());
  o.trace_step_begin = 1;
  o.trace_step_end = 1;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Probe& probe = **created;
  ParamHandle wte = probe.register_param("wte", 1000, 0);
  ParamHandle ln = probe.register_param("ln_f.weight", 10, 1);

  for (int64_t step = 0; step < 3; ++step) {
    probe.begin_step(step);
    {
      ScopedRange s(&probe, "step");
      { ScopedRange a(&probe, "forward/head"); }
      probe.begin_backward();
      {
        ScopedRange b(&probe, "backward/head");
        probe.grad_ready(ln);
        probe.grad_ready(wte);
      }
      probe.end_backward();
    }
    probe.end_step();
  }
  probe.shutdown();

  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  ASSERT_EQ(es->traces.size(), 1u);
  const auto& trace = es->traces[0];
  EXPECT_EQ(trace.step, 1);
  ASSERT_EQ(trace.ranges.size(), 3u);
  std::map<std::string, format::TraceRange> by_name;
  for (const auto& r : trace.ranges) by_name[std::string(es->name(r.name_id))] = r;
  ASSERT_TRUE(by_name.count("step") && by_name.count("forward/head") && by_name.count("backward/head"));
  EXPECT_EQ(by_name["step"].depth, 0u);
  EXPECT_EQ(by_name["forward/head"].depth, 1u);
  EXPECT_LE(by_name["step"].begin_ns, by_name["forward/head"].begin_ns);
  EXPECT_GE(by_name["step"].end_ns, by_name["backward/head"].end_ns);

  ASSERT_EQ(es->grads.size(), 1u);
  EXPECT_EQ(es->grads[0].step, 1);
  ASSERT_EQ(es->grads[0].arrivals.size(), 2u);
  EXPECT_EQ(es->name(es->grads[0].arrivals[0].param_id), "ln_f.weight");
  EXPECT_EQ(es->grads[0].arrivals[0].bucket, 1);
  EXPECT_EQ(es->name(es->grads[0].arrivals[1].param_id), "wte");
  EXPECT_LE(es->grads[0].arrivals[0].arrived_ns, es->grads[0].arrivals[1].arrived_ns);

  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  ASSERT_EQ(fr->params.size(), 2u);
  EXPECT_EQ(fr->grad.backward_step, 2);
  EXPECT_EQ(fr->grad.n_arrived, 2u);
  EXPECT_FALSE(fr->grad.in_backward);
  EXPECT_TRUE(fr->missing_gradients().empty());
}

TEST(ProbeRoundTrip, MissingGradientsAreVisibleDuringBackward) {
  ScratchDir dir;
  auto created = Probe::create(test_options(dir.path()));
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Probe& probe = **created;
  ParamHandle a = probe.register_param("h.0.mlp.c_fc.weight", 100);
  probe.register_param("h.0.attn.c_attn.weight", 100);
  probe.begin_step(4);
  probe.begin_backward();
  probe.grad_ready(a);

  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  EXPECT_TRUE(fr->grad.in_backward);
  EXPECT_EQ(fr->grad.backward_step, 4);
  auto missing = fr->missing_gradients();
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->name, "h.0.attn.c_attn.weight");
}

TEST(ProbeRoundTrip, RangesFromSeveralThreadsGetTheirOwnSlots) {
  ScratchDir dir;
  Options o = test_options(dir.path());
  o.trace_step_begin = 0;
  o.trace_step_end = 0;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Probe& probe = **created;
  probe.begin_step(0);
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&probe] {
      for (int i = 0; i < 10; ++i) {
        ScopedRange outer(&probe, "loader/decode");
        ScopedRange inner(&probe, "loader/decode/bytes");
      }
    });
  }
  for (auto& w : workers) w.join();
  { ScopedRange r(&probe, "main_work"); }
  probe.end_step();
  probe.shutdown();

  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  ASSERT_EQ(es->traces.size(), 1u);
  std::map<uint32_t, int> per_thread;
  for (const auto& r : es->traces[0].ranges) per_thread[r.tid]++;
  EXPECT_EQ(per_thread.size(), 4u);  // three workers and main
  EXPECT_EQ(es->traces[0].ranges.size(), 3u * 20u + 1u);
  // Only the main thread's ranges are aggregated into the step.
  ASSERT_EQ(es->steps.size(), 1u);
  ASSERT_EQ(es->steps[0].ranges.size(), 1u);
  EXPECT_EQ(es->name(es->steps[0].ranges[0].name_id), "main_work");

  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  ASSERT_TRUE(fr.ok());
  EXPECT_EQ(fr->threads.size(), 4u);
  for (const auto& t : fr->threads) EXPECT_EQ(t.depth, 0u) << t.name;
}

TEST(ProbeRoundTrip, CollectivesBetweenStepsLandInTheNextStepAndOpenOnesAreMarkedOpen) {
  ScratchDir dir;
  auto created = Probe::create(test_options(dir.path()));
  ASSERT_TRUE(created.ok());
  Probe& probe = **created;
  CommHandle dp = probe.register_comm("dp0", 2, 0);
  probe.begin_step(0);
  CollectiveHandle open = probe.collective_enqueue(dp, allreduce(8));  // still in flight at step end
  probe.end_step();
  // A communication thread finishes a bucket between the two steps.
  std::thread comm_thread([&] { probe.collective_complete(probe.collective_enqueue(dp, allreduce(16))); });
  comm_thread.join();
  probe.collective_complete(open);
  probe.begin_step(1);
  probe.end_step();
  probe.shutdown();

  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok());
  ASSERT_EQ(es->steps.size(), 2u);
  ASSERT_EQ(es->steps[0].collectives.size(), 1u);
  EXPECT_EQ(es->steps[0].collectives[0].state, static_cast<uint8_t>(format::CollectiveState::kEnqueued));
  EXPECT_EQ(es->steps[0].collectives[0].end_ns, 0);
  ASSERT_EQ(es->steps[1].collectives.size(), 1u);
  EXPECT_EQ(es->steps[1].collectives[0].seq, 1u);
  EXPECT_EQ(es->steps[1].collectives[0].bytes, 64u);
  EXPECT_EQ(es->steps[1].collectives[0].state, static_cast<uint8_t>(format::CollectiveState::kCompleted));
}

TEST(ProbeRoundTrip, UnbalancedPopIsIgnored) {
  ScratchDir dir;
  auto created = Probe::create(test_options(dir.path()));
  ASSERT_TRUE(created.ok());
  Probe& probe = **created;
  probe.begin_step(0);
  probe.pop_range();  // nothing open
  { ScopedRange r(&probe, "ok"); }
  probe.end_step();
  probe.shutdown();
  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok());
  ASSERT_EQ(es->steps.size(), 1u);
  ASSERT_EQ(es->steps[0].ranges.size(), 1u);
  EXPECT_EQ(es->steps[0].ranges[0].count, 1u);
}

TEST(ProbeDisabled, EveryCallIsANoOpAndNothingIsWritten) {
  ScratchDir dir;
  std::unique_ptr<Probe> probe = Probe::disabled();
  EXPECT_FALSE(probe->enabled());
  CommHandle c = probe->register_comm("world", 1, 0);
  EXPECT_FALSE(c.valid());
  probe->begin_step(0);
  { ScopedRange r(probe.get(), "step"); }
  CollectiveHandle h = probe->collective_enqueue(c, {});
  EXPECT_FALSE(h.valid());
  probe->collective_complete(h);
  probe->counter("x", 1);
  probe->grad_ready(probe->register_param("w", 1));
  probe->end_step();
  probe->shutdown();
  EXPECT_TRUE(probe->run_dir().empty());
}

TEST(ProbeDisabled, OptionsEnabledFalseCreatesNoFiles) {
  ScratchDir dir;
  Options o = test_options(dir.path() / "run");
  o.enabled = false;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok());
  EXPECT_FALSE((*created)->enabled());
  (*created)->begin_step(0);
  (*created)->end_step();
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "run"));
}

}  // namespace
}  // namespace rankscope::probe
