// fr_megatron_verdict_test.cpp — verdicts on Megatron-LM-shaped dumps of our own
// (tests/importers/fr_megatron_job.h: Megatron's groups, a 1F1B pipeline, MoE with uneven all_to_all,
// only active entries, timing off): for each fault, hangdoctor names the faulted ranks and only them,
// exits 1, and never calls uneven all_to_all a desync; healthy dumps of the same job exit 0. The
// real dumps of such a job are checked in fr_real_dumps_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "fr_hangdoctor_run.h"
#include "fr_megatron_job.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;
using testing::MegatronFault;

struct Scenario {
  const char* name;
  testing::MegatronLayout layout;
  MegatronFault fault;
  std::vector<int> ranks;
  const char* kind;  // the report's kind ("" for healthy)
};

testing::MegatronLayout tp4_pp2_dp2() { return {}; }
testing::MegatronLayout tp2_pp4_dp2() {
  testing::MegatronLayout l;
  l.tp = 2;
  l.pp = 4;
  return l;
}

class MegatronVerdict : public ::testing::TestWithParam<Scenario> {};

TEST_P(MegatronVerdict, NamesTheFaultedRanksAndOnlyThem) {
  const Scenario& s = GetParam();
  testing::MegatronJobSpec spec;
  spec.layout = s.layout;
  spec.fault = s.fault;
  spec.fault_ranks = s.ranks;
  const fs::path dir = fs::temp_directory_path() / fmt::format("rs_fr_megatron_{}_{}", s.name, ::getpid());
  fs::remove_all(dir);
  const testing::MegatronJob job = testing::write_megatron_job(spec, dir);
  const auto r = testing::hangdoctor_json(dir.string());
  fs::remove_all(dir);
  const auto& j = r.report;
  ASSERT_TRUE(j.is_object()) << r.err;
  const std::string headline = j.value("headline", "");
  std::set<int> named;
  for (const auto& x : j["culprit_ranks"]) named.insert(x.get<int>());
  const std::set<int> faulted(job.culprits.begin(), job.culprits.end());
  EXPECT_EQ(named, faulted) << headline << "\n" << job.description;
  EXPECT_EQ(r.code, s.fault == MegatronFault::kNone ? 0 : 1) << headline;
  if (*s.kind) {
    EXPECT_EQ(j["kind"], s.kind) << headline;
  } else {
    EXPECT_TRUE(j["kind"].is_null()) << headline;
  }
  // Uneven all_to_all sizes are never the desync (only the count fault is a desync, by its totals).
  if (s.fault != MegatronFault::kA2aCountMismatch) {
    EXPECT_EQ(headline.find("DESYNC"), std::string::npos) << headline;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, MegatronVerdict,
    ::testing::Values(Scenario{"tp4pp2_healthy", tp4_pp2_dp2(), MegatronFault::kNone, {}, ""},
                      Scenario{"tp4pp2_gpu_error", tp4_pp2_dp2(), MegatronFault::kGpuError, {9, 14}, "gpu_behind_host"},
                      Scenario{"tp4pp2_gil_held", tp4_pp2_dp2(), MegatronFault::kGilHeld, {9, 14}, "lagging_rank"},
                      Scenario{"tp4pp2_killed", tp4_pp2_dp2(), MegatronFault::kKilled, {9}, "lagging_rank"},
                      Scenario{"tp4pp2_stage_stall", tp4_pp2_dp2(), MegatronFault::kStageStall, {8}, "lagging_rank"},
                      Scenario{"tp4pp2_a2a_count", tp4_pp2_dp2(), MegatronFault::kA2aCountMismatch, {9}, "a2a_count_mismatch"},
                      Scenario{"tp2pp4_healthy", tp2_pp4_dp2(), MegatronFault::kNone, {}, ""},
                      Scenario{"tp2pp4_gpu_error", tp2_pp4_dp2(), MegatronFault::kGpuError, {9, 14}, "gpu_behind_host"},
                      Scenario{"tp2pp4_gil_held", tp2_pp4_dp2(), MegatronFault::kGilHeld, {14}, "lagging_rank"},
                      Scenario{"tp2pp4_killed", tp2_pp4_dp2(), MegatronFault::kKilled, {9}, "lagging_rank"},
                      Scenario{"tp2pp4_stage_stall", tp2_pp4_dp2(), MegatronFault::kStageStall, {8}, "lagging_rank"},
                      Scenario{"tp2pp4_a2a_count", tp2_pp4_dp2(), MegatronFault::kA2aCountMismatch, {9}, "a2a_count_mismatch"}),
    [](const ::testing::TestParamInfo<Scenario>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace rankscope::torch_fr
