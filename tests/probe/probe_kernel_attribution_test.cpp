// probe_kernel_attribution_test.cpp — kernel activity joined to the range open at launch and put
// on the probe clock, through a fake KernelTracer (the CUPTI leaf's logic needs no GPU to test):
// graph launches (several kernels, one correlation id), launches from a thread with no range, and
// kernels whose launch was never seen, with the per-step figures of GPU time outside every range.
// Which CUDA APIs count as launches is the CUPTI leaf's test (probe_cupti_launch_test.cpp).
#include <map>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/kernel_counters.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/kernel_attribution.h"
#include "rankscope/probe/kernel_tracer.h"

namespace rankscope::probe {
namespace {

TEST(ProbeKernelAttribution, ConverterUsesTheTightestBracket) {
  // Our clock ticks 10 ns per read except one slow (preempted) pair; the tracer is 5000 ns behind.
  int64_t ours = 1'000'000;
  int call = 0;
  auto our_now = [&] {
    ours += (call++ == 0) ? 900 : 10;
    return ours;
  };
  auto tracer_now = [&] { return ours - 5000; };
  TimestampConverter c = TimestampConverter::calibrate(tracer_now, our_now, 4);
  // On the tight pairs the tracer read happens 0..10 ns after `before`; midpoint error <= 5 ns.
  EXPECT_NEAR(static_cast<double>(c.offset_ns()), 5000.0, 5.0);
  EXPECT_EQ(c.to_ours(1000), 1000 + c.offset_ns());
}

TEST(ProbeKernelAttribution, LaunchTableForgetsOverwrittenIds) {
  LaunchTable t;
  t.record(7, 3);
  EXPECT_EQ(t.lookup(7), 3u);
  EXPECT_FALSE(t.lookup(8).has_value());
  t.record(7 + LaunchTable::kCapacity, 9);  // same ring slot, a later launch
  EXPECT_FALSE(t.lookup(7).has_value());
  EXPECT_EQ(t.lookup(7 + LaunchTable::kCapacity), 9u);
}

TEST(ProbeKernelAttribution, LaunchTableTellsOutsideRangesFromNoLaunchSeen) {
  using Kind = KernelAttribution::Kind;
  LaunchTable t;
  t.record(5, 12);
  t.record(6, LaunchTable::kNoRange);
  EXPECT_EQ(t.attribute(5).kind, Kind::kRange);
  EXPECT_EQ(t.attribute(5).range_token, 12u);
  EXPECT_EQ(t.attribute(5).kind, Kind::kRange) << "a lookup must not consume: a graph's kernels share one id";
  EXPECT_EQ(t.attribute(6).kind, Kind::kOutsideRanges);
  EXPECT_EQ(t.attribute(7).kind, Kind::kNoLaunchSeen);
  t.record(5 + LaunchTable::kCapacity, 1);
  EXPECT_EQ(t.attribute(5).kind, Kind::kNoLaunchSeen) << "an overwritten launch is not guessed at";
}

// The value of counter `name` in `step`, nullopt when the step does not carry it.
std::optional<double> counter_of(const format::EventStream& es, const format::StepRecord& step, std::string_view name) {
  for (const auto& c : step.counters)
    if (es.name(c.name_id) == name) return c.value;
  return std::nullopt;
}

// A tracer whose "GPU" is the test: launch() plays the runtime callback on the calling thread;
// finish() queues a completed kernel, delivered at the next flush (as CUPTI buffers are).
class FakeTracer final : public KernelTracer {
 public:
  static constexpr int64_t kTracerBehind = 1'000'000'000;  // tracer clock = ours - 1 s
  std::string_view name() const override { return "fake"; }
  Status start(KernelSink& sink) override {
    sink_ = &sink;
    return {};
  }
  int64_t timestamp_ns() override { return now_unix_ns() - kTracerBehind; }
  void flush() override {
    if (!queued_.empty()) sink_->on_kernels(queued_);
    queued_.clear();
  }
  void stop() override {}

  uint32_t launch() {
    uint32_t corr = ++next_corr_;
    sink_->on_launch(corr);
    return corr;
  }
  void finish(uint32_t corr, const char* kernel, int64_t begin_tracer_ns, int64_t duration_ns) {
    KernelActivity a;
    a.name = kernel;
    a.correlation_id = corr;
    a.stream = 7;
    a.device = 0;
    a.begin_ns = begin_tracer_ns;
    a.end_ns = begin_tracer_ns + duration_ns;
    queued_.push_back(a);
  }

 private:
  KernelSink* sink_ = nullptr;
  uint32_t next_corr_ = 100;
  std::vector<KernelActivity> queued_;
};

TEST(ProbeKernelAttribution, KernelTimeLandsOnTheRangeOpenAtLaunch) {
  testing::KernelTracedRun<FakeTracer> run;
  ASSERT_NE(run.probe, nullptr);
  Probe& probe = *run.probe;
  FakeTracer* tracer = run.tracer;

  probe.begin_step(0);
  uint32_t k1, k2, k3;
  int64_t t0 = now_unix_ns() - FakeTracer::kTracerBehind;
  {
    ScopedRange a(&probe, "forward/block0/attn");
    k1 = tracer->launch();
    k2 = tracer->launch();
  }
  {
    ScopedRange m(&probe, "forward/block0/mlp");
    k3 = tracer->launch();
  }
  uint32_t orphan = tracer->launch();  // no range open
  tracer->finish(k1, "_Z17attention_forwardPfS_i", t0 + 1000, 30'000);
  tracer->finish(k2, "softmax_kernel", t0 + 40'000, 5'000);
  tracer->finish(k3, "gelu_kernel", t0 + 50'000, 20'000);
  tracer->finish(orphan, "memset_kernel", t0 + 80'000, 1'000);
  probe.end_step();
  probe.shutdown();

  auto es = format::read_event_stream(format::event_stream_path(run.dir.path(), 0));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  ASSERT_EQ(es->steps.size(), 1u);
  std::map<std::string, int64_t> kernel_ns;
  for (const auto& r : es->steps[0].ranges) kernel_ns[std::string(es->name(r.name_id))] = r.kernel_ns;
  EXPECT_EQ(kernel_ns["forward/block0/attn"], 35'000);
  EXPECT_EQ(kernel_ns["forward/block0/mlp"], 20'000);
  EXPECT_EQ(counter_of(*es, es->steps[0], format::kKernelNsOutsideRangesCounter), 1'000.0);  // the memset
  EXPECT_EQ(counter_of(*es, es->steps[0], format::kKernelNsNoLaunchSeenCounter), 0.0);

  ASSERT_EQ(es->traces.size(), 1u);
  const auto& kernels = es->traces[0].kernels;
  ASSERT_EQ(kernels.size(), 4u);
  EXPECT_EQ(es->name(kernels[0].name_id), "attention_forward(float*, float*, int)");  // demangled
  EXPECT_EQ(es->name(kernels[0].range_id), "forward/block0/attn");
  EXPECT_EQ(es->name(kernels[2].range_id), "forward/block0/mlp");
  EXPECT_EQ(kernels[3].range_id, 0u);  // launched outside any range
  EXPECT_EQ(kernels[0].stream, 7u);
  // Converted to our clock: the fake tracer runs 1 s behind; calibration error is sub-microsecond
  // on an idle machine, allow 1 ms for a loaded one.
  EXPECT_NEAR(static_cast<double>(kernels[0].begin_ns - (t0 + 1000 + FakeTracer::kTracerBehind)), 0.0, 1e6);
  EXPECT_EQ(kernels[0].end_ns - kernels[0].begin_ns, 30'000);
}

TEST(ProbeKernelAttribution, GraphLaunchesForeignThreadsAndUnseenLaunchesAreAccounted) {
  testing::KernelTracedRun<FakeTracer> run;
  ASSERT_NE(run.probe, nullptr);
  Probe& probe = *run.probe;
  FakeTracer* tracer = run.tracer;
  const int64_t t0 = now_unix_ns() - FakeTracer::kTracerBehind;

  probe.begin_step(0);
  uint32_t graph, outside, foreign;
  {
    ScopedRange r(&probe, "optimizer");
    graph = tracer->launch();  // cudaGraphLaunch: one correlation id for the whole graph
  }
  outside = tracer->launch();  // between ranges on the main thread
  {
    ScopedRange r(&probe, "backward/block0/mlp");
    // A library thread launching while the main thread has a range open: that range is not the
    // launching thread's, so the kernel ran outside any range (as Kineto's per-thread ids say).
    std::thread([&] { foreign = tracer->launch(); }).join();
  }
  const uint32_t never_launched = 7;  // below every id the fake hands out: no launch was seen
  tracer->finish(graph, "adamw_kernel", t0 + 1'000, 4'000);
  tracer->finish(graph, "grad_norm_kernel", t0 + 6'000, 2'000);
  tracer->finish(graph, "clip_kernel", t0 + 9'000, 1'000);
  tracer->finish(outside, "memset_kernel", t0 + 11'000, 300);
  tracer->finish(foreign, "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", t0 + 12'000, 5'000);
  tracer->finish(never_launched, "splitKreduce_kernel", t0 + 18'000, 700);
  probe.end_step();
  probe.begin_step(1);  // a step whose kernels all ran in ranges still says so: 0, not absent
  {
    ScopedRange r(&probe, "optimizer");
    tracer->finish(tracer->launch(), "adamw_kernel", t0 + 30'000, 4'000);
  }
  probe.end_step();
  probe.shutdown();

  auto es = format::read_event_stream(format::event_stream_path(run.dir.path(), 0));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  ASSERT_EQ(es->steps.size(), 2u);
  std::map<std::string, int64_t> kernel_ns;
  int64_t in_ranges_ns = 0;
  for (const auto& r : es->steps[0].ranges) {
    kernel_ns[std::string(es->name(r.name_id))] = r.kernel_ns;
    in_ranges_ns += r.kernel_ns;
  }
  EXPECT_EQ(kernel_ns["optimizer"], 7'000) << "all three kernels of the graph launch";
  EXPECT_EQ(kernel_ns["backward/block0/mlp"], 0);
  const double outside_ns = counter_of(*es, es->steps[0], format::kKernelNsOutsideRangesCounter).value_or(-1);
  const double unseen_ns = counter_of(*es, es->steps[0], format::kKernelNsNoLaunchSeenCounter).value_or(-1);
  EXPECT_EQ(outside_ns, 5'300.0);
  EXPECT_EQ(unseen_ns, 700.0);
  // Every kernel's time is booked exactly once: ranges + outside + unseen = all kernels of the step.
  EXPECT_EQ(static_cast<double>(in_ranges_ns) + outside_ns + unseen_ns, 4'000 + 2'000 + 1'000 + 300 + 5'000 + 700.0);
  EXPECT_EQ(counter_of(*es, es->steps[1], format::kKernelNsOutsideRangesCounter), 0.0);
  EXPECT_EQ(counter_of(*es, es->steps[1], format::kKernelNsNoLaunchSeenCounter), 0.0);

  ASSERT_EQ(es->traces.size(), 1u);
  std::map<std::string, std::string> range_of_kernel;
  for (const auto& k : es->traces[0].kernels)
    range_of_kernel[std::string(es->name(k.name_id))] = k.range_id ? std::string(es->name(k.range_id)) : "";
  EXPECT_EQ(range_of_kernel["adamw_kernel"], "optimizer");
  EXPECT_EQ(range_of_kernel["grad_norm_kernel"], "optimizer");
  EXPECT_EQ(range_of_kernel["clip_kernel"], "optimizer");
  EXPECT_EQ(range_of_kernel["memset_kernel"], "");
  EXPECT_EQ(range_of_kernel["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"], "");
  EXPECT_EQ(range_of_kernel["splitKreduce_kernel"], "");

  // The launching library thread opened no range, so it took none of the recorder's thread slots.
  auto fr = format::read_flight_recorder(format::flight_recorder_path(run.dir.path(), 0));
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  EXPECT_EQ(fr->threads.size(), 1u);
}

class UnavailableTracer final : public KernelTracer {
 public:
  std::string_view name() const override { return "broken"; }
  Status start(KernelSink&) override { return unsupported("cuptiActivityEnable: CUPTI_ERROR_UNKNOWN"); }
  int64_t timestamp_ns() override { return 0; }
  void flush() override { ADD_FAILURE() << "a tracer that failed to start must not be used"; }
  void stop() override {}
};

TEST(ProbeKernelAttribution, UnavailableTracerIsDroppedAndTheProbeCarriesOn) {
  testing::ScratchDir dir;
  auto created = Probe::create(testing::test_options(dir.path()));
  ASSERT_TRUE(created.ok());
  Probe& probe = **created;
  ::testing::internal::CaptureStderr();
  Status s = probe.set_kernel_tracer(std::make_unique<UnavailableTracer>());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(err, "rankscope: GPU kernel timing unavailable (cuptiActivityEnable: CUPTI_ERROR_UNKNOWN)\n");
  probe.begin_step(0);
  { ScopedRange r(&probe, "forward/embed"); }
  probe.end_step();
  probe.shutdown();
  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok());
  ASSERT_EQ(es->steps.size(), 1u);
  EXPECT_EQ(es->steps[0].ranges.size(), 1u);
}

}  // namespace
}  // namespace rankscope::probe
