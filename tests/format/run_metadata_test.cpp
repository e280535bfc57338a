// run_metadata_test.cpp — run.json round trip, forward compatibility and bad input.
#include <gtest/gtest.h>

#include <fstream>

#include "rankscope/format/run_metadata.h"
#include "test_files.h"

namespace rankscope::format {
namespace {

RunMetadata sample() {
  RunMetadata m;
  m.run_id = "20261122-abc";
  m.created_ns = 123;
  m.program = "gpt2-train";
  m.command_line = {"gpt2-train", "--tp", "2"};
  m.world_size = 4;
  m.tp = 2;
  m.dp = 2;
  m.groups = {{"world", {0, 1, 2, 3}}, {"tp0", {0, 1}}, {"tp1", {2, 3}}, {"dp0", {0, 2}}, {"dp1", {1, 3}}};
  m.hosts = {"a", "a", "b", "b"};
  m.model = {{"layers", 2}, {"channels", 128}};
  m.training = {{"seq_len", 64}};
  return m;
}

TEST(RunMetadata, RoundTripThroughDisk) {
  auto dir = testing::scratch_dir("meta");
  ASSERT_TRUE(write_run_metadata(dir, sample()).ok());
  auto m = read_run_metadata(dir);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->run_id, "20261122-abc");
  EXPECT_EQ(m->world_size, 4);
  EXPECT_EQ(m->tp, 2);
  ASSERT_NE(m->group("dp1"), nullptr);
  EXPECT_EQ(m->group("dp1")->ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(m->model["channels"], 128);
  EXPECT_EQ(m->command_line.size(), 3u);
  auto groups = m->groups_of(2);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0]->ranks.size(), 2u);  // innermost first
  EXPECT_EQ(groups.back()->name, "world");
  EXPECT_FALSE(std::filesystem::exists(dir / "run.json.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(RunMetadata, UnknownFieldsSurviveARoundTrip) {
  auto j = to_json(sample());
  j["from_the_future"] = {{"x", 1}};
  auto m = run_metadata_from_json(j, "run.json");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(to_json(*m)["from_the_future"]["x"], 1);
}

TEST(RunMetadata, BadInputIsAClearError) {
  auto j = to_json(sample());
  j["schema_version"] = 7;
  auto m = run_metadata_from_json(j, "run.json");
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
  j = to_json(sample());
  j["groups"][1]["ranks"] = {0, 9};
  m = run_metadata_from_json(j, "run.json");
  EXPECT_EQ(m.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(m.status().message().find("rank 9"), std::string::npos);
  j = to_json(sample());
  j.erase("world_size");
  EXPECT_FALSE(run_metadata_from_json(j, "run.json").ok());
  auto dir = testing::scratch_dir("meta_bad");
  std::ofstream(dir / "run.json") << "{ not json";
  auto r = read_run_metadata(dir);
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("run.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::format
