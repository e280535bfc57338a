// moe_router.cpp — CPU router of the MoE MLP: fp32 softmax, top-K selection and gates, and the
// backward through them (see moe_ops.h for the choice of gates; the per-row math is shared with
// the CUDA kernel in ops/moe_router_row.h). Is not: the router's linear
// layer (an ordinary matmul) nor the aux loss's value (the model sums probs_column_sum).
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/moe_router_row.h"

namespace gpt2::cpu {

// probs (N,E) =, expert (N,K) =, gate (N,K) =; the per-row math is ops/moe_router_row.h.
void CpuMoeOps::router_forward(float* probs, int32_t* expert, float* gate, const float* logits,
                               const float* logit_bias, int N, int E, int K) {
#pragma omp parallel for
  for (int n = 0; n < N; n++)
    moe_row::router_forward(probs + static_cast<size_t>(n) * E, expert + static_cast<size_t>(n) * K,
                            gate + static_cast<size_t>(n) * K, logits + static_cast<size_t>(n) * E,
                            logit_bias, E, K);
}

// dlogits (N,E) =
void CpuMoeOps::router_backward(float* dlogits, const float* probs, const int32_t* expert,
                                const float* gate, const float* dgate, const float* aux_dprob,
                                int N, int E, int K) {
#pragma omp parallel for
  for (int n = 0; n < N; n++)
    moe_row::router_backward(dlogits + static_cast<size_t>(n) * E, probs + static_cast<size_t>(n) * E,
                             expert + static_cast<size_t>(n) * K, gate + static_cast<size_t>(n) * K,
                             dgate + static_cast<size_t>(n) * K, aux_dprob, E, K);
}

// prob_sum (E) =
void CpuMoeOps::probs_column_sum(float* prob_sum, const float* probs, int N, int E) {
  for (int e = 0; e < E; e++) prob_sum[e] = 0.0f;
  for (int n = 0; n < N; n++)  // serial over rows: a fixed summation order
    for (int e = 0; e < E; e++) prob_sum[e] += probs[static_cast<size_t>(n) * E + e];
}

}  // namespace gpt2::cpu
