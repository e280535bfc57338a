// gemm_gelu_test.cpp — the MLP's fused GEMM+GELU ops (Ops::matmul_gelu_forward,
// Ops::matmul_backward_dgelu) on the CPU backend: equal to the composed ops they replace, and to a
// double-precision scalar reference.
//
// Tolerances: fused vs composed is exact (the CPU backend runs the same ops in the same order);
// vs the double reference 1e-5 absolute + 1e-5 relative (fp32 dot products of length <= 48 and
// fp32 tanh, each a few ulps of values of order 1).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/cpu/cpu_ops.h"

namespace gpt2 {
namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_grad(double x) {
  const double h = 1e-6;  // central difference of the double GELU: error ~h^2
  return (gelu(x + h) - gelu(x - h)) / (2 * h);
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); i++) {
    ASSERT_NEAR(got[i], want[i], tol + tol * std::fabs(want[i])) << what << " element " << i;
  }
}

// Shapes as the MLP uses them: rows N, in C, out OC (fc: C -> 4C; projection: 4C -> C).
constexpr int kN = 12, kC = 16, kOC = 48;

TEST(GemmGeluTest, ForwardEqualsComposedOpsAndReference) {
  auto ops = make_cpu_ops();
  const auto inp = randn(kN * kC, 1), w = randn(kOC * kC, 2), bias = randn(kOC, 3);
  std::vector<float> out(kN * kOC), pre(kN * kOC), out_ref(kN * kOC), pre_ref(kN * kOC);
  ops->matmul_gelu_forward(out.data(), pre.data(), inp.data(), w.data(), bias.data(), kN, kC, kOC);
  ops->matmul_forward(pre_ref.data(), inp.data(), w.data(), bias.data(), kN, kC, kOC);
  ops->gelu_forward(out_ref.data(), pre_ref.data(), out_ref.size());
  EXPECT_EQ(pre, pre_ref);
  EXPECT_EQ(out, out_ref);

  std::vector<double> pre_d(kN * kOC), out_d(kN * kOC);
  for (int n = 0; n < kN; n++) {
    for (int o = 0; o < kOC; o++) {
      double acc = bias[o];
      for (int c = 0; c < kC; c++) acc += static_cast<double>(inp[n * kC + c]) * w[o * kC + c];
      pre_d[n * kOC + o] = acc;
      out_d[n * kOC + o] = gelu(acc);
    }
  }
  expect_close(pre, pre_d, 1e-5, "pre_gelu");
  expect_close(out, out_d, 1e-5, "out");
}

TEST(GemmGeluTest, BackwardEqualsComposedOpsAndReference) {
  auto ops = make_cpu_ops();
  // The projection: inp = GELU(pre) (N, F), weight (C, F), dout (N, C); F = kOC, C = kC.
  const int F = kOC, C = kC;
  const auto pre = randn(kN * F, 4), w = randn(C * F, 5), dout = randn(kN * C, 6);
  std::vector<float> inp(kN * F);
  ops->gelu_forward(inp.data(), pre.data(), inp.size());
  // Gradients accumulate (+=): start from non-zero values.
  const auto dw0 = randn(C * F, 7), db0 = randn(C, 8);

  std::vector<float> dpre(kN * F), dw = dw0, db = db0;
  ops->matmul_backward_dgelu(dpre.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), pre.data(), kN,
                             F, C);
  std::vector<float> dpre_ref(kN * F), dw_ref = dw0, db_ref = db0;
  ops->matmul_backward(dpre_ref.data(), dw_ref.data(), db_ref.data(), dout.data(), inp.data(), w.data(), kN, F, C);
  ops->gelu_backward(dpre_ref.data(), pre.data(), dpre_ref.data(), dpre_ref.size());
  EXPECT_EQ(dpre, dpre_ref);
  EXPECT_EQ(dw, dw_ref);
  EXPECT_EQ(db, db_ref);

  std::vector<double> dpre_d(kN * F), dw_d(dw0.begin(), dw0.end()), db_d(db0.begin(), db0.end());
  for (int n = 0; n < kN; n++) {
    for (int f = 0; f < F; f++) {
      double acc = 0;
      for (int c = 0; c < C; c++) acc += static_cast<double>(dout[n * C + c]) * w[c * F + f];
      dpre_d[n * F + f] = acc * gelu_grad(pre[n * F + f]);
    }
    for (int c = 0; c < C; c++) {
      db_d[c] += dout[n * C + c];
      for (int f = 0; f < F; f++) dw_d[c * F + f] += static_cast<double>(dout[n * C + c]) * inp[n * F + f];
    }
  }
  expect_close(dpre, dpre_d, 1e-5, "dpre");
  expect_close(dw, dw_d, 1e-5, "dweight");
  expect_close(db, db_d, 1e-5, "dbias");
}

// A null dbias (the row-parallel projection under TP adds its bias elsewhere) is not touched.
TEST(GemmGeluTest, BackwardWithoutBiasGradient) {
  auto ops = make_cpu_ops();
  const int F = kOC, C = kC;
  const auto pre = randn(kN * F, 9), w = randn(C * F, 10), dout = randn(kN * C, 11);
  std::vector<float> inp(kN * F), dpre(kN * F), dpre_ref(kN * F), dw(C * F), dw_ref(C * F);
  ops->gelu_forward(inp.data(), pre.data(), inp.size());
  ops->matmul_backward_dgelu(dpre.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), pre.data(), kN, F, C);
  ops->matmul_backward(dpre_ref.data(), dw_ref.data(), nullptr, dout.data(), inp.data(), w.data(), kN, F, C);
  ops->gelu_backward(dpre_ref.data(), pre.data(), dpre_ref.data(), dpre_ref.size());
  EXPECT_EQ(dpre, dpre_ref);
  EXPECT_EQ(dw, dw_ref);
}

}  // namespace
}  // namespace gpt2
