// cuda_ops_gemm.cpp — the linear-layer ops of CudaOps through cuBLASLt: matmul forward (bias epilogue),
// matmul backward (input and weight gradients as GEMMs, bias gradient as deterministic column sums),
// the row-parallel bias add, and gemm(), which casts operands to bf16 in the bf16 precision mode.
// Is not: attention's batched GEMMs (cuda_ops_attention.cpp, always fp32).
#include <cuda_bf16.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

namespace gpt2::cuda {

rankscope::Status CudaOps::gemm(const RowMajorGemm& g, const float* a, const float* b, float* c,
                                const float* bias, float alpha, float beta) {
  if (options_.precision == CudaPrecision::kFp32) {
    return gemm_->run(g, a, b, c, bias, alpha, beta, GemmOperands::kFp32, stream_);
  }
  // bf16: round both operands (as stored, over all batch members) into scratch, same layout.
  const int64_t a_span = stored_span(g.trans_a ? g.K : g.M, g.trans_a ? g.M : g.K, g.lda, g.batch, g.stride_a);
  const int64_t b_span = stored_span(g.trans_b ? g.N : g.K, g.trans_b ? g.K : g.N, g.ldb, g.batch, g.stride_b);
  RS_ASSIGN_OR_RETURN(void* a16, scratch(Scratch::kGemmA, sizeof(__nv_bfloat16) * a_span));
  RS_ASSIGN_OR_RETURN(void* b16, scratch(Scratch::kGemmB, sizeof(__nv_bfloat16) * b_span));
  RS_CUDA_CHECK(launch_cast_to_bf16(static_cast<__nv_bfloat16*>(a16), a, a_span, stream_));
  RS_CUDA_CHECK(launch_cast_to_bf16(static_cast<__nv_bfloat16*>(b16), b, b_span, stream_));
  RS_RETURN_IF_ERROR(gemm_->run(g, a16, b16, c, bias, alpha, beta, GemmOperands::kBf16, stream_));
  return rankscope::Status::ok_status();
}

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC): the bias rides in cuBLASLt's epilogue.
void CudaOps::matmul_forward(ActPtr out_, ConstActPtr inp_, const float* weight, const float* bias, int N,
                             int C, int OC) {
  float* out = out_.f32("cuda matmul_forward");
  const float* inp = inp_.f32("cuda matmul_forward");
  // weight is stored (OC,C) and used transposed.
  const RowMajorGemm g = gemm_shape(N, OC, C, false, true, C, C, OC);
  RS_CUDA_OP_MUST(gemm(g, inp, weight, out, bias, 1.0f, 0.0f));
}

// dinp (N,C) = dout (N,OC) @ weight (OC,C); dweight (OC,C) += dout^T @ inp (N,C); dbias (OC) +=
// column sums of dout.
void CudaOps::matmul_backward(ActPtr dinp_, float* dweight, float* dbias, ConstActPtr dout_, ConstActPtr inp_,
                              const float* weight, int N, int C, int OC) {
  float* dinp = dinp_.f32("cuda matmul_backward");
  const float* dout = dout_.f32("cuda matmul_backward");
  const float* inp = inp_.f32("cuda matmul_backward");
  if (dinp != nullptr) {
    const RowMajorGemm g = gemm_shape(N, C, OC, false, false, OC, C, C);
    RS_CUDA_OP_MUST(gemm(g, dout, weight, dinp, nullptr, 1.0f, 0.0f));
  }
  // dout is stored (N,OC) and used transposed.
  const RowMajorGemm w = gemm_shape(OC, C, N, true, false, OC, C, C);
  RS_CUDA_OP_MUST(gemm(w, dout, inp, dweight, nullptr, 1.0f, 1.0f));
  if (dbias != nullptr) {
    auto buf = scratch(Scratch::kPartials, sizeof(float) * column_sums_scratch_floats(N, OC));
    RS_CUDA_OP_MUST(buf.status());
    RS_CUDA_OP_MUST(launch_column_sums_accumulate(dbias, dout, N, OC, static_cast<float*>(*buf), stream_));
  }
}

void CudaOps::add_bias(ActPtr out_, const float* bias, int N, int OC) {
  float* out = out_.f32("cuda add_bias");
  RS_CUDA_OP_MUST(launch_add_bias(out, bias, N, OC, stream_));
}

}  // namespace gpt2::cuda
