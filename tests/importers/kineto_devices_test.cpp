// kineto_devices_test.cpp — devices other than CUDA. MTIA (`mtia_runtime`
// launches, `mtia_ccp_events` on the device) and XPU (`xpu_runtime`, kernels on SYCL queues) are
// read as the device timeline; what cannot be placed (MTIA stream syncs, Insight records, a category
// no Kineto wrote) is reported with its count and time, and never shown as device time. Fixtures
// in tests/fixtures/kineto (make_fixtures.py): one rank, 2 steps of 10 ms, forward 2 ms, backward
// 3 ms, a 0.5 ms copy in data. Then HTA's real ROCm (MI250) and Triton (cuLaunchKernel) traces.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/kineto/kineto_import.h"

namespace rankscope::kineto {
namespace kineto_devices_test {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto";

fs::path scratch(const std::string& name) {
  static int counter = 0;
  const fs::path p = fs::temp_directory_path() /
                     ("rs-kineto-dev-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(p);
  return p;
}

std::string find_line(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines) {
    if (l.find(what) != std::string::npos) return l;
  }
  return "";
}

// The device breakdown of the only rank: compute 5 ms and a 0.5 ms copy a step, by construction.
void expect_known_device_time(const fs::path& run) {
  auto report = analyzers::analyze_skew(run);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_TRUE(report->ranks.at(0).device.has_value()) << "the device timeline was read";
  const auto& d = *report->ranks[0].device;
  EXPECT_NEAR(d.step_ms, 10.0, 1e-6);
  EXPECT_NEAR(d.compute_ms, 5.0, 1e-6) << "kernels only: a waiting stream is not compute";
  EXPECT_NEAR(d.memcpy_ms, 0.5, 1e-6) << "the copy is memory time, not compute";
  EXPECT_NEAR(d.idle_ms, 4.5, 1e-6);
}

TEST(KinetoDevices, MtiaIsReadAsTheDeviceTimelineAndTheRestIsReported) {
  const fs::path run = scratch("mtia");
  auto summary = import_kineto({kFixtures / "mtia/rank0.json"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_EQ(r.kernels, 6) << "2 kernels and a DMA copy per step";
  EXPECT_EQ(r.unlaunched_ops, 0);
  EXPECT_NE(r.producer.find("6 device ops MTIA"), std::string::npos) << r.producer;
  // MTIA's host synchronize calls under the device's pid are not a second process.
  EXPECT_EQ(find_line(r.warnings, "processes recorded CPU events"), "");
  // What was not read: how many, how long, why.
  EXPECT_NE(find_line(r.warnings, "not read: 4 events of MTIA stream synchronisation (event_wait, event_record) "
                                  "(8.002 ms of device time, left out of the device timeline)"), "")
      << ::testing::PrintToString(r.warnings);
  EXPECT_NE(find_line(r.warnings, "not read: 2 events of category 'mtia_insight' (0.100 ms of device time"), "");
  EXPECT_NE(find_line(r.warnings, "not read: 2 events of category 'npu_kernel' (0.050 ms summed): not a category Kineto writes"), "");
  // ... and it is in run.json for every report built on it.
  auto meta = format::read_run_metadata(run);
  ASSERT_TRUE(meta.ok());
  EXPECT_NE(meta->extra["source"].dump().find("MTIA stream synchronisation"), std::string::npos);
  expect_known_device_time(run);
  fs::remove_all(run);
}

TEST(KinetoDevices, XpuKernelsOnSyclQueuesAreReadAsXpu) {
  const fs::path run = scratch("xpu");
  auto summary = import_kineto({kFixtures / "xpu/rank0.json"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_EQ(r.kernels, 6);
  EXPECT_EQ(r.unlaunched_ops, 0);
  EXPECT_NE(r.producer.find("6 device ops XPU"), std::string::npos) << "launched by xpu_runtime, not CUDA: " << r.producer;
  expect_known_device_time(run);
  fs::remove_all(run);
}

// Device records the import cannot place are never shown as device time: with every MTIA device
// event in a category it does not read, the rank has no device breakdown at all (skew's host
// figures say they are host time) and the warning gives their count and device time.
TEST(KinetoDevices, UnreadDeviceWorkIsNeverShownAsDeviceTime) {
  const fs::path dir = scratch("unread");
  fs::create_directories(dir);
  std::ifstream in(kFixtures / "mtia/rank0.json");
  nlohmann::json doc = nlohmann::json::parse(in);
  for (auto& e : doc["traceEvents"]) {
    if (e.value("cat", "") == "mtia_ccp_events") e["cat"] = "mtia_workloadd";
  }
  std::ofstream(dir / "rank0.json") << doc.dump();
  auto summary = import_kineto({dir / "rank0.json"}, dir / "run");
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_EQ(r.kernels, 0);
  // 6 ops (2 + 3 + 0.5 ms a step) and 4 syncs (4 ms + 1 µs a step) over 2 steps.
  EXPECT_NE(find_line(r.warnings, "not read: 10 events of category 'mtia_workloadd' (19.002 ms of device time, left out "
                                  "of the device timeline)"), "")
      << ::testing::PrintToString(r.warnings);
  EXPECT_NE(find_line(r.warnings, "no device work read"), "") << ::testing::PrintToString(r.warnings);
  auto report = analyzers::analyze_skew(dir / "run");
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->ranks.at(0).device.has_value()) << "no device timeline was read: none is shown";
  fs::remove_all(dir);
}

// HTA's real ROCm 6.2 trace (MI250): HIP calls written as cuda_runtime, kernels and copies joined.
TEST(KinetoDevices, RealRocmTraceIsReadAsRocm) {
  const fs::path run = scratch("rocm");
  auto summary = import_kineto({kFixtures / "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_EQ(r.kernels, 16) << "14 kernels and 2 copies";
  EXPECT_EQ(r.unlaunched_ops, 0);
  EXPECT_NE(r.producer.find("16 device ops ROCm"), std::string::npos) << r.producer;
  auto report = analyzers::analyze_skew(run);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  const auto rank = std::find_if(report->ranks.begin(), report->ranks.end(), [&](const auto& x) { return x.rank == r.rank; });
  ASSERT_NE(rank, report->ranks.end());
  ASSERT_TRUE(rank->device.has_value());
  EXPECT_GT(rank->device->compute_ms, 0.0);
  fs::remove_all(run);
}

// HTA's Triton example: the kernel is launched by cuLaunchKernel (cuda_driver). The file names no
// rank; copied as rank0.json.gz here (a lone trace without a rank is rank 0 of 1 anyway).
TEST(KinetoDevices, RealTritonKernelLaunchedByTheDriverApi) {
  const fs::path dir = scratch("triton");
  fs::create_directories(dir);
  fs::copy_file(kFixtures / "hta/triton_example/triton_example.json.gz", dir / "rank0.json.gz");
  const fs::path run = dir / "run";
  auto summary = import_kineto({dir / "rank0.json.gz"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->ranks.at(0).kernels, 1);
  EXPECT_EQ(summary->ranks.at(0).unlaunched_ops, 0);
  fs::remove_all(dir);
}

// HTA's CPU-only rank 34 of 300 (Gloo): no device at all, and nothing said to be missing.
TEST(KinetoDevices, RealCpuOnlyTraceHasNoDeviceAndNoFalseWarning) {
  const fs::path run = scratch("cpu");
  auto summary = import_kineto({kFixtures / "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_EQ(r.rank, 34);
  EXPECT_EQ(summary->world_size, 300);
  EXPECT_EQ(r.kernels, 0);
  EXPECT_EQ(find_line(r.warnings, "not read"), "") << ::testing::PrintToString(r.warnings);
  fs::remove_all(run);
}

}  // namespace kineto_devices_test
}  // namespace rankscope::kineto
