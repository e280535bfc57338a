// probe_peer_counts_test.cpp — the probe keeps each all_to_all_v's per-peer counts in the flight
// recorder (the optional spans of CollectiveDesc), from several threads at once, while another
// reader copies the file: every record read is whole (its totals match its vectors). Built under
// ThreadSanitizer by test.sh with the rest of probe_tests.
#include <atomic>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/probe.h"

namespace rankscope::probe {
namespace {

using testing::ScratchDir;
using testing::test_options;

// Call k on an ep group of 4: rows sent to each peer vary with k, received are fixed.
void all_to_all_v(Probe& probe, CommHandle comm, size_t k) {
  const std::vector<size_t> send{k, 2 * k, 3, k % 7}, recv{5, 6, 7, 8};
  format::CollectiveDesc d;
  d.op = format::CollectiveOp::kAllToAllV;
  d.dtype = format::DataType::kFloat32;
  d.count = std::accumulate(send.begin(), send.end(), size_t(0));
  d.bytes = d.count * 4;
  d.send_counts = send;
  d.recv_counts = recv;
  auto h = probe.collective_enqueue(comm, d);
  probe.collective_start(h);
  probe.collective_complete(h);
}

void expect_whole(const format::CommSnapshot& c) {
  for (const auto& p : c.peer_counts) {
    if (p.torn) continue;  // caught mid-write on every retry: marked, never trusted
    ASSERT_TRUE(p.exact);
    ASSERT_NE(p.detail, nullptr);
    EXPECT_EQ(p.send_total, std::accumulate(p.detail->send.begin(), p.detail->send.end(), uint64_t(0)));
    EXPECT_EQ(p.detail->recv, (std::vector<uint64_t>{5, 6, 7, 8}));
    EXPECT_EQ(p.detail->send[0], p.seq);  // call k has seq k on its communicator
  }
}

TEST(ProbePeerCounts, ThreadsRecordCountsAReaderSeesWholeRecords) {
  ScratchDir dir;
  auto created = Probe::create(test_options(dir.path(), 1, 4));
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Probe& probe = **created;
  CommHandle ep0 = probe.register_comm("ep0", 4, 1), ep1 = probe.register_comm("ep1", 4, 1);
  constexpr size_t kCalls = 400;
  std::atomic<bool> done{false};
  std::thread a([&] { for (size_t k = 0; k < kCalls; ++k) all_to_all_v(probe, ep0, k); });
  std::thread b([&] { for (size_t k = 0; k < kCalls; ++k) all_to_all_v(probe, ep1, k); });
  std::thread reader([&] {
    while (!done.load()) {
      auto snap = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 1));
      ASSERT_TRUE(snap.ok());
      for (const auto& c : snap->comms) expect_whole(c);
    }
  });
  a.join();
  b.join();
  done = true;
  reader.join();
  auto snap = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 1));
  ASSERT_TRUE(snap.ok());
  for (const char* name : {"ep0", "ep1"}) {
    const auto* c = snap->comm(name);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->peer_counts.size(), format::kPeerCountsEntriesPerComm);
    EXPECT_EQ(c->peer_counts.back().seq, kCalls - 1);
    expect_whole(*c);
  }
}

}  // namespace
}  // namespace rankscope::probe
