// fr_chrome_test.cpp — the Chrome trace of Flight Recorder dumps: one track per rank and group,
// the stuck collective a slice with its group, seq and state.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <sstream>

#include "rankscope/torch_fr/fr_chrome.h"

namespace rankscope::torch_fr {
namespace {

TEST(FrChrome, OneTrackPerRankAndGroup) {
  auto imp = import_fr_dumps(std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/torch_fr/tp2dp2_lagging");
  ASSERT_TRUE(imp.ok()) << imp.status().to_string();
  std::ostringstream out;
  auto s = write_fr_chrome_trace(*imp, out);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ranks, 4);
  const auto j = nlohmann::json::parse(out.str());
  std::set<std::pair<int, std::string>> tracks;
  bool stuck_slice = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert({e["pid"].get<int>(), e["args"]["name"].get<std::string>()});
    if (e["ph"] == "X" && e["pid"] == 2 && e["args"]["group"] == "tp1" && e["args"]["seq"] == 6) {
      stuck_slice = e["args"]["state"] == "enqueued";
    }
  }
  // default_pg, one tp and one dp group per rank.
  EXPECT_EQ(tracks.size(), 12u);
  EXPECT_TRUE(tracks.count({3, "tp1"}));
  EXPECT_TRUE(tracks.count({3, "dp1"}));
  EXPECT_TRUE(stuck_slice) << "rank 2's all-reduce #6 on tp1 is a slice left enqueued";
}

}  // namespace
}  // namespace rankscope::torch_fr
