// event_stream_test.cpp — event stream round trip, crash tolerance and bad input.
#include <gtest/gtest.h>

#include <zlib.h>

#include <random>

#include "rankscope/format/event_stream.h"
#include "test_files.h"

namespace rankscope::format {
namespace {

using testing::read_bytes;
using testing::scratch_dir;
using testing::write_bytes;

StepRecord make_step(EventStreamWriter& w, int64_t step) {
  StepRecord s;
  s.step = step;
  s.begin_ns = 1000 * step;
  s.end_ns = 1000 * step + 900;
  s.ranges.push_back({w.intern(NameKind::kRange, "forward/embed"), 1, 120, 0});
  s.ranges.push_back({w.intern(NameKind::kRange, "forward/block0/mlp"), 2, 300 + step, 0});
  const uint32_t tp = w.intern(NameKind::kComm, "tp0");
  s.collectives.push_back({tp, uint8_t(CollectiveOp::kAllReduceSum), uint8_t(DataType::kFloat32),
                           uint8_t(CollectiveState::kCompleted), 0, s.ranges[1].name_id, 0, uint64_t(step),
                           4096, s.begin_ns + 10, s.begin_ns + 10, s.begin_ns + 50});
  s.counters.push_back({w.intern(NameKind::kCounter, "embed.local_tokens"), 0, 3942.0 + double(step)});
  return s;
}

class EventStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("events");
    file_ = dir_ / "rank00001.events";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `steps` steps, flushing after each (as the probe does), plus a clock and a trace.
  void write_run(int steps, bool end) {
    auto w = EventStreamWriter::create(file_, {kEventsSchemaVersion, 1, 2, 123, "run-x"});
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    (*w)->write_clock({-300, 25, 99, 16, 0});
    for (int i = 0; i < steps; ++i) {
      (*w)->write_step(make_step(**w, i));
      if (i == 1) {
        const uint32_t k = (*w)->intern(NameKind::kKernel, "sgemm_kernel");
        const uint32_t r = (*w)->intern(NameKind::kRange, "forward/block0/mlp");
        TraceRange tr{r, 7, 10, 20, 1, 0};
        TraceKernel tk{k, r, 3, 0, 12, 18};
        (*w)->write_trace_ranges(i, std::span<const TraceRange>(&tr, 1));
        (*w)->write_trace_kernels(i, std::span<const TraceKernel>(&tk, 1));
        GradArrival ga{(*w)->intern(NameKind::kParam, "wte.weight"), 2, 55};
        (*w)->write_grad_arrivals(i, std::span<const GradArrival>(&ga, 1));
      }
      ASSERT_TRUE((*w)->flush().ok());
    }
    if (end) (*w)->write_end(424242);
  }

  std::filesystem::path dir_, file_;
};

TEST_F(EventStreamTest, RoundTrip) {
  write_run(5, true);
  auto s = read_event_stream(file_);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->scan.header.rank, 1);
  EXPECT_EQ(s->scan.header.world_size, 2);
  EXPECT_EQ(s->scan.header.run_id, "run-x");
  EXPECT_TRUE(s->scan.ended);
  EXPECT_FALSE(s->scan.truncated_tail);
  ASSERT_TRUE(s->clock.has_value());
  EXPECT_EQ(s->clock->offset_ns, -300);
  ASSERT_EQ(s->steps.size(), 5u);
  const StepRecord& st = s->steps[3];
  EXPECT_EQ(st.step, 3);
  ASSERT_EQ(st.ranges.size(), 2u);
  EXPECT_EQ(s->name(st.ranges[1].name_id), "forward/block0/mlp");
  EXPECT_EQ(st.ranges[1].total_ns, 303);
  ASSERT_EQ(st.collectives.size(), 1u);
  EXPECT_EQ(s->name(st.collectives[0].comm_id), "tp0");
  EXPECT_EQ(st.collectives[0].seq, 3u);
  EXPECT_EQ(st.collectives[0].end_ns, 3050);
  ASSERT_EQ(st.counters.size(), 1u);
  EXPECT_EQ(s->name(st.counters[0].name_id), "embed.local_tokens");
  EXPECT_DOUBLE_EQ(st.counters[0].value, 3945.0);
  ASSERT_EQ(s->traces.size(), 1u);
  EXPECT_EQ(s->traces[0].step, 1);
  ASSERT_EQ(s->traces[0].kernels.size(), 1u);
  EXPECT_EQ(s->name(s->traces[0].kernels[0].name_id), "sgemm_kernel");
  ASSERT_EQ(s->grads.size(), 1u);
  EXPECT_EQ(s->name(s->grads[0].arrivals[0].param_id), "wte.weight");
  EXPECT_EQ(s->end_ns, 424242);
  EXPECT_EQ(s->find_name("tp0"), st.collectives[0].comm_id);
}

TEST_F(EventStreamTest, EveryTruncationKeepsTheCompleteRecords) {
  write_run(4, true);
  const auto full = read_bytes(file_);
  auto all = read_event_stream(file_);
  ASSERT_TRUE(all.ok());
  size_t previous_steps = 0;
  for (size_t len = 64; len < full.size(); ++len) {
    write_bytes(file_, {full.begin(), full.begin() + long(len)});
    auto s = read_event_stream(file_);
    ASSERT_TRUE(s.ok()) << len << ": " << s.status().to_string();
    EXPECT_TRUE(s->scan.warnings.empty()) << len << ": " << s->scan.warnings.front();
    EXPECT_FALSE(s->scan.ended);
    EXPECT_GE(s->steps.size(), previous_steps);  // never loses a record that was complete
    previous_steps = s->steps.size();
    for (const auto& st : s->steps) EXPECT_EQ(st.collectives.size(), 1u);
  }
  EXPECT_EQ(previous_steps, all->steps.size());
}

TEST_F(EventStreamTest, CorruptMiddleRecordStopsWithAWarning) {
  write_run(4, true);
  auto b = read_bytes(file_);
  b[b.size() / 2] ^= 0xff;
  write_bytes(file_, b);
  auto s = read_event_stream(file_);
  ASSERT_TRUE(s.ok());
  ASSERT_FALSE(s->scan.warnings.empty());
  EXPECT_NE(s->scan.warnings[0].find("rank00001.events"), std::string::npos);
  EXPECT_LT(s->steps.size(), 4u);
}

TEST_F(EventStreamTest, BadHeadersAreClearErrors) {
  write_run(1, false);
  const auto good = read_bytes(file_);
  write_bytes(file_, {});
  EXPECT_EQ(read_event_stream(file_).status().code(), StatusCode::kCorrupt);
  write_bytes(file_, {good.begin(), good.begin() + 30});
  EXPECT_NE(read_event_stream(file_).status().message().find("truncated"), std::string::npos);
  auto b = good;
  b[0] = 'Z';
  write_bytes(file_, b);
  EXPECT_NE(read_event_stream(file_).status().message().find("bad magic"), std::string::npos);
  b = good;
  b[8] = 42;  // schema_version
  write_bytes(file_, b);
  auto r = read_event_stream(file_);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("42"), std::string::npos);
  EXPECT_EQ(read_event_stream(dir_ / "nope.events").status().code(), StatusCode::kNotFound);
}

TEST_F(EventStreamTest, RandomBytesNeverCrash) {
  write_run(3, true);
  const auto good = read_bytes(file_);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 300; ++i) {
    auto b = good;
    if (i % 2) {
      for (size_t k = 0; k < b.size(); ++k) b[k] = uint8_t(rng());
    } else {
      for (size_t k = 64; k < b.size(); ++k)
        if (rng() % 8 == 0) b[k] = uint8_t(rng());
    }
    write_bytes(file_, b);
    auto s = read_event_stream(file_);
    if (i % 2) {
      EXPECT_FALSE(s.ok());
    } else if (s.ok()) {
      EXPECT_LE(s->steps.size(), 3u);
    }
  }
}

TEST_F(EventStreamTest, UnknownRecordTypesAreSkipped) {
  write_run(2, true);
  // Splice a record of type 999 (a future writer's) after the header; its CRC must be valid.
  auto b = read_bytes(file_);
  std::vector<uint8_t> rec = {0xe7, 0x03, 0, 0, 3, 0, 0, 0, 'a', 'b', 'c'};
  const uint32_t crc = uint32_t(crc32(crc32(0L, Z_NULL, 0), rec.data(), uInt(rec.size())));
  for (int k = 0; k < 4; ++k) rec.push_back(uint8_t(crc >> (8 * k)));
  b.insert(b.begin() + 64, rec.begin(), rec.end());
  write_bytes(file_, b);
  auto s = read_event_stream(file_);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->scan.warnings.empty());
  EXPECT_EQ(s->steps.size(), 2u);
}

}  // namespace
}  // namespace rankscope::format
