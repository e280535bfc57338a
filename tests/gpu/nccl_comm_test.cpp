// nccl_comm_test.cpp — the NCCL communicator on real GPUs. Label `gpu`: skips without a device.
//
// One rank (any GPU machine): every collective on device buffers (from the CUDA ops, ordered after
// them through the ops' stream) and on host buffers (staged), split, barrier, and the probe hook
// (completion_of_last). Several ranks (only with >= 2 GPUs; NCCL refuses two ranks on one GPU): the
// test re-runs this binary once per extra rank (NcclMultiRank.Worker, which skips unless started so),
// the ncclUniqueId travelling through the run-directory file, and checks an all-reduce, all-gather,
// reduce-scatter and an all-to-all-v between processes.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "comm/loopback_communicator.h"
#include "comm/nccl/nccl_communicator.h"
#include "gpu_test_util.h"
#include "ops/cuda/cuda_backend.h"

extern char** environ;

namespace gpt2 {
namespace {

using gputest::Buffer;
using rankscope::format::DataType;

class NcclSingleRank : public ::testing::Test {
 protected:
  void SetUp() override {
    RS_SKIP_WITHOUT_CUDA();
    auto ops = make_cuda_ops({});
    ASSERT_TRUE(ops.ok()) << ops.status().to_string();
    ops_ = std::move(ops).value();
    NcclOptions o;
    o.compute_stream = cuda_ops_stream(*ops_);
    auto comm = make_nccl_communicator(o);
    ASSERT_TRUE(comm.ok()) << comm.status().to_string();
    comm_ = std::move(comm).value();
  }
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<NcclCommunicator> comm_;
};

TEST_F(NcclSingleRank, CollectivesOnDeviceAndHostBuffers) {
  EXPECT_EQ(comm_->size(), 1);
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->name(), "world");
  const std::vector<float> x = {1, -2, 3.5f, 4};
  Buffer<float> buf(*ops_, x), out(*ops_, 4);
  ASSERT_TRUE(comm_->all_reduce(buf.get(), 4, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(buf.host(), x);
  ASSERT_TRUE(comm_->all_reduce(buf.get(), 4, DataType::kFloat32, ReduceOp::kMax).ok());
  EXPECT_EQ(buf.host(), x);
  ASSERT_TRUE(comm_->all_gather(buf.get(), out.get(), 4, DataType::kFloat32).ok());
  EXPECT_EQ(out.host(), x);
  ASSERT_TRUE(comm_->reduce_scatter(buf.get(), out.get(), 4, DataType::kFloat32).ok());
  EXPECT_EQ(out.host(), x);
  ASSERT_TRUE(comm_->broadcast(buf.get(), 4, DataType::kFloat32, 0).ok());
  EXPECT_FALSE(comm_->broadcast(buf.get(), 4, DataType::kFloat32, 1).ok()) << "root outside the group";
  ASSERT_TRUE(comm_->all_to_all(buf.get(), out.get(), 4, DataType::kFloat32).ok());
  EXPECT_EQ(out.host(), x);
  // all_to_all_v with displacements: 2 elements from offset 1 to offset 2.
  ops_->fill_zero(out.get(), out.bytes());
  const size_t sc[] = {2}, sd[] = {1}, rc[] = {2}, rd[] = {2};
  ASSERT_TRUE(comm_->all_to_all_v(buf.get(), sc, sd, out.get(), rc, rd, DataType::kFloat32).ok());
  EXPECT_EQ(out.host(), (std::vector<float>{0, 0, -2, 3.5f}));
  // Host memory is staged through the device.
  double host_loss = 2.5;
  ASSERT_TRUE(comm_->all_reduce(&host_loss, 1, DataType::kFloat64, ReduceOp::kSum).ok());
  EXPECT_EQ(host_loss, 2.5);
  std::vector<int> host_in = {7, 8, 9}, host_out(3);
  ASSERT_TRUE(comm_->all_gather(host_in.data(), host_out.data(), 3, DataType::kInt32).ok());
  EXPECT_EQ(host_out, host_in);
  EXPECT_FALSE(comm_->all_reduce(buf.get(), 4, DataType::kUnknown, ReduceOp::kSum).ok());
  ASSERT_TRUE(comm_->barrier().ok());
  EXPECT_TRUE(comm_->async_error().ok());
}

TEST_F(NcclSingleRank, CollectiveIsOrderedAfterTheOpsThatProducedItsInput) {
  // A long op chain on the ops' stream, then an all-reduce: it must see the chain's result.
  const size_t n = 1 << 22;
  Buffer<float> x(*ops_, std::vector<float>(n, 1.0f));
  for (int i = 0; i < 20; i++) ops_->add_inplace(x.get(), x.get(), n);  // 2^20 after 20 doublings
  ASSERT_TRUE(comm_->all_reduce(x.get(), n, DataType::kFloat32, ReduceOp::kSum).ok());
  const auto h = x.host();
  EXPECT_EQ(h.front(), 1048576.0f);
  EXPECT_EQ(h.back(), 1048576.0f);
}

TEST_F(NcclSingleRank, SplitAndTheProbeCompletionHook) {
  auto child = comm_->split("tp0", 0, 0);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->name(), "tp0");
  EXPECT_EQ(child->size(), 1);
  EXPECT_EQ(comm_->split("none", -1, 0), nullptr) << "a negative color means: not a member";
  auto* nccl = as_nccl(child.get());
  ASSERT_NE(nccl, nullptr);
  EXPECT_NE(nccl->comm_stream(), nullptr);
  Buffer<float> buf(*ops_, std::vector<float>(1024, 2.0f));
  ASSERT_TRUE(child->all_reduce(buf.get(), 1024, DataType::kFloat32, ReduceOp::kSum).ok());
  auto done = nccl->completion_of_last();
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  bool finished = false;
  for (int i = 0; i < 10000 && !finished; i++) {
    finished = (*done)->poll_done();
    if (!finished) usleep(100);
  }
  EXPECT_TRUE(finished);
  EXPECT_FALSE((*done)->failed());
  LoopbackCommunicator loopback;
  EXPECT_EQ(as_nccl(&loopback), nullptr) << "another backend is not NCCL";
}

// --- several processes, one GPU each ---

constexpr const char* kEnvRank = "RANKSCOPE_NCCL_TEST_RANK";
constexpr const char* kEnvSize = "RANKSCOPE_NCCL_TEST_SIZE";
constexpr const char* kEnvDir = "RANKSCOPE_NCCL_TEST_DIR";

// The body every rank runs; returns a failure description, empty on success.
std::string rank_body(int rank, int size, const std::string& dir) {
  auto ops = make_cuda_ops({.device = rank});
  if (!ops.ok()) return ops.status().to_string();
  NcclOptions o;
  o.rank = rank;
  o.size = size;
  o.device = rank;
  o.id_dir = dir;
  o.job_key = "nccl-comm-test";
  o.id_timeout = std::chrono::seconds(60);
  o.compute_stream = cuda_ops_stream(**ops);
  auto comm = make_nccl_communicator(o);
  if (!comm.ok()) return comm.status().to_string();
  Communicator& c = **comm;
  Buffer<float> v(**ops, std::vector<float>(8, static_cast<float>(rank + 1)));
  if (!c.all_reduce(v.get(), 8, DataType::kFloat32, ReduceOp::kSum).ok()) return "all_reduce failed";
  const float want = size * (size + 1) / 2.0f;
  for (float x : v.host()) if (x != want) return "all_reduce: got " + std::to_string(x);
  Buffer<float> mine(**ops, std::vector<float>{static_cast<float>(rank)}), all(**ops, size);
  if (!c.all_gather(mine.get(), all.get(), 1, DataType::kFloat32).ok()) return "all_gather failed";
  const auto gathered = all.host();
  for (int r = 0; r < size; r++) if (gathered[r] != r) return "all_gather: slot " + std::to_string(r);
  // all_to_all_v: rank r sends r+1 copies of (100*r + peer) to each peer.
  std::vector<size_t> sc(size), sd(size), rc(size), rd(size);
  std::vector<float> send;
  for (int p = 0; p < size; p++) {
    sc[p] = rank + 1;
    sd[p] = send.size();
    send.insert(send.end(), rank + 1, static_cast<float>(100 * rank + p));
  }
  size_t total = 0;
  for (int p = 0; p < size; p++) {
    rc[p] = p + 1;
    rd[p] = total;
    total += p + 1;
  }
  Buffer<float> sbuf(**ops, send), rbuf(**ops, total);
  if (!c.all_to_all_v(sbuf.get(), sc, sd, rbuf.get(), rc, rd, DataType::kFloat32).ok()) return "all_to_all_v failed";
  const auto got = rbuf.host();
  for (int p = 0; p < size; p++) {
    for (size_t i = 0; i < rc[p]; i++) {
      if (got[rd[p] + i] != 100 * p + rank) return "all_to_all_v: from peer " + std::to_string(p);
    }
  }
  return c.barrier().ok() ? "" : "barrier failed";
}

TEST(NcclMultiRank, Worker) {
  const char* rank = std::getenv(kEnvRank);
  if (rank == nullptr) GTEST_SKIP() << "runs only as a rank started by NcclMultiRank.FileExchangeAcrossProcesses";
  const std::string err = rank_body(std::atoi(rank), std::atoi(std::getenv(kEnvSize)), std::getenv(kEnvDir));
  EXPECT_EQ(err, "");
}

TEST(NcclMultiRank, FileExchangeAcrossProcesses) {
  if (std::getenv(kEnvRank) != nullptr) GTEST_SKIP() << "inside a worker";
  const DeviceProbe probe = probe_cuda_device(0);
  if (!probe.usable) GTEST_SKIP() << probe.reason;
  if (probe.device_count < 2) GTEST_SKIP() << "needs 2 GPUs (NCCL puts one rank per GPU); found " << probe.device_count;
  const int size = std::min(probe.device_count, 4);
  const std::string dir = (std::filesystem::temp_directory_path() / ("rs_nccl_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  for (int r = 1; r < size; r++) {
    std::vector<std::string> env_store = {std::string(kEnvRank) + "=" + std::to_string(r),
                                          std::string(kEnvSize) + "=" + std::to_string(size),
                                          std::string(kEnvDir) + "=" + dir};
    std::vector<char*> envp;
    for (char** e = environ; *e; e++) envp.push_back(*e);
    for (auto& s : env_store) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string filter = "--gtest_filter=NcclMultiRank.Worker";
    char* argv[] = {exe.data(), filter.data(), nullptr};
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    pids.push_back(pid);
  }
  EXPECT_EQ(rank_body(0, size, dir), "");
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a worker rank failed";
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpt2
