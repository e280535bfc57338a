// cuda_weight_mirror_test.cpp — the bf16 copy of the weights the CUDA backend refreshes once after
// each AdamW update (cuda_ops.h WeightMirror) instead of casting a weight on every bf16 GEMM call.
// Checks: a GEMM that reads the mirror gives bit for bit what the per-call cast gave; after AdamW
// moves the weights the GEMM sees the new ones; a copy into the weights (init, checkpoint load)
// makes the mirror stale, so the next GEMM casts the new weights again, never the old mirror.
// Label `gpu`: skips without a device. Tolerances: bf16 operands, fp32 accumulation over K=64,
// fp32 output: vs the CPU on the same bf16-rounded numbers, 1e-5 absolute + 1e-5 relative.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_backend.h"

namespace gpt2 {
namespace {

using gputest::all_close;
using gputest::Buffer;
using gputest::random_floats;
using gputest::round_to_bf16;

constexpr int kN = 32, kC = 64, kOC = 128;
constexpr size_t kWeights = size_t(kOC) * kC;

class CudaWeightMirrorTest : public ::testing::Test {
 public:
  void SetUp() override {
    RS_SKIP_WITHOUT_CUDA();
    CudaOpsOptions o;
    o.precision = CudaPrecision::kBf16;  // fp32 activations and weights, GEMMs in bf16
    auto gpu = make_cuda_ops(o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    gpu_ = std::move(gpu).value();
    cpu_ = make_cpu_ops();
  }
  // out (N,OC) = inp @ weight^T on the GPU (bf16 GEMM), read back.
  std::vector<float> gpu_forward(Buffer<float>& inp, const float* weight) {
    Buffer<float> out(*gpu_, size_t(kN) * kOC);
    gpu_->matmul_forward(out.get(), inp.get(), weight, nullptr, kN, kC, kOC);
    return out.host();
  }
  // The same on the CPU with both operands rounded to bf16 first, as the GPU multiplies them.
  std::vector<float> cpu_forward(const std::vector<float>& inp, const std::vector<float>& weight) {
    std::vector<float> out(size_t(kN) * kOC);
    const auto a = round_to_bf16(inp), w = round_to_bf16(weight);
    cpu_->matmul_forward(out.data(), a.data(), w.data(), nullptr, kN, kC, kOC);
    return out;
  }
  void adamw(float* params, const float* grads, float* m, float* v, float lr, int64_t t) {
    const Ops::AdamWSegment segment{0, kWeights, true};
    gpu_->adamw_update_segments(params, grads, m, v, &segment, 1, lr, 0.9f, 0.95f, 1e-8f, 0.0f, t);
  }

 protected:
  std::unique_ptr<Ops> cpu_, gpu_;
};

TEST_F(CudaWeightMirrorTest, MirrorGivesWhatThePerCallCastGaveAndFollowsAdamW) {
  const auto inp_h = random_floats(size_t(kN) * kC, 1), w_h = random_floats(kWeights, 2, 0.125f);
  Buffer<float> inp(*gpu_, inp_h), params(*gpu_, w_h), grads(*gpu_, random_floats(kWeights, 3)),
      m(*gpu_, std::vector<float>(kWeights)), v(*gpu_, std::vector<float>(kWeights));
  const auto per_call = gpu_forward(inp, params.get());  // no update yet: cast per call
  EXPECT_TRUE(all_close(per_call, cpu_forward(inp_h, w_h), 1e-5, 1e-5)) << "per-call cast vs CPU";

  adamw(params.get(), grads.get(), m.get(), v.get(), 0.0f, 1);  // lr 0: weights unchanged, mirror made
  EXPECT_EQ(gpu_forward(inp, params.get()), per_call) << "the mirror must round exactly as the per-call cast";

  adamw(params.get(), grads.get(), m.get(), v.get(), 1e-2f, 2);  // the weights move
  const auto moved = params.host();
  ASSERT_NE(moved, w_h);
  EXPECT_TRUE(all_close(gpu_forward(inp, params.get()), cpu_forward(inp_h, moved), 1e-5, 1e-5))
      << "after AdamW the GEMM reads the refreshed mirror";
}

TEST_F(CudaWeightMirrorTest, ACopyIntoTheWeightsMakesTheMirrorStale) {
  const auto inp_h = random_floats(size_t(kN) * kC, 4), w_h = random_floats(kWeights, 5, 0.125f);
  Buffer<float> inp(*gpu_, inp_h), params(*gpu_, w_h), grads(*gpu_, std::vector<float>(kWeights)),
      m(*gpu_, std::vector<float>(kWeights)), v(*gpu_, std::vector<float>(kWeights));
  adamw(params.get(), grads.get(), m.get(), v.get(), 0.0f, 1);
  const auto loaded = random_floats(kWeights, 6, 0.125f);  // a checkpoint load
  gpu_->copy_from_host(params.get(), loaded.data(), kWeights * sizeof(float));
  EXPECT_TRUE(all_close(gpu_forward(inp, params.get()), cpu_forward(inp_h, loaded), 1e-5, 1e-5))
      << "copy_from_host";
  adamw(params.get(), grads.get(), m.get(), v.get(), 0.0f, 2);
  gpu_->fill_zero(params.get() + kWeights / 2, kWeights / 2 * sizeof(float));  // half the rows zeroed
  std::vector<float> half = loaded;
  std::fill(half.begin() + kWeights / 2, half.end(), 0.0f);
  EXPECT_TRUE(all_close(gpu_forward(inp, params.get()), cpu_forward(inp_h, half), 1e-5, 1e-5)) << "fill_zero";
}

}  // namespace
}  // namespace gpt2
