// nccl_bootstrap_test.cpp — the ncclUniqueId exchange without NCCL or a GPU: the run-directory file
// (atomic publish, polling, timeout with a hint, a stale file of another job ignored) and the
// broadcast over a host communicator (threads of one process standing in for MPI ranks).
// No label: runs everywhere.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "../trainer/thread_group_comm.h"
#include "comm/nccl/unique_id_exchange.h"

namespace gpt2 {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

UniqueIdBytes pattern(int salt) {
  UniqueIdBytes id{};
  for (size_t i = 0; i < id.size(); i++) id[i] = static_cast<char>((i * 37 + salt) & 0xff);
  return id;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("rs_nccl_id_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(NcclIdFile, PublishedIdIsReadBackByAWaiterThatStartedFirst) {
  TempDir dir;
  const fs::path file = unique_id_file(dir.path(), "tp0");
  EXPECT_EQ(file.filename(), "nccl_unique_id.tp0");
  const UniqueIdBytes id = pattern(3);  // includes bytes >= 0x80 and 0x00
  rankscope::Result<UniqueIdBytes> got = rankscope::not_found("not run");
  std::thread waiter([&] { got = wait_for_unique_id_file(file, "run-42", 5000ms, 1ms); });
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(publish_unique_id_file(file, "run-42", id).ok());
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, id);
  // Only the final file remains: the temporary one was renamed, not copied.
  std::vector<fs::path> left;
  for (const auto& e : fs::directory_iterator(dir.path())) left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<fs::path>{"nccl_unique_id.tp0"});
}

TEST(NcclIdFile, TimesOutWithAHintAndIgnoresAnotherJobsFile) {
  TempDir dir;
  const fs::path file = unique_id_file(dir.path(), "world");
  ASSERT_TRUE(publish_unique_id_file(file, "earlier-run", pattern(1)).ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto got = wait_for_unique_id_file(file, "this-run", 200ms, 5ms);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(got.ok()) << "a stale id of another job was accepted";
  EXPECT_EQ(got.status().code(), rankscope::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("hint"), std::string::npos);
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 5s);
  // The right job's id replaces it and is found.
  ASSERT_TRUE(publish_unique_id_file(file, "this-run", pattern(2)).ok());
  auto now = wait_for_unique_id_file(file, "this-run", 200ms, 5ms);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(*now, pattern(2));
}

TEST(NcclIdFile, TruncatedOrCorruptFilesAreNotAccepted) {
  TempDir dir;
  const fs::path file = unique_id_file(dir.path(), "world");
  std::ofstream(file) << "rankscope nccl unique id v1\nrun\nabcd\n";  // too short
  EXPECT_FALSE(wait_for_unique_id_file(file, "run", 30ms, 5ms).ok());
  std::ofstream(file) << "rankscope nccl unique id v1\nrun\n" << std::string(256, 'z') << "\n";  // not hex
  EXPECT_FALSE(wait_for_unique_id_file(file, "run", 30ms, 5ms).ok());
}

TEST(NcclIdFile, UnwritableDirectoryIsAnIoError) {
  auto s = publish_unique_id_file("/nonexistent-dir-rankscope/nccl_unique_id.world", "run", pattern(0));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), rankscope::StatusCode::kIo);
}

TEST(NcclIdBroadcast, RankZerosIdReachesEveryRank) {
  constexpr int kRanks = 3;
  auto group = std::make_shared<testing::ThreadGroup>(kRanks);
  std::vector<UniqueIdBytes> ids(kRanks);
  std::vector<rankscope::Status> status(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; r++) {
    threads.emplace_back([&, r] {
      testing::ThreadGroupComm comm(group, r, "world");
      ids[r] = r == 0 ? pattern(9) : UniqueIdBytes{};
      status[r] = broadcast_unique_id(comm, ids[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; r++) {
    EXPECT_TRUE(status[r].ok()) << status[r].to_string();
    EXPECT_EQ(ids[r], pattern(9)) << "rank " << r;
  }
}

}  // namespace
}  // namespace gpt2
