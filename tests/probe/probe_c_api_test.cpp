// probe_c_api_test.cpp — librankscope-probe.so through its C ABI (probe/c_api/rankscope_probe_c.h),
// linked as a program in another language would load it: what a caller records reads back through
// the format library, each misuse is -1 (or NULL) with one line of why, and a NULL probe is a no-op.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/rank_event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope_probe_c.h"

namespace rankscope::probe {
namespace {

// A fresh directory, removed at the end (the C ABI's test links no probe header, as its users do).
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rs_probe_c_XXXXXX").string();
    if (::mkdtemp(pattern.data())) path_ = pattern;
    EXPECT_FALSE(path_.empty());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(ProbeCApi, StepsRangesACollectiveCountersAndRunJsonReadBack) {
  ScratchDir dir;
  char err[256] = "";
  EXPECT_EQ(rankscope_probe_abi_version(), RANKSCOPE_PROBE_C_ABI_VERSION);
  rankscope_probe* p = rankscope_probe_open(dir.path().c_str(), 1, 2, err, sizeof err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(rankscope_probe_rank(p), 1);
  EXPECT_EQ(rankscope_probe_world_size(p), 2);
  EXPECT_EQ(rankscope_probe_write_run_json(p, R"({"program": "c-api-test", "training": {"seq_len": 64}})", err, sizeof err), 0)
      << err;
  const int world = rankscope_probe_register_comm(p, "world", 2, 1, err, sizeof err);
  ASSERT_GE(world, 0) << err;
  for (int64_t step = 0; step < 3; ++step) {
    rankscope_probe_begin_step(p, step);
    rankscope_probe_push_range(p, "forward");
    rankscope_probe_push_range(p, "forward/block0");
    rankscope_probe_pop_range(p);
    rankscope_probe_pop_range(p);
    rankscope_probe_push_range(p, "grad_sync");
    const int64_t token = rankscope_probe_collective_begin(p, world, "allreduce_sum", "fp32", 1000, 4000, err, sizeof err);
    ASSERT_GE(token, 0) << err;
    rankscope_probe_collective_end(p, token, 0);
    rankscope_probe_pop_range(p);
    rankscope_probe_counter(p, "loss", 3.0 - double(step));
    rankscope_probe_counter_add(p, "tokens", 10);
    rankscope_probe_counter_add(p, "tokens", 5);
    rankscope_probe_end_step(p);
  }
  rankscope_probe_close(p);

  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 1));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  EXPECT_TRUE(es->scan.ended);
  EXPECT_EQ(es->scan.header.rank, 1);
  EXPECT_EQ(es->scan.header.world_size, 2);
  ASSERT_EQ(es->steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const format::StepRecord& s = es->steps[i];
    EXPECT_EQ(s.step, int64_t(i));
    std::map<std::string, uint64_t> ranges;
    for (const auto& r : s.ranges) ranges[std::string(es->name(r.name_id))] = r.count;
    EXPECT_EQ(ranges["forward"], 1u);
    EXPECT_EQ(ranges["forward/block0"], 1u);
    EXPECT_EQ(ranges["grad_sync"], 1u);
    ASSERT_EQ(s.collectives.size(), 1u);
    const format::CollectiveEvent& c = s.collectives[0];
    EXPECT_EQ(es->name(c.comm_id), "world");
    EXPECT_EQ(es->name(c.range_id), "grad_sync");
    EXPECT_EQ(c.op, uint8_t(format::CollectiveOp::kAllReduceSum));
    EXPECT_EQ(c.state, uint8_t(format::CollectiveState::kCompleted));
    EXPECT_EQ(c.bytes, 4000u);
    EXPECT_EQ(c.seq, i);
    std::map<std::string, double> counters;
    for (const auto& v : s.counters) counters[std::string(es->name(v.name_id))] = v.value;
    EXPECT_DOUBLE_EQ(counters["loss"], 3.0 - double(i));
    EXPECT_DOUBLE_EQ(counters["tokens"], 15.0);
  }
  auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 1));
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  EXPECT_EQ(fr->live.process_state, format::ProcessState::kFinished);
  // Only rank 0 writes run.json: this rank's call checked the text and wrote nothing.
  EXPECT_FALSE(format::read_run_metadata(dir.path()).ok());
}

TEST(ProbeCApi, RankZeroWritesRunJsonWithWhatItFillsIn) {
  ScratchDir dir;
  char err[256] = "";
  rankscope_probe* p = rankscope_probe_open(dir.path().c_str(), 0, 1, err, sizeof err);
  ASSERT_NE(p, nullptr) << err;
  ASSERT_EQ(rankscope_probe_write_run_json(p, R"({"program": "c-api-test", "model": {"layers": 2}})", err, sizeof err), 0)
      << err;
  rankscope_probe_close(p);
  auto meta = format::read_run_metadata(dir.path());
  ASSERT_TRUE(meta.ok()) << meta.status().to_string();
  EXPECT_EQ(meta->program, "c-api-test");
  EXPECT_EQ(meta->world_size, 1);
  EXPECT_EQ(meta->model.at("layers"), 2);
  EXPECT_FALSE(meta->run_id.empty());
  EXPECT_GT(meta->created_ns, 0);
}

TEST(ProbeCApi, MisuseIsMinusOneWithOneLineOfWhy) {
  ScratchDir dir;
  char err[256] = "";
  EXPECT_EQ(rankscope_probe_open(dir.path().c_str(), 3, 2, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("rank 3 is not inside a world of 2"), std::string::npos) << err;

  rankscope_probe* p = rankscope_probe_open(dir.path().c_str(), 0, 2, err, sizeof err);
  ASSERT_NE(p, nullptr) << err;
  err[0] = '\0';
  EXPECT_EQ(rankscope_probe_write_run_json(p, "[1, 2]", err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("not a JSON object"), std::string::npos) << err;
  EXPECT_EQ(rankscope_probe_write_run_json(p, R"({"world_size": 8})", err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("world_size 8 but the probe's world is 2"), std::string::npos) << err;
  EXPECT_EQ(rankscope_probe_register_comm(p, "tp0", 2, 2, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("rank 2 is not inside a size of 2"), std::string::npos) << err;
  const int world = rankscope_probe_register_comm(p, "world", 2, 0, err, sizeof err);
  ASSERT_GE(world, 0) << err;
  EXPECT_EQ(rankscope_probe_collective_begin(p, world, "allreduce_mean", nullptr, 1, 4, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("unknown collective op 'allreduce_mean'"), std::string::npos) << err;
  EXPECT_EQ(rankscope_probe_collective_begin(p, world, "allgather", "fp7", 1, 4, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("unknown dtype 'fp7'"), std::string::npos) << err;
  EXPECT_EQ(rankscope_probe_collective_begin(p, -1, "barrier", nullptr, 0, 0, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("never registered"), std::string::npos) << err;
  EXPECT_EQ(rankscope_probe_collective_begin(p, world, "barrier", nullptr, 0, 0, nullptr, 0), 0);  // no buffer: fine
  rankscope_probe_collective_end(p, 12345, 0);  // an unknown token ends nothing
  rankscope_probe_pop_range(p);                 // a pop with nothing open is ignored
  rankscope_probe_close(p);
  // The message never carries a source location (it is a user's message).
  EXPECT_EQ(std::string(err).find(".cpp"), std::string::npos) << err;
}

TEST(ProbeCApi, ANullProbeIsANoOp) {
  char err[64] = "";
  rankscope_probe_begin_step(nullptr, 0);
  rankscope_probe_push_range(nullptr, "x");
  rankscope_probe_pop_range(nullptr);
  rankscope_probe_counter(nullptr, "x", 1);
  rankscope_probe_collective_end(nullptr, 0, 0);
  rankscope_probe_end_step(nullptr);
  rankscope_probe_close(nullptr);
  EXPECT_EQ(rankscope_probe_rank(nullptr), -1);
  EXPECT_EQ(rankscope_probe_register_comm(nullptr, "world", 1, 0, err, sizeof err), -1);
  EXPECT_EQ(std::string(err), "no probe");
}

}  // namespace
}  // namespace rankscope::probe
