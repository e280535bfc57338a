// cublaslt_gemm.h — the one place the CUDA backend calls cuBLASLt: row-major GEMMs with an optional
// bias, GELU (with the pre-GELU aux output) or GELU-gradient epilogue, fp32 or bf16 operands, fp32
// accumulation, fp32 or bf16 output.
//
// Is: a handle, a workspace, and a cache of matmul descriptors, layouts and the heuristic's algorithm
// per GEMM shape (the heuristic costs far more than the GEMM of a small model; it runs once per
// shape). Pointer alignments are part of the key: cuBLASLt's heuristic otherwise assumes 256-byte
// aligned operands, which sub-allocated parameters and attention's per-head offsets are not.
// Is not: public (CUDA headers); thread-safe (one per CudaOps, used from its stream's thread).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <vector>

#include "ops/cuda/gemm_plan.h"
#include "rankscope/format/status.h"

namespace gpt2::cuda {

// Operand type of a GEMM. kBf16: A and B are bf16 (the caller casts), C/D and bias stay fp32 and the
// accumulation is fp32 — what llm.c's mixed precision does with fp32 master weights.
enum class GemmOperands { kFp32, kBf16 };

// What cuBLASLt does to the product before storing it (row-major terms; bias has one value per
// output column, aux is laid out like the output with its own row stride aux_ld):
//   kNone: D = alpha A B + beta C.  kBias: + bias.
//   kGeluAuxBias: aux = A B + bias (the pre-activation, kept for backward), D = GELU(aux).
//   kDGelu: D = (A B) * GELU'(aux) (aux read: the forward's pre-activation).
enum class GemmEpilogueKind { kNone, kBias, kGeluAuxBias, kDGelu };
struct GemmEpilogue {
  GemmEpilogueKind kind = GemmEpilogueKind::kNone;
  const void* bias = nullptr;   // kBias, kGeluAuxBias: fp32, or bf16 when bias_bf16
  bool bias_bf16 = false;       // cuBLASLt's bias type is the output's (bf16 out: a bf16 bias, e.g. the weight mirror's)
  void* aux = nullptr;          // same element type as the output (kGeluAuxBias writes, kDGelu reads)
  int64_t aux_ld = 0;           // elements; cuBLASLt wants a multiple of 8
};

// One GEMM call: C/D may be fp32 or bf16 (out_bf16); A and B as `operands` says.
struct GemmCall {
  RowMajorGemm shape;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  bool out_bf16 = false;
  GemmOperands operands = GemmOperands::kFp32;
  GemmEpilogue epilogue;
  float alpha = 1.0f, beta = 0.0f;
};

class CublasLtGemm {
 public:
  static rankscope::Result<std::unique_ptr<CublasLtGemm>> create(size_t workspace_bytes);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // C (M,N) = alpha * op(A) @ op(B) + beta * C (+ bias (N) on every row when bias != null), on
  // `stream`. A and B are float* for kFp32 and __nv_bfloat16* for kBf16.
  rankscope::Status run(const RowMajorGemm& g, const void* a, const void* b, float* c, const float* bias,
                        float alpha, float beta, GemmOperands operands, cudaStream_t stream);

  // The general form. Returns false (nothing enqueued) when cuBLASLt has no algorithm for this
  // combination of types, epilogue and alignments, so the caller can fall back to unfused kernels;
  // the refusal is cached like a plan (the heuristic is not asked again).
  rankscope::Result<bool> try_run(const GemmCall& call, cudaStream_t stream);

  size_t cached_plans() const { return cache_.size(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool refused = false;  // the heuristic found no algorithm
  };
  CublasLtGemm() = default;
  // The returned plan lives until the next call (the cache may be dropped when full).
  rankscope::Result<Plan*> plan_for(const GemmCall& call);
  void drop_plans();
  static constexpr size_t kMaxCachedPlans = 1024;

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::vector<int64_t>, Plan> cache_;
};

}  // namespace gpt2::cuda
