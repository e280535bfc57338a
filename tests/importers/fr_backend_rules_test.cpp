// fr_backend_rules_test.cpp — Flight Recorder dumps read by the rules PyTorch writes them
// with, on checked-in fixtures shaped like the H100 dumps (one GPU, 8 s timeout) and the two-rank
// Gloo job: an on-demand dump of a healthy job is healthy (exit 0); a timeout dump with timing on
// is the GPU behind its host, with timing off a collective that never completed (started or not
// cannot be told); Gloo completes by `retired` and names its group '' in pg_config; every duration
// is a lower bound, at least the watchdog's timeout where it wrote the dump, never epoch-sized.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "fr_fixture_set.h"
#include "fr_hangdoctor_run.h"
#include "rankscope/torch_fr/fr_dump.h"
#include "rankscope/torch_fr/fr_import.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;
using testing::hangdoctor_json;

fs::path fr_fixtures() { return fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr"; }

std::string where(const testing::HangdoctorRun& r) { return r.err + "\n" + r.report.dump(2); }

// Seconds from the oldest timestamp in the dumps under `dir` to now: no duration may reach it.
double age_of_dumps_s(const fs::path& dir) {
  int64_t oldest = INT64_MAX;
  for (const auto& f : fs::directory_iterator(dir)) {
    std::ifstream in(f.path(), std::ios::binary);
    std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto d = parse_fr_dump(bytes, f.path().filename().string());
    if (!d.ok()) continue;
    for (const auto& e : d->entries) oldest = std::min(oldest, e.time_created_ns);
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  return double(now - oldest) / 1e9;
}

// hangdoctor's exit status, and the JSON report's kind and culprit_ranks.
void expect_verdict(const testing::HangdoctorRun& r, int code, const char* kind, const nlohmann::json& culprits) {
  EXPECT_EQ(r.code, code) << where(r);
  EXPECT_EQ(r.report["kind"], kind) << where(r);
  EXPECT_EQ(r.report["culprit_ranks"], culprits) << where(r);
}

// stuck_for_s, waited_s and idle_s: lower bounds, below the dumps' age (an epoch read as a
// duration is ~1.7e9 s, far above).
void expect_durations_bounded(const nlohmann::json& j, double age_s) {
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["times_are_lower_bounds"].get<bool>());
  const double stuck = j["stuck_for_s"].get<double>();
  EXPECT_GE(stuck, 0.0);
  EXPECT_LT(stuck, age_s);
  for (const auto& r : j["ranks"]) {
    for (const char* k : {"idle_s", "waited_s"}) {
      if (!r.contains(k) || r[k].is_null()) continue;
      EXPECT_GE(r[k].get<double>(), 0.0) << k;
      EXPECT_LT(r[k].get<double>(), age_s) << k << " of rank " << r["rank"];
    }
  }
}

TEST(FrBackendRules, OnDemandDumpOfAHealthyNcclJobIsHealthy) {
  for (const char* scenario : {"nccl_healthy_timing", "nccl_healthy_no_timing"}) {
    const auto r = hangdoctor_json((fr_fixtures() / scenario).string());
    EXPECT_EQ(r.code, 0) << scenario << where(r);
    EXPECT_EQ(r.report["verdict"], "healthy") << scenario << where(r);
    EXPECT_TRUE(r.report["kind"].is_null());
    EXPECT_EQ(r.report["culprit_ranks"], nlohmann::json::array());
    EXPECT_EQ(r.report["headline"], "HEALTHY: 1 rank running; no collective is pending.") << where(r);
    EXPECT_NE(r.err.find(", 1 rank (0), missing none"), std::string::npos) << r.err;
    expect_durations_bounded(r.report, age_of_dumps_s(fr_fixtures() / scenario));
  }
}

TEST(FrBackendRules, TimeoutDumpWithTimingIsTheGpuBehindItsHostForAtLeastTheTimeout) {
  for (const char* scenario : {"nccl_timeout_timing", "nccl_timeout_timing_json"}) {
    const auto r = hangdoctor_json((fr_fixtures() / scenario).string());
    const auto& j = r.report;
    expect_verdict(r, 1, "gpu_behind_host", nlohmann::json::array({0}));
    EXPECT_EQ(j["verdict"], "hang") << scenario;
    EXPECT_EQ(j["collective"]["comm"], "default_pg");
    EXPECT_EQ(j["collective"]["seq"], 21);
    EXPECT_EQ(j["collective"]["op"], "allreduce_sum");
    // The watchdog wrote it once #21 had been open for the group's 8 s timeout: at least that.
    EXPECT_GE(j["stuck_for_s"].get<double>(), 8.0) << where(r);
    EXPECT_LT(j["stuck_for_s"].get<double>(), 8.1) << where(r);
    EXPECT_EQ(j["detection"]["by"], "dump");
    const std::string headline = j["headline"];
    EXPECT_NE(headline.find("rank 0 enqueued allreduce #21 on default_pg (4.0 MiB fp32) on the GPU and its GPU never "
                            "started it, for at least 8.0 s"),
              std::string::npos) << headline;
    EXPECT_EQ(headline.find("interconnect"), std::string::npos) << headline;
    EXPECT_NE(j["explanation"].get<std::string>().find("timeout of 8.0 s"), std::string::npos) << where(r);
    EXPECT_NE(r.err.find("timing on"), std::string::npos) << r.err;
    expect_durations_bounded(j, age_of_dumps_s(fr_fixtures() / scenario));
  }
}

TEST(FrBackendRules, TimeoutDumpWithoutTimingNeverCompletedAndCannotTellStarted) {
  const auto r = hangdoctor_json((fr_fixtures() / "nccl_timeout_no_timing").string());
  const auto& j = r.report;
  expect_verdict(r, 1, "stuck_in_collective", nlohmann::json::array());
  EXPECT_EQ(j["collective"]["seq"], 21);
  EXPECT_GE(j["stuck_for_s"].get<double>(), 8.0) << where(r);
  const std::string headline = j["headline"];
  EXPECT_NE(headline.find("rank 0, the only member of default_pg, enqueued allreduce #21"), std::string::npos) << headline;
  EXPECT_NE(headline.find("never completed, for at least 8.0 s; whether it started cannot be told"), std::string::npos)
      << headline;
  EXPECT_NE(r.err.find("timing off"), std::string::npos) << r.err;
  expect_durations_bounded(j, age_of_dumps_s(fr_fixtures() / "nccl_timeout_no_timing"));
}

TEST(FrBackendRules, TimingOnTwoGpusTheOneThatNeverStartedIsBehindItsHost) {
  const auto r = hangdoctor_json((fr_fixtures() / "nccl_two_gpus_one_behind").string());
  expect_verdict(r, 1, "gpu_behind_host", nlohmann::json::array({1}));
  EXPECT_EQ(r.report["collective"]["seq"], 3);
  EXPECT_NE(r.report["headline"].get<std::string>().find("Rank 0 waits in that allreduce for at least 600 s."),
            std::string::npos) << where(r);
}

TEST(FrBackendRules, TimingOnEveryGpuStartedNoneFinishedIsStuckInTheCollective) {
  const auto r = hangdoctor_json((fr_fixtures() / "nccl_two_gpus_both_started").string());
  expect_verdict(r, 1, "stuck_in_collective", nlohmann::json::array());
  EXPECT_NE(r.report["explanation"].get<std::string>().find("suspect the interconnect"), std::string::npos) << where(r);
}

TEST(FrBackendRules, GlooRankThatNeverCalledTheCollectiveIsTheLaggingRank) {
  const auto r = hangdoctor_json((fr_fixtures() / "gloo_lagging").string());
  const auto& j = r.report;
  expect_verdict(r, 1, "lagging_rank", nlohmann::json::array({1}));
  EXPECT_EQ(j["collective"]["comm"], "default_pg") << where(r);
  EXPECT_EQ(j["collective"]["seq"], 6);
  EXPECT_EQ(j["ranks"][0]["state"], "waiting");
  EXPECT_EQ(j["ranks"][1]["last_completed_seq"], 5);
  const std::string headline = j["headline"];
  EXPECT_EQ(headline.rfind("HANG: rank 1 never entered allreduce #6 on default_pg (4.0 KiB fp32)", 0), 0u) << headline;
  // Gloo dumps are taken on demand: nothing says how long rank 0 has waited.
  EXPECT_NE(headline.find("Rank 0 waits in that allreduce for an unknown time."), std::string::npos) << headline;
  EXPECT_NE(r.err.find("backend gloo, 2 ranks (0-1)"), std::string::npos) << r.err;
  expect_durations_bounded(j, age_of_dumps_s(fr_fixtures() / "gloo_lagging"));
}

TEST(FrBackendRules, GlooOpRetiredByItsTimeoutWhileAPeerNeverCalledItIsStillOpen) {
  const auto r = hangdoctor_json((fr_fixtures() / "gloo_timed_out").string());
  expect_verdict(r, 1, "lagging_rank", nlohmann::json::array({1}));
  EXPECT_EQ(r.report["collective"]["seq"], 6);
  EXPECT_EQ(r.report["ranks"][0]["state"], "waiting");
}

TEST(FrBackendRules, DumpsWithoutEntriesAreNotJudged) {
  const fs::path dir = fs::temp_directory_path() / ("rs_fr_no_entries_" + std::to_string(::getpid()));
  testing::RankSpec s;
  s.groups.push_back({"0", "default_pg", {0}, 0});
  testing::write_file(dir / "comm_lib_trace_rank_0", testing::write_pickle(s));
  const auto r = hangdoctor_json(dir.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("no collective entries"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(FrBackendRules, GlooUnnamedPgConfigGivesTheEntriesGroupItsMembers) {
  auto imp = import_fr_dumps(fr_fixtures() / "gloo_lagging");
  ASSERT_TRUE(imp.ok()) << imp.status().to_string();
  ASSERT_TRUE(imp->run.metadata.has_value());
  ASSERT_EQ(imp->run.metadata->groups.size(), 1u);
  EXPECT_EQ(imp->run.metadata->groups[0].name, "default_pg");
  EXPECT_EQ(imp->run.metadata->groups[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_FALSE(imp->event_backend);
  EXPECT_TRUE(imp->pending);
}

// The state rules one entry at a time (fr_entry_state.h).
FrDump parse_spec(const testing::RankSpec& spec) {
  auto d = parse_fr_dump(testing::write_pickle(spec), "spec");
  EXPECT_TRUE(d.ok()) << d.status().to_string();
  return d.ok() ? *d : FrDump{};
}

testing::RankSpec one_entry(const std::string& backend, const std::string& state, int retired) {
  testing::RankSpec s;
  s.backend = backend;
  s.groups.push_back({"0", "default_pg", {0, 1}, 0});
  s.entries.push_back({"0", 1, "all_reduce", {16}, "Float", state, "step", retired});
  return s;
}

TEST(FrEntryState, NcclRetiredButNotCompletedTimedOut) {
  const FrDump d = parse_spec(one_entry("nccl", "scheduled", 1));
  ASSERT_EQ(d.entries.size(), 1u);
  EXPECT_FALSE(d.entries[0].completed);
  EXPECT_TRUE(d.entries[0].aborted);
  EXPECT_EQ(d.entries[0].signal, CompletionSignal::kState);
}

TEST(FrEntryState, NcclCompletedWithoutRetiredIsCompleted) {
  const FrDump d = parse_spec(one_entry("nccl", "completed", 0));
  EXPECT_TRUE(d.entries[0].completed);
  EXPECT_FALSE(d.entries[0].aborted);
}

TEST(FrEntryState, GlooRetiredIsCompletedThoughScheduled) {
  const FrDump d = parse_spec(one_entry("gloo", "scheduled", 1));
  EXPECT_TRUE(d.entries[0].completed);
  EXPECT_EQ(d.entries[0].signal, CompletionSignal::kRetired);
  EXPECT_FALSE(parse_spec(one_entry("gloo", "scheduled", 0)).entries[0].completed);
  EXPECT_FALSE(d.timing);
}

TEST(FrEntryState, UnknownBackendFollowsWhatItsEntriesDo) {
  // Never leaves "scheduled": no events, retired is completion.
  EXPECT_TRUE(parse_spec(one_entry("c10d", "scheduled", 1)).entries[0].completed);
  // Some entry completed by state: events exist, so retired-but-scheduled is not completion.
  auto s = one_entry("c10d", "completed", 1);
  s.entries.push_back({"0", 2, "all_reduce", {16}, "Float", "scheduled", "step", 1});
  const FrDump d = parse_spec(s);
  EXPECT_TRUE(d.entries[0].completed);
  EXPECT_FALSE(d.entries[1].completed);
  EXPECT_TRUE(d.entries[1].aborted);
}

TEST(FrEntryState, TimingIsSeenFromStartsAndDurations) {
  auto s = one_entry("nccl", "completed", 1);
  EXPECT_FALSE(parse_spec(s).timing);
  s.timing = true;
  const FrDump d = parse_spec(s);
  EXPECT_TRUE(d.timing);
  EXPECT_TRUE(d.entries[0].started);
}

}  // namespace
}  // namespace rankscope::torch_fr
