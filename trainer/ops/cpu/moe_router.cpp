// moe_router.cpp — CPU router of the MoE MLP: fp32 softmax, top-K selection and gates, and the
// backward through them (see moe_ops.h for the choice of gates). Is not: the router's linear
// layer (an ordinary matmul) nor the aux loss's value (the model sums probs_column_sum).
#include <cmath>

#include "ops/cpu/cpu_moe_ops.h"

namespace gpt2::cpu {

// probs (N,E) =, expert (N,K) =, gate (N,K) =
void CpuMoeOps::router_forward(float* probs, int32_t* expert, float* gate, const float* logits,
                               const float* logit_bias, int N, int E, int K) {
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const float* l = logits + static_cast<size_t>(n) * E;
    float* p = probs + static_cast<size_t>(n) * E;
    float maxv = -INFINITY;
    for (int e = 0; e < E; e++) {
      p[e] = l[e] + (logit_bias ? logit_bias[e] : 0.0f);
      maxv = p[e] > maxv ? p[e] : maxv;
    }
    float sum = 0.0f;
    for (int e = 0; e < E; e++) {
      p[e] = std::exp(p[e] - maxv);
      sum += p[e];
    }
    for (int e = 0; e < E; e++) p[e] /= sum;
    int32_t* idx = expert + static_cast<size_t>(n) * K;
    float* g = gate + static_cast<size_t>(n) * K;
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
}

// dlogits (N,E) =. With S = sum of the K picked probs and g_k = p_k / S (K >= 2):
//   dp_j = (dg_j - sum_k dg_k g_k) / S for a picked j, 0 otherwise; K = 1: dp_j = dg_j.
// Then dp += aux_dprob, and the softmax backward dlogit_e = p_e (dp_e - sum_i p_i dp_i).
void CpuMoeOps::router_backward(float* dlogits, const float* probs, const int32_t* expert,
                                const float* gate, const float* dgate, const float* aux_dprob,
                                int N, int E, int K) {
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const float* p = probs + static_cast<size_t>(n) * E;
    const int32_t* idx = expert + static_cast<size_t>(n) * K;
    const float* g = gate + static_cast<size_t>(n) * K;
    const float* dg = dgate + static_cast<size_t>(n) * K;
    float* dl = dlogits + static_cast<size_t>(n) * E;
    for (int e = 0; e < E; e++) dl[e] = aux_dprob ? aux_dprob[e] : 0.0f;  // dl holds dp for now
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
}

// prob_sum (E) =
void CpuMoeOps::probs_column_sum(float* prob_sum, const float* probs, int N, int E) {
  for (int e = 0; e < E; e++) prob_sum[e] = 0.0f;
  for (int n = 0; n < N; n++)  // serial over rows: a fixed summation order
    for (int e = 0; e < E; e++) prob_sum[e] += probs[static_cast<size_t>(n) * E + e];
}

}  // namespace gpt2::cpu
