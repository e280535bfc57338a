// moe_ops.h — the element loops of a mixture-of-experts MLP: router softmax/top-k, row gathers
// and scatters of the token permutation, the gate-weighted combine, and their backward passes.
//
// Is: a second backend table beside Ops (ops.h), in the same style (raw pointers, shape comments,
// "=" overwrites, "+=" accumulates), kept separate so the dense model's Ops stays unchanged. The
// index vectors come from moe_dispatch.h (host) and are copied to backend memory by the caller.
// The experts' GEMMs and GELU are ordinary Ops calls on contiguous row segments.
// Is not: communication (moe_dispatch.h exchanges rows over ep{k}) or model logic.
//
// Router choice (written down, as the design asks): probabilities are a softmax over all E logits
// in fp32; the K experts with the largest probabilities are chosen (ties: the lower index). With
// K = 1 the gate is that probability (Switch); with K >= 2 the K gates are renormalised to sum to 1
// (Megatron's top-k with softmax before top-k and renormalisation, GShard top-2). A slot is
// (token n, choice k), index n*K + k.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt2 {

class MoeOps {
 public:
  virtual ~MoeOps() = default;

  // probs (N,E) = softmax(logits + logit_bias); expert (N,K) = top-K indices (descending prob);
  // gate (N,K) = the gates above. logit_bias (E) may be null (the route-skew fault sets it).
  virtual void router_forward(float* probs, int32_t* expert, float* gate, const float* logits,
                              const float* logit_bias, int N, int E, int K) = 0;
  // dlogits (N,E) = d/dlogits of the loss whose gradient is dgate (N,K) at the gates, plus
  // aux_dprob (E) added to every row's dprobs (the load-balancing loss's gradient; may be null).
  virtual void router_backward(float* dlogits, const float* probs, const int32_t* expert,
                               const float* gate, const float* dgate, const float* aux_dprob, int N,
                               int E, int K) = 0;
  // prob_sum (E) = sum over the N rows of probs (N,E): the P_i of the load-balancing loss times N.
  virtual void probs_column_sum(float* prob_sum, const float* probs, int N, int E) = 0;

  // out (R,C) = in[src_row[i]] row by row (the permutation into expert order, and the chunk
  // sort's inverse).
  virtual void gather_rows(float* out, const float* in, const int32_t* src_row, int R, int C) = 0;
  // out[dst_row[i]] (R,C) = in row i (the chunk sort); dst_row is a permutation of 0..R-1.
  virtual void scatter_rows(float* out, const float* in, const int32_t* dst_row, int R, int C) = 0;
  // dinp (N,C) += sum over k of drows[row_of_slot[n*K+k]] (skipping -1: dropped slots). The
  // backward of gathering token rows into slot order; one writer per token, so deterministic.
  virtual void slot_rows_backward(float* dinp, const float* drows, const int32_t* row_of_slot,
                                  int N, int K, int C) = 0;

  // out (N,C) = sum over k of gate[n,k] * rows[row_of_slot[n*K+k]] (dropped slots add nothing).
  virtual void combine_forward(float* out, const float* rows, const float* gate,
                               const int32_t* row_of_slot, int N, int K, int C) = 0;
  // drows (R,C) = gate * dout of the row's token (rows of dropped slots are not touched; R rows
  // must be zeroed by the caller when some slots are dropped); dgate (N,K) = dout[n] . rows[row]
  // (0 for a dropped slot).
  virtual void combine_backward(float* drows, float* dgate, const float* dout, const float* rows,
                                const float* gate, const int32_t* row_of_slot, int N, int K,
                                int C) = 0;
};

}  // namespace gpt2
