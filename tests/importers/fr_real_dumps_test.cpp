// fr_real_dumps_test.cpp — PyTorch's own dumps from an H100 (PyTorch 2.11, NCCL 2.28.9,
// format 2.10; shared/data/real-gpu/torch-fr, written by shared/gpu/torch_nccl_check.py): the
// on-demand dump of a healthy job reads healthy, the watchdog's dump of an all_reduce queued behind
// a spinning kernel (timing on, timeout 8 s) reads the GPU behind its host for at least 8 s. Skips
// when that folder is absent (CI); the same facts are checked on fixtures in fr_backend_rules_test.
#include <gtest/gtest.h>

#include <set>

#include "fr_hangdoctor_run.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;
using testing::hangdoctor_json;

fs::path real_dumps() { return fs::path(RANKSCOPE_SOURCE_DIR) / ".." / "shared/data/real-gpu/torch-fr"; }

#define SKIP_WITHOUT_REAL_DUMPS(dir)                                                                      \
  if (!fs::exists(real_dumps() / (dir) / "comm_lib_trace_rank_0"))                                       \
  GTEST_SKIP() << "no real Flight Recorder dumps at " << (real_dumps() / (dir)).string()                 \
               << " (shared/data/real-gpu is not part of every checkout)"

TEST(FrRealDumps, HealthyOnDemandDumpReadsHealthy) {
  SKIP_WITHOUT_REAL_DUMPS("nccl-healthy-timing");
  const auto r = hangdoctor_json((real_dumps() / "nccl-healthy-timing").string());
  EXPECT_EQ(r.code, 0) << r.err << r.report.dump(2);
  EXPECT_EQ(r.report["verdict"], "healthy");
  EXPECT_TRUE(r.report["kind"].is_null());
  EXPECT_EQ(r.report["headline"], "HEALTHY: 1 rank running; no collective is pending.");
  EXPECT_NE(r.err.find("format 2.10, backend nccl, 1 rank (0), missing none; timing on"), std::string::npos) << r.err;
  EXPECT_GE(r.report["stuck_for_s"].get<double>(), 0.0);
  EXPECT_LT(r.report["stuck_for_s"].get<double>(), 1.0);
}

TEST(FrRealDumps, TimeoutDumpIsTheGpuBehindItsHostForAtLeastTheTimeout) {
  SKIP_WITHOUT_REAL_DUMPS("nccl-timeout-timing");
  const auto r = hangdoctor_json((real_dumps() / "nccl-timeout-timing").string());
  const auto& j = r.report;
  EXPECT_EQ(r.code, 1) << r.err << j.dump(2);
  EXPECT_EQ(j["verdict"], "hang");
  EXPECT_EQ(j["kind"], "gpu_behind_host") << j["headline"];
  EXPECT_EQ(j["culprit_ranks"], nlohmann::json::array({0}));
  EXPECT_EQ(j["collective"]["comm"], "default_pg");
  EXPECT_EQ(j["collective"]["seq"], 21);
  EXPECT_EQ(j["collective"]["op"], "allreduce_sum");
  EXPECT_EQ(j["collective"]["count"], 1048576);
  // The user's call site, not torch's all_reduce wrapper.
  const std::string site = j["collective"]["range"];
  EXPECT_NE(site.find("torch_nccl_check.py:36)"), std::string::npos) << site;
  // Timeout 8 s, and #21 is the newest timestamp in the dump: at least 8 s, and no more is known.
  EXPECT_GE(j["stuck_for_s"].get<double>(), 8.0);
  EXPECT_LT(j["stuck_for_s"].get<double>(), 8.5);
  EXPECT_TRUE(j["times_are_lower_bounds"].get<bool>());
  EXPECT_NE(j["headline"].get<std::string>().find("its GPU never started it, for at least 8.0 s"), std::string::npos)
      << j["headline"];
}

// Other people's dumps of a 16-GPU Megatron-LM MoE job (TP4 PP2 DP2, EP8; format 2.9, NCCL
// 2.27.3, only active entries, timing off), copied from NVIDIA/nvidia-resiliency-ext's
// tests/attribution/unit/fr_traces (Apache-2.0) into tests/fixtures/torch_fr/real-megatron-moe.
// Each folder's fault_injection.log names ranks 9 and 14.
fs::path megatron_dumps(const std::string& run) {
  return fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr/real-megatron-moe" / run;
}

std::set<int> ranks_of(const nlohmann::json& a) {
  std::set<int> out;
  for (const auto& x : a) out.insert(x.get<int>());
  return out;
}

TEST(FrRealPeerDumps, GpuErrorNamesTheTwoFaultedRanksAndWhatTheirPeersCompleted) {
  const auto r = hangdoctor_json(megatron_dumps("gpu_error_2nd").string());
  const auto& j = r.report;
  EXPECT_EQ(r.code, 1) << r.err << j.dump(2);
  EXPECT_EQ(j["verdict"], "hang") << j["headline"];
  EXPECT_EQ(ranks_of(j["culprit_ranks"]), (std::set<int>{9, 14})) << j["headline"];
  // Their peers completed allgather #87749 on their tensor groups; they never saw it complete.
  EXPECT_EQ(j["kind"], "gpu_behind_host") << j["headline"];
  const std::string headline = j["headline"];
  EXPECT_NE(headline.find("rank 9: allgather #87749 on tensor group 37 (ranks 8-11)"), std::string::npos) << headline;
  EXPECT_NE(headline.find("rank 14: allgather #87749 on tensor group 38 (ranks 12-15)"), std::string::npos) << headline;
  // Uneven MoE all_to_all sizes are not a desync, and nobody is "stuck in the collective".
  EXPECT_EQ(headline.find("DESYNC"), std::string::npos);
  // Every other rank waits on one of them: stage 1 in the expert all_to_all, stage 0 through the
  // pipeline (rank 6's partner in stage 1 is rank 14, so it waits on 14 and not on 9).
  ASSERT_EQ(j["waits_on_culprits"].size(), 2u);
  std::set<int> all;
  for (const auto& chain : j["waits_on_culprits"]) {
    const auto behind = ranks_of(chain["behind"]);
    all.insert(behind.begin(), behind.end());
    for (const auto& at : chain["missing_from"]) {
      const auto w = ranks_of(at["waiters"]);
      all.insert(w.begin(), w.end());
    }
  }
  EXPECT_EQ(all, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 15}));
}

TEST(FrRealPeerDumps, GilHeldNamesTheTwoRanksWithEmptyDumps) {
  const auto r = hangdoctor_json(megatron_dumps("lock_gil_1st").string());
  const auto& j = r.report;
  EXPECT_EQ(r.code, 1) << r.err << j.dump(2);
  EXPECT_EQ(j["verdict"], "hang") << j["headline"];
  EXPECT_EQ(ranks_of(j["culprit_ranks"]), (std::set<int>{9, 14})) << j["headline"];
  EXPECT_EQ(j["kind"], "lagging_rank") << j["headline"];
  // Each is named at its own tensor group's collective, which the dumps' pg_status alone tells
  // (their dumps hold no entry to name a pg_id).
  const std::string headline = j["headline"];
  EXPECT_NE(headline.find("rank 9 never entered reduce_scatter #88684 on tensor group 37 (ranks 8-11)"), std::string::npos)
      << headline;
  EXPECT_NE(headline.find("rank 14 never entered reduce_scatter #88684 on tensor group 38 (ranks 12-15)"), std::string::npos)
      << headline;
  EXPECT_NE(j["explanation"].get<std::string>().find("Nothing is open in their dumps"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::torch_fr
