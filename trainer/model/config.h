// config.h — the shape of a GPT-2 model and of its tensor-parallel slice.
//
// Is: ModelConfig (layers, heads, channels, vocabulary, max sequence length) with the presets
// `d12` (GPT-2 124M), `d6` and `tiny`; TensorParallel (this rank's place in its TP group and how
// the vocabulary is sharded); the recompute level; parsing of the attention kind. Plain data plus
// validation with clear messages.
// Is not: flags parsing (trainer/train/ owns the CLI) or any storage.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/ops.h"
#include "rankscope/format/status.h"

namespace gpt2 {

using rankscope::Result;
using rankscope::Status;

struct ModelConfig {
  int max_seq_len = 1024;  // maxT: rows of wpe
  int vocab_size = 50257;  // V: real tokens; logits beyond V are padding and never win the softmax
  int num_layers = 12;     // L
  int num_heads = 12;      // NH
  int channels = 768;      // C; head size is C / NH

  int head_size() const { return channels / num_heads; }
  // Vp: V rounded up to a multiple of 128 * tp_size, so every TP rank's vocab shard has the
  // same number of rows and stays a multiple of 128 (GEMM-friendly). llm.c pads to 128 (tp=1).
  int padded_vocab_size(int tp_size) const;

  // "d12" (12L 12H 768C), "d6" (6L 6H 384C), "tiny" (2L 4H 128C); all V=50257, maxT=1024.
  static Result<ModelConfig> preset(std::string_view name);
  // Checks positivity, C % NH == 0, NH % tp == 0, (4C) % tp == 0 and that Vp fits; the message
  // names the offending field and says what would be valid.
  Status validate(int tp_size) const;
  std::string describe() const;  // "L=12 NH=12 C=768 V=50257 maxT=1024"
};

// How vocabulary rows (wte rows and logit columns) are split over the TP ranks.
//  contiguous: rank r owns ids [r*Vp/tp, (r+1)*Vp/tp)  (Megatron's default; skewed on real text)
//  strided:    rank r owns ids i with i % tp == r; local row j is token id j*tp + r
enum class VocabShard { kContiguous, kStrided };
Result<VocabShard> parse_vocab_shard(std::string_view text);  // "contiguous" | "strided"
std::string_view vocab_shard_name(VocabShard shard);

// This rank's place in its tensor-parallel group. tp_size == 1 means no tensor parallelism.
struct TensorParallel {
  int tp_size = 1;
  int tp_rank = 0;
  VocabShard vocab_shard = VocabShard::kContiguous;
};

// Mixture of experts: which blocks replace the dense MLP by an MoE MLP and its shape.
// Block l is an MoE block when experts > 0 and l % every == 0 (Megatron's --moe-layer-freq: with
// every = 2, blocks 0, 2, 4, ...). Experts are GPT-2 MLPs; the router is a bias-free linear C->E.
enum class ExpertLoop { kGrouped, kToken };  // kToken: one GEMM chain per row (the incident)
Result<ExpertLoop> parse_expert_loop(std::string_view text);  // "grouped" | "token"
std::string_view expert_loop_name(ExpertLoop loop);

struct MoeConfig {
  int experts = 0;               // E (global); 0: dense model
  int top_k = 1;                 // K: 1 or 2
  int every = 1;                 // MoE MLP in blocks l with l % every == 0
  float capacity_factor = 0.0f;  // 0: dropless; else capacity ceil(N*K/E*F) slots per expert
  float aux_loss_coef = 0.0f;    // A of the Switch/GShard load-balancing loss
  ExpertLoop loop = ExpertLoop::kGrouped;

  bool enabled() const { return experts > 0; }
  bool is_moe_block(int layer) const { return experts > 0 && layer % every == 0; }
  // Checks ranges (K in {1,2}, K <= E, every >= 1, F >= 0, A >= 0) and that ep_size divides E;
  // the message names the flag and what would be valid.
  Status validate(int ep_size) const;
};

// This rank's place in its expert-parallel group ep{k} (experts [ep_rank*E/ep, ...) live here).
struct ExpertParallel {
  int ep_size = 1;
  int ep_rank = 0;
};

// Wrong receive counts for one combine all_to_all_v (the a2a-miscount fault): this rank expects
// `delta` rows more (or fewer) than it sent to `peer` (EP rank) in the dispatch.
struct CombineMiscount {
  int peer = -1;   // -1: none
  int64_t delta = 0;
};

// Activation recompute: what backward recomputes instead of keeping from forward.
//  0: keep everything; 1: recompute each block's GELU output from the fc pre-activation;
//  2: also recompute the LayerNorm outputs (ln_1, ln_2, ln_f) from their inputs and saved stats.
// All levels give bit-identical results (the same ops on the same inputs).
enum class Recompute : int { kNone = 0, kGelu = 1, kGeluAndLayerNorm = 2 };
Result<Recompute> parse_recompute(std::string_view text);  // "0" | "1" | "2"

// --attention: "naive" | "flash" (AttentionKind is declared with the ops in ops.h).
Result<AttentionKind> parse_attention_kind(std::string_view text);

}  // namespace gpt2
