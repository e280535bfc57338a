// flight_recorder_robustness_test.cpp — truncated, zero-filled, random and wrong-version files give
// a clear error naming the file and never a crash (this suite runs under ASan+UBSan in CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <cstring>

#include "flight_recorder_copies.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/peer_counts.h"
#include "test_files.h"

namespace rankscope::format {
namespace {

using testing::read_bytes;
using testing::scratch_dir;
using testing::write_bytes;

class FlightRobustness : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("flightrob");
    good_ = dir_ / "rank00000.flight";
    FlightLayoutParams p;
    p.max_threads = 2;
    p.max_comms = 2;
    p.ring_entries = 4;
    p.max_params = 4;
    p.max_range_depth = 4;
    auto w = FlightRecorderWriter::create(good_, {0, 2, 0, 1, "h", "r", 1}, p);
    ASSERT_TRUE(w.ok());
    const int t = (*w)->claim_thread_slot(1, "main");
    (*w)->push_range(t, "forward/embed", 1);
    const int c = (*w)->register_comm("tp0", 2, 0);
    (*w)->collective_enqueue(c, {CollectiveOp::kAllReduceSum, DataType::kFloat32, 4, 16, -1}, 0, "x", 2);
    (*w)->register_param("wte.weight", 0, 10);
    bytes_ = read_bytes(good_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<FlightRecorderSnapshot> read_mutated(const std::vector<uint8_t>& b) {
    const auto p = dir_ / "rank00001.flight";
    write_bytes(p, b);
    return read_flight_recorder(p);
  }

  std::filesystem::path dir_, good_;
  std::vector<uint8_t> bytes_;
};

TEST_F(FlightRobustness, GoodFileReads) { EXPECT_TRUE(read_flight_recorder(good_).ok()); }

TEST_F(FlightRobustness, MissingFileIsNotFound) {
  auto r = read_flight_recorder(dir_ / "rank00009.flight");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("rank00009.flight"), std::string::npos);
}

TEST_F(FlightRobustness, EveryTruncationIsAClearError) {
  for (size_t len : {size_t(0), size_t(1), size_t(7), size_t(100), size_t(4095), size_t(4096), size_t(5000),
                     bytes_.size() / 2, bytes_.size() - 1}) {
    std::vector<uint8_t> b(bytes_.begin(), bytes_.begin() + long(len));
    auto r = read_mutated(b);
    ASSERT_FALSE(r.ok()) << "length " << len;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << len;
    EXPECT_NE(r.status().message().find("rank00001.flight"), std::string::npos) << r.status().message();
  }
}

TEST_F(FlightRobustness, ZeroFilledFileSaysSo) {
  auto r = read_mutated(std::vector<uint8_t>(bytes_.size(), 0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("zero-filled"), std::string::npos) << r.status().message();
}

TEST_F(FlightRobustness, WrongVersionIsUnsupportedWithTheVersion) {
  auto b = bytes_;
  auto* h = reinterpret_cast<FlightHeader*>(b.data());
  h->schema_version = 99;
  auto r = read_mutated(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("99"), std::string::npos);
}

TEST_F(FlightRobustness, WrongMagicIsCorrupt) {
  auto b = bytes_;
  b[0] = 'X';
  auto r = read_mutated(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad magic"), std::string::npos);
}

TEST_F(FlightRobustness, RandomBytesNeverCrash) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> b(bytes_.size());
    for (auto& x : b) x = uint8_t(rng());
    auto r = read_mutated(b);
    EXPECT_FALSE(r.ok());
  }
}

TEST_F(FlightRobustness, RandomBytesBehindAValidHeaderNeverCrash) {
  // Keep magic and version, scramble everything else (layout included): the reader must validate.
  std::mt19937_64 rng(7);
  int accepted = 0;
  for (int i = 0; i < 300; ++i) {
    auto b = bytes_;
    const size_t from = (i % 3 == 0) ? 12 : sizeof(FlightHeader) - 1000;
    for (size_t k = from; k < b.size(); ++k)
      if (rng() % 4 == 0) b[k] = uint8_t(rng());
    auto r = read_mutated(b);
    if (!r.ok()) continue;
    // A valid layout with garbage content is legal; its strings must still be safe to print as JSON.
    ++accepted;
    auto printable = [](std::string_view s) {
      return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
    };
    EXPECT_TRUE(printable(r->host) && printable(r->run_id) && printable(r->live.phase));
    for (const auto& c : r->comms) {
      EXPECT_TRUE(printable(c.name));
      for (const auto& rec : c.ring) EXPECT_TRUE(printable(rec.range));
    }
  }
  EXPECT_GT(accepted, 0) << "no scrambled file got past validation: the content checks are not exercised";
}

// Offsets from a corrupt header that break a section's alignment: reading the slots through their
// struct types would be undefined behaviour (a fault on aarch64), so the layout is refused.
TEST_F(FlightRobustness, MisalignedSectionOffsetIsCorrupt) {
  for (int section = 0; section < 3; ++section) {
    auto b = bytes_;
    auto* h = reinterpret_cast<FlightHeader*>(b.data());
    uint64_t& offset = section == 0 ? h->threads_offset : section == 1 ? h->comms_offset : h->params_offset;
    offset += 4;
    auto r = read_mutated(b);
    ASSERT_FALSE(r.ok()) << "section " << section;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().message().find("rank00001.flight"), std::string::npos) << r.status().message();
  }
}

TEST_F(FlightRobustness, MisalignedLearnedBoundsAreIgnoredWithAWarning) {
  auto b = bytes_;
  auto* h = reinterpret_cast<FlightHeader*>(b.data());
  ASSERT_NE(h->bounds.bounds_offset, 0u);
  h->bounds.bounds_offset += 4;
  EXPECT_TRUE(writable_extents(b).empty()) << "a section the parse rejects: whole copies";
  auto r = read_mutated(b);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->bounds.empty());
  EXPECT_NE(std::find(r->warnings.begin(), r->warnings.end(), "learned-bounds section inconsistent: ignored"),
            r->warnings.end());
}

// A peer-counts directory whose per-communicator bytes are fewer than the 8-byte call counter read
// from each slot, its section at the very end of the file: reading the counters would run past the
// end. The copy plan falls back to whole copies, and the file still reads.
TEST_F(FlightRobustness, PeerCountsSlotsSmallerThanTheirCounterAreRefused) {
  auto b = bytes_;
  PeerCountsDirectory d;
  std::memcpy(&d, b.data() + kPeerCountsDirectoryOffset, sizeof(d));
  ASSERT_NE(d.offset, 0u);
  ASSERT_FALSE(writable_extents(b).empty());
  d.comm_bytes = 4;
  d.offset = b.size() - 2 * d.comm_bytes;  // two communicators, the last slot's 4 bytes end the file
  std::memcpy(b.data() + kPeerCountsDirectoryOffset, &d, sizeof(d));
  std::memset(b.data() + d.offset, 0xff, 2 * d.comm_bytes);
  EXPECT_TRUE(writable_extents(b).empty());
  auto r = read_mutated(b);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const auto& c : r->comms) EXPECT_TRUE(c.peer_counts.empty());
}

TEST_F(FlightRobustness, MisalignedPeerCountsSectionIsIgnoredWithAWarning) {
  auto b = bytes_;
  PeerCountsDirectory d;
  std::memcpy(&d, b.data() + kPeerCountsDirectoryOffset, sizeof(d));
  d.offset -= 4;
  std::memcpy(b.data() + kPeerCountsDirectoryOffset, &d, sizeof(d));
  auto r = read_mutated(b);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(std::find(r->warnings.begin(), r->warnings.end(), "tp0: peer-counts section inconsistent: ignored"),
            r->warnings.end());
}

// Bytes a caller holds at an odd address parse as the same bytes aligned do.
TEST_F(FlightRobustness, BytesAtAnOddAddressParse) {
  std::vector<uint8_t> shifted(bytes_.size() + 1);
  std::memcpy(shifted.data() + 1, bytes_.data(), bytes_.size());
  auto r = parse_flight_recorder({shifted.data() + 1, bytes_.size()}, "odd");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->threads.size(), 1u);
  ASSERT_EQ(r->threads[0].stack.size(), 1u);
  EXPECT_EQ(r->threads[0].stack[0].name, "forward/embed");
}

}  // namespace
}  // namespace rankscope::format
