// hang_torch_jobs_test.cpp — hangdoctor on real PyTorch jobs (tests/fixtures/torch-jobs, made on the
// CPU with Gloo by scripts/torch-jobs; each run's truth.json says healthy or who the culprit is).
// Every run's artifacts (dumps, log, stacks, the debug server's dump_dir) are analysed in-process
// alone, then the run's folder (all of them joined per rank); the accuracy table per artifact is
// printed. Nothing aborts, no healthy run raises an alarm, and joined every run is right or an
// honest "one of ranks ...".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include <set>

#include "../importers/fr_hangdoctor_run.h"

namespace rankscope::analyzers::hang {
namespace {

namespace fs = std::filesystem;
using torch_fr::testing::hangdoctor_json;
using torch_fr::testing::HangdoctorRun;

fs::path corpus() { return fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch-jobs"; }

struct Truth {
  bool healthy = false;
  std::set<int> culprits;
};

Truth read_truth(const fs::path& dir) {
  std::ifstream in(dir / "truth.json");
  const auto j = nlohmann::json::parse(in);
  Truth t;
  t.healthy = j["verdict"] == "healthy";
  for (const auto& r : j["culprits"]) t.culprits.insert(r.get<int>());
  return t;
}

// right / honestly ambiguous / wrong / false alarm / abort, as the corpus table counts them.
std::string grade(const HangdoctorRun& r, const Truth& t) {
  if (r.code != 0 && r.code != 1 && r.code != 2) return "abort";
  if (t.healthy) return r.code == 1 ? "false alarm" : "right";
  if (r.code != 1 || !r.report.is_object()) return "wrong";
  std::set<int> named;
  for (const auto& c : r.report["culprit_ranks"]) named.insert(c.get<int>());
  if (named == t.culprits) return "right";
  const bool covers = std::includes(named.begin(), named.end(), t.culprits.begin(), t.culprits.end());
  const std::string headline = r.report["headline"].get<std::string>();
  if (covers && headline.find("one of ranks") != std::string::npos) return "ambiguous";
  // Naming no global rank, and saying why (a group rank whose group's members the artifact lacks).
  if (named.empty() && headline.find("cannot be told") != std::string::npos) return "ambiguous";
  return "wrong";
}

// Each artifact alone, then the run's folder (every artifact joined per rank).
constexpr const char* kArtifacts[] = {"dumps", "job.log", "stacks", "debug_dump", "joined"};

TEST(HangTorchJobs, EveryRealJobsArtifactsAloneAndJoinedAgreeWithItsTruth) {
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(corpus()))
    if (fs::exists(e.path() / "truth.json")) runs.push_back(e.path());
  std::sort(runs.begin(), runs.end());
  ASSERT_GE(runs.size(), 10u);
  std::map<std::string, std::map<std::string, int>> table;  // artifact -> grade -> runs
  std::printf("%-20s %-10s %-12s %s\n", "run", "artifact", "grade", "headline");
  for (const auto& run : runs) {
    const Truth t = read_truth(run);
    const std::string name = run.filename().string();
    for (const std::string artifact : kArtifacts) {
      const fs::path p = artifact == "joined" ? run : run / artifact;
      if (!fs::exists(p)) continue;
      const HangdoctorRun r = hangdoctor_json(p.string());
      const std::string g = grade(r, t);
      ++table[artifact][g];
      // Without a report, the last line hangdoctor printed (why it stopped).
      std::string last = r.err;
      while (!last.empty() && last.back() == '\n') last.pop_back();
      last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
      const std::string headline = r.report.is_object() ? r.report["headline"].get<std::string>() : last;
      std::printf("%-20s %-10s %-12s %.300s\n", name.c_str(), artifact.c_str(), g.c_str(), headline.c_str());
      EXPECT_NE(g, "abort") << name << " " << artifact;
      EXPECT_NE(g, "false alarm") << name << " " << artifact << ": " << headline;
      if (artifact == "joined") {
        EXPECT_TRUE(g == "right" || g == "ambiguous") << name << " joined: " << headline;
        // Two kinds of artifact or more: the JSON says what each said.
        EXPECT_TRUE(r.report.contains("joined")) << name;
      }
    }
  }
  std::printf("\n%-10s %6s %10s %6s %12s %6s\n", "artifact", "right", "ambiguous", "wrong", "false alarm", "abort");
  for (const std::string artifact : kArtifacts) {
    auto& row = table[artifact];
    std::printf("%-10s %6d %10d %6d %12d %6d\n", artifact.c_str(), row["right"], row["ambiguous"], row["wrong"],
                row["false alarm"], row["abort"]);
  }
}

// The runs made before stacks were kept: each artifact alone stays as right as it was.
TEST(HangTorchJobs, FirstRunsDumpsStayRight) {
  for (const char* name : {"dtensor_scatter", "fsdp2_tp_healthy", "raise_no_dump", "subgroup_hang"}) {
    const fs::path run = corpus() / name;
    const HangdoctorRun r = hangdoctor_json((run / "dumps").string());
    EXPECT_EQ(grade(r, read_truth(run)), "right") << name;
    const HangdoctorRun l = hangdoctor_json((run / "job.log").string());
    EXPECT_NE(grade(l, read_truth(run)), "wrong") << name;
  }
}

// Rank 4 makes one all_reduce more on its subgroup {0,2,4,6}: it waits there while every other rank
// waits for it on the world group. Each side is "missing" from the other's collective, but only
// rank 4 is out of step with the majority of both groups: it is the culprit, and the sentence says
// where it is ahead.
TEST(HangTorchJobs, OneRankOutOfStepOnTwoGroupsIsTheCulprit) {
  const fs::path run = corpus() / "subgroup_extra";
  const HangdoctorRun r = hangdoctor_json((run / "dumps").string());
  EXPECT_EQ(grade(r, read_truth(run)), "right");
  const std::string headline = r.report["headline"].get<std::string>();
  EXPECT_NE(headline.find("which none of ranks 0,2,6 called"), std::string::npos) << headline;
  EXPECT_NE(headline.find("one call more on that group"), std::string::npos) << headline;
}

}  // namespace
}  // namespace rankscope::analyzers::hang
