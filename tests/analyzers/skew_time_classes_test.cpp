// skew_time_classes_test.cpp — the skew report's time classes (faults 2, 3 and 7).
//
// Fault 2: time classes are unions, never sums: two host collectives at the same time (two threads,
// two groups) count once, and a rank's compute + wait + transfer + idle is its step. Fault 7: idle
// is the gaps on the device timeline in each step's window, measured, with the host-bound share
// beside it; the device classes add up to the window. Fault 3: a rank the import read in part is
// flagged in the report, its steps after the cut are left out instead of read as idle, and the
// findings resting on it carry a caveat. Each case is a run written here whose answer is known by
// construction (the writers below), then the real traces: the Gloo fixture with two concurrent
// all-reduces (tests/fixtures/kineto/gloo-threads, scripts/make_kineto_gloo_threads.py) and the
// real one-H100 Kineto pair of the shared data folder, whole and cut (skipped when absent).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/kineto/kineto_import.h"
#include "skew_fake_run.h"
#include "skew_gpu_fake_run.h"

namespace rankscope::analyzers {
namespace skew_time_classes_test {
namespace {

namespace fs = std::filesystem;
using format::NameKind;
using nlohmann::json;

constexpr int64_t kStartNs = 1'700'000'000'000'000'000;
constexpr double kStepMs = 100;
int64_t ms(double v) { return int64_t(std::llround(v * 1e6)); }

const fs::path kGlooThreads = fs::path(RANKSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "kineto" / "gloo-threads";
const fs::path kRealPair = fs::path(RANKSCOPE_REAL_GPU_DATA) / "kineto-gloo-2ranks";

// A two-rank run written record by record. Each step of rank r is kStepMs long, back to back, on
// the rank's own clock (rank 1's runs `kRank1OffsetNs` behind rank 0's, as its CLOCK record says).
struct HandRun {
  struct Range {
    std::string name;
    double begin, end;  // ms from the step's start
  };
  struct Coll {
    std::string comm, range;
    double arrive, end;
  };
  struct Kernel {
    std::string name;
    uint32_t stream;
    double begin, end;  // ms from the step's start; may run past the step
  };
  int64_t steps = 4;
  std::function<std::vector<Range>(int rank, int64_t step)> ranges;
  std::function<std::vector<Coll>(int rank, int64_t step)> collectives;
  std::function<std::vector<Kernel>(int rank, int64_t step)> kernels;  // empty: an untraced step
  std::function<int64_t(int rank)> last_step = [this](int) { return steps; };
};

constexpr int64_t kRank1OffsetNs = 1'250'000'000;

void write_hand_run(const fs::path& dir, const HandRun& run, const json& source = nullptr) {
  fs::create_directories(dir);
  format::RunMetadata meta;
  meta.run_id = "time-classes";
  meta.created_ns = kStartNs;
  meta.program = "skew_time_classes_test";
  meta.world_size = 2;
  meta.tp = 1;
  meta.dp = 2;
  meta.groups = {{"world", {0, 1}}, {"pg1", {0, 1}}};
  if (!source.is_null()) meta.extra["source"] = source;
  ASSERT_TRUE(format::write_run_metadata(dir, meta).ok());
  for (int rank = 0; rank < 2; ++rank) {
    format::EventStreamHeader h;
    h.rank = rank;
    h.world_size = 2;
    h.created_ns = kStartNs;
    h.run_id = meta.run_id;
    auto created = format::EventStreamWriter::create(format::event_stream_path(dir, rank), h);
    ASSERT_TRUE(created.ok());
    format::EventStreamWriter& w = **created;
    const int64_t offset = rank == 1 ? kRank1OffsetNs : 0;
    w.write_clock({offset, 10'000, kStartNs - offset, 16, 0});
    std::map<std::string, uint64_t> seq;
    for (int64_t step = 1; step <= run.last_step(rank); ++step) {
      const int64_t begin = kStartNs + (step - 1) * ms(kStepMs) - offset;
      format::StepRecord rec;
      rec.step = step;
      rec.begin_ns = begin;
      rec.end_ns = begin + ms(kStepMs);
      for (const auto& r : run.ranges(rank, step)) rec.ranges.push_back({w.intern(NameKind::kRange, r.name), 1, ms(r.end - r.begin), 0});
      if (run.collectives) {
        for (const auto& c : run.collectives(rank, step)) {
          format::CollectiveEvent e{};
          e.comm_id = w.intern(NameKind::kComm, c.comm);
          e.op = uint8_t(format::CollectiveOp::kAllReduceSum);
          e.dtype = uint8_t(format::DataType::kFloat32);
          e.state = uint8_t(format::CollectiveState::kCompleted);
          e.range_id = w.intern(NameKind::kRange, c.range);
          e.seq = seq[c.comm]++;
          e.bytes = 1 << 20;
          e.enqueue_ns = e.start_ns = begin + ms(c.arrive);
          e.end_ns = begin + ms(c.end);
          rec.collectives.push_back(e);
        }
      }
      w.write_step(rec);
      if (!run.kernels) continue;
      std::vector<format::TraceKernel> traced;
      for (const auto& k : run.kernels(rank, step)) {
        format::TraceKernel t{};
        t.name_id = w.intern(NameKind::kKernel, k.name);
        t.range_id = w.intern(NameKind::kRange, "forward");
        t.stream = k.stream;
        t.begin_ns = begin + ms(k.begin);
        t.end_ns = begin + ms(k.end);
        traced.push_back(t);
      }
      if (!traced.empty()) w.write_trace_kernels(step, traced);
    }
    ASSERT_TRUE(w.flush().ok());
  }
}

SkewReport analyze(const fs::path& dir, const SkewOptions& options = {}) {
  auto report = analyze_skew(dir, options);
  EXPECT_TRUE(report.ok()) << report.status().to_string();
  return report.ok() ? *report : SkewReport{};
}

double class_sum(const RankSkew& r) {
  return r.compute_ms + r.collective_wait_ms + r.collective_transfer_ms + r.memcpy_ms + r.idle_ms;
}

// --- fault 2: unions, never sums --------------------------------------------------------------

// Rank r: data [0, d_r), forward [d_r, d_r + 10), grad_sync [d_r + 10, 90), with two all-reduces (two
// groups, as two threads run them) called together at d_r + 10 and done together at 80. Rank 1's
// data takes 30 ms, rank 0's 10: rank 0 arrives at 20 and waits for rank 1 (40) at both.
HandRun two_concurrent_allreduces() {
  HandRun run;
  auto d = [](int rank) { return rank == 1 ? 30.0 : 10.0; };
  run.ranges = [d](int rank, int64_t) {
    return std::vector<HandRun::Range>{{"data", 0, d(rank)}, {"forward", d(rank), d(rank) + 10}, {"grad_sync", d(rank) + 10, 90}};
  };
  run.collectives = [d](int rank, int64_t) {
    return std::vector<HandRun::Coll>{{"world", "grad_sync", d(rank) + 10, 80}, {"pg1", "grad_sync", d(rank) + 10, 79}};
  };
  return run;
}

TEST(SkewTimeClasses, ConcurrentHostCollectivesCountOnce) {
  const fs::path dir = testing::fresh_temp_dir("skew_tc_concurrent");
  write_hand_run(dir, two_concurrent_allreduces());
  const SkewReport r = analyze(dir);
  ASSERT_EQ(r.ranks.size(), 2u);
  const RankSkew& r0 = r.ranks[0];
  const RankSkew& r1 = r.ranks[1];
  // Rank 0: in collectives [20, 80) = 60 ms (not 60 + 58), waiting [20, 40) = 20 ms (not 20 + 20).
  EXPECT_NEAR(r0.collective_wait_ms, 20.0, 1e-6);
  EXPECT_NEAR(r0.collective_transfer_ms, 40.0, 1e-6);
  // Busy in ranges 90 ms, 60 of them in collectives: compute 30; 10 ms after grad_sync idle.
  EXPECT_NEAR(r0.compute_ms, 30.0, 1e-6);
  EXPECT_NEAR(r0.idle_ms, 10.0, 1e-6);
  // Rank 1: in collectives [40, 80) = 40 ms, no wait; compute 90 - 40.
  EXPECT_NEAR(r1.collective_wait_ms, 0.0, 1e-6);
  EXPECT_NEAR(r1.collective_transfer_ms, 40.0, 1e-6);
  EXPECT_NEAR(r1.compute_ms, 50.0, 1e-6);
  for (const RankSkew& rank : r.ranks) {
    EXPECT_NEAR(class_sum(rank), kStepMs, 1e-6) << "rank " << rank.rank << ": the classes add up to the step";
    // grad_sync [d + 10, 90) minus the union of its collectives.
    EXPECT_NEAR(rank.range_compute_ms.at("grad_sync"), 10.0, 1e-6) << "rank " << rank.rank;
  }
  EXPECT_NEAR(r0.noncomm_ms_median, 40.0, 1e-6);
  EXPECT_NEAR(r1.noncomm_ms_median, 60.0, 1e-6);
}

TEST(SkewTimeClasses, ARangesGpuTimeIsTheUnionOfItsKernels) {
  // skew_gpu_fake_run.cpp: backward/block*/attn launches flash_backward 50-65 and 65-80 on stream 7
  // and dbias 52-62 on stream 9 (rank 1: 50-68, 68-86): 30 and 36 ms of GPU time, 40 and 46 summed.
  const fs::path dir = testing::fresh_temp_dir("skew_tc_range_union");
  testing::write_gpu_fake_run(dir);
  const SkewReport r = analyze(dir);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(r.ranks[size_t(rank)].device) << rank;
    const DeviceBreakdown& d = *r.ranks[size_t(rank)].device;
    EXPECT_NEAR(d.range_ms.at("backward/block*/attn"), testing::GpuFakeRunFacts::kBackwardAttnMs[rank], 1e-6);
    EXPECT_NEAR(d.kernel_ms, testing::GpuFakeRunFacts::kKernelMs[rank], 1e-6) << "kernel_ms stays the work summed";
    for (const auto& [range, ms_per_step] : d.range_ms) EXPECT_LE(ms_per_step, d.busy_ms + 1e-9) << range;
    EXPECT_LE(d.outside_ranges_ms, d.busy_ms + 1e-9);
  }
}

// --- fault 7: idle measured on the device timeline --------------------------------------------

// A device-bound rank: each traced step's kernels run [5, 55) on stream 7 and [58, 110) on stream 9,
// past the host's step (100 ms): the record is 102 ms busy, more than its step, yet there is a 3 ms
// gap in every window. Steps 1-4 traced, step 5 not.
HandRun device_bound() {
  HandRun run;
  run.steps = 5;
  run.ranges = [](int, int64_t) { return std::vector<HandRun::Range>{{"forward", 0, 95}}; };
  run.kernels = [](int, int64_t step) {
    if (step > 4) return std::vector<HandRun::Kernel>{};
    return std::vector<HandRun::Kernel>{{"gemm_a", 7, 5, 55}, {"gemm_b", 9, 58, 110}};
  };
  return run;
}

TEST(SkewTimeClasses, IdleIsTheGapsOnTheDeviceEvenWhenTheGpuLags) {
  const fs::path dir = testing::fresh_temp_dir("skew_tc_device_bound");
  write_hand_run(dir, device_bound());
  const SkewReport r = analyze(dir);
  ASSERT_TRUE(r.ranks[0].device);
  const DeviceBreakdown& d = *r.ranks[0].device;
  EXPECT_EQ(d.traced_steps, 4);
  // Windows run from a step's first kernel (5 ms into it) to the next step's: [5, 105). The part of
  // the step before's [58, 110) after 105 is the next window's: steps 1-3 are busy [5, 55) + [58,
  // 105) = 97 with [105, 110) carried, idle 3. Step 4 (no traced step after it) runs its host step's
  // length from its first kernel, or to its last kernel's end: [305, 410), busy [305, 355) + [358,
  // 410) = 102, idle 3.
  EXPECT_NEAR(d.step_ms, (100 + 100 + 100 + 105) / 4.0, 1e-6);
  EXPECT_NEAR(d.busy_ms, (97 + 97 + 97 + 102) / 4.0, 1e-6);
  EXPECT_NEAR(d.idle_ms, 3.0, 1e-6) << "the 3 ms gap of every window, measured (the record's 102 ms exceed its step)";
  EXPECT_NEAR(d.compute_ms + d.transfer_ms + d.memcpy_ms + d.idle_ms, d.step_ms, 1e-6);
  // Host-bound: the host's 100 ms step minus busy, when positive: 3, 3, 3, 0.
  EXPECT_NEAR(d.host_bound_ms, (3 + 3 + 3 + 0) / 4.0, 1e-6);
  // The rank's breakdown adds up to the window too.
  EXPECT_NEAR(class_sum(r.ranks[0]), d.step_ms, 1e-6);
}

TEST(SkewTimeClasses, HostBoundShareOfAHostBoundGpu) {
  // skew_gpu_fake_run.cpp: the GPU is busy 90 of each 100 ms step and idles 10 waiting for the host.
  const fs::path dir = testing::fresh_temp_dir("skew_tc_host_bound");
  testing::write_gpu_fake_run(dir);
  const SkewReport r = analyze(dir);
  for (int rank = 0; rank < 2; ++rank) {
    const DeviceBreakdown& d = *r.ranks[size_t(rank)].device;
    EXPECT_NEAR(d.step_ms, testing::GpuFakeRunFacts::kStepMs, 1e-6);
    EXPECT_NEAR(d.idle_ms, testing::GpuFakeRunFacts::kIdleMs[rank], 1e-6);
    EXPECT_NEAR(d.host_bound_ms, testing::GpuFakeRunFacts::kIdleMs[rank], 1e-6);
  }
  const json j = to_json(r);
  EXPECT_EQ(j["schema_version"], 3);
  EXPECT_NEAR(j["device"]["host_bound_ms"].get<double>(), 10.0, 1e-6);
}

// --- fault 3: a rank read in part ---------------------------------------------------------------

// Two ranks, steps 1-5, one all-reduce in grad_sync, rank 1 late by 20 ms (its data); every step
// traced with 10 kernels. Rank 1's file was cut: its kernel records hold 10, 10, 4, 0, 0 kernels
// and its step 5 lost its collective.
HandRun cut_rank1() {
  HandRun run;
  run.steps = 5;
  auto d = [](int rank) { return rank == 1 ? 30.0 : 10.0; };
  run.ranges = [d](int rank, int64_t) {
    return std::vector<HandRun::Range>{{"data", 0, d(rank)}, {"forward", d(rank), 40}, {"grad_sync", 40, 90}};
  };
  run.collectives = [](int rank, int64_t step) {
    if (rank == 1 && step == 5) return std::vector<HandRun::Coll>{};
    return std::vector<HandRun::Coll>{{"world", "grad_sync", rank == 1 ? 40.0 : 20.0, 80}};
  };
  run.kernels = [](int rank, int64_t step) {
    int n = 10;
    if (rank == 1) n = step <= 2 ? 10 : step == 3 ? 4 : 0;
    std::vector<HandRun::Kernel> k;
    for (int i = 0; i < n; ++i) k.push_back({"gemm", 7, 1.0 + 4 * i, 4.0 + 4 * i});
    return k;
  };
  return run;
}

json cut_source() {
  return {{"kind", "kineto"},
          {"world_size", 2},
          {"warnings", json::array()},
          {"ranks",
           {{{"rank", 0}, {"warnings", json::array()}},
            {{"rank", 1},
             {"warnings", {"partial import: the gzip stream is broken after 3038852 bytes of text (rank1.json.gz: "
                           "unexpected end of file): the file was cut short or is corrupt; kept the 12876 events read "
                           "before it, the rest is lost"}}}}}};
}

TEST(SkewTimeClasses, ARankReadInPartIsCutNotReadAsIdle) {
  const fs::path dir = testing::fresh_temp_dir("skew_tc_cut");
  write_hand_run(dir, cut_rank1(), cut_source());
  const SkewReport r = analyze(dir);
  ASSERT_EQ(r.partial_ranks.size(), 1u);
  const PartialRank& p = r.partial_ranks[0];
  EXPECT_EQ(p.rank, 1);
  EXPECT_NE(p.reason.find("partial import"), std::string::npos);
  EXPECT_EQ(p.last_step, 5);
  EXPECT_EQ(p.last_complete_step, 4) << "step 5 lost its collective";
  EXPECT_TRUE(p.device_cut);
  EXPECT_EQ(p.last_complete_device_step, 2) << "step 3 holds 4 kernels of 10";
  EXPECT_FALSE(p.left_out.empty());
  // Every rank's figures use steps 1-4; rank 1's GPU figures steps 1-2 only.
  EXPECT_EQ(r.last_step, 4);
  EXPECT_EQ(r.ranks[0].steps, 4);
  EXPECT_EQ(r.ranks[1].steps, 4);
  ASSERT_TRUE(r.ranks[1].device);
  EXPECT_EQ(r.ranks[1].device->traced_steps, 2);
  EXPECT_EQ(r.ranks[1].device->last_traced_step, 2);
  // Its GPU is as busy as rank 0's in the steps it kept: 10 kernels of 3 ms, not read as idle.
  EXPECT_NEAR(r.ranks[1].device->busy_ms, 30.0, 1e-6);
  EXPECT_NEAR(r.ranks[1].device->busy_ms, r.ranks[0].device->busy_ms, 1e-6);
  // The late arrival rests on rank 1: it says so.
  const auto late = std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) { return f.kind == "late_arrival"; });
  ASSERT_NE(late, r.findings.end());
  EXPECT_EQ(late->ranks, std::vector<int>{1});
  EXPECT_NEAR(late->cost_ms_per_step, 20.0, 1e-6);
  ASSERT_EQ(late->caveats.size(), 1u);
  EXPECT_NE(late->caveats[0].find("rank 1"), std::string::npos);
  EXPECT_NE(late->caveats[0].find("partial import"), std::string::npos);
  // JSON: the partial rank and the caveat, valid against the schema.
  const json j = to_json(r);
  ASSERT_EQ(j["partial_ranks"].size(), 1u);
  EXPECT_EQ(j["partial_ranks"][0]["rank"], 1);
  EXPECT_EQ(j["partial_ranks"][0]["last_complete_device_step"], 2);
  bool caveat = false;
  for (const auto& f : j["findings"]) caveat = caveat || f.contains("caveats");
  EXPECT_TRUE(caveat);
  const auto violation = testing::schema_violation(j, "skew_report.schema.json");
  if (!violation) GTEST_SKIP() << "python3-jsonschema not installed; schema check skipped";
  EXPECT_EQ(*violation, "");
}

TEST(SkewTimeClasses, TheSameDataWithoutTheImportsWordIsNotCut) {
  // Ranks may run different kernels; only a rank the import says it read in part is cut by counts.
  const fs::path dir = testing::fresh_temp_dir("skew_tc_not_flagged");
  write_hand_run(dir, cut_rank1());
  const SkewReport r = analyze(dir);
  EXPECT_TRUE(r.partial_ranks.empty());
  EXPECT_EQ(r.last_step, 5);
  ASSERT_TRUE(r.ranks[1].device);
  EXPECT_EQ(r.ranks[1].device->traced_steps, 3) << "steps 1-3 carry kernel records (4 and 5 none)";
}

TEST(SkewTimeClasses, ARankWhoseStreamEndsEarlyIsFlagged) {
  HandRun run = two_concurrent_allreduces();
  run.steps = 5;
  run.last_step = [](int rank) { return rank == 1 ? int64_t(3) : int64_t(5); };
  const fs::path dir = testing::fresh_temp_dir("skew_tc_ends_early");
  write_hand_run(dir, run);
  const SkewReport r = analyze(dir);
  ASSERT_EQ(r.partial_ranks.size(), 1u);
  EXPECT_EQ(r.partial_ranks[0].rank, 1);
  EXPECT_EQ(r.partial_ranks[0].last_step, 3);
  EXPECT_NE(r.partial_ranks[0].reason.find("ends at step 3"), std::string::npos) << r.partial_ranks[0].reason;
  const auto late = std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) { return f.kind == "late_arrival"; });
  ASSERT_NE(late, r.findings.end());
  EXPECT_FALSE(late->caveats.empty());
}

// --- real traces ------------------------------------------------------------------------------

fs::path import_traces(const std::vector<fs::path>& inputs, const std::string& name) {
  const fs::path out = testing::fresh_temp_dir(name) / "run";
  auto summary = kineto::import_kineto(inputs, out);
  EXPECT_TRUE(summary.ok()) << summary.status().to_string();
  return out;
}

TEST(SkewTimeClassesReal, TwoGlooGroupsOnTwoThreadsCountOnce) {
  // Two gloo:all_reduce annotations on two Gloo threads overlap in every step (the fixture's script).
  const SkewReport r = analyze(import_traces({kGlooThreads}, "skew_tc_gloo_threads"));
  for (const RankSkew& rank : r.ranks) {
    ASSERT_TRUE(rank.present);
    EXPECT_EQ(rank.breakdown_source, "host");
    const double mean_step = rank.compute_ms + rank.collective_wait_ms + rank.collective_transfer_ms + rank.idle_ms;
    EXPECT_LE(rank.collective_wait_ms + rank.collective_transfer_ms, mean_step + 1e-6) << rank.rank;
    EXPECT_LE(rank.collective_wait_ms + rank.collective_transfer_ms, rank.step_ms_max + 1e-6) << rank.rank;
    EXPECT_GT(rank.noncomm_ms_median, 0.0) << "rank " << rank.rank << ": time outside collectives is not eaten twice";
  }
  // Rank 1 sleeps 20 ms more in data: rank 0 waits about that long, once.
  EXPECT_GT(r.ranks[0].collective_wait_ms, 10.0);
  EXPECT_LT(r.ranks[0].collective_wait_ms, 35.0);
}

void skip_without_real_pair() {
  if (!fs::exists(kRealPair / "rank0.json.gz") || !fs::exists(kRealPair / "rank1.json.gz"))
    GTEST_SKIP() << "real Kineto pair not found at " << kRealPair.string() << " (the shared data folder is not here)";
}

TEST(SkewTimeClassesReal, RealPairClassesAddUpToTheWindow) {
  skip_without_real_pair();
  if (::testing::Test::IsSkipped()) return;
  const SkewReport r = analyze(import_traces({kRealPair}, "skew_tc_real_pair"));
  ASSERT_TRUE(r.device);
  EXPECT_TRUE(r.partial_ranks.empty());
  for (const RankSkew& rank : r.ranks) {
    ASSERT_TRUE(rank.device) << rank.rank;
    const DeviceBreakdown& d = *rank.device;
    EXPECT_NEAR(d.compute_ms + d.transfer_ms + d.memcpy_ms + d.idle_ms, d.step_ms, 1e-6);
    EXPECT_LE(d.host_bound_ms, d.idle_ms + 1e-9);
    // The windows tile the host's steps: their mean is the host's within 1%.
    EXPECT_NEAR(d.step_ms, rank.step_ms_median, 0.01 * rank.step_ms_median) << rank.rank;
    // Host figures: Gloo's two threads overlap, yet time in collectives fits in the step.
    EXPECT_LE(rank.host_breakdown.collective_wait_ms + rank.host_breakdown.collective_transfer_ms, d.step_ms) << rank.rank;
  }
}

TEST(SkewTimeClassesReal, RealPairCutShortKeepsItsFinding) {
  skip_without_real_pair();
  if (::testing::Test::IsSkipped()) return;
  // Rank 1's trace cut at 250,000 of its 353,142 gzip bytes: every step keeps its host events but
  // loses most of its kernels (Kineto writes GPU events after the CPU ones, by stream).
  const fs::path traces = testing::fresh_temp_dir("skew_tc_real_cut_traces");
  fs::copy_file(kRealPair / "rank0.json.gz", traces / "rank0.json.gz");
  {
    std::ifstream in(kRealPair / "rank1.json.gz", std::ios::binary);
    std::string bytes(250'000, '\0');
    in.read(bytes.data(), std::streamsize(bytes.size()));
    std::ofstream(traces / "rank1.json.gz", std::ios::binary).write(bytes.data(), in.gcount());
  }
  const SkewReport whole = analyze(import_traces({kRealPair}, "skew_tc_real_whole"));
  const SkewReport cut = analyze(import_traces({traces}, "skew_tc_real_cut"));
  ASSERT_EQ(cut.partial_ranks.size(), 1u);
  EXPECT_EQ(cut.partial_ranks[0].rank, 1);
  EXPECT_TRUE(cut.partial_ranks[0].device_cut);
  // Its GPU figures are left out rather than read as ~90% idle.
  EXPECT_FALSE(cut.ranks[1].device.has_value());
  ASSERT_TRUE(cut.device);
  EXPECT_EQ(cut.device->ranks, 1);
  // The top finding is the whole pair's, with a caveat.
  ASSERT_FALSE(whole.findings.empty());
  ASSERT_FALSE(cut.findings.empty());
  EXPECT_EQ(cut.findings[0].kind, whole.findings[0].kind);
  EXPECT_EQ(cut.findings[0].ranks, whole.findings[0].ranks);
  EXPECT_NEAR(cut.findings[0].cost_ms_per_step, whole.findings[0].cost_ms_per_step, 0.05 * whole.findings[0].cost_ms_per_step);
  EXPECT_FALSE(cut.findings[0].caveats.empty());
}

}  // namespace
}  // namespace skew_time_classes_test
}  // namespace rankscope::analyzers
