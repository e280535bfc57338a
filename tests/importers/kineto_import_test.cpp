// kineto_import_test.cpp — PyTorch profiler (Kineto) traces imported as a run directory.
//
// Fixtures (tests/fixtures/kineto/, written by make_fixtures.py there): a two-rank NCCL job with
// two process groups (named on the NCCL kernels' args) whose rank 1 loads data 6 ms longer; a trace without distributedInfo; a
// truncated gzip; an unterminated JSON; hostile input. Then the real pair from an H100
// (shared/data/real-gpu/kineto-gloo-2ranks), skipped when that folder is absent.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/kineto/kineto_import.h"

namespace rankscope::kineto {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto";
const fs::path kRealPair = fs::path(RANKSCOPE_SOURCE_DIR) / "../shared/data/real-gpu/kineto-gloo-2ranks";

fs::path fresh_dir(const std::string& name) {
  static int counter = 0;
  const fs::path p = fs::temp_directory_path() / ("rs-kineto-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(p);
  return p;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& what) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

// Kernel name -> range name of each traced kernel of one rank (the last seen wins; names are unique per range here).
std::map<std::string, std::string> kernel_ranges(const fs::path& run, int rank) {
  auto stream = format::read_event_stream(format::event_stream_path(run, rank));
  EXPECT_TRUE(stream.ok()) << stream.status().to_string();
  std::map<std::string, std::string> out;
  if (!stream.ok()) return out;
  for (const auto& t : stream->traces) {
    for (const auto& k : t.kernels) out[std::string(stream->name(k.name_id))] = k.range_id ? std::string(stream->name(k.range_id)) : "";
  }
  return out;
}

TEST(KinetoImport, NcclJobWithTwoGroups) {
  const fs::path run = fresh_dir("nccl");
  auto summary = import_kineto({kFixtures / "nccl-2ranks"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->kind, "kineto");
  ASSERT_EQ(summary->world_size, 2);
  ASSERT_EQ(summary->ranks.size(), 2u);
  for (const auto& r : summary->ranks) {
    EXPECT_EQ(r.identity, "distributedInfo.rank");
    EXPECT_EQ(r.steps, 3);
    EXPECT_EQ(r.collectives, 6) << "one all-reduce and one all-gather per step";
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  }
  // Rank 1's clock matches rank 0's (same base time, same all-reduce ends): residual 0.
  EXPECT_NEAR(summary->ranks[1].offset_ms, 0.0, 1e-6);
  EXPECT_NE(summary->ranks[1].alignment.find("matched with rank 0"), std::string::npos) << summary->ranks[1].alignment;

  // One communicator per NCCL stream: the all-reduce group and the all-gather group.
  auto meta = format::read_run_metadata(run);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->program, "rankscope import-kineto");
  std::vector<std::string> groups;
  for (const auto& g : meta->groups) groups.push_back(g.name);
  // Named by the process groups their kernels carry (default_pg, dp), whatever each rank's stream ids.
  EXPECT_EQ(groups, (std::vector<std::string>{"default_pg", "dp", "world"}));
  for (const auto& g : meta->groups) EXPECT_EQ(g.ranks, (std::vector<int>{0, 1})) << g.name;
  EXPECT_EQ(meta->extra["source"]["kind"], "kineto");

  // Kernels belong to the range of their launch, whichever API launched them; NCCL kernels too.
  const auto ranges = kernel_ranges(run, 0);
  EXPECT_EQ(ranges.at("void elementwise_kernel<128>()"), "forward");              // cudaLaunchKernel
  EXPECT_EQ(ranges.at("nvjet_tst_128x256_64x4_2x1_v_bz_TNT"), "forward");         // cuLaunchKernelEx
  EXPECT_EQ(ranges.at("nvjet_tst_256x128_64x4_1x2_h_bz_TNN"), "backward");
  EXPECT_EQ(ranges.at("Memcpy HtoD (Pageable -> Device)"), "data");
  EXPECT_EQ(ranges.at("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"), "backward");

  // Sizes from "In msg nelems" x dtype.
  auto stream1 = format::read_event_stream(format::event_stream_path(run, 1));
  ASSERT_TRUE(stream1.ok());
  std::map<std::string, uint64_t> bytes_by_comm;
  for (const auto& step : stream1->steps) {
    for (const auto& c : step.collectives) bytes_by_comm[std::string(stream1->name(c.comm_id))] = c.bytes;
  }
  EXPECT_EQ(bytes_by_comm["default_pg"], 1048576u * 4);
  EXPECT_EQ(bytes_by_comm["dp"], 4096u * 4);

  // Skew: rank 1 is late at the all-reduce inside backward because of its data range.
  auto report = analyzers::analyze_skew(run);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  const auto& top = report->findings.front();
  EXPECT_EQ(top.kind, "late_arrival");
  EXPECT_EQ(top.ranks, std::vector<int>{1});
  EXPECT_EQ(top.range, "data");
  EXPECT_NEAR(top.cost_ms_per_step, 6.0, 0.5);
  bool rank0_waits_in_backward = false;
  for (const auto& site : report->collectives) {
    for (const auto& sr : site.ranks) {
      if (site.range == "backward" && sr.rank == 0 && sr.wait_ms > 5.0) rank0_waits_in_backward = true;
    }
  }
  EXPECT_TRUE(rank0_waits_in_backward);
  // The finding says so, from the collectives table: who waits, in which collective, inside which range.
  ASSERT_EQ(top.waiters.size(), 1u) << top.text;
  EXPECT_EQ(top.waiters_total, 1);
  EXPECT_EQ(top.waiters[0].rank, 0);
  EXPECT_EQ(top.waiters[0].range, "backward");
  EXPECT_GT(top.waiters[0].wait_ms, 5.0);
  EXPECT_FALSE(top.waiters[0].gpu_idle) << "NCCL: the wait is an NCCL kernel running";
  EXPECT_NE(top.text.find("rank 0 waits for it"), std::string::npos) << top.text;
  EXPECT_NE(top.text.find(top.waiters[0].op + " inside backward"), std::string::npos) << top.text;
  const auto j = analyzers::to_json(*report);
  EXPECT_EQ(j["findings"][0]["waiters"][0]["rank"], 0);
  EXPECT_EQ(j["findings"][0]["waiters"][0]["range"], "backward");
  // The device breakdown adds up to the step; the data range's HtoD copy is memcpy, not compute.
  for (const auto& r : report->ranks) {
    ASSERT_TRUE(r.device.has_value()) << "rank " << r.rank;
    const auto& d = *r.device;
    EXPECT_GT(d.memcpy_ms, 0.0) << "rank " << r.rank;
    EXPECT_NEAR(d.compute_ms + d.transfer_ms + d.memcpy_ms + d.idle_ms, d.step_ms, 0.05 * d.step_ms);
  }
  fs::remove_all(run);
}

TEST(KinetoImport, RankFromFileNameWithoutDistributedInfo) {
  const fs::path run = fresh_dir("noinfo");
  auto summary = import_kineto({kFixtures / "no-distributed-info/trainer_rank3.json"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  ASSERT_EQ(summary->ranks.size(), 1u);
  EXPECT_EQ(summary->ranks[0].rank, 3);
  EXPECT_NE(summary->ranks[0].identity.find("file name"), std::string::npos);
  EXPECT_TRUE(fs::exists(format::event_stream_path(run, 3)));
  EXPECT_TRUE(any_contains(summary->warnings, "3 of 4 ranks have no trace"));
  fs::remove_all(run);
}

TEST(KinetoImport, NoRankAnywhereIsAClearErrorAmongSeveralTraces) {
  const fs::path dir = fresh_dir("anon");
  fs::create_directories(dir);
  fs::copy_file(kFixtures / "no-distributed-info/trainer_rank3.json", dir / "trainer.json");
  fs::copy_file(kFixtures / "no-distributed-info/trainer_rank3.json", dir / "other.json");
  auto summary = import_kineto({dir / "trainer.json", dir / "other.json"}, dir / "run");
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().to_string().find("cannot tell which rank"), std::string::npos) << summary.status().to_string();
  fs::remove_all(dir);
}

// One trace with no rank anywhere is the whole job: rank 0 of 1, and the provenance says why. A
// number in its name that follows no rank word (a version, a pid) is not taken for a rank.
TEST(KinetoImport, ALoneTraceWithoutARankIsRankZeroOfOne) {
  const fs::path dir = fresh_dir("alone");
  fs::create_directories(dir);
  for (const char* name : {"trainer.json", "trainer_ROCm6_2.json"}) {
    fs::copy_file(kFixtures / "no-distributed-info/trainer_rank3.json", dir / name, fs::copy_options::overwrite_existing);
    fs::remove_all(dir / "run");
    auto summary = import_kineto({dir / name}, dir / "run");
    ASSERT_TRUE(summary.ok()) << summary.status().to_string();
    ASSERT_EQ(summary->ranks.size(), 1u);
    EXPECT_EQ(summary->ranks[0].rank, 0) << name;
    EXPECT_EQ(summary->world_size, 1) << name;
    EXPECT_NE(summary->ranks[0].identity.find("the only trace"), std::string::npos) << summary->ranks[0].identity;
  }
  // A rank word still counts for a lone trace.
  fs::remove_all(dir / "run");
  auto ranked = import_kineto({kFixtures / "no-distributed-info/trainer_rank3.json"}, dir / "run");
  ASSERT_TRUE(ranked.ok()) << ranked.status().to_string();
  EXPECT_EQ(ranked->ranks.at(0).rank, 3);
  fs::remove_all(dir);
}

TEST(KinetoImport, TruncatedGzipIsAPartialImportThatSaysSo) {
  const fs::path run = fresh_dir("gz");
  auto summary = import_kineto({kFixtures / "truncated.json.gz"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  ASSERT_EQ(summary->ranks.size(), 1u);
  EXPECT_TRUE(any_contains(summary->ranks[0].warnings, "gzip stream is broken")) << ::testing::PrintToString(summary->ranks[0].warnings);
  EXPECT_TRUE(any_contains(summary->ranks[0].warnings, "partial import"));
  fs::remove_all(run);
}

TEST(KinetoImport, UnterminatedJsonKeepsTheStepsBeforeTheBreak) {
  const fs::path run = fresh_dir("cut");
  auto summary = import_kineto({kFixtures / "unterminated.json"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_TRUE(any_contains(r.warnings, "killed while writing")) << ::testing::PrintToString(r.warnings);
  EXPECT_GE(r.steps, 2);
  fs::remove_all(run);
}

TEST(KinetoImport, HostileInputIsDroppedAndCounted) {
  const fs::path run = fresh_dir("hostile");
  auto summary = import_kineto({kFixtures / "hostile/rank0.json"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_EQ(r.rank, 0);  // distributedInfo.rank is "zero": the file name decides
  EXPECT_TRUE(any_contains(r.warnings, "distributedInfo.rank is not a rank number"));
  EXPECT_TRUE(any_contains(r.warnings, "nesting deeper than"));
  EXPECT_TRUE(any_contains(r.warnings, "9 events dropped (3 with a field of the wrong type, 2 with a time out of range, "
                                       "1 with a negative duration, 3 missing a field)"))
      << ::testing::PrintToString(r.warnings);
  EXPECT_EQ(r.steps, 2);
  fs::remove_all(run);
}

TEST(KinetoImport, NotATraceAndMissingInputsAreClearErrors) {
  const fs::path dir = fresh_dir("bad");
  fs::create_directories(dir);
  std::ofstream(dir / "rank0.json") << "{\"hello\": [1, 2, 3]}";
  std::ofstream(dir / "rank1.json") << "";
  auto a = import_kineto({dir / "rank0.json"}, dir / "run");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().to_string().find("not a PyTorch profiler trace"), std::string::npos) << a.status().to_string();
  auto b = import_kineto({dir / "rank1.json"}, dir / "run");
  ASSERT_FALSE(b.ok());
  auto c = import_kineto({dir / "nope.json"}, dir / "run");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().to_string().find("no such file"), std::string::npos);
  auto d = import_kineto({kFixtures / "nccl-2ranks/rank0.json", kFixtures / "nccl-2ranks/rank0.json"}, dir / "run");
  ASSERT_FALSE(d.ok());
  fs::remove_all(dir);
}

// Random bytes, an empty traceEvents and a trace cut before its first event each
// get their own sentence (they all used to read as "likely killed while writing").
TEST(KinetoImport, RandomBytesAnEmptyTraceAndACutTraceAreToldApart) {
  const fs::path dir = fresh_dir("told_apart");
  fs::create_directories(dir);
  std::ofstream(dir / "rank0.json", std::ios::binary) << std::string("\x89PNG\r\n\x1a\n\x00\x00garbage", 18);
  std::ofstream(dir / "rank1.json") << "{\"schemaVersion\": 1, \"traceEvents\": []}";
  std::ofstream(dir / "rank2.json") << "{\"schemaVersion\": 1, \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kern";
  auto random = import_kineto({dir / "rank0.json"}, dir / "run");
  ASSERT_FALSE(random.ok());
  EXPECT_NE(random.status().user_text().find("not JSON"), std::string::npos) << random.status().user_text();
  auto empty = import_kineto({dir / "rank1.json"}, dir / "run");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().user_text().find("traceEvents is empty"), std::string::npos) << empty.status().user_text();
  auto cut = import_kineto({dir / "rank2.json"}, dir / "run");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().user_text().find("killed while writing"), std::string::npos) << cut.status().user_text();
  for (const auto* s : {&random, &empty, &cut}) EXPECT_EQ(s->status().user_text().find(".cpp:"), std::string::npos);
  fs::remove_all(dir);
}

// A trace cut inside a multi-byte character, the "killed while writing" case: the parser's error
// quotes the raw byte and goes into run.json. Found by fuzzing: that write threw on the byte that
// is not UTF-8 and nothing caught it. Now a partial import or a clear error, never an exception.
TEST(KinetoImport, TraceCutInsideACharacterNeverThrows) {
  const fs::path dir = fresh_dir("cut_utf8");
  fs::create_directories(dir);
  std::ofstream(dir / "rank0.json", std::ios::binary) << "[{}\xff";
  std::optional<Result<ImportSummary>> summary;
  ASSERT_NO_THROW(summary.emplace(import_kineto({dir / "rank0.json"}, dir / "run")));
  if (summary->ok()) {
    auto meta = format::read_run_metadata(dir / "run");
    EXPECT_TRUE(meta.ok()) << meta.status().message();
  } else {
    EXPECT_NE(summary->status().message().find("rank0.json"), std::string::npos) << summary->status().message();
  }
  fs::remove_all(dir);
}

// Chrome's other trace shape (a bare array of events), and distributedInfo written after the events.
TEST(KinetoImport, BareArrayAndDistributedInfoAfterTheEvents) {
  const fs::path dir = fresh_dir("shapes");
  fs::create_directories(dir);
  const std::string events =
      R"([{"ph":"X","cat":"user_annotation","name":"ProfilerStep#7","pid":1,"tid":1,"ts":100.0,"dur":50.0},)"
      R"({"ph":"X","cat":"user_annotation","name":"forward","pid":1,"tid":1,"ts":101.0,"dur":20.0},)"
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":102.0,"dur":1.0,"args":{"correlation":9}},)"
      R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":103.0,"dur":5.0,"args":{"correlation":9,"stream":7,"device":0}}])";
  std::ofstream(dir / "worker_rank2.json") << events;
  std::ofstream(dir / "late.json") << R"({"traceEvents":)" << events
                                   << R"(,"distributedInfo":{"rank":5,"world_size":6},"baseTimeNanoseconds":1000})";
  auto a = import_kineto({dir / "worker_rank2.json", dir / "late.json"}, dir / "run");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_EQ(a->ranks.size(), 2u);
  EXPECT_EQ(a->ranks[0].rank, 2);
  EXPECT_EQ(a->ranks[1].rank, 5);
  EXPECT_EQ(a->world_size, 6);
  for (const auto& r : a->ranks) {
    EXPECT_EQ(r.steps, 1);
    EXPECT_EQ(r.kernels, 1);
  }
  EXPECT_EQ(kernel_ranges(dir / "run", 5).at("k"), "forward");
  fs::remove_all(dir);
}

TEST(KinetoImport, NeverOverwritesAProbeRun) {
  const fs::path run = fresh_dir("probe");
  fs::create_directories(run);
  format::RunMetadata meta;
  meta.program = "gpt2-train";
  meta.world_size = 1;
  ASSERT_TRUE(format::write_run_metadata(run, meta).ok());
  auto summary = import_kineto({kFixtures / "nccl-2ranks"}, run);
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().to_string().find("gpt2-train"), std::string::npos);
  fs::remove_all(run);
}

// --- the real pair: PyTorch 2.11, DDP over Gloo on one H100, rank 1's data sleeps 30 ms ---------

TEST(KinetoRealPair, Rank1DataIsTheStragglerAndRank0WaitsInBackward) {
  if (!fs::exists(kRealPair / "rank0.json.gz")) GTEST_SKIP() << "no real Kineto traces at " << kRealPair.string();
  const fs::path run = fresh_dir("real");
  auto summary = import_kineto({kRealPair}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  ASSERT_EQ(summary->world_size, 2);
  for (const auto& r : summary->ranks) {
    EXPECT_EQ(r.steps, 4);
    EXPECT_EQ(r.collectives, 12) << "3 gloo all-reduces a step";
    EXPECT_GE(r.residual_ms, 0.0);
    EXPECT_LT(r.residual_ms, 1.0) << "same host: the clocks agree within a millisecond";
  }
  // Every cuBLAS GEMM there was launched by cuLaunchKernelEx: they must land in ranges.
  size_t nvjet = 0, nvjet_in_range = 0;
  for (const auto& [kernel, range] : kernel_ranges(run, 0)) {
    if (kernel.rfind("nvjet", 0) == 0) ++nvjet, nvjet_in_range += !range.empty();
  }
  EXPECT_GT(nvjet, 0u);
  EXPECT_EQ(nvjet_in_range, nvjet);

  auto report = analyzers::analyze_skew(run);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  const auto& top = report->findings.front();
  EXPECT_EQ(top.ranks, std::vector<int>{1});
  EXPECT_TRUE(top.range == "data" || top.cls == "outside_ranges") << top.text;
  EXPECT_GT(top.cost_ms_per_step, 25.0) << top.text;
  EXPECT_LT(top.cost_ms_per_step, 35.0) << top.text;
  double rank0_wait_in_backward = 0;
  for (const auto& site : report->collectives) {
    for (const auto& sr : site.ranks) {
      if (site.range == "backward" && sr.rank == 0) rank0_wait_in_backward = std::max(rank0_wait_in_backward, sr.wait_ms);
    }
  }
  EXPECT_GT(rank0_wait_in_backward, 20.0);
  // The finding names the waiter, the collective and its range; on Gloo the wait is GPU idle.
  ASSERT_FALSE(top.waiters.empty()) << top.text;
  EXPECT_EQ(top.waiters[0].rank, 0);
  EXPECT_EQ(top.waiters[0].range, "backward");
  EXPECT_NEAR(top.waiters[0].wait_ms, rank0_wait_in_backward, 1e-9);
  EXPECT_TRUE(top.waiters[0].gpu_idle);
  EXPECT_NE(top.text.find("rank 0 waits for it"), std::string::npos) << top.text;
  EXPECT_NE(top.text.find(top.waiters[0].op + " inside backward"), std::string::npos) << top.text;
  EXPECT_NE(top.text.find("GPU sits idle"), std::string::npos) << top.text;
  EXPECT_GT(report->ranks[0].idle_collective_wait_ms, 20.0);
  EXPECT_LE(report->ranks[0].idle_collective_wait_ms, report->ranks[0].idle_ms);
  for (const auto& r : report->ranks) {
    ASSERT_TRUE(r.device.has_value());
    const auto& d = *r.device;
    EXPECT_NEAR(d.compute_ms + d.transfer_ms + d.memcpy_ms + d.idle_ms, d.step_ms, 0.05 * d.step_ms) << "rank " << r.rank;
  }
  fs::remove_all(run);
}

}  // namespace
}  // namespace rankscope::kineto
