// hang_wait_graph_test.cpp — the wait graph across communicators on our own recorders,
// written the way the GPU trainer writes them (no GPU needed): the classifier that reads PyTorch's
// dumps reads these, and a rank whose device stopped reporting completions is named the same way.
//   tp0 = [0, 1]; allreduce #0 completed on both. Allreduce #1: rank 0 completed it, rank 1 enqueued it
//   on its stream and never saw it complete (its GPU, or the thread watching it, stopped). #2: rank 0
//   enqueued it and waits; rank 1's host never got there.
#include <gtest/gtest.h>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers::hang::wait_graph_tests {
namespace {

using format::CollectiveDesc;
using format::CollectiveOp;
using format::DataType;
using format::FlightRecorderWriter;
using testing::FakeProcessTable;
using testing::scratch;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr int64_t kS = 1'000'000'000;

void write_rank(const std::filesystem::path& dir, int rank, FakeProcessTable& procs) {
  format::FlightIdentity id;
  id.rank = rank;
  id.world_size = 2;
  id.pid = 5000 + rank;
  id.host = "gpuhost";
  id.run_id = "device-stopped";
  id.start_ns = kT0;
  auto w = FlightRecorderWriter::create(format::flight_recorder_path(dir, rank), id);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  FlightRecorderWriter& f = **w;
  procs.table[{"gpuhost", id.pid}] = Liveness::kAlive;
  const int main = f.claim_thread_slot(id.pid, "main");
  const int tp0 = f.register_comm("tp0", 2, rank);
  f.set_step(3, kT0 + 1 * kS);
  f.push_range(main, "step", kT0 + 1 * kS);
  const CollectiveDesc ar{CollectiveOp::kAllReduceSum, DataType::kFloat32, 1024, 4096, -1};
  const uint64_t s0 = f.collective_enqueue(tp0, ar, 3, "forward/block0/attn", kT0 + 1 * kS);
  f.collective_host_returned(tp0, s0);
  f.collective_complete(tp0, s0, kT0 + 1 * kS + 1000);
  const uint64_t s1 = f.collective_enqueue(tp0, ar, 3, "forward/block0/mlp", kT0 + 2 * kS);
  f.collective_host_returned(tp0, s1);
  if (rank == 0) {
    f.collective_complete(tp0, s1, kT0 + 2 * kS + 1000);
    const uint64_t s2 = f.collective_enqueue(tp0, ar, 3, "forward/block1/attn", kT0 + 3 * kS);
    f.collective_host_returned(tp0, s2);
  }
  f.heartbeat(kT0 + 40 * kS);  // both processes beat; nothing progressed for 37 s
}

TEST(HangWaitGraph, ARankWhosePeersCompletedWhatItShowsOpenHasAStoppedDevice) {
  const auto dir = scratch("device-stopped");
  FakeProcessTable procs;
  procs.host = "gpuhost";
  format::RunMetadata meta;
  meta.run_id = "device-stopped";
  meta.world_size = 2;
  meta.tp = 2;
  meta.dp = 1;
  meta.groups = {{"world", {0, 1}}, {"tp0", {0, 1}}, {"dp0", {0}}, {"dp1", {1}}};
  ASSERT_TRUE(format::write_run_metadata(dir, meta).ok());
  write_rank(dir, 0, procs);
  write_rank(dir, 1, procs);
  auto run = format::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  const Diagnosis d = diagnose(*run, procs);
  EXPECT_EQ(d.verdict, Verdict::kHang) << d.headline;
  EXPECT_EQ(kind_name(d.kind), "gpu_behind_host") << d.headline;
  ASSERT_EQ(d.culprit_ranks, std::vector<int>{1}) << d.headline;
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->seq, 2u) << d.headline;  // what rank 0 waits in and rank 1 never entered
  EXPECT_NE(d.headline.find("rank 1: allreduce #1 on tp0"), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find("stopped reporting completions"), std::string::npos) << d.headline;
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].culprit, 1);
  ASSERT_EQ(d.waits[0].missing_from.size(), 1u);
  EXPECT_EQ(d.waits[0].missing_from[0].waiters, std::vector<int>{0});
  EXPECT_EQ(d.waits[0].missing_from[0].collective.seq, 2u);
}

}  // namespace
}  // namespace rankscope::analyzers::hang::wait_graph_tests
