// peer_counts_test.cpp — the flight recorder keeps each all_to_all_v's per-peer counts: exact for
// small communicators, summarised (totals, min/max, hash, sketch) beyond; older files read as none.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/peer_counts.h"
#include "test_files.h"

namespace rankscope::format {
namespace {

struct Recorder {
  std::filesystem::path file;
  std::unique_ptr<FlightRecorderWriter> w;
  int comm = -1;
};

Recorder make(const std::filesystem::path& dir, int comm_size, int rank_in_comm) {
  Recorder r;
  r.file = dir / "rank00001.flight";
  auto w = FlightRecorderWriter::create(r.file, FlightIdentity{1, comm_size, 1, 77, "h", "run", 1000});
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  r.w = std::move(w).value();
  r.comm = r.w->register_comm("ep0", comm_size, rank_in_comm);
  return r;
}

uint64_t alltoallv(Recorder& r, const std::vector<size_t>& send, const std::vector<size_t>& recv) {
  CollectiveDesc d;
  d.op = CollectiveOp::kAllToAllV;
  d.dtype = DataType::kFloat32;
  d.count = std::accumulate(send.begin(), send.end(), size_t(0));
  d.bytes = d.count * 4;
  d.send_counts = send;
  d.recv_counts = recv;
  return r.w->collective_enqueue(r.comm, d, 3, "forward/block1/moe/dispatch", 5000);
}

TEST(PeerCounts, ExactVectorsRoundTripForSmallCommunicators) {
  auto dir = testing::scratch_dir("peer");
  Recorder r = make(dir, 4, 1);
  CollectiveDesc counts_exchange{CollectiveOp::kAllToAll, DataType::kInt64, 4, 32, -1};
  (void)r.w->collective_enqueue(r.comm, counts_exchange, 3, "forward/block1/moe/dispatch", 4000);
  const std::vector<size_t> send{768 * 10, 768 * 20, 0, 768 * 5}, recv{768 * 11, 768 * 21, 768 * 3, 768 * 17571};
  const uint64_t seq = alltoallv(r, send, recv);
  EXPECT_EQ(seq, 1u);
  auto snap = read_flight_recorder(r.file);
  ASSERT_TRUE(snap.ok()) << snap.status().to_string();
  const CommSnapshot* c = snap->comm("ep0");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->peer_counts.size(), 1u);
  EXPECT_EQ(c->find_counts(0), nullptr);  // the counts all_to_all carries none
  const PeerCountsSnapshot* p = c->find_counts(1);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->exact);
  EXPECT_EQ(p->n_peers, 4u);
  EXPECT_EQ(p->rank_in_comm, 1);
  ASSERT_NE(p->detail, nullptr);
  EXPECT_EQ(p->detail->send, std::vector<uint64_t>(send.begin(), send.end()));
  EXPECT_EQ(p->detail->recv, std::vector<uint64_t>(recv.begin(), recv.end()));
  EXPECT_EQ(p->send_total, 768u * 35);
  EXPECT_EQ(p->detail->recv_min, 768u * 3);
  EXPECT_EQ(p->detail->recv_max, 768u * 17571);
  EXPECT_EQ(p->detail->send_min, 0u);
  EXPECT_EQ(p->detail->send_hash, peer_counts_hash(send));
  EXPECT_TRUE(snap->warnings.empty());
}

TEST(PeerCounts, LargeCommunicatorsKeepADigestWhoseSketchLocatesOneBadPair) {
  auto dir = testing::scratch_dir("peer");
  const int n = 100;
  // Every rank i sends 10 + (i + j) % 7 elements to j; rank 57 expects 3 more from rank 12.
  auto send_of = [&](int i) {
    std::vector<size_t> v(n);
    for (int j = 0; j < n; ++j) v[j] = 10 + (i + j) % 7;
    return v;
  };
  auto recv_of = [&](int j) {
    std::vector<size_t> v(n);
    for (int i = 0; i < n; ++i) v[i] = 10 + (i + j) % 7 + (j == 57 && i == 12 ? 3 : 0);
    return v;
  };
  uint64_t send_sketch = 0, recv_sketch = 0, send_total = 0, recv_total = 0;
  for (int i = 0; i < n; ++i) {
    auto rec = make_peer_counts_record(9, i, send_of(i), recv_of(i));
    EXPECT_EQ(rec.flags & kPeerCountsExact, 0u);
    send_sketch += rec.send_sketch;
    recv_sketch += rec.recv_sketch;
    send_total += rec.send_total;
    recv_total += rec.recv_total;
  }
  const uint64_t delta = send_total - recv_total;  // sent minus expected, mod 2^64: -3
  EXPECT_EQ(int64_t(delta), -3);
  int found = 0;
  for (uint32_t i = 0; i < uint32_t(n); ++i)
    for (uint32_t j = 0; j < uint32_t(n); ++j)
      if (delta * peer_pair_weight(i, j) == send_sketch - recv_sketch) {
        EXPECT_EQ(i, 12u);
        EXPECT_EQ(j, 57u);
        ++found;
      }
  EXPECT_EQ(found, 1);

  // And through a file: not exact, the summary survives.
  Recorder r = make(dir, n, 57);
  (void)alltoallv(r, send_of(57), recv_of(57));
  auto snap = read_flight_recorder(r.file);
  ASSERT_TRUE(snap.ok());
  const auto* p = snap->comm("ep0")->find_counts(0);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->exact);
  ASSERT_NE(p->detail, nullptr);
  EXPECT_TRUE(p->detail->send.empty());
  EXPECT_EQ(p->n_peers, uint32_t(n));
  EXPECT_EQ(p->detail->recv_max, 10u + (12 + 57) % 7 + 3);  // the inflated count from rank 12
  EXPECT_EQ(p->detail->recv_sketch, make_peer_counts_record(0, 57, send_of(57), recv_of(57)).recv_sketch);
}

TEST(PeerCounts, KeepsTheLastCallsPerCommunicator) {
  auto dir = testing::scratch_dir("peer");
  Recorder r = make(dir, 2, 0);
  for (size_t k = 0; k < kPeerCountsEntriesPerComm + 3; ++k) (void)alltoallv(r, {k, 1}, {k, 2});
  auto snap = read_flight_recorder(r.file);
  ASSERT_TRUE(snap.ok());
  const auto& pc = snap->comm("ep0")->peer_counts;
  ASSERT_EQ(pc.size(), kPeerCountsEntriesPerComm);
  EXPECT_EQ(pc.front().seq, 3u);
  EXPECT_EQ(pc.back().seq, kPeerCountsEntriesPerComm + 2);
  EXPECT_EQ(pc.back().detail->send[0], kPeerCountsEntriesPerComm + 2);
}

TEST(PeerCounts, FilesWithoutTheSectionReadAsNoCountsAndABrokenDirectoryIsAWarning) {
  auto dir = testing::scratch_dir("peer");
  Recorder r = make(dir, 2, 0);
  (void)alltoallv(r, {1, 2}, {3, 4});
  r.w.reset();
  auto bytes = testing::read_bytes(r.file);
  // As written before the section existed: the directory is zero.
  auto old = bytes;
  std::memset(old.data() + kPeerCountsDirectoryOffset, 0, sizeof(PeerCountsDirectory));
  auto snap = parse_flight_recorder(old, "old.flight");
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->comm("ep0")->peer_counts.empty());
  EXPECT_TRUE(snap->warnings.empty());
  // A directory pointing past the end: ignored with a warning, never a crash.
  auto bad = bytes;
  auto* d = reinterpret_cast<PeerCountsDirectory*>(bad.data() + kPeerCountsDirectoryOffset);
  d->offset = bad.size() - 10;
  snap = parse_flight_recorder(bad, "bad.flight");
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->comm("ep0")->peer_counts.empty());
  ASSERT_FALSE(snap->warnings.empty());
  EXPECT_NE(snap->warnings[0].find("peer-counts"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::format
