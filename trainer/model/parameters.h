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
  bool is_sharded() const { return split != TpSplit::kReplicated; }
};

// The parameter list of one model on one TP rank, plus its flat buffers.
// params() and grads() have total_numel() floats each, allocated by the backend (`ops`, which
// must outlive the set): host memory for CPU, device memory for CUDA.
class ParameterSet {
 public:
  ParameterSet(const ModelConfig& config, const TensorParallel& tp, Ops& ops);
  ParameterSet(const ParameterSet&) = delete;
  ParameterSet& operator=(const ParameterSet&) = delete;
  ~ParameterSet();

  const ModelConfig& config() const { return config_; }
  const TensorParallel& tp() const { return tp_; }
  int padded_vocab() const { return padded_vocab_; }  // Vp for this TP size

  const std::vector<ParamInfo>& infos() const { return infos_; }
  size_t count() const { return infos_.size(); }
  size_t total_numel() const { return total_numel_; }
  int index_of(std::string_view name) const;  // -1 when unknown

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
  Ops& ops_;
  int padded_vocab_ = 0;
  std::vector<ParamInfo> infos_;
  size_t total_numel_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
};

// Index of the parameters of block `layer` (stable order inside a block, see the list above).
enum class BlockParam : int {
  kLn1W = 0, kLn1B, kQkvW, kQkvB, kAttnProjW, kAttnProjB,
  kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB, kCount
};
constexpr int kParamWte = 0;
constexpr int kParamWpe = 1;
inline int block_param_index(int layer, BlockParam p) {
  return 2 + layer * static_cast<int>(BlockParam::kCount) + static_cast<int>(p);
}
inline int lnf_weight_index(int num_layers) { return 2 + num_layers * static_cast<int>(BlockParam::kCount); }
inline int lnf_bias_index(int num_layers) { return lnf_weight_index(num_layers) + 1; }

}  // namespace gpt2
