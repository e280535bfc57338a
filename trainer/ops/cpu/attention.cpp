// attention.cpp — causal multi-head self-attention, forward and backward, per (batch, head) with
// OpenBLAS sgemm for Q K^T, att V and their gradients; softmax rows in OpenMP.
// Is not: flash attention: the (B,NH,T,T) probabilities are kept for backward (the CPU oracle
// favours clarity; the CUDA backend has its own kernel). The GEMMs compute the full T x T square
// and the masked upper triangle is zeroed by the softmax, so masked entries never contribute.
#include <cblas.h>

#include <cmath>
#include <limits>

#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

// qkv (B,T,3C) = [Q | K | V]; att (B,NH,T,T) = softmax(mask(Q K^T / sqrt(hs)));
// out (B,T,C) = att @ V, head h in channels [h*hs, (h+1)*hs).
void CpuOps::attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                               int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t TT = static_cast<size_t>(T) * T;
  // GEMMs outside any parallel region: OpenBLAS threads them itself.
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const float* q = qkv + static_cast<size_t>(b) * T * C3 + h * hs;
      const float* k = q + C;
      float* a = att + (static_cast<size_t>(b) * NH + h) * TT;
      // a (T,T) = scale * q (T,hs) @ k (T,hs)^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, a, T);
    }
  }
  const long rows = static_cast<long>(B) * NH * T;
#pragma omp parallel for
  for (long r = 0; r < rows; r++) {
    const int t = static_cast<int>(r % T);
    float* a = att + static_cast<size_t>(r) * T;
    float maxv = -std::numeric_limits<float>::infinity();
    for (int j = 0; j <= t; j++) maxv = a[j] > maxv ? a[j] : maxv;
    float sum = 0.0f;
    for (int j = 0; j <= t; j++) {
      a[j] = std::exp(a[j] - maxv);
      sum += a[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j <= t; j++) a[j] *= inv;
    for (int j = t + 1; j < T; j++) a[j] = 0.0f;  // causal mask
  }
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const float* v = qkv + static_cast<size_t>(b) * T * C3 + 2 * C + h * hs;
      const float* a = att + (static_cast<size_t>(b) * NH + h) * TT;
      float* o = out + static_cast<size_t>(b) * T * C + h * hs;
      // o (T,hs) = a (T,T) @ v (T,hs)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3, 0.0f, o, C);
    }
  }
}

// dqkv (B,T,3C) = gradient of the forward above given dout (B,T,C); datt (B,NH,T,T) is scratch.
void CpuOps::attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                                const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t TT = static_cast<size_t>(T) * T;
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const size_t qoff = static_cast<size_t>(b) * T * C3 + h * hs;
      const float* v = qkv + qoff + 2 * C;
      float* dv = dqkv + qoff + 2 * C;
      const float* a = att + (static_cast<size_t>(b) * NH + h) * TT;
      float* da = datt + (static_cast<size_t>(b) * NH + h) * TT;
      const float* dy = dout + static_cast<size_t>(b) * T * C + h * hs;
      // da (T,T) = dy (T,hs) @ v (T,hs)^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3, 0.0f, da, T);
      // dv (T,hs) = a^T (T,T) @ dy (T,hs)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, dy, C, 0.0f, dv, C3);
    }
  }
  // Softmax backward in place: dpre[j] = a[j] * (da[j] - sum_k a[k] da[k]); zero where masked.
  const long rows = static_cast<long>(B) * NH * T;
#pragma omp parallel for
  for (long r = 0; r < rows; r++) {
    const int t = static_cast<int>(r % T);
    const float* a = att + static_cast<size_t>(r) * T;
    float* da = datt + static_cast<size_t>(r) * T;
    float dot = 0.0f;
    for (int j = 0; j <= t; j++) dot += a[j] * da[j];
    for (int j = 0; j <= t; j++) da[j] = a[j] * (da[j] - dot);
    for (int j = t + 1; j < T; j++) da[j] = 0.0f;
  }
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const size_t qoff = static_cast<size_t>(b) * T * C3 + h * hs;
      const float* q = qkv + qoff;
      const float* k = qkv + qoff + C;
      float* dq = dqkv + qoff;
      float* dk = dqkv + qoff + C;
      const float* dpre = datt + (static_cast<size_t>(b) * NH + h) * TT;
      // dq (T,hs) = scale * dpre (T,T) @ k (T,hs);  dk (T,hs) = scale * dpre^T @ q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dpre, T, k, C3, 0.0f, dq, C3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dpre, T, q, C3, 0.0f, dk, C3);
    }
  }
}

}  // namespace gpt2::cpu
