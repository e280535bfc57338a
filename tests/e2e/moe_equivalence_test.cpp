// moe_equivalence_test.cpp — gpt2-train with MoE blocks under mpirun: EP=2 and TP=2 x EP=2
// reproduce the EP=1 run's 20-step losses (2 data-parallel ranks each, abs <= 1e-4); the MoE
// counters reach the event streams (tokens received add up to the slots routed); the
// a2a-miscount fault makes the faulty rank fail with a message naming the peer and both counts;
// bad --moe-* flags are refused before MPI starts.
//
// Kept small for CI (2 cores): tiny preset, 1024-token vocabulary, T=32, B=2, 4 experts top-2 in
// block 0 (--moe-every 2), capacity 1.25 (some drops), aux loss 0.01.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>

#include "train_job.h"

namespace moe_equivalence_tests {  // its own: in a unity build the test files of this binary share one translation unit
namespace {

using namespace std::chrono_literals;

constexpr int kSteps = 20;

std::vector<std::string> moe_args(const std::filesystem::path& dir) {
  return {"--model", "tiny", "--vocab-size", "1024", "--seq-len", "32", "--batch", "2",
          "--steps", std::to_string(kSteps), "--lr", "3e-3", "--data", "synthetic:zipf", "--seed", "7",
          "--moe-experts", "4", "--moe-top-k", "2", "--moe-every", "2", "--moe-capacity-factor", "1.25",
          "--moe-aux-loss-coef", "0.01", "--quiet", "--run-dir", dir.string()};
}

std::vector<double> run_losses(const std::string& name, int np, std::vector<std::string> extra,
                               std::filesystem::path* run_dir = nullptr) {
  auto dir = e2e::fresh_run_dir(name + "_" + std::to_string(getpid()));
  auto args = moe_args(dir);
  args.insert(args.end(), extra.begin(), extra.end());
  std::string out;
  int code = e2e::run_to_end(e2e::train_command(np, args), dir, 300s, &out);
  EXPECT_EQ(code, 0) << out;
  auto losses = e2e::read_losses(dir);
  EXPECT_EQ(losses.size(), static_cast<size_t>(kSteps)) << out;
  if (run_dir) *run_dir = dir;
  return losses;
}

void expect_same_curve(const std::vector<double>& ref, const std::vector<double>& got) {
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_LE(std::fabs(got[i] - ref[i]), 1e-4) << "step " << i + 1 << ": " << got[i] << " vs EP=1 " << ref[i];
}

class MoeEquivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference_ = new std::vector<double>(run_losses("moe_ep1", 2, {"--ep", "1"})); }
  static void TearDownTestSuite() { delete reference_; }
  static std::vector<double>* reference_;
};
std::vector<double>* MoeEquivalence::reference_ = nullptr;

TEST_F(MoeEquivalence, ReferenceLossFalls) {
  ASSERT_EQ(reference_->size(), static_cast<size_t>(kSteps));
  EXPECT_LT(reference_->back(), reference_->front() - 0.5);
}

TEST_F(MoeEquivalence, ExpertParallel2) {
  std::filesystem::path dir;
  expect_same_curve(*reference_, run_losses("moe_ep2", 2, {"--ep", "2"}, &dir));
  // Rows received over both ranks = slots routed minus slots dropped, summed over the steps.
  double received = 0, routed = 0, dropped = 0;
  for (int r = 0; r < 2; r++) {
    received += e2e::counter_total(dir, r, "moe.tokens_received");
    dropped += e2e::counter_total(dir, r, "moe.tokens_dropped");
    for (int e = 0; e < 4; e++) routed += e2e::counter_total(dir, r, "moe.expert" + std::to_string(e) + ".routed");
  }
  EXPECT_DOUBLE_EQ(routed, 2.0 * kSteps * 2 * 32 * 2);  // ranks x steps x B x T x K
  EXPECT_GT(dropped, 0);
  EXPECT_DOUBLE_EQ(received, routed - dropped);
  EXPECT_GT(e2e::counter_total(dir, 0, "moe.aux_loss"), 0);
}

TEST_F(MoeEquivalence, TensorParallel2xExpertParallel2) {
  expect_same_curve(*reference_, run_losses("moe_tp2ep2", 4, {"--tp", "2", "--ep", "2"}));
}

TEST(MoeFaults, A2aMiscountFailsNamingPeerAndCounts) {
  for (const char* delta : {"1", "-1"}) {
    auto dir = e2e::fresh_run_dir(std::string("moe_miscount_") + (delta[0] == '-' ? "minus" : "plus") + "_" +
                                  std::to_string(getpid()));
    auto args = moe_args(dir);
    args[9] = "3";  // --steps 3
    args.insert(args.end(), {"--ep", "2", "--inject", std::string("a2a-miscount:rank=1,step=2,delta=") + delta});
    std::string out;
    const int code = e2e::run_to_end(e2e::train_command(2, args), dir, 120s, &out);
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("combine all_to_all_v on ep0: this rank expected"), std::string::npos) << out;
    EXPECT_NE(out.find("back from EP rank 0"), std::string::npos) << out;
  }
}

TEST(MoeFlags, BadMoeFlagsAreRefused) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--moe-experts", "3", "--ep", "2"}, "cannot be sharded over --ep 2"},
      {{"--moe-top-k", "2"}, "need --moe-experts"},
      {{"--moe-experts", "4", "--moe-top-k", "3"}, "not a number in [1, 2]"},
      {{"--moe-experts", "4", "--moe-expert-loop", "perrow"}, "unknown --moe-expert-loop"},
      {{"--moe-experts", "4", "--save-every", "5"}, "dense GPT-2 only"},
  };
  for (const Case& c : cases) {
    auto dir = e2e::fresh_run_dir("moe_flags_" + std::to_string(getpid()));
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--steps", "1", "--quiet", "--run-dir", dir.string()});
    std::string out;
    EXPECT_EQ(e2e::run_to_end(e2e::train_command(0, args), dir, 60s, &out), 2) << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace moe_equivalence_tests
