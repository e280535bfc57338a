// faults_e2e_test.cpp — each --inject kind does what it says, checked in the run directory:
// stall (the others wait in the group's next collective), delay (the range takes the extra time),
// skip and resize (visible in the collective rings), crash (the pid is gone), drop-grad (the
// gradient-arrival state lacks the parameter), lossy (chunk counters); plus the vocab-shard skew of
// embed.local_tokens. Each job is a tiny model on 2 ranks for a few steps.
#include <gtest/gtest.h>
#include <signal.h>

#include <array>
#include <cmath>
#include <functional>
#include <thread>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "train_job.h"

namespace {

using namespace std::chrono_literals;
using rankscope::format::CollectiveState;
using rankscope::format::FlightRecorderSnapshot;

std::vector<std::string> small_args(const std::filesystem::path& dir, int steps) {
  return {"--model", "tiny", "--vocab-size", "1024", "--seq-len", "32", "--batch", "2",
          "--steps", std::to_string(steps), "--data", "synthetic:zipf", "--quiet",
          "--watchdog-timeout", "600", "--run-dir", dir.string()};
}

std::optional<FlightRecorderSnapshot> recorder(const std::filesystem::path& dir, int rank) {
  auto snap = rankscope::format::read_flight_recorder(rankscope::format::flight_recorder_path(dir, rank));
  if (!snap.ok()) return std::nullopt;
  return std::move(snap).value();
}

// Polls both ranks' recorders until `done` holds (true) or the job ends / the deadline passes.
bool wait_for(e2e::Job& job, const std::filesystem::path& dir, std::chrono::seconds timeout,
              const std::function<bool(const FlightRecorderSnapshot&, const FlightRecorderSnapshot&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r0 = recorder(dir, 0), r1 = recorder(dir, 1);
    if (r0 && r1 && done(*r0, *r1)) return true;
    if (!job.running()) {
      r0 = recorder(dir, 0);
      r1 = recorder(dir, 1);
      return r0 && r1 && done(*r0, *r1);
    }
    std::this_thread::sleep_for(200ms);
  }
  return false;
}

bool stack_has(const FlightRecorderSnapshot& s, const std::string& range) {
  const auto* t = s.main_thread();
  if (!t) return false;
  for (const auto& r : t->stack)
    if (r.name == range) return true;
  return false;
}

bool waiting(const rankscope::format::CollectiveSnapshot* c) {
  return c && (c->state == CollectiveState::kEnqueued || c->state == CollectiveState::kStarted);
}

TEST(Faults, StallLeavesThePeerWaitingInTheNextCollective) {
  auto dir = e2e::fresh_run_dir("fault_stall");
  auto args = small_args(dir, 6);
  args.insert(args.end(), {"--tp", "2", "--inject", "stall:rank=1,range=forward/block0/mlp,step=2"});
  e2e::Job job(e2e::train_command(2, args), dir / "job.log", dir);
  bool seen = wait_for(job, dir, 180s, [](const auto& r0, const auto& r1) {
    const auto* tp0_r0 = r0.comm("tp0");
    const auto* tp0_r1 = r1.comm("tp0");
    return tp0_r0 && tp0_r1 && r1.live.step == 2 && stack_has(r1, "forward/block0/mlp") &&
           waiting(tp0_r0->last()) && tp0_r0->last()->seq == tp0_r1->next_seq;
  });
  std::string log = job.output();
  job.kill_all();
  EXPECT_TRUE(seen) << "rank 0 should wait in tp0's collective that the stalled rank 1 never reached\n" << log;
}

TEST(Faults, StallIsReportedByThePeersWatchdog) {
  auto dir = e2e::fresh_run_dir("fault_stall_watchdog");
  auto args = small_args(dir, 6);
  // The later --watchdog-timeout wins over small_args' 600 s.
  args.insert(args.end(), {"--tp", "2", "--watchdog-timeout", "2", "--inject",
                           "stall:rank=1,range=backward/block1/mlp,step=2"});
  e2e::Job job(e2e::train_command(2, args), dir / "job.log", dir);
  bool seen = wait_for(job, dir, 120s, [](const auto& r0, const auto&) {
    return r0.watchdog.kind == rankscope::format::WatchdogKind::kCollectiveTimeout;
  });
  std::string log = job.output();
  job.kill_all();
  ASSERT_TRUE(seen) << log;
  auto r0 = recorder(dir, 0);
  ASSERT_TRUE(r0.has_value());
  ASSERT_GE(r0->watchdog.comm_index, 0);
  const auto* tp0 = r0->comm("tp0");
  ASSERT_NE(tp0, nullptr);
  EXPECT_EQ(r0->watchdog.comm_index, tp0->index);
  EXPECT_GE(r0->watchdog.waited_ns, 2'000'000'000);
}

TEST(Faults, DelaySlowsTheRangeOnlyWhereAsked) {
  auto dir = e2e::fresh_run_dir("fault_delay");
  auto args = small_args(dir, 3);
  args.insert(args.end(), {"--tp", "2", "--inject", "delay:rank=1,range=forward/block0/mlp,ms=300,step=2"});
  std::string out;
  ASSERT_EQ(e2e::run_to_end(e2e::train_command(2, args), dir, 180s, &out), 0) << out;
  auto stream = rankscope::format::read_event_stream(rankscope::format::event_stream_path(dir, 1));
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  auto id = stream->find_name("forward/block0/mlp");
  ASSERT_TRUE(id.has_value());
  std::map<int64_t, int64_t> ns_by_step;
  for (const auto& step : stream->steps)
    for (const auto& r : step.ranges)
      if (r.name_id == *id) ns_by_step[step.step] += r.total_ns;
  ASSERT_EQ(ns_by_step.size(), 3u);
  EXPECT_GE(ns_by_step[2], 300'000'000);
  EXPECT_LT(ns_by_step[1], 300'000'000);
  EXPECT_LT(ns_by_step[3], 300'000'000);
}

TEST(Faults, CrashKillsTheRank) {
  auto dir = e2e::fresh_run_dir("fault_crash");
  auto args = small_args(dir, 5);
  args.insert(args.end(), {"--tp", "2", "--inject", "crash:rank=1,step=3"});
  e2e::Job job(e2e::train_command(2, args), dir / "job.log", dir);
  int pid = 0;
  bool gone = false;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (std::chrono::steady_clock::now() < deadline && !gone) {
    auto r1 = recorder(dir, 1);
    if (r1 && r1->live.step >= 3) {
      pid = r1->pid;
      gone = pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
    }
    std::this_thread::sleep_for(100ms);
  }
  std::string log = job.output();
  job.kill_all();
  EXPECT_TRUE(gone) << "rank 1 (pid " << pid << ") should be dead at step 3\n" << log;
  auto r1 = recorder(dir, 1);
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->live.step, 3);
  // It died abruptly: it never marked itself finished or aborted.
  EXPECT_NE(r1->live.process_state, rankscope::format::ProcessState::kFinished);
  EXPECT_NE(r1->live.process_state, rankscope::format::ProcessState::kAborted);
}

TEST(Faults, DropGradLeavesTheParameterMissing) {
  auto dir = e2e::fresh_run_dir("fault_drop_grad");
  auto args = small_args(dir, 4);
  args.insert(args.end(), {"--tp", "1", "--inject", "drop-grad:rank=1,param=h.0.mlp.c_fc.weight,step=2"});
  e2e::Job job(e2e::train_command(2, args), dir / "job.log", dir);
  bool seen = wait_for(job, dir, 180s, [](const auto& r0, const auto& r1) {
    if (r1.grad.backward_step != 2) return false;
    bool missing = false;
    for (const auto* p : r1.missing_gradients()) missing |= p->name == "h.0.mlp.c_fc.weight";
    const auto* dp = r0.comm("dp0");
    return missing && dp && waiting(dp->last());
  });
  std::string log = job.output();
  job.kill_all();
  EXPECT_TRUE(seen) << log;
  auto r1 = recorder(dir, 1);
  ASSERT_TRUE(r1.has_value());
  for (const auto* p : r1->missing_gradients()) {
    // Only the dropped parameter and those after it in backward order may be missing; the head's
    // gradients arrived.
    EXPECT_NE(p->name, "ln_f.bias");
  }
}

TEST(Faults, ResizeShowsAnotherCountInTheRing) {
  auto dir = e2e::fresh_run_dir("fault_resize");
  auto args = small_args(dir, 3);
  args.insert(args.end(), {"--tp", "2", "--inject", "resize:rank=1,comm=tp0,seq=3,factor=2"});
  e2e::Job job(e2e::train_command(2, args), dir / "job.log", dir);
  uint64_t c0 = 0, c1 = 0;
  bool seen = wait_for(job, dir, 120s, [&](const auto& r0, const auto& r1) {
    const auto* a = r0.comm("tp0");
    const auto* b = r1.comm("tp0");
    const auto* x = a ? a->find(3) : nullptr;
    const auto* y = b ? b->find(3) : nullptr;
    if (!x || !y) return false;
    c0 = x->count;
    c1 = y->count;
    return true;
  });
  std::string log = job.output();
  job.kill_all();
  ASSERT_TRUE(seen) << log;
  EXPECT_EQ(c1, 2 * c0) << log;
}

TEST(Faults, SkipDesynchronisesTheRings) {
  auto dir = e2e::fresh_run_dir("fault_skip");
  auto args = small_args(dir, 3);
  args.insert(args.end(), {"--tp", "2", "--inject", "skip:rank=1,comm=tp0,seq=2"});
  e2e::Job job(e2e::train_command(2, args), dir / "job.log", dir);
  bool differ = false;
  wait_for(job, dir, 60s, [&](const auto& r0, const auto& r1) {
    const auto* a = r0.comm("tp0");
    const auto* b = r1.comm("tp0");
    if (!a || !b) return false;
    // The histories must disagree: at some common seq another op or count, or rank 1 behind.
    for (const auto& x : a->ring) {
      const auto* y = b->find(x.seq);
      if (y && (y->op != x.op || y->count != x.count)) differ = true;
    }
    const bool stuck = waiting(a->last()) || waiting(b->last());
    return differ && stuck;
  });
  std::string log = job.output();
  job.kill_all();
  EXPECT_TRUE(differ) << log;
  EXPECT_NE(log.find("skipping tp0 seq 2"), std::string::npos) << log;
}

double lost_fraction(const std::filesystem::path& dir, int rank, double* sent_out) {
  const double sent = e2e::counter_total(dir, rank, "lossy.chunks_sent");
  const double lost = e2e::counter_total(dir, rank, "lossy.chunks_lost");
  *sent_out = sent;
  return sent > 0 ? lost / sent : -1;
}

TEST(Faults, LossyBernoulliAndGilbertElliottCountChunks) {
  struct Case {
    std::string name, spec;
    double lo, hi;
  };
  // Gilbert–Elliott with loss only in the bad state loses p_gb / (p_gb + p_bg) = 1/6 long-run.
  for (const Case& c : {Case{"bernoulli", "lossy:model=bernoulli,p=0.25", 0.18, 0.32},
                        Case{"gilbert", "lossy:model=gilbert-elliott,p_gb=0.1,p_bg=0.5,loss_good=0,loss_bad=1", 0.06, 0.30}}) {
    auto dir = e2e::fresh_run_dir("fault_lossy_" + c.name);
    auto args = small_args(dir, 2);
    args.insert(args.end(), {"--tp", "2", "--inject", c.spec});
    std::string out;
    ASSERT_EQ(e2e::run_to_end(e2e::train_command(2, args), dir, 180s, &out), 0) << out;
    for (int rank : {0, 1}) {
      double sent = 0;
      double frac = lost_fraction(dir, rank, &sent);
      EXPECT_GT(sent, 100) << c.name << " rank " << rank;
      EXPECT_GE(frac, c.lo) << c.name << " rank " << rank;
      EXPECT_LE(frac, c.hi) << c.name << " rank " << rank;
    }
  }
}

// Runs 2 TP ranks for 4 steps of B=16, T=64 (4096 tokens: enough that sampling noise stays well
// under the 10% margin) with a one-layer, 64-channel model (the 50257-row LM head dominates the
// cost) and returns embed.local_tokens summed per rank.
std::array<double, 2> local_tokens(const std::string& name, const std::string& data, const std::string& shard) {
  auto dir = e2e::fresh_run_dir(name);
  std::vector<std::string> args = {"--model", "tiny", "--layers", "1", "--channels", "64", "--heads", "2",
                                   "--seq-len", "64", "--batch", "16", "--steps", "4",
                                   "--data", data, "--quiet", "--tp", "2", "--run-dir", dir.string(),
                                   "--vocab-shard", shard};
  std::string out;
  EXPECT_EQ(e2e::run_to_end(e2e::train_command(2, args), dir, 300s, &out), 0) << out;
  std::array<double, 2> t = {e2e::counter_total(dir, 0, "embed.local_tokens"),
                             e2e::counter_total(dir, 1, "embed.local_tokens")};
  // Every input token is owned by exactly one TP rank.
  EXPECT_EQ(t[0] + t[1], 4.0 * 16 * 64) << name;
  std::printf("%s: embed.local_tokens rank0 %.0f rank1 %.0f\n", name.c_str(), t[0], t[1]);
  return t;
}

TEST(VocabShard, ContiguousSkewsStridedBalancesOnZipf) {
  auto contiguous = local_tokens("shard_zipf_contiguous", "synthetic:zipf", "contiguous");
  auto strided = local_tokens("shard_zipf_strided", "synthetic:zipf", "strided");
  EXPECT_GE(contiguous[0], 5 * contiguous[1]) << contiguous[0] << " vs " << contiguous[1];
  EXPECT_LE(std::fabs(strided[0] - strided[1]), 0.1 * std::max(strided[0], strided[1]))
      << strided[0] << " vs " << strided[1];
}

TEST(VocabShard, ContiguousSkewsOnRealText) {
  const auto shipped = std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "data/tinyshakespeare/tiny_shakespeare_train.bin";
  if (!std::filesystem::exists(shipped)) GTEST_SKIP() << "no shipped shard at " << shipped;
  auto contiguous = local_tokens("shard_text_contiguous", shipped.string(), "contiguous");
  EXPECT_GE(contiguous[0], 5 * contiguous[1]) << contiguous[0] << " vs " << contiguous[1];
  // Strided balances by id parity; on this text that is about 55:45 (even ids are more common),
  // far from the contiguous skew but not within 10%: checked only as "much better".
  auto strided = local_tokens("shard_text_strided", shipped.string(), "strided");
  EXPECT_LE(std::max(strided[0], strided[1]), 1.5 * std::min(strided[0], strided[1]))
      << strided[0] << " vs " << strided[1];
}

}  // namespace
