// cuda_ops.h — the CudaOps class: the CUDA implementation of gpt2::Ops (declarations only).
//
// Is: the host side of the backend — memory, the stream, scratch buffers, cuBLASLt — and one method
// per op that launches the kernels of kernels/*.cu (bodies in cuda_ops.cpp, cuda_ops_gemm.cpp,
// cuda_ops_attention.cpp: naive and flash attention). Every op is enqueued on one stream, so ops are ordered with respect to
// each other, as ops.h requires; ops that return a host value (embedding_lookup, sum) synchronize.
// Threads: the CUDA device is per thread; a thread other than the creator that calls ops must have
// called cudaSetDevice(options.device) (the NCCL communicator does so for its calls).
// Is not: public (it includes CUDA headers); the rest of the trainer sees cuda_backend.h.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <unordered_map>
#include <vector>

#include "model/ops.h"
#include "ops/cuda/cublaslt_gemm.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels/launch.h"
#include "ops/cuda/typed_activations.h"
#include "rankscope/format/status.h"

namespace gpt2::cuda {

class CudaOps final : public Ops {
 public:
  static rankscope::Result<std::unique_ptr<CudaOps>> create(const CudaOpsOptions& options);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  const char* name() const override { return "cuda"; }
  // bf16 activations: every op dispatches on ActPtr::type() to float or __nv_bfloat16 kernels.
  bool supports_activations(ActType) const override { return true; }
  cudaStream_t stream() const { return stream_; }
  CudaMemoryStats memory() const;

  void* alloc(size_t bytes) override;
  size_t alloc_granularity() const override { return kAllocGranularity; }
  size_t workspace_bytes(const WorkspaceShape& shape) const override;
  AllocationStats allocation_stats() const override { return {allocated_bytes_, peak_allocated_bytes_}; }
  void release(void* ptr) override;
  void fill_zero(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;

  int64_t embedding_lookup(ActPtr out, const int* ids, const float* wte_local, int N, int C,
                           const VocabShardMap& shard) override;
  void add_position(ActPtr out, const float* wpe, int B, int T, int C) override;
  void embedding_backward(float* dwte_local, float* dwpe, ConstActPtr dout, const int* ids, int B,
                          int T, int C, const VocabShardMap& shard) override;

  void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp,
                         const float* weight, const float* bias, int N, int C) override;
  void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                          ConstActPtr inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override;
  void residual_layernorm_forward(ActPtr residual_out, ActPtr ln_out, float* mean, float* rstd,
                                  ConstActPtr a, ConstActPtr b, const float* weight, const float* bias,
                                  int N, int C) override;

  void matmul_forward(ActPtr out, ConstActPtr inp, const float* weight, const float* bias, int N,
                      int C, int OC) override;
  void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                       ConstActPtr inp, const float* weight, int N, int C, int OC) override;
  void add_bias(ActPtr out, const float* bias, int N, int OC) override;
  void matmul_gelu_forward(ActPtr out, ActPtr pre_gelu, ConstActPtr inp, const float* weight, const float* bias,
                           int N, int C, int OC) override;
  void matmul_backward_dgelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                             const float* weight, ConstActPtr pre_gelu, int N, int C, int OC) override;

  void attention_forward(AttentionKind kind, ActPtr out, float* saved, ConstActPtr qkv, int B,
                         int T, int C, int NH) override;
  void attention_backward(AttentionKind kind, ActPtr dqkv, float* scratch, ConstActPtr dout,
                          ConstActPtr qkv, ConstActPtr out, const float* saved, int B, int T,
                          int C, int NH) override;

  void gelu_forward(ActPtr out, ConstActPtr inp, size_t n) override;
  void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, size_t n) override;
  void residual_forward(ActPtr out, ConstActPtr a, ConstActPtr b, size_t n) override;
  void add_inplace(ActPtr acc, ConstActPtr x, size_t n) override;

  void logits_row_max(float* row_max, ConstActPtr logits, int N, const VocabShardMap& shard) override;
  void softmax_stats(float* stats, ConstActPtr logits, const float* row_max, const int* targets,
                     int N, const VocabShardMap& shard) override;
  void crossentropy_losses(float* losses, const float* stats, const float* row_max, int N) override;
  void crossentropy_backward_inplace(ActPtr logits, const float* row_max, const float* stats,
                                     const int* targets, float dloss, int N,
                                     const VocabShardMap& shard) override;
  void crossentropy_partials(float* partials, ConstActPtr logits, const int* targets, int N,
                             const VocabShardMap& shard) override;
  void crossentropy_combine(float* row_max, float* stats, const float* gathered, int tp_size,
                            int N) override;
  void crossentropy_loss_backward_inplace(float* losses, ActPtr logits, const float* row_max,
                                          const float* stats, const int* targets, float dloss, int N,
                                          const VocabShardMap& shard) override;

  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t t) override;
  void adamw_update_segments(float* params, const float* grads, float* m, float* v, const AdamWSegment* segments,
                             size_t n_segments, float lr, float beta1, float beta2, float eps, float weight_decay,
                             int64_t t) override;
  double sum_squares(const float* x, size_t n) override;
  void scale(float* x, float s, size_t n) override;
  double sum(const float* x, size_t n) override;

 private:
  // Scratch buffers owned by the backend, grown on first need and reused (no allocation per step
  // once the largest shape has been seen).
  enum class Scratch : int {
    kAttentionHeads,  // split Q, K, V and the merged output, (B,NH,T,hs) each
    kAttentionGrads,  // dQ, dK, dV and d(att @ V), (B,NH,T,hs) each
    kGemmA,           // bf16 copies of GEMM operands (bf16 mode)
    kGemmB,
    kEmbeddingSort,   // sort keys/values and CUB's temporary storage
    kPartials,        // per-chunk partial sums (LayerNorm and bias gradients)
    kAdamWChunks,     // the fused AdamW's chunk table
    kCount
  };
  struct DeviceBuffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };

  CudaOps(const CudaOpsOptions& options) : options_(options) {}
  rankscope::Result<void*> scratch(Scratch slot, size_t bytes);
  // C (M,N) = alpha op(A) op(B) + beta C (+ bias). Operands are bf16 in the bf16 precision mode or
  // when either is bf16 (an fp32 one, e.g. a master weight, is cast into scratch first); C is fp32
  // or bf16; accumulation is fp32. The bias rides in the epilogue, or in a kernel if cuBLASLt refuses.
  rankscope::Status gemm(const RowMajorGemm& g, ConstActPtr a, ConstActPtr b, ActPtr c, const float* bias,
                         float alpha, float beta);
  // The same with any epilogue; false (nothing done) where cuBLASLt has no algorithm for it.
  rankscope::Result<bool> try_gemm(const RowMajorGemm& g, ConstActPtr a, ConstActPtr b, ActPtr c,
                                   const GemmEpilogue& epilogue, float alpha, float beta);
  rankscope::Status sum_impl(double* result, const float* x, size_t n, bool squares);
  // The naive path (cuBLASLt GEMMs around softmax kernels, att (B,NH,T,T) materialised).
  // fp32 activations: fp32 heads, att and GEMMs; bf16: bf16 heads, att and tensor-core GEMMs.
  rankscope::Status naive_attention_forward(ActPtr out, float* att, ConstActPtr qkv, int B, int T, int C, int NH);
  rankscope::Status naive_attention_backward(ActPtr dqkv, float* datt, ConstActPtr dout, ConstActPtr qkv,
                                             const float* att, int B, int T, int C, int NH);
  // bf16 activations: bf16 heads and tensor-core GEMMs (cuda_ops_attention.cpp).
  rankscope::Status naive_attention_backward_bf16(void* heads_buf, void* grads_buf, ActPtr dqkv, float* datt,
                                                  ConstActPtr dout, ConstActPtr qkv, const float* att, int B, int T,
                                                  int C, int NH);
  static ShardParams shard_params(const VocabShardMap& shard);

  CudaOpsOptions options_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CublasLtGemm> gemm_;
  int* owned_count_ = nullptr;  // device int: embedding_lookup's count
  double* sum_result_ = nullptr;  // device double: sum / sum_squares result
  double* sum_partials_ = nullptr;
  std::array<DeviceBuffer, static_cast<int>(Scratch::kCount)> scratch_{};
  // The fused AdamW's chunk table as last uploaded; uploaded again only when the segments change.
  std::vector<char> adamw_chunks_host_;
  size_t adamw_chunk_count_ = 0;
  // The bf16 copy of the master weights that bf16 GEMMs read instead of casting the fp32 weight on
  // every call: refreshed by one cast kernel at the end of each AdamW update, invalidated by any
  // copy or fill into the weights (init, checkpoint load), which sends GEMMs back to per-call casts
  // until the next update.
  struct WeightMirror {
    const float* base = nullptr;  // the params buffer AdamW updated
    size_t count = 0;             // floats covered
    void* copy = nullptr;         // __nv_bfloat16[count]
    bool valid = false;
  };
  // The mirror's bf16 view of `p` when it lies in the valid mirrored range, else null.
  const void* mirrored_bf16(const float* p, int64_t span) const;
  void refresh_weight_mirror(const float* params, size_t count);
  void invalidate_weight_mirror(const void* dst, size_t bytes);
  WeightMirror weight_mirror_;
  bool bf16_gemms_seen_ = false;  // a mirror is kept only once some GEMM ran in bf16
  static constexpr size_t kAllocGranularity = 256;  // cudaMalloc's alignment; alloc() rounds to it
  std::unordered_map<void*, size_t> allocations_;
  size_t allocated_bytes_ = 0;
  size_t peak_allocated_bytes_ = 0;
};

// Fatal error inside an op (the Ops interface has no Status): prints the status with its
// breadcrumb and a hint, then aborts; out of memory instead says so with the device's free memory
// and what to change, and exits 2.
[[noreturn]] void die_in_op(const rankscope::Status& status, const char* op);

}  // namespace gpt2::cuda

// Inside a void op: a failed Status or cudaError_t ends the process with a breadcrumb.
#define RS_CUDA_OP_MUST(expr)                                                         \
  do {                                                                                \
    ::rankscope::Status rs_op_status_ = ::gpt2::cuda::to_status((expr), #expr);       \
    if (!rs_op_status_.ok()) {                                                        \
      rs_op_status_.add_breadcrumb(__FILE__, __LINE__);                               \
      ::gpt2::cuda::die_in_op(rs_op_status_, __func__);                               \
    }                                                                                 \
  } while (0)

namespace gpt2::cuda {
inline rankscope::Status to_status(rankscope::Status s, const char*) { return s; }
rankscope::Status to_status(cudaError_t e, const char* what);
}  // namespace gpt2::cuda
