// run_directory_test.cpp — discovery of a run's files, with problems recorded per rank.
#include <gtest/gtest.h>

#include <fstream>

#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "test_files.h"

namespace rankscope::format {
namespace {

void make_rank(const std::filesystem::path& dir, int rank, int world) {
  auto w = FlightRecorderWriter::create(flight_recorder_path(dir, rank), {rank, world, rank, 100 + rank, "h", "r", 1});
  ASSERT_TRUE(w.ok());
}

TEST(RunDirectory, ReadsEveryRankAndReportsTheMissingOne) {
  auto dir = testing::scratch_dir("rundir");
  RunMetadata m;
  m.world_size = 3;
  ASSERT_TRUE(write_run_metadata(dir, m).ok());
  make_rank(dir, 0, 3);
  make_rank(dir, 2, 3);
  std::ofstream(event_stream_path(dir, 2)) << "";
  auto run = open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_EQ(run->world_size, 3);
  ASSERT_EQ(run->ranks.size(), 3u);
  EXPECT_TRUE(run->ranks[0].flight.has_value());
  EXPECT_FALSE(run->ranks[1].flight.has_value());
  EXPECT_EQ(run->ranks[1].flight_status.code(), StatusCode::kNotFound);
  EXPECT_EQ(run->ranks[2].flight->pid, 102);
  EXPECT_FALSE(run->ranks[2].events_path.empty());
  EXPECT_EQ(run->ranks_readable(), 2);
  ASSERT_EQ(run->problems.size(), 1u);
  EXPECT_NE(run->problems[0].find("rank 1"), std::string::npos);
  EXPECT_NE(run->problems[0].find("missing"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(RunDirectory, WorldSizeComesFromTheRecordersWhenRunJsonIsGone) {
  auto dir = testing::scratch_dir("rundir_nometa");
  make_rank(dir, 0, 2);
  make_rank(dir, 1, 2);
  auto run = open_run_directory(dir);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->world_size, 2);
  EXPECT_FALSE(run->metadata.has_value());
  EXPECT_EQ(run->ranks_readable(), 2);
  ASSERT_FALSE(run->problems.empty());
  EXPECT_NE(run->problems[0].find("run.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(RunDirectory, CorruptRankIsAProblemNotAFailure) {
  auto dir = testing::scratch_dir("rundir_corrupt");
  make_rank(dir, 0, 2);
  std::ofstream(flight_recorder_path(dir, 1)) << "garbage that is not a flight recorder";
  auto run = open_run_directory(dir);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->ranks[1].flight_status.code(), StatusCode::kCorrupt);
  std::filesystem::remove_all(dir);
}

TEST(RunDirectory, NothingOfARunIsAnError) {
  auto dir = testing::scratch_dir("rundir_empty");
  auto run = open_run_directory(dir);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("empty"), std::string::npos);
  std::ofstream(dir / "notes.txt") << "hello";
  run = open_run_directory(dir);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("not a rankscope run"), std::string::npos);
  EXPECT_EQ(open_run_directory(dir / "nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(open_run_directory(dir / "notes.txt").status().code(), StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(RunDirectoryLayout, RankOfFile) {
  EXPECT_EQ(rank_of_file("x/rank00042.flight", ".flight"), 42);
  EXPECT_EQ(rank_of_file("rank1.events", ".events"), 1);
  EXPECT_FALSE(rank_of_file("rank.flight", ".flight").has_value());
  EXPECT_FALSE(rank_of_file("rankXY.flight", ".flight").has_value());
  EXPECT_FALSE(rank_of_file("rank00001.events", ".flight").has_value());
  EXPECT_FALSE(rank_of_file("rank-3.flight", ".flight").has_value());
  EXPECT_FALSE(rank_of_file("myrank00001.flight", ".flight").has_value());
  EXPECT_EQ(rank_of_file_name("rank123456.events", ".events"), 123456);
}

TEST(RunDirectoryLayout, CanonicalNamesAreExactlyWhatThePathFunctionsGive) {
  for (int r : {0, 5, 42, 99999, 123456}) {
    const std::string events = event_stream_path("run", r).filename().string();
    const std::string flight = flight_recorder_path("run", r).filename().string();
    EXPECT_TRUE(is_canonical_rank_file_name(events, r, ".events")) << events;
    EXPECT_TRUE(is_canonical_rank_file_name(flight, r, ".flight")) << flight;
    EXPECT_FALSE(is_canonical_rank_file_name(events, r + 1, ".events")) << events;
    EXPECT_FALSE(is_canonical_rank_file_name(flight, r, ".events")) << flight;
  }
  EXPECT_FALSE(is_canonical_rank_file_name("rank5.events", 5, ".events"));
  EXPECT_FALSE(is_canonical_rank_file_name("rank000005.events", 5, ".events"));
  EXPECT_FALSE(is_canonical_rank_file_name("rank00005.events.bak", 5, ".events"));
}

}  // namespace
}  // namespace rankscope::format
