// cuda_classifier_test.cpp — the fused vocab-parallel classifier of the CUDA backend
// (crossentropy_partials -> gather -> crossentropy_combine -> crossentropy_loss_backward_inplace)
// against the unfused CUDA ops (logits_row_max -> max -> softmax_stats -> sum ->
// crossentropy_losses, crossentropy_backward_inplace) and against the CPU oracle's fused ops, with
// logits in fp32 and bf16, at GPT-2's real vocabulary (V = 50257 padded to 50304) and a small odd
// one (V = 37 of 128), TP = 1 and TP = 2 simulated in one process (contiguous and strided shards),
// padding columns holding NaN so reading one shows. Label `gpu`: every test skips without a device.
//
// Tolerances (|got - want| <= atol + rtol * |want|; dloss = 0.25):
//   losses, fp32 or bf16 logits (fp32 statistics; other summation order and device expf, 2 ulp):
//     rtol 1e-5, as cuda_ops_test.cpp's losses.
//   dlogits fp32 (p * dloss with p <= 1; a few ulps of p from the sum's order): atol 1e-6 * dloss,
//     rtol 1e-5.
//   dlogits bf16 against fp32 CPU (the CPU oracle reads the same bf16-rounded logits, widened): the
//     GPU rounds the fp32 value once to 8 significant bits: at most half an ulp, 2^-8 relative, plus
//     the fp32 difference above: rtol 2^-7. Between two GPU bf16 paths whose fp32 values differ by
//     ulps a rounding may fall either side: one bf16 ulp, 2^-7 relative at most: rtol 2^-6.
//   padding columns: exactly 0. Reruns: bitwise equal (no atomics).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
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
using gputest::random_ids;

constexpr float kDloss = 0.25f;

struct Case {
  int V, Vp, tp, N;
  bool strided;
};

VocabShardMap shard_of(const Case& c, int rank) { return {c.strided, c.tp, rank, c.Vp / c.tp, c.V}; }

// Per-rank logits with NaN in padding columns; bf16-exact when `type` is bf16, so the CPU oracle
// (fp32) and the GPU read the same values.
std::vector<std::vector<float>> make_logits(const Case& c, ActType type, uint32_t seed) {
  std::vector<std::vector<float>> out;
  for (int r = 0; r < c.tp; r++) {
    const VocabShardMap s = shard_of(c, r);
    std::vector<float> l = random_floats(static_cast<size_t>(c.N) * s.local_rows, seed + r, 3.0f);
    for (size_t i = 0; i < l.size(); i++) {
      if (s.global_id(static_cast<int>(i % s.local_rows)) >= c.V) l[i] = std::numeric_limits<float>::quiet_NaN();
      else if (type == ActType::kBF16) l[i] = bf16_to_float(float_to_bf16(l[i]));
    }
    out.push_back(std::move(l));
  }
  return out;
}

struct Outcome {
  std::vector<float> losses;                  // (N)
  std::vector<std::vector<float>> dlogits;    // per rank (N, Vl), widened
};

// The fused path on `ops` (the gather done on the host, as all_gather would lay it out).
Outcome run_fused(Ops& ops, const Case& c, const std::vector<std::vector<float>>& logits, ActType type,
                  const std::vector<int>& targets) {
  const int N = c.N;
  const size_t n3 = 3 * static_cast<size_t>(N);
  Buffer<int> tg(ops, targets);
  std::vector<std::unique_ptr<gputest::ActBuffer>> dl;
  std::vector<float> gathered;
  for (int r = 0; r < c.tp; r++) {
    dl.push_back(std::make_unique<gputest::ActBuffer>(ops, logits[r], type));
    Buffer<float> part(ops, n3);
    ops.crossentropy_partials(part.get(), dl[r]->ptr(), tg.get(), N, shard_of(c, r));
    const std::vector<float> h = part.host();
    gathered.insert(gathered.end(), h.begin(), h.end());
  }
  Buffer<float> g(ops, gathered), row_max(ops, N), stats(ops, 2 * static_cast<size_t>(N)), losses(ops, N);
  ops.crossentropy_combine(row_max.get(), stats.get(), g.get(), c.tp, N);
  Outcome out;
  for (int r = 0; r < c.tp; r++) {
    ops.crossentropy_loss_backward_inplace(losses.get(), dl[r]->ptr(), row_max.get(), stats.get(), tg.get(), kDloss,
                                           N, shard_of(c, r));
    out.dlogits.push_back(dl[r]->host());
  }
  out.losses = losses.host();
  return out;
}

// The unfused four-op path on `ops` (the all-reduces done on the host).
Outcome run_unfused(Ops& ops, const Case& c, const std::vector<std::vector<float>>& logits, ActType type,
                    const std::vector<int>& targets) {
  const int N = c.N;
  Buffer<int> tg(ops, targets);
  std::vector<std::unique_ptr<gputest::ActBuffer>> dl;
  std::vector<float> mx(N, -INFINITY), st(2 * static_cast<size_t>(N), 0.0f);
  for (int r = 0; r < c.tp; r++) {
    dl.push_back(std::make_unique<gputest::ActBuffer>(ops, logits[r], type));
    Buffer<float> m(ops, N);
    ops.logits_row_max(m.get(), dl[r]->ptr(), N, shard_of(c, r));
    const std::vector<float> h = m.host();
    for (int n = 0; n < N; n++) mx[n] = std::max(mx[n], h[n]);
  }
  Buffer<float> row_max(ops, mx);
  for (int r = 0; r < c.tp; r++) {
    Buffer<float> s(ops, 2 * static_cast<size_t>(N));
    ops.softmax_stats(s.get(), dl[r]->ptr(), row_max.get(), tg.get(), N, shard_of(c, r));
    const std::vector<float> h = s.host();
    for (size_t i = 0; i < h.size(); i++) st[i] += h[i];
  }
  Buffer<float> stats(ops, st), losses(ops, N);
  ops.crossentropy_losses(losses.get(), stats.get(), row_max.get(), N);
  Outcome out;
  for (int r = 0; r < c.tp; r++) {
    ops.crossentropy_backward_inplace(dl[r]->ptr(), row_max.get(), stats.get(), tg.get(), kDloss, N, shard_of(c, r));
    out.dlogits.push_back(dl[r]->host());
  }
  out.losses = losses.host();
  return out;
}

::testing::AssertionResult same_outcome(const Case& c, const Outcome& got, const Outcome& want, double dlogit_rtol) {
  if (auto r = all_close(got.losses, want.losses, 0.0, 1e-5); !r) return r << " (losses)";
  for (int rank = 0; rank < c.tp; rank++) {
    const VocabShardMap s = shard_of(c, rank);
    for (size_t i = 0; i < got.dlogits[rank].size(); i++) {
      if (s.global_id(static_cast<int>(i % s.local_rows)) >= c.V && got.dlogits[rank][i] != 0.0f) {
        return ::testing::AssertionFailure() << "padding element " << i << " of rank " << rank << " is "
                                             << got.dlogits[rank][i] << ", not 0";
      }
    }
    if (auto r = all_close(got.dlogits[rank], want.dlogits[rank], 1e-6 * kDloss, dlogit_rtol); !r) {
      return r << " (dlogits of rank " << rank << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

class CudaClassifierTest : public gputest::CpuAndGpu<::testing::TestWithParam<Case>> {};

TEST_P(CudaClassifierTest, FusedMatchesUnfusedAndTheCpuInFp32) {
  const Case c = GetParam();
  const auto logits = make_logits(c, ActType::kF32, 11);
  const auto targets = random_ids(c.N, c.V, 12);
  const Outcome fused = run_fused(*gpu_, c, logits, ActType::kF32, targets);
  EXPECT_TRUE(same_outcome(c, fused, run_unfused(*gpu_, c, logits, ActType::kF32, targets), 1e-5)) << "gpu fused vs gpu unfused";
  EXPECT_TRUE(same_outcome(c, fused, run_fused(*cpu_, c, logits, ActType::kF32, targets), 1e-5)) << "gpu fused vs cpu fused";
  EXPECT_TRUE(same_outcome(c, run_unfused(*gpu_, c, logits, ActType::kF32, targets),
                           run_unfused(*cpu_, c, logits, ActType::kF32, targets), 1e-5))
      << "gpu unfused vs cpu unfused";
  const Outcome again = run_fused(*gpu_, c, logits, ActType::kF32, targets);
  EXPECT_EQ(again.losses, fused.losses) << "rerun not bitwise equal";
  EXPECT_EQ(again.dlogits, fused.dlogits) << "rerun not bitwise equal";
}

TEST_P(CudaClassifierTest, FusedMatchesUnfusedAndTheCpuInBf16) {
  const Case c = GetParam();
  const auto logits = make_logits(c, ActType::kBF16, 21);  // bf16-exact values
  const auto targets = random_ids(c.N, c.V, 22);
  const Outcome fused = run_fused(*gpu_, c, logits, ActType::kBF16, targets);
  const Outcome cpu = run_fused(*cpu_, c, logits, ActType::kF32, targets);
  EXPECT_TRUE(same_outcome(c, fused, run_unfused(*gpu_, c, logits, ActType::kBF16, targets), 1.0 / 64))
      << "gpu bf16 fused vs gpu bf16 unfused";
  EXPECT_TRUE(same_outcome(c, fused, cpu, 1.0 / 128)) << "gpu bf16 fused vs cpu fp32 fused";
  EXPECT_TRUE(same_outcome(c, run_unfused(*gpu_, c, logits, ActType::kBF16, targets), cpu, 1.0 / 128))
      << "gpu bf16 unfused vs cpu fp32 fused";
  const Outcome again = run_fused(*gpu_, c, logits, ActType::kBF16, targets);
  EXPECT_EQ(again.dlogits, fused.dlogits) << "rerun not bitwise equal";
}

INSTANTIATE_TEST_SUITE_P(
    Vocabularies, CudaClassifierTest,
    ::testing::Values(Case{50257, 50304, 1, 6, false}, Case{50257, 50304, 2, 6, false}, Case{50257, 50304, 2, 6, true},
                      Case{37, 128, 1, 9, false}, Case{37, 128, 2, 9, true},
                      // contiguous V = 37 of 128 at TP=2: rank 1 owns no real column
                      Case{37, 128, 2, 9, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return "V" + std::to_string(c.V) + "_tp" + std::to_string(c.tp) + (c.strided ? "_strided" : "_contiguous");
    });

}  // namespace
}  // namespace gpt2
