// skew_gpu_test.cpp — the skew report's breakdown from the device timeline: on a GPU the
// host returns from a range at launch, so where kernel records exist compute, transfer (NCCL
// kernels) and idle (GPU waiting for the host) come from the kernels, with the kernel time per range
// and the kernel time launched outside every range; host time stays where there are none.
// Checked on the checked-in fixture tests/fixtures/analyzers/skew_gpu_kernels (skew_gpu_fake_run.cpp
// says what it holds), on variants of it, and on the real one-H100 run of the shared data folder
// (d12-flash, skipped when the folder is absent), against that folder's kernel-breakdown.txt.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/reports/chrome_trace.h"
#include "skew_fake_run.h"
#include "skew_gpu_fake_run.h"

namespace rankscope::analyzers {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::GpuFakeRunFacts;

const fs::path kFixture = fs::path(RANKSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "analyzers" / "skew_gpu_kernels";
const fs::path kRealGpu = fs::path(RANKSCOPE_REAL_GPU_DATA);

double range_ms(const DeviceSummary& d, const std::string& range) {
  for (const auto& [name, ms] : d.ranges_ms)
    if (name == range) return ms;
  return -1;
}

TEST(SkewGpu, BreakdownComesFromTheDeviceTimeline) {
  auto report = analyze_skew(kFixture);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_EQ(report->ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const RankSkew& rs = report->ranks[size_t(r)];
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(rs.breakdown_source, "device");
    ASSERT_TRUE(rs.device.has_value());
    EXPECT_EQ(rs.device->traced_steps, 2);
    EXPECT_EQ(rs.device->first_traced_step, 2);
    EXPECT_EQ(rs.device->last_traced_step, 3);
    EXPECT_NEAR(rs.compute_ms, GpuFakeRunFacts::kComputeMs[r], 1e-3);
    EXPECT_NEAR(rs.collective_transfer_ms, GpuFakeRunFacts::kTransferMs[r], 1e-3);
    EXPECT_EQ(rs.collective_wait_ms, 0.0);
    EXPECT_NEAR(rs.idle_ms, GpuFakeRunFacts::kIdleMs[r], 1e-3);
    EXPECT_NEAR(rs.compute_ms + rs.collective_transfer_ms + rs.idle_ms, GpuFakeRunFacts::kStepMs, 1e-3);
    EXPECT_NEAR(rs.device->kernel_ms, GpuFakeRunFacts::kKernelMs[r], 1e-3);
    EXPECT_NEAR(rs.device->outside_ranges_ms, GpuFakeRunFacts::kOutsideMs, 1e-3);
    // Two blocks' kernels and the nested second-stream kernel, under one wildcard name.
    EXPECT_NEAR(rs.device->range_ms.at("backward/block*/attn"), GpuFakeRunFacts::kBackwardAttnMs[r], 1e-3);
    EXPECT_EQ(rs.device->range_ms.count("backward/block0/attn"), 0u);
    // The host's view books the GPU's backlog on grad_sync's all-reduce: kept for comparison.
    EXPECT_GT(rs.host_breakdown.collective_transfer_ms, GpuFakeRunFacts::kHostTransferMinMs);
    EXPECT_LT(rs.host_breakdown.compute_ms, 15.0);
  }
  ASSERT_TRUE(report->device.has_value());
  const DeviceSummary& d = *report->device;
  EXPECT_EQ(d.ranks, 2);
  EXPECT_NEAR(d.mean.compute_ms, (GpuFakeRunFacts::kComputeMs[0] + GpuFakeRunFacts::kComputeMs[1]) / 2, 1e-3);
  EXPECT_NEAR(d.mean.outside_ranges_ms, GpuFakeRunFacts::kOutsideMs, 1e-3);
  ASSERT_FALSE(d.ranges_ms.empty());
  EXPECT_EQ(d.ranges_ms.front().first, "backward/block*/attn");
  EXPECT_NEAR(range_ms(d, "grad_sync"), (GpuFakeRunFacts::kTransferMs[0] + GpuFakeRunFacts::kTransferMs[1]) / 2, 1e-3);
}

TEST(SkewGpu, HostTimeWithoutKernelRecords) {
  SkewOptions only_untraced;
  only_untraced.first_step = 4;
  only_untraced.last_step = 4;
  auto report = analyze_skew(kFixture, only_untraced);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->device.has_value());
  for (const RankSkew& rs : report->ranks) {
    EXPECT_EQ(rs.breakdown_source, "host");
    EXPECT_FALSE(rs.device.has_value());
    EXPECT_GT(rs.collective_transfer_ms, GpuFakeRunFacts::kHostTransferMinMs);
  }
  // A CPU run (no kernel records at all) keeps the host breakdown and has no device section.
  const fs::path cpu = testing::fresh_temp_dir("skew-gpu-cpu");
  testing::FakeRunSpec spec;
  spec.script = testing::standard_step(1, nullptr);
  testing::write_fake_run(cpu, spec);
  auto cpu_report = analyze_skew(cpu);
  ASSERT_TRUE(cpu_report.ok());
  EXPECT_FALSE(cpu_report->device.has_value());
  EXPECT_EQ(cpu_report->ranks[0].breakdown_source, "host");
  EXPECT_TRUE(to_json(*cpu_report)["device"].is_null());
  EXPECT_FALSE(to_json(*cpu_report)["ranks"][0].contains("device"));
}

TEST(SkewGpu, NcclOverlappedByComputeIsNotTransfer) {
  const fs::path dir = testing::fresh_temp_dir("skew-gpu-overlap");
  testing::GpuFakeRunSpec spec;
  spec.nccl_overlaps_compute = true;  // rank 0's NCCL kernel starts 2 ms before the backward kernel ends
  testing::write_gpu_fake_run(dir, spec);
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok());
  const RankSkew& r0 = report->ranks[0];
  EXPECT_NEAR(r0.compute_ms, GpuFakeRunFacts::kComputeMs[0], 1e-3);
  EXPECT_NEAR(r0.collective_transfer_ms, GpuFakeRunFacts::kTransferMs[0], 1e-3);
  EXPECT_NEAR(r0.device->kernel_ms, GpuFakeRunFacts::kKernelMs[0] + 2, 1e-3);
}

TEST(SkewGpu, JsonCarriesTheDeviceBreakdown) {
  auto report = analyze_skew(kFixture);
  ASSERT_TRUE(report.ok());
  const json j = to_json(*report);
  EXPECT_EQ(j["schema_version"], 3);
  EXPECT_EQ(j["ranks"][1]["breakdown_ms"]["source"], "device");
  EXPECT_NEAR(j["ranks"][1]["breakdown_ms"]["compute"].get<double>(), GpuFakeRunFacts::kComputeMs[1], 1e-3);
  EXPECT_NEAR(j["ranks"][1]["device"]["idle_ms"].get<double>(), GpuFakeRunFacts::kIdleMs[1], 1e-3);
  EXPECT_GT(j["ranks"][1]["host_breakdown_ms"]["collective_transfer"].get<double>(), GpuFakeRunFacts::kHostTransferMinMs);
  EXPECT_EQ(j["device"]["ranges"][0]["range"], "backward/block*/attn");
  EXPECT_NEAR(j["device"]["outside_ranges_ms"].get<double>(), GpuFakeRunFacts::kOutsideMs, 1e-3);
  auto violation = testing::schema_violation(j, "skew_report.schema.json");
  if (!violation) GTEST_SKIP() << "python3-jsonschema not installed; schema check skipped";
  EXPECT_EQ(*violation, "");
  json bad = j;
  bad["ranks"][0]["breakdown_ms"]["source"] = "guess";  // the check can fail
  EXPECT_NE(*testing::schema_violation(bad, "skew_report.schema.json"), "");
}

TEST(SkewGpu, OddKernelRecordsDoNotBreakTheBreakdown) {
  // A kernel that ends before it begins, one naming a range and a kernel name never interned, and
  // kernels of a step that has no STEP record: no crash, and only what is sound is counted.
  const fs::path dir = testing::fresh_temp_dir("skew-gpu-odd");
  auto w = testing::one_rank_run(dir, "odd", 0);
  auto& writer = *w;
  const uint32_t fwd = writer.intern(format::NameKind::kRange, "forward");
  const uint32_t gemm = writer.intern(format::NameKind::kKernel, "gemm");
  format::StepRecord step;
  step.step = 1;
  step.begin_ns = 1'000'000'000;
  step.end_ns = step.begin_ns + 10'000'000;
  step.ranges.push_back({fwd, 1, 2'000'000, 0});
  writer.write_step(step);
  const format::TraceKernel kernels[] = {{gemm, fwd, 1, 0, step.begin_ns + 1'000'000, step.begin_ns + 5'000'000},
                                         {gemm, fwd, 1, 0, step.begin_ns + 6'000'000, step.begin_ns + 5'500'000},
                                         {777, 999, 1, 0, step.begin_ns + 6'000'000, step.begin_ns + 7'000'000}};
  writer.write_trace_kernels(1, kernels);
  writer.write_trace_kernels(42, kernels);  // no step 42
  ASSERT_TRUE(writer.flush().ok());
  w.reset();
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  const RankSkew& r = report->ranks[0];
  ASSERT_TRUE(r.device.has_value());
  EXPECT_EQ(r.device->traced_steps, 1);
  EXPECT_NEAR(r.compute_ms, 5.0, 1e-9);  // 4 ms + 1 ms; the backwards kernel takes no time
  EXPECT_NEAR(r.idle_ms, 5.0, 1e-9);
  EXPECT_NEAR(r.device->range_ms.at("forward"), 4.0, 1e-9);
  EXPECT_NEAR(r.device->outside_ranges_ms, 1.0, 1e-9);  // an unknown range is no range
}

// Kernel slices of the export by rank, and the names of each rank's GPU tracks.
struct GpuTracks {
  std::map<int, std::set<std::string>> names;
  std::map<int, std::vector<json>> kernels;
};
GpuTracks gpu_tracks(const fs::path& run) {
  std::ostringstream out;
  auto summary = reports::export_chrome_trace(run, out);
  EXPECT_TRUE(summary.ok()) << summary.status().to_string();
  const json trace = json::parse(out.str());
  GpuTracks t;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"].get<std::string>().rfind("gpu", 0) == 0)
      t.names[e["pid"].get<int>()].insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X" && (e["cat"] == "kernel" || e["cat"] == "nccl" || e["cat"] == "memcpy")) t.kernels[e["pid"].get<int>()].push_back(e);
  }
  return t;
}

TEST(SkewGpu, MemcpysAndMemsetsAreTheirOwnClass) {
  const fs::path dir = testing::fresh_temp_dir("skew-gpu-memcpy");
  testing::GpuFakeRunSpec spec;
  spec.memcpys = true;  // a memcpy in the idle gap 92-94, a memset at 88-90 beside the NCCL kernel
  testing::write_gpu_fake_run(dir, spec);
  auto report = analyze_skew(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  for (int r = 0; r < 2; ++r) {
    const RankSkew& rs = report->ranks[size_t(r)];
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_NEAR(rs.compute_ms, GpuFakeRunFacts::kComputeMs[r], 1e-3);
    EXPECT_NEAR(rs.memcpy_ms, 4, 1e-3);
    EXPECT_NEAR(rs.collective_transfer_ms, GpuFakeRunFacts::kTransferMs[r] - 2, 1e-3);
    EXPECT_NEAR(rs.idle_ms, GpuFakeRunFacts::kIdleMs[r] - 2, 1e-3);
    EXPECT_NEAR(rs.compute_ms + rs.collective_transfer_ms + rs.memcpy_ms + rs.idle_ms, GpuFakeRunFacts::kStepMs, 1e-3);
  }
  const json j = to_json(*report);
  EXPECT_NEAR(j["ranks"][0]["breakdown_ms"]["memcpy"].get<double>(), 4, 1e-3);
  EXPECT_NEAR(j["device"]["memcpy_ms"].get<double>(), 4, 1e-3);
  if (auto violation = testing::schema_violation(j, "skew_report.schema.json")) {
    EXPECT_EQ(*violation, "");
  }
  // The Chrome export's GPU track files them under their own category.
  const GpuTracks t = gpu_tracks(dir);
  int memcpy = 0;
  for (const auto& k : t.kernels.at(0)) memcpy += k["cat"] == "memcpy";
  EXPECT_EQ(memcpy, 4);  // 2 per traced step
  // The fixture without them has none.
  auto plain = analyze_skew(kFixture);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->ranks[0].memcpy_ms, 0.0);
}

TEST(SkewGpu, ChromeExportHasOneGpuTrackPerRank) {
  const GpuTracks t = gpu_tracks(kFixture);
  ASSERT_EQ(t.names.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(t.names.at(r), std::set<std::string>{"gpu 0"}) << "rank " << r;
    ASSERT_EQ(t.kernels.at(r).size(), 18u);  // 9 kernels x 2 traced steps, both streams
    int nccl = 0, outside = 0;
    for (const auto& k : t.kernels.at(r)) {
      EXPECT_EQ(k["tid"], t.kernels.at(r)[0]["tid"]);
      nccl += k["cat"] == "nccl";
      outside += k["args"]["range"] == "(outside any range)";
    }
    EXPECT_EQ(nccl, 2);
    EXPECT_EQ(outside, 2);
  }
  // The same kernel at the same aligned time on both ranks, although rank 1's clock is 2.5 s behind.
  EXPECT_DOUBLE_EQ(t.kernels.at(0)[0]["ts"].get<double>(), t.kernels.at(1)[0]["ts"].get<double>());
}

TEST(SkewGpu, ChromeExportPutsOverlappingKernelsOnAConcurrentLane) {
  const fs::path dir = testing::fresh_temp_dir("skew-gpu-lanes");
  testing::GpuFakeRunSpec spec;
  spec.nccl_overlaps_compute = true;
  testing::write_gpu_fake_run(dir, spec);
  const GpuTracks t = gpu_tracks(dir);
  EXPECT_EQ(t.names.at(0), (std::set<std::string>{"gpu 0", "gpu 0 concurrent 1"}));
  EXPECT_EQ(t.names.at(1), std::set<std::string>{"gpu 0"});
}

TEST(SkewGpu, ChromeExportDrawsADrainingOverlapOnTheSameTrack) {
  // On an H100 a dependent launch starts 0.1-0.2 us before its predecessor ends, on one stream.
  const fs::path dir = testing::fresh_temp_dir("skew-gpu-drain");
  testing::GpuFakeRunSpec spec;
  spec.gelu_starts_early_ns = 150;
  testing::write_gpu_fake_run(dir, spec);
  const GpuTracks t = gpu_tracks(dir);
  EXPECT_EQ(t.names.at(0), std::set<std::string>{"gpu 0"});
  int drawn_late = 0;
  for (const auto& k : t.kernels.at(0)) {
    if (k["name"].get<std::string>().rfind("gelu", 0) != 0) continue;
    EXPECT_EQ(k["args"]["overlap_ns"], 150);
    ++drawn_late;
  }
  EXPECT_EQ(drawn_late, 2);
}

// --- the real run: one H100, d12, bf16, flash attention; steps 5-6 carry every kernel ---

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "   132.05 ms  backward/block*/attn/sdpa" of kernel-breakdown.txt's first (flash) section.
double breakdown_txt_ms(const std::string& text, const std::string& label) {
  const std::string flash = text.substr(0, text.find("attention naive"));
  std::smatch m;
  const std::string escaped = std::regex_replace(label, std::regex(R"([.*()\[\]])"), R"(\$&)");
  if (!std::regex_search(flash, m, std::regex(R"(([0-9.]+) ms\s+)" + escaped + "\n"))) return -1;
  return std::stod(m[1]);
}

#define SKIP_WITHOUT_REAL_GPU_DATA()                                                                        \
  if (!fs::exists(kRealGpu / "d12-flash" / "rank00000.events"))                                            \
  GTEST_SKIP() << "real GPU data not found at " << kRealGpu.string() << " (the shared data folder is not here)"

TEST(SkewGpuReal, D12FlashComputeIsMostOfTheStep) {
  SKIP_WITHOUT_REAL_GPU_DATA();
  auto report = analyze_skew(kRealGpu / "d12-flash");
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_TRUE(report->device.has_value());
  const DeviceSummary& d = *report->device;
  const RankSkew& r0 = report->ranks[0];
  EXPECT_EQ(r0.breakdown_source, "device");
  EXPECT_EQ(d.mean.first_traced_step, 5);
  EXPECT_EQ(d.mean.last_traced_step, 6);
  EXPECT_GT(d.mean.compute_ms, 0.8 * d.mean.step_ms) << "compute " << d.mean.compute_ms << " of " << d.mean.step_ms;
  EXPECT_GT(r0.compute_ms, 0.8 * r0.device->step_ms);
  // One rank: no NCCL kernel runs; the host view booked the GPU's backlog as transfer (the issue).
  EXPECT_LT(r0.collective_transfer_ms, 1.0);
  EXPECT_GT(r0.host_breakdown.collective_transfer_ms, 100.0);

  const std::string truth = read_text(kRealGpu / "kernel-breakdown.txt");
  const double sdpa = breakdown_txt_ms(truth, "backward/block*/attn/sdpa");
  const double outside = breakdown_txt_ms(truth, "(outside any range)");
  ASSERT_GT(sdpa, 0) << "kernel-breakdown.txt changed shape";
  ASSERT_GT(outside, 0);
  ASSERT_FALSE(d.ranges_ms.empty());
  EXPECT_EQ(d.ranges_ms.front().first, "backward/block*/attn/sdpa");
  EXPECT_NEAR(d.ranges_ms.front().second, sdpa, 0.03 * sdpa);  // the file is step 5; this, steps 5-6
  EXPECT_NEAR(d.mean.outside_ranges_ms, outside, 0.05 * outside);
  std::printf("d12-flash: step %.2f ms = compute %.2f + transfer %.2f + idle %.2f; %s %.2f ms; outside ranges %.2f ms "
              "(host view: compute %.2f, transfer %.2f)\n",
              d.mean.step_ms, d.mean.compute_ms, d.mean.transfer_ms, d.mean.idle_ms, d.ranges_ms.front().first.c_str(), d.ranges_ms.front().second,
              d.mean.outside_ranges_ms, r0.host_breakdown.compute_ms, r0.host_breakdown.collective_transfer_ms);
}

TEST(SkewGpuReal, D12FlashUntracedStepsStayOnHostTime) {
  SKIP_WITHOUT_REAL_GPU_DATA();
  SkewOptions untraced;
  untraced.first_step = 7;
  untraced.last_step = 8;
  auto report = analyze_skew(kRealGpu / "d12-flash", untraced);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->device.has_value());
  EXPECT_EQ(report->ranks[0].breakdown_source, "host");
}

TEST(SkewGpuReal, D12FlashExportsOneGpuTrack) {
  SKIP_WITHOUT_REAL_GPU_DATA();
  const GpuTracks t = gpu_tracks(kRealGpu / "d12-flash");
  ASSERT_EQ(t.names.size(), 1u);
  EXPECT_EQ(t.names.at(0), std::set<std::string>{"gpu 0"});  // split-K reduces drawn from their GEMM's end
  EXPECT_EQ(t.kernels.at(0).size(), 2u * 933u);               // 933 kernels in each of steps 5 and 6
}

}  // namespace
}  // namespace rankscope::analyzers
