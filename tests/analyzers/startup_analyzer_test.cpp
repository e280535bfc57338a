// startup_analyzer_test.cpp — the start-up report's pieces without a job: the settings findings on
// run.json config blocks as gpt2-train writes them, the JSON against its schema, and clear errors
// on a run directory without a start-up record. (The timeline itself is checked on real jobs in
// tests/e2e_hang/e2e_startup_test.cpp.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "rankscope/analyzers/startup/config_findings.h"
#include "rankscope/analyzers/startup/startup_json.h"
#include "rankscope/analyzers/startup/startup_report.h"
#include "skew_fake_run.h"

namespace rankscope::analyzers {
namespace {

nlohmann::json config(nlohmann::json common, nlohmann::json by_rank = nlohmann::json::object()) {
  common["threads.openmp"] = 2;
  common["threads.cores_online"] = 2;
  return {{"settings", common}, {"settings_by_rank", by_rank}, {"recompute", 0}};
}

const ConfigFinding* find(const std::vector<ConfigFinding>& fs, const std::string& setting, bool differs = false) {
  for (const auto& f : fs)
    if (f.setting == setting && (f.value == "differs") == differs) return &f;
  return nullptr;
}

TEST(ConfigFindings, CleanConfigurationSaysNothing) {
  EXPECT_TRUE(config_findings(config({{"OMP_NUM_THREADS", "2"}}), 4, 1).empty());
  EXPECT_TRUE(config_findings(nlohmann::json("not a block"), 4, 1).empty());
}

TEST(ConfigFindings, LaunchBlockingAndBusyWaitOnOneRankAreNamedWithTheirEffect) {
  const auto fs = config_findings(
      config({}, {{"0", {{"CUDA_LAUNCH_BLOCKING", nullptr}, {"OMP_WAIT_POLICY", nullptr}}},
                  {"1", {{"CUDA_LAUNCH_BLOCKING", "1"}, {"OMP_WAIT_POLICY", "active"}}}}),
      2, 2);
  const auto* blocking = find(fs, "CUDA_LAUNCH_BLOCKING");
  ASSERT_NE(blocking, nullptr);
  EXPECT_EQ(blocking->ranks, std::vector<int>{1});
  EXPECT_NE(blocking->text.find("CUDA_LAUNCH_BLOCKING=1 on rank 1"), std::string::npos) << blocking->text;
  const auto* busy = find(fs, "OMP_WAIT_POLICY");
  ASSERT_NE(busy, nullptr);
  EXPECT_NE(busy->text.find("2 ranks x 2 threads share 2 cores"), std::string::npos) << busy->text;
  EXPECT_NE(find(fs, "CUDA_LAUNCH_BLOCKING", true), nullptr) << "differs across ranks";
  EXPECT_NE(find(fs, "OMP_WAIT_POLICY", true), nullptr);
}

TEST(ConfigFindings, DebugLevelsLeftOnEverywhere) {
  const auto fs = config_findings(config({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "ALL"}}), 8, 8);
  const auto* debug = find(fs, "NCCL_DEBUG");
  ASSERT_NE(debug, nullptr);
  EXPECT_TRUE(debug->ranks.size() == 8u || debug->ranks.empty());
  EXPECT_NE(debug->text.find("every rank"), std::string::npos) << debug->text;
  EXPECT_NE(find(fs, "NCCL_DEBUG_SUBSYS"), nullptr);
  EXPECT_EQ(find(config_findings(config({{"NCCL_DEBUG", "WARN"}}), 8, 8), "NCCL_DEBUG"), nullptr);
}

TEST(StartupReport, JsonFollowsItsSchema) {
  StartupReport r;
  r.run_dir = "runs/x";
  r.world_size = 2;
  r.median_to_first_step_s = 4.0;
  for (int rank = 0; rank < 2; ++rank) {
    RankStartup x;
    x.rank = rank;
    x.readable = rank == 0;
    if (!x.readable) {
      x.problem = "no event stream";
    } else {
      x.phases = {{"init/launch", 2000, 1}, {"init/data", 100, 1}};
      x.launch_at_s = 0;
      x.first_step_at_s = 4.0;
      x.to_first_step_s = 4.0;
      x.slowest_phase = "init/launch";
      x.slowest_phase_ms = 2000;
    }
    r.ranks.push_back(x);
  }
  r.findings.push_back({"setting", 1, "", "CUDA_LAUNCH_BLOCKING", 0, "CUDA_LAUNCH_BLOCKING=1 on rank 1: ..."});
  const auto j = startup_report_json(r);
  const auto violation = testing::schema_violation(j, "startup_report.schema.json");
  if (!violation) GTEST_SKIP() << "python3 jsonschema not installed";
  EXPECT_EQ(*violation, "");
  nlohmann::json bad = j;
  bad["ranks"][0]["phases"][0]["name"] = "forward/embed";  // not a start-up phase
  const auto v = testing::schema_violation(bad, "startup_report.schema.json");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(*v, "");
}

TEST(StartupReport, RunWithoutStartupRecordIsAClearError) {
  auto missing = analyze_startup("/nonexistent/run");
  ASSERT_FALSE(missing.ok());
  const auto dir = std::filesystem::temp_directory_path() / ("rs_startup_empty_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto empty = analyze_startup(dir);
  EXPECT_FALSE(empty.ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::analyzers
