// moe_mlp_test.cpp — one MoE MLP layer (trainer/model/moe_mlp.h) on the CPU backend.
//
// Checks: every gradient (input, router, expert weights and biases) against central finite
// differences of loss = sum(out * probe_weights) + aux loss, at top-1 and top-2, dropless and with
// capacity drops; EP=2 (two threads exchanging rows) gives the same output and gradients as EP=1;
// the token loop gives the grouped loop's results.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "model/moe_mlp.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cpu/cpu_ops.h"
#include "moe_param_view.h"
#include "thread_group_comm.h"

namespace moe_mlp_tests {  // its own: in a unity build the test files of this binary share one translation unit
namespace {

using gpt2::ExpertLoop;
using gpt2::MoeGrads;
using gpt2::MoeLayerConfig;
using gpt2::MoeMlp;
using gpt2::MoeWeights;

constexpr int kN = 6, kC = 4, kE = 4;

float pseudo(size_t i, float scale) { return scale * std::sin(0.731f * float(i) + 0.3f); }

// Flat weights of all E experts: router, then per expert fc_w, fc_b, proj_w, proj_b.
struct Params {
  std::vector<float> v;
  static size_t expert_size() { return gpt2::testing::moe_expert_floats(kC); }
  Params() : v(gpt2::testing::moe_layer_floats(kE, kC)) {
    for (size_t i = 0; i < v.size(); i++) v[i] = pseudo(i, 0.5f);
  }
  // The tensors of experts [first, first + count).
  template <class F, class P>
  static gpt2::MoeTensors<F> view(P* base, int first, int count) {
    return gpt2::testing::moe_view<F>(base, kE, kC, first, count);
  }
};

std::vector<float> input(int rank) {
  std::vector<float> x(size_t(kN) * kC);
  for (size_t i = 0; i < x.size(); i++) x[i] = pseudo(i + 100 * size_t(rank), 1.0f);
  return x;
}

std::vector<float> probe_weights() {
  std::vector<float> w(size_t(kN) * kC);
  for (size_t i = 0; i < w.size(); i++) w[i] = pseudo(i * 3 + 7, 1.0f);
  return w;
}

struct Result {
  double loss = 0.0;
  std::vector<float> out, dinp, grads;
  gpt2::MoeStats stats;
};

// One forward + backward on EP=1 with all experts.
Result run_one(const MoeLayerConfig& cfg, const Params& p, const std::vector<float>& x) {
  auto ops = gpt2::make_cpu_ops();
  auto mops = gpt2::make_cpu_moe_ops();
  auto layout = gpt2::moe::ExpertLayout::make(kE, 1, 0).value();
  MoeMlp layer(cfg, layout, *ops, *mops, nullptr, kN, kC, "block0");
  Result r;
  r.out.assign(x.size(), 0.0f);
  auto w = Params::view<const float>(p.v.data(), 0, kE);
  auto stats = layer.forward(r.out.data(), x.data(), w, nullptr, nullptr);
  EXPECT_TRUE(stats.ok()) << stats.status().to_string();
  r.stats = *stats;
  const auto pw = probe_weights();
  for (size_t i = 0; i < r.out.size(); i++) r.loss += double(r.out[i]) * pw[i];
  r.loss += stats->aux_loss;
  r.grads.assign(p.v.size(), 0.0f);
  r.dinp.assign(x.size(), 0.0f);
  auto g = Params::view<float>(r.grads.data(), 0, kE);
  EXPECT_TRUE(layer.backward(r.dinp.data(), pw.data(), x.data(), w, g, 1.0f, nullptr).ok());
  return r;
}

void check_gradients(int top_k, float capacity, float aux) {
  MoeLayerConfig cfg{kE, top_k, capacity, aux, ExpertLoop::kGrouped};
  Params p;
  const auto x = input(0);
  const Result base = run_one(cfg, p, x);
  if (capacity > 0.0f) {
    EXPECT_GT(base.stats.dropped, 0) << "the test wants drops at this capacity";
  }
  const float h = 1e-3f;
  int checked = 0;
  for (size_t i = 0; i < p.v.size(); i += 7) {
    Params up = p, down = p;
    up.v[i] += h;
    down.v[i] -= h;
    const double fd = (run_one(cfg, up, x).loss - run_one(cfg, down, x).loss) / (2.0 * h);
    EXPECT_NEAR(base.grads[i], fd, 2e-3 + 2e-3 * std::fabs(fd)) << "param " << i;
    ++checked;
  }
  for (size_t i = 0; i < x.size(); i++) {
    auto up = x, down = x;
    up[i] += h;
    down[i] -= h;
    const double fd = (run_one(cfg, p, up).loss - run_one(cfg, p, down).loss) / (2.0 * h);
    EXPECT_NEAR(base.dinp[i], fd, 2e-3 + 2e-3 * std::fabs(fd)) << "input " << i;
  }
  EXPECT_GT(checked, 50);
}

TEST(MoeMlp, GradientsTop1Dropless) { check_gradients(1, 0.0f, 0.0f); }
TEST(MoeMlp, GradientsTop2DroplessWithAuxLoss) { check_gradients(2, 0.0f, 0.01f); }
TEST(MoeMlp, GradientsTop2WithCapacityDrops) { check_gradients(2, 0.5f, 0.01f); }
TEST(MoeMlp, GradientsTop1WithCapacityDrops) { check_gradients(1, 0.4f, 0.0f); }

TEST(MoeMlp, TokenLoopMatchesGroupedLoop) {
  Params p;
  const auto x = input(0);
  auto a = run_one({kE, 2, 0.0f, 0.01f, ExpertLoop::kGrouped}, p, x);
  auto b = run_one({kE, 2, 0.0f, 0.01f, ExpertLoop::kToken}, p, x);
  for (size_t i = 0; i < a.out.size(); i++) EXPECT_NEAR(a.out[i], b.out[i], 1e-5);
  for (size_t i = 0; i < a.grads.size(); i++) EXPECT_NEAR(a.grads[i], b.grads[i], 1e-5);
}

TEST(MoeMlp, ExpertParallel2MatchesOneRank) {
  // Two ranks with different tokens. EP=1: each rank alone with all experts; expert gradients
  // summed over the ranks are what EP=2's expert owners hold (before any edp reduction).
  for (int top_k : {1, 2}) {
    MoeLayerConfig cfg{kE, top_k, 0.0f, 0.01f, ExpertLoop::kGrouped};
    Params p;
    Result ref[2] = {run_one(cfg, p, input(0)), run_one(cfg, p, input(1))};
    auto group = std::make_shared<gpt2::testing::ThreadGroup>(2);
    Result got[2];
    std::string errors[2];
    auto body = [&](int rank) {
      auto ops = gpt2::make_cpu_ops();
      auto mops = gpt2::make_cpu_moe_ops();
      gpt2::testing::ThreadGroupComm ep(group, rank, "ep0");
      auto layout = gpt2::moe::ExpertLayout::make(kE, 2, rank).value();
      MoeMlp layer(cfg, layout, *ops, *mops, &ep, kN, kC, "block0");
      const auto x = input(rank);
      Result& r = got[rank];
      r.out.assign(x.size(), 0.0f);
      auto w = Params::view<const float>(p.v.data(), layout.first_local_expert(), layout.local_experts());
      auto stats = layer.forward(r.out.data(), x.data(), w, nullptr, nullptr);
      if (!stats.ok()) return void(errors[rank] = stats.status().to_string());
      r.stats = *stats;
      r.grads.assign(p.v.size(), 0.0f);
      r.dinp.assign(x.size(), 0.0f);
      auto g = Params::view<float>(r.grads.data(), layout.first_local_expert(), layout.local_experts());
      const auto pw = probe_weights();
      auto st = layer.backward(r.dinp.data(), pw.data(), x.data(), w, g, 1.0f, nullptr);
      if (!st.ok()) errors[rank] = st.to_string();
    };
    std::thread t0(body, 0), t1(body, 1);
    t0.join();
    t1.join();
    for (int r = 0; r < 2; r++) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      for (size_t i = 0; i < ref[r].out.size(); i++) EXPECT_NEAR(got[r].out[i], ref[r].out[i], 1e-5) << "K=" << top_k;
      for (size_t i = 0; i < ref[r].dinp.size(); i++) EXPECT_NEAR(got[r].dinp[i], ref[r].dinp[i], 1e-5) << "K=" << top_k;
      // Router: replicated, each rank's own gradient.
      for (size_t i = 0; i < size_t(kE) * kC; i++) EXPECT_NEAR(got[r].grads[i], ref[r].grads[i], 1e-5);
      EXPECT_EQ(got[r].stats.routed, ref[r].stats.routed);
    }
    // Experts: rank r owns experts 2r, 2r+1 and holds the gradient from both ranks' tokens.
    for (int e = 0; e < kE; e++) {
      const int owner = e / 2;
      const size_t first = size_t(kE) * kC + size_t(e) * Params::expert_size();
      for (size_t i = first; i < first + Params::expert_size(); i++)
        EXPECT_NEAR(got[owner].grads[i], ref[0].grads[i] + ref[1].grads[i], 1e-5) << "expert " << e;
    }
    EXPECT_EQ(got[0].stats.received + got[1].stats.received, 2 * kN * top_k);
  }
}

}  // namespace
}  // namespace moe_mlp_tests
