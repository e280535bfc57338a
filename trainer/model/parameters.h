// parameters.h — the named parameter tensors of GPT-2 on this rank, in one flat buffer.
//
// Is: the list of parameters with Hugging Face names (wte.weight, wpe.weight, h.{i}.ln_1.weight,
// h.{i}.attn.c_attn.weight, ..., ln_f.bias), their full and local (TP-sliced) shapes, and where
// each lives in the flat parameter and gradient buffers. Order = forward order:
//   wte.weight, wpe.weight, then per layer i:
//     h.i.ln_1.weight, h.i.ln_1.bias, h.i.attn.c_attn.weight, h.i.attn.c_attn.bias,
//     h.i.attn.c_proj.weight, h.i.attn.c_proj.bias, h.i.ln_2.weight, h.i.ln_2.bias,
//     h.i.mlp.c_fc.weight, h.i.mlp.c_fc.bias, h.i.mlp.c_proj.weight, h.i.mlp.c_proj.bias,
//   then ln_f.weight, ln_f.bias.
// An MoE block (MoeConfig::is_moe_block) has, after ln_2, instead of mlp.c_fc/c_proj:
//     h.i.mlp.router.weight (E, C), then per LOCAL expert g (global id, ascending):
//     h.i.mlp.experts.g.c_fc.weight (4C, C), .c_fc.bias (4C), .c_proj.weight (C, 4C), .c_proj.bias (C)
// Only this EP rank's experts are in the set; router and experts are replicated over TP (every
// TP rank runs the whole MoE layer, see gpt2.h). ParamInfo::init_key is the index the parameter
// has in the EP=1 layout, so weight init (keyed by it) gives EP=N the same experts as EP=1.
// Gradients become final in (almost) the reverse order, so DDP buckets taken from the END of the
// gradient buffer are contiguous; wte.weight (tied LM head) is final last, after backward/embed.
// Shapes are (out, in) as in llm.c and torch.nn.Linear, NOT Hugging Face's Conv1D (in, out):
// h.i.attn.c_attn.weight is (3C, C). Under TP (Megatron):
//   wte.weight           (Vp, C)  -> (Vp/tp, C)   vocab-parallel, rows per --vocab-shard
//   c_attn.weight/bias   (3C, C)  -> (3C/tp, C)   column-parallel: this rank's heads of Q, of K, of V
//   c_fc.weight/bias     (4C, C)  -> (4C/tp, C)   column-parallel
//   attn/mlp c_proj.weight (C, C|4C) -> (C, C/tp | 4C/tp) row-parallel; their biases replicated
//   everything else replicated (identical on every TP rank, identical gradients)
// Is not: the optimizer state (adamw.h) or the file format (checkpoint_io.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/ops.h"

namespace gpt2 {

// Parameters of one block in their order (see the list above); an MoE block has kLn1W..kLn2B,
// then the router and its experts' ExpertParam.
enum class BlockParam : int {
  kLn1W = 0, kLn1B, kQkvW, kQkvB, kAttnProjW, kAttnProjB,
  kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB, kCount
};
enum class ExpertParam : int { kFcW = 0, kFcB, kProjW, kProjB, kCount };

// How a parameter is split over the TP group.
enum class TpSplit {
  kReplicated,  // same full tensor on every TP rank
  kVocabRows,   // wte: rows split by VocabShard
  kColumnQkv,   // c_attn: rows split per head within each of the Q, K, V thirds
  kColumn,      // c_fc: rows (output features) split contiguously
  kRow,         // c_proj weights: columns (input features) split contiguously
};

struct ParamInfo {
  std::string name;            // Hugging Face name, e.g. "h.3.mlp.c_fc.weight"
  int layer = -1;              // block index, -1 for wte/wpe/ln_f
  std::vector<int> full_shape; // shape at TP=1, (out, in) for matrices
  std::vector<int> local_shape;// this rank's slice
  size_t offset = 0;           // element offset of the local slice in the flat buffers
  size_t numel = 0;            // local element count
  TpSplit split = TpSplit::kReplicated;
  bool weight_decay = false;   // AdamW decays 2-D weights only (matrices and embeddings)
  bool expert = false;         // an MoE expert's tensor: reduced over edp, its norm summed over ep
  int init_key = -1;           // index in the EP=1 layout (= the index for dense models)
  bool is_sharded() const { return split != TpSplit::kReplicated; }
};

// The parameter list of one model on one TP rank, plus its flat buffers.
// params() and grads() have total_numel() floats each, allocated by the backend (`ops`, which
// must outlive the set): host memory for CPU, device memory for CUDA.
class ParameterSet {
 public:
  ParameterSet(const ModelConfig& config, const TensorParallel& tp, Ops& ops,
               const MoeConfig& moe = {}, const ExpertParallel& ep = {});
  ParameterSet(const ParameterSet&) = delete;
  ParameterSet& operator=(const ParameterSet&) = delete;
  ~ParameterSet();

  const ModelConfig& config() const { return config_; }
  const TensorParallel& tp() const { return tp_; }
  int padded_vocab() const { return padded_vocab_; }  // Vp for this TP size

  const std::vector<ParamInfo>& infos() const { return infos_; }
  size_t count() const { return infos_.size(); }
  size_t total_numel() const { return total_numel_; }
  // total_numel() of a set built with these arguments, without allocating (memory_estimate.h).
  static size_t count_numel(const ModelConfig& config, const TensorParallel& tp, const MoeConfig& moe = {},
                            const ExpertParallel& ep = {});
  int index_of(std::string_view name) const;  // -1 when unknown

  // Layout indices that hold for dense and MoE models alike.
  const MoeConfig& moe() const { return moe_; }
  const ExpertParallel& ep() const { return ep_; }
  bool has_experts() const { return moe_.enabled(); }
  int block_index(int layer, BlockParam p) const;   // MLP params (kFcW..) only in dense blocks
  int router_index(int layer) const;                // -1 for a dense block
  int expert_index(int layer, int local_expert, ExpertParam p) const;
  int lnf_weight() const { return lnf_weight_; }
  int lnf_bias() const { return lnf_weight_ + 1; }

  float* params() { return params_; }
  const float* params() const { return params_; }
  float* grads() { return grads_; }
  const float* grads() const { return grads_; }
  std::span<float> param(size_t i) { return {params_ + infos_[i].offset, infos_[i].numel}; }
  std::span<float> grad(size_t i) { return {grads_ + infos_[i].offset, infos_[i].numel}; }
  std::span<const float> param(size_t i) const { return {params_ + infos_[i].offset, infos_[i].numel}; }
  std::span<const float> grad(size_t i) const { return {grads_ + infos_[i].offset, infos_[i].numel}; }

  void zero_grads();  // gradients accumulate across backward calls until this is called
  VocabShardMap vocab_shard_map() const;  // how wte rows / logit columns map to token ids

 private:
  ModelConfig config_;
  TensorParallel tp_;
  MoeConfig moe_;
  ExpertParallel ep_;
  std::vector<int> block_first_;  // index of h.l.ln_1.weight
  int lnf_weight_ = 0;
  Ops& ops_;
  int padded_vocab_ = 0;
  std::vector<ParamInfo> infos_;
  size_t total_numel_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
};

constexpr int kParamWte = 0;
constexpr int kParamWpe = 1;
// The index arithmetic of a DENSE model (every block the same size); ParameterSet's members hold
// for MoE models too.
inline int block_param_index(int layer, BlockParam p) {
  return 2 + layer * static_cast<int>(BlockParam::kCount) + static_cast<int>(p);
}
inline int lnf_weight_index(int num_layers) { return 2 + num_layers * static_cast<int>(BlockParam::kCount); }
inline int lnf_bias_index(int num_layers) { return lnf_weight_index(num_layers) + 1; }

}  // namespace gpt2
