// probe_crash_test.cpp — a rank SIGKILLed while inside a collective: its flight recorder still
// reads back with that collective not completed and the range it was in; the event stream keeps
// every step flushed before the kill.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/probe.h"

namespace rankscope::probe {
namespace {

// The child: two finished steps, then step 2 enters grad_sync, enqueues an allreduce that "never
// returns", tells the parent, and waits to be killed. Never returns.
[[noreturn]] void child_stuck_in_collective(const std::filesystem::path& run_dir, int ready_fd) {
  Options o = testing::test_options(run_dir, /*rank=*/1, /*world=*/2);
  auto created = Probe::create(o);
  if (!created.ok()) ::_exit(3);
  Probe& probe = **created;
  CommHandle dp = probe.register_comm("dp0", 2, 1);
  format::CollectiveDesc d;
  d.op = format::CollectiveOp::kAllReduceSum;
  d.dtype = format::DataType::kFloat32;
  d.count = 1 << 20;
  d.bytes = 4u << 20;
  for (int64_t step = 0; step < 3; ++step) {
    probe.begin_step(step);
    probe.push_range("step");
    probe.push_range("grad_sync");
    CollectiveHandle h = probe.collective_enqueue(dp, d);
    if (step == 2) {
      char ok = 'k';
      if (::write(ready_fd, &ok, 1) != 1) ::_exit(4);
      for (;;) ::pause();  // "inside" the allreduce until SIGKILL
    }
    probe.collective_complete(h);
    probe.pop_range();
    probe.pop_range();
    probe.end_step();
  }
  ::_exit(5);
}

TEST(ProbeCrash, SigkilledInsideCollectiveLeavesAReadableFlightRecorder) {
  testing::ScratchDir dir;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    child_stuck_in_collective(dir.path(), fds[1]);
  }
  ::close(fds[1]);
  char ready = 0;
  ASSERT_EQ(::read(fds[0], &ready, 1), 1) << "child died before entering the collective";
  ::close(fds[0]);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 1));
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  EXPECT_EQ(fr->pid, child);
  EXPECT_EQ(fr->rank, 1);
  EXPECT_EQ(fr->live.process_state, format::ProcessState::kRunning);  // it never got to say goodbye
  EXPECT_EQ(fr->live.step, 2);
  const format::CommSnapshot* dp = fr->comm("dp0");
  ASSERT_NE(dp, nullptr);
  EXPECT_EQ(dp->next_seq, 3u);
  EXPECT_EQ(dp->completed_count, 2u);
  const format::CollectiveSnapshot* last = dp->last();
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->seq, 2u);
  EXPECT_EQ(last->state, format::CollectiveState::kEnqueued);
  EXPECT_EQ(last->end_ns, 0);
  EXPECT_EQ(last->range, "grad_sync");
  EXPECT_EQ(last->bytes, 4u << 20);
  EXPECT_FALSE(last->torn);
  const format::ThreadSnapshot* main = fr->main_thread();
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->stack.size(), 2u);
  EXPECT_EQ(main->stack[0].name, "step");
  EXPECT_EQ(main->stack[1].name, "grad_sync");

  // The two finished steps were flushed at their end; the stream has no END record.
  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 1));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  EXPECT_FALSE(es->scan.ended);
  ASSERT_EQ(es->steps.size(), 2u);
  EXPECT_EQ(es->steps[1].step, 1);
}

TEST(ProbeCrash, WatchdogAbortRaisesSigabrtAfterRecordingTheEvent) {
  testing::ScratchDir dir;
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Options o = testing::test_options(dir.path());
    o.watchdog_timeout_s = 0.3;
    o.watchdog_abort = true;
    o.watchdog_stacks = false;  // keeps the test fast; stacks are covered by the watchdog tests
    auto created = Probe::create(o);
    if (!created.ok()) ::_exit(3);
    (*created)->begin_step(9);
    (*created)->push_range("optimizer");
    for (int i = 0; i < 100; ++i) ::usleep(100'000);  // the watchdog must end this within 10 s
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  EXPECT_EQ(fr->live.process_state, format::ProcessState::kAborted);
  EXPECT_EQ(fr->watchdog.kind, format::WatchdogKind::kRangeTimeout);
  EXPECT_EQ(fr->watchdog.range, "optimizer");
  EXPECT_EQ(fr->live.step, 9);
}

// A sink that kills the process when a range opens, as a fault injector may: the range it was
// opened in must already be in the flight recorder.
class KillOnRange final : public RangeSink {
 public:
  void push(std::string_view name) override {
    if (name == "forward/block3/attn") ::kill(::getpid(), SIGKILL);
  }
  void pop() override {}
};

TEST(ProbeCrash, RangeIsRecordedBeforeSinksSeeIt) {
  testing::ScratchDir dir;
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto created = Probe::create(testing::test_options(dir.path()));
    if (!created.ok()) ::_exit(3);
    (*created)->add_range_sink(std::make_unique<KillOnRange>());
    (*created)->begin_step(1);
    (*created)->push_range("step");
    (*created)->push_range("forward/block3/attn");
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  ASSERT_TRUE(fr.ok());
  ASSERT_NE(fr->main_thread(), nullptr);
  ASSERT_EQ(fr->main_thread()->stack.size(), 2u);
  EXPECT_EQ(fr->main_thread()->stack[1].name, "forward/block3/attn");
  EXPECT_EQ(fr->live.phase, "forward/block3/attn");
}

TEST(ProbeCrash, MarkAbortedSurvivesShutdown) {
  testing::ScratchDir dir;
  {
    auto created = Probe::create(testing::test_options(dir.path()));
    ASSERT_TRUE(created.ok());
    (*created)->begin_step(0);
    (*created)->mark_aborted();
  }  // destructor: shutdown() must not turn "aborted" into "finished"
  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
  ASSERT_TRUE(fr.ok());
  EXPECT_EQ(fr->live.process_state, format::ProcessState::kAborted);
  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok());
  EXPECT_EQ(es->steps.size(), 1u);  // the step in progress was written by shutdown
}

}  // namespace
}  // namespace rankscope::probe
