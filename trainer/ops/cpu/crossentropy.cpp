// crossentropy.cpp — vocab-parallel softmax cross-entropy over this rank's logit columns.
//
// The model runs: logits_row_max -> all-reduce(max) -> softmax_stats -> ONE all-reduce(sum) of the
// packed [sum of exp | target logit] -> crossentropy_losses; backward needs no communication.
// Padded columns (global id >= V) are a suffix of every shard and are never read.
// The fused classifier (ops.h: crossentropy_partials -> all_gather -> crossentropy_combine ->
// crossentropy_loss_backward_inplace) is here too, one pass over each row per op: the oracle the
// CUDA kernels are tested against, itself tested against the composed defaults.
// Is not: the all-reduces (the model does them through its Communicator).
#include <cmath>
#include <limits>

#include "model/crossentropy_combine.h"
#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {
namespace {

// One row l (Vl) <- (exp(l - m) / sum - onehot(target)) * dloss; columns >= real <- 0.
void dlogits_row_inplace(float* l, float m, float sum, int target, float dloss, int real,
                         const VocabShardMap& shard) {
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j < real; j++) l[j] = std::exp(l[j] - m) * inv * dloss;
  for (int j = real; j < shard.local_rows; j++) l[j] = 0.0f;
  const ShardRow sr = shard_row(target, shard);
  l[sr.row] -= static_cast<float>(sr.owned) * dloss;
}

// Every row of logits (N,Vl) as above; and losses (N) = log(sum) + max - target logit unless null.
void dlogits_rows_inplace(float* losses, float* logits, const float* row_max, const float* stats,
                          const int* targets, float dloss, int N, const VocabShardMap& shard) {
  const int real = real_vocab_columns(shard);
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    if (losses != nullptr) losses[n] = std::log(stats[n]) + row_max[n] - stats[N + n];
    dlogits_row_inplace(logits + static_cast<size_t>(n) * shard.local_rows, row_max[n], stats[n], targets[n],
                        dloss, real, shard);
  }
}

}  // namespace

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
    stats[N + n] = sr.owned ? l[sr.row] : 0.0f;  // a select: 0 * a padding NaN would be NaN
  }
}

// losses (N) = log(sum) + max - target_logit
void CpuOps::crossentropy_losses(float* losses, const float* stats, const float* row_max, int N) {
  for (int n = 0; n < N; n++) losses[n] = std::log(stats[n]) + row_max[n] - stats[N + n];
}

// logits (N,Vl) <- (softmax - onehot(target)) * dloss; padded columns 0.
void CpuOps::crossentropy_backward_inplace(ActPtr logits, const float* row_max, const float* stats,
                                           const int* targets, float dloss, int N,
                                           const VocabShardMap& shard) {
  dlogits_rows_inplace(nullptr, logits.f32("cpu crossentropy_backward_inplace"), row_max, stats, targets,
                       dloss, N, shard);
}

// partials (3N) = [m | s | t] of this shard. Per row: its max, then its sum of exp while the row
// is still in cache (a row of a shard is at most ~100 KB at GPT-2 sizes: one read from memory).
// Not online softmax: the two loops are those of logits_row_max and softmax_stats, so at TP=1 the
// losses and dlogits are bit-identical to the unfused path's, and training trajectories with them.
void CpuOps::crossentropy_partials(float* partials, ConstActPtr logits_, const int* targets, int N,
                                   const VocabShardMap& shard) {
  const float* logits = logits_.f32("cpu crossentropy_partials");
  const int Vl = shard.local_rows;
  const int real = real_vocab_columns(shard);
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const float* l = logits + static_cast<size_t>(n) * Vl;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int j = 0; j < real; j++) m = l[j] > m ? l[j] : m;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < real; j++) s += std::exp(l[j] - m);
    const ShardRow sr = shard_row(targets[n], shard);
    partials[n] = m;
    partials[N + n] = s;
    partials[2 * N + n] = sr.owned ? l[sr.row] : 0.0f;  // a select: 0 * a padding NaN would be NaN
  }
}

void CpuOps::crossentropy_combine(float* row_max, float* stats, const float* gathered, int tp_size,
                                  int N) {
  for (int n = 0; n < N; n++) combine_crossentropy_row(row_max, stats, gathered, tp_size, N, n);
}

// losses (N) and, in place, logits -> (softmax - onehot) * dloss, in one pass over each row.
void CpuOps::crossentropy_loss_backward_inplace(float* losses, ActPtr logits, const float* row_max,
                                                const float* stats, const int* targets, float dloss,
                                                int N, const VocabShardMap& shard) {
  dlogits_rows_inplace(losses, logits.f32("cpu crossentropy_loss_backward_inplace"), row_max, stats, targets,
                       dloss, N, shard);
}

}  // namespace gpt2::cpu
