// cublaslt_gemm.cpp — cuBLASLt handle, workspace and the per-shape plan cache, epilogues included
// (see cublaslt_gemm.h).
#include "ops/cuda/cublaslt_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "ops/cuda/cuda_check.h"

namespace gpt2::cuda {
namespace {

// Largest power of two (capped at 256, cuBLASLt's default assumption) dividing every address a
// batched operand takes: its base and base + i * stride.
uint32_t alignment_of(const void* p, int batch, int64_t stride_elems, size_t elem_bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  if (batch > 1) bits |= static_cast<uint64_t>(stride_elems) * elem_bytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

rankscope::Status make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols,
                              int64_t ld, int batch, int64_t stride) {
  RS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld));
  if (batch > 1) {
    int32_t count = batch;
    RS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                     sizeof(count)));
    RS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                     &stride, sizeof(stride)));
  }
  return rankscope::Status::ok_status();
}

}  // namespace

rankscope::Result<std::unique_ptr<CublasLtGemm>> CublasLtGemm::create(size_t workspace_bytes) {
  std::unique_ptr<CublasLtGemm> g(new CublasLtGemm());
  RS_CUBLAS_CHECK(cublasLtCreate(&g->handle_));
  RS_CUDA_CHECK(cudaMalloc(&g->workspace_, workspace_bytes));
  g->workspace_bytes_ = workspace_bytes;
  return g;
}

void CublasLtGemm::drop_plans() {
  for (auto& [key, plan] : cache_) {
    if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
    if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
    if (plan.c) cublasLtMatrixLayoutDestroy(plan.c);
    if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
  }
  cache_.clear();
}

CublasLtGemm::~CublasLtGemm() {
  drop_plans();
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

rankscope::Result<CublasLtGemm::Plan*> CublasLtGemm::plan_for(const GemmCall& call) {
  const RowMajorGemm& g = call.shape;
  const GemmEpilogue& ep = call.epilogue;
  RS_ASSIGN_OR_RETURN(ColMajorGemm cm, plan_col_major(g));
  const size_t in_bytes = call.operands == GemmOperands::kBf16 ? 2 : 4;
  const size_t out_bytes = call.out_bf16 ? 2 : 4;
  const bool has_bias = ep.bias != nullptr &&
                        (ep.kind == GemmEpilogueKind::kBias || ep.kind == GemmEpilogueKind::kGeluAuxBias);
  const bool has_aux = ep.kind == GemmEpilogueKind::kGeluAuxBias || ep.kind == GemmEpilogueKind::kDGelu;
  if (has_aux && (ep.aux == nullptr || ep.aux_ld < g.N || g.batch != 1)) {
    return rankscope::invalid_argument(fmt::format(
        "GELU epilogue needs an aux buffer with ld >= N and no batch: {} aux_ld={}", describe(g), ep.aux_ld));
  }
  // cuBLASLt's A' is the caller's B and B' the caller's A (gemm_plan.h).
  const uint32_t align_a = alignment_of(call.b, cm.batch, cm.stride_a, in_bytes);
  const uint32_t align_b = alignment_of(call.a, cm.batch, cm.stride_b, in_bytes);
  const uint32_t align_c = alignment_of(call.c, cm.batch, cm.stride_c, out_bytes);
  const size_t bias_bytes = ep.bias_bf16 ? 2 : 4;
  const uint32_t align_bias = has_bias ? alignment_of(ep.bias, 1, 0, bias_bytes) : 256u;
  const uint32_t align_aux = has_aux ? alignment_of(ep.aux, 1, 0, out_bytes) : 256u;
  const GemmEpilogueKind kind = ep.kind == GemmEpilogueKind::kBias && !has_bias ? GemmEpilogueKind::kNone : ep.kind;
  std::vector<int64_t> key = {cm.m,       cm.n,      cm.k,       cm.trans_a, cm.trans_b, cm.lda,
                              cm.ldb,     cm.ldc,    cm.batch,   cm.stride_a, cm.stride_b, cm.stride_c,
                              has_bias, static_cast<int64_t>(call.operands), align_a, align_b, align_c,
                              align_bias, call.out_bf16, static_cast<int64_t>(kind), has_aux ? ep.aux_ld : 0,
                              align_aux, has_bias && ep.bias_bf16};
  auto found = cache_.find(key);
  if (found != cache_.end()) return &found->second;

  Plan plan;
  const cudaDataType_t in_type = call.operands == GemmOperands::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType_t out_type = call.out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  RS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = cm.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = cm.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (kind != GemmEpilogueKind::kNone) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    if (kind == GemmEpilogueKind::kGeluAuxBias) epilogue = has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    if (kind == GemmEpilogueKind::kDGelu) epilogue = CUBLASLT_EPILOGUE_DGELU;
    RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                   sizeof(epilogue)));
  }
  if (has_bias) {
    // cublasLt.h: the bias has the output's type. An fp32 bias with a bf16 output is refused by
    // the heuristic (the caller then adds it with a kernel) or, where accepted, handled in bf16;
    // CudaOps passes the weight mirror's bf16 bias for bf16 outputs when it has one.
    const cudaDataType_t bias_type = ep.bias_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                   &bias_type, sizeof(bias_type)));
  }
  if (has_aux) {
    // The aux matrix is in cuBLASLt's column-major terms the shape of D: its ld is the row-major one.
    const int64_t aux_ld = ep.aux_ld;
    RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                   sizeof(aux_ld)));
    // The heuristic reads the pointer for its alignment; run() sets the real one per call.
    RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                   &ep.aux, sizeof(ep.aux)));
  }
  if (has_bias) {
    RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ep.bias,
                                                   sizeof(ep.bias)));
  }
  RS_RETURN_IF_ERROR(make_layout(&plan.a, in_type, cm.a_rows, cm.a_cols, cm.lda, cm.batch, cm.stride_a));
  RS_RETURN_IF_ERROR(make_layout(&plan.b, in_type, cm.b_rows, cm.b_cols, cm.ldb, cm.batch, cm.stride_b));
  RS_RETURN_IF_ERROR(make_layout(&plan.c, out_type, cm.c_rows, cm.c_cols, cm.ldc, cm.batch, cm.stride_c));

  cublasLtMatmulPreference_t pref = nullptr;
  RS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* value, size_t size) {
    return cublas_status(cublasLtMatmulPreferenceSetAttribute(pref, attr, value, size),
                         "cublasLtMatmulPreferenceSetAttribute");
  };
  rankscope::Status s = set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                 sizeof(workspace_bytes_));
  if (s.ok()) s = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  if (s.ok()) s = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  if (s.ok()) s = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c));
  if (s.ok()) s = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c));
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  if (s.ok()) {
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                             pref, 1, &result, &found_count);
    // NOT_SUPPORTED is the heuristic's other way of saying "no algorithm"; with an epilogue,
    // INVALID_VALUE is how some versions reject a bias/aux type combination: refusals, not errors
    // (the caller falls back; a plain GEMM refused still fails in run() with a hint).
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_INVALID_VALUE && kind != GemmEpilogueKind::kNone)) {
      found_count = 0;
    } else {
      s = cublas_status(hs, "cublasLtMatmulAlgoGetHeuristic");
    }
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (!s.ok()) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.desc);
    s.add_breadcrumb(__FILE__, __LINE__);
    return s;
  }
  plan.refused = found_count == 0;
  if (!plan.refused) plan.algo = result.algo;
  // MoE expert GEMMs have a new row count nearly every step, so the key space is unbounded: past the
  // cap the cache starts over (a dense model's few dozen shapes never reach it).
  if (cache_.size() >= kMaxCachedPlans) drop_plans();
  return &cache_.emplace(std::move(key), plan).first->second;
}

rankscope::Result<bool> CublasLtGemm::try_run(const GemmCall& call, cudaStream_t stream) {
  RS_ASSIGN_OR_RETURN(Plan * plan, plan_for(call));
  if (plan->refused) return false;
  const GemmEpilogue& ep = call.epilogue;
  // The descriptor is cached per shape; the bias and aux pointers change per call.
  if (ep.bias != nullptr && (ep.kind == GemmEpilogueKind::kBias || ep.kind == GemmEpilogueKind::kGeluAuxBias)) {
    RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ep.bias,
                                                   sizeof(ep.bias)));
  }
  if (ep.kind == GemmEpilogueKind::kGeluAuxBias || ep.kind == GemmEpilogueKind::kDGelu) {
    RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ep.aux,
                                                   sizeof(ep.aux)));
  }
  // Operands swap: cuBLASLt's A is the row-major B.
  RS_CUBLAS_CHECK(cublasLtMatmul(handle_, plan->desc, &call.alpha, call.b, plan->a, call.a, plan->b, &call.beta,
                                 call.c, plan->c, call.c, plan->c, &plan->algo, workspace_, workspace_bytes_,
                                 stream));
  return true;
}

rankscope::Status CublasLtGemm::run(const RowMajorGemm& g, const void* a, const void* b, float* c,
                                    const float* bias, float alpha, float beta, GemmOperands operands,
                                    cudaStream_t stream) {
  GemmCall call;
  call.shape = g;
  call.a = a;
  call.b = b;
  call.c = c;
  call.operands = operands;
  call.epilogue.kind = bias != nullptr ? GemmEpilogueKind::kBias : GemmEpilogueKind::kNone;
  call.epilogue.bias = bias;
  call.alpha = alpha;
  call.beta = beta;
  RS_ASSIGN_OR_RETURN(bool ran, try_run(call, stream));
  if (!ran) {
    return rankscope::internal_error(fmt::format(
        "cuBLASLt has no algorithm for {}; hint: the operands' leading dimensions or addresses may need "
        "padding to 16 bytes",
        describe(g)));
  }
  return rankscope::Status::ok_status();
}

}  // namespace gpt2::cuda
