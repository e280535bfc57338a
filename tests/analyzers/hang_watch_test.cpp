// hang_watch_test.cpp — --wait follows a live job (a writer thread standing in for the ranks) and
// stops once progress stops, measuring the time from the hang to the verdict.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/progress_watch.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers::hang {
namespace {

using testing::make_run;
using testing::scratch;

TEST(HangWatch, FinishedRunEndsAtOnce) {
  auto run = make_run(scratch("w"), 2, 3, 2);
  WatchOptions o;
  o.quiet_s = 5;
  auto w = watch_until_stalled(run.dir, o);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->finished);
  EXPECT_FALSE(w->stalled);
  EXPECT_EQ(w->samples, 1);
}

TEST(HangWatch, LiveJobThatStopsProgressing) {
  const auto dir = scratch("w");
  format::RunMetadata meta;
  meta.world_size = 2;
  meta.groups = {{"world", {0, 1}}};
  ASSERT_TRUE(format::write_run_metadata(dir, meta).ok());
  std::unique_ptr<format::FlightRecorderWriter> w[2];
  int comm[2];
  for (int r = 0; r < 2; ++r) {
    auto c = format::FlightRecorderWriter::create(format::flight_recorder_path(dir, r), {r, 2, r, 1, "h", "run", now_unix_ns()});
    ASSERT_TRUE(c.ok());
    w[r] = std::move(*c);
    comm[r] = w[r]->register_comm("world", 2, r);
    w[r]->set_process_state(format::ProcessState::kRunning);
  }
  std::atomic<bool> progressing{true}, stop{false};
  std::atomic<int64_t> hang_at{0};
  std::thread job([&] {
    while (!stop) {
      const int64_t t = now_unix_ns();
      if (progressing) {
        for (int r = 0; r < 2; ++r) {
          const auto seq = w[r]->collective_enqueue(comm[r], {format::CollectiveOp::kAllReduceSum, format::DataType::kFloat32, 8, 32, -1}, 0, "step", t);
          w[r]->collective_complete(comm[r], seq, t);
        }
        hang_at = t;
      }
      for (int r = 0; r < 2; ++r) w[r]->heartbeat(t);  // the watchdog keeps ticking after the hang
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::thread hang([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    progressing = false;
  });
  WatchOptions o;
  o.quiet_s = 0.5;
  o.poll_s = 0.05;
  const int64_t started = now_unix_ns();
  auto r = watch_until_stalled(dir, o);
  stop = true;
  hang.join();
  job.join();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->stalled);
  EXPECT_FALSE(r->finished);
  EXPECT_GE(r->verdict_ns - started, int64_t(0.9e9));  // it did not stop while progress went on
  EXPECT_NEAR(double(r->last_progress_ns - hang_at.load()) / 1e9, 0.0, 0.05);
  EXPECT_GE(r->hang_to_verdict_s(), 0.5);
  EXPECT_LT(r->hang_to_verdict_s(), 1.5);
  std::printf("hang -> verdict with --wait 0.5: %.3f s\n", r->hang_to_verdict_s());
}

TEST(HangWatch, ARunDirectoryThatNeverAppearsIsAnError) {
  WatchOptions o;
  o.quiet_s = 0.2;
  o.poll_s = 0.05;
  auto r = watch_until_stalled(scratch("w") / "never", o);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace rankscope::analyzers::hang
