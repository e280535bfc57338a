// probe_clock_test.cpp — the NTP-style estimator against a fake exchange with a known skew and
// known (asymmetric, varying) delays, and Probe::align_clocks' records in both files.
#include <vector>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/clock_alignment.h"

namespace rankscope::probe {
namespace {

// A simulated pair of clocks: local time advances only by the delays the fake network imposes;
// rank 0's clock reads local + skew.
class FakeExchange final : public ClockExchange {
 public:
  struct Delay {
    int64_t to_root_ns;
    int64_t from_root_ns;
  };
  FakeExchange(int64_t skew_ns, std::vector<Delay> delays) : skew_ns_(skew_ns), delays_(std::move(delays)) {}

  int64_t now() const { return local_ns_; }
  int64_t ping_root(int64_t t1_ns) override {
    EXPECT_EQ(t1_ns, local_ns_);
    const Delay& d = delays_[static_cast<size_t>(pings_++) % delays_.size()];
    local_ns_ += d.to_root_ns;
    int64_t t2 = local_ns_ + skew_ns_;
    local_ns_ += d.from_root_ns;
    return t2;
  }
  void serve(int peer) override { served_.push_back(peer); }
  void barrier() override { ++barriers_; }

  int pings_ = 0;
  int barriers_ = 0;
  std::vector<int> served_;

 private:
  int64_t local_ns_ = 1'700'000'000'000'000'000;
  int64_t skew_ns_;
  std::vector<Delay> delays_;
};

TEST(ProbeClock, EstimatorKeepsTheSmallestRoundTrip) {
  // Skew -3.5 ms; the third sample is the quickest and symmetric, so it gives the skew exactly.
  FakeExchange ex(-3'500'000, {{400'000, 90'000}, {50'000, 700'000}, {20'000, 20'000}, {300'000, 10'000}});
  auto est = measure_clock_offset(ex, /*rank=*/1, /*world=*/2, /*samples=*/8, [&] { return ex.now(); });
  ASSERT_TRUE(est.ok()) << est.status().to_string();
  EXPECT_EQ(est->offset_ns, -3'500'000);
  EXPECT_EQ(est->round_trip_ns, 40'000);
  EXPECT_EQ(est->uncertainty_ns, 20'000);
  EXPECT_EQ(est->samples, 8u);
  EXPECT_EQ(ex.pings_, 8);
  EXPECT_EQ(ex.barriers_, 2);
}

TEST(ProbeClock, AsymmetricBestSampleIsWithinItsUncertainty) {
  const int64_t skew = 12'345'678;
  FakeExchange ex(skew, {{90'000, 10'000}, {200'000, 300'000}});
  auto est = measure_clock_offset(ex, 3, 4, 4, [&] { return ex.now(); });
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->round_trip_ns, 100'000);
  EXPECT_EQ(est->uncertainty_ns, 50'000);
  EXPECT_NE(est->offset_ns, skew);  // the delay asymmetry biases it ...
  EXPECT_LE(std::llabs(est->offset_ns - skew), est->uncertainty_ns);  // ... but never past the bound
}

TEST(ProbeClock, RootServesEveryPeerAndHasZeroOffset) {
  FakeExchange ex(0, {{1, 1}});
  auto est = measure_clock_offset(ex, 0, 3, 2, [&] { return ex.now(); });
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->offset_ns, 0);
  EXPECT_EQ(est->uncertainty_ns, 0);
  EXPECT_EQ(ex.served_, (std::vector<int>{1, 1, 2, 2}));
  EXPECT_EQ(ex.pings_, 0);
}

TEST(ProbeClock, SamplesWithNegativeRoundTripAreIgnored) {
  std::vector<ClockSample> samples = {{100, 500, 50}, {1000, 1600, 1100}};
  ClockEstimate est = estimate_clock_offset(samples);
  EXPECT_EQ(est.samples, 1u);
  EXPECT_EQ(est.offset_ns, 1600 - 1050);
  EXPECT_EQ(estimate_clock_offset(std::vector<ClockSample>{{10, 0, 5}}).uncertainty_ns, -1);
}

TEST(ProbeClock, BadArgumentsAreErrors) {
  FakeExchange ex(0, {{1, 1}});
  EXPECT_FALSE(measure_clock_offset(ex, 0, 2, 0, [] { return int64_t{0}; }).ok());
  EXPECT_FALSE(measure_clock_offset(ex, 2, 2, 4, [] { return int64_t{0}; }).ok());
}

// A real-clock exchange for Probe::align_clocks: "rank 0" is this process with a fixed skew.
class SkewedLocalExchange final : public ClockExchange {
 public:
  explicit SkewedLocalExchange(int64_t skew_ns) : skew_ns_(skew_ns) {}
  int64_t ping_root(int64_t) override { return now_unix_ns() + skew_ns_; }
  void serve(int) override {}
  void barrier() override {}

 private:
  int64_t skew_ns_;
};

TEST(ProbeClock, AlignClocksWritesFlightRecorderAndEventStream) {
  testing::ScratchDir dir;
  auto created = Probe::create(testing::test_options(dir.path(), 1, 2));
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  SkewedLocalExchange ex(250'000'000);
  Status s = (*created)->align_clocks(ex, 16);
  ASSERT_TRUE(s.ok()) << s.to_string();
  (*created)->shutdown();

  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 1));
  ASSERT_TRUE(fr.ok());
  EXPECT_GE(fr->live.clock_uncertainty_ns, 0);
  EXPECT_LE(std::llabs(fr->live.clock_offset_ns - 250'000'000), fr->live.clock_uncertainty_ns + 1);
  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 1));
  ASSERT_TRUE(es.ok());
  ASSERT_TRUE(es->clock.has_value());
  EXPECT_EQ(es->clock->offset_ns, fr->live.clock_offset_ns);
  EXPECT_EQ(es->clock->samples, 16u);
}

}  // namespace
}  // namespace rankscope::probe
