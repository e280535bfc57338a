// moe_expert_chain_test.cpp — the expert plan (trainer/model/moe_expert_blocks.h) and the experts'
// GEMM chain (moe_expert_chain.h) on the CPU backend: offsets and blocks of both loops, the chain
// against a row-by-row reference written here (forward and every gradient), and the grouped chain
// against the token loop. The CUDA chain is checked against this one in tests/gpu/cuda_moe_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/moe_expert_chain.h"
#include "ops/cpu/cpu_ops.h"

namespace {

using gpt2::ExpertLoop;
using gpt2::moe::ExpertBlock;

TEST(MoeExpertBlocks, OffsetsArePrefixSums) {
  const std::vector<size_t> rows = {3, 0, 4, 1};
  EXPECT_EQ(gpt2::moe::expert_row_offsets(rows), (std::vector<size_t>{0, 3, 3, 7, 8}));
  EXPECT_EQ(gpt2::moe::expert_row_offsets({}), (std::vector<size_t>{0}));
}

TEST(MoeExpertBlocks, GroupedIsOneBlockPerExpertWithRowsAndTokenOnePerRow) {
  const std::vector<size_t> rows = {3, 0, 4, 1};
  const auto grouped = gpt2::moe::expert_blocks(rows, ExpertLoop::kGrouped);
  ASSERT_EQ(grouped.size(), 3u) << "the empty expert launches nothing";
  EXPECT_EQ(grouped[0].expert, 0);
  EXPECT_EQ(grouped[1].expert, 2);
  EXPECT_EQ(grouped[1].first_row, 3u);
  EXPECT_EQ(grouped[1].rows, 4u);
  EXPECT_EQ(grouped[2].expert, 3);
  EXPECT_EQ(grouped[2].first_row, 7u);
  const auto token = gpt2::moe::expert_blocks(rows, ExpertLoop::kToken);
  ASSERT_EQ(token.size(), 8u);
  for (size_t i = 0; i < token.size(); ++i) {
    EXPECT_EQ(token[i].first_row, i);
    EXPECT_EQ(token[i].rows, 1u);
  }
  EXPECT_EQ(token[2].expert, 0);
  EXPECT_EQ(token[3].expert, 2);
  EXPECT_EQ(token[7].expert, 3);
  EXPECT_TRUE(gpt2::moe::expert_blocks(std::vector<size_t>{0, 0}, ExpertLoop::kGrouped).empty());
}

constexpr int kC = 8, kH = 4 * kC, kL = 3;
const std::vector<size_t> kRows = {3, 0, 4};  // R = 7, expert 1 received nothing
constexpr size_t kR = 7;

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double gelu_grad(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

struct Experts {
  std::vector<float> fc_w, fc_b, proj_w, proj_b;  // all L experts, each contiguous
  explicit Experts(float seed) : fc_w(kL * kH * kC), fc_b(kL * kH), proj_w(kL * kC * kH), proj_b(kL * kC) {
    auto fill = [&](std::vector<float>& v, float scale) {
      for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(seed + 0.61f * float(i));
    };
    fill(fc_w, 0.3f), fill(fc_b, 0.1f), fill(proj_w, 0.2f), fill(proj_b, 0.05f);
  }
  template <class F>
  gpt2::MoeTensors<F> view(auto& self) {
    gpt2::MoeTensors<F> t;
    for (int j = 0; j < kL; ++j) {
      t.fc_w.push_back(self.fc_w.data() + j * kH * kC);
      t.fc_b.push_back(self.fc_b.data() + j * kH);
      t.proj_w.push_back(self.proj_w.data() + j * kC * kH);
      t.proj_b.push_back(self.proj_b.data() + j * kC);
    }
    return t;
  }
};

int expert_of_row(size_t r) { return r < 3 ? 0 : 2; }

struct ChainRun {
  std::vector<float> pre, gelu, y, dh, dx;
  Experts grads{0.0f};
};

ChainRun run_chain(ExpertLoop loop, const std::vector<float>& x, const std::vector<float>& dy, Experts& w) {
  auto ops = gpt2::make_cpu_ops();
  ChainRun r;
  r.pre.assign(kR * kH, 0.0f), r.gelu.assign(kR * kH, 0.0f), r.y.assign(kR * kC, 0.0f);
  r.dh.assign(kR * kH, 0.0f), r.dx.assign(kR * kC, 0.0f);
  for (auto* v : {&r.grads.fc_w, &r.grads.fc_b, &r.grads.proj_w, &r.grads.proj_b}) std::fill(v->begin(), v->end(), 0.0f);
  const auto blocks = gpt2::moe::expert_blocks(kRows, loop);
  const gpt2::MoeWeights weights = w.view<const float>(w);
  gpt2::MoeGrads grads = r.grads.view<float>(r.grads);
  gpt2::moe::ExpertActivations acts{const_cast<float*>(x.data()), r.pre.data(), r.gelu.data(), r.y.data()};
  gpt2::moe::expert_chain_forward(*ops, blocks, weights, acts, kC);
  gpt2::moe::expert_chain_backward(*ops, blocks, weights, grads, acts, dy.data(), r.dh.data(), r.dx.data(), kC);
  return r;
}

std::vector<float> wave(size_t n, float f, float a) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = a * std::cos(f * float(i) + 0.3f);
  return v;
}

TEST(MoeExpertChain, GroupedMatchesARowByRowReferenceForwardAndBackward) {
  Experts w(0.4f);
  const auto x = wave(kR * kC, 0.37f, 1.0f), dy = wave(kR * kC, 0.23f, 0.5f);
  const ChainRun got = run_chain(ExpertLoop::kGrouped, x, dy, w);
  Experts want(0.0f);
  for (auto* v : {&want.fc_w, &want.fc_b, &want.proj_w, &want.proj_b}) std::fill(v->begin(), v->end(), 0.0f);
  for (size_t r = 0; r < kR; ++r) {
    const int j = expert_of_row(r);
    const float* fw = w.fc_w.data() + j * kH * kC;
    const float* pw = w.proj_w.data() + j * kC * kH;
    std::vector<double> h(kH), g(kH), dg(kH, 0.0), dh(kH);
    for (int o = 0; o < kH; ++o) {
      double s = w.fc_b[j * kH + o];
      for (int c = 0; c < kC; ++c) s += double(fw[o * kC + c]) * x[r * kC + c];
      h[o] = s, g[o] = gelu(s);
      EXPECT_NEAR(got.pre[r * kH + o], h[o], 1e-4) << "row " << r;
      EXPECT_NEAR(got.gelu[r * kH + o], g[o], 1e-4) << "row " << r;
    }
    for (int c = 0; c < kC; ++c) {
      double s = w.proj_b[j * kC + c];
      for (int o = 0; o < kH; ++o) s += double(pw[c * kH + o]) * g[o];
      EXPECT_NEAR(got.y[r * kC + c], s, 1e-4) << "row " << r;
      const double d = dy[r * kC + c];
      want.proj_b[j * kC + c] += float(d);
      for (int o = 0; o < kH; ++o) {
        dg[o] += d * pw[c * kH + o];
        want.proj_w[j * kC * kH + c * kH + o] += float(d * g[o]);
      }
    }
    for (int o = 0; o < kH; ++o) {
      dh[o] = dg[o] * gelu_grad(h[o]);
      want.fc_b[j * kH + o] += float(dh[o]);
      for (int c = 0; c < kC; ++c) want.fc_w[j * kH * kC + o * kC + c] += float(dh[o] * x[r * kC + c]);
    }
    for (int c = 0; c < kC; ++c) {
      double s = 0.0;
      for (int o = 0; o < kH; ++o) s += dh[o] * fw[o * kC + c];
      EXPECT_NEAR(got.dx[r * kC + c], s, 1e-4) << "row " << r;
    }
  }
  auto expect_all_near = [](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << what << " " << i;
  };
  expect_all_near(got.grads.fc_w, want.fc_w, "fc_w");
  expect_all_near(got.grads.fc_b, want.fc_b, "fc_b");
  expect_all_near(got.grads.proj_w, want.proj_w, "proj_w");
  expect_all_near(got.grads.proj_b, want.proj_b, "proj_b");
  // The expert that received no rows gets no gradient at all.
  for (int o = 0; o < kH * kC; ++o) EXPECT_EQ(got.grads.fc_w[1 * kH * kC + o], 0.0f);
}

TEST(MoeExpertChain, TokenLoopComputesWhatTheGroupedChainComputes) {
  Experts w(1.1f);
  const auto x = wave(kR * kC, 0.29f, 0.8f), dy = wave(kR * kC, 0.41f, 0.3f);
  const ChainRun grouped = run_chain(ExpertLoop::kGrouped, x, dy, w);
  const ChainRun token = run_chain(ExpertLoop::kToken, x, dy, w);
  for (size_t i = 0; i < grouped.y.size(); ++i) EXPECT_NEAR(grouped.y[i], token.y[i], 1e-5) << i;
  for (size_t i = 0; i < grouped.dx.size(); ++i) EXPECT_NEAR(grouped.dx[i], token.dx[i], 1e-5) << i;
  for (size_t i = 0; i < grouped.grads.fc_w.size(); ++i)
    EXPECT_NEAR(grouped.grads.fc_w[i], token.grads.fc_w[i], 1e-5) << i;
  for (size_t i = 0; i < grouped.grads.proj_b.size(); ++i)
    EXPECT_NEAR(grouped.grads.proj_b[i], token.grads.proj_b[i], 1e-5) << i;
}

}  // namespace
