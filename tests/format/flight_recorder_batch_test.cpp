// flight_recorder_batch_test.cpp — many recorders read on several threads (format/src/
// flight_recorder_batch.h): every rank gets its own file's snapshot in order, whatever the thread
// count, a corrupt or missing file stays that rank's problem, and open_run_directory (which reads
// through it) finds the event streams from the directory listing alone.
#include <gtest/gtest.h>

#include <fstream>

#include <fmt/format.h>

#include "flight_recorder_batch.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "test_files.h"

namespace rankscope::format {
namespace {

constexpr int kWorld = 300;  // more than one slice of 64 files per thread

std::vector<std::filesystem::path> write_ranks(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (int r = 0; r < kWorld; ++r) {
    files.push_back(flight_recorder_path(dir, r));
    if (r == 7) continue;  // missing
    if (r == 150) {
      std::ofstream(files.back()) << "not a flight recorder";
      continue;
    }
    auto w = FlightRecorderWriter::create(files.back(), {r, kWorld, r % 8, 1000 + r, fmt::format("h{}", r / 8), "run", 1});
    EXPECT_TRUE(w.ok());
  }
  return files;
}

TEST(FlightRecorderBatch, EveryThreadCountGivesEachRankItsOwnRecorderInOrder) {
  const auto dir = testing::scratch_dir("batch");
  const auto files = write_ranks(dir);
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    const auto snaps = read_flight_recorders(files, threads);
    ASSERT_EQ(snaps.size(), files.size());
    for (int r = 0; r < kWorld; ++r) {
      if (r == 7) {
        EXPECT_EQ(snaps[r].status().code(), StatusCode::kNotFound);
      } else if (r == 150) {
        EXPECT_EQ(snaps[r].status().code(), StatusCode::kCorrupt);
      } else {
        ASSERT_TRUE(snaps[r].ok()) << r << ": " << snaps[r].status().to_string();
        EXPECT_EQ(snaps[r]->rank, r);
        EXPECT_EQ(snaps[r]->pid, 1000 + r);
        EXPECT_EQ(snaps[r]->host, fmt::format("h{}", r / 8));
      }
    }
  }
  EXPECT_TRUE(read_flight_recorders({}).empty());
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderBatch, RunDirectoryKeepsProblemsPerRankAndFindsStreamsByName) {
  const auto dir = testing::scratch_dir("batch_run");
  write_ranks(dir);
  std::ofstream(event_stream_path(dir, 3)) << "";
  std::ofstream(dir / "rank4.events") << "";  // not the stream's name: not rank 4's stream
  auto run = open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_EQ(run->world_size, kWorld);
  EXPECT_EQ(run->ranks_readable(), kWorld - 2);
  EXPECT_EQ(run->ranks[299].flight->rank, 299);
  EXPECT_FALSE(run->ranks[3].events_path.empty());
  EXPECT_TRUE(run->ranks[4].events_path.empty());
  EXPECT_TRUE(run->ranks[5].events_path.empty());
  // Problems in rank order, whichever thread read them: the missing rank 7 before the corrupt 150.
  std::vector<std::string> rank_problems;
  for (const auto& p : run->problems)
    if (p.rfind("rank 7:", 0) == 0 || p.rfind("rank 150:", 0) == 0) rank_problems.push_back(p.substr(0, p.find(':')));
  EXPECT_EQ(rank_problems, (std::vector<std::string>{"rank 7", "rank 150"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::format
