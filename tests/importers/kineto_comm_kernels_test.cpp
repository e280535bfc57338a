// kineto_comm_kernels_test.cpp — communication that is not NCCL (DeepEP's
// dispatch/combine, a custom exchange kernel named with --comm-kernel) is transfer time, not
// compute, in skew's device breakdown and the Chrome export.
//
// Fixture: tests/fixtures/kineto/deepep/rank0.json (make_deepep_fixture.py there: DeepSeek's
// published training profile's shape, times chosen so the answer is known by construction).
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/kineto/kineto_import.h"
#include "rankscope/reports/chrome_trace.h"

namespace rankscope::kineto {
namespace {

namespace fs = std::filesystem;

const fs::path kDeepEp = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto/deepep/rank0.json";

class DeepEpTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rs-deepep-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto summary = import_kineto({kDeepEp}, dir_ / "run");
    ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path run() const { return dir_ / "run"; }
  fs::path dir_;
};

TEST_F(DeepEpTrace, DeepEpKernelsAreTransferNotCompute) {
  auto report = analyzers::analyze_skew(run());
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_TRUE(report->device.has_value());
  const analyzers::DeviceBreakdown& d = report->device->mean;
  // Per step: compute kernels 16 ms (+0.5 ms of the custom kernel no built-in rule knows); DeepEP
  // alone on the device [8,9] [9.5,10] [18,19] = 2.5 ms. Before the rules: compute 18.5, transfer 0.
  EXPECT_NEAR(d.compute_ms, 16.5, 0.05);
  EXPECT_NEAR(d.transfer_ms, 2.5, 0.05);
}

TEST_F(DeepEpTrace, UserPatternMakesACustomKernelTransfer) {
  analyzers::SkewOptions options;
  options.comm_kernel_patterns = {"moe_exchange"};
  auto report = analyzers::analyze_skew(run(), options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_TRUE(report->device.has_value());
  EXPECT_NEAR(report->device->mean.compute_ms, 16.0, 0.05);
  EXPECT_NEAR(report->device->mean.transfer_ms, 3.0, 0.05);

  options.comm_kernel_patterns = {"moe_exchange("};
  auto bad = analyzers::analyze_skew(run(), options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().user_text().find("not a regular expression"), std::string::npos) << bad.status().user_text();
}

TEST_F(DeepEpTrace, ChromeExportNamesTheRuleOfEachKernel) {
  reports::ChromeTraceOptions options;
  options.comm_kernel_patterns = {"moe_exchange"};
  std::ostringstream out;
  auto summary = reports::export_chrome_trace(run(), out, options);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const nlohmann::json trace = nlohmann::json::parse(out.str());
  int deepep = 0, user = 0, compute = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].contains("class_rule")) continue;
    const std::string rule = e["args"]["class_rule"], cat = e["cat"];
    if (rule == "deepep") deepep += cat == "comm";
    if (rule == "user:moe_exchange") user += cat == "comm";
    if (rule == "default") compute += cat == "kernel";
  }
  EXPECT_EQ(deepep, 12);  // 4 DeepEP kernels x 3 steps
  EXPECT_EQ(user, 3);
  EXPECT_EQ(compute, 6);
}

}  // namespace
}  // namespace rankscope::kineto
