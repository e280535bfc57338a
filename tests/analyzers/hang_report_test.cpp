// hang_report_test.cpp — the human and JSON outputs: rank lists, grouping, the issue's sentence,
// every JSON field the issue lists.
#include <gtest/gtest.h>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/rank_list.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::hang::report_tests {
namespace {

using testing::FakeProcessTable;
using testing::make_run;
using testing::scratch;

Diagnosis diagnose_dir(const std::filesystem::path& dir) {
  auto run = format::open_run_directory(dir);
  EXPECT_TRUE(run.ok());
  FakeProcessTable procs;
  return diagnose(*run, procs);
}

TEST(HangReport, CompressedRankLists) {
  EXPECT_EQ(compress_ranks({}), "");
  EXPECT_EQ(compress_ranks({3}), "3");
  EXPECT_EQ(compress_ranks({0, 2, 3, 4, 5, 6, 7}), "0,2-7");
  EXPECT_EQ(compress_ranks({7, 6, 5, 4, 3, 2, 0}), "0,2-7");
  EXPECT_EQ(compress_ranks({0, 1}), "0,1");
  EXPECT_EQ(compress_ranks({0, 1, 2}), "0-2");
  EXPECT_EQ(compress_ranks({5, 1, 3, 3}), "1,3,5");
  EXPECT_EQ(compress_ranks({1, 3, 5, 7, 9}), "1,3,...,9");
  EXPECT_EQ(compress_ranks({0, 2, 6, 8, 10, 12}), "0,2,6,8,...,12");
}

TEST(HangReport, TextGroupsRanksByIdenticalState) {
  auto run = make_run(scratch("hr"), 8, 4, 8, "stall:rank=1,range=forward/embed,step=2");
  const Diagnosis d = diagnose_dir(run.dir);
  const std::string text = render_text(d);
  // First line: the verdict; then ranks grouped, culprit first; then evidence.
  EXPECT_EQ(text.substr(0, text.find('\n')), d.headline);
  EXPECT_NE(d.headline.find("Ranks 0,2-7 wait in that allreduce since 60 s."), std::string::npos) << d.headline;
  const auto ranks_at = text.find("\nranks:\n");
  const auto evidence_at = text.find("\nevidence:\n");
  ASSERT_NE(ranks_at, std::string::npos);
  ASSERT_NE(evidence_at, std::string::npos);
  const std::string ranks = text.substr(ranks_at, evidence_at - ranks_at);
  EXPECT_NE(ranks.find("rank 1:"), std::string::npos) << ranks;
  EXPECT_NE(ranks.find("in forward/embed at step 2, idle 60 s   <- culprit"), std::string::npos) << ranks;
  EXPECT_NE(ranks.find("ranks 0,2-7:"), std::string::npos) << ranks;
  EXPECT_NE(ranks.find("waiting in allreduce #"), std::string::npos) << ranks;
  const std::string evidence = text.substr(evidence_at);
  EXPECT_NE(evidence.find("open ranges: step > forward/embed"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("last completed: world #0 barrier"), std::string::npos) << evidence;
}

TEST(HangReport, JsonHasTheSchemaAndEveryListedField) {
  auto run = make_run(scratch("hr"), 4, 6, 2, "drop-grad:rank=2,param=wpe.weight,step=3");
  const Diagnosis d = diagnose_dir(run.dir);
  const nlohmann::json j = render_json(d);
  EXPECT_EQ(j.at("schema_version"), kHangReportSchemaVersion);
  EXPECT_EQ(j.at("verdict"), "hang");
  EXPECT_EQ(j.at("kind"), "missing_gradient");
  EXPECT_EQ(j.at("culprit_ranks"), nlohmann::json::array({2}));
  for (const char* k : {"comm", "seq", "op", "dtype", "count", "bytes"}) EXPECT_TRUE(j.at("collective").contains(k)) << k;
  EXPECT_EQ(j.at("collective").at("comm"), "dp0");
  EXPECT_EQ(j.at("collective").at("op"), "allreduce_sum");
  EXPECT_EQ(j.at("collective").at("dtype"), "fp32");
  ASSERT_EQ(j.at("ranks").size(), 4u);
  for (const auto& r : j.at("ranks"))
    for (const char* k : {"rank", "host", "pid", "alive", "state", "step", "range", "range_stack", "comm", "seq",
                          "waited_s", "last_completed_seq"})
      EXPECT_TRUE(r.contains(k)) << k;
  EXPECT_EQ(j.at("ranks")[2].at("range"), "grad_sync");
  EXPECT_EQ(j.at("ranks")[2].at("range_stack"), nlohmann::json::array({"step", "grad_sync"}));
  EXPECT_EQ(j.at("ranks")[0].at("state"), "waiting");
  EXPECT_TRUE(j.at("ranks")[0].at("alive").is_null());  // synth-node0 is not this host
  EXPECT_EQ(j.at("ranks")[0].at("liveness"), "unknown");
  EXPECT_TRUE(j.at("ranks")[0].at("waited_s").is_number());
  ASSERT_EQ(j.at("missing_gradients").size(), 1u);
  EXPECT_EQ(j.at("missing_gradients")[0], (nlohmann::json{{"rank", 2}, {"param", "wpe.weight"}, {"bucket", 1}}));
  EXPECT_TRUE(j.at("mismatch").is_null());
  EXPECT_FALSE(j.at("explanation").get<std::string>().empty());
}

TEST(HangReport, JsonMismatchCarriesValuesByRank) {
  auto run = make_run(scratch("hr"), 4, 6, 1, "resize:rank=3,comm=dp0,seq=4,factor=4");
  const nlohmann::json j = render_json(diagnose_dir(run.dir));
  EXPECT_EQ(j.at("verdict"), "desync");
  EXPECT_EQ(j.at("kind"), "collective_mismatch");
  EXPECT_EQ(j.at("mismatch").at("field"), "count");
  const auto& v = j.at("mismatch").at("values_by_rank");
  EXPECT_EQ(v.size(), 4u);
  EXPECT_EQ(std::stoull(v.at("3").get<std::string>()), 4 * std::stoull(v.at("0").get<std::string>()));
}

}  // namespace
}  // namespace rankscope::hang::report_tests
