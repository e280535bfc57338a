// cuda_ops_attention.cpp — causal self-attention of CudaOps, both kinds (ops.h AttentionKind).
// Flash: the kernels of kernels/flash_attention.cu on qkv in place; saved = lse (B,NH,T), scratch =
// D (B,NH,T). Naive: head split/merge and softmax kernels around cuBLASLt strided-batched GEMMs over
// the B*NH heads; saved = att (B,NH,T,T), scratch = datt (B,NH,T,T):
// Forward:  q,k,v (B,NH,T,hs) <- qkv (B,T,3C); att (B,NH,T,T) = softmax(mask(q k^T / sqrt(hs)));
//           y (B,NH,T,hs) = att @ v; out (B,T,C) <- y.
// Backward: dy <- dout; datt = dy v^T; dv = att^T dy; datt <- softmax backward (in place);
//           dq = datt k / sqrt(hs); dk = datt^T q / sqrt(hs); dqkv (B,T,3C) <- dq, dk, dv.
// The GEMMs compute the full T x T square; the softmax writes exact zeros above the diagonal, so the
// masked half contributes nothing (as in the CPU oracle). fp32 activations: fp32 heads and GEMMs.
// bf16 activations: bf16 heads, att and datt (in the first half of the saved and scratch buffers the
// model sizes in floats), bf16 GEMMs on tensor cores with fp32 accumulation, and the 1/sqrt(hs)
// scale fused into the softmax (llm.c's shape of a fast naive path). Flash reads and
// writes the activations in their own type (float and bf16 kernels); bf16 with heads of 64 runs on
// tensor cores (kernels/flash_attention_tc.cu) unless CudaOpsOptions::attention_tensor_cores is off.
// Is not: the kernels (kernels/attention.cu, kernels/flash_attention.cu).
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

namespace gpt2::cuda {
namespace {

// A GEMM over the BH heads; strides follow from the per-head shapes.
RowMajorGemm head_gemm(int M, int N, int K, bool trans_a, bool trans_b, int64_t lda, int64_t ldb,
                       int64_t ldc, int BH, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  return batched(gemm_shape(M, N, K, trans_a, trans_b, lda, ldb, ldc), BH, stride_a, stride_b, stride_c);
}

// q, k, v (B,NH,T,hs) each <- qkv (B,T,3C).
template <class Act>
cudaError_t split_qkv(float* q, float* k, float* v, const Act* qkv, int B, int T, int C, int NH,
                      cudaStream_t stream) {
  const int hs = C / NH;
  cudaError_t e = launch_split_heads(q, qkv, B, T, NH, hs, 3 * C, 0, stream);
  if (e == cudaSuccess) e = launch_split_heads(k, qkv, B, T, NH, hs, 3 * C, C, stream);
  if (e == cudaSuccess) e = launch_split_heads(v, qkv, B, T, NH, hs, 3 * C, 2 * C, stream);
  return e;
}

cudaError_t split_qkv(float* q, float* k, float* v, ConstActPtr qkv, int B, int T, int C, int NH,
                      cudaStream_t stream) {
  return qkv.type() == ActType::kBF16 ? split_qkv(q, k, v, act_bf16(qkv), B, T, C, NH, stream)
                      : split_qkv(q, k, v, qkv.f32(), B, T, C, NH, stream);
}
cudaError_t split_heads(float* heads, ConstActPtr src, int B, int T, int NH, int hs, int ld, int offset,
                        cudaStream_t stream) {
  return src.type() == ActType::kBF16 ? launch_split_heads(heads, act_bf16(src), B, T, NH, hs, ld, offset, stream)
                      : launch_split_heads(heads, src.f32(), B, T, NH, hs, ld, offset, stream);
}
cudaError_t merge_heads(ActPtr dst, const float* heads, int B, int T, int NH, int hs, int ld, int offset,
                        cudaStream_t stream) {
  return dst.type() == ActType::kBF16 ? launch_merge_heads(act_bf16(dst), heads, B, T, NH, hs, ld, offset, stream)
                      : launch_merge_heads(dst.f32(), heads, B, T, NH, hs, ld, offset, stream);
}

// The tensor-core flash kernels apply: bf16 activations, heads of 64, and buffers aligned for their
// 16-byte copies (rows are then aligned too: C * 2 bytes is a multiple of 128 when C = 64 * NH).
bool flash_on_tensor_cores(bool allowed, ActType type, int C, int NH, std::initializer_list<const void*> buffers) {
  if (!allowed || type != ActType::kBF16 || NH <= 0 || C != 64 * NH) return false;
  for (const void* p : buffers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// One bf16 GEMM over the heads: bf16 A, B and output, fp32 accumulation (tensor cores).
rankscope::Status bf16_head_gemm(CublasLtGemm& gemm, const RowMajorGemm& shape, const void* a, const void* b, void* c,
                                 float alpha, cudaStream_t stream) {
  GemmCall call;
  call.shape = shape;
  call.a = a;
  call.b = b;
  call.c = c;
  call.out_bf16 = true;
  call.operands = GemmOperands::kBf16;
  call.alpha = alpha;
  RS_ASSIGN_OR_RETURN(bool ran, gemm.try_run(call, stream));
  if (!ran) {
    return rankscope::unsupported("cuBLASLt has no bf16 algorithm for an attention GEMM of " +
                                  std::to_string(shape.M) + "x" + std::to_string(shape.N) + "x" +
                                  std::to_string(shape.K) + " (hint: --attention flash, or --precision fp32)");
  }
  return rankscope::Status::ok_status();
}

}  // namespace

rankscope::Status CudaOps::naive_attention_forward(ActPtr out, float* att, ConstActPtr qkv, int B, int T, int C,
                                                   int NH) {
  const int hs = C / NH;
  const int BH = B * NH;
  const int64_t head = static_cast<int64_t>(T) * hs;  // one head's (T,hs)
  const int64_t square = static_cast<int64_t>(T) * T;
  const size_t n = static_cast<size_t>(BH) * head;
  RS_ASSIGN_OR_RETURN(void* buf, scratch(Scratch::kAttentionHeads, 4 * n * sizeof(float)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  if (qkv.type() == ActType::kBF16) {
    __nv_bfloat16* q = static_cast<__nv_bfloat16*>(buf);
    __nv_bfloat16* k = q + n;
    __nv_bfloat16* v = k + n;
    __nv_bfloat16* y = v + n;
    auto* att_bf16 = reinterpret_cast<__nv_bfloat16*>(att);
    const __nv_bfloat16* src = act_bf16(qkv);
    RS_CUDA_CHECK(launch_split_heads(q, src, B, T, NH, hs, 3 * C, 0, stream_));
    RS_CUDA_CHECK(launch_split_heads(k, src, B, T, NH, hs, 3 * C, C, stream_));
    RS_CUDA_CHECK(launch_split_heads(v, src, B, T, NH, hs, 3 * C, 2 * C, stream_));
    // scores (T,T) = q k^T, unscaled: the softmax scales
    RS_RETURN_IF_ERROR(bf16_head_gemm(*gemm_, head_gemm(T, T, hs, false, true, hs, hs, T, BH, head, head, square), q,
                                      k, att_bf16, 1.0f, stream_));
    RS_CUDA_CHECK(launch_causal_softmax(att_bf16, static_cast<long>(BH) * T, T, scale, stream_));
    RS_RETURN_IF_ERROR(bf16_head_gemm(*gemm_, head_gemm(T, hs, T, false, false, T, hs, hs, BH, square, head, head),
                                      att_bf16, v, y, 1.0f, stream_));
    RS_CUDA_CHECK(launch_merge_heads(act_bf16(out), y, B, T, NH, hs, C, 0, stream_));
    return rankscope::Status::ok_status();
  }
  float* q = static_cast<float*>(buf);
  float* k = q + n;
  float* v = k + n;
  float* y = v + n;
  RS_CUDA_CHECK(split_qkv(q, k, v, qkv, B, T, C, NH, stream_));
  // att (T,T) = scale * q (T,hs) @ k (T,hs)^T, per head
  RS_RETURN_IF_ERROR(gemm_->run(head_gemm(T, T, hs, false, true, hs, hs, T, BH, head, head, square), q, k, att,
                                nullptr, scale, 0.0f, GemmOperands::kFp32, stream_));
  RS_CUDA_CHECK(launch_causal_softmax(att, static_cast<long>(BH) * T, T, stream_));
  // y (T,hs) = att (T,T) @ v (T,hs), per head
  RS_RETURN_IF_ERROR(gemm_->run(head_gemm(T, hs, T, false, false, T, hs, hs, BH, square, head, head), att, v, y,
                                nullptr, 1.0f, 0.0f, GemmOperands::kFp32, stream_));
  RS_CUDA_CHECK(merge_heads(out, y, B, T, NH, hs, C, 0, stream_));
  return rankscope::Status::ok_status();
}

rankscope::Status CudaOps::naive_attention_backward(ActPtr dqkv, float* datt, ConstActPtr dout, ConstActPtr qkv,
                                                    const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int BH = B * NH;
  const int64_t head = static_cast<int64_t>(T) * hs;
  const int64_t square = static_cast<int64_t>(T) * T;
  const size_t n = static_cast<size_t>(BH) * head;
  // q, k, v are split again: later layers' forwards reused the scratch since this layer ran.
  RS_ASSIGN_OR_RETURN(void* buf, scratch(Scratch::kAttentionHeads, 4 * n * sizeof(float)));
  float* q = static_cast<float*>(buf);
  float* k = q + n;
  float* v = k + n;
  RS_ASSIGN_OR_RETURN(void* gbuf, scratch(Scratch::kAttentionGrads, 4 * n * sizeof(float)));
  if (qkv.type() == ActType::kBF16) {
    return naive_attention_backward_bf16(buf, gbuf, dqkv, datt, dout, qkv, att, B, T, C, NH);
  }
  float* dq = static_cast<float*>(gbuf);
  float* dk = dq + n;
  float* dv = dk + n;
  float* dy = dv + n;
  RS_CUDA_CHECK(split_qkv(q, k, v, qkv, B, T, C, NH, stream_));
  RS_CUDA_CHECK(split_heads(dy, dout, B, T, NH, hs, C, 0, stream_));
  // datt (T,T) = dy (T,hs) @ v (T,hs)^T
  RS_RETURN_IF_ERROR(gemm_->run(head_gemm(T, T, hs, false, true, hs, hs, T, BH, head, head, square), dy, v,
                                datt, nullptr, 1.0f, 0.0f, GemmOperands::kFp32, stream_));
  // dv (T,hs) = att (T,T)^T @ dy (T,hs)
  RS_RETURN_IF_ERROR(gemm_->run(head_gemm(T, hs, T, true, false, T, hs, hs, BH, square, head, head), att, dy,
                                dv, nullptr, 1.0f, 0.0f, GemmOperands::kFp32, stream_));
  RS_CUDA_CHECK(launch_causal_softmax_backward(datt, att, static_cast<long>(BH) * T, T, stream_));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // dq (T,hs) = scale * dpre (T,T) @ k (T,hs);  dk (T,hs) = scale * dpre^T @ q
  RS_RETURN_IF_ERROR(gemm_->run(head_gemm(T, hs, T, false, false, T, hs, hs, BH, square, head, head), datt, k,
                                dq, nullptr, scale, 0.0f, GemmOperands::kFp32, stream_));
  RS_RETURN_IF_ERROR(gemm_->run(head_gemm(T, hs, T, true, false, T, hs, hs, BH, square, head, head), datt, q,
                                dk, nullptr, scale, 0.0f, GemmOperands::kFp32, stream_));
  RS_CUDA_CHECK(merge_heads(dqkv, dq, B, T, NH, hs, 3 * C, 0, stream_));
  RS_CUDA_CHECK(merge_heads(dqkv, dk, B, T, NH, hs, 3 * C, C, stream_));
  RS_CUDA_CHECK(merge_heads(dqkv, dv, B, T, NH, hs, 3 * C, 2 * C, stream_));
  return rankscope::Status::ok_status();
}

// The bf16 naive backward; heads_buf and grads_buf each hold 4 (B,NH,T,hs) tensors.
rankscope::Status CudaOps::naive_attention_backward_bf16(void* heads_buf, void* grads_buf, ActPtr dqkv, float* datt,
                                                         ConstActPtr dout, ConstActPtr qkv, const float* att, int B,
                                                         int T, int C, int NH) {
  const int hs = C / NH;
  const int BH = B * NH;
  const int64_t head = static_cast<int64_t>(T) * hs;
  const int64_t square = static_cast<int64_t>(T) * T;
  const size_t n = static_cast<size_t>(BH) * head;
  __nv_bfloat16* q = static_cast<__nv_bfloat16*>(heads_buf);
  __nv_bfloat16* k = q + n;
  __nv_bfloat16* v = k + n;
  __nv_bfloat16* dq = static_cast<__nv_bfloat16*>(grads_buf);
  __nv_bfloat16* dk = dq + n;
  __nv_bfloat16* dv = dk + n;
  __nv_bfloat16* dy = dv + n;
  auto* datt_bf16 = reinterpret_cast<__nv_bfloat16*>(datt);
  const auto* att_bf16 = reinterpret_cast<const __nv_bfloat16*>(att);
  const __nv_bfloat16* src = act_bf16(qkv);
  RS_CUDA_CHECK(launch_split_heads(q, src, B, T, NH, hs, 3 * C, 0, stream_));
  RS_CUDA_CHECK(launch_split_heads(k, src, B, T, NH, hs, 3 * C, C, stream_));
  RS_CUDA_CHECK(launch_split_heads(v, src, B, T, NH, hs, 3 * C, 2 * C, stream_));
  RS_CUDA_CHECK(launch_split_heads(dy, act_bf16(dout), B, T, NH, hs, C, 0, stream_));
  // datt (T,T) = dy v^T;  dv (T,hs) = att^T dy
  RS_RETURN_IF_ERROR(bf16_head_gemm(*gemm_, head_gemm(T, T, hs, false, true, hs, hs, T, BH, head, head, square), dy,
                                    v, datt_bf16, 1.0f, stream_));
  RS_RETURN_IF_ERROR(bf16_head_gemm(*gemm_, head_gemm(T, hs, T, true, false, T, hs, hs, BH, square, head, head),
                                    att_bf16, dy, dv, 1.0f, stream_));
  RS_CUDA_CHECK(launch_causal_softmax_backward(datt_bf16, att_bf16, static_cast<long>(BH) * T, T, stream_));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // dq = scale * dpre k;  dk = scale * dpre^T q
  RS_RETURN_IF_ERROR(bf16_head_gemm(*gemm_, head_gemm(T, hs, T, false, false, T, hs, hs, BH, square, head, head),
                                    datt_bf16, k, dq, scale, stream_));
  RS_RETURN_IF_ERROR(bf16_head_gemm(*gemm_, head_gemm(T, hs, T, true, false, T, hs, hs, BH, square, head, head),
                                    datt_bf16, q, dk, scale, stream_));
  __nv_bfloat16* dst = act_bf16(dqkv);
  RS_CUDA_CHECK(launch_merge_heads(dst, dq, B, T, NH, hs, 3 * C, 0, stream_));
  RS_CUDA_CHECK(launch_merge_heads(dst, dk, B, T, NH, hs, 3 * C, C, stream_));
  RS_CUDA_CHECK(launch_merge_heads(dst, dv, B, T, NH, hs, 3 * C, 2 * C, stream_));
  return rankscope::Status::ok_status();
}

void CudaOps::attention_forward(AttentionKind kind, ActPtr out, float* saved, ConstActPtr qkv, int B, int T,
                                int C, int NH) {
  one_act_type("attention_forward", {out.type(), qkv.type()});
  if (kind == AttentionKind::kNaive) {
    RS_CUDA_OP_MUST(naive_attention_forward(out, /*att=*/saved, qkv, B, T, C, NH));
    return;
  }
  RS_CUDA_OP_MUST(check_cuda_attention(kind, C / NH));
  if (flash_on_tensor_cores(options_.attention_tensor_cores, out.type(), C, NH, {out.data(), qkv.data()})) {
    RS_CUDA_OP_MUST(launch_flash_attention_tc_forward(act_bf16(out), /*lse=*/saved, act_bf16(qkv), B, T, C, NH, stream_));
  } else if (out.type() == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_flash_attention_forward(act_bf16(out), /*lse=*/saved, act_bf16(qkv), B, T, C, NH, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_flash_attention_forward(out.f32(), /*lse=*/saved, qkv.f32(), B, T, C, NH, stream_));
  }
}

void CudaOps::attention_backward(AttentionKind kind, ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv,
                                 ConstActPtr out, const float* saved, int B, int T, int C, int NH) {
  one_act_type("attention_backward", {dqkv.type(), dout.type(), qkv.type(), out.type()});
  if (kind == AttentionKind::kNaive) {
    RS_CUDA_OP_MUST(naive_attention_backward(dqkv, /*datt=*/scratch, dout, qkv, /*att=*/saved, B, T, C, NH));
    return;
  }
  RS_CUDA_OP_MUST(check_cuda_attention(kind, C / NH));
  if (flash_on_tensor_cores(options_.attention_tensor_cores, dqkv.type(), C, NH,
                            {dqkv.data(), dout.data(), qkv.data(), out.data()})) {
    RS_CUDA_OP_MUST(launch_flash_attention_row_dot(/*dsum=*/scratch, act_bf16(dout), act_bf16(out), B, T, C, NH, stream_));
    RS_CUDA_OP_MUST(launch_flash_attention_tc_backward(act_bf16(dqkv), act_bf16(dout), act_bf16(qkv), /*lse=*/saved,
                                                       /*dsum=*/scratch, B, T, C, NH, stream_));
  } else if (dqkv.type() == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_flash_attention_backward(act_bf16(dqkv), /*dsum=*/scratch, act_bf16(dout), act_bf16(qkv),
                                                    act_bf16(out), /*lse=*/saved, B, T, C, NH, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_flash_attention_backward(dqkv.f32(), /*dsum=*/scratch, dout.f32(), qkv.f32(), out.f32(),
                                                    /*lse=*/saved, B, T, C, NH, stream_));
  }
}

}  // namespace gpt2::cuda
