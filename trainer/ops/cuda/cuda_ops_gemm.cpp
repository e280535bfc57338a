// cuda_ops_gemm.cpp — the linear-layer ops of CudaOps through cuBLASLt: matmul forward (bias
// epilogue), matmul backward (input and weight gradients as GEMMs, bias gradient as deterministic
// column sums), the row-parallel bias add, the MLP's GEMMs with GELU fused (GELU_AUX_BIAS forward,
// DGELU backward epilogues), GELU itself, and gemm(), which casts fp32 operands to bf16 where the
// GEMM runs in bf16 (the bf16 precision mode, or bf16 activations against fp32 master weights).
// Activations (ActPtr) are fp32 or bf16; weights, their gradients and biases are always fp32.
// Is not: attention's batched GEMMs (cuda_ops_attention.cpp).
#include <cuda_bf16.h>
#include <fmt/format.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

namespace gpt2::cuda {
namespace {

__nv_bfloat16* bf16(ActPtr p) { return static_cast<__nv_bfloat16*>(p.data()); }
const __nv_bfloat16* bf16(ConstActPtr p) { return static_cast<const __nv_bfloat16*>(p.data()); }

cudaError_t gelu_forward_any(ActPtr out, ConstActPtr inp, size_t n, cudaStream_t stream) {
  if (out.type() == ActType::kBF16) return launch_gelu_forward(bf16(out), bf16(inp), n, stream);
  return launch_gelu_forward(out.f32(), inp.f32(), n, stream);
}

cudaError_t gelu_backward_any(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, size_t n, cudaStream_t stream) {
  if (dinp.type() == ActType::kBF16) return launch_gelu_backward(bf16(dinp), bf16(inp), bf16(dout), n, stream);
  return launch_gelu_backward(dinp.f32(), inp.f32(), dout.f32(), n, stream);
}

// Every activation argument of one op call has one type (ops.h); a mix is a caller's bug.
void check_same_type(ActType a, ActType b, const char* op) {
  if (a != b) {
    die_in_op(rankscope::invalid_argument(
                  fmt::format("activations of one call mix {} and {} (hint: ops.h: one type per call)",
                              act_type_name(a), act_type_name(b))),
              op);
  }
}

}  // namespace

rankscope::Result<bool> CudaOps::try_gemm(const RowMajorGemm& g, ConstActPtr a, ConstActPtr b, ActPtr c,
                                          const GemmEpilogue& epilogue, float alpha, float beta) {
  GemmCall call;
  call.shape = g;
  call.c = c.data();
  call.out_bf16 = c.type() == ActType::kBF16;
  call.epilogue = epilogue;
  // A bf16 output takes a bf16 bias in cuBLASLt's epilogue: the mirror's, once AdamW made one.
  if (call.out_bf16 && epilogue.bias != nullptr && !epilogue.bias_bf16) {
    if (const void* bias16 = mirrored_bf16(static_cast<const float*>(epilogue.bias), g.N)) {
      call.epilogue.bias = bias16;
      call.epilogue.bias_bf16 = true;
    }
  }
  call.alpha = alpha;
  call.beta = beta;
  const bool bf16_operands = options_.precision != CudaPrecision::kFp32 || a.type() == ActType::kBF16 ||
                             b.type() == ActType::kBF16;
  if (!bf16_operands) {
    call.a = a.data();
    call.b = b.data();
    call.operands = GemmOperands::kFp32;
    return gemm_->try_run(call, stream_);
  }
  // bf16: an fp32 operand is rounded (as stored, over all batch members) into scratch, same layout.
  auto as_bf16 = [&](ConstActPtr p, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                     Scratch slot) -> rankscope::Result<const void*> {
    if (p.type() == ActType::kBF16) return p.data();
    const int64_t span = stored_span(rows, cols, ld, g.batch, stride);
    if (const void* mirrored = mirrored_bf16(p.f32(), span)) return mirrored;  // a weight, cast after AdamW
    RS_ASSIGN_OR_RETURN(void* p16, scratch(slot, sizeof(__nv_bfloat16) * span));
    RS_CUDA_CHECK(launch_cast_to_bf16(static_cast<__nv_bfloat16*>(p16), p.f32(), span, stream_));
    return static_cast<const void*>(p16);
  };
  RS_ASSIGN_OR_RETURN(call.a, as_bf16(a, g.trans_a ? g.K : g.M, g.trans_a ? g.M : g.K, g.lda, g.stride_a,
                                      Scratch::kGemmA));
  RS_ASSIGN_OR_RETURN(call.b, as_bf16(b, g.trans_b ? g.N : g.K, g.trans_b ? g.K : g.N, g.ldb, g.stride_b,
                                      Scratch::kGemmB));
  call.operands = GemmOperands::kBf16;
  bf16_gemms_seen_ = true;
  return gemm_->try_run(call, stream_);
}

rankscope::Status CudaOps::gemm(const RowMajorGemm& g, ConstActPtr a, ConstActPtr b, ActPtr c, const float* bias,
                                float alpha, float beta) {
  GemmEpilogue epilogue;
  epilogue.kind = bias != nullptr ? GemmEpilogueKind::kBias : GemmEpilogueKind::kNone;
  epilogue.bias = bias;
  RS_ASSIGN_OR_RETURN(bool ran, try_gemm(g, a, b, c, epilogue, alpha, beta));
  if (ran) return rankscope::Status::ok_status();
  if (bias != nullptr && g.batch == 1) {
    // cuBLASLt refused the bias epilogue for these types (fp32 bias, bf16 output): GEMM, then a kernel.
    RS_ASSIGN_OR_RETURN(ran, try_gemm(g, a, b, c, GemmEpilogue{}, alpha, beta));
    if (ran) {
      if (c.type() == ActType::kBF16) {
        RS_CUDA_CHECK(launch_add_bias(bf16(c), bias, g.M, g.N, stream_));
      } else {
        RS_CUDA_CHECK(launch_add_bias(c.f32(), bias, g.M, g.N, stream_));
      }
      return rankscope::Status::ok_status();
    }
  }
  return rankscope::internal_error(fmt::format(
      "cuBLASLt has no algorithm for {} ({} output); hint: the operands' leading dimensions or addresses may "
      "need padding to 16 bytes",
      describe(g), act_type_name(c.type())));
}

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC): the bias rides in cuBLASLt's epilogue.
void CudaOps::matmul_forward(ActPtr out, ConstActPtr inp, const float* weight, const float* bias, int N, int C,
                             int OC) {
  check_same_type(out.type(), inp.type(), "cuda matmul_forward");
  // weight is stored (OC,C) and used transposed.
  const RowMajorGemm g = gemm_shape(N, OC, C, false, true, C, C, OC);
  RS_CUDA_OP_MUST(gemm(g, inp, weight, out, bias, 1.0f, 0.0f));
}

// dinp (N,C) = dout (N,OC) @ weight (OC,C); dweight (OC,C) += dout^T @ inp (N,C) (fp32, also from bf16
// activations); dbias (OC) += column sums of dout (fp32 sums).
void CudaOps::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                              const float* weight, int N, int C, int OC) {
  check_same_type(dout.type(), inp.type(), "cuda matmul_backward");
  if (dinp) {
    check_same_type(dinp.type(), dout.type(), "cuda matmul_backward");
    const RowMajorGemm g = gemm_shape(N, C, OC, false, false, OC, C, C);
    RS_CUDA_OP_MUST(gemm(g, dout, weight, dinp, nullptr, 1.0f, 0.0f));
  }
  // dout is stored (N,OC) and used transposed.
  const RowMajorGemm w = gemm_shape(OC, C, N, true, false, OC, C, C);
  RS_CUDA_OP_MUST(gemm(w, dout, inp, dweight, nullptr, 1.0f, 1.0f));
  if (dbias != nullptr) {
    auto buf = scratch(Scratch::kPartials, sizeof(float) * column_sums_scratch_floats(N, OC));
    RS_CUDA_OP_MUST(buf.status());
    float* partials = static_cast<float*>(*buf);
    if (dout.type() == ActType::kBF16) {
      RS_CUDA_OP_MUST(launch_column_sums_accumulate(dbias, bf16(dout), N, OC, partials, stream_));
    } else {
      RS_CUDA_OP_MUST(launch_column_sums_accumulate(dbias, dout.f32(), N, OC, partials, stream_));
    }
  }
}

void CudaOps::add_bias(ActPtr out, const float* bias, int N, int OC) {
  if (out.type() == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_add_bias(bf16(out), bias, N, OC, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_add_bias(out.f32(), bias, N, OC, stream_));
  }
}

// pre_gelu (N,OC) = inp @ weight^T + bias and out = GELU(pre_gelu) in one GEMM (GELU_AUX_BIAS: the
// pre-activation is the aux output, laid out like out with ld OC).
void CudaOps::matmul_gelu_forward(ActPtr out, ActPtr pre_gelu, ConstActPtr inp, const float* weight,
                                  const float* bias, int N, int C, int OC) {
  check_same_type(out.type(), inp.type(), "cuda matmul_gelu_forward");
  check_same_type(out.type(), pre_gelu.type(), "cuda matmul_gelu_forward");
  const RowMajorGemm g = gemm_shape(N, OC, C, false, true, C, C, OC);
  // cuBLASLt wants the aux leading dimension a multiple of 8; other widths go unfused.
  if (OC % 8 == 0) {
    GemmEpilogue epilogue;
    epilogue.kind = GemmEpilogueKind::kGeluAuxBias;
    epilogue.bias = bias;
    epilogue.aux = pre_gelu.data();
    epilogue.aux_ld = OC;
    auto ran = try_gemm(g, inp, weight, out, epilogue, 1.0f, 0.0f);
    RS_CUDA_OP_MUST(ran.status());
    if (*ran) return;
  }
  // Unfused (cuBLASLt refused the epilogue for these types or alignments): GEMM, then GELU.
  RS_CUDA_OP_MUST(gemm(g, inp, weight, pre_gelu, bias, 1.0f, 0.0f));
  RS_CUDA_OP_MUST(gelu_forward_any(out, pre_gelu, static_cast<size_t>(N) * OC, stream_));
}

// dpre (N,C) = (dout (N,OC) @ weight (OC,C)) * GELU'(pre_gelu) in one GEMM (DGELU epilogue, aux =
// the forward's pre-activation, ld C); dweight and dbias as matmul_backward.
void CudaOps::matmul_backward_dgelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                    const float* weight, ConstActPtr pre_gelu, int N, int C, int OC) {
  check_same_type(dpre.type(), dout.type(), "cuda matmul_backward_dgelu");
  check_same_type(dpre.type(), pre_gelu.type(), "cuda matmul_backward_dgelu");
  const RowMajorGemm g = gemm_shape(N, C, OC, false, false, OC, C, C);
  bool fused = false;
  if (C % 8 == 0) {
    GemmEpilogue epilogue;
    epilogue.kind = GemmEpilogueKind::kDGelu;
    epilogue.aux = const_cast<void*>(pre_gelu.data());  // read only (DGELU reads its aux)
    epilogue.aux_ld = C;
    auto ran = try_gemm(g, dout, weight, dpre, epilogue, 1.0f, 0.0f);
    RS_CUDA_OP_MUST(ran.status());
    fused = *ran;
  }
  if (!fused) {
    // Unfused (cuBLASLt refused the epilogue for these types or alignments): GEMM, then GELU'.
    RS_CUDA_OP_MUST(gemm(g, dout, weight, dpre, nullptr, 1.0f, 0.0f));
    RS_CUDA_OP_MUST(gelu_backward_any(dpre, pre_gelu, dpre, static_cast<size_t>(N) * C, stream_));
  }
  // The weight and bias gradients are those of the plain GEMM (dinp not wanted: done above).
  matmul_backward(nullptr, dweight, dbias, dout, inp, weight, N, C, OC);
}

void CudaOps::gelu_forward(ActPtr out, ConstActPtr inp, size_t n) {
  check_same_type(out.type(), inp.type(), "cuda gelu_forward");
  RS_CUDA_OP_MUST(gelu_forward_any(out, inp, n, stream_));
}

void CudaOps::gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, size_t n) {
  check_same_type(dinp.type(), inp.type(), "cuda gelu_backward");
  check_same_type(dinp.type(), dout.type(), "cuda gelu_backward");
  RS_CUDA_OP_MUST(gelu_backward_any(dinp, inp, dout, n, stream_));
}

}  // namespace gpt2::cuda
