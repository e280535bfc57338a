// probed_counts_test.cpp — ProbedCommunicator hands each all_to_all_v's per-peer counts to the
// probe, which keeps them in the flight recorder, also for a call the backend refuses.
#include <gtest/gtest.h>

#include "comm/loopback_communicator.h"
#include "comm/probed_communicator.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"

namespace gpt2 {
namespace {

TEST(ProbedCommunicator, AllToAllVCountsReachTheFlightRecorder) {
  auto dir = std::filesystem::path(RANKSCOPE_BINARY_DIR) / "probed-counts";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rankscope::probe::Options po;
  po.run_dir = dir;
  po.nvtx = false;
  po.cupti = false;
  auto probe = rankscope::probe::Probe::create(po);
  ASSERT_TRUE(probe.ok()) << probe.status().to_string();
  ProbedCommunicator ep(std::make_unique<LoopbackCommunicator>("ep0"), probe->get(), nullptr);
  std::vector<float> in(12, 1.0f), out(12, 0.0f);
  const size_t five[] = {5}, four[] = {4}, zero[] = {0};
  ASSERT_TRUE(ep.all_to_all_v(in.data(), five, zero, out.data(), five, zero, DataType::kFloat32).ok());
  // Expects 4 where 5 are sent: the backend refuses, the recorder still holds both vectors.
  EXPECT_FALSE(ep.all_to_all_v(in.data(), five, zero, out.data(), four, zero, DataType::kFloat32).ok());

  auto snap = rankscope::format::read_flight_recorder(rankscope::format::flight_recorder_path(dir, 0));
  ASSERT_TRUE(snap.ok()) << snap.status().to_string();
  const auto* c = snap->comm("ep0");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->peer_counts.size(), 2u);
  EXPECT_EQ(c->ring[1].state, rankscope::format::CollectiveState::kFailed);
  const auto* bad = c->find_counts(1);
  ASSERT_NE(bad, nullptr);
  ASSERT_TRUE(bad->exact);
  EXPECT_EQ(bad->detail->send, std::vector<uint64_t>{5});
  EXPECT_EQ(bad->detail->recv, std::vector<uint64_t>{4});
  EXPECT_EQ(c->find_counts(0)->detail->recv, std::vector<uint64_t>{5});
}

}  // namespace
}  // namespace gpt2
