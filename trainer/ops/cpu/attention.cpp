// attention.cpp — causal multi-head self-attention, forward and backward: the naive kind here,
// and the dispatch of AttentionKind (flash is flash_attention.cpp). Naive: each (batch, head) is
// one task for an OpenMP thread: sgemm for Q K^T, the causal softmax, sgemm for att V (and the
// four products of backward), single-threaded OpenBLAS inside (see matmul.cpp on thread pools).
// The (B,NH,T,T) probabilities are the saved buffer (memory grows with T^2, on purpose: it is the
// seq-len cliff of our incident reports). The GEMMs compute the full T x T square and the masked
// upper triangle is zeroed by the softmax, so masked entries never contribute.
// Is not: the flash algorithm (flash_attention.h).
#include <cblas.h>

#include <cmath>
#include <limits>

#include "ops/cpu/cpu_ops_impl.h"
#include "ops/cpu/flash_attention.h"

namespace gpt2::cpu {

namespace {

// qkv (B,T,3C) = [Q | K | V]; att (B,NH,T,T) = softmax(mask(Q K^T / sqrt(hs)));
// out (B,T,C) = att @ V, head h in channels [h*hs, (h+1)*hs).
void naive_attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t TT = static_cast<size_t>(T) * T;
#pragma omp parallel for schedule(dynamic)
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const float* q = qkv + static_cast<size_t>(b) * T * C3 + h * hs;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* a = att + static_cast<size_t>(bh) * TT;
    // a (T,T) = scale * q (T,hs) @ k (T,hs)^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, a, T);
    for (int t = 0; t < T; t++) {
      float* row = a + static_cast<size_t>(t) * T;
      float maxv = -std::numeric_limits<float>::infinity();
      for (int j = 0; j <= t; j++) maxv = row[j] > maxv ? row[j] : maxv;
      float sum = 0.0f;
      for (int j = 0; j <= t; j++) {
        row[j] = std::exp(row[j] - maxv);
        sum += row[j];
      }
      const float inv = 1.0f / sum;
      for (int j = 0; j <= t; j++) row[j] *= inv;
      for (int j = t + 1; j < T; j++) row[j] = 0.0f;  // causal mask
    }
    // o (T,hs) = a (T,T) @ v (T,hs)
    float* o = out + static_cast<size_t>(b) * T * C + h * hs;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3, 0.0f, o, C);
  }
}

// dqkv (B,T,3C) = gradient of the forward above given dout (B,T,C); datt (B,NH,T,T) is scratch.
void naive_attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t TT = static_cast<size_t>(T) * T;
#pragma omp parallel for schedule(dynamic)
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const size_t qoff = static_cast<size_t>(b) * T * C3 + h * hs;
    const float* q = qkv + qoff;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* dq = dqkv + qoff;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* a = att + static_cast<size_t>(bh) * TT;
    float* da = datt + static_cast<size_t>(bh) * TT;
    const float* dy = dout + static_cast<size_t>(b) * T * C + h * hs;
    // da (T,T) = dy (T,hs) @ v (T,hs)^T;  dv (T,hs) = a^T (T,T) @ dy (T,hs)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3, 0.0f, da, T);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, dy, C, 0.0f, dv, C3);
    // Softmax backward in place: dpre[j] = a[j] * (da[j] - sum_k a[k] da[k]); zero where masked.
    for (int t = 0; t < T; t++) {
      const float* arow = a + static_cast<size_t>(t) * T;
      float* drow = da + static_cast<size_t>(t) * T;
      float dot = 0.0f;
      for (int j = 0; j <= t; j++) dot += arow[j] * drow[j];
      for (int j = 0; j <= t; j++) drow[j] = arow[j] * (drow[j] - dot);
      for (int j = t + 1; j < T; j++) drow[j] = 0.0f;
    }
    // dq (T,hs) = scale * dpre (T,T) @ k (T,hs);  dk (T,hs) = scale * dpre^T @ q
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, da, T, k, C3, 0.0f, dq, C3);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, da, T, q, C3, 0.0f, dk, C3);
  }
}

}  // namespace

void CpuOps::attention_forward(AttentionKind kind, ActPtr out_, float* saved, ConstActPtr qkv_, int B,
                               int T, int C, int NH) {
  float* out = out_.f32("cpu attention_forward");
  const float* qkv = qkv_.f32("cpu attention_forward");
  if (kind == AttentionKind::kFlash) {
    flash_attention_forward(out, /*lse=*/saved, qkv, B, T, C, NH);
  } else {
    naive_attention_forward(out, /*att=*/saved, qkv, B, T, C, NH);
  }
}

void CpuOps::attention_backward(AttentionKind kind, ActPtr dqkv_, float* scratch, ConstActPtr dout_,
                                ConstActPtr qkv_, ConstActPtr out_, const float* saved, int B, int T,
                                int C, int NH) {
  float* dqkv = dqkv_.f32("cpu attention_backward");
  const float* dout = dout_.f32("cpu attention_backward");
  const float* qkv = qkv_.f32("cpu attention_backward");
  const float* out = out_.f32("cpu attention_backward");
  if (kind == AttentionKind::kFlash) {
    flash_attention_backward(dqkv, /*dsum=*/scratch, dout, qkv, out, /*lse=*/saved, B, T, C, NH);
  } else {
    naive_attention_backward(dqkv, /*datt=*/scratch, dout, qkv, /*att=*/saved, B, T, C, NH);
  }
}

}  // namespace gpt2::cpu
