// hang_torch_jobs_test.cpp — hangdoctor on real PyTorch jobs (tests/fixtures/torch-jobs, made on the
// CPU with Gloo by scripts/torch-jobs; each run's README-named truth.json says healthy or who the
// culprit is). Every run's dumps and its log are analysed in-process; a table of what each said is
// printed, and each verdict is checked against the truth: a healthy run raises no alarm, a culprit is
// named (alone, or within an honest "one of ranks ..."), and nothing aborts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "../importers/fr_hangdoctor_run.h"

namespace rankscope::hang {
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

TEST(HangTorchJobs, EveryRealJobsDumpsAndLogAgreeWithItsTruth) {
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(corpus()))
    if (fs::exists(e.path() / "truth.json")) runs.push_back(e.path());
  std::sort(runs.begin(), runs.end());
  ASSERT_GE(runs.size(), 4u);
  std::printf("%-20s %-8s %-12s %s\n", "run", "artifact", "grade", "headline");
  for (const auto& run : runs) {
    const Truth t = read_truth(run);
    const std::string name = run.filename().string();
    for (const char* artifact : {"dumps", "job.log"}) {
      const fs::path p = run / artifact;
      if (!fs::exists(p)) continue;
      const HangdoctorRun r = hangdoctor_json(p.string());
      const std::string g = grade(r, t);
      const std::string headline = r.report.is_object() ? r.report["headline"].get<std::string>() : r.err;
      std::printf("%-20s %-8s %-12s %.150s\n", name.c_str(), artifact, g.c_str(), headline.c_str());
      EXPECT_NE(g, "abort") << name << " " << artifact;
      EXPECT_NE(g, "false alarm") << name << " " << artifact << ": " << headline;
      // The dumps of every run are right; a log may say less (a healthy run's log holds nothing to
      // judge, exit 2), never something wrong.
      if (std::string(artifact) == "dumps") EXPECT_EQ(g, "right") << name << ": " << headline;
      else EXPECT_NE(g, "wrong") << name << " log: " << headline;
    }
  }
}

}  // namespace
}  // namespace rankscope::hang
