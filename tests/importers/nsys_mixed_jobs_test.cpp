// nsys_mixed_jobs_test.cpp — the nsys import: exports of two different jobs
// (another world size; the same shape recorded hours apart) are refused, naming the files and what
// differs, unless allow_mixed; the rule is the Kineto import's (import_job.h check_one_job). Exports
// written by the simulated-job fixture writer (nsys_fixture.h).
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "nsys_fixture.h"
#include "rankscope/nsys/nsys_import.h"

namespace rankscope::nsys {
namespace nsys_mixed_jobs_test {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("rs-nsys-mixed-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

testing::FixtureSpec job(int world, const std::string& prefix) {
  testing::FixtureSpec spec;
  spec.world = world;
  spec.steps = 3;
  spec.identity = testing::Identity::kRankMark;  // rankscope:rank=R/W: the world size is recorded
  spec.script = testing::standard_script(1, true, nullptr, nullptr, nullptr, false);
  spec.adversarial = false;
  spec.file_name = [prefix](int rank) { return prefix + "_" + std::to_string(rank) + ".sqlite"; };
  return spec;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(NsysMixedJobs, ExportsOfTwoWorldSizesAreRefusedUnlessAllowed) {
  const fs::path dir = scratch("world");
  const auto a = testing::write_nsys_fixture(dir / "a", job(2, "two"));
  const auto b = testing::write_nsys_fixture(dir / "b", job(4, "four"));
  auto refused = import_nsys({a[0], b[1]}, dir / "run");
  ASSERT_FALSE(refused.ok()) << "two jobs imported as one";
  const std::string text = refused.status().user_text();
  EXPECT_TRUE(has(text, "two_0.sqlite")) << text;
  EXPECT_TRUE(has(text, "four_1.sqlite")) << text;
  EXPECT_TRUE(has(text, "world size 2 vs 4")) << text;
  EXPECT_TRUE(has(text, "--allow-mixed")) << text;

  ImportOptions options;
  options.allow_mixed = true;
  auto allowed = import_nsys({a[0], b[1]}, dir / "run", options);
  ASSERT_TRUE(allowed.ok()) << allowed.status().to_string();
  bool said = false;
  for (const auto& w : allowed->warnings) said = said || has(w, "different jobs imported as one");
  EXPECT_TRUE(said);
  // One job's exports pass.
  auto one = import_nsys(a, dir / "run_one");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  for (const auto& w : one->warnings) EXPECT_FALSE(has(w, "different jobs")) << w;
  fs::remove_all(dir);
}

TEST(NsysMixedJobs, TheSameShapeRecordedHoursApartIsAnotherRun) {
  const fs::path dir = scratch("clock");
  const auto a = testing::write_nsys_fixture(dir / "a", job(2, "monday"));
  auto later = job(2, "tuesday");
  later.clock_error_ns = [](int) { return int64_t(26) * 3600 * 1000000000; };  // the session started a day later
  const auto b = testing::write_nsys_fixture(dir / "b", later);
  auto refused = import_nsys({a[0], b[1]}, dir / "run");
  ASSERT_FALSE(refused.ok());
  const std::string text = refused.status().user_text();
  EXPECT_TRUE(has(text, "recorded 26.0 h apart")) << text;
  EXPECT_FALSE(has(text, "world size")) << text;
  fs::remove_all(dir);
}

}  // namespace nsys_mixed_jobs_test
}  // namespace rankscope::nsys
