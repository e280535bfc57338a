// kineto_mixed_jobs_test.cpp — traces of two different jobs are never merged
// without a word. The fixture pair (tests/fixtures/kineto/mixed-jobs, make_fixtures.py) has the shape
// of HTA's trace_diff control/test traces the issue merged: rank 3 of 8 on A100s and rank 1 of 2
// on V100s, recorded 8.5 days apart. Then each criterion of the rule alone (import_job.h
// job_differences), which the nsys import shares.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/trace_core/import_job.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/kineto/kineto_import.h"

namespace rankscope::kineto {
namespace kineto_mixed_jobs_test {

namespace fs = std::filesystem;

const fs::path kMixed = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto/mixed-jobs";
const fs::path kOneJob = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto/nccl-2ranks";

fs::path scratch(const std::string& name) {
  static int counter = 0;
  const fs::path p = fs::temp_directory_path() /
                     ("rs-kineto-mixed-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(p);
  return p;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(KinetoMixedJobs, TwoJobsInOneFolderAreRefusedNamingFilesAndDifferences) {
  const fs::path run = scratch("refused");
  auto summary = import_kineto({kMixed}, run);
  ASSERT_FALSE(summary.ok()) << "two jobs imported as one";
  const std::string text = summary.status().user_text();
  EXPECT_TRUE(has(text, "control_rank3.json")) << text;
  EXPECT_TRUE(has(text, "test_rank1.json")) << text;
  EXPECT_TRUE(has(text, "world size 8 vs 2")) << text;
  EXPECT_TRUE(has(text, "devices NVIDIA A100-PG509-200 vs Tesla V100-SXM2-16GB")) << text;
  EXPECT_TRUE(has(text, "process group '0'")) << text;
  EXPECT_TRUE(has(text, "8.5 days apart")) << text;
  EXPECT_TRUE(has(text, "--allow-mixed")) << text;
  EXPECT_FALSE(has(text, ".cpp")) << "no source location in a user's error: " << text;
  EXPECT_FALSE(fs::exists(run / format::kRunMetadataFile)) << "nothing is written";
  fs::remove_all(run);
}

TEST(KinetoMixedJobs, AllowMixedImportsAndKeepsTheWarningInRunJson) {
  const fs::path run = scratch("allowed");
  ImportOptions options;
  options.allow_mixed = true;
  auto summary = import_kineto({kMixed}, run, options);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->ranks.size(), 2u);
  EXPECT_EQ(summary->world_size, 8);
  auto meta = format::read_run_metadata(run);
  ASSERT_TRUE(meta.ok()) << meta.status().to_string();
  const nlohmann::json& warnings = meta->extra["source"]["warnings"];
  ASSERT_TRUE(warnings.is_array());
  bool said = false;
  for (const auto& w : warnings) {
    const std::string line = w.get<std::string>();
    if (has(line, "different jobs imported as one (--allow-mixed)") && has(line, "world size 8 vs 2")) said = true;
  }
  EXPECT_TRUE(said) << warnings.dump();
  fs::remove_all(run);
}

TEST(KinetoMixedJobs, OneJobsTracesPassWithoutAWarning) {
  const fs::path run = scratch("one");
  auto summary = import_kineto({kOneJob}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  for (const auto& w : summary->warnings) EXPECT_FALSE(has(w, "different jobs")) << w;
  fs::remove_all(run);
}

// A real PyTorch 2.15 job (2 ranks, Gloo, two process groups in distributedInfo) is one job: the
// rule does not refuse what PyTorch writes for one job (a changed group: JobDifferences below).
TEST(KinetoMixedJobs, RealTorchJobIsOneJob) {
  const fs::path real = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto/torch-cpu-gloo-2ranks";
  const fs::path dir = scratch("real");
  auto summary = import_kineto({real}, dir / "run");
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->world_size, 2);
  for (const auto& w : summary->warnings) EXPECT_FALSE(has(w, "different jobs")) << w;
  fs::remove_all(dir);
}

// A trace of the same job whose host clock is an hour off is still one job... but recorded more
// than 10 minutes from the others it is not: the rule compares windows, not bases.
TEST(KinetoMixedJobs, RecordedFarApartIsAnotherRun) {
  const fs::path dir = scratch("clock");
  fs::create_directories(dir);
  for (int r : {0, 1}) {
    std::ifstream in(kOneJob / ("rank" + std::to_string(r) + ".json"));
    nlohmann::json doc = nlohmann::json::parse(in);
    if (r == 1) doc["baseTimeNanoseconds"] = doc["baseTimeNanoseconds"].get<int64_t>() + int64_t(3 * 3600) * 1000000000;
    std::ofstream(dir / ("rank" + std::to_string(r) + ".json")) << doc.dump();
  }
  auto summary = import_kineto({dir}, dir / "run");
  ASSERT_FALSE(summary.ok());
  const std::string text = summary.status().user_text();
  EXPECT_TRUE(has(text, "recorded 3.0 h apart")) << text;
  EXPECT_FALSE(has(text, "world size")) << "only the clocks differ: " << text;
  fs::remove_all(dir);
}

// --- the rule, one criterion at a time (shared with import-nsys) -----------------------------------

trace_core::JobSignature sig(int rank) {
  trace_core::JobSignature s;
  s.file = "rank" + std::to_string(rank) + ".json";
  s.rank = rank;
  s.world_size = 8;
  s.group_count = 2;
  s.groups["0"] = "default_pg (cuda:nccl, ranks [0..7])";
  s.devices = {"NVIDIA H100 80GB HBM3"};
  const int64_t t0 = int64_t(1790857026) * 1000000000;
  s.epoch_window_ns = std::make_pair(t0, t0 + int64_t(30) * 1000000000);
  return s;
}

TEST(JobDifferences, EachCriterionAloneAndNothingWhenAbsent) {
  const auto a = sig(0);
  EXPECT_TRUE(trace_core::job_differences(a, sig(1)).empty());

  auto b = sig(1);
  b.world_size = 16;
  ASSERT_EQ(trace_core::job_differences(a, b).size(), 1u);
  EXPECT_EQ(trace_core::job_differences(a, b)[0], "world size 8 vs 16");
  b.world_size.reset();  // a producer that does not write it is not compared on it
  EXPECT_TRUE(trace_core::job_differences(a, b).empty());

  b = sig(1);
  b.group_count = 3;
  EXPECT_EQ(trace_core::job_differences(a, b), std::vector<std::string>{"2 vs 3 process groups"});

  b = sig(1);
  b.groups["0"] = "default_pg (cuda:nccl, ranks [0..15])";
  b.groups["7"] = "tp (cuda:nccl, ranks [0, 1])";  // a group only one side names is no difference
  ASSERT_EQ(trace_core::job_differences(a, b).size(), 1u);
  EXPECT_TRUE(has(trace_core::job_differences(a, b)[0], "process group '0'"));

  b = sig(1);
  b.devices = {"NVIDIA A100-SXM4-80GB"};
  EXPECT_EQ(trace_core::job_differences(a, b), std::vector<std::string>{"devices NVIDIA H100 80GB HBM3 vs NVIDIA A100-SXM4-80GB"});
  b.devices.clear();  // a CPU-only trace lists no device
  EXPECT_TRUE(trace_core::job_differences(a, b).empty());
}

TEST(JobDifferences, ClocksFarApartMeansMoreThanTenMinutesBetweenWindows) {
  const auto a = sig(0);
  const int64_t end = a.epoch_window_ns->second;
  auto b = sig(1);
  // Overlapping, or a host clock minutes off: one job.
  b.epoch_window_ns = std::make_pair(end - 5, end + 1000);
  EXPECT_TRUE(trace_core::job_differences(a, b).empty());
  b.epoch_window_ns = std::make_pair(end + trace_core::kFarApartNs - 1, end + trace_core::kFarApartNs + 1000);
  EXPECT_TRUE(trace_core::job_differences(a, b).empty());
  // Further: another run. Either order.
  b.epoch_window_ns = std::make_pair(end + trace_core::kFarApartNs + 1, end + trace_core::kFarApartNs + 1000);
  ASSERT_EQ(trace_core::job_differences(a, b).size(), 1u);
  EXPECT_TRUE(has(trace_core::job_differences(a, b)[0], "recorded 10 min apart")) << trace_core::job_differences(a, b)[0];
  EXPECT_EQ(trace_core::job_differences(b, a).size(), 1u);
  b.epoch_window_ns.reset();  // times that are not epoch times are not compared
  EXPECT_TRUE(trace_core::job_differences(a, b).empty());
}

TEST(JobDifferences, CheckNamesTheFirstThreeFilesAndCountsTheRest) {
  std::vector<trace_core::JobSignature> files = {sig(0)};
  for (int r = 1; r <= 5; ++r) {
    files.push_back(sig(r));
    files.back().world_size = 2;
  }
  std::vector<std::string> warnings;
  const Status refused = trace_core::check_one_job(files, false, warnings);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has(refused.user_text(), "rank3.json")) << refused.user_text();
  EXPECT_FALSE(has(refused.user_text(), "rank4.json")) << refused.user_text();
  EXPECT_TRUE(has(refused.user_text(), "2 more files differ from rank0.json")) << refused.user_text();
  EXPECT_TRUE(warnings.empty());
  ASSERT_TRUE(trace_core::check_one_job(files, true, warnings).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(has(warnings[0], "--allow-mixed"));
}

}  // namespace kineto_mixed_jobs_test
}  // namespace rankscope::kineto
