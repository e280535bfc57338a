// cuda_ops_attention.cpp — causal self-attention of CudaOps, both kinds (ops.h AttentionKind).
// Flash: the kernels of kernels/flash_attention.cu on qkv in place; saved = lse (B,NH,T), scratch =
// D (B,NH,T). Naive: head split/merge and softmax kernels around cuBLASLt strided-batched GEMMs over
// the B*NH heads; saved = att (B,NH,T,T), scratch = datt (B,NH,T,T):
// Forward:  q,k,v (B,NH,T,hs) <- qkv (B,T,3C); att (B,NH,T,T) = softmax(mask(q k^T / sqrt(hs)));
//           y (B,NH,T,hs) = att @ v; out (B,T,C) <- y.
// Backward: dy <- dout; datt = dy v^T; dv = att^T dy; datt <- softmax backward (in place);
//           dq = datt k / sqrt(hs); dk = datt^T q / sqrt(hs); dqkv (B,T,3C) <- dq, dk, dv.
// The GEMMs compute the full T x T square; the softmax writes exact zeros above the diagonal, so the
// masked half contributes nothing (as in the CPU oracle). These GEMMs stay fp32 in every precision;
// with bf16 activations the head split widens qkv/dout and the merge rounds out/dqkv. Flash reads and
// writes the activations in their own type (float and bf16 kernels).
// Is not: the kernels (kernels/attention.cu, kernels/flash_attention.cu).
#include <cmath>

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

}  // namespace

rankscope::Status CudaOps::naive_attention_forward(ActPtr out, float* att, ConstActPtr qkv, int B, int T, int C,
                                                   int NH) {
  const int hs = C / NH;
  const int BH = B * NH;
  const int64_t head = static_cast<int64_t>(T) * hs;  // one head's (T,hs)
  const int64_t square = static_cast<int64_t>(T) * T;
  const size_t n = static_cast<size_t>(BH) * head;
  RS_ASSIGN_OR_RETURN(void* buf, scratch(Scratch::kAttentionHeads, 4 * n * sizeof(float)));
  float* q = static_cast<float*>(buf);
  float* k = q + n;
  float* v = k + n;
  float* y = v + n;
  RS_CUDA_CHECK(split_qkv(q, k, v, qkv, B, T, C, NH, stream_));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
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

void CudaOps::attention_forward(AttentionKind kind, ActPtr out, float* saved, ConstActPtr qkv, int B, int T,
                                int C, int NH) {
  one_act_type("attention_forward", {out.type(), qkv.type()});
  if (kind == AttentionKind::kNaive) {
    RS_CUDA_OP_MUST(naive_attention_forward(out, /*att=*/saved, qkv, B, T, C, NH));
    return;
  }
  RS_CUDA_OP_MUST(check_cuda_attention(kind, C / NH));
  if (out.type() == ActType::kBF16) {
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
  if (dqkv.type() == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_flash_attention_backward(act_bf16(dqkv), /*dsum=*/scratch, act_bf16(dout), act_bf16(qkv),
                                                    act_bf16(out), /*lse=*/saved, B, T, C, NH, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_flash_attention_backward(dqkv.f32(), /*dsum=*/scratch, dout.f32(), qkv.f32(), out.f32(),
                                                    /*lse=*/saved, B, T, C, NH, stream_));
  }
}

}  // namespace gpt2::cuda
