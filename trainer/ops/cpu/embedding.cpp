// embedding.cpp — the vocab-parallel token embedding (lookup and backward) and the position add.
//
// Foreign token ids (owned by another TP rank) are masked arithmetically: each id maps to a local
// row and a 0/1 ownership factor (shard_row, no branch), and the row is read at row*owned and
// multiplied by owned. The all-reduce over the TP group (done by the model) then sums the shards.
// Is not: the all-reduce, nor the position embedding's sharding (wpe is replicated).
#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

// out (N,C) = owned(ids[n]) * wte_local (Vp/tp, C)[row(ids[n])]; returns sum of owned.
int64_t CpuOps::embedding_lookup(ActPtr out_, const int* ids, const float* wte_local, int N, int C,
                                 const VocabShardMap& shard) {
  float* out = out_.f32("cpu embedding_lookup");
  int64_t owned_total = 0;
#pragma omp parallel for reduction(+ : owned_total)
  for (int n = 0; n < N; n++) {
    const ShardRow sr = shard_row(ids[n], shard);
    const float f = static_cast<float>(sr.owned);
    const float* w = wte_local + static_cast<size_t>(sr.row) * C;
    float* o = out + static_cast<size_t>(n) * C;
#pragma omp simd
    for (int i = 0; i < C; i++) o[i] = f * w[i];
    owned_total += sr.owned;
  }
  return owned_total;
}

// out (B,T,C) += wpe (maxT,C)[t]
void CpuOps::add_position(ActPtr out_, const float* wpe, int B, int T, int C) {
  float* out = out_.f32("cpu add_position");
#pragma omp parallel for collapse(2)
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      float* o = out + (static_cast<size_t>(b) * T + t) * C;
      const float* p = wpe + static_cast<size_t>(t) * C;
#pragma omp simd
      for (int i = 0; i < C; i++) o[i] += p[i];
    }
  }
}

// dwte_local (Vp/tp,C) += owned * dout rows; dwpe (maxT,C) += sum over b of dout (B,T,C).
// Threads own disjoint channel blocks, so repeated ids never race; tokens are added in order.
void CpuOps::embedding_backward(float* dwte_local, float* dwpe, ConstActPtr dout_, const int* ids,
                                int B, int T, int C, const VocabShardMap& shard) {
  const float* dout = dout_.f32("cpu embedding_backward");
  constexpr int kBlock = 64;
  const int blocks = (C + kBlock - 1) / kBlock;
  const int N = B * T;
#pragma omp parallel for
  for (int blk = 0; blk < blocks; blk++) {
    const int c0 = blk * kBlock;
    const int c1 = c0 + kBlock < C ? c0 + kBlock : C;
    for (int n = 0; n < N; n++) {
      const ShardRow sr = shard_row(ids[n], shard);
      const float f = static_cast<float>(sr.owned);
      const float* d = dout + static_cast<size_t>(n) * C;
      float* w = dwte_local + static_cast<size_t>(sr.row) * C;
      float* p = dwpe + static_cast<size_t>(n % T) * C;
#pragma omp simd
      for (int i = c0; i < c1; i++) {
        w[i] += f * d[i];
        p[i] += d[i];
      }
    }
  }
}

}  // namespace gpt2::cpu
