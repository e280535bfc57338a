// fused_layernorm_test.cpp — the CPU residual + LayerNorm forward (Ops::residual_layernorm_forward,
// overridden by the CPU backend with one pass per row) against the composed default of ops.h
// (residual_forward, then layernorm_forward), and the accumulate (dinp +=) of layernorm_backward that
// makes it the fused residual + LayerNorm backward.
//
// Tolerance: none. Both forwards normalise each row with the same row function of layernorm.cpp on
// the same fp32 sums, so residual_out, ln_out, mean and rstd must agree bit for bit. The accumulate
// test compares (g + backward from zero) with (backward into g): one fp32 rounding apart at most (the
// compiler may contract the += into an FMA), so |diff| <= 1e-6 (|g| + |backward|).
// Shapes: C = 1, 7, 33 (not a multiple of 4 or 32), 64, 768 (GPT-2), 1000; N from 1 to 16. Aliasing:
// residual_out == a and residual_out == b (in place, as a caller may write the residual stream).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "model/ops.h"
#include "ops/cpu/cpu_ops.h"

namespace gpt2 {
namespace fused_layernorm_tests {  // its own: in a unity build the test files of this binary share one translation unit
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale, float offset = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(offset, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Shape {
  int N, C;
};

struct Forward {
  std::vector<float> residual, ln, mean, rstd;
};

// Which implementation of residual_layernorm_forward runs, and how residual_out is placed.
enum class Path { kFused, kComposedDefault };
enum class Alias { kNone, kOutIsA, kOutIsB };

Forward run_forward(Ops& ops, Path path, Alias alias, const Shape& s, uint32_t seed) {
  const size_t nc = static_cast<size_t>(s.N) * s.C;
  std::vector<float> a = random_vector(nc, seed, 1.0f, 0.5f);  // offset: mean far from 0
  std::vector<float> b = random_vector(nc, seed + 1, 0.3f);
  const std::vector<float> weight = random_vector(s.C, seed + 2, 0.2f, 1.0f);
  const std::vector<float> bias = random_vector(s.C, seed + 3, 0.1f);
  Forward f;
  f.residual = random_vector(nc, seed + 4, 5.0f);  // garbage: "=" must overwrite
  f.ln = random_vector(nc, seed + 5, 5.0f);
  f.mean.assign(s.N, -7.0f);
  f.rstd.assign(s.N, -7.0f);
  float* out = alias == Alias::kOutIsA ? a.data() : alias == Alias::kOutIsB ? b.data() : f.residual.data();
  if (path == Path::kFused) {
    ops.residual_layernorm_forward(out, f.ln.data(), f.mean.data(), f.rstd.data(), a.data(), b.data(),
                                   weight.data(), bias.data(), s.N, s.C);
  } else {
    ops.Ops::residual_layernorm_forward(out, f.ln.data(), f.mean.data(), f.rstd.data(), a.data(), b.data(),
                                        weight.data(), bias.data(), s.N, s.C);
  }
  if (alias != Alias::kNone) f.residual.assign(out, out + nc);
  return f;
}

void expect_bitwise_equal(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); i++) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << "[" << i << "]: fused " << got[i] << ", composed " << want[i];
      return;
    }
  }
}

// got == before + delta, up to one fp32 rounding of each term.
::testing::AssertionResult accumulated(float got, float before, float delta) {
  const double want = static_cast<double>(before) + delta;
  const double limit = 1e-6 * (std::fabs(before) + std::fabs(delta));
  if (std::fabs(got - want) <= limit) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << before << " + " << delta << " = " << want;
}

class ResidualLayerNorm : public ::testing::TestWithParam<Shape> {};

TEST_P(ResidualLayerNorm, FusedEqualsComposedBitForBit) {
  const Shape s = GetParam();
  auto ops = make_cpu_ops();
  for (Alias alias : {Alias::kNone, Alias::kOutIsA, Alias::kOutIsB}) {
    SCOPED_TRACE(alias == Alias::kNone ? "distinct buffers" : alias == Alias::kOutIsA ? "out == a" : "out == b");
    const Forward fused = run_forward(*ops, Path::kFused, alias, s, 11);
    const Forward composed = run_forward(*ops, Path::kComposedDefault, alias, s, 11);
    expect_bitwise_equal(fused.residual, composed.residual, "residual_out");
    expect_bitwise_equal(fused.ln, composed.ln, "ln_out");
    expect_bitwise_equal(fused.mean, composed.mean, "mean");
    expect_bitwise_equal(fused.rstd, composed.rstd, "rstd");
  }
}

TEST_P(ResidualLayerNorm, FusedComputesTheSumAndNormalisesIt) {
  // Independent of the composed path: residual_out is a + b, and each ln_out row, with unit weight
  // and zero bias, has mean ~0 and variance ~1 - eps*rstd^2 (fp32 sums over C: 1e-4 slack).
  const Shape s = GetParam();
  if (s.C < 2) GTEST_SKIP() << "a row of one element normalises to 0";
  auto ops = make_cpu_ops();
  const size_t nc = static_cast<size_t>(s.N) * s.C;
  const std::vector<float> a = random_vector(nc, 21, 1.0f, 0.5f), b = random_vector(nc, 22, 0.3f);
  const std::vector<float> ones(s.C, 1.0f), zeros(s.C, 0.0f);
  std::vector<float> residual(nc), ln(nc), mean(s.N), rstd(s.N);
  ops->residual_layernorm_forward(residual.data(), ln.data(), mean.data(), rstd.data(), a.data(), b.data(),
                                  ones.data(), zeros.data(), s.N, s.C);
  for (size_t i = 0; i < nc; i++) ASSERT_EQ(residual[i], a[i] + b[i]) << i;
  for (int n = 0; n < s.N; n++) {
    double m = 0, v = 0;
    for (int c = 0; c < s.C; c++) m += ln[static_cast<size_t>(n) * s.C + c];
    m /= s.C;
    for (int c = 0; c < s.C; c++) {
      const double d = ln[static_cast<size_t>(n) * s.C + c] - m;
      v += d * d;
    }
    v /= s.C;
    EXPECT_NEAR(m, 0.0, 1e-4) << "row " << n;
    EXPECT_NEAR(v, 1.0 - 1e-5 * rstd[n] * rstd[n], 1e-4) << "row " << n;
  }
}

TEST_P(ResidualLayerNorm, BackwardAccumulatesIntoTheResidualGradient) {
  // layernorm_backward's dinp += is the residual + LayerNorm backward: the gradient already in the
  // residual stream (g) plus the LayerNorm's own input gradient, in one op. Same for dweight, dbias.
  const Shape s = GetParam();
  auto ops = make_cpu_ops();
  const size_t nc = static_cast<size_t>(s.N) * s.C;
  const std::vector<float> inp = random_vector(nc, 31, 1.0f, 0.5f), dout = random_vector(nc, 32, 1.0f);
  const std::vector<float> weight = random_vector(s.C, 33, 0.2f, 1.0f), bias = random_vector(s.C, 34, 0.1f);
  const std::vector<float> g = random_vector(nc, 35, 1.0f);
  const std::vector<float> gw = random_vector(s.C, 36, 1.0f), gb = random_vector(s.C, 37, 1.0f);
  std::vector<float> ln(nc), mean(s.N), rstd(s.N);
  ops->layernorm_forward(ln.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), s.N, s.C);

  std::vector<float> dinp0(nc, 0.0f), dw0(s.C, 0.0f), db0(s.C, 0.0f);
  ops->layernorm_backward(dinp0.data(), dw0.data(), db0.data(), dout.data(), inp.data(), weight.data(),
                          mean.data(), rstd.data(), s.N, s.C);
  std::vector<float> dinp = g, dw = gw, db = gb;
  ops->layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), weight.data(),
                          mean.data(), rstd.data(), s.N, s.C);
  bool any_nonzero = false;
  for (size_t i = 0; i < nc; i++) {
    ASSERT_TRUE(accumulated(dinp[i], g[i], dinp0[i])) << "dinp " << i;
    any_nonzero = any_nonzero || dinp0[i] != 0.0f;
  }
  if (s.C > 1) {
    EXPECT_TRUE(any_nonzero) << "the LayerNorm's own input gradient must not vanish";
  }
  for (int c = 0; c < s.C; c++) {
    ASSERT_TRUE(accumulated(dw[c], gw[c], dw0[c])) << "dweight " << c;
    ASSERT_TRUE(accumulated(db[c], gb[c], db0[c])) << "dbias " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ResidualLayerNorm,
                         ::testing::Values(Shape{1, 1}, Shape{3, 7}, Shape{5, 33}, Shape{16, 64}, Shape{7, 768},
                                           Shape{4, 1000}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return "N" + std::to_string(info.param.N) + "_C" + std::to_string(info.param.C);
                         });

}  // namespace
}  // namespace fused_layernorm_tests
}  // namespace gpt2
