// rank_summary_test.cpp — the summaries a node sends instead of whole recorders: they decode to what
// was meant to be kept, give the verdict the whole recorders give, and refuse damaged bytes.
#include "rankscope/format/rank_summary.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/snapshot_stream.h"
#include "rankscope/synth/synth.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = fs::temp_directory_path() / ("rs_summary_" + tag + "_" + std::to_string(::getpid()) + "_" + info->name());
  fs::remove_all(dir);
  return dir;
}

// Processes on other machines: liveness from heartbeats alone, as for a gathered run without states.
class NoProcesses final : public analyzers::hang::ProcessTable {
 public:
  analyzers::Liveness liveness(const std::string&, int) override { return analyzers::Liveness::kUnknown; }
  std::string local_host() override { return {}; }
};

format::RunDirectory synthetic_run(const fs::path& dir, const std::string& fault, int ranks = 16, int tp = 4) {
  synth::SynthOptions o;
  o.ranks = ranks;
  o.steps = 6;
  o.tp = tp;
  o.ranks_per_host = 4;
  if (!fault.empty()) o.fault = *synth::parse_fault(fault);
  EXPECT_TRUE(synth::write_synthetic_run(dir, o).ok());
  auto run = format::open_run_directory(dir);
  EXPECT_TRUE(run.ok());
  return std::move(*run);
}

// Every rank's recorder replaced by what its summary decodes to, two nodes' worth of summaries.
format::RunDirectory through_summaries(const format::RunDirectory& run, size_t* bytes = nullptr) {
  format::RunDirectory out = run;
  const size_t half = run.ranks.size() / 2;
  size_t total = 0;
  for (size_t part = 0; part < 2; ++part) {
    format::RankSummaryWriter w;
    for (size_t i = part * half; i < (part ? run.ranks.size() : half); ++i)
      if (run.ranks[i].flight) w.add(*run.ranks[i].flight);
    const auto encoded = w.finish();
    total += encoded.size();
    auto decoded = format::decode_rank_summaries(encoded, "node test");
    EXPECT_TRUE(decoded.ok()) << decoded.status().message();
    for (size_t i = part * half; i < (part ? run.ranks.size() : half); ++i) out.ranks[i].flight.reset();
    for (auto& s : *decoded) out.ranks[size_t(s.rank)].flight = std::move(s);
  }
  if (bytes) *bytes = total;
  return out;
}

TEST(RankSummary, DecodesToTheSummaryOfEachRank) {
  const auto dir = scratch("roundtrip");
  const auto run = synthetic_run(dir, "stall:rank=5,range=backward/block1/mlp");
  format::RankSummaryWriter w;
  for (const auto& r : run.ranks) w.add(*r.flight);
  const auto bytes = w.finish();
  auto decoded = format::decode_rank_summaries(bytes, "node test");
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(decoded->size(), run.ranks.size());
  for (size_t i = 0; i < run.ranks.size(); ++i) {
    const auto want = format::summarize(*run.ranks[i].flight);
    const auto& got = (*decoded)[i];
    EXPECT_EQ(got.rank, want.rank);
    EXPECT_EQ(got.host, want.host);
    EXPECT_EQ(got.pid, want.pid);
    EXPECT_EQ(got.run_id, want.run_id);
    EXPECT_EQ(got.start_ns, want.start_ns);
    EXPECT_EQ(got.live.heartbeat_ns, want.live.heartbeat_ns);
    EXPECT_EQ(got.live.step, want.live.step);
    EXPECT_EQ(got.live.step_begin_ns, want.live.step_begin_ns);
    EXPECT_EQ(got.live.clock_offset_ns, want.live.clock_offset_ns);
    EXPECT_EQ(got.live.phase, want.live.phase);
    EXPECT_EQ(got.grad.backward_step, want.grad.backward_step);
    ASSERT_EQ(got.threads.size(), want.threads.size());
    for (size_t t = 0; t < got.threads.size(); ++t) {
      ASSERT_EQ(got.threads[t].stack.size(), want.threads[t].stack.size());
      for (size_t k = 0; k < got.threads[t].stack.size(); ++k) {
        EXPECT_EQ(got.threads[t].stack[k].name, want.threads[t].stack[k].name);
        EXPECT_EQ(got.threads[t].stack[k].begin_ns, want.threads[t].stack[k].begin_ns);
      }
    }
    EXPECT_EQ(got.bounds.size(), want.bounds.size());
    EXPECT_EQ(got.params.size(), want.params.size());
    ASSERT_EQ(got.comms.size(), want.comms.size());
    for (size_t c = 0; c < got.comms.size(); ++c) {
      const auto &g = got.comms[c], &x = want.comms[c];
      EXPECT_EQ(g.name, x.name);
      EXPECT_EQ(g.next_seq, x.next_seq);
      EXPECT_EQ(g.completed_count, x.completed_count);
      ASSERT_EQ(g.ring.size(), x.ring.size());
      for (size_t k = 0; k < g.ring.size(); ++k) {
        EXPECT_EQ(g.ring[k].seq, x.ring[k].seq);
        EXPECT_EQ(g.ring[k].op, x.ring[k].op);
        EXPECT_EQ(g.ring[k].state, x.ring[k].state);
        EXPECT_EQ(g.ring[k].count, x.ring[k].count);
        EXPECT_EQ(g.ring[k].enqueue_ns, x.ring[k].enqueue_ns);
        EXPECT_EQ(g.ring[k].end_ns, x.ring[k].end_ns);
        EXPECT_EQ(g.ring[k].range, x.ring[k].range);
      }
    }
  }
  // What a summary keeps: the open collectives, and no more than the newest 4 closed ones a communicator.
  const auto& stalled_peer = (*decoded)[4];  // rank 4 waits for rank 5 in tp1
  bool open = false;
  for (const auto& c : stalled_peer.comms) {
    int closed = 0;
    for (const auto& r : c.ring) (format::is_open(r.state) ? open : (++closed, open)) |= format::is_open(r.state);
    EXPECT_LE(closed, 4);
  }
  EXPECT_TRUE(open);
  fs::remove_all(dir);
}

// The verdict from summaries is the verdict from the whole recorders, fault by fault.
TEST(RankSummary, GiveTheVerdictOfTheWholeRecorders) {
  for (const std::string fault : {"", "stall:rank=5,range=backward/block1/mlp", "stall:rank=3,range=data",
                                  "crash:rank=6", "skip:rank=2", "resize:rank=9", "drop-grad:rank=7",
                                  "stall:rank=0,range=forward/embed,step=1"}) {
    SCOPED_TRACE(fault);
    const auto dir = scratch("verdict");
    const auto run = synthetic_run(dir, fault);
    NoProcesses none;
    const auto whole = analyzers::hang::diagnose(run, none);
    size_t bytes = 0;
    const auto summarized = through_summaries(run, &bytes);
    const auto reduced = analyzers::hang::diagnose(summarized, none);
    EXPECT_EQ(reduced.verdict, whole.verdict);
    EXPECT_EQ(reduced.kind, whole.kind);
    EXPECT_EQ(reduced.culprit_ranks, whole.culprit_ranks);
    EXPECT_EQ(reduced.collective.has_value(), whole.collective.has_value());
    if (reduced.collective && whole.collective) {
      EXPECT_EQ(reduced.collective->comm, whole.collective->comm);
      EXPECT_EQ(reduced.collective->seq, whole.collective->seq);
    }
    EXPECT_EQ(reduced.headline, whole.headline);
    // Small: a few hundred bytes a rank before the stream's deflate (a recorder here is 65 kB).
    EXPECT_LT(bytes / run.ranks.size(), 2000u);
    fs::remove_all(dir);
  }
}

TEST(RankSummary, DamagedBytesAreRefusedNamingTheSource) {
  const auto dir = scratch("damaged");
  const auto run = synthetic_run(dir, "stall:rank=1");
  format::RankSummaryWriter w;
  for (const auto& r : run.ranks) w.add(*r.flight);
  const auto bytes = w.finish();
  // Cut anywhere: an error, never a crash or a partial success.
  for (size_t n = 0; n < bytes.size(); n += 7) {
    auto r = format::decode_rank_summaries(std::span(bytes).first(n), "node n7");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(r.status().message().find("node n7"), std::string::npos);
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(format::decode_rank_summaries(longer, "node n7").ok());
  auto other = bytes;
  other[8] = 9;  // version 9
  auto r = format::decode_rank_summaries(other, "node n7");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version 9"), std::string::npos);
  // Flipped bytes: refused or decoded, never a crash (the fuzz target goes further).
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    auto flipped = bytes;
    flipped[8 + rng() % (flipped.size() - 8)] ^= uint8_t(1 + rng() % 255);
    (void)format::decode_rank_summaries(flipped, "node n7");
  }
  fs::remove_all(dir);
}

// The checked-in version-1 node stream with summaries (tests/fixtures/gather/v1): still read.
TEST(RankSummary, VersionOneFixtureStillDecodes) {
  std::ifstream in(std::string(RANKSCOPE_SOURCE_DIR) + "/tests/fixtures/gather/v1/node-summaries.snap", std::ios::binary);
  ASSERT_TRUE(in) << "fixture missing";
  const std::vector<uint8_t> stream((std::istreambuf_iterator<char>(in)), {});
  std::vector<uint8_t> summaries;
  auto r = format::decode_snapshot(stream, "fixture", [&](std::string_view name, std::span<const uint8_t> bytes) {
    if (name == format::kRankSummaryEntry) summaries.assign(bytes.begin(), bytes.end());
    return Status();
  });
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  auto decoded = format::decode_rank_summaries(summaries, "fixture");
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(decoded->size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const auto& s = (*decoded)[size_t(rank)];
    EXPECT_EQ(s.rank, rank);
    EXPECT_EQ(s.world_size, 2);
    EXPECT_EQ(s.host, "synth-node0");
    EXPECT_GT(s.live.heartbeat_ns, 0);
    ASSERT_FALSE(s.comms.empty());
    EXPECT_GT(s.comms.front().next_seq, 0u);
    EXPECT_FALSE(s.comms.front().ring.empty());
  }
}

TEST(RankSummary, EvidenceASummaryCannotCarryIsNamed) {
  format::FlightRecorderSnapshot s;
  s.comms.resize(1);
  s.comms[0].name = "ep0";
  EXPECT_EQ(format::why_not_summarized(s), "");
  s.comms[0].peer_counts.resize(1);
  EXPECT_NE(format::why_not_summarized(s).find("ep0"), std::string::npos);
}

}  // namespace
}  // namespace rankscope
