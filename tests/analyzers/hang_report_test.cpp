// hang_report_test.cpp — the human and JSON outputs: rank lists, grouping, the issue's sentence,
// every JSON field the issue lists.
#include <limits>

#include <gtest/gtest.h>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/rank_list.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::hang::report_tests {
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

// Every object's keys in sorted order, at any depth: the order the report had when it was a
// sorted DOM, so files diff cleanly across versions.
void expect_sorted_keys(const nlohmann::ordered_json& j, const std::string& where) {
  if (j.is_object()) {
    std::string previous;
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      EXPECT_TRUE(first || previous < k) << where << ": '" << k << "' after '" << previous << "'";
      previous = k;
      first = false;
      expect_sorted_keys(v, where + "." + k);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) expect_sorted_keys(j[i], where + "[" + std::to_string(i) + "]");
  }
}

// A diagnosis with every optional part present, as no single run produces it.
Diagnosis everything_set() {
  Diagnosis d;
  d.verdict = Verdict::kDesync;
  d.kind = Kind::kA2aCountMismatch;
  d.culprit_ranks = {10, 2};
  d.collective = CollectiveRef{"ep0", 41, format::CollectiveOp::kAllToAllV, format::DataType::kBFloat16, 96, 192, "moe/dispatch"};
  for (int r : {0, 2, 10}) {
    RankReport x;
    x.rank = r;
    x.host = r == 10 ? "n2" : "n1";
    x.pid = 4000 + r;
    x.alive = r == 2 ? Liveness::kGone : Liveness::kAlive;
    x.os_state = r == 10 ? OsRunState::kStopped : OsRunState::kUnknown;
    x.wchan = r == 10 ? "do_signal_stop" : "";
    x.state = r == 0 ? RankState::kWaiting : RankState::kFrozen;
    x.step = 7;
    x.range = "moe/dispatch";
    x.range_stack = {"step", "moe/dispatch"};
    if (r == 0) x.waiting = d.collective;
    x.waited_s = 12.5;
    x.idle_s = 12.5;
    x.range_s = r == 10 ? 3.25 : 0;
    x.last_completed_seq = r == 0 ? std::optional<uint64_t>(40) : std::nullopt;
    x.note = r == 2 ? "killed by SIGKILL" : "";
    x.stacks_file = r == 10 ? "evidence/stacks.rank10.txt" : "";
    d.ranks.push_back(x);
  }
  d.missing_gradients = {{2, "wte.weight", 0}};
  d.mismatch = Mismatch{"count", {{2, "96"}, {10, "80"}, {0, "96"}}};
  CountMismatch m;
  m.comm = "ep0";
  m.seq = 41;
  m.sender = 10;
  m.receiver = 2;
  m.sent = 80;
  m.expected = 96;
  m.difference = -16;
  m.row_elements = 16;
  m.evidence = "exact";
  d.count_mismatch = m;
  d.headline = "DESYNC: ...";
  d.explanation = "why";
  d.problems = {"rank 3: no flight recorder"};
  d.run_dir = "/runs/x";
  d.world_size = 11;
  d.reference_ns = 1'700'000'000'000'000'000;
  d.stuck_for_s = 12.5;
  d.time_basis = "the newest dump";
  d.recompute = "every block";
  d.detection = Detection{"learned_bound", 0, "all_to_all_v #41 on ep0", 12.5, 3.0, 0.2, 40, "longest 0.2 s x15"};
  d.hosts = 2;
  NodeFinding n;
  n.host = "n2";
  n.ranks = {10};
  n.host_ranks = {8, 9, 10};
  n.state = RankState::kDead;
  n.alive = Liveness::kGone;
  n.os_state = OsRunState::kStopped;
  n.cause = "stopped";
  d.nodes = {n};
  return d;
}

TEST(HangReport, JsonKeysAreSortedInEveryObjectWithEveryOptionalPartPresent) {
  ReportExtras extras;
  extras.wait = WaitSummary{2.0, 9, true, 4.5};
  extras.gather = GatherSummary{4, 3, 1.25, 123456, {"gathered: 3 of 4 nodes", "n4 did not answer"}};
  const std::string text = render_json_text(everything_set(), extras);
  const auto j = nlohmann::ordered_json::parse(text);
  expect_sorted_keys(j, "report");
  // Spot checks of what only this diagnosis carries.
  EXPECT_EQ(j.at("wait").at("hang_to_verdict_s"), 4.5);
  EXPECT_EQ(j.at("gather").at("nodes_answered"), 3);
  EXPECT_EQ(j.at("gather").at("findings").size(), 2u);
  EXPECT_EQ(j.at("count_mismatch").at("sent_rows"), 5);
  EXPECT_EQ(j.at("count_mismatch").at("expected_rows"), 6);
  EXPECT_EQ(j.at("detection").at("samples"), 40);
  EXPECT_EQ(j.at("mismatch").at("values_by_rank").at("10"), "80");
  EXPECT_EQ(j.at("node_findings")[0].at("liveness"), "gone");
  EXPECT_EQ(j.at("ranks")[0].at("comm"), "ep0");
  EXPECT_EQ(j.at("ranks")[0].at("seq"), 41);
  EXPECT_EQ(j.at("ranks")[0].at("op"), "alltoallv");
  EXPECT_TRUE(j.at("ranks")[1].at("comm").is_null());
  EXPECT_TRUE(j.at("ranks")[1].at("waited_s").is_null());
  EXPECT_EQ(j.at("ranks")[2].at("wchan"), "do_signal_stop");
  EXPECT_EQ(j.at("ranks")[2].at("range_s"), 3.25);
  EXPECT_EQ(j.at("culprits")[0], (nlohmann::ordered_json{{"host", "n2"}, {"rank", 10}}));
  // Without extras, neither key.
  const auto plain = nlohmann::json::parse(render_json_text(everything_set()));
  EXPECT_FALSE(plain.contains("wait"));
  EXPECT_FALSE(plain.contains("gather"));
  EXPECT_EQ(plain, render_json(everything_set()));
}

TEST(HangReport, JsonStaysValidOnBrokenUtf8AndNonFiniteNumbers) {
  Diagnosis d = everything_set();
  d.ranks[0].note = std::string("bad \xff byte, cut \xe2\x82 sequence, overlong \xc0\xaf, fine \xe2\x82\xac");
  d.ranks[0].range_stack.push_back(std::string("\xed\xa0\x80"));  // a UTF-16 surrogate: not UTF-8
  d.ranks[0].idle_s = std::numeric_limits<double>::quiet_NaN();
  d.stuck_for_s = std::numeric_limits<double>::infinity();
  const auto j = nlohmann::json::parse(render_json_text(d));  // throws on invalid UTF-8
  EXPECT_EQ(j.at("ranks")[0].at("note"),
            "bad \xef\xbf\xbd byte, cut \xef\xbf\xbd\xef\xbf\xbd sequence, overlong \xef\xbf\xbd\xef\xbf\xbd, fine \xe2\x82\xac");
  EXPECT_EQ(j.at("ranks")[0].at("range_stack").back(), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_TRUE(j.at("ranks")[0].at("idle_s").is_null());
  EXPECT_TRUE(j.at("stuck_for_s").is_null());
}

}  // namespace
}  // namespace rankscope::analyzers::hang::report_tests
