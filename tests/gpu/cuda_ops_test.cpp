// cuda_ops_test.cpp — every op of the CUDA backend against the CPU oracle (trainer/ops/cpu) on random
// inputs, plus the determinism the CUDA backend promises (bitwise-equal reruns of the backward
// reductions). Label `gpu`: each test skips itself when no CUDA device is usable.
//
// Tolerances (fp32 GEMM mode; |got - want| <= atol + rtol * |want|):
//   copies, masks, element-wise adds and scalings, row max, target logit: exact (0, 0)
//   GELU, AdamW, losses, softmax statistics:                         1e-6..1e-5, 1e-5
//   GEMM, LayerNorm, attention and every backward (other summation order): 1e-4, 1e-4
//   bf16 GEMM mode against fp32 CPU (operands rounded to 8 bits of mantissa): 0.1, 2e-2
//   double-precision sums: 1e-9 relative
#include <gtest/gtest.h>

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
using gputest::random_ids;

// The same host data in a CPU buffer and a GPU buffer; of(gpu) picks one.
template <class T>
struct Both {
  Both(Ops& cpu, Ops& gpu, const std::vector<T>& host) : c(cpu, host), g(gpu, host) {}
  T* of(bool gpu) { return gpu ? g.get() : c.get(); }
  Buffer<T> c, g;
};

class CudaOpsTest : public gputest::CpuAndGpu<> {
 public:
  Ops& ops(bool gpu) { return gpu ? *gpu_ : *cpu_; }
  template <class T>
  Both<T> both(const std::vector<T>& host) {
    return Both<T>(*cpu_, *gpu_, host);
  }
};

// Shards with padding: V = 1000 real tokens, Vp = 1024.
std::vector<VocabShardMap> test_shards() {
  std::vector<VocabShardMap> shards;
  shards.push_back({false, 1, 0, 1024, 1000});
  for (bool strided : {false, true}) {
    for (int rank : {0, 1}) shards.push_back({strided, 2, rank, 512, 1000});
  }
  return shards;
}

TEST_F(CudaOpsTest, MemoryIsZeroFilledAndCopiesRoundTrip) {
  Buffer<float> buf(*gpu_, 1000);
  EXPECT_TRUE(all_close(buf.host(), std::vector<float>(1000, 0.0f), 0, 0));
  auto x = random_floats(1000, 1);
  Buffer<float> src(*gpu_, x);
  gpu_->copy(buf.get(), src.get(), 1000 * sizeof(float));
  EXPECT_TRUE(all_close(buf.host(), x, 0, 0));
  gpu_->fill_zero(buf.get() + 10, 20 * sizeof(float));
  auto back = buf.host();
  for (int i = 0; i < 1000; i++) EXPECT_EQ(back[i], (i >= 10 && i < 30) ? 0.0f : x[i]) << i;
}

TEST_F(CudaOpsTest, MemoryCountersFollowAllocAndRelease) {
  const CudaMemoryStats before = *cuda_ops_memory(*gpu_);
  void* p = gpu_->alloc(1000);  // rounded up to 1024
  const CudaMemoryStats during = *cuda_ops_memory(*gpu_);
  EXPECT_EQ(during.allocated_bytes, before.allocated_bytes + 1024);
  EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
  gpu_->release(p);
  const CudaMemoryStats after = *cuda_ops_memory(*gpu_);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.peak_allocated_bytes, during.peak_allocated_bytes);
  EXPECT_GT(after.device_used_bytes, 0u);
  EXPECT_FALSE(cuda_ops_memory(*cpu_).ok()) << "the CPU backend has no CUDA memory counters";
}

TEST_F(CudaOpsTest, EmbeddingLookupMasksForeignIdsAndCountsOwned) {
  const int B = 4, T = 16, N = B * T, C = 40, maxT = 32;
  auto ids = random_ids(N, 1000, 2);
  auto wpe_host = random_floats(static_cast<size_t>(maxT) * C, 3);
  for (const VocabShardMap& shard : test_shards()) {
    SCOPED_TRACE(::testing::Message() << "strided=" << shard.strided << " tp=" << shard.tp_size
                                      << " rank=" << shard.tp_rank);
    auto wte = both(random_floats(static_cast<size_t>(shard.local_rows) * C, 4));
    auto id = both(ids);
    auto out = both(random_floats(static_cast<size_t>(N) * C, 5));  // garbage: "=" must overwrite
    auto wpe = both(wpe_host);
    int64_t owned[2];
    for (bool g : {false, true}) {
      owned[g] = ops(g).embedding_lookup(out.of(g), id.of(g), wte.of(g), N, C, shard);
    }
    EXPECT_EQ(owned[1], owned[0]);
    EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 0, 0)) << "lookup";
    for (bool g : {false, true}) ops(g).add_position(out.of(g), wpe.of(g), B, T, C);
    EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 0, 0)) << "position";
  }
}

TEST_F(CudaOpsTest, EmbeddingBackwardMatchesAndIsDeterministic) {
  const int B = 4, T = 32, N = B * T, C = 72, maxT = 64;
  // Half the tokens from a small range: many repeated rows, the case atomics get wrong.
  auto ids = random_ids(N, 1000, 6);
  auto few = random_ids(N / 2, 8, 7);
  for (int i = 0; i < N / 2; i++) ids[2 * i] = few[i] * 3;
  auto dout_host = random_floats(static_cast<size_t>(N) * C, 8);
  for (const VocabShardMap& shard : test_shards()) {
    SCOPED_TRACE(::testing::Message() << "strided=" << shard.strided << " rank=" << shard.tp_rank);
    auto dwte_init = random_floats(static_cast<size_t>(shard.local_rows) * C, 9);
    auto dwpe_init = random_floats(static_cast<size_t>(maxT) * C, 10);
    auto dwte = both(dwte_init);
    auto dwpe = both(dwpe_init);
    auto dout = both(dout_host);
    auto id = both(ids);
    for (bool g : {false, true}) {
      ops(g).embedding_backward(dwte.of(g), dwpe.of(g), dout.of(g), id.of(g), B, T, C, shard);
    }
    EXPECT_TRUE(all_close(dwte.g.host(), dwte.c.host(), 1e-5, 1e-5)) << "dwte";
    EXPECT_TRUE(all_close(dwpe.g.host(), dwpe.c.host(), 1e-5, 1e-5)) << "dwpe";
    // A second run from the same start gives the same bits.
    Buffer<float> again(*gpu_, dwte_init), again_pe(*gpu_, dwpe_init);
    gpu_->embedding_backward(again.get(), again_pe.get(), dout.g.get(), id.g.get(), B, T, C, shard);
    EXPECT_TRUE(all_close(again.host(), dwte.g.host(), 0, 0)) << "rerun differs";
  }
}

TEST_F(CudaOpsTest, LayerNormForwardAndBackward) {
  for (int N : {33, 130}) {
    const int C = 72;
    SCOPED_TRACE(N);
    auto x = random_floats(static_cast<size_t>(N) * C, 11, 3.0f);
    for (float& v : x) v += 1.0f;
    auto inp = both(x);
    auto w = both(random_floats(C, 12));
    auto b = both(random_floats(C, 13));
    auto out = both(std::vector<float>(static_cast<size_t>(N) * C));
    auto mean = both(std::vector<float>(N));
    auto rstd = both(std::vector<float>(N));
    for (bool g : {false, true}) {
      ops(g).layernorm_forward(out.of(g), mean.of(g), rstd.of(g), inp.of(g), w.of(g), b.of(g), N, C);
    }
    EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 1e-4, 1e-4));
    EXPECT_TRUE(all_close(mean.g.host(), mean.c.host(), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(rstd.g.host(), rstd.c.host(), 1e-5, 1e-4));

    auto dout = both(random_floats(static_cast<size_t>(N) * C, 14));
    auto dinp = both(random_floats(static_cast<size_t>(N) * C, 15));  // "+=": start from non-zero
    const auto dw_init = random_floats(C, 16), db_init = random_floats(C, 17);
    auto dw = both(dw_init);
    auto db = both(db_init);
    for (bool g : {false, true}) {
      ops(g).layernorm_backward(dinp.of(g), dw.of(g), db.of(g), dout.of(g), inp.of(g), w.of(g), mean.of(g),
                                rstd.of(g), N, C);
    }
    EXPECT_TRUE(all_close(dinp.g.host(), dinp.c.host(), 1e-4, 1e-4)) << "dinp";
    EXPECT_TRUE(all_close(dw.g.host(), dw.c.host(), 1e-4, 1e-4)) << "dweight";
    EXPECT_TRUE(all_close(db.g.host(), db.c.host(), 1e-4, 1e-4)) << "dbias";
    Buffer<float> dw2(*gpu_, dw_init), db2(*gpu_, db_init), dinp2(*gpu_, static_cast<size_t>(N) * C);
    gpu_->layernorm_backward(dinp2.get(), dw2.get(), db2.get(), dout.g.get(), inp.g.get(), w.g.get(),
                             mean.g.get(), rstd.g.get(), N, C);
    EXPECT_TRUE(all_close(dw2.host(), dw.g.host(), 0, 0)) << "dweight rerun differs";
  }
}

TEST_F(CudaOpsTest, MatmulForwardAndBackward) {
  // Odd sizes: operands that are not 256-byte aligned exercise the GEMM alignment handling.
  for (int N : {37, 130}) {
    const int C = 48, OC = 72;
    SCOPED_TRACE(N);
    auto inp = both(random_floats(static_cast<size_t>(N) * C, 20));
    auto w = both(random_floats(static_cast<size_t>(OC) * C, 21));
    auto bias = both(random_floats(OC, 22));
    auto out = both(random_floats(static_cast<size_t>(N) * OC, 23));
    for (bool with_bias : {true, false}) {
      for (bool g : {false, true}) {
        ops(g).matmul_forward(out.of(g), inp.of(g), w.of(g), with_bias ? bias.of(g) : nullptr, N, C, OC);
      }
      EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 1e-4, 1e-4)) << "bias " << with_bias;
    }
    auto dout = both(random_floats(static_cast<size_t>(N) * OC, 24));
    auto dinp = both(random_floats(static_cast<size_t>(N) * C, 25));  // "=": garbage is overwritten
    auto dw = both(random_floats(static_cast<size_t>(OC) * C, 26));   // "+="
    auto db = both(random_floats(OC, 27));                            // "+="
    for (bool g : {false, true}) {
      ops(g).matmul_backward(dinp.of(g), dw.of(g), db.of(g), dout.of(g), inp.of(g), w.of(g), N, C, OC);
    }
    EXPECT_TRUE(all_close(dinp.g.host(), dinp.c.host(), 1e-4, 1e-4)) << "dinp";
    EXPECT_TRUE(all_close(dw.g.host(), dw.c.host(), 1e-4, 1e-4)) << "dweight";
    EXPECT_TRUE(all_close(db.g.host(), db.c.host(), 1e-4, 1e-4)) << "dbias";
    // Without dinp and dbias: only dweight accumulates again.
    for (bool g : {false, true}) {
      ops(g).matmul_backward(nullptr, dw.of(g), nullptr, dout.of(g), inp.of(g), w.of(g), N, C, OC);
    }
    EXPECT_TRUE(all_close(dw.g.host(), dw.c.host(), 2e-4, 1e-4)) << "dweight, second accumulation";
    EXPECT_TRUE(all_close(db.g.host(), db.c.host(), 1e-4, 1e-4)) << "dbias untouched";
    for (bool g : {false, true}) ops(g).add_bias(out.of(g), bias.of(g), N, OC);
    EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 1e-4, 1e-4)) << "add_bias";
  }
}

TEST_F(CudaOpsTest, Bf16GemmModeRoundsOperandsButStaysClose) {
  auto bf16 = make_cuda_ops({.precision = CudaPrecision::kBf16});
  ASSERT_TRUE(bf16.ok()) << bf16.status().to_string();
  Ops& lo = **bf16;
  const int N = 64, C = 96, OC = 80;
  const auto x = random_floats(static_cast<size_t>(N) * C, 30), wt = random_floats(static_cast<size_t>(OC) * C, 31);
  const auto b = random_floats(OC, 32);
  Buffer<float> ci(*cpu_, x), cw(*cpu_, wt), cb(*cpu_, b), co(*cpu_, static_cast<size_t>(N) * OC);
  Buffer<float> gi(lo, x), gw(lo, wt), gb(lo, b), go(lo, static_cast<size_t>(N) * OC);
  cpu_->matmul_forward(co.get(), ci.get(), cw.get(), cb.get(), N, C, OC);
  lo.matmul_forward(go.get(), gi.get(), gw.get(), gb.get(), N, C, OC);
  EXPECT_TRUE(all_close(go.host(), co.host(), 0.1, 2e-2));
  EXPECT_FALSE(all_close(go.host(), co.host(), 0, 1e-6)) << "bf16 mode gave fp32-exact results: not rounding";
}

TEST_F(CudaOpsTest, NaiveAttentionForwardAndBackward) {  // flash: cuda_flash_attention_test.cpp
  struct Shape {
    int B, T, C, NH;
  };
  for (Shape s : {Shape{2, 13, 32, 4}, Shape{2, 64, 64, 4}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << s.T << " C=" << s.C);
    const size_t btc = static_cast<size_t>(s.B) * s.T * s.C;
    const size_t att_n = static_cast<size_t>(s.B) * s.NH * s.T * s.T;
    auto qkv = both(random_floats(3 * btc, 40));
    auto out = both(std::vector<float>(btc));
    auto att = both(random_floats(att_n, 41));  // garbage: every entry must be written
    for (bool g : {false, true})
      ops(g).attention_forward(AttentionKind::kNaive, out.of(g), att.of(g), qkv.of(g), s.B, s.T, s.C, s.NH);
    const auto att_g = att.g.host();
    EXPECT_TRUE(all_close(att_g, att.c.host(), 1e-5, 1e-4)) << "att";
    EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 1e-5, 1e-4)) << "out";
    for (size_t r = 0; r < att_n / s.T; r++) {
      const int t = static_cast<int>(r % s.T);
      for (int j = t + 1; j < s.T; j++) ASSERT_EQ(att_g[r * s.T + j], 0.0f) << "masked entry row " << r;
    }
    auto dout = both(random_floats(btc, 42));
    auto dqkv = both(random_floats(3 * btc, 43));  // "="
    auto datt = both(std::vector<float>(att_n));
    for (bool g : {false, true}) {
      ops(g).attention_backward(AttentionKind::kNaive, dqkv.of(g), datt.of(g), dout.of(g), qkv.of(g), out.of(g),
                                att.of(g), s.B, s.T, s.C, s.NH);
    }
    EXPECT_TRUE(all_close(dqkv.g.host(), dqkv.c.host(), 1e-4, 1e-4)) << "dqkv";
  }
}

TEST_F(CudaOpsTest, GeluResidualAndScale) {
  const size_t n = 10007;
  auto x = both(random_floats(n, 50, 2.0f));
  auto y = both(random_floats(n, 51));
  auto out = both(std::vector<float>(n));
  for (bool g : {false, true}) ops(g).gelu_forward(out.of(g), x.of(g), n);
  EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 1e-6, 1e-5)) << "gelu";
  for (bool g : {false, true}) ops(g).gelu_backward(y.of(g), x.of(g), y.of(g), n);  // aliased, as the model does
  EXPECT_TRUE(all_close(y.g.host(), y.c.host(), 1e-6, 1e-5)) << "gelu backward";
  // The adds below must be exact: start them from identical inputs again.
  auto y2 = both(random_floats(n, 52));
  for (bool g : {false, true}) ops(g).residual_forward(out.of(g), x.of(g), y2.of(g), n);
  EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 0, 0)) << "residual";
  for (bool g : {false, true}) ops(g).add_inplace(out.of(g), x.of(g), n);
  EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 0, 0)) << "add_inplace";
  for (bool g : {false, true}) ops(g).scale(out.of(g), 0.375f, n);
  EXPECT_TRUE(all_close(out.g.host(), out.c.host(), 0, 0)) << "scale";
}

TEST_F(CudaOpsTest, VocabParallelCrossEntropy) {
  const int N = 24;
  for (const VocabShardMap& shard : test_shards()) {
    SCOPED_TRACE(::testing::Message() << "strided=" << shard.strided << " tp=" << shard.tp_size
                                      << " rank=" << shard.tp_rank);
    const int Vl = shard.local_rows;
    auto logits = both(random_floats(static_cast<size_t>(N) * Vl, 60, 3.0f));
    auto targets = both(random_ids(N, 1000, 61));
    auto row_max = both(std::vector<float>(N));
    auto stats = both(std::vector<float>(2 * N));
    auto losses = both(std::vector<float>(N));
    for (bool g : {false, true}) ops(g).logits_row_max(row_max.of(g), logits.of(g), N, shard);
    EXPECT_TRUE(all_close(row_max.g.host(), row_max.c.host(), 0, 0)) << "row max";
    for (bool g : {false, true}) {
      ops(g).softmax_stats(stats.of(g), logits.of(g), row_max.of(g), targets.of(g), N, shard);
      ops(g).crossentropy_losses(losses.of(g), stats.of(g), row_max.of(g), N);
    }
    auto sg = stats.g.host(), sc = stats.c.host();
    EXPECT_TRUE(all_close({sg.begin(), sg.begin() + N}, {sc.begin(), sc.begin() + N}, 1e-6, 1e-5)) << "sum exp";
    EXPECT_TRUE(all_close({sg.begin() + N, sg.end()}, {sc.begin() + N, sc.end()}, 0, 0)) << "target logit";
    EXPECT_TRUE(all_close(losses.g.host(), losses.c.host(), 1e-5, 1e-5)) << "losses";
    for (bool g : {false, true}) {
      ops(g).crossentropy_backward_inplace(logits.of(g), row_max.of(g), stats.of(g), targets.of(g), 1.0f / N,
                                           N, shard);
    }
    EXPECT_TRUE(all_close(logits.g.host(), logits.c.host(), 1e-7, 1e-5)) << "dlogits";
  }
}

// `steps` AdamW steps on the CPU and the GPU from the same random params and gradients, each made by
// `update(ops, p, grad, m, v, t)`; the GPU's params, m and v must match the CPU's. Returns the GPU's params.
template <class Update>
std::vector<float> adamw_on_both(CudaOpsTest& test, size_t n, uint32_t seed, int steps, Update update) {
  auto p = test.both(random_floats(n, seed));
  auto m = test.both(std::vector<float>(n));
  auto v = test.both(std::vector<float>(n));
  for (int t = 1; t <= steps; t++) {
    auto grad = test.both(random_floats(n, seed + t, 0.1f));
    for (bool g : {false, true}) update(test.ops(g), p.of(g), grad.of(g), m.of(g), v.of(g), t);
  }
  EXPECT_TRUE(all_close(p.g.host(), p.c.host(), 1e-6, 1e-5)) << "params";
  EXPECT_TRUE(all_close(m.g.host(), m.c.host(), 1e-7, 1e-5)) << "m";
  EXPECT_TRUE(all_close(v.g.host(), v.c.host(), 1e-9, 1e-5)) << "v";
  return p.g.host();
}

TEST_F(CudaOpsTest, AdamWUpdates) {
  const size_t n = 5000;
  adamw_on_both(*this, n, 70, 3, [&](Ops& ops, float* p, float* grad, float* m, float* v, int t) {
    ops.adamw_update(p, grad, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, t);
  });
}

// The one-launch AdamW over a flat buffer against the CPU's per-tensor updates: a tensor longer than
// one chunk (64K elements), decayed and undecayed tensors, a gap between tensors left untouched, and
// a second step that reuses the uploaded chunk table.
TEST_F(CudaOpsTest, AdamWOverAllSegmentsInOneLaunch) {
  const std::vector<Ops::AdamWSegment> segments = {{0, 150000, true}, {150000, 768, false}, {151000, 3000, true}};
  const size_t n = 154000;
  const std::vector<float> after =
      adamw_on_both(*this, n, 80, 2, [&](Ops& ops, float* p, float* grad, float* m, float* v, int t) {
        ops.adamw_update_segments(p, grad, m, v, segments.data(), segments.size(), 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, t);
      });
  const std::vector<float> before = random_floats(n, 80);
  for (size_t i = 150768; i < 151000; i++) ASSERT_EQ(after[i], before[i]) << "element " << i << " is in no segment";
}

TEST_F(CudaOpsTest, SumsInDoubleAreDeterministic) {
  const size_t n = 100003;
  auto x = both(random_floats(n, 80));
  const double cs = cpu_->sum(x.c.get(), n), gs = gpu_->sum(x.g.get(), n);
  const double cq = cpu_->sum_squares(x.c.get(), n), gq = gpu_->sum_squares(x.g.get(), n);
  EXPECT_NEAR(gs, cs, 1e-9 * std::fabs(cq));
  EXPECT_NEAR(gq, cq, 1e-9 * cq);
  EXPECT_EQ(gpu_->sum(x.g.get(), n), gs) << "rerun differs";
  EXPECT_EQ(gpu_->sum_squares(x.g.get(), 0), 0.0);
}

}  // namespace
}  // namespace gpt2
