// moe_expert_chain.h — the expert MLPs of one MoE layer as one GEMM chain over the grouped rows.
//
// Is: forward and backward of every local expert's GPT-2 MLP (c_fc + bias, tanh GELU, c_proj +
// bias) over the blocks of moe_expert_blocks.h, as Ops calls, so the CPU oracle and the CUDA
// backend (cuBLASLt) run the same sequence. Forward: the c_fc GEMMs of all blocks back to back,
// GELU in their epilogue (Ops::matmul_gelu_forward: one cuBLASLt launch per block, no separate GELU
// pass), then the c_proj GEMMs back to back. Backward mirrors it (Ops::matmul_backward_dgelu fuses
// GELU's gradient into c_proj's backward). No host synchronisation anywhere in the chain.
//
// Why a loop of GEMMs over contiguous per-expert row blocks, not one batched GEMM padded to a
// capacity: (1) cuBLASLt has no grouped GEMM (variable M per member) in CUDA 13; its strided
// batched GEMM needs one M for every member, so dropless routing would pad every local expert to
// the hottest one's rows, and the incident is exactly a hot expert (1.42:1 max/mean received there:
// padding would add ~40% wasted FLOPs where the time already is); (2) the blocks are few (L = E/EP
// local experts, 2 at the incident's E=8, EP=4) and large (tens of thousands of rows), so launch
// cost is nil against the GEMMs; (3) it keeps the cuBLASLt epilogues (bias, GELU with its aux
// output, dGELU) and the bf16-operand path the dense MLP already uses. The token loop (one block per
// row, ExpertLoop::kToken) runs the same calls with M = 1: the incident's anti-pattern, kept.
// Is not: the routing, exchange or chunk sort (moe_mlp.h, moe_dispatch.h).
#pragma once

#include <span>

#include "model/moe_expert_blocks.h"
#include "model/moe_weights.h"
#include "model/ops.h"

namespace gpt2::moe {

// Buffers of the chain, R rows (the sum of the blocks' rows), H = 4C; backend memory.
struct ExpertActivations {
  float* x = nullptr;     // (R,C) input rows, grouped by local expert
  float* pre = nullptr;   // (R,H) c_fc output before GELU, kept for backward
  float* gelu = nullptr;  // (R,H) GELU(pre)
  float* y = nullptr;     // (R,C) c_proj output
};

// acts.pre, acts.gelu and acts.y = the experts of `blocks` applied to acts.x.
void expert_chain_forward(Ops& ops, std::span<const ExpertBlock> blocks, const MoeWeights& w,
                          const ExpertActivations& acts, int C);

// Given dy (R,C): dx (R,C) = the input gradient; dh (R,H) is scratch (overwritten); the local
// experts' gradients in g +=. acts must hold the forward's x, pre and gelu.
void expert_chain_backward(Ops& ops, std::span<const ExpertBlock> blocks, const MoeWeights& w, MoeGrads& g,
                           const ExpertActivations& acts, const float* dy, float* dh, float* dx, int C);

}  // namespace gpt2::moe
