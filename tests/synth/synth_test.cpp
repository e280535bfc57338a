// synth_test.cpp — `rankscope synth`'s library writes runs in the real format that say what
// the fault did: read back through the format library's readers, not through synth's own state.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <map>

#include "hang_test_support.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/synth/synth.h"

namespace rankscope::synth {
namespace {

using analyzers::hang::testing::make_run;
using analyzers::hang::testing::scratch;

format::RunDirectory open(const std::filesystem::path& dir) {
  auto r = format::open_run_directory(dir);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return std::move(*r);
}

const format::CollectiveSnapshot* pending(const format::FlightRecorderSnapshot& s) {
  for (const auto& c : s.comms)
    for (const auto& r : c.ring)
      if (r.state == format::CollectiveState::kStarted || r.state == format::CollectiveState::kEnqueued) return &r;
  return nullptr;
}

TEST(SynthTest, HealthyRunHasLayoutGroupsAndMatchingCollectives) {
  auto run = make_run(scratch("synth"), 4, 6, 2);
  auto rd = open(run.dir);
  ASSERT_TRUE(rd.metadata);
  EXPECT_EQ(rd.world_size, 4);
  EXPECT_EQ(rd.metadata->tp, 2);
  EXPECT_EQ(rd.metadata->dp, 2);
  ASSERT_NE(rd.metadata->group("tp1"), nullptr);
  EXPECT_EQ(rd.metadata->group("tp1")->ranks, (std::vector<int>{2, 3}));  // consecutive
  ASSERT_NE(rd.metadata->group("dp1"), nullptr);
  EXPECT_EQ(rd.metadata->group("dp1")->ranks, (std::vector<int>{1, 3}));  // strided
  EXPECT_TRUE(rd.problems.empty());
  for (const auto& rf : rd.ranks) {
    ASSERT_TRUE(rf.flight) << rf.rank;
    const auto& f = *rf.flight;
    EXPECT_EQ(f.live.process_state, format::ProcessState::kFinished);
    EXPECT_EQ(f.live.step, 5);
    EXPECT_EQ(pending(f), nullptr);
    EXPECT_EQ(f.live.collectives_issued, f.live.collectives_completed);
    ASSERT_NE(f.comm("tp" + std::to_string(rf.rank / 2)), nullptr);
    ASSERT_NE(f.comm("dp" + std::to_string(rf.rank % 2)), nullptr);
  }
  // Same number of collectives on both members of a communicator, with the same descriptions.
  const auto* a = rd.ranks[0].flight->comm("tp0");
  const auto* b = rd.ranks[1].flight->comm("tp0");
  EXPECT_EQ(a->next_seq, b->next_seq);
  EXPECT_GT(a->next_seq, 6u * 8);
  for (const auto& rec : a->ring) {
    const auto* other = b->find(rec.seq);
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(other->op, rec.op);
    EXPECT_EQ(other->count, rec.count);
    EXPECT_EQ(other->range, rec.range);
  }
}

TEST(SynthTest, EventStreamsCarryStepsRangesArrivalsAndTheVocabSkewCounter) {
  auto run = make_run(scratch("synth"), 2, 5, 2);
  auto e0 = format::read_event_stream(format::event_stream_path(run.dir, 0));
  auto e1 = format::read_event_stream(format::event_stream_path(run.dir, 1));
  ASSERT_TRUE(e0.ok() && e1.ok());
  ASSERT_EQ(e0->steps.size(), 5u);
  ASSERT_EQ(e1->steps.size(), 5u);
  EXPECT_TRUE(e0->end_ns.has_value());
  for (const char* name : {"step", "data", "forward/embed", "forward/block1/mlp", "backward/block0/attn", "optimizer"})
    EXPECT_TRUE(e0->find_name(name).has_value()) << name;
  const auto counter = e0->find_name("embed.local_tokens");
  ASSERT_TRUE(counter.has_value());
  double t0 = 0, t1 = 0;
  for (size_t s = 0; s < 5; ++s) {
    const auto& s0 = e0->steps[s];
    const auto& s1 = e1->steps[s];
    EXPECT_EQ(s0.step, int64_t(s));
    EXPECT_LT(s0.begin_ns, s0.end_ns);
    ASSERT_EQ(s0.collectives.size(), s1.collectives.size());
    for (size_t i = 0; i < s0.collectives.size(); ++i) {
      const auto& c0 = s0.collectives[i];
      const auto& c1 = s1.collectives[i];
      EXPECT_EQ(c0.seq, c1.seq);
      EXPECT_EQ(c0.end_ns, c1.end_ns);                               // same host, no clock offset: one finish for both
      EXPECT_GE(c0.end_ns, std::max(c0.enqueue_ns, c1.enqueue_ns));  // nobody finishes before the last arrival
    }
    t0 += s0.counters.at(0).value;
    t1 += s1.counters.at(0).value;
  }
  EXPECT_GT(t0, 5 * t1);  // contiguous vocab shards on real text: ~20:1
}

TEST(SynthTest, StallFreezesTheRankInItsRangeAndOthersInTheNextCollective) {
  auto run = make_run(scratch("synth"), 4, 8, 2, "stall:rank=1,range=forward/block0/attn,step=3");
  EXPECT_EQ(run.summary.hang_step, 3);
  auto rd = open(run.dir);
  const auto& r1 = *rd.ranks[1].flight;
  ASSERT_NE(r1.main_thread(), nullptr);
  ASSERT_FALSE(r1.main_thread()->stack.empty());
  EXPECT_EQ(r1.main_thread()->stack.back().name, "forward/block0/attn");
  EXPECT_EQ(r1.live.step, 3);
  EXPECT_EQ(pending(r1), nullptr);
  const auto* p0 = pending(*rd.ranks[0].flight);
  ASSERT_NE(p0, nullptr);
  EXPECT_EQ(p0->range, "forward/block0/attn");
  EXPECT_EQ(rd.ranks[0].flight->comm("tp0")->next_seq, r1.comm("tp0")->next_seq + 1);
  auto e1 = format::read_event_stream(format::event_stream_path(run.dir, 1));
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ(e1->steps.size(), 3u);  // steps 0..2 ended; step 3 never does
  EXPECT_FALSE(e1->end_ns.has_value());
}

TEST(SynthTest, CrashWritesAPidThatIsGoneAndAStaleHeartbeat) {
  SynthOptions o;
  o.idle_s = 45;
  auto run = make_run(scratch("synth"), 2, 6, 1, "crash:rank=1,step=2", o);
  auto rd = open(run.dir);
  const auto& dead = *rd.ranks[1].flight;
  const auto& live = *rd.ranks[0].flight;
  errno = 0;
  EXPECT_NE(::kill(dead.pid, 0), 0);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_NEAR(double(live.live.heartbeat_ns - dead.live.heartbeat_ns) / 1e9, 45.0, 1.0);
  EXPECT_EQ(dead.live.process_state, format::ProcessState::kRunning);  // it never shut down
}

TEST(SynthTest, DropGradLeavesTheParamMissingWithItsBucket) {
  auto run = make_run(scratch("synth"), 2, 6, 1, "drop-grad:rank=0,param=h.1.attn.c_proj.weight,step=4");
  auto rd = open(run.dir);
  const auto& f = *rd.ranks[0].flight;
  const auto missing = f.missing_gradients();
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->name, "h.1.attn.c_proj.weight");
  EXPECT_EQ(missing[0]->bucket, 0);  // the last block is in the first (small) bucket
  EXPECT_EQ(f.main_thread()->stack.back().name, "grad_sync");
  // Its peer launched bucket 0 and waits in it, in the middle of its own backward.
  const auto* p1 = pending(*rd.ranks[1].flight);
  ASSERT_NE(p1, nullptr);
  EXPECT_EQ(p1->range, "backward/block1/attn");
}

TEST(SynthTest, SkipAndResizeChangeTheRanksRecordAtThatSeq) {
  auto skip = make_run(scratch("skip"), 2, 6, 2, "skip:rank=1,comm=tp0,seq=26");
  auto rd = open(skip.dir);
  const auto* a = rd.ranks[0].flight->comm("tp0")->find(26);
  const auto* b = rd.ranks[1].flight->comm("tp0")->find(26);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->range, b->range);  // rank 1's seq 26 is the collective after the one it skipped

  auto resize = make_run(scratch("resize"), 2, 6, 2, "resize:rank=0,comm=tp0,seq=26,factor=3");
  auto rr = open(resize.dir);
  const auto* c = rr.ranks[0].flight->comm("tp0")->find(26);
  const auto* d = rr.ranks[1].flight->comm("tp0")->find(26);
  ASSERT_TRUE(c && d);
  EXPECT_EQ(c->count, 3 * d->count);
  EXPECT_EQ(c->state, format::CollectiveState::kStarted);
}

TEST(SynthTest, DelayIsAStragglerNotAHang) {
  auto fast = make_run(scratch("fast"), 2, 4, 2);
  auto slow = make_run(scratch("slow"), 2, 4, 2, "delay:rank=1,range=forward/block0/mlp,ms=30");
  EXPECT_EQ(slow.summary.hang_step, -1);
  auto f = format::read_event_stream(format::event_stream_path(fast.dir, 0));
  auto s = format::read_event_stream(format::event_stream_path(slow.dir, 0));
  ASSERT_TRUE(f.ok() && s.ok());
  // Rank 0 is not delayed itself but waits for rank 1 every step.
  const double extra =
      double((s->steps[3].end_ns - s->steps[0].begin_ns) - (f->steps[3].end_ns - f->steps[0].begin_ns)) / 1e6;
  EXPECT_NEAR(extra, 4 * 30.0, 10.0);
}

TEST(SynthTest, SameOptionsGiveTheSameBytes) {
  auto a = make_run(scratch("a"), 4, 3, 2, "stall:rank=2");
  auto b = make_run(scratch("b"), 4, 3, 2, "stall:rank=2");
  for (int r = 0; r < 4; ++r) {
    auto read = [](const std::filesystem::path& p) {
      std::ifstream in(p, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_EQ(read(format::event_stream_path(a.dir, r)), read(format::event_stream_path(b.dir, r))) << r;
  }
}

TEST(SynthTest, FaultParsingAndDefaults) {
  auto f = parse_fault("stall:rank=3,range=data,step=2");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, FaultKind::kStall);
  EXPECT_EQ(f->rank, 3);
  EXPECT_EQ(f->range, "data");
  EXPECT_EQ(f->step, 2);
  EXPECT_FALSE(parse_fault("explode:rank=1").ok());
  EXPECT_NE(parse_fault("explode:rank=1").status().message().find("stall, skip"), std::string::npos);
  EXPECT_FALSE(parse_fault("stall:rank=x").ok());
  EXPECT_FALSE(parse_fault("stall:colour=red").ok());
  EXPECT_FALSE(parse_fault("stall:rank").ok());

  SynthOptions o;
  o.ranks = 4;
  o.steps = 10;
  o.tp = 2;
  o.fault = *parse_fault("skip");
  auto r = resolve_fault(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->comm, "tp0");
  EXPECT_GT(r->seq, 0);
  o.fault = *parse_fault("stall");
  EXPECT_EQ(resolve_fault(o)->range, "forward/embed");
  EXPECT_EQ(resolve_fault(o)->step, 5);
}

TEST(SynthTest, BadOptionsAreClearErrors) {
  SynthOptions o;
  o.ranks = 6;
  o.tp = 4;
  EXPECT_NE(resolve_fault(o).status().message().find("must divide"), std::string::npos);
  o.tp = 1;
  o.fault = *parse_fault("drop-grad");
  o.ranks = 2;
  o.tp = 2;
  EXPECT_NE(resolve_fault(o).status().message().find("data parallelism"), std::string::npos);
  o.fault = *parse_fault("stall:range=nowhere");
  EXPECT_NE(resolve_fault(o).status().message().find("unknown range"), std::string::npos);
  o.fault = *parse_fault("stall:rank=9");
  EXPECT_FALSE(resolve_fault(o).ok());
  o.fault = *parse_fault("skip:rank=1,comm=dp0");  // rank 1 is in tp0, and there is no dp0 at tp=2 x dp=1
  EXPECT_FALSE(resolve_fault(o).ok());
}

}  // namespace
}  // namespace rankscope::synth
