// hang_process_state_test.cpp — frozen ranks: a rank whose heartbeat stopped
// while the others beat, whose process exists on this host but has no thread that can run.
// The /proc reader on a fake /proc tree and on a real SIGSTOPped child; the classifier with a fake
// process table and with the real one; the wording when the process is on another host.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <fstream>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/flight_recorder_layout.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::hang::process_state_tests {
namespace {

using testing::FakeProcessTable;
using testing::make_run;
using testing::scratch;

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

const RankReport& rank(const Diagnosis& d, int r) {
  auto it = std::find_if(d.ranks.begin(), d.ranks.end(), [&](const RankReport& x) { return x.rank == r; });
  EXPECT_NE(it, d.ranks.end());
  return *it;
}

// A child that sleeps until killed, stopped with SIGSTOP; killed and reaped on destruction.
class StoppedChild {
 public:
  StoppedChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (;;) ::pause();
    }
    ::kill(pid_, SIGSTOP);
    int st = 0;
    ::waitpid(pid_, &st, WUNTRACED);
    stopped_ = WIFSTOPPED(st);
  }
  ~StoppedChild() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  bool stopped() const { return stopped_; }

 private:
  pid_t pid_ = -1;
  bool stopped_ = false;
};

TEST(ProcessState, FoldsThreadStatesIntoOneAnswer) {
  EXPECT_EQ(fold_thread_states(""), OsRunState::kUnknown);
  EXPECT_EQ(fold_thread_states("TTT"), OsRunState::kStopped);
  EXPECT_EQ(fold_thread_states("TSS"), OsRunState::kRunnable);  // one thread stopped, others can run
  EXPECT_EQ(fold_thread_states("tt"), OsRunState::kTraced);
  EXPECT_EQ(fold_thread_states("DT"), OsRunState::kUninterruptible);
  EXPECT_EQ(fold_thread_states("Z"), OsRunState::kZombie);
  EXPECT_EQ(fold_thread_states("R"), OsRunState::kRunnable);
  EXPECT_TRUE(is_frozen(OsRunState::kStopped));
  EXPECT_FALSE(is_frozen(OsRunState::kRunnable));
  EXPECT_FALSE(is_frozen(OsRunState::kUnknown));
}

TEST(ProcessState, ReadsAFakeProcTree) {
  const auto proc = scratch("ps");
  // comm with a space and a parenthesis: the state follows the last ')'.
  write_file(proc / "4242/task/4242/stat", "4242 (gpt2 (x)) D 1 4242 4242 0 -1 4194560 0 0\n");
  write_file(proc / "4242/task/4242/wchan", "nfs_wait_on_request");
  write_file(proc / "4242/task/4243/stat", "4243 (watchdog) T 1 4242 4242 0 -1\n");
  write_file(proc / "4242/task/4243/wchan", "do_signal_stop");
  const ProcessStatus s = read_proc_status(proc, 4242);
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.state, OsRunState::kUninterruptible);
  EXPECT_EQ(s.wchan, "nfs_wait_on_request");
  EXPECT_EQ(read_proc_status(proc, 1).state, OsRunState::kUnknown);  // no such process in the tree
}

TEST(ProcessState, ARealStoppedProcessReadsStopped) {
  StoppedChild child;
  ASSERT_TRUE(child.stopped());
  SystemProcessTable procs;
  const ProcessStatus s = procs.status(procs.local_host(), child.pid());
  EXPECT_EQ(s.alive, Liveness::kAlive);
  EXPECT_EQ(s.state, OsRunState::kStopped);
  EXPECT_GE(s.threads, 1);
  // And this (running) test process is not frozen.
  EXPECT_EQ(procs.status(procs.local_host(), ::getpid()).state, OsRunState::kRunnable);
  EXPECT_EQ(procs.status("some-other-host", child.pid()).state, OsRunState::kUnknown);
}

// A rank that died a moment ago and was not reaped yet (a zombie) answers kill(pid, 0);
// it is gone all the same, so a crash is not read as a lagging rank with a fresh heartbeat.
TEST(ProcessState, AnExitedProcessNotYetReapedIsGone) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Wait for the child to exit without reaping it.
  bool zombie = false;
  for (int i = 0; i < 200 && !zombie; ++i) {
    std::ifstream in("/proc/" + std::to_string(child) + "/stat");
    std::string stat;
    std::getline(in, stat);
    zombie = stat.find(") Z") != std::string::npos;
    if (!zombie) ::usleep(10000);
  }
  ASSERT_TRUE(zombie);
  ASSERT_EQ(::kill(child, 0), 0);  // what a pid check alone sees
  SystemProcessTable procs;
  EXPECT_EQ(procs.liveness(procs.local_host(), child), Liveness::kGone);
  EXPECT_EQ(procs.liveness(procs.local_host(), ::getpid()), Liveness::kAlive);
  int status = 0;
  ::waitpid(child, &status, 0);
}

TEST(HangFrozen, StoppedRankWithAFakeProcessTableIsFrozenNotRunning) {
  // Rank 3 stops beating at step 3 (synth's crash leaves a stale heartbeat); its pid is alive and
  // every thread is stopped.
  auto run = make_run(scratch("fz"), 4, 6, 2, "crash:rank=3,step=3,range=forward/block0/attn");
  auto rd = format::open_run_directory(run.dir);
  ASSERT_TRUE(rd.ok());
  FakeProcessTable procs;
  for (const auto& r : rd->ranks) procs.table[{r.flight->host, r.flight->pid}] = Liveness::kAlive;
  const auto& f3 = *rd->ranks[3].flight;
  procs.statuses[{f3.host, f3.pid}] = ProcessStatus{Liveness::kAlive, OsRunState::kStopped, "do_signal_stop", 3};
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kRankFrozen);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3});
  EXPECT_EQ(rank(d, 3).state, RankState::kFrozen);
  EXPECT_EQ(rank(d, 3).os_state, OsRunState::kStopped);
  EXPECT_NE(d.headline.find("rank 3's process is frozen (stopped, in kernel function do_signal_stop): no thread runs"),
            std::string::npos)
      << d.headline;
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp1");
  const auto j = render_json(d);
  EXPECT_EQ(j.at("kind"), "rank_frozen");
  EXPECT_EQ(j.at("ranks")[3].at("state"), "frozen");
  EXPECT_EQ(j.at("ranks")[3].at("os_state"), "stopped");
  EXPECT_EQ(j.at("ranks")[3].at("wchan"), "do_signal_stop");
  EXPECT_NE(render_text(d).find("frozen (stopped) in forward/block0/attn"), std::string::npos) << render_text(d);
}

TEST(HangFrozen, AliveAndRunnableWithAStaleHeartbeatIsNotCalledFrozen) {
  auto run = make_run(scratch("fz"), 2, 6, 2, "crash:rank=1,step=3");
  auto rd = format::open_run_directory(run.dir);
  FakeProcessTable procs;
  for (const auto& r : rd->ranks) {
    procs.table[{r.flight->host, r.flight->pid}] = Liveness::kAlive;
    procs.statuses[{r.flight->host, r.flight->pid}] = ProcessStatus{Liveness::kAlive, OsRunState::kRunnable, "", 3};
  }
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_NE(d.kind, Kind::kRankFrozen);
  EXPECT_NE(rank(d, 1).state, RankState::kFrozen);
}

TEST(HangFrozen, OnAnotherHostTheHeartbeatStoppedIsAllThatIsSaid) {
  auto run = make_run(scratch("fz"), 4, 6, 2, "crash:rank=3,step=3");
  FakeProcessTable procs;  // every host unknown: no process table for them
  auto rd = format::open_run_directory(run.dir);
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kCrash);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{3});
  EXPECT_NE(d.headline.find("rank 3's heartbeat stopped"), std::string::npos) << d.headline;
  EXPECT_EQ(d.headline.find("died"), std::string::npos) << d.headline;
  EXPECT_NE(d.explanation.find("cannot be checked from here"), std::string::npos) << d.explanation;
}

TEST(HangFrozen, ARealStoppedProcessWithTheRealProcessTable) {
  // The synthetic rank 1 stopped beating; its recorder now names a real SIGSTOPped process of this
  // host, and the live rank is this test process.
  StoppedChild child;
  ASSERT_TRUE(child.stopped());
  synth::SynthOptions o;
  o.local_host = true;
  o.live_pid = ::getpid();
  auto run = make_run(scratch("fz"), 2, 6, 2, "crash:rank=1,step=3,range=forward/embed", o);
  {
    std::fstream f(run.dir / "rank00001.flight", std::ios::in | std::ios::out | std::ios::binary);
    const int32_t pid = child.pid();
    f.seekp(offsetof(format::FlightHeader, pid));
    f.write(reinterpret_cast<const char*>(&pid), sizeof(pid));
  }
  SystemProcessTable procs;
  auto rd = format::open_run_directory(run.dir);
  ASSERT_TRUE(rd.ok());
  const Diagnosis d = diagnose(*rd, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang);
  EXPECT_EQ(d.kind, Kind::kRankFrozen);
  EXPECT_EQ(d.culprit_ranks, std::vector<int>{1});
  EXPECT_EQ(rank(d, 1).pid, child.pid());
  EXPECT_NE(d.headline.find("rank 1's process is frozen (stopped"), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find("no thread runs"), std::string::npos) << d.headline;
}

}  // namespace
}  // namespace rankscope::analyzers::hang::process_state_tests
