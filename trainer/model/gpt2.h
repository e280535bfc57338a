// gpt2.h — GPT-2 written once: forward, backward and the tensor-parallel layout of one rank.
//
// Is: token + position embedding, L blocks (LN -> causal self-attention -> residual -> LN -> MLP
// with tanh GELU -> residual), final LN, LM head tied to wte, cross-entropy; Megatron tensor
// parallelism over `tp_comm` (vocab-parallel embedding and cross-entropy, column-parallel QKV and
// fc, row-parallel projections); activation recompute; probe ranges for every phase
// (forward/embed, forward/block{i}/attn, forward/block{i}/mlp, forward/head, backward/head,
// backward/block{i}/mlp, backward/block{i}/attn, backward/embed and finer ones inside); a
// gradient-ready callback as soon as each parameter's gradient is final.
// Mixture of experts (options.moe): every MoeConfig::is_moe_block block runs an MoeMlp
// (moe_mlp.h) in place of the dense MLP, with ranges forward/block{i}/moe (ln_2 under
// forward/block{i}/moe/ln_2, then .../moe/router|dispatch|experts|combine) and the backward
// mirrors; the aux loss is added to ForwardStats::loss. Under TP the ln_2 output is replicated, and
// so is the MoE layer: every TP rank routes all B*T rows and dispatches them over its own ep{k}
// (whose members share its TP rank), with replicated router and expert weights. That costs TP x
// the expert compute but needs no TP collective in the layer (Megatron instead splits the rows
// 1/TP per rank and all-gathers after the combine). An MoE layer keeps its own activations in
// grow-only scratch (sized by the rows it received): --recompute does not shrink them and
// activation_bytes() does not count them.
// Attention (options.attention, ops.h AttentionKind): naive keeps (B,NH,T,T) probabilities per layer,
// flash a (B,NH,T) logsumexp; the model allocates what the backend asks for and never reads it.
// Is not: data loading, DP gradient sync, the optimizer (adamw.h) or the training loop. No CPU loop
// lives in gpt2.cpp: every element-wise or GEMM computation is an Ops call (ops.h).
//
// Usage (one TP rank; the trainer owns the loop):
//   auto model = GPT2::create({config, tp, Recompute::kNone, B, T}, ops, tp_comm).value();
//   model->init_weights(seed);                 // or load_full_weights(read_llmc_model(...))
//   model->params().zero_grads();
//   auto stats = model->forward(inputs, targets, probe, 1.0f / grad_accum);  // host (B,T); the
//   model->backward(1.0f / grad_accum, on_grad_ready, probe); // same scale: dlogits made in forward
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "model/checkpoint_io.h"
#include "model/config.h"
#include "model/moe_ops.h"
#include "model/ops.h"
#include "model/parameters.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {

// Called with a parameter's index in ParameterSet::infos() once its gradient for this backward
// pass is final. Order: ln_f.bias, ln_f.weight, block L-1 (mlp.c_proj.bias ... ln_1.weight), ...,
// block 0, then wpe.weight and wte.weight (the tied LM head, final after backward/embed).
using GradReadyFn = std::function<void(int param_index)>;

struct ForwardStats {
  float loss = 0;                   // mean cross-entropy over B*T plus the MoE aux losses (NaN when no targets given)
  int64_t embed_local_tokens = 0;   // input ids this rank's wte shard owned (embed.local_tokens)
  // MoE, summed over the MoE blocks (empty / 0 for a dense model): assignments this rank's router
  // made to each global expert before drops, rows this rank's experts received, slots dropped by
  // capacity, the aux losses (already times the coefficient, included in `loss`).
  std::vector<int64_t> moe_routed;
  int64_t moe_received = 0;
  int64_t moe_dropped = 0;
  float moe_aux_loss = 0;
};


class GPT2 {
 public:
  struct Options {
    ModelConfig config;
    TensorParallel tp;
    Recompute recompute = Recompute::kNone;
    int batch = 4;    // B: micro-batch
    int seq_len = 64; // T <= config.max_seq_len
    MoeConfig moe;    // experts == 0: dense
    ExpertParallel ep;
    // naive keeps (B,NH,T,T) probabilities per layer, flash a (B,NH,T) logsumexp (ops.h).
    AttentionKind attention = AttentionKind::kNaive;
    // Element type of activations and their gradients (activation_ptr.h). Master weights, AdamW
    // state, LayerNorm/softmax statistics and losses stay fp32 whatever this is. bf16 needs a backend
    // that computes in it (Ops::supports_activations; the CPU oracle is fp32 only) and a dense model.
    ActType activations = ActType::kF32;
  };

  // Validates the options, allocates parameters and all activations for (B,T) up front (no
  // allocation per step). `ops` must outlive the model. `tp_comm` may be null when tp_size == 1;
  // otherwise its size/rank must match options.tp.
  // MoE models need `moe_ops` (the MoE element loops of the same backend, must outlive the model)
  // and, when ep.ep_size > 1, `ep_comm` (this rank's ep{k}, rank ep.ep_rank of ep.ep_size).
  static Result<std::unique_ptr<GPT2>> create(const Options& options, Ops& ops,
                                              Communicator* tp_comm, Communicator* ep_comm = nullptr,
                                              MoeOps* moe_ops = nullptr);
  ~GPT2();

  const Options& options() const { return options_; }
  ParameterSet& params() { return *params_; }
  const ParameterSet& params() const { return *params_; }

  // Router logit bias (E floats) added on every MoE block from the next forward on (the
  // route-skew fault); an empty vector removes it. Fails on a dense model or a wrong size.
  Status set_router_logit_bias(const std::vector<float>& bias);
  // The next forward's first MoE block's combine uses wrong receive counts (a2a-miscount fault);
  // cleared after that forward.
  void inject_combine_miscount(CombineMiscount miscount);

  // Full TP=1 weights from one seed (GPT-2 init: N(0,0.02), c_proj weights N(0,0.02/sqrt(2L)),
  // LN weight 1, biases 0, padded wte rows 0), then this rank's slice: TP=N starts from exactly
  // the weights of TP=1.
  Status init_weights(uint64_t seed);
  // The three below move llm.c-ordered full weights, which have no MoE tensors: on an MoE model
  // they fail with a message saying so.
  // Takes this rank's slice of full weights (any Vp >= V; rows >= V are ignored / zeroed).
  Status load_full_weights(const FullWeights& full);
  // Gathers the full weights over the TP group (collective on tp_comm); Vp padded to 128 as llm.c.
  Result<FullWeights> gather_full_weights();
  // The same for the gradients (llm.c tensor order): for checks and debugging, not per step.
  Result<FullWeights> gather_full_gradients();

  // inputs, targets: host arrays of B*T token ids in [0, V). targets may be null (no loss).
  // backward_loss_scale (the fused classifier): given with targets, the loss pass also
  // turns the logits into the dlogits of backward(that scale) in place (no second pass over the
  // (N, Vl) logits in backward; logits() then holds dlogits). Not given, the logits stay intact
  // (sampling, evaluation, tests that read them) and backward computes the dlogits itself.
  Result<ForwardStats> forward(const int* inputs, const int* targets,
                               rankscope::probe::Probe* probe,
                               std::optional<float> backward_loss_scale = std::nullopt);
  // Accumulates into params().grads() the gradient of loss_scale * mean loss of the last forward
  // (which must have had targets). Calls on_grad_ready (may be empty) per parameter as above.
  // After a forward given backward_loss_scale, a different loss_scale rescales the fp32 dlogits
  // (one extra pass); with bf16 activations (or a forward scale of 0) it is an error.
  Status backward(float loss_scale, const GradReadyFn& on_grad_ready,
                  rankscope::probe::Probe* probe);

  // This rank's logits (B, T, Vp/tp), backend memory in the activation type, columns per
  // VocabShardMap. Valid after forward until backward (which turns them into dlogits in place);
  // after a forward given backward_loss_scale they already hold the dlogits.
  ConstActPtr logits() const;
  // Logit rows [first_row, first_row + rows) of this rank, copied to host as fp32 (bf16 widened).
  void copy_logits_to_host(float* host, size_t first_row, size_t rows) const;
  // Per-token losses (B, T), backend memory, valid after a forward with targets.
  const float* losses() const;
  // Bytes of activation buffers this model keeps for backward (depends on recompute), plus the
  // scratch it reuses: what the trainer prints as peak activation memory.
  size_t activation_bytes() const;

  struct Impl;

 private:
  GPT2(const Options& options, Ops& ops, Communicator* tp_comm);
  Status refuse_llmc_for_moe(const char* what) const;
  Result<FullWeights> gather_full(const float* buffer);
  Options options_;
  Ops& ops_;
  Communicator* tp_comm_;
  std::unique_ptr<ParameterSet> params_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt2
