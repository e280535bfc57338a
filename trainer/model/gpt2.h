// gpt2.h — GPT-2 written once: forward, backward and the tensor-parallel layout of one rank.
//
// Is: token + position embedding, L blocks (LN -> causal self-attention -> residual -> LN -> MLP
// with tanh GELU -> residual), final LN, LM head tied to wte, cross-entropy; Megatron tensor
// parallelism over `tp_comm` (vocab-parallel embedding and cross-entropy, column-parallel QKV and
// fc, row-parallel projections); activation recompute; probe ranges for every phase
// (forward/embed, forward/block{i}/attn, forward/block{i}/mlp, forward/head, backward/head,
// backward/block{i}/mlp, backward/block{i}/attn, backward/embed and finer ones inside); a
// gradient-ready callback as soon as each parameter's gradient is final.
// Is not: data loading, DP gradient sync, the optimizer (adamw.h) or the training loop. No CPU loop
// lives in gpt2.cpp: every element-wise or GEMM computation is an Ops call (ops.h).
//
// Usage (one TP rank; the trainer owns the loop):
//   auto model = GPT2::create({config, tp, Recompute::kNone, B, T}, ops, tp_comm).value();
//   model->init_weights(seed);                 // or load_full_weights(read_llmc_model(...))
//   model->params().zero_grads();
//   auto stats = model->forward(inputs, targets, probe);      // inputs, targets: host (B,T)
//   model->backward(1.0f / grad_accum, on_grad_ready, probe); // grads += d(mean loss)*scale
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/checkpoint_io.h"
#include "model/config.h"
#include "model/ops.h"
#include "model/parameters.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {

// Called with a parameter's index in ParameterSet::infos() once its gradient for this backward
// pass is final. Order: ln_f.bias, ln_f.weight, block L-1 (mlp.c_proj.bias ... ln_1.weight), ...,
// block 0, then wpe.weight and wte.weight (the tied LM head, final after backward/embed).
using GradReadyFn = std::function<void(int param_index)>;

struct ForwardStats {
  float loss = 0;                   // mean cross-entropy over B*T (NaN when no targets given)
  int64_t embed_local_tokens = 0;   // input ids this rank's wte shard owned (embed.local_tokens)
};

class GPT2 {
 public:
  struct Options {
    ModelConfig config;
    TensorParallel tp;
    Recompute recompute = Recompute::kNone;
    int batch = 4;    // B: micro-batch
    int seq_len = 64; // T <= config.max_seq_len
  };

  // Validates the options, allocates parameters and all activations for (B,T) up front (no
  // allocation per step). `ops` must outlive the model. `tp_comm` may be null when tp_size == 1;
  // otherwise its size/rank must match options.tp.
  static Result<std::unique_ptr<GPT2>> create(const Options& options, Ops& ops,
                                              Communicator* tp_comm);
  ~GPT2();

  const Options& options() const { return options_; }
  ParameterSet& params() { return *params_; }
  const ParameterSet& params() const { return *params_; }

  // Full TP=1 weights from one seed (GPT-2 init: N(0,0.02), c_proj weights N(0,0.02/sqrt(2L)),
  // LN weight 1, biases 0, padded wte rows 0), then this rank's slice: TP=N starts from exactly
  // the weights of TP=1.
  Status init_weights(uint64_t seed);
  // Takes this rank's slice of full weights (any Vp >= V; rows >= V are ignored / zeroed).
  Status load_full_weights(const FullWeights& full);
  // Gathers the full weights over the TP group (collective on tp_comm); Vp padded to 128 as llm.c.
  Result<FullWeights> gather_full_weights();
  // The same for the gradients (llm.c tensor order): for checks and debugging, not per step.
  Result<FullWeights> gather_full_gradients();

  // inputs, targets: host arrays of B*T token ids in [0, V). targets may be null (no loss).
  Result<ForwardStats> forward(const int* inputs, const int* targets,
                               rankscope::probe::Probe* probe);
  // Accumulates into params().grads() the gradient of loss_scale * mean loss of the last forward
  // (which must have had targets). Calls on_grad_ready (may be empty) per parameter as above.
  Status backward(float loss_scale, const GradReadyFn& on_grad_ready,
                  rankscope::probe::Probe* probe);

  // This rank's logits (B, T, Vp/tp), backend memory, columns per VocabShardMap. Valid after
  // forward until backward (which turns them into dlogits in place).
  const float* logits() const;
  // Per-token losses (B, T), backend memory, valid after a forward with targets.
  const float* losses() const;
  // Bytes of activation buffers this model keeps for backward (depends on recompute), plus the
  // scratch it reuses: what the trainer prints as peak activation memory.
  size_t activation_bytes() const;

  struct Impl;

 private:
  GPT2(const Options& options, Ops& ops, Communicator* tp_comm);
  Result<FullWeights> gather_full(const float* buffer);
  Options options_;
  Ops& ops_;
  Communicator* tp_comm_;
  std::unique_ptr<ParameterSet> params_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt2
