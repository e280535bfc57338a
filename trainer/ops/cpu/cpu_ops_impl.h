// cpu_ops_impl.h — the CpuOps class: declarations only; each op's body is in its own file
// (matmul.cpp, layernorm.cpp, attention.cpp + flash_attention.cpp, gelu.cpp, residual.cpp,
// embedding.cpp, crossentropy.cpp, adamw.cpp, reduce.cpp; memory in cpu_ops.cpp).
// Is not: public; the rest of the trainer sees only make_cpu_ops() (cpu_ops.h).
#pragma once

#include <mutex>
#include <unordered_map>

#include "model/ops.h"

namespace gpt2::cpu {

class CpuOps final : public Ops {
 public:
  const char* name() const override { return "cpu"; }

  void* alloc(size_t bytes) override;
  void release(void* ptr) override;
  void fill_zero(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  size_t alloc_granularity() const override { return kAlignment; }
  AllocationStats allocation_stats() const override;

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
  double sum_squares(const float* x, size_t n) override;
  void scale(float* x, float s, size_t n) override;
  double sum(const float* x, size_t n) override;

 private:
  static constexpr size_t kAlignment = 64;
  // Sizes of live allocations, for allocation_stats() (memory_estimate_test checks the estimate
  // against them). Not on any per-step path: the model allocates up front.
  mutable std::mutex allocations_mutex_;
  std::unordered_map<void*, size_t> allocation_sizes_;
  AllocationStats stats_;
};

// Local columns of a vocab shard that are real tokens (global id < V). For both shardings the real
// columns are a prefix of the shard: contiguous [0, V - rank*rows), strided j*tp+rank < V.
inline int real_vocab_columns(const VocabShardMap& s) {
  long real;
  if (s.strided) {
    real = (static_cast<long>(s.vocab_size) - s.tp_rank + s.tp_size - 1) / s.tp_size;
  } else {
    real = static_cast<long>(s.vocab_size) - static_cast<long>(s.tp_rank) * s.local_rows;
  }
  if (real < 0) real = 0;
  if (real > s.local_rows) real = s.local_rows;
  return static_cast<int>(real);
}

// Branch-free ownership of a global token id: `owned` is 1 when this shard holds the id, and
// `row` is its local row (0 when foreign, so a load from it is always in bounds).
struct ShardRow {
  int row;
  int owned;
};
inline ShardRow shard_row(int id, const VocabShardMap& s) {
  int local = s.strided ? id / s.tp_size : id - s.tp_rank * s.local_rows;
  int owned_strided = (id - local * s.tp_size) == s.tp_rank;
  int owned_contig = static_cast<unsigned>(local) < static_cast<unsigned>(s.local_rows);
  int owned = s.strided ? owned_strided : owned_contig;
  return {local * owned, owned};
}

}  // namespace gpt2::cpu
