// cuda_fused_layernorm_test.cpp — the CUDA residual + LayerNorm forward (kernels/layernorm.cu) against
// the composed ops on the GPU (residual_forward, then layernorm_forward: Ops' default) and against
// the CPU oracle, fp32 and bf16; the LayerNorm backward and the residual/accumulate adds in bf16
// against the CPU in fp32. Label `gpu`: skips itself without a device.
//
// Tolerances and why:
// - fused vs composed on the GPU, either type: bit for bit. Both kernels normalise the row as stored
//   with the same device row function, so only a kernel bug can make them differ.
// - fp32 vs the CPU: residual exact (one fp32 add both ways); ln_out |diff| <= 1e-5 + 1e-5 |want|,
//   mean and rstd 1e-5 relative (the order of the row sums and rsqrtf vs 1/sqrt differ).
// - bf16: bf16 keeps 8 bits of mantissa, so one round-to-nearest costs at most 2^-9 relative (we
//   allow 2^-8). The residual (a + b of bf16 inputs, rounded once) vs the CPU's fp32 sum: 2^-8
//   relative. ln_out vs the CPU LayerNorm of the residual the GPU stored (so only the output's
//   rounding and fp32 order remain): 2^-8 |want| + 1e-5; mean and rstd 1e-5 relative.
// - LayerNorm backward bf16 (inp, dout, dinp bf16; same mean/rstd given to both): dinp is rounded
//   once after dinp += in fp32, 2^-8 |want| + 1e-5 * max(1, max |want|); dweight and dbias are fp32
//   sums of N terms whose order differs: 1e-4 * max(1, max |want|).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "model/activation_ptr.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_backend.h"

namespace gpt2 {
namespace {

using gputest::all_close;
using gputest::Buffer;
using gputest::random_floats;

constexpr double kBf16Rel = 1.0 / 256;  // 2^-8: one bf16 rounding is at most 2^-9 relative

struct Shape {
  int N, C;
};

using gputest::from_bf16;
using gputest::to_bf16;
// Values a bf16 buffer can hold exactly, so the CPU (fp32) sees the very inputs the GPU does.
std::vector<float> bf16_exact(const std::vector<float>& v) { return gputest::round_to_bf16(v); }

::testing::AssertionResult bitwise_equal(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); i++) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

struct Inputs {
  std::vector<float> a, b, weight, bias;
};
Inputs make_inputs(const Shape& s, bool bf16) {
  const size_t nc = static_cast<size_t>(s.N) * s.C;
  Inputs in{random_floats(nc, 1), random_floats(nc, 2, 0.3f), random_floats(s.C, 3, 0.2f), random_floats(s.C, 4, 0.1f)};
  for (float& x : in.a) x += 0.5f;       // rows with a mean far from 0
  for (float& w : in.weight) w += 1.0f;
  if (bf16) {
    in.a = bf16_exact(in.a);
    in.b = bf16_exact(in.b);
  }
  return in;
}

struct Forward {
  std::vector<float> residual, ln, mean, rstd;  // activations as floats (bf16 widened exactly)
};

// Runs the fused op (or, with `composed`, Ops' default: residual_forward + layernorm_forward) on
// `ops` with activations of `type`; outputs start as garbage so "=" must overwrite them.
Forward run_forward(Ops& ops, ActType type, bool composed, const Shape& s, const Inputs& in) {
  const size_t nc = static_cast<size_t>(s.N) * s.C;
  const bool bf16 = type == ActType::kBF16;
  Buffer<float> weight(ops, in.weight), bias(ops, in.bias), mean(ops, random_floats(s.N, 5)),
      rstd(ops, random_floats(s.N, 6));
  Buffer<uint16_t> a16(ops, to_bf16(in.a)), b16(ops, to_bf16(in.b)), res16(ops, to_bf16(random_floats(nc, 7))),
      ln16(ops, to_bf16(random_floats(nc, 8)));
  Buffer<float> a32(ops, in.a), b32(ops, in.b), res32(ops, random_floats(nc, 7)), ln32(ops, random_floats(nc, 8));
  const ActPtr res = bf16 ? ActPtr(res16.get(), type) : ActPtr(res32.get());
  const ActPtr ln = bf16 ? ActPtr(ln16.get(), type) : ActPtr(ln32.get());
  const ConstActPtr a = bf16 ? ConstActPtr(a16.get(), type) : ConstActPtr(a32.get());
  const ConstActPtr b = bf16 ? ConstActPtr(b16.get(), type) : ConstActPtr(b32.get());
  if (composed) {
    ops.Ops::residual_layernorm_forward(res, ln, mean.get(), rstd.get(), a, b, weight.get(), bias.get(), s.N, s.C);
  } else {
    ops.residual_layernorm_forward(res, ln, mean.get(), rstd.get(), a, b, weight.get(), bias.get(), s.N, s.C);
  }
  Forward f{bf16 ? from_bf16(res16.host()) : res32.host(), bf16 ? from_bf16(ln16.host()) : ln32.host(), mean.host(),
            rstd.host()};
  return f;
}

void expect_same_bits(const Forward& fused, const Forward& composed) {
  EXPECT_TRUE(bitwise_equal(fused.residual, composed.residual)) << "residual_out, fused vs composed";
  EXPECT_TRUE(bitwise_equal(fused.ln, composed.ln)) << "ln_out, fused vs composed";
  EXPECT_TRUE(bitwise_equal(fused.mean, composed.mean)) << "mean, fused vs composed";
  EXPECT_TRUE(bitwise_equal(fused.rstd, composed.rstd)) << "rstd, fused vs composed";
}

class CudaFusedLayerNorm : public gputest::CpuAndGpu<::testing::TestWithParam<Shape>> {};

TEST_P(CudaFusedLayerNorm, Fp32FusedEqualsComposedAndTheCpu) {
  const Shape s = GetParam();
  const Inputs in = make_inputs(s, false);
  const Forward fused = run_forward(*gpu_, ActType::kF32, false, s, in);
  const Forward composed = run_forward(*gpu_, ActType::kF32, true, s, in);
  expect_same_bits(fused, composed);
  const Forward cpu = run_forward(*cpu_, ActType::kF32, false, s, in);
  EXPECT_TRUE(bitwise_equal(fused.residual, cpu.residual)) << "residual_out vs cpu";
  EXPECT_TRUE(all_close(fused.ln, cpu.ln, 1e-5, 1e-5)) << "ln_out vs cpu";
  EXPECT_TRUE(all_close(fused.mean, cpu.mean, 1e-6, 1e-5)) << "mean vs cpu";
  EXPECT_TRUE(all_close(fused.rstd, cpu.rstd, 0, 1e-5)) << "rstd vs cpu";
}

TEST_P(CudaFusedLayerNorm, Bf16FusedEqualsComposedAndTheCpu) {
  const Shape s = GetParam();
  const Inputs in = make_inputs(s, true);
  const Forward fused = run_forward(*gpu_, ActType::kBF16, false, s, in);
  const Forward composed = run_forward(*gpu_, ActType::kBF16, true, s, in);
  expect_same_bits(fused, composed);
  // The residual: the CPU's fp32 sum of the same (bf16-exact) inputs, rounded once on the GPU.
  const Forward cpu = run_forward(*cpu_, ActType::kF32, false, s, in);
  EXPECT_TRUE(all_close(fused.residual, cpu.residual, 0, kBf16Rel)) << "residual_out vs cpu fp32";
  // The LayerNorm of the residual the GPU stored, in fp32 on the CPU.
  const size_t nc = static_cast<size_t>(s.N) * s.C;
  std::vector<float> ln(nc), mean(s.N), rstd(s.N);
  cpu_->layernorm_forward(ln.data(), mean.data(), rstd.data(), fused.residual.data(), in.weight.data(),
                          in.bias.data(), s.N, s.C);
  EXPECT_TRUE(all_close(fused.ln, ln, 1e-5, kBf16Rel)) << "ln_out vs cpu fp32 of the stored residual";
  EXPECT_TRUE(all_close(fused.mean, mean, 1e-6, 1e-5)) << "mean vs cpu";
  EXPECT_TRUE(all_close(fused.rstd, rstd, 0, 1e-5)) << "rstd vs cpu";
}

TEST_P(CudaFusedLayerNorm, Bf16LayerNormBackwardMatchesTheCpuInFp32) {
  const Shape s = GetParam();
  const size_t nc = static_cast<size_t>(s.N) * s.C;
  std::vector<float> inp = random_floats(nc, 11);
  for (float& x : inp) x += 0.5f;
  inp = bf16_exact(inp);
  const std::vector<float> dout = bf16_exact(random_floats(nc, 12));
  const std::vector<float> dinp0 = bf16_exact(random_floats(nc, 13));  // the residual gradient so far
  const std::vector<float> weight = random_floats(s.C, 14, 0.2f), dw0 = random_floats(s.C, 15), db0 = random_floats(s.C, 16);
  std::vector<float> ln(nc), mean(s.N), rstd(s.N), bias(s.C, 0.0f);
  cpu_->layernorm_forward(ln.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), s.N, s.C);

  std::vector<float> want_dinp = dinp0, want_dw = dw0, want_db = db0;
  cpu_->layernorm_backward(want_dinp.data(), want_dw.data(), want_db.data(), dout.data(), inp.data(), weight.data(),
                           mean.data(), rstd.data(), s.N, s.C);

  Buffer<uint16_t> g_inp(*gpu_, to_bf16(inp)), g_dout(*gpu_, to_bf16(dout)), g_dinp(*gpu_, to_bf16(dinp0));
  Buffer<float> g_weight(*gpu_, weight), g_mean(*gpu_, mean), g_rstd(*gpu_, rstd), g_dw(*gpu_, dw0), g_db(*gpu_, db0);
  gpu_->layernorm_backward(ActPtr(g_dinp.get(), ActType::kBF16), g_dw.get(), g_db.get(),
                           ConstActPtr(g_dout.get(), ActType::kBF16), ConstActPtr(g_inp.get(), ActType::kBF16),
                           g_weight.get(), g_mean.get(), g_rstd.get(), s.N, s.C);
  EXPECT_TRUE(all_close(from_bf16(g_dinp.host()), want_dinp, 1e-5 * std::max(1.0, max_abs(want_dinp)), kBf16Rel))
      << "dinp (accumulated into the residual gradient)";
  EXPECT_TRUE(all_close(g_dw.host(), want_dw, 1e-4 * std::max(1.0, max_abs(want_dw)), 0)) << "dweight";
  EXPECT_TRUE(all_close(g_db.host(), want_db, 1e-4 * std::max(1.0, max_abs(want_db)), 0)) << "dbias";
}

// fp32: the same sums in another order (per-warp channel sums, then warps, then chunks): 1e-5.
TEST_P(CudaFusedLayerNorm, Fp32LayerNormBackwardMatchesTheCpu) {
  const Shape s = GetParam();
  const size_t nc = static_cast<size_t>(s.N) * s.C;
  std::vector<float> inp = random_floats(nc, 31);
  for (float& x : inp) x += 0.5f;
  const std::vector<float> dout = random_floats(nc, 32), dinp0 = random_floats(nc, 33);
  const std::vector<float> weight = random_floats(s.C, 34, 0.2f), dw0 = random_floats(s.C, 35), db0 = random_floats(s.C, 36);
  std::vector<float> ln(nc), mean(s.N), rstd(s.N), bias(s.C, 0.0f);
  cpu_->layernorm_forward(ln.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), s.N, s.C);
  std::vector<float> want_dinp = dinp0, want_dw = dw0, want_db = db0;
  cpu_->layernorm_backward(want_dinp.data(), want_dw.data(), want_db.data(), dout.data(), inp.data(), weight.data(),
                           mean.data(), rstd.data(), s.N, s.C);
  Buffer<float> g_inp(*gpu_, inp), g_dout(*gpu_, dout), g_dinp(*gpu_, dinp0), g_weight(*gpu_, weight),
      g_mean(*gpu_, mean), g_rstd(*gpu_, rstd), g_dw(*gpu_, dw0), g_db(*gpu_, db0);
  gpu_->layernorm_backward(g_dinp.get(), g_dw.get(), g_db.get(), g_dout.get(), g_inp.get(), g_weight.get(),
                           g_mean.get(), g_rstd.get(), s.N, s.C);
  EXPECT_TRUE(all_close(g_dinp.host(), want_dinp, 1e-5 * std::max(1.0, max_abs(want_dinp)), 1e-5)) << "dinp";
  EXPECT_TRUE(all_close(g_dw.host(), want_dw, 1e-5 * std::max(1.0, max_abs(want_dw)), 1e-5)) << "dweight";
  EXPECT_TRUE(all_close(g_db.host(), want_db, 1e-5 * std::max(1.0, max_abs(want_db)), 1e-5)) << "dbias";
}

TEST_P(CudaFusedLayerNorm, Bf16ResidualAndAccumulateMatchTheCpu) {
  const Shape s = GetParam();
  const size_t n = static_cast<size_t>(s.N) * s.C;
  const std::vector<float> a = bf16_exact(random_floats(n, 21)), b = bf16_exact(random_floats(n, 22));
  std::vector<float> sum(n);
  cpu_->residual_forward(sum.data(), a.data(), b.data(), n);
  Buffer<uint16_t> ga(*gpu_, to_bf16(a)), gb(*gpu_, to_bf16(b)), gout(*gpu_, n);
  gpu_->residual_forward(ActPtr(gout.get(), ActType::kBF16), ConstActPtr(ga.get(), ActType::kBF16),
                         ConstActPtr(gb.get(), ActType::kBF16), n);
  EXPECT_TRUE(all_close(from_bf16(gout.host()), sum, 0, kBf16Rel)) << "residual_forward";
  gpu_->add_inplace(ActPtr(ga.get(), ActType::kBF16), ConstActPtr(gb.get(), ActType::kBF16), n);
  EXPECT_TRUE(all_close(from_bf16(ga.host()), sum, 0, kBf16Rel)) << "add_inplace";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaFusedLayerNorm,
                         ::testing::Values(Shape{3, 7}, Shape{5, 33}, Shape{64, 768}, Shape{17, 1000},
                                           Shape{300, 1600}, Shape{1000, 768}, Shape{65, 8000}),
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return "N" + std::to_string(p.param.N) + "_C" + std::to_string(p.param.C);
                         });

}  // namespace
}  // namespace gpt2
