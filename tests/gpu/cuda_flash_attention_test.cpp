// cuda_flash_attention_test.cpp — the CUDA flash attention kernels against the CUDA naive attention
// (materialised att, cuBLASLt GEMMs) and against the CPU flash reference, forward and backward (dq,
// dk, dv): the scalar kernels (kernels/flash_attention.cu) in fp32, and the tensor-core kernels
// (kernels/flash_attention_tc.cu) in bf16 against the scalar bf16 kernels and the CPU. Label `gpu`:
// skips itself without a device.
//
// fp32 shapes: T in {64, 1024, 4096} with head size 64 (GPT-2's), T = 1 and T = 100 (not a multiple
// of any tile), head sizes 32 and 128 at T = 200. Tolerances (fp32 everywhere; only the order of the
// sums differs, and exp/log are the device's): output |flash - naive| <= 1e-5 + 1e-4 |naive|;
// each of dq, dk, dv: max |flash - naive| <= 1e-4 * max(1, max |naive|) (T = 4096: 2e-4, the sums
// are 4x longer). The CPU test of the same algorithm measured ~1e-6 relative (tests/trainer).
//
// bf16 tensor-core shapes: head size 64, T in {1, 64, 100, 1024, 4096}. Inputs are bf16 (the CPU
// reads the same rounded values); the kernels round P and dS to bf16 before their second products
// (relative error 2^-9 each) and every output to bf16 (2^-9 again): output |tc - want| <= 1e-2 +
// 1e-2 |want|; each gradient max |tc - want| <= 2e-2 * max(1, max |want|) (T = 4096: 3e-2), where
// want is the CPU (fp32 on the bf16 inputs) or the scalar bf16 kernels; lse (fp32 in both kernels)
// within 1e-4 + 1e-4 |lse| of the scalar kernel's; two runs are bitwise equal (no atomics). The CPU
// emulation of these kernels (tests/trainer/mma_layout_test.cpp), given these normal(0, 1) inputs,
// measured at most 7.4e-3 on out and 1.4e-2 on gradients of magnitude 5.2.
//
// bf16 naive (tensor-core GEMMs, bf16 att): against the CPU naive on the same bf16 inputs, T in
// {64, 100, 1024, 4096}, the same tolerances. A CPU simulation of its roundings (scores, att, y,
// datt, dpre and the gradients rounded to bf16) measured out within 4.1e-3 (1 + |want|) and
// gradients within 1.8e-2 of magnitude 3.5, T in {64, 100, 1024}.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_backend.h"

namespace gpt2 {
namespace {

using gputest::all_close;
using gputest::Buffer;
using gputest::random_floats;

struct Shape {
  int B, T, C, NH;
};

struct Outputs {
  std::vector<float> out, dqkv;
};

Outputs run(Ops& ops, AttentionKind kind, const Shape& s, const std::vector<float>& qkv_host,
            const std::vector<float>& dout_host) {
  const size_t btc = static_cast<size_t>(s.B) * s.T * s.C;
  Buffer<float> qkv(ops, qkv_host), dout(ops, dout_host);
  Buffer<float> out(ops, random_floats(btc, 7));            // garbage: "=" must overwrite
  Buffer<float> dqkv(ops, random_floats(3 * btc, 8));       // garbage too
  Buffer<float> saved(ops, ops.attention_saved_floats(kind, s.B, s.T, s.NH));
  Buffer<float> scratch(ops, ops.attention_scratch_floats(kind, s.B, s.T, s.NH));
  ops.attention_forward(kind, out.get(), saved.get(), qkv.get(), s.B, s.T, s.C, s.NH);
  ops.attention_backward(kind, dqkv.get(), scratch.get(), dout.get(), qkv.get(), out.get(), saved.get(), s.B,
                         s.T, s.C, s.NH);
  return {out.host(), dqkv.host()};
}

// max |got - want| over the columns [part*C, (part+1)*C) of (rows, 3C), against tol * max(1, max |want|).
::testing::AssertionResult gradient_close(const std::vector<float>& got, const std::vector<float>& want, int C,
                                          int part, double tol) {
  double diff = 0, largest = 0;
  for (size_t row = 0; row * 3 * C < want.size(); row++)
    for (int c = part * C; c < (part + 1) * C; c++) {
      const size_t i = row * 3 * C + c;
      diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
      largest = std::max(largest, std::fabs(double(want[i])));
    }
  if (diff <= tol * std::max(1.0, largest)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |diff| " << diff << " > " << tol << " * max(1, " << largest << ")";
}

void expect_agree(const Outputs& got, const Outputs& want, const Shape& s, double grad_tol) {
  EXPECT_TRUE(all_close(got.out, want.out, 1e-5, 1e-4)) << "out";
  const char* names[3] = {"dq", "dk", "dv"};
  for (int part = 0; part < 3; part++) EXPECT_TRUE(gradient_close(got.dqkv, want.dqkv, s.C, part, grad_tol)) << names[part];
}

class CudaFlashAttention : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override { RS_SKIP_WITHOUT_CUDA(); }
};

TEST_P(CudaFlashAttention, MatchesNaiveOnTheGpuAndFlashOnTheCpu) {
  const Shape s = GetParam();
  ASSERT_TRUE(check_cuda_attention(AttentionKind::kFlash, s.C / s.NH).ok());
  auto made = make_cuda_ops({});
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  std::unique_ptr<Ops> gpu = std::move(made).value();
  const size_t btc = static_cast<size_t>(s.B) * s.T * s.C;
  const auto qkv = random_floats(3 * btc, 1 + s.T);
  const auto dout = random_floats(btc, 2 + s.T);
  const double grad_tol = s.T >= 4096 ? 2e-4 : 1e-4;
  const Outputs naive = run(*gpu, AttentionKind::kNaive, s, qkv, dout);
  const Outputs flash = run(*gpu, AttentionKind::kFlash, s, qkv, dout);
  SCOPED_TRACE(::testing::Message() << "B" << s.B << " T" << s.T << " hs" << s.C / s.NH);
  {
    SCOPED_TRACE("gpu flash vs gpu naive");
    expect_agree(flash, naive, s, grad_tol);
  }
  if (s.T <= 1024) {  // the CPU reference of the same algorithm (tiles differ, the function does not)
    SCOPED_TRACE("gpu flash vs cpu flash");
    auto cpu = make_cpu_ops();
    expect_agree(flash, run(*cpu, AttentionKind::kFlash, s, qkv, dout), s, grad_tol);
  }
  // Flash keeps (B,NH,T) floats per layer where naive keeps (B,NH,T,T).
  EXPECT_EQ(gpu->attention_saved_floats(AttentionKind::kFlash, s.B, s.T, s.NH), size_t(s.B) * s.NH * s.T);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaFlashAttention,
                         ::testing::Values(Shape{2, 64, 256, 4},     // T 64, hs 64
                                           Shape{2, 1024, 128, 2},   // T 1024, hs 64
                                           Shape{1, 4096, 128, 2},   // T 4096, hs 64
                                           Shape{2, 1, 128, 2},      // T 1
                                           Shape{2, 100, 128, 2},    // T not a multiple of a tile
                                           Shape{1, 200, 96, 3},     // hs 32
                                           Shape{1, 200, 256, 2}),   // hs 128
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return "T" + std::to_string(p.param.T) + "_hs" + std::to_string(p.param.C / p.param.NH);
                         });

// --- bf16: the tensor-core kernels ---

struct Bf16Outputs {
  std::vector<float> out, dqkv, lse;
};

// Forward and backward with bf16 activations (qkv and dout rounded to bf16 on the way in).
Bf16Outputs run_bf16(Ops& ops, const Shape& s, const std::vector<float>& qkv_host,
                     const std::vector<float>& dout_host, AttentionKind kind = AttentionKind::kFlash) {
  using gputest::ActBuffer;
  const size_t btc = static_cast<size_t>(s.B) * s.T * s.C;
  ActBuffer qkv(ops, qkv_host, ActType::kBF16), dout(ops, dout_host, ActType::kBF16);
  ActBuffer out(ops, random_floats(btc, 7), ActType::kBF16);       // garbage: "=" must overwrite
  ActBuffer dqkv(ops, random_floats(3 * btc, 8), ActType::kBF16);  // garbage too
  Buffer<float> saved(ops, ops.attention_saved_floats(kind, s.B, s.T, s.NH));
  Buffer<float> scratch(ops, ops.attention_scratch_floats(kind, s.B, s.T, s.NH));
  ops.attention_forward(kind, out.ptr(), saved.get(), qkv.ptr(), s.B, s.T, s.C, s.NH);
  ops.attention_backward(kind, dqkv.ptr(), scratch.get(), dout.ptr(), qkv.ptr(), out.ptr(),
                         saved.get(), s.B, s.T, s.C, s.NH);
  return {out.host(), dqkv.host(), saved.host()};
}

void expect_bf16_agree(const Bf16Outputs& got, const std::vector<float>& want_out,
                       const std::vector<float>& want_dqkv, const Shape& s) {
  const double grad_tol = s.T >= 4096 ? 3e-2 : 2e-2;
  EXPECT_TRUE(all_close(got.out, want_out, 1e-2, 1e-2)) << "out";
  const char* names[3] = {"dq", "dk", "dv"};
  for (int part = 0; part < 3; part++)
    EXPECT_TRUE(gradient_close(got.dqkv, want_dqkv, s.C, part, grad_tol)) << names[part];
}

class CudaFlashAttentionTensorCores : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override { RS_SKIP_WITHOUT_CUDA(); }
};

TEST_P(CudaFlashAttentionTensorCores, MatchesTheScalarKernelsAndTheCpu) {
  const Shape s = GetParam();
  ASSERT_EQ(s.C, 64 * s.NH) << "the tensor-core kernels serve head size 64";
  CudaOpsOptions tensor_cores;
  tensor_cores.precision = CudaPrecision::kBf16;
  CudaOpsOptions scalar = tensor_cores;
  scalar.attention_tensor_cores = false;
  auto made_tc = make_cuda_ops(tensor_cores);
  auto made_scalar = make_cuda_ops(scalar);
  ASSERT_TRUE(made_tc.ok()) << made_tc.status().to_string();
  ASSERT_TRUE(made_scalar.ok()) << made_scalar.status().to_string();
  const size_t btc = static_cast<size_t>(s.B) * s.T * s.C;
  const auto qkv = gputest::round_to_bf16(random_floats(3 * btc, 11 + s.T));
  const auto dout = gputest::round_to_bf16(random_floats(btc, 12 + s.T));
  SCOPED_TRACE(::testing::Message() << "B" << s.B << " T" << s.T << " NH" << s.NH);

  const Bf16Outputs tc = run_bf16(*made_tc.value(), s, qkv, dout);
  const Bf16Outputs reference = run_bf16(*made_scalar.value(), s, qkv, dout);
  {
    SCOPED_TRACE("tensor cores vs scalar kernels, both bf16");
    expect_bf16_agree(tc, reference.out, reference.dqkv, s);
    EXPECT_TRUE(all_close(tc.lse, reference.lse, 1e-4, 1e-4)) << "lse";
  }
  {
    SCOPED_TRACE("tensor cores vs the cpu (fp32 on the same bf16 inputs)");
    auto cpu = make_cpu_ops();
    const Outputs want = run(*cpu, AttentionKind::kFlash, s, qkv, dout);
    expect_bf16_agree(tc, want.out, want.dqkv, s);
  }
  const Bf16Outputs again = run_bf16(*made_tc.value(), s, qkv, dout);
  EXPECT_EQ(again.out, tc.out) << "forward not deterministic";
  EXPECT_EQ(again.dqkv, tc.dqkv) << "backward not deterministic";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaFlashAttentionTensorCores,
                         ::testing::Values(Shape{2, 64, 256, 4},    // T 64: one tile, 4 heads
                                           Shape{2, 1024, 128, 2},  // T 1024: 8 query tiles, 16 key tiles
                                           Shape{1, 4096, 128, 2},  // T 4096
                                           Shape{2, 1, 128, 2},     // T 1: everything past T zero-filled
                                           Shape{1, 100, 192, 3},   // T 100: ragged last tiles
                                           Shape{1, 200, 768, 12}), // d12's 12 heads, T not a tile multiple
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return "T" + std::to_string(p.param.T) + "_NH" + std::to_string(p.param.NH);
                         });

// --- bf16 naive: bf16 heads, tensor-core GEMMs, fused scaled masked softmax ---

class CudaNaiveAttentionBf16 : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override { RS_SKIP_WITHOUT_CUDA(); }
};

TEST_P(CudaNaiveAttentionBf16, MatchesTheCpuNaiveAttention) {
  const Shape s = GetParam();
  CudaOpsOptions options;
  options.precision = CudaPrecision::kBf16;
  auto made = make_cuda_ops(options);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  const size_t btc = static_cast<size_t>(s.B) * s.T * s.C;
  const auto qkv = gputest::round_to_bf16(random_floats(3 * btc, 21 + s.T));
  const auto dout = gputest::round_to_bf16(random_floats(btc, 22 + s.T));
  SCOPED_TRACE(::testing::Message() << "B" << s.B << " T" << s.T << " hs" << s.C / s.NH);
  const Bf16Outputs got = run_bf16(*made.value(), s, qkv, dout, AttentionKind::kNaive);
  auto cpu = make_cpu_ops();
  const Outputs want = run(*cpu, AttentionKind::kNaive, s, qkv, dout);
  // Scores are stored in bf16 before the softmax (llm.c's layout), beside the roundings flash has.
  expect_bf16_agree(got, want.out, want.dqkv, s);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaNaiveAttentionBf16,
                         ::testing::Values(Shape{2, 64, 256, 4},     // T 64, hs 64
                                           Shape{2, 1024, 128, 2},   // T 1024
                                           Shape{1, 4096, 128, 2},   // T 4096
                                           Shape{2, 100, 96, 3}),    // T 100, hs 32
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return "T" + std::to_string(p.param.T) + "_hs" + std::to_string(p.param.C / p.param.NH);
                         });

TEST(CudaFlashAttentionSupport, NamesTheHeadSizesAndTheWayOut) {
  EXPECT_TRUE(check_cuda_attention(AttentionKind::kNaive, 24).ok());
  const rankscope::Status s = check_cuda_attention(AttentionKind::kFlash, 24);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("--attention naive"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace gpt2
