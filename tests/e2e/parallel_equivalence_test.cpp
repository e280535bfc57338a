// parallel_equivalence_test.cpp — under mpirun, TP=2, TP=4, DP=2 (half the per-rank batch) and
// TP=2 x DP=2, and TP=2 with --attention flash, reproduce TP=1's loss curve over 20 steps (relative
// difference <= 1e-4); activation recompute 1 and 2 reproduce recompute 0 (<= 1e-5) with less
// activation memory.
//
// Kept small for CI (2 cores): the tiny preset with a 1024-token vocabulary, T=32, on zipf data.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <regex>

#include "train_job.h"

namespace {

using namespace std::chrono_literals;

constexpr int kSteps = 20;

std::vector<std::string> tiny_args(const std::filesystem::path& dir, int batch) {
  return {"--model", "tiny", "--vocab-size", "1024", "--seq-len", "32",
          "--batch", std::to_string(batch), "--steps", std::to_string(kSteps), "--lr", "3e-3",
          "--data", "synthetic:zipf", "--seed", "7", "--quiet", "--run-dir", dir.string()};
}

std::vector<double> run_losses(const std::string& name, int np, std::vector<std::string> extra, int batch) {
  auto dir = e2e::fresh_run_dir(name);
  auto args = tiny_args(dir, batch);
  args.insert(args.end(), extra.begin(), extra.end());
  std::string out;
  int code = e2e::run_to_end(e2e::train_command(np, args), dir, 300s, &out);
  EXPECT_EQ(code, 0) << out;
  auto losses = e2e::read_losses(dir);
  EXPECT_EQ(losses.size(), static_cast<size_t>(kSteps)) << out;
  return losses;
}

void expect_same_curve(const std::vector<double>& ref, const std::vector<double>& got, double tol) {
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_LE(std::fabs(got[i] - ref[i]) / std::fabs(ref[i]), tol)
        << "step " << i + 1 << ": " << got[i] << " vs TP=1 " << ref[i];
}

class ParallelEquivalence : public ::testing::Test {
 protected:
  // ctest runs each test in its own process, possibly in parallel: each computes its reference
  // in a directory of its own.
  static void SetUpTestSuite() {
    reference_ = new std::vector<double>(run_losses("equiv_tp1_" + std::to_string(getpid()), 0, {}, 4));
  }
  static void TearDownTestSuite() { delete reference_; }
  static std::vector<double>* reference_;
};
std::vector<double>* ParallelEquivalence::reference_ = nullptr;

TEST_F(ParallelEquivalence, ReferenceLossFalls) {
  ASSERT_EQ(reference_->size(), static_cast<size_t>(kSteps));
  EXPECT_LT(reference_->back(), reference_->front() - 0.5);
}

TEST_F(ParallelEquivalence, TensorParallel2) {
  expect_same_curve(*reference_, run_losses("equiv_tp2", 2, {"--tp", "2"}, 4), 1e-4);
}

// Flash attention under TP=2 follows the naive TP=1 curve (the CPU default is naive).
TEST_F(ParallelEquivalence, TensorParallel2FlashAttention) {
  expect_same_curve(*reference_, run_losses("equiv_tp2_flash", 2, {"--tp", "2", "--attention", "flash"}, 4), 1e-4);
}

TEST_F(ParallelEquivalence, TensorParallel4) {
  expect_same_curve(*reference_, run_losses("equiv_tp4", 4, {"--tp", "4"}, 4), 1e-4);
}

TEST_F(ParallelEquivalence, DataParallel2HalfBatch) {
  expect_same_curve(*reference_, run_losses("equiv_dp2", 2, {"--tp", "1"}, 2), 1e-4);
}

TEST_F(ParallelEquivalence, TensorParallel2xDataParallel2) {
  expect_same_curve(*reference_, run_losses("equiv_tp2dp2", 4, {"--tp", "2"}, 2), 1e-4);
}

double activation_mib(const std::string& output) {
  std::smatch m;
  static const std::regex re("activation memory ([0-9.]+) MiB");
  return std::regex_search(output, m, re) ? std::stod(m[1]) : -1;
}

TEST(Recompute, SameLossesLessMemory) {
  std::vector<std::vector<double>> curves;
  std::vector<double> mib;
  for (int level : {0, 1, 2}) {
    auto dir = e2e::fresh_run_dir("recompute" + std::to_string(level));
    auto args = tiny_args(dir, 4);
    args.insert(args.end(), {"--recompute", std::to_string(level), "--steps", "8"});
    std::string out;
    ASSERT_EQ(e2e::run_to_end(e2e::train_command(0, args), dir, 300s, &out), 0) << out;
    curves.push_back(e2e::read_losses(dir));
    mib.push_back(activation_mib(out));
    ASSERT_EQ(curves.back().size(), 8u);
  }
  expect_same_curve(curves[0], curves[1], 1e-5);
  expect_same_curve(curves[0], curves[2], 1e-5);
  EXPECT_GT(mib[0], 0);
  EXPECT_LT(mib[1], mib[0]);
  EXPECT_LT(mib[2], mib[1]);
}

}  // namespace
