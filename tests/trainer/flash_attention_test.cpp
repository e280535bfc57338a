// flash_attention_test.cpp — the CPU flash attention (trainer/ops/cpu/flash_attention.h) against
// the naive CPU attention: forward output, and backward dq, dk, dv, for T = 1, T not a multiple of
// the tile, T = 1024 and head sizes 64, 32, 128 and 24; small tiles (16 x 8) so that short
// sequences still cross many tile edges; the logsumexp against a float64 reference; the saved and
// scratch sizes each kind asks for.
//
// Tolerances (fp32 both ways; the two orders of summation differ, nothing else): output
// |flash - naive| <= 2e-6 + 1e-5 |naive|; gradients max |flash - naive| <= 1e-5 * max(1, max |naive|
// of that gradient) (inputs are O(1); at T = 1 dq and dk are 0 in naive and ~2e-7 in flash).
// Measured worst here: ~1.3e-6 absolute on gradients of magnitude ~2 (printed by the test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "model/ops.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/flash_attention.h"

namespace gpt2 {
namespace {

struct Shape {
  int B, T, C, NH;
};

std::vector<float> random_vector(size_t n, uint64_t seed, float scale) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Largest |a - b| over the columns [col0, col0 + width) of rows of `stride` floats.
float max_diff_columns(const std::vector<float>& a, const std::vector<float>& b, int stride, int col0,
                       int width) {
  float worst = 0;
  for (size_t row = 0; row * stride < a.size(); row++)
    for (int c = col0; c < col0 + width; c++) {
      const size_t i = row * stride + c;
      worst = std::max(worst, std::fabs(a[i] - b[i]));
    }
  return worst;
}
float max_abs_columns(const std::vector<float>& a, int stride, int col0, int width) {
  return max_diff_columns(a, std::vector<float>(a.size(), 0.0f), stride, col0, width);
}

struct Result {
  std::vector<float> out, dqkv, saved;
};

// Forward and backward through the Ops interface with one kind.
Result run_ops(Ops& ops, AttentionKind kind, const Shape& s, const std::vector<float>& qkv,
               const std::vector<float>& dout) {
  Result r;
  r.out.assign(static_cast<size_t>(s.B) * s.T * s.C, 0.0f);
  r.dqkv.assign(qkv.size(), 0.0f);
  r.saved.assign(ops.attention_saved_floats(kind, s.B, s.T, s.NH), 0.0f);
  std::vector<float> scratch(ops.attention_scratch_floats(kind, s.B, s.T, s.NH), 0.0f);
  ops.attention_forward(kind, r.out.data(), r.saved.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  ops.attention_backward(kind, r.dqkv.data(), scratch.data(), dout.data(), qkv.data(), r.out.data(),
                         r.saved.data(), s.B, s.T, s.C, s.NH);
  return r;
}

// Same, calling the flash functions directly with chosen tiles.
Result run_flash_tiles(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
                       cpu::FlashTiles tiles) {
  Result r;
  r.out.assign(static_cast<size_t>(s.B) * s.T * s.C, 0.0f);
  r.dqkv.assign(qkv.size(), 0.0f);
  r.saved.assign(static_cast<size_t>(s.B) * s.NH * s.T, 0.0f);
  std::vector<float> dsum(r.saved.size());
  cpu::flash_attention_forward(r.out.data(), r.saved.data(), qkv.data(), s.B, s.T, s.C, s.NH, tiles);
  cpu::flash_attention_backward(r.dqkv.data(), dsum.data(), dout.data(), qkv.data(), r.out.data(),
                                r.saved.data(), s.B, s.T, s.C, s.NH, tiles);
  return r;
}

void expect_close(const Result& naive, const Result& flash, const Shape& s, const char* what) {
  for (size_t i = 0; i < naive.out.size(); i++) {
    ASSERT_NEAR(flash.out[i], naive.out[i], 2e-6f + 1e-5f * std::fabs(naive.out[i])) << what << " out[" << i << "]";
  }
  const char* names[3] = {"dq", "dk", "dv"};
  for (int part = 0; part < 3; part++) {
    const float ref = max_abs_columns(naive.dqkv, 3 * s.C, part * s.C, s.C);
    const float diff = max_diff_columns(flash.dqkv, naive.dqkv, 3 * s.C, part * s.C, s.C);
    // With T = 1 each softmax has one entry, so dq and dk are exactly 0; dv never is.
    if (s.T > 1 || part == 2) EXPECT_GT(ref, 0.0f) << what << " " << names[part] << " must not be all zero";
    EXPECT_LE(diff, 1e-5f * std::max(ref, 1.0f)) << what << " " << names[part] << ": max |diff| " << diff
                                         << " vs max |naive| " << ref;
    std::printf("%s B%d T%d hs%d %s: max|diff| %.3g, max|naive| %.3g\n", what, s.B, s.T, s.C / s.NH,
                names[part], diff, ref);
  }
}

class FlashVsNaive : public ::testing::TestWithParam<Shape> {};

TEST_P(FlashVsNaive, ForwardAndBackwardAgree) {
  const Shape s = GetParam();
  const auto qkv = random_vector(static_cast<size_t>(s.B) * s.T * 3 * s.C, 1 + s.T, 1.5f);
  const auto dout = random_vector(static_cast<size_t>(s.B) * s.T * s.C, 2 + s.T, 1.0f);
  auto ops = make_cpu_ops();
  const Result naive = run_ops(*ops, AttentionKind::kNaive, s, qkv, dout);
  const Result flash = run_ops(*ops, AttentionKind::kFlash, s, qkv, dout);
  expect_close(naive, flash, s, "tiles 64x64");
  if (s.T <= 256) expect_close(naive, run_flash_tiles(s, qkv, dout, {16, 8}), s, "tiles 16x8");
  if (s.T <= 256) expect_close(naive, run_flash_tiles(s, qkv, dout, {8, 16}), s, "tiles 8x16");
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashVsNaive,
                         ::testing::Values(Shape{2, 1, 128, 2},     // T = 1, hs 64
                                           Shape{2, 100, 128, 2},   // T not a multiple of 64, hs 64
                                           Shape{1, 64, 64, 1},     // exactly one tile
                                           Shape{1, 1024, 64, 1},   // T = 1024, hs 64
                                           Shape{2, 77, 96, 3},     // hs 32
                                           Shape{1, 130, 256, 2},   // hs 128
                                           Shape{1, 45, 48, 2}),    // hs 24, T < one tile
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           const Shape& s = p.param;
                           return "B" + std::to_string(s.B) + "_T" + std::to_string(s.T) + "_hs" +
                                  std::to_string(s.C / s.NH) + "_NH" + std::to_string(s.NH);
                         });

TEST(FlashAttention, LogsumexpMatchesFloat64Reference) {
  const Shape s{1, 70, 64, 2};
  const int hs = s.C / s.NH;
  const auto qkv = random_vector(static_cast<size_t>(s.B) * s.T * 3 * s.C, 5, 2.0f);
  auto ops = make_cpu_ops();
  const Result flash = run_ops(*ops, AttentionKind::kFlash, s, qkv, std::vector<float>(s.T * s.C, 0.5f));
  for (int h = 0; h < s.NH; h++)
    for (int r = 0; r < s.T; r++) {
      std::vector<double> scores;
      for (int c = 0; c <= r; c++) {
        double dot = 0;
        for (int d = 0; d < hs; d++)
          dot += double(qkv[r * 3 * s.C + h * hs + d]) * qkv[c * 3 * s.C + s.C + h * hs + d];
        scores.push_back(dot / std::sqrt(double(hs)));
      }
      const double mx = *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (double x : scores) sum += std::exp(x - mx);
      EXPECT_NEAR(flash.saved[h * s.T + r], mx + std::log(sum), 1e-5) << "head " << h << " row " << r;
    }
}

TEST(FlashAttention, SavedBufferIsLinearInTNaiveIsQuadratic) {
  auto ops = make_cpu_ops();
  EXPECT_EQ(ops->attention_saved_floats(AttentionKind::kNaive, 2, 128, 3), size_t{2} * 3 * 128 * 128);
  EXPECT_EQ(ops->attention_scratch_floats(AttentionKind::kNaive, 2, 128, 3), size_t{2} * 3 * 128 * 128);
  EXPECT_EQ(ops->attention_saved_floats(AttentionKind::kFlash, 2, 128, 3), size_t{2} * 3 * 128);
  EXPECT_EQ(ops->attention_scratch_floats(AttentionKind::kFlash, 2, 128, 3), size_t{2} * 3 * 128);
  EXPECT_STREQ(attention_kind_name(AttentionKind::kFlash), "flash");
  EXPECT_STREQ(attention_kind_name(AttentionKind::kNaive), "naive");
}

}  // namespace
}  // namespace gpt2
