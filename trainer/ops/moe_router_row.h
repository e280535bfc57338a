// moe_router_row.h — the router math of ONE token row, shared by the CPU op (ops/cpu/moe_router.cpp)
// and the CUDA kernel (ops/cuda/kernels/moe.cu), so the oracle and the GPU run the same arithmetic
// in the same order.
// Is: softmax over E logits (+ optional bias), top-K choice (ties: the lower index), gates (K = 1:
// the probability; K >= 2: renormalised among the K), and the backward through all of it.
// Is not: a loop over rows (each backend parallelises rows its own way). Semantics: model/moe_ops.h.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define RS_MOE_HOST_DEVICE __host__ __device__
#else
#define RS_MOE_HOST_DEVICE
#endif

namespace gpt2::moe_row {

// p (E) =, idx (K) =, g (K) = for one row of logits l (E).
RS_MOE_HOST_DEVICE inline void router_forward(float* p, int32_t* idx, float* g, const float* l,
                                              const float* bias, int E, int K) {
  float maxv = -INFINITY;
  for (int e = 0; e < E; e++) {
    p[e] = l[e] + (bias ? bias[e] : 0.0f);
    maxv = p[e] > maxv ? p[e] : maxv;
  }
  float sum = 0.0f;
  for (int e = 0; e < E; e++) {
    p[e] = expf(p[e] - maxv);
    sum += p[e];
  }
  for (int e = 0; e < E; e++) p[e] /= sum;
  float picked = 0.0f;
  for (int k = 0; k < K; k++) {
    int best = -1;
    for (int e = 0; e < E; e++) {
      bool taken = false;
      for (int j = 0; j < k; j++) taken |= idx[j] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = e;  // strict >: ties keep the lower index
    }
    idx[k] = best;
    g[k] = p[best];
    picked += p[best];
  }
  if (K >= 2)
    for (int k = 0; k < K; k++) g[k] /= picked;
}

// dl (E) =. With S = sum of the K picked probs and g_k = p_k / S (K >= 2):
//   dp_j = (dg_j - sum_k dg_k g_k) / S for a picked j, 0 otherwise; K = 1: dp_j = dg_j.
// Then dp += aux (E, may be null), and the softmax backward dl_e = p_e (dp_e - sum_i p_i dp_i).
RS_MOE_HOST_DEVICE inline void router_backward(float* dl, const float* p, const int32_t* idx,
                                               const float* g, const float* dg, const float* aux,
                                               int E, int K) {
  for (int e = 0; e < E; e++) dl[e] = aux ? aux[e] : 0.0f;  // dl holds dp for now
  if (K == 1) {
    dl[idx[0]] += dg[0];
  } else {
    float picked = 0.0f, weighted = 0.0f;
    for (int k = 0; k < K; k++) {
      picked += p[idx[k]];
      weighted += dg[k] * g[k];
    }
    for (int k = 0; k < K; k++) dl[idx[k]] += (dg[k] - weighted) / picked;
  }
  float dot = 0.0f;
  for (int e = 0; e < E; e++) dot += p[e] * dl[e];
  for (int e = 0; e < E; e++) dl[e] = p[e] * (dl[e] - dot);
}

}  // namespace gpt2::moe_row
