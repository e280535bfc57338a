// bf16_emulating_ops.h — test support: an Ops that accepts bf16 activations on the CPU by widening
// them to fp32, calling the CPU oracle, and rounding what the op wrote back to bf16.
//
// Is: the way CI (no GPU) runs the model's bf16 path: gpt2.cpp's typed buffers, their element
// arithmetic, byte sizes and the bf16 TP all-reduce, with the numerics of bf16 storage (every
// activation rounded to nearest even between ops, as the CUDA backend stores them) and fp32 math.
// Is not: a backend (slow, host memory, test-only) nor a model of the GPU kernels' rounding inside
// an op (they accumulate in fp32 too, so the difference is within one bf16 rounding per op).
// fp32 arguments pass straight through, so with fp32 activations this is exactly the CPU backend.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "model/ops.h"

namespace gpt2::testing {

class Bf16EmulatingOps final : public Ops {
 public:
  explicit Bf16EmulatingOps(std::unique_ptr<Ops> cpu) : cpu_(std::move(cpu)) {}
  const char* name() const override { return "cpu+bf16-emulation"; }
  bool supports_activations(ActType) const override { return true; }

  void* alloc(size_t bytes) override { return cpu_->alloc(bytes); }
  void release(void* ptr) override { cpu_->release(ptr); }
  size_t alloc_granularity() const override { return cpu_->alloc_granularity(); }
  AllocationStats allocation_stats() const override { return cpu_->allocation_stats(); }
  void fill_zero(void* ptr, size_t bytes) override { cpu_->fill_zero(ptr, bytes); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { cpu_->copy_from_host(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { cpu_->copy_to_host(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { cpu_->copy(dst, src, bytes); }

  int64_t embedding_lookup(ActPtr out, const int* ids, const float* wte, int N, int C,
                           const VocabShardMap& shard) override {
    Widen w;
    return cpu_->embedding_lookup(w.out(out, size_t(N) * C, false), ids, wte, N, C, shard);
  }
  void add_position(ActPtr out, const float* wpe, int B, int T, int C) override {
    Widen w;
    cpu_->add_position(w.out(out, size_t(B) * T * C, true), wpe, B, T, C);
  }
  void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int* ids, int B, int T, int C,
                          const VocabShardMap& shard) override {
    Widen w;
    cpu_->embedding_backward(dwte, dwpe, w.in(dout, size_t(B) * T * C), ids, B, T, C, shard);
  }
  void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, const float* weight,
                         const float* bias, int N, int C) override {
    Widen w;
    const size_t n = size_t(N) * C;
    cpu_->layernorm_forward(w.out(out, n, false), mean, rstd, w.in(inp, n), weight, bias, N, C);
  }
  void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                          const float* weight, const float* mean, const float* rstd, int N, int C) override {
    Widen w;
    const size_t n = size_t(N) * C;
    cpu_->layernorm_backward(w.out(dinp, n, true), dweight, dbias, w.in(dout, n), w.in(inp, n), weight, mean,
                             rstd, N, C);
  }
  void matmul_forward(ActPtr out, ConstActPtr inp, const float* weight, const float* bias, int N, int C,
                      int OC) override {
    Widen w;
    cpu_->matmul_forward(w.out(out, size_t(N) * OC, false), w.in(inp, size_t(N) * C), weight, bias, N, C, OC);
  }
  void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                       const float* weight, int N, int C, int OC) override {
    Widen w;
    cpu_->matmul_backward(w.out(dinp, size_t(N) * C, false), dweight, dbias, w.in(dout, size_t(N) * OC),
                          w.in(inp, size_t(N) * C), weight, N, C, OC);
  }
  void add_bias(ActPtr out, const float* bias, int N, int OC) override {
    Widen w;
    cpu_->add_bias(w.out(out, size_t(N) * OC, true), bias, N, OC);
  }
  size_t attention_saved_floats(AttentionKind kind, int B, int T, int NH) const override {
    return cpu_->attention_saved_floats(kind, B, T, NH);
  }
  size_t attention_scratch_floats(AttentionKind kind, int B, int T, int NH) const override {
    return cpu_->attention_scratch_floats(kind, B, T, NH);
  }
  void attention_forward(AttentionKind kind, ActPtr out, float* saved, ConstActPtr qkv, int B, int T, int C,
                         int NH) override {
    Widen w;
    const size_t n = size_t(B) * T * C;
    cpu_->attention_forward(kind, w.out(out, n, false), saved, w.in(qkv, 3 * n), B, T, C, NH);
  }
  void attention_backward(AttentionKind kind, ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv,
                          ConstActPtr out, const float* saved, int B, int T, int C, int NH) override {
    Widen w;
    const size_t n = size_t(B) * T * C;
    cpu_->attention_backward(kind, w.out(dqkv, 3 * n, false), scratch, w.in(dout, n), w.in(qkv, 3 * n),
                             w.in(out, n), saved, B, T, C, NH);
  }
  void gelu_forward(ActPtr out, ConstActPtr inp, size_t n) override {
    Widen w;
    cpu_->gelu_forward(w.out(out, n, false), w.in(inp, n), n);
  }
  void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, size_t n) override {
    Widen w;
    cpu_->gelu_backward(w.out(dinp, n, false), w.in(inp, n), w.in(dout, n), n);
  }
  void residual_forward(ActPtr out, ConstActPtr a, ConstActPtr b, size_t n) override {
    Widen w;
    cpu_->residual_forward(w.out(out, n, false), w.in(a, n), w.in(b, n), n);
  }
  void add_inplace(ActPtr acc, ConstActPtr x, size_t n) override {
    Widen w;
    cpu_->add_inplace(w.out(acc, n, true), w.in(x, n), n);
  }
  void logits_row_max(float* row_max, ConstActPtr logits, int N, const VocabShardMap& shard) override {
    Widen w;
    cpu_->logits_row_max(row_max, w.in(logits, size_t(N) * shard.local_rows), N, shard);
  }
  void softmax_stats(float* stats, ConstActPtr logits, const float* row_max, const int* targets, int N,
                     const VocabShardMap& shard) override {
    Widen w;
    cpu_->softmax_stats(stats, w.in(logits, size_t(N) * shard.local_rows), row_max, targets, N, shard);
  }
  void crossentropy_losses(float* losses, const float* stats, const float* row_max, int N) override {
    cpu_->crossentropy_losses(losses, stats, row_max, N);
  }
  void crossentropy_backward_inplace(ActPtr logits, const float* row_max, const float* stats, const int* targets,
                                     float dloss, int N, const VocabShardMap& shard) override {
    Widen w;
    cpu_->crossentropy_backward_inplace(w.out(logits, size_t(N) * shard.local_rows, true), row_max, stats,
                                        targets, dloss, N, shard);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t t) override {
    cpu_->adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
  }
  double sum_squares(const float* x, size_t n) override { return cpu_->sum_squares(x, n); }
  void scale(float* x, float s, size_t n) override { cpu_->scale(x, s, n); }
  double sum(const float* x, size_t n) override { return cpu_->sum(x, n); }

 private:
  // Widened copies of one op call's bf16 arguments; outputs are rounded back when the call ends.
  class Widen {
   public:
    Widen() = default;
    Widen(const Widen&) = delete;
    Widen& operator=(const Widen&) = delete;
    ~Widen() {
      for (const Pending& p : outputs_) {
        auto* dst = static_cast<uint16_t*>(p.dst.data());
        for (size_t i = 0; i < p.wide->size(); i++) dst[i] = float_to_bf16((*p.wide)[i]);
      }
    }
    const float* in(ConstActPtr p, size_t n) {
      if (!p) return nullptr;
      if (p.type() == ActType::kF32) return p.f32();
      return widen(static_cast<const uint16_t*>(p.data()), n).data();
    }
    // `accumulates`: the op reads the output too (+=, in place), so it starts from the stored values.
    float* out(ActPtr p, size_t n, bool accumulates) {
      if (!p) return nullptr;
      if (p.type() == ActType::kF32) return p.f32();
      std::vector<float>& wide = accumulates ? widen(static_cast<const uint16_t*>(p.data()), n)
                                             : buffers_.emplace_back(n, 0.0f);
      outputs_.push_back({p, &wide});
      return wide.data();
    }

   private:
    struct Pending {
      ActPtr dst;
      std::vector<float>* wide;
    };
    std::vector<float>& widen(const uint16_t* src, size_t n) {
      std::vector<float>& wide = buffers_.emplace_back(n);
      for (size_t i = 0; i < n; i++) wide[i] = bf16_to_float(src[i]);
      return wide;
    }
    std::deque<std::vector<float>> buffers_;  // deque: references stay valid as it grows
    std::vector<Pending> outputs_;
  };

  std::unique_ptr<Ops> cpu_;
};

}  // namespace gpt2::testing
