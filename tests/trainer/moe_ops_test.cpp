// moe_ops_test.cpp — the CPU MoE ops (trainer/ops/cpu/cpu_moe_ops.h) against hand values and
// central finite differences: router softmax/top-k/gates at K = 1 and 2 (with a logit bias and the
// aux-loss gradient term), the combine, and the row gathers/scatters as adjoints of each other.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "ops/cpu/cpu_moe_ops.h"

namespace {

constexpr int kN = 5, kE = 4, kC = 3;

// Logits spaced 0.37 apart in a per-row order, so a small step never changes the top-K choice.
std::vector<float> spaced_logits() {
  std::vector<float> l(kN * kE);
  for (int n = 0; n < kN; n++)
    for (int e = 0; e < kE; e++) l[n * kE + e] = 0.37f * float((e * 3 + n) % kE) - 0.5f + 0.01f * n;
  return l;
}

TEST(MoeOps, RouterPicksTopKAndRenormalisesAtTwo) {
  auto ops = gpt2::make_cpu_moe_ops();
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, std::log(3.0f) + 2.0f};  // probs 1:e:e^2:3e^2
  std::vector<float> probs(4), gate(2);
  std::vector<int32_t> expert(2);
  ops->router_forward(probs.data(), expert.data(), gate.data(), logits.data(), nullptr, 1, 4, 2);
  EXPECT_EQ(expert, (std::vector<int32_t>{3, 2}));
  EXPECT_NEAR(gate[0], 0.75f, 1e-6);
  EXPECT_NEAR(gate[1], 0.25f, 1e-6);
  EXPECT_NEAR(std::accumulate(probs.begin(), probs.end(), 0.0f), 1.0f, 1e-6);
  // K = 1: the gate is the probability itself (Switch); a bias of +10 on expert 0 makes it hot.
  std::vector<float> bias = {10.0f, 0.0f, 0.0f, 0.0f};
  ops->router_forward(probs.data(), expert.data(), gate.data(), logits.data(), bias.data(), 1, 4, 1);
  EXPECT_EQ(expert[0], 0);
  EXPECT_NEAR(gate[0], probs[0], 1e-7);
  EXPECT_GT(gate[0], 0.99f);
}

// L(logits) = sum dgate . gate + sum_n aux . probs[n]: the gradient router_backward must return.
double router_loss(gpt2::MoeOps& ops, const std::vector<float>& logits, const std::vector<float>& dgate,
                   const std::vector<float>& aux, int K) {
  std::vector<float> probs(kN * kE), gate(kN * K);
  std::vector<int32_t> expert(kN * K);
  ops.router_forward(probs.data(), expert.data(), gate.data(), logits.data(), nullptr, kN, kE, K);
  double l = 0.0;
  for (size_t i = 0; i < gate.size(); i++) l += double(dgate[i]) * gate[i];
  for (int n = 0; n < kN; n++)
    for (int e = 0; e < kE; e++) l += double(aux[e]) * probs[n * kE + e];
  return l;
}

void check_router_gradient(int K) {
  auto ops = gpt2::make_cpu_moe_ops();
  auto logits = spaced_logits();
  std::vector<float> dgate(kN * K), aux = {0.3f, -0.2f, 0.1f, 0.05f};
  for (size_t i = 0; i < dgate.size(); i++) dgate[i] = 0.5f - 0.17f * float(i % 7);
  std::vector<float> probs(kN * kE), gate(kN * K), dlogits(kN * kE);
  std::vector<int32_t> expert(kN * K);
  ops->router_forward(probs.data(), expert.data(), gate.data(), logits.data(), nullptr, kN, kE, K);
  ops->router_backward(dlogits.data(), probs.data(), expert.data(), gate.data(), dgate.data(), aux.data(),
                       kN, kE, K);
  const float h = 1e-2f;
  for (size_t i = 0; i < logits.size(); i++) {
    auto up = logits, down = logits;
    up[i] += h;
    down[i] -= h;
    const double fd = (router_loss(*ops, up, dgate, aux, K) - router_loss(*ops, down, dgate, aux, K)) / (2.0 * h);
    EXPECT_NEAR(dlogits[i], fd, 2e-4) << "K=" << K << " logit " << i;
  }
}

TEST(MoeOps, RouterBackwardMatchesFiniteDifferencesTop1) { check_router_gradient(1); }
TEST(MoeOps, RouterBackwardMatchesFiniteDifferencesTop2) { check_router_gradient(2); }

TEST(MoeOps, CombineAndItsBackward) {
  auto ops = gpt2::make_cpu_moe_ops();
  constexpr int K = 2, R = 7;  // 10 slots, 3 dropped
  std::vector<int32_t> row_of_slot = {3, 0, -1, 5, 1, 6, 2, -1, -1, 4};
  std::vector<float> rows(R * kC), gate(kN * K), dout(kN * kC);
  for (size_t i = 0; i < rows.size(); i++) rows[i] = 0.1f * float(i) - 0.8f;
  for (size_t i = 0; i < gate.size(); i++) gate[i] = 0.2f + 0.05f * float(i);
  for (size_t i = 0; i < dout.size(); i++) dout[i] = 0.3f - 0.07f * float(i);
  std::vector<float> out(kN * kC, 99.0f);
  ops->combine_forward(out.data(), rows.data(), gate.data(), row_of_slot.data(), kN, K, kC);
  // token 1: slot 2 dropped, slot 3 -> row 5 with gate 0.35
  for (int c = 0; c < kC; c++) EXPECT_NEAR(out[1 * kC + c], 0.35f * rows[5 * kC + c], 1e-6);
  // token 3: slot 6 -> row 2, slot 7 dropped
  for (int c = 0; c < kC; c++) EXPECT_NEAR(out[3 * kC + c], gate[6] * rows[2 * kC + c], 1e-6);
  std::vector<float> drows(R * kC, 0.0f), dgate(kN * K, 99.0f);
  ops->combine_backward(drows.data(), dgate.data(), dout.data(), rows.data(), gate.data(), row_of_slot.data(),
                        kN, K, kC);
  // The combine is bilinear: the gradient is exact, check every entry against the definition.
  for (int n = 0; n < kN; n++)
    for (int k = 0; k < K; k++) {
      const int32_t row = row_of_slot[n * K + k];
      double dot = 0.0;
      for (int c = 0; c < kC; c++) {
        if (row >= 0) {
          EXPECT_NEAR(drows[row * kC + c], gate[n * K + k] * dout[n * kC + c], 1e-6);
          dot += double(dout[n * kC + c]) * rows[row * kC + c];
        }
      }
      EXPECT_NEAR(dgate[n * K + k], dot, 1e-6);
    }
}

TEST(MoeOps, GatherScatterAndSlotBackwardAreAdjoints) {
  auto ops = gpt2::make_cpu_moe_ops();
  constexpr int K = 2;
  std::vector<int32_t> row_of_slot = {3, 0, -1, 5, 1, 6, 2, -1, -1, 4};
  std::vector<int32_t> token_of_row(7);
  for (int s = 0; s < kN * K; s++)
    if (row_of_slot[s] >= 0) token_of_row[row_of_slot[s]] = s / K;
  std::vector<float> inp(kN * kC), rows(7 * kC), drows(7 * kC), dinp(kN * kC, 0.0f);
  for (size_t i = 0; i < inp.size(); i++) inp[i] = std::sin(float(i));
  for (size_t i = 0; i < drows.size(); i++) drows[i] = std::cos(float(i) * 0.7f);
  ops->gather_rows(rows.data(), inp.data(), token_of_row.data(), 7, kC);
  ops->slot_rows_backward(dinp.data(), drows.data(), row_of_slot.data(), kN, K, kC);
  double lhs = 0.0, rhs = 0.0;  // <gather(inp), drows> == <inp, gather^T(drows)>
  for (size_t i = 0; i < rows.size(); i++) lhs += double(rows[i]) * drows[i];
  for (size_t i = 0; i < inp.size(); i++) rhs += double(inp[i]) * dinp[i];
  EXPECT_NEAR(lhs, rhs, 1e-5);
  // scatter by a permutation, then gather by the same permutation: identity.
  std::vector<int32_t> perm = {4, 2, 6, 0, 1, 5, 3};
  std::vector<float> scattered(rows.size()), back(rows.size());
  ops->scatter_rows(scattered.data(), rows.data(), perm.data(), 7, kC);
  for (int c = 0; c < kC; c++) EXPECT_EQ(scattered[4 * kC + c], rows[0 * kC + c]);
  ops->gather_rows(back.data(), scattered.data(), perm.data(), 7, kC);
  EXPECT_EQ(back, rows);
}

TEST(MoeOps, ProbsColumnSum) {
  auto ops = gpt2::make_cpu_moe_ops();
  std::vector<float> probs = {0.1f, 0.9f, 0.4f, 0.6f, 0.5f, 0.5f}, sum(2);
  ops->probs_column_sum(sum.data(), probs.data(), 3, 2);
  EXPECT_NEAR(sum[0], 1.0f, 1e-6);
  EXPECT_NEAR(sum[1], 2.0f, 1e-6);
}

}  // namespace
