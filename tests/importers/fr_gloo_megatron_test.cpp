// fr_gloo_megatron_test.cpp — many process groups on dumps the real producer wrote: PyTorch 2.15 with Gloo,
// 16 CPU ranks, Megatron-LM's own process groups (megatron-core's parallel_state), a 1F1B pipeline,
// uneven MoE all_to_all_single, and one fault per folder (tests/fixtures/torch_fr/gloo16, made by
// scripts/fr-fixtures/gloo_megatron_job.py; its README says what each folder shows and where Gloo's
// dumps differ from NCCL's). What the dumps can show, hangdoctor names; what Gloo does not record
// (send/recv, split sizes) is said, not guessed.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "fr_hangdoctor_run.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;
using testing::hangdoctor_json;

fs::path gloo16(const std::string& folder) {
  return fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr/gloo16" / folder;
}

std::set<int> faulted_ranks(const std::string& folder) {
  std::ifstream in(gloo16(folder) / "faulted_ranks.txt");
  std::set<int> out;
  for (int r; in >> r;) out.insert(r);
  return out;
}

std::set<int> culprits_of(const nlohmann::json& j) {
  std::set<int> out;
  for (const auto& x : j["culprit_ranks"]) out.insert(x.get<int>());
  return out;
}

class GlooMegatron : public ::testing::TestWithParam<std::string> {};

// Healthy on-demand dumps read healthy; a lagging rank, ranks holding the GIL (no dump: their
// watcher thread cannot run; or the C++ handler's JSON, which needs no GIL) and a SIGKILLed rank
// (Gloo raised on its peers, whose failed collectives are retired like finished ones) are named.
TEST_P(GlooMegatron, NamesTheFaultedRanks) {
  const std::string folder = GetParam();
  const auto r = hangdoctor_json(gloo16(folder).string());
  const auto& j = r.report;
  ASSERT_TRUE(j.is_object()) << r.err;
  const std::set<int> faulted = folder.find("cpp_json") != std::string::npos
                                    ? faulted_ranks(folder.substr(0, folder.size() - 9))
                                    : faulted_ranks(folder);
  EXPECT_EQ(culprits_of(j), faulted) << j["headline"];
  EXPECT_EQ(r.code, faulted.empty() ? 0 : 1) << j["headline"];
  EXPECT_EQ(j["headline"].get<std::string>().find("DESYNC"), std::string::npos) << j["headline"];
}

INSTANTIATE_TEST_SUITE_P(Folders, GlooMegatron,
                         ::testing::Values("tp4pp2_healthy", "tp2pp4_healthy", "tp4pp2_lagging_rank",
                                           "tp2pp4_lagging_rank", "tp4pp2_gil_held", "tp2pp4_gil_held",
                                           "tp4pp2_gil_held_cpp_json", "tp2pp4_gil_held_cpp_json",
                                           "tp4pp2_rank_killed", "tp2pp4_rank_killed"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Gloo records no send/recv: a stage stalled while its neighbours wait in the pipeline's send/recv
// leaves nothing open in any dump. The summary says so rather than letting "healthy" stand alone.
TEST(GlooMegatron, AStallBehindSendRecvIsSaidToBeInvisible) {
  const auto r = hangdoctor_json(gloo16("tp4pp2_stage_stall").string());
  EXPECT_NE(r.err.find("send/recv are not recorded"), std::string::npos) << r.err;
}

// Gloo records tensor sizes, not split sizes, and the receiver of the bad count aborts
// (gloo::EnforceNotMet) while its peers' collectives fail and are retired like finished ones: the
// dumps cannot show the sender (rank 14), only that rank 8 is gone. It is named, and uneven sizes
// are never called a desync.
TEST(GlooMegatron, ACountMismatchShowsTheRankThatAborted) {
  const auto r = hangdoctor_json(gloo16("tp4pp2_a2a_count_mismatch").string());
  const auto& j = r.report;
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(culprits_of(j).count(8)) << j["headline"];
  EXPECT_EQ(j["headline"].get<std::string>().find("DESYNC"), std::string::npos) << j["headline"];
}

}  // namespace
}  // namespace rankscope::torch_fr
