// probe_kernel_attribution_test.cpp — kernel activity joined to the range open at launch and put
// on the probe clock, through a fake KernelTracer (the CUPTI leaf's logic needs no GPU to test).
#include <map>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/event_stream.h"
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
  testing::ScratchDir dir;
  Options o = testing::test_options(dir.path());
  o.trace_step_begin = 0;
  o.trace_step_end = 0;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Probe& probe = **created;
  auto owned = std::make_unique<FakeTracer>();
  FakeTracer* tracer = owned.get();
  ASSERT_TRUE(probe.set_kernel_tracer(std::move(owned)).ok());

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

  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  ASSERT_EQ(es->steps.size(), 1u);
  std::map<std::string, int64_t> kernel_ns;
  for (const auto& r : es->steps[0].ranges) kernel_ns[std::string(es->name(r.name_id))] = r.kernel_ns;
  EXPECT_EQ(kernel_ns["forward/block0/attn"], 35'000);
  EXPECT_EQ(kernel_ns["forward/block0/mlp"], 20'000);

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
