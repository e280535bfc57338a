// ops.h — the backend interface the GPT-2 model calls: every loop over tensor elements is here.
//
// Is: a table of ops (memory, matmul, matmul with GELU fused, layernorm (alone and fused with the
// residual add before it), attention (naive or flash), gelu, residual, embedding, vocab-parallel
// cross-entropy, AdamW, reductions) with the shape of every argument.
// The model (gpt2.cpp) is written once against this interface; the CPU backend (trainer/ops/cpu/,
// fp32, OpenBLAS, OpenMP: the numerical oracle) implements it and a CUDA backend is a second
// implementation. Pointers returned by alloc() live where the backend computes (host for CPU,
// device for CUDA); token ids passed to ops have been copied there with copy_from_host().
// Is not: communication (the model calls the Communicator between ops) or any model logic.
//
// Conventions: N = B*T rows; C = channels; OC = output features. Matrices are row-major. Weights
// are (OC, C) as in torch.nn.Linear. "+=" means the op accumulates into that output; "=" means it
// overwrites. All ops are synchronous with respect to later ops of the same backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/activation_ptr.h"

namespace gpt2 {

// How attention is computed: naive materialises the (B,NH,T,T) probabilities (memory and time
// grow with T^2: the seq-len cliff of our incident reports); flash never does (tiles, online
// softmax, logsumexp kept for backward). Both compute the same function.
enum class AttentionKind : int { kNaive = 0, kFlash = 1 };
constexpr const char* attention_kind_name(AttentionKind kind) {
  return kind == AttentionKind::kFlash ? "flash" : "naive";
}
// Floats of the buffers the backends of this repository use for each kind (see Ops::attention_*).
constexpr size_t default_attention_floats(AttentionKind kind, int B, int T, int NH) {
  const size_t rows = static_cast<size_t>(B) * static_cast<size_t>(NH) * static_cast<size_t>(T);
  return kind == AttentionKind::kFlash ? rows : rows * static_cast<size_t>(T);
}

// Which global token ids this rank's vocab shard owns; see VocabShard in config.h.
struct VocabShardMap {
  bool strided = false;  // false: contiguous
  int tp_size = 1;
  int tp_rank = 0;
  int local_rows = 0;    // Vp / tp
  int vocab_size = 0;    // V: global ids >= V are padding
  // Global token id of local row j.
  int global_id(int j) const { return strided ? j * tp_size + tp_rank : tp_rank * local_rows + j; }
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual const char* name() const = 0;  // "cpu", "cuda"
  // Whether the ops below accept activations (ActPtr / ConstActPtr arguments) of this type. Every
  // activation argument of one call has the same type; everything typed float* is always fp32.
  virtual bool supports_activations(ActType type) const { return type == ActType::kF32; }

  // --- memory (backend-resident buffers; 64-byte aligned; alloc zero-fills) ---
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  virtual void fill_zero(void* ptr, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // --- memory accounting (model/memory_estimate.h: the estimate before the first step) ---
  // alloc() rounds every request up to a multiple of this (a request of 0 takes one unit).
  virtual size_t alloc_granularity() const { return 64; }
  // The shape of one rank's model, for the backend's own scratch (split heads, casts, partials).
  struct WorkspaceShape {
    int B = 0, T = 0, C = 0, Cl = 0, NHl = 0, Vl = 0;  // Cl, NHl, Vl: this TP rank's share
    size_t parameters = 0;  // ParameterSet::total_numel (a backend may mirror the weights)
    AttentionKind attention = AttentionKind::kNaive;
    ActType activations = ActType::kF32;
  };
  // Bytes the backend will hold outside alloc() once a step of this shape has run (0 for the CPU,
  // whose scratch is transient host memory).
  virtual size_t workspace_bytes(const WorkspaceShape&) const { return 0; }
  // alloc() minus release() now, and its high-water mark; zeros where a backend does not count.
  struct AllocationStats {
    size_t in_use = 0;
    size_t peak = 0;
  };
  virtual AllocationStats allocation_stats() const { return {}; }

  // --- embedding (vocab-parallel) ---
  // out (N,C) = wte_local[local row of ids[n]] where this shard owns ids[n], else 0. Foreign ids are
  // masked arithmetically (no per-token branch). Returns how many of the N ids this shard owns.
  virtual int64_t embedding_lookup(ActPtr out, const int* ids, const float* wte_local, int N, int C,
                                   const VocabShardMap& shard) = 0;
  // out (B,T,C) += wpe (maxT,C) rows 0..T-1, broadcast over B.
  virtual void add_position(ActPtr out, const float* wpe, int B, int T, int C) = 0;
  // dwte_local (Vp/tp,C) += dout rows of owned ids; dwpe (maxT,C) += sum over B of dout (B,T,C).
  virtual void embedding_backward(float* dwte_local, float* dwpe, ConstActPtr dout, const int* ids,
                                  int B, int T, int C, const VocabShardMap& shard) = 0;

  // --- layernorm: out (N,C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) = ---
  virtual void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp,
                                 const float* weight, const float* bias, int N, int C) = 0;
  // dinp (N,C) +=, dweight (C) +=, dbias (C) +=; uses the forward's mean and rstd.
  virtual void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                  ConstActPtr inp, const float* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;
  // The residual add fused with the LayerNorm that follows it: residual_out (N,C) = a + b, then
  // ln_out (N,C), mean, rstd (N) = layernorm_forward of residual_out (statistics of the stored,
  // rounded residual, so backward, which reads residual_out, sees the values they describe).
  // residual_out may alias a or b. The default composes the two ops; a backend overrides it to
  // read a and b once (the model calls it at residual2 + ln_2 and residual3 + the next ln_1/ln_f).
  // The backward needs no fused op: layernorm_backward already accumulates dinp += into the
  // residual stream's gradient.
  virtual void residual_layernorm_forward(ActPtr residual_out, ActPtr ln_out, float* mean, float* rstd,
                                          ConstActPtr a, ConstActPtr b, const float* weight,
                                          const float* bias, int N, int C) {
    residual_forward(residual_out, a, b, static_cast<size_t>(N) * static_cast<size_t>(C));
    layernorm_forward(ln_out, mean, rstd, residual_out, weight, bias, N, C);
  }

  // --- matmul (GEMM) ---
  // out (N,OC) = inp (N,C) @ weight(OC,C)^T + bias (OC) (bias may be null).
  virtual void matmul_forward(ActPtr out, ConstActPtr inp, const float* weight, const float* bias,
                              int N, int C, int OC) = 0;
  // dinp (N,C) = dout @ weight (may be null: not wanted); dweight (OC,C) += dout^T @ inp;
  // dbias (OC) += column sums of dout (may be null).
  virtual void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                               ConstActPtr inp, const float* weight, int N, int C, int OC) = 0;
  // out (N,OC) += bias (OC): the row-parallel bias, added once after the all-reduce.
  virtual void add_bias(ActPtr out, const float* bias, int N, int OC) = 0;

  // --- causal self-attention over this rank's NH heads (head size hs = C/NH) ---
  // qkv (B,T,3C) holds [Q | K | V], each (C) = NH heads of hs; out (B,T,C) = softmax(causally
  // masked Q K^T / sqrt(hs)) @ V per head. The interface names no (B,NH,T,T) matrix: forward fills
  // `saved`, an opaque per-layer buffer of attention_saved_floats() floats that only backward reads,
  // and backward uses `scratch` of attention_scratch_floats() floats. The caller allocates both
  // (backend memory) and never interprets them; `out` must still hold the forward's output when
  // backward runs (flash reads it). What the buffers hold is the kind's business:
  //   kNaive: saved = the probabilities (B,NH,T,T); scratch = their gradient (B,NH,T,T).
  //   kFlash: saved = the logsumexp of each score row (B,NH,T); scratch = D = rowsum(dO * O)
  //           (B,NH,T); probabilities are recomputed tile by tile in backward (FlashAttention-2).
  virtual size_t attention_saved_floats(AttentionKind kind, int B, int T, int NH) const {
    return default_attention_floats(kind, B, T, NH);
  }
  virtual size_t attention_scratch_floats(AttentionKind kind, int B, int T, int NH) const {
    return default_attention_floats(kind, B, T, NH);
  }
  virtual void attention_forward(AttentionKind kind, ActPtr out, float* saved, ConstActPtr qkv,
                                 int B, int T, int C, int NH) = 0;
  // dqkv (B,T,3C) =, given dout (B,T,C), the forward's qkv, out and saved; scratch is overwritten.
  virtual void attention_backward(AttentionKind kind, ActPtr dqkv, float* scratch, ConstActPtr dout,
                                  ConstActPtr qkv, ConstActPtr out, const float* saved, int B,
                                  int T, int C, int NH) = 0;

  // --- GELU (tanh approximation) and residual ---
  virtual void gelu_forward(ActPtr out, ConstActPtr inp, size_t n) = 0;                    // out =
  // dinp = dout * GELU'(inp); the model passes dinp == dout (in place), so it must allow that.
  virtual void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, size_t n) = 0;
  virtual void residual_forward(ActPtr out, ConstActPtr a, ConstActPtr b, size_t n) = 0;   // out = a + b
  virtual void add_inplace(ActPtr acc, ConstActPtr x, size_t n) = 0;                       // acc += x

  // --- the MLP's GEMM with GELU fused (cuBLASLt's GELU epilogues on CUDA) ---
  // pre_gelu (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC), kept for backward (the aux output);
  // out (N,OC) = GELU(pre_gelu). The default composes matmul_forward and gelu_forward.
  virtual void matmul_gelu_forward(ActPtr out, ActPtr pre_gelu, ConstActPtr inp, const float* weight,
                                   const float* bias, int N, int C, int OC) {
    matmul_forward(pre_gelu, inp, weight, bias, N, C, OC);
    gelu_forward(out, pre_gelu, static_cast<size_t>(N) * OC);
  }
  // The backward of a GEMM whose input was GELU(pre_gelu) (the MLP's projection): dpre (N,C) =
  // (dout (N,OC) @ weight (OC,C)) * GELU'(pre_gelu (N,C)), the gradient of the GELU's input;
  // dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums of dout (may be null). inp is
  // GELU(pre_gelu) as the forward used it. The default composes matmul_backward and gelu_backward.
  virtual void matmul_backward_dgelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout,
                                     ConstActPtr inp, const float* weight, ConstActPtr pre_gelu, int N,
                                     int C, int OC) {
    matmul_backward(dpre, dweight, dbias, dout, inp, weight, N, C, OC);
    gelu_backward(dpre, pre_gelu, dpre, static_cast<size_t>(N) * C);
  }

  // --- vocab-parallel cross-entropy over logits (N, Vl), Vl = shard.local_rows ---
  // Padded columns (global id >= V) never enter max or sum.
  // row_max (N) = max over this shard's real columns (-inf when it has none).
  virtual void logits_row_max(float* row_max, ConstActPtr logits, int N, const VocabShardMap& shard) = 0;
  // Packed for ONE sum all-reduce: stats (2N) = [sum_j exp(logit - max) for N rows | the target's
  // logit if this shard owns the target else 0 for N rows]. row_max is the global max.
  virtual void softmax_stats(float* stats, ConstActPtr logits, const float* row_max,
                             const int* targets, int N, const VocabShardMap& shard) = 0;
  // losses (N) = log(sum) + max - target_logit, from the all-reduced stats.
  virtual void crossentropy_losses(float* losses, const float* stats, const float* row_max, int N) = 0;
  // In place: logits (N,Vl) becomes dlogits = (softmax - onehot(target)) * dloss; padded columns 0.
  virtual void crossentropy_backward_inplace(ActPtr logits, const float* row_max, const float* stats,
                                             const int* targets, float dloss, int N,
                                             const VocabShardMap& shard) = 0;

  // --- the fused classifier: three ops, one collective, probabilities never stored ---
  // The model runs crossentropy_partials -> ONE all_gather of the (3N) partials over TP ->
  // crossentropy_combine -> crossentropy_loss_backward_inplace (or crossentropy_losses when the
  // logits must survive). The defaults compose the ops above; backends override with one pass each.
  //
  // partials (3N) = [m | s | t] for this shard alone: m = max over this shard's real columns (-inf
  // when it has none), s = sum_j exp(l_j - m) (0 when none), t = the target's logit if this shard
  // owns it, else 0. CUDA reads each row once (online softmax); the CPU oracle twice from cache.
  virtual void crossentropy_partials(float* partials, ConstActPtr logits, const int* targets, int N,
                                     const VocabShardMap& shard) {
    logits_row_max(partials, logits, N, shard);
    softmax_stats(partials + N, logits, partials, targets, N, shard);
  }
  // gathered (tp_size, 3N): every rank's partials in rank order (what all_gather returns) ->
  // row_max (N) = M = max_r m_r and stats (2N) = [S = sum_r s_r exp(m_r - M) | sum_r t_r] (only the
  // owner's t_r is nonzero), the layout softmax_stats + all-reduce produce, so the ops above read it.
  // Small (3N * tp floats): the default computes on the host through copy_to_host/copy_from_host.
  virtual void crossentropy_combine(float* row_max, float* stats, const float* gathered, int tp_size,
                                    int N);  // defined after the class
  // From the combined row_max and stats: losses (N) = log(S) + M - target logit AND, in place,
  // logits (N,Vl) become dlogits = (softmax - onehot(target)) * dloss; padded columns 0. One pass.
  virtual void crossentropy_loss_backward_inplace(float* losses, ActPtr logits, const float* row_max,
                                                  const float* stats, const int* targets, float dloss,
                                                  int N, const VocabShardMap& shard) {
    crossentropy_losses(losses, stats, row_max, N);
    crossentropy_backward_inplace(logits, row_max, stats, targets, dloss, N, shard);
  }

  // --- optimizer and reductions ---
  // AdamW with bias correction at step t (1-based); decay is decoupled: p -= lr * wd * p.
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                            float lr, float beta1, float beta2, float eps, float weight_decay,
                            int64_t t) = 0;
  // The same over every tensor of a flat parameter buffer in one call: segment i is elements
  // [offset, offset + numel) of params, grads, m and v, decayed by weight_decay only if `decay`.
  // The default calls adamw_update per segment (CPU); the CUDA backend makes it one kernel launch,
  // so a step's optimizer costs one launch instead of one per tensor (~150 at d12).
  struct AdamWSegment {
    size_t offset = 0;
    size_t numel = 0;
    bool decay = false;
  };
  virtual void adamw_update_segments(float* params, const float* grads, float* m, float* v,
                                     const AdamWSegment* segments, size_t n_segments, float lr,
                                     float beta1, float beta2, float eps, float weight_decay,
                                     int64_t t) {
    for (size_t i = 0; i < n_segments; i++) {
      const AdamWSegment& s = segments[i];
      adamw_update(params + s.offset, grads + s.offset, m + s.offset, v + s.offset, s.numel, lr, beta1,
                   beta2, eps, s.decay ? weight_decay : 0.0f, t);
    }
  }
  virtual double sum_squares(const float* x, size_t n) = 0;  // in double
  virtual void scale(float* x, float s, size_t n) = 0;        // x *= s
  virtual double sum(const float* x, size_t n) = 0;            // in double
};

}  // namespace gpt2

#include "model/crossentropy_combine.h"

namespace gpt2 {

inline void Ops::crossentropy_combine(float* row_max, float* stats, const float* gathered,
                                      int tp_size, int N) {
  const size_t n3 = 3 * static_cast<size_t>(N) * static_cast<size_t>(tp_size);
  std::vector<float> host_gathered(n3), host_max(N), host_stats(2 * static_cast<size_t>(N));
  copy_to_host(host_gathered.data(), gathered, n3 * sizeof(float));
  for (int n = 0; n < N; n++) combine_crossentropy_row(host_max.data(), host_stats.data(), host_gathered.data(), tp_size, N, n);
  copy_from_host(row_max, host_max.data(), host_max.size() * sizeof(float));
  copy_from_host(stats, host_stats.data(), host_stats.size() * sizeof(float));
}

}  // namespace gpt2
