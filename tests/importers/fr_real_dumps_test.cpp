// fr_real_dumps_test.cpp — issue 22 on PyTorch's own dumps from an H100 (PyTorch 2.11, NCCL 2.28.9,
// format 2.10; shared/data/real-gpu/torch-fr, written by shared/gpu/torch_nccl_check.py): the
// on-demand dump of a healthy job reads healthy, the watchdog's dump of an all_reduce queued behind
// a spinning kernel (timing on, timeout 8 s) reads the GPU behind its host for at least 8 s. Skips
// when that folder is absent (CI); the same facts are checked on fixtures in fr_backend_rules_test.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rankscope::torch_fr
