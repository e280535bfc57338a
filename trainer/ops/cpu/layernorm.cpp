// layernorm.cpp — LayerNorm forward and backward over the last dimension (eps 1e-5, as GPT-2), and
// the residual add fused with the LayerNorm after it (one pass per row: the row of a + b is written
// and normalised while it is in cache).
// Is not: a separate residual backward: layernorm_backward accumulates dinp += into the residual
// stream's gradient, which is the fused residual + LayerNorm backward.
#include <cmath>

#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

namespace {
constexpr float kEps = 1e-5f;

// One row: y (C) = (x - mean) * rstd * weight + bias; *mean, *rstd =. Both forwards call this, so
// the fused op and the composed ops give the same bits.
inline void layernorm_row(float* y, float* mean, float* rstd, const float* x, const float* weight,
                          const float* bias, int C) {
  float m = 0.0f;
#pragma omp simd reduction(+ : m)
  for (int i = 0; i < C; i++) m += x[i];
  m /= C;
  float var = 0.0f;
#pragma omp simd reduction(+ : var)
  for (int i = 0; i < C; i++) var += (x[i] - m) * (x[i] - m);
  var /= C;
  float s = 1.0f / std::sqrt(var + kEps);
#pragma omp simd
  for (int i = 0; i < C; i++) y[i] = (x[i] - m) * s * weight[i] + bias[i];
  *mean = m;
  *rstd = s;
}
}  // namespace

// out (N,C) = (inp - mean) * rstd * weight (C) + bias (C); mean, rstd (N) =
void CpuOps::layernorm_forward(ActPtr out_, float* mean, float* rstd, ConstActPtr inp_,
                               const float* weight, const float* bias, int N, int C) {
  float* out = out_.f32("cpu layernorm_forward");
  const float* inp = inp_.f32("cpu layernorm_forward");
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const size_t row = static_cast<size_t>(n) * C;
    layernorm_row(out + row, mean + n, rstd + n, inp + row, weight, bias, C);
  }
}

// residual_out (N,C) = a + b (may alias a or b); ln_out, mean, rstd = layernorm of residual_out.
void CpuOps::residual_layernorm_forward(ActPtr residual_out_, ActPtr ln_out_, float* mean, float* rstd,
                                        ConstActPtr a_, ConstActPtr b_, const float* weight,
                                        const float* bias, int N, int C) {
  float* residual_out = residual_out_.f32("cpu residual_layernorm_forward");
  float* ln_out = ln_out_.f32("cpu residual_layernorm_forward");
  const float* a = a_.f32("cpu residual_layernorm_forward");
  const float* b = b_.f32("cpu residual_layernorm_forward");
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const size_t row = static_cast<size_t>(n) * C;
    float* x = residual_out + row;
#pragma omp simd
    for (int i = 0; i < C; i++) x[i] = a[row + i] + b[row + i];
    layernorm_row(ln_out + row, mean + n, rstd + n, x, weight, bias, C);
  }
}

// dinp (N,C) +=, dweight (C) +=, dbias (C) += from dout (N,C) and the forward's mean, rstd (N).
void CpuOps::layernorm_backward(ActPtr dinp_, float* dweight, float* dbias, ConstActPtr dout_,
                                ConstActPtr inp_, const float* weight, const float* mean,
                                const float* rstd, int N, int C) {
  float* dinp = dinp_.f32("cpu layernorm_backward");
  const float* dout = dout_.f32("cpu layernorm_backward");
  const float* inp = inp_.f32("cpu layernorm_backward");
  // Input gradient: rows are independent.
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const float* x = inp + static_cast<size_t>(n) * C;
    const float* dy = dout + static_cast<size_t>(n) * C;
    float* dx = dinp + static_cast<size_t>(n) * C;
    float m = mean[n], s = rstd[n];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
    for (int i = 0; i < C; i++) {
      float dnorm = weight[i] * dy[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * (x[i] - m) * s;
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
#pragma omp simd
    for (int i = 0; i < C; i++) {
      float norm = (x[i] - m) * s;
      dx[i] += (weight[i] * dy[i] - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
  // Parameter gradients: threads own disjoint channel blocks, rows in order (no races).
  constexpr int kBlock = 32;
  int blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for
  for (int b = 0; b < blocks; b++) {
    int c0 = b * kBlock;
    int c1 = c0 + kBlock < C ? c0 + kBlock : C;
    float dw[kBlock] = {}, db[kBlock] = {};
    for (int n = 0; n < N; n++) {
      const float* x = inp + static_cast<size_t>(n) * C;
      const float* dy = dout + static_cast<size_t>(n) * C;
      float m = mean[n], s = rstd[n];
#pragma omp simd
      for (int i = c0; i < c1; i++) {
        dw[i - c0] += (x[i] - m) * s * dy[i];
        db[i - c0] += dy[i];
      }
    }
    for (int i = c0; i < c1; i++) {
      dweight[i] += dw[i - c0];
      dbias[i] += db[i - c0];
    }
  }
}

}  // namespace gpt2::cpu
