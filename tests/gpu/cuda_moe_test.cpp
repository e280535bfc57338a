// cuda_moe_test.cpp — every CUDA MoE op (trainer/ops/cuda/cuda_moe_ops.h, kernels/moe.cu) and the
// whole MoE layer on the GPU (model/moe_mlp.h: router, capacity drops, aux loss, dispatch, the
// experts' cuBLASLt GEMM chain, combine, backward) against the CPU oracle.
// Label `gpu`: each test skips itself when no CUDA device is usable.
//
// Ops: top-1 and top-2. The MoE kernels compute in fp32 (the model keeps MoE activations fp32 under
// --precision bf16), so their tolerances are fp32 ones: index outputs (chosen experts, gathered and
// scattered rows) exactly equal; probabilities, gates and the combine 1e-6; router gradients 1e-5.
// Layer: fp32 GEMMs and bf16 GEMM operands (CudaPrecision::kBf16), top-1/top-2, dropless and with
// capacity drops, the aux loss on, grouped and token expert loops. Inputs and weights hold bf16
// values exactly, so the router's logits agree to fp32 rounding in both modes and the two backends
// route every slot alike (asserted: counts, drops and received rows are equal). fp32: outputs and
// gradients within 1e-4 of each tensor's largest magnitude; bf16: 2e-2 (operands rounded to 8 bits of
// mantissa after GELU; a wrong row offset or expert moves values by whole magnitudes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../trainer/moe_param_view.h"
#include "gpu_test_util.h"
#include "model/moe_mlp.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cuda/cuda_moe_backend.h"

namespace gpt2 {
namespace {

// The largest |x|, so tolerances scale with each tensor.
double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

using gputest::all_close;
using gputest::Buffer;
using gputest::random_floats;
using gputest::round_to_bf16;

class CudaMoeOpsTest : public gputest::CpuAndGpu<::testing::TestWithParam<int>> {
 public:
  void SetUp() override {
    gputest::CpuAndGpu<::testing::TestWithParam<int>>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    cpu_moe_ = make_cpu_moe_ops();
    auto g = make_cuda_moe_ops(*gpu_);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    gpu_moe_ = std::move(g).value();
  }

 protected:
  static constexpr int kN = 257, kE = 8, kC = 96;
  int K() const { return GetParam(); }
  // Router logits with every row's values at least 0.25 apart (a per-row permutation of a ladder,
  // plus noise below 0.01): the top-K choice cannot depend on the last bit of a softmax.
  static std::vector<float> ladder_logits(uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> l(size_t(kN) * kE);
    std::vector<int> order(kE);
    std::uniform_real_distribution<float> noise(-0.005f, 0.005f);
    for (int n = 0; n < kN; n++) {
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      for (int e = 0; e < kE; e++) l[size_t(n) * kE + e] = 0.25f * float(order[e]) - 1.0f + noise(rng);
    }
    return l;
  }
  // row_of_slot of a routing with drops: every 5th slot dropped, the rest a permutation of 0..R-1.
  static std::vector<int32_t> slots_with_drops(int N, int K, int* rows_out, uint32_t seed) {
    std::vector<int32_t> ros(size_t(N) * K, -1);
    int R = 0;
    for (size_t s = 0; s < ros.size(); s++)
      if (s % 5 != 3) ros[s] = R++;
    std::vector<int32_t> perm(static_cast<size_t>(R));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
    for (int32_t& r : ros)
      if (r >= 0) r = perm[size_t(r)];
    *rows_out = R;
    return ros;
  }

  std::unique_ptr<MoeOps> cpu_moe_, gpu_moe_;
};

TEST_P(CudaMoeOpsTest, RouterForwardChoosesTheSameExpertsAndGates) {
  const auto logits = ladder_logits(11);
  std::vector<float> bias(kE, 0.0f);
  bias[3] = 0.6f;  // the route-skew fault's shape: one expert made hotter
  for (const float* b : {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
    std::vector<float> probs(size_t(kN) * kE), gate(size_t(kN) * K());
    std::vector<int32_t> expert(size_t(kN) * K());
    cpu_moe_->router_forward(probs.data(), expert.data(), gate.data(), logits.data(), b, kN, kE, K());
    Buffer<float> dl(*gpu_, logits), dp(*gpu_, probs.size()), dg(*gpu_, gate.size());
    Buffer<int32_t> de(*gpu_, expert.size());
    Buffer<float> db(*gpu_, bias);
    gpu_moe_->router_forward(dp.get(), de.get(), dg.get(), dl.get(), b ? db.get() : nullptr, kN, kE, K());
    EXPECT_EQ(de.host(), expert) << (b ? "with" : "without") << " a logit bias";
    EXPECT_TRUE(all_close(dp.host(), probs, 1e-6, 1e-5));
    EXPECT_TRUE(all_close(dg.host(), gate, 1e-6, 1e-5));
  }
}

TEST_P(CudaMoeOpsTest, RouterBackwardWithTheAuxLossGradient) {
  const auto logits = ladder_logits(12);
  std::vector<float> probs(size_t(kN) * kE), gate(size_t(kN) * K()), dlogits(size_t(kN) * kE);
  std::vector<int32_t> expert(size_t(kN) * K());
  cpu_moe_->router_forward(probs.data(), expert.data(), gate.data(), logits.data(), nullptr, kN, kE, K());
  const auto dgate = random_floats(gate.size(), 13, 0.5f);
  const auto aux = random_floats(kE, 14, 0.1f);
  for (const float* a : {static_cast<const float*>(nullptr), static_cast<const float*>(aux.data())}) {
    cpu_moe_->router_backward(dlogits.data(), probs.data(), expert.data(), gate.data(), dgate.data(), a, kN, kE,
                              K());
    Buffer<float> dp(*gpu_, probs), dg(*gpu_, gate), ddg(*gpu_, dgate), da(*gpu_, aux), dd(*gpu_, dlogits.size());
    Buffer<int32_t> de(*gpu_, expert);
    gpu_moe_->router_backward(dd.get(), dp.get(), de.get(), dg.get(), ddg.get(), a ? da.get() : nullptr, kN, kE,
                              K());
    EXPECT_TRUE(all_close(dd.host(), dlogits, 1e-5, 1e-4)) << (a ? "with" : "without") << " aux";
  }
}

TEST_P(CudaMoeOpsTest, ProbsColumnSumOfTheAuxLoss) {
  const auto logits = ladder_logits(15);
  std::vector<float> probs(size_t(kN) * kE), gate(size_t(kN) * K()), sum(kE);
  std::vector<int32_t> expert(size_t(kN) * K());
  cpu_moe_->router_forward(probs.data(), expert.data(), gate.data(), logits.data(), nullptr, kN, kE, K());
  cpu_moe_->probs_column_sum(sum.data(), probs.data(), kN, kE);
  Buffer<float> dp(*gpu_, probs), ds(*gpu_, size_t(kE));
  gpu_moe_->probs_column_sum(ds.get(), dp.get(), kN, kE);
  EXPECT_TRUE(all_close(ds.host(), sum, 1e-5, 1e-6));
  EXPECT_NEAR(std::accumulate(sum.begin(), sum.end(), 0.0), double(kN), 1e-3) << "each row sums to 1";
}

TEST_P(CudaMoeOpsTest, SlotAndRowPermutationsAreExact) {
  int R = 0;
  const auto ros = slots_with_drops(kN, K(), &R, 16);
  std::vector<int32_t> token_of_row(static_cast<size_t>(R));
  for (size_t s = 0; s < ros.size(); s++)
    if (ros[s] >= 0) token_of_row[size_t(ros[s])] = int32_t(s / size_t(K()));
  const auto inp = random_floats(size_t(kN) * kC, 17);
  // slot order: rows gathered from their tokens
  std::vector<float> rows(size_t(R) * kC);
  cpu_moe_->gather_rows(rows.data(), inp.data(), token_of_row.data(), R, kC);
  Buffer<float> di(*gpu_, inp), dr(*gpu_, rows.size());
  Buffer<int32_t> dt(*gpu_, token_of_row);
  gpu_moe_->gather_rows(dr.get(), di.get(), dt.get(), R, kC);
  EXPECT_EQ(dr.host(), rows);
  // row order: the chunk sort (a permutation) and back
  std::vector<int32_t> perm(static_cast<size_t>(R));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(18));
  std::vector<float> scattered(rows.size());
  cpu_moe_->scatter_rows(scattered.data(), rows.data(), perm.data(), R, kC);
  Buffer<int32_t> dperm(*gpu_, perm);
  Buffer<float> ds(*gpu_, rows.size()), dback(*gpu_, rows.size());
  gpu_moe_->scatter_rows(ds.get(), dr.get(), dperm.get(), R, kC);
  EXPECT_EQ(ds.host(), scattered);
  gpu_moe_->gather_rows(dback.get(), ds.get(), dperm.get(), R, kC);
  EXPECT_EQ(dback.host(), rows);
  // slot backward: dinp += the rows of each token's kept slots (dropped ones add nothing)
  const auto drows = random_floats(rows.size(), 19);
  auto dinp = random_floats(inp.size(), 20);  // += onto what is there
  Buffer<float> ddinp(*gpu_, dinp), ddrows(*gpu_, drows);
  Buffer<int32_t> dros(*gpu_, ros);
  cpu_moe_->slot_rows_backward(dinp.data(), drows.data(), ros.data(), kN, K(), kC);
  gpu_moe_->slot_rows_backward(ddinp.get(), ddrows.get(), dros.get(), kN, K(), kC);
  EXPECT_TRUE(all_close(ddinp.host(), dinp, 1e-6, 1e-6));
}

TEST_P(CudaMoeOpsTest, CombineAndItsBackwardWithCapacityDrops) {
  int R = 0;
  const auto ros = slots_with_drops(kN, K(), &R, 21);
  const auto rows = random_floats(size_t(R) * kC, 22);
  const auto gate = random_floats(size_t(kN) * K(), 23, 0.5f);
  const auto dout = random_floats(size_t(kN) * kC, 24);
  std::vector<float> out(size_t(kN) * kC), drows(rows.size(), 0.0f), dgate(gate.size());
  cpu_moe_->combine_forward(out.data(), rows.data(), gate.data(), ros.data(), kN, K(), kC);
  cpu_moe_->combine_backward(drows.data(), dgate.data(), dout.data(), rows.data(), gate.data(), ros.data(), kN, K(),
                             kC);
  Buffer<float> dr(*gpu_, rows), dg(*gpu_, gate), ddo(*gpu_, dout), dout_buf(*gpu_, out.size());
  Buffer<float> ddr(*gpu_, std::vector<float>(rows.size(), 0.0f)), ddg(*gpu_, gate.size());
  Buffer<int32_t> dros(*gpu_, ros);
  gpu_moe_->combine_forward(dout_buf.get(), dr.get(), dg.get(), dros.get(), kN, K(), kC);
  gpu_moe_->combine_backward(ddr.get(), ddg.get(), ddo.get(), dr.get(), dg.get(), dros.get(), kN, K(), kC);
  EXPECT_TRUE(all_close(dout_buf.host(), out, 1e-6, 1e-5));
  EXPECT_TRUE(all_close(ddr.host(), drows, 1e-6, 1e-5));
  EXPECT_TRUE(all_close(ddg.host(), dgate, 1e-4, 1e-4)) << "a dot product over C";
  const auto got_dgate = ddg.host();
  for (size_t s = 0; s < ros.size(); s++)
    if (ros[s] < 0) {
      EXPECT_EQ(got_dgate[s], 0.0f) << "a dropped slot's gate gets no gradient";
    }
}

INSTANTIATE_TEST_SUITE_P(TopK, CudaMoeOpsTest, ::testing::Values(1, 2),
                         [](const auto& info) { return "top" + std::to_string(info.param); });

// --- the whole layer ---

struct LayerCase {
  int top_k;
  float capacity;
  ExpertLoop loop;
  CudaPrecision precision;
};

std::string case_name(const LayerCase& c) {
  return "top" + std::to_string(c.top_k) + (c.capacity > 0 ? "_capacity" : "_dropless") +
         (c.loop == ExpertLoop::kToken ? "_token" : "_grouped") +
         (c.precision == CudaPrecision::kBf16 ? "_bf16" : "_fp32");
}

constexpr int kLN = 96, kLC = 64, kLE = 4, kLH = 4 * kLC;
size_t expert_floats() { return testing::moe_expert_floats(kLC); }
size_t layer_floats() { return testing::moe_layer_floats(kLE, kLC); }
template <class F>
MoeTensors<F> layer_view(F* base) {
  return testing::moe_view<F>(base, kLE, kLC, 0, kLE);
}

struct LayerRun {
  MoeStats stats;
  std::vector<float> out, dinp, grads;
};

// One forward + backward at EP=1 on `ops` (weights, input and dout copied in; dinp starts at 0).
LayerRun run_layer(Ops& ops, MoeOps& mops, const LayerCase& c, const std::vector<float>& params,
                   const std::vector<float>& x, const std::vector<float>& dout) {
  LayerRun r;
  MoeLayerConfig cfg{kLE, c.top_k, c.capacity, 0.01f, c.loop};
  MoeMlp layer(cfg, moe::ExpertLayout::make(kLE, 1, 0).value(), ops, mops, nullptr, kLN, kLC, "block0");
  Buffer<float> p(ops, params), g(ops, std::vector<float>(params.size(), 0.0f)), dx(ops, x), ddout(ops, dout);
  Buffer<float> out(ops, x.size()), dinp(ops, std::vector<float>(x.size(), 0.0f));
  const MoeWeights w = layer_view<const float>(p.get());
  MoeGrads grads = layer_view<float>(g.get());
  auto stats = layer.forward(out.get(), dx.get(), w, nullptr, nullptr);
  EXPECT_TRUE(stats.ok()) << stats.status().to_string();
  if (!stats.ok()) return r;
  r.stats = *stats;
  EXPECT_TRUE(layer.backward(dinp.get(), ddout.get(), dx.get(), w, grads, 1.0f, nullptr).ok());
  r.out = out.host();
  r.dinp = dinp.host();
  r.grads = g.host();
  return r;
}

class CudaMoeLayerTest : public ::testing::TestWithParam<LayerCase> {};

TEST_P(CudaMoeLayerTest, MatchesTheCpuOracle) {
  RS_SKIP_WITHOUT_CUDA();
  const LayerCase c = GetParam();
  auto gpu = make_cuda_ops({.precision = c.precision});
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  auto gpu_moe = make_cuda_moe_ops(**gpu);
  ASSERT_TRUE(gpu_moe.ok()) << gpu_moe.status().to_string();
  auto cpu = make_cpu_ops();
  auto cpu_moe = make_cpu_moe_ops();
  // Router weights larger than the experts' so logits spread (no near-ties in top-k).
  auto params = round_to_bf16(random_floats(layer_floats(), 31, 0.05f));
  const auto router = round_to_bf16(random_floats(size_t(kLE) * kLC, 32, 0.5f));
  std::copy(router.begin(), router.end(), params.begin());
  const auto x = round_to_bf16(random_floats(size_t(kLN) * kLC, 33));
  const auto dout = round_to_bf16(random_floats(size_t(kLN) * kLC, 34, 0.1f));
  const LayerRun want = run_layer(*cpu, *cpu_moe, c, params, x, dout);
  const LayerRun got = run_layer(**gpu, **gpu_moe, c, params, x, dout);
  ASSERT_FALSE(want.out.empty());
  ASSERT_FALSE(got.out.empty());
  EXPECT_EQ(got.stats.routed, want.stats.routed) << "the backends routed differently";
  EXPECT_EQ(got.stats.dropped, want.stats.dropped);
  EXPECT_EQ(got.stats.received, want.stats.received);
  if (c.capacity > 0) {
    EXPECT_GT(want.stats.dropped, 0) << "the case wants capacity drops";
  }
  EXPECT_NEAR(got.stats.aux_loss, want.stats.aux_loss, 1e-5 + 1e-4 * std::fabs(want.stats.aux_loss));
  const double rel = c.precision == CudaPrecision::kBf16 ? 2e-2 : 1e-4;
  EXPECT_TRUE(all_close(got.out, want.out, rel * max_abs(want.out), 0.0)) << "out";
  EXPECT_TRUE(all_close(got.dinp, want.dinp, rel * max_abs(want.dinp), 0.0)) << "dinp";
  // Router and each expert's tensors, each against its own scale.
  auto slice = [](const std::vector<float>& v, size_t at, size_t n) {
    return std::vector<float>(v.begin() + long(at), v.begin() + long(at + n));
  };
  const size_t router_n = size_t(kLE) * kLC;
  const auto want_router = slice(want.grads, 0, router_n);
  EXPECT_TRUE(all_close(slice(got.grads, 0, router_n), want_router, rel * max_abs(want_router), 0.0)) << "router";
  for (int e = 0; e < kLE; e++) {
    const size_t at = router_n + size_t(e) * expert_floats();
    const auto we = slice(want.grads, at, expert_floats());
    EXPECT_TRUE(all_close(slice(got.grads, at, expert_floats()), we, rel * max_abs(we) + 1e-7, 0.0))
        << "expert " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaMoeLayerTest,
    ::testing::Values(LayerCase{1, 0.0f, ExpertLoop::kGrouped, CudaPrecision::kFp32},
                      LayerCase{2, 0.0f, ExpertLoop::kGrouped, CudaPrecision::kFp32},
                      LayerCase{1, 1.0f, ExpertLoop::kGrouped, CudaPrecision::kFp32},
                      LayerCase{2, 0.8f, ExpertLoop::kGrouped, CudaPrecision::kFp32},
                      LayerCase{2, 0.0f, ExpertLoop::kToken, CudaPrecision::kFp32},
                      LayerCase{1, 0.0f, ExpertLoop::kGrouped, CudaPrecision::kBf16},
                      LayerCase{2, 0.0f, ExpertLoop::kGrouped, CudaPrecision::kBf16},
                      LayerCase{2, 0.8f, ExpertLoop::kGrouped, CudaPrecision::kBf16},
                      LayerCase{2, 0.0f, ExpertLoop::kToken, CudaPrecision::kBf16}),
    [](const auto& info) { return case_name(info.param); });

TEST(CudaMoeBackend, RefusesOpsThatAreNotCuda) {
  auto cpu = make_cpu_ops();
  auto m = make_cuda_moe_ops(*cpu);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("not cuda"), std::string::npos) << m.status().to_string();
}

}  // namespace
}  // namespace gpt2
