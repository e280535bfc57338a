// crossentropy.cpp — vocab-parallel softmax cross-entropy over this rank's logit columns.
//
// The model runs: logits_row_max -> all-reduce(max) -> softmax_stats -> ONE all-reduce(sum) of the
// packed [sum of exp | target logit] -> crossentropy_losses; backward needs no communication.
// Padded columns (global id >= V) are a suffix of every shard and are never read.
// Is not: the all-reduces (the model does them through its Communicator).
#include <cmath>
#include <limits>

#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

// row_max (N) = max over real columns of logits (N, Vl); -inf when the shard has none.
void CpuOps::logits_row_max(float* row_max, ConstActPtr logits_, int N, const VocabShardMap& shard) {
  const float* logits = logits_.f32("cpu logits_row_max");
  const int Vl = shard.local_rows;
  const int real = real_vocab_columns(shard);
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const float* l = logits + static_cast<size_t>(n) * Vl;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int j = 0; j < real; j++) m = l[j] > m ? l[j] : m;
    row_max[n] = m;
  }
}

// stats (2N) = [sum_j exp(l_j - max) | owned(target) * l_target]
void CpuOps::softmax_stats(float* stats, ConstActPtr logits_, const float* row_max,
                           const int* targets, int N, const VocabShardMap& shard) {
  const float* logits = logits_.f32("cpu softmax_stats");
  const int Vl = shard.local_rows;
  const int real = real_vocab_columns(shard);
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const float* l = logits + static_cast<size_t>(n) * Vl;
    const float m = row_max[n];
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < real; j++) s += std::exp(l[j] - m);
    const ShardRow sr = shard_row(targets[n], shard);
    stats[n] = s;
    stats[N + n] = static_cast<float>(sr.owned) * l[sr.row];
  }
}

// losses (N) = log(sum) + max - target_logit
void CpuOps::crossentropy_losses(float* losses, const float* stats, const float* row_max, int N) {
  for (int n = 0; n < N; n++) losses[n] = std::log(stats[n]) + row_max[n] - stats[N + n];
}

// logits (N,Vl) <- (softmax - onehot(target)) * dloss; padded columns 0.
void CpuOps::crossentropy_backward_inplace(ActPtr logits_, const float* row_max, const float* stats,
                                           const int* targets, float dloss, int N,
                                           const VocabShardMap& shard) {
  float* logits = logits_.f32("cpu crossentropy_backward_inplace");
  const int Vl = shard.local_rows;
  const int real = real_vocab_columns(shard);
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    float* l = logits + static_cast<size_t>(n) * Vl;
    const float m = row_max[n];
    const float inv = 1.0f / stats[n];
#pragma omp simd
    for (int j = 0; j < real; j++) l[j] = std::exp(l[j] - m) * inv * dloss;
    for (int j = real; j < Vl; j++) l[j] = 0.0f;
    const ShardRow sr = shard_row(targets[n], shard);
    l[sr.row] -= static_cast<float>(sr.owned) * dloss;
  }
}

}  // namespace gpt2::cpu
