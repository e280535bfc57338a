// moe_mlp.h — one mixture-of-experts MLP layer with expert parallelism: router, top-k, capacity,
// dispatch over ep{k}, the experts' GEMM chain (moe_expert_chain.h), combine; and its backward.
//
// Is: the layer the GPT-2 model puts in place of the dense MLP in every --moe-every'th block. Its
// input is the ln_2 output (N,C); its output (N,C) is what the dense MLP's c_proj would give.
// Experts are GPT-2 MLPs (c_fc (4C,C) + bias, tanh GELU, c_proj (C,4C) + bias); the router is a
// bias-free linear (E,C). Element loops are MoeOps/Ops calls; the host computes the permutation
// (moe_dispatch.h), which needs the chosen experts on the host once per layer (the same
// device-to-host sync Megatron and torchtitan make before their all-to-all).
// Capacity (factor F > 0): each expert keeps at most ceil(N*K/E*F) of THIS rank's slots, the
// earliest in slot order (Megatron's "position" policy), before dispatch; the rest are dropped and
// add nothing to the output. Aux loss (Switch/GShard, Megatron's f_i): A * E * sum_i f_i P_i with
// f_i = routed slots to i / (N*K) counted before drops and P_i = mean router probability of i over
// this rank's N tokens.
// Is not: the block's residual or LayerNorm (gpt2.cpp), nor gradient reduction (expert gradients
// go over edp{m}, the router with the dense parameters over dp{j}: the trainer's business).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/config.h"
#include "model/moe_dispatch.h"
#include "model/moe_expert_blocks.h"
#include "model/moe_ops.h"
#include "model/moe_weights.h"
#include "model/ops.h"
#include "rankscope/format/status.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {

struct MoeLayerConfig {
  int experts = 0;                // E (global)
  int top_k = 1;                  // K
  float capacity_factor = 0.0f;   // 0: dropless
  float aux_loss_coef = 0.0f;     // A
  ExpertLoop loop = ExpertLoop::kGrouped;
};

// What one forward saw, for counters: assignments this rank's router made to each global expert
// (before drops), rows this rank received for its experts, slots dropped, the aux loss value.
struct MoeStats {
  std::vector<int64_t> routed;   // (E)
  int64_t received = 0;
  int64_t dropped = 0;
  float aux_loss = 0.0f;         // already multiplied by A
};

class MoeMlp {
 public:
  // ep may be null when layout.ep_size == 1. range_prefix: "block3" gives forward/block3/moe/...
  MoeMlp(MoeLayerConfig config, moe::ExpertLayout layout, Ops& ops, MoeOps& moe_ops, Communicator* ep,
         int N, int C, std::string range_prefix);
  ~MoeMlp();
  MoeMlp(const MoeMlp&) = delete;
  MoeMlp& operator=(const MoeMlp&) = delete;

  // out (N,C) = MoE(inp (N,C)); inp must stay unchanged until backward. logit_bias (E) or null.
  rankscope::Result<MoeStats> forward(float* out, const float* inp, const MoeWeights& w,
                                      const float* logit_bias, rankscope::probe::Probe* probe);
  // The next forward's combine all_to_all_v expects `delta` rows more (or fewer) from EP rank
  // `peer` than it sent there (the a2a-miscount fault). The MPI call then fails (fewer: a
  // truncation) or completes short (more); either way forward returns an error naming the
  // communicator, the peer and both counts instead of using misplaced rows.
  void set_combine_miscount(int peer, int64_t delta) { miscount_peer_ = peer; miscount_delta_ = delta; }

  // dinp (N,C) +=; grads +=. loss_scale multiplies the aux loss's gradient (the main loss's
  // scale is already in dout).
  Status backward(float* dinp, const float* dout, const float* inp, const MoeWeights& w, MoeGrads& g,
                  float loss_scale, rankscope::probe::Probe* probe);

 private:
  float* buffer(size_t index, size_t floats);  // grow-only backend scratch
  void experts_forward(const MoeWeights& w);
  void experts_backward(const MoeWeights& w, MoeGrads& g);
  Status combine_exchange(const float* yrecv, float* ysorted);

  MoeLayerConfig cfg_;
  moe::ExpertLayout layout_;
  Ops& ops_;
  MoeOps& mops_;
  Communicator* ep_;
  int N_, C_;
  std::string fwd_[4], bwd_[4];  // router, dispatch, experts, combine
  std::vector<std::pair<void*, size_t>> buffers_;
  // saved by forward for backward
  std::vector<int32_t> expert_host_;      // (N*K) chosen experts, -1 once dropped
  moe::SlotOrder order_;
  moe::ExchangePlan plan_;
  std::vector<moe::ExpertBlock> blocks_;  // the expert chain's GEMM blocks (moe_expert_blocks.h)
  std::vector<float> aux_dprob_host_;     // (E)
  int miscount_peer_ = -1;
  int64_t miscount_delta_ = 0;
};

}  // namespace gpt2
