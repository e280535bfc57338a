// hang_device_lag_test.cpp — "the GPU is behind the host", from recorders written the way the GPU
// trainer writes them (no GPU needed: the flight recorder is plain bytes):
//   - NCCL, stream-ordered: every rank enqueued allreduce #N on tp0 and returned; one rank's
//     device never started it (its compute stream spins in a kernel), the peer's did;
//   - ranks sharing a GPU (MPI with host staging): the stalled rank's host waits in device_sync
//     for its GPU before the collective, while its peer waits in the collective.
// And the contrasts: all started on the device, none finished, stays stuck_in_collective; no device
// started it on any rank, whose recorders see device starts (#0 has one), is every GPU behind.
#include <gtest/gtest.h>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers::hang::device_lag_tests {
namespace {

using format::CollectiveDesc;
using format::CollectiveOp;
using format::DataType;
using format::FlightRecorderWriter;
using testing::FakeProcessTable;
using testing::scratch;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr int64_t kS = 1'000'000'000;

// How one rank's side of tp0 allreduce #1 looks at the snapshot (#0 completed on every rank).
enum class Side {
  kDeviceNeverStarted,  // enqueued on the stream, host returned, device never reached it
  kDeviceStarted,       // enqueued, host returned, device started it and waits for peers
  kHostWaitsForDevice,  // host staging: inside device_sync, never called the collective
  kHostInCall,          // MPI: host inside the collective call
};

void write_rank(const std::filesystem::path& dir, int rank, Side side, FakeProcessTable& procs) {
  format::FlightIdentity id;
  id.rank = rank;
  id.world_size = 2;
  id.pid = 4000 + rank;
  id.host = "gpuhost";
  id.run_id = "device-lag";
  id.start_ns = kT0;
  auto w = FlightRecorderWriter::create(format::flight_recorder_path(dir, rank), id);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  FlightRecorderWriter& f = **w;
  procs.table[{"gpuhost", id.pid}] = Liveness::kAlive;
  const int main = f.claim_thread_slot(id.pid, "main");
  const int tp0 = f.register_comm("tp0", 2, rank);
  f.set_step(3, kT0 + 1 * kS);
  f.push_range(main, "step", kT0 + 1 * kS);
  f.push_range(main, "backward/block1", kT0 + 1 * kS);
  f.push_range(main, "backward/block1/mlp", kT0 + 1 * kS);
  const CollectiveDesc ar{CollectiveOp::kAllReduceSum, DataType::kFloat32, 1024, 4096, -1};
  const uint64_t s0 = f.collective_enqueue(tp0, ar, 3, "backward/block1/mlp", kT0 + 1 * kS);
  f.collective_start(tp0, s0, kT0 + 1 * kS);
  f.collective_complete(tp0, s0, kT0 + 1 * kS + 1000);
  switch (side) {
    case Side::kDeviceNeverStarted:
    case Side::kDeviceStarted: {
      const uint64_t s1 = f.collective_enqueue(tp0, ar, 3, "backward/block1/mlp", kT0 + 2 * kS);
      f.collective_host_returned(tp0, s1);
      if (side == Side::kDeviceStarted) f.collective_start(tp0, s1, kT0 + 2 * kS + 1000);
      f.pop_range(main);
      f.push_range(main, "backward/block1/attn", kT0 + 2 * kS);  // the host went on
      break;
    }
    case Side::kHostWaitsForDevice:
      f.push_range(main, "device_sync", kT0 + 2 * kS);
      break;
    case Side::kHostInCall: {
      const uint64_t s1 = f.collective_enqueue(tp0, ar, 3, "backward/block1/mlp", kT0 + 2 * kS);
      f.collective_start(tp0, s1, kT0 + 2 * kS);
      break;
    }
  }
  f.heartbeat(kT0 + 40 * kS);  // both processes beat; nothing progressed for 38 s
}

Diagnosis diagnose_pair(const std::filesystem::path& dir, Side rank0, Side rank1) {
  FakeProcessTable procs;
  procs.host = "gpuhost";
  format::RunMetadata meta;
  meta.run_id = "device-lag";
  meta.world_size = 2;
  meta.tp = 2;
  meta.dp = 1;
  meta.groups = {{"world", {0, 1}}, {"tp0", {0, 1}}, {"dp0", {0}}, {"dp1", {1}}};
  EXPECT_TRUE(format::write_run_metadata(dir, meta).ok());
  write_rank(dir, 0, rank0, procs);
  write_rank(dir, 1, rank1, procs);
  auto run = format::open_run_directory(dir);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  return diagnose(*run, procs);
}

TEST(HangDeviceLag, NcclRankWhoseDeviceNeverStartedTheCollectiveIsBehindItsHost) {
  const Diagnosis d = diagnose_pair(scratch("lag"), Side::kDeviceStarted, Side::kDeviceNeverStarted);
  EXPECT_EQ(d.verdict, Verdict::kHang) << d.headline;
  EXPECT_EQ(kind_name(d.kind), "gpu_behind_host") << d.headline;
  ASSERT_EQ(d.culprit_ranks, std::vector<int>{1}) << d.headline;
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp0");
  EXPECT_EQ(d.collective->seq, 1u);
  EXPECT_NE(d.headline.find("rank 1 enqueued"), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find("GPU never started it"), std::string::npos) << d.headline;
}

TEST(HangDeviceLag, SharedGpuRankWaitingInDeviceSyncIsBehindItsHost) {
  const Diagnosis d = diagnose_pair(scratch("staging"), Side::kHostWaitsForDevice, Side::kHostInCall);
  EXPECT_EQ(d.verdict, Verdict::kHang) << d.headline;
  EXPECT_EQ(kind_name(d.kind), "gpu_behind_host") << d.headline;
  ASSERT_EQ(d.culprit_ranks, std::vector<int>{0}) << d.headline;
  ASSERT_TRUE(d.collective);
  EXPECT_EQ(d.collective->comm, "tp0");
  EXPECT_EQ(d.collective->seq, 1u);
  EXPECT_NE(d.headline.find("device_sync"), std::string::npos) << d.headline;
}

TEST(HangDeviceLag, AllStartedOnTheDeviceNoneFinishedIsStillStuckInTheCollective) {
  const Diagnosis d = diagnose_pair(scratch("both"), Side::kDeviceStarted, Side::kDeviceStarted);
  EXPECT_EQ(d.verdict, Verdict::kHang) << d.headline;
  EXPECT_EQ(d.kind, Kind::kStuckInCollective) << d.headline;
  EXPECT_TRUE(d.culprit_ranks.empty());
}

TEST(HangDeviceLag, NoDeviceStartedItWhereStartsAreRecordedIsEveryGpuBehind) {
  const Diagnosis d = diagnose_pair(scratch("none"), Side::kDeviceNeverStarted, Side::kDeviceNeverStarted);
  EXPECT_EQ(d.verdict, Verdict::kHang) << d.headline;
  EXPECT_EQ(kind_name(d.kind), "gpu_behind_host") << d.headline;
  EXPECT_EQ(d.culprit_ranks, (std::vector<int>{0, 1})) << d.headline;
  EXPECT_NE(d.headline.find("ranks 0,1 enqueued allreduce #1 on tp0"), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find("their GPU never started it, for 38 s"), std::string::npos) << d.headline;
  EXPECT_NE(d.explanation.find("No member's device started it"), std::string::npos) << d.explanation;
}

}  // namespace
}  // namespace rankscope::analyzers::hang::device_lag_tests
