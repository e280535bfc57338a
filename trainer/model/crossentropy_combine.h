// crossentropy_combine.h — the TP combine of the fused classifier's per-rank partials, one row.
//
// Is: the formula shared by Ops::crossentropy_combine's host default and the CPU backend (the CUDA
// kernel in ops/cuda/kernels/crossentropy.cu writes the same formula for the device). Each rank r
// sends m_r (its shard's max), s_r = sum exp(l - m_r) and t_r (the target logit if it owns it, else
// 0); the global M = max_r m_r, S = sum_r s_r * exp(m_r - M), target logit = sum_r t_r (one owner).
// A shard with no real columns sends m_r = -inf, s_r = 0 and adds nothing (exp(-inf) = 0).
// Is not: the collective (the model's all_gather) or the per-row passes over the logits.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

namespace gpt2 {

// gathered (tp, 3N): rank r's [m | s | t] at gathered + r * 3N. Writes row_max[n], stats[n],
// stats[N + n]. Ranks are visited in rank order, so every rank computes bit-identical results.
inline void combine_crossentropy_row(float* row_max, float* stats, const float* gathered, int tp_size,
                                     int N, int n) {
  // Included by ops.h (after class Ops) for its default; needs nothing from it.
  const size_t stride = 3 * static_cast<size_t>(N);
  float M = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < tp_size; r++) M = std::fmax(M, gathered[r * stride + n]);
  double S = 0.0;  // in double: S is rounded once, as the all-reduced sum of the unfused path is
  float target = 0.0f;
  for (int r = 0; r < tp_size; r++) {
    const float* p = gathered + r * stride;
    if (p[N + n] > 0.0f) S += p[N + n] * std::exp(static_cast<double>(p[n]) - M);
    target += p[2 * N + n];
  }
  row_max[n] = M;
  stats[n] = static_cast<float>(S);
  stats[N + n] = target;
}

}  // namespace gpt2
