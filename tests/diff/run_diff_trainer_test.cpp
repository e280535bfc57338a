// run_diff_trainer_test.cpp — `rankscope diff` on pairs of real gpt2-train jobs under mpirun (the
// pairs that need ranks: a delay injected on one rank, TP 1 against TP 2, and one job at two
// world sizes). Label mpi. Timing on a shared 2-core machine is noisy, so what is asserted is what
// the report says: the rank named and its cost within wide bounds, the settings, the communication
// added, the roles; the parts add up to the mean step's change exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "rankscope/analyzers/diff/run_diff.h"
#include "train_job.h"

namespace rankscope::analyzers {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

fs::path train(const std::string& name, int np, std::vector<std::string> args, int steps = 10) {
  // Ranks waiting in MPI yield their core: on two shared cores a spinning waiter slows the very
  // rank it waits for.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  const fs::path dir = e2e::fresh_run_dir("diff_" + name);
  args.insert(args.end(), {"--model", "tiny", "--vocab-size", "512", "--data", "synthetic:uniform", "--seq-len", "32",
                           "--batch", "2", "--steps", std::to_string(steps), "--quiet", "--run-dir", dir.string()});
  std::string out;
  EXPECT_EQ(e2e::run_to_end(e2e::train_command(np, args), dir, 300s, &out), 0) << out;
  return dir;
}

void expect_parts_add_up(const DiffReport& r) {
  double sum = 0;
  for (const auto& p : r.parts) sum += p.delta_ms;
  EXPECT_NEAR(sum, r.mean_delta_ms, 1e-6 + 1e-9 * std::fabs(r.mean_delta_ms)) << diff_report_text(r);
}

const DiffPart* part(const DiffReport& r, const std::string& name) {
  for (const auto& p : r.parts)
    if (p.name == name) return &p;
  return nullptr;
}

// Two ranks sharing two cores with other tests: a step of 8 ms can take 180 (both ranks and the
// machine's other work want the cores), and a rank sleeping its delay frees a core, so NEW can even
// be faster. What holds under any load is what the skew analysis finds, and that is what the report
// must say: the new straggler with its cost, and the growth in its range as that rank's alone.
TEST(RunDiffTrainer, ADelayOnOneRankIsTheNewStragglerWithItsCost) {
  const fs::path base = train("tp2", 2, {"--tp", "2"}, 16);
  const fs::path slow = train("tp2_delay1", 2, {"--tp", "2", "--inject", "delay:rank=1,range=forward/block0/mlp,ms=50"}, 16);
  auto r = diff_runs(base, slow);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string text = diff_report_text(*r);
  const DiffPart* wait = part(*r, "collective wait");
  ASSERT_NE(wait, nullptr) << text;
  EXPECT_NE(wait->cause.find("a new straggler: rank 1"), std::string::npos) << text;
  EXPECT_NE(wait->cause.find("in forward/block0/mlp"), std::string::npos) << text;
  std::smatch cost;
  ASSERT_TRUE(std::regex_search(wait->cause, cost, std::regex("costing ([0-9.]+) ms a step"))) << text;
  EXPECT_GE(std::stod(cost[1]), 25.0) << text;   // the 50 ms delay, as the skew analysis costs it
  EXPECT_LE(std::stod(cost[1]), 150.0) << text;
  const DiffPart* forward = part(*r, "compute in forward");
  ASSERT_NE(forward, nullptr) << text;
  EXPECT_NE(forward->cause.find("forward/block*/mlp"), std::string::npos) << text;
  EXPECT_NE(forward->cause.find("on rank 1 alone"), std::string::npos) << text;
  EXPECT_TRUE(r->ranks_by_rank) << r->rank_match;
  expect_parts_add_up(*r);
}

TEST(RunDiffTrainer, TensorParallelTwoAddsTheTensorParallelCollectives) {
  const fs::path dp2 = train("tp1", 2, {"--tp", "1"});
  const fs::path tp2 = train("tp2_only", 2, {"--tp", "2"});
  auto r = diff_runs(dp2, tp2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string text = diff_report_text(*r);
  bool tp = false;
  for (const auto& s : r->settings) tp = tp || (s.key == "tp" && s.base == "1" && s.now == "2");
  EXPECT_TRUE(tp) << text;
  const DiffPart* transfer = part(*r, "collective transfer");
  ASSERT_NE(transfer, nullptr) << text;
  EXPECT_NE(transfer->cause.find("more allreduce on tp"), std::string::npos) << text;
  // TP 1 -> 2: a tensor-parallel place means nothing in BASE; every rank is one role.
  EXPECT_FALSE(r->ranks_by_rank);
  ASSERT_EQ(r->roles.size(), 1u) << text;
  EXPECT_EQ(r->roles[0].role, "every rank");
  expect_parts_add_up(*r);
}

TEST(RunDiffTrainer, TwoWorldSizesMatchRanksByTensorParallelPlace) {
  const fs::path two = train("w2_delay1", 2, {"--tp", "2", "--inject", "delay:rank=1,range=forward/block0/mlp,ms=15"});
  const fs::path four = train("w4_delay3", 4, {"--tp", "2", "--inject", "delay:rank=3,range=forward/block0/mlp,ms=30"});
  auto r = diff_runs(two, four);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string text = diff_report_text(*r);
  EXPECT_FALSE(r->ranks_by_rank);
  EXPECT_NE(r->rank_match.find("world sizes differ (2 -> 4)"), std::string::npos) << r->rank_match;
  ASSERT_EQ(r->roles.size(), 2u) << text;
  for (const auto& d : r->roles) {
    if (d.role == "tp rank 1") {
      EXPECT_EQ(d.base_ranks, std::vector<int>{1});
      EXPECT_EQ(d.new_ranks, (std::vector<int>{1, 3}));
    } else {
      EXPECT_EQ(d.role, "tp rank 0");
    }
  }
  // Rank 3 does rank 1's work: its straggling is the same role's, costing more, never "new".
  const DiffPart* wait = part(*r, "collective wait");
  ASSERT_NE(wait, nullptr) << text;
  EXPECT_EQ(wait->cause.find("a new straggler"), std::string::npos) << text;
  EXPECT_NE(wait->cause.find("rank 3 (tp rank 1) (arrives late"), std::string::npos) << text;
  EXPECT_NE(wait->cause.find("straggles as BASE's rank 1 did"), std::string::npos) << text;
  expect_parts_add_up(*r);
}

}  // namespace
}  // namespace rankscope::analyzers
