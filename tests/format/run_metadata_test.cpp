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

// Integer fields holding numbers no int (or int64) holds: a clear error naming the field and its
// value, never a conversion (1.8e27 to int is undefined behaviour; 2^32 + 4 to int was read as 4).
TEST(RunMetadata, IntegersOutOfRangeAreAClearError) {
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"world_size", 1.8e27},  {"world_size", 4294967300LL}, {"world_size", 2.5},
      {"tp", 1.8e27},          {"dp", -1e300},               {"created_unix_ns", 1.8e27},
      {"schema_version", -1},  {"tp", "2"},                  {"dp", true},
  };
  for (const auto& [key, value] : cases) {
    auto j = to_json(sample());
    j[key] = value;
    auto m = run_metadata_from_json(j, "run.json");
    ASSERT_FALSE(m.ok()) << key << " = " << value.dump();
    EXPECT_EQ(m.status().code(), StatusCode::kCorrupt) << key << " = " << value.dump();
    EXPECT_NE(m.status().message().find("run.json: " + key + " is " + value.dump()), std::string::npos)
        << m.status().message();
  }
  auto j = to_json(sample());
  j["groups"][1]["ranks"] = {0, 1.8e27};
  auto m = run_metadata_from_json(j, "run.json");
  EXPECT_EQ(m.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(m.status().message().find("rank 1.8e+27"), std::string::npos) << m.status().message();
  // Integral floats are integers still (a writer that keeps every number a double).
  j = to_json(sample());
  j["world_size"] = 4.0;
  j["created_unix_ns"] = 1.7e18;
  m = run_metadata_from_json(j, "run.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->world_size, 4);
  EXPECT_EQ(m->created_ns, 1700000000000000000);
}

// Names taken from imports may hold bytes that are not UTF-8 (an nsys export's strings, a trace cut
// inside a character): run.json is written with each such byte replaced, never an exception.
TEST(RunMetadata, NamesThatAreNotUtf8AreWrittenReplaced) {
  auto dir = testing::scratch_dir("meta_utf8");
  RunMetadata m = sample();
  m.program = "gpt2\xff-train";
  m.hosts[1] = "node\xc3";
  m.extra["import_error"] = "[{}\xff";
  ASSERT_TRUE(write_run_metadata(dir, m).ok());
  auto r = read_run_metadata(dir);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->program, "gpt2\xef\xbf\xbd-train");
  EXPECT_EQ(r->hosts[1], "node\xef\xbf\xbd");
  EXPECT_EQ(r->extra["import_error"], "[{}\xef\xbf\xbd");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::format
