// launch.h — the launch wrappers of the CUDA backend's kernels: the only door from host code
// (cuda_ops*.cpp) into the .cu files of this folder.
//
// Is: one declaration per kernel launch, grouped by the .cu file that defines it, each with the
// shapes of its tensors. Every wrapper enqueues on `stream` and returns cudaGetLastError() of the
// launch, so the caller can leave a breadcrumb. Buffers are device memory; N = B*T rows.
// Is not: public. It includes the CUDA runtime API and is only seen by the gpt2_ops_cuda target
// (design rule 3): the rest of the trainer sees cuda_backend.h, which includes no CUDA header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

struct __nv_bfloat16;

namespace gpt2::cuda {

// A vocabulary shard as kernels see it (a POD copy of gpt2::VocabShardMap; ops.h stays host-only).
struct ShardParams {
  int strided;     // 1: local row j is global id j*tp_size + tp_rank; 0: contiguous
  int tp_size;
  int tp_rank;
  int local_rows;  // Vl = Vp / tp
  int real_cols;   // local columns whose global id < V (a prefix of the shard)
};

// --- embedding.cu (activations float or bf16; weights and their gradients fp32) ---
// out (N,C) = owned(ids[n]) * wte_local (Vl,C)[row(ids[n])]; *owned_count (one int, zeroed by the
// wrapper) += the number of owned ids. Masks are computed per token on the GPU, without branches.
cudaError_t launch_embedding_lookup(float* out, int* owned_count, const int* ids, const float* wte_local,
                                    int N, int C, ShardParams shard, cudaStream_t stream);
cudaError_t launch_embedding_lookup(__nv_bfloat16* out, int* owned_count, const int* ids, const float* wte_local,
                                    int N, int C, ShardParams shard, cudaStream_t stream);
// out (B,T,C) += wpe (maxT,C)[t]
cudaError_t launch_add_position(float* out, const float* wpe, int B, int T, int C, cudaStream_t stream);
cudaError_t launch_add_position(__nv_bfloat16* out, const float* wpe, int B, int T, int C, cudaStream_t stream);
// Bytes of scratch launch_embedding_backward needs for N tokens (sort keys, values and CUB's own).
size_t embedding_backward_scratch_bytes(int N, int local_rows);
// dwpe (maxT,C) += sum over b of dout (B,T,C); dwte_local (Vl,C) += owned dout rows. Deterministic:
// tokens are stably sorted by local row, and one block per distinct row sums its tokens in order.
cudaError_t launch_embedding_backward(float* dwte_local, float* dwpe, const float* dout, const int* ids,
                                      int B, int T, int C, ShardParams shard, void* scratch,
                                      size_t scratch_bytes, cudaStream_t stream);
cudaError_t launch_embedding_backward(float* dwte_local, float* dwpe, const __nv_bfloat16* dout, const int* ids,
                                      int B, int T, int C, ShardParams shard, void* scratch,
                                      size_t scratch_bytes, cudaStream_t stream);

// --- layernorm.cu (eps 1e-5; activations float or bf16, weight/bias/mean/rstd/dweight/dbias fp32) ---
// out (N,C) = (inp - mean) * rstd * weight (C) + bias (C); mean, rstd (N) =
cudaError_t launch_layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                     const float* weight, const float* bias, int N, int C,
                                     cudaStream_t stream);
cudaError_t launch_layernorm_forward(__nv_bfloat16* out, float* mean, float* rstd, const __nv_bfloat16* inp,
                                     const float* weight, const float* bias, int N, int C,
                                     cudaStream_t stream);
// residual (N,C) = a + b (may alias a or b); out, mean, rstd = the LayerNorm of residual as stored.
// One warp per row, a and b read once; same bits as launch_residual_forward + launch_layernorm_forward.
cudaError_t launch_residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd,
                                              const float* a, const float* b, const float* weight,
                                              const float* bias, int N, int C, cudaStream_t stream);
cudaError_t launch_residual_layernorm_forward(__nv_bfloat16* residual, __nv_bfloat16* out, float* mean,
                                              float* rstd, const __nv_bfloat16* a, const __nv_bfloat16* b,
                                              const float* weight, const float* bias, int N, int C,
                                              cudaStream_t stream);
// Floats of scratch launch_layernorm_backward needs (per-chunk partial sums of dweight, dbias).
size_t layernorm_backward_scratch_floats(int N, int C);
// dinp (N,C) +=, dweight (C) +=, dbias (C) += (two-stage fixed-order reduction: deterministic).
// The dinp += is one kernel: the residual + LayerNorm backward fused (dinp is the residual gradient).
cudaError_t launch_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                      const float* inp, const float* weight, const float* mean,
                                      const float* rstd, int N, int C, float* scratch,
                                      cudaStream_t stream);
cudaError_t launch_layernorm_backward(__nv_bfloat16* dinp, float* dweight, float* dbias, const __nv_bfloat16* dout,
                                      const __nv_bfloat16* inp, const float* weight, const float* mean,
                                      const float* rstd, int N, int C, float* scratch,
                                      cudaStream_t stream);

// --- bias.cu ---
// out (N,OC) += bias (OC)
cudaError_t launch_add_bias(float* out, const float* bias, int N, int OC, cudaStream_t stream);
cudaError_t launch_add_bias(__nv_bfloat16* out, const float* bias, int N, int OC, cudaStream_t stream);
size_t column_sums_scratch_floats(int N, int OC);
// dbias (OC) += column sums of dout (N,OC) (two-stage fixed-order reduction: deterministic; fp32
// sums also for bf16 dout).
cudaError_t launch_column_sums_accumulate(float* dbias, const float* dout, int N, int OC,
                                          float* scratch, cudaStream_t stream);
cudaError_t launch_column_sums_accumulate(float* dbias, const __nv_bfloat16* dout, int N, int OC,
                                          float* scratch, cudaStream_t stream);

// --- attention.cu (the GEMMs between these kernels run through cuBLASLt, in cuda_ops_attention.cpp) ---
// heads (B,NH,T,hs) = src (B,T,ld)[..., offset + h*hs + d]: one of Q, K, V out of qkv (ld = 3C).
// The heads are fp32 whatever the activations are (naive attention computes in fp32 throughout).
cudaError_t launch_split_heads(float* heads, const float* src, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream);
cudaError_t launch_split_heads(float* heads, const __nv_bfloat16* src, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream);
// dst (B,T,ld)[..., offset + h*hs + d] = heads (B,NH,T,hs): the inverse of split_heads.
cudaError_t launch_merge_heads(float* dst, const float* heads, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream);
cudaError_t launch_merge_heads(__nv_bfloat16* dst, const float* heads, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream);
// In place over att (rows, T), row r at query position t = r % T: softmax of the scaled scores
// att[r][0..t]; att[r][t+1..T) = 0 (causal mask).
cudaError_t launch_causal_softmax(float* att, long rows, int T, cudaStream_t stream);
// In place over datt (rows, T): datt = att * (datt - sum_j att*datt) on j <= t, 0 above.
cudaError_t launch_causal_softmax_backward(float* datt, const float* att, long rows, int T,
                                           cudaStream_t stream);
// The bf16 naive path (tensor-core GEMMs): heads stay bf16; the softmax reads raw scores, applies
// `scale` (1/sqrt(hs)) and the mask in fp32 and writes bf16 probabilities (a fused scaled, masked
// softmax); the backward is the same formula on bf16 att and datt, fp32 inside.
cudaError_t launch_split_heads(__nv_bfloat16* heads, const __nv_bfloat16* src, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream);
cudaError_t launch_merge_heads(__nv_bfloat16* dst, const __nv_bfloat16* heads, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream);
cudaError_t launch_causal_softmax(__nv_bfloat16* att, long rows, int T, float scale, cudaStream_t stream);
cudaError_t launch_causal_softmax_backward(__nv_bfloat16* datt, const __nv_bfloat16* att, long rows, int T,
                                           cudaStream_t stream);

// --- flash_attention.cu (causal; Q, K, V read from qkv (B,T,3C), no (B,NH,T,T) buffer) ---
// Head sizes 32, 64, 128 (else cudaErrorInvalidValue); any T; B*NH <= 65535. float or bf16 in and
// out, fp32 inside. out (B,T,C) =; lse (B,NH,T) = logsumexp of each scaled, masked score row.
cudaError_t launch_flash_attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C,
                                           int NH, cudaStream_t stream);
cudaError_t launch_flash_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B,
                                           int T, int C, int NH, cudaStream_t stream);
// dqkv (B,T,3C) = gradient given dout (B,T,C), the forward's out and lse; dsum (B,NH,T) is scratch
// (D = rowsum(dout * out)). Deterministic: no atomics (dK/dV and dQ are separate kernels).
cudaError_t launch_flash_attention_backward(float* dqkv, float* dsum, const float* dout, const float* qkv,
                                            const float* out, const float* lse, int B, int T, int C, int NH,
                                            cudaStream_t stream);
cudaError_t launch_flash_attention_backward(__nv_bfloat16* dqkv, float* dsum, const __nv_bfloat16* dout,
                                            const __nv_bfloat16* qkv, const __nv_bfloat16* out,
                                            const float* lse, int B, int T, int C, int NH,
                                            cudaStream_t stream);

// D (B,NH,T) = rowsum(dout * out) per head row: the first step of either backward (tensor-core too).
cudaError_t launch_flash_attention_row_dot(float* dsum, const __nv_bfloat16* dout, const __nv_bfloat16* out, int B,
                                           int T, int C, int NH, cudaStream_t stream);

// --- flash_attention_tc.cu (tensor cores: bf16 in and out, head size 64 only, causal, fp32 inside) ---
// The same contract as the flash_attention.cu wrappers above, for C == 64 * NH and B*NH <= 65535
// (else cudaErrorInvalidValue); qkv, out, dout, dqkv 16-byte aligned (the caller checks: the kernels
// copy 16-byte chunks). The backward reads dsum = D, filled first by launch_flash_attention_row_dot.
cudaError_t launch_flash_attention_tc_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T,
                                              int C, int NH, cudaStream_t stream);
cudaError_t launch_flash_attention_tc_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout,
                                               const __nv_bfloat16* qkv, const float* lse, const float* dsum,
                                               int B, int T, int C, int NH, cudaStream_t stream);
// The building blocks alone, for tests/gpu/flash_tc_layout_test.cpp: q (16,64), k, v (64,64) bf16
// row-major -> s (16,64) = q k^T and o (16,64) = bf16(s) v in fp32, one block.
cudaError_t launch_flash_attention_tc_layout_probe(float* s, float* o, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                   const __nv_bfloat16* v, cudaStream_t stream);

// --- gelu.cu (tanh approximation; float or bf16, computed in float) ---
cudaError_t launch_gelu_forward(float* out, const float* inp, size_t n, cudaStream_t stream);
cudaError_t launch_gelu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, size_t n, cudaStream_t stream);
// dinp (n) = dout * gelu'(inp); dinp may alias dout.
cudaError_t launch_gelu_backward(float* dinp, const float* inp, const float* dout, size_t n,
                                 cudaStream_t stream);
cudaError_t launch_gelu_backward(__nv_bfloat16* dinp, const __nv_bfloat16* inp, const __nv_bfloat16* dout,
                                 size_t n, cudaStream_t stream);

// --- residual.cu (float or bf16 activations; scale: fp32 gradients) ---
cudaError_t launch_residual_forward(float* out, const float* a, const float* b, size_t n,
                                    cudaStream_t stream);                                  // out = a + b
cudaError_t launch_residual_forward(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b,
                                    size_t n, cudaStream_t stream);
cudaError_t launch_add_inplace(float* acc, const float* x, size_t n, cudaStream_t stream);  // acc += x
cudaError_t launch_add_inplace(__nv_bfloat16* acc, const __nv_bfloat16* x, size_t n, cudaStream_t stream);
cudaError_t launch_scale(float* x, float s, size_t n, cudaStream_t stream);                 // x *= s

// --- crossentropy.cu (vocab-parallel, over logits (N,Vl), Vl = shard.local_rows; logits fp32 or
// bf16, every statistic and loss fp32) ---
// row_max (N) = max over the real columns; -inf when the shard has none.
cudaError_t launch_logits_row_max(float* row_max, const float* logits, int N, ShardParams shard,
                                  cudaStream_t stream);
cudaError_t launch_logits_row_max(float* row_max, const __nv_bfloat16* logits, int N, ShardParams shard,
                                  cudaStream_t stream);
// stats (2N) = [sum_j exp(l_j - row_max) | owned(target) * l_target]
cudaError_t launch_softmax_stats(float* stats, const float* logits, const float* row_max,
                                 const int* targets, int N, ShardParams shard, cudaStream_t stream);
cudaError_t launch_softmax_stats(float* stats, const __nv_bfloat16* logits, const float* row_max,
                                 const int* targets, int N, ShardParams shard, cudaStream_t stream);
// losses (N) = log(stats[n]) + row_max[n] - stats[N+n]
cudaError_t launch_crossentropy_losses(float* losses, const float* stats, const float* row_max, int N,
                                       cudaStream_t stream);
// In place: logits (N,Vl) = (softmax - onehot(target)) * dloss; padded columns 0. The
// probabilities are never stored apart from the logits they replace.
cudaError_t launch_crossentropy_backward_inplace(float* logits, const float* row_max, const float* stats,
                                                 const int* targets, float dloss, int N,
                                                 ShardParams shard, cudaStream_t stream);
cudaError_t launch_crossentropy_backward_inplace(__nv_bfloat16* logits, const float* row_max, const float* stats,
                                                 const int* targets, float dloss, int N,
                                                 ShardParams shard, cudaStream_t stream);
// The fused classifier (ops.h). partials (3N) = [this shard's max | sum exp(l - that max) |
// owned(target) * l_target], one read of each row (online softmax).
cudaError_t launch_crossentropy_partials(float* partials, const float* logits, const int* targets, int N,
                                         ShardParams shard, cudaStream_t stream);
cudaError_t launch_crossentropy_partials(float* partials, const __nv_bfloat16* logits, const int* targets,
                                         int N, ShardParams shard, cudaStream_t stream);
// gathered (tp_size, 3N) partials -> row_max (N), stats (2N) as softmax_stats + all-reduce give them.
cudaError_t launch_crossentropy_combine(float* row_max, float* stats, const float* gathered, int tp_size, int N,
                                        cudaStream_t stream);
// losses (N) and, in place, logits -> dlogits, in one pass over each row.
cudaError_t launch_crossentropy_loss_backward_inplace(float* losses, float* logits, const float* row_max,
                                                      const float* stats, const int* targets, float dloss,
                                                      int N, ShardParams shard, cudaStream_t stream);
cudaError_t launch_crossentropy_loss_backward_inplace(float* losses, __nv_bfloat16* logits, const float* row_max,
                                                      const float* stats, const int* targets, float dloss,
                                                      int N, ShardParams shard, cudaStream_t stream);

// --- adamw.cu ---
// params, grads, m, v (n); bias corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t from the host.
cudaError_t launch_adamw(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2,
                         cudaStream_t stream);
// A slice of one tensor of a flat parameter buffer: elements [begin, begin + count), decayed or not.
struct AdamWChunk {
  size_t begin;
  uint32_t count;
  uint32_t decay;
};
// Chunks (device memory, n_chunks of them) of at most kAdamWChunkElements elements each: one launch.
inline constexpr uint32_t kAdamWChunkElements = 64 * 1024;
cudaError_t launch_adamw_chunks(float* params, const float* grads, float* m, float* v, const AdamWChunk* chunks,
                                size_t n_chunks, float lr, float beta1, float beta2, float eps, float weight_decay,
                                float bc1, float bc2, cudaStream_t stream);

// --- reduce.cu ---
// Doubles of scratch launch_sum needs (fixed-size partials: the result does not depend on timing).
size_t reduce_scratch_doubles();
// *out (one double, device) = sum of x (n), or of x^2 when `squares`.
cudaError_t launch_sum(double* out, const float* x, size_t n, bool squares, double* scratch,
                       cudaStream_t stream);

// --- cast.cu ---
// out (n) = bf16(round-to-nearest-even of in (n)): GEMM inputs of the bf16 precision mode.
cudaError_t launch_cast_to_bf16(__nv_bfloat16* out, const float* in, size_t n, cudaStream_t stream);

// --- spin.cu ---
// One thread busy-waits `cycles` of the SM clock: the gpu-stall fault (a kernel that does not end).
cudaError_t launch_spin(long long cycles, cudaStream_t stream);

// --- moe.cu (shapes and semantics of each: model/moe_ops.h) ---
cudaError_t launch_moe_router_forward(float* probs, int32_t* expert, float* gate, const float* logits,
                                      const float* logit_bias, int N, int E, int K, cudaStream_t stream);
cudaError_t launch_moe_router_backward(float* dlogits, const float* probs, const int32_t* expert,
                                       const float* gate, const float* dgate, const float* aux_dprob, int N,
                                       int E, int K, cudaStream_t stream);
cudaError_t launch_moe_probs_column_sum(float* prob_sum, const float* probs, int N, int E, cudaStream_t stream);
cudaError_t launch_moe_gather_rows(float* out, const float* in, const int32_t* src_row, int R, int C,
                                   cudaStream_t stream);
cudaError_t launch_moe_scatter_rows(float* out, const float* in, const int32_t* dst_row, int R, int C,
                                    cudaStream_t stream);
cudaError_t launch_moe_slot_rows_backward(float* dinp, const float* drows, const int32_t* row_of_slot, int N,
                                          int K, int C, cudaStream_t stream);
cudaError_t launch_moe_combine_forward(float* out, const float* rows, const float* gate,
                                       const int32_t* row_of_slot, int N, int K, int C, cudaStream_t stream);
cudaError_t launch_moe_combine_backward(float* drows, float* dgate, const float* dout, const float* rows,
                                        const float* gate, const int32_t* row_of_slot, int N, int K, int C,
                                        cudaStream_t stream);

}  // namespace gpt2::cuda
