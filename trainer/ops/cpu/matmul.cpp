// matmul.cpp — GEMM ops of the CPU backend: every product goes through OpenBLAS cblas_sgemm.
// Is not: attention's per-head products (attention.cpp) — those also use sgemm.
#include <cblas.h>

#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

// out (N,OC) = inp (N,C) @ weight (OC,C)^T (+ bias (OC))
void CpuOps::matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                            int N, int C, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f,
              out, OC);
  if (bias != nullptr) add_bias(out, bias, N, OC);
}

// out (N,OC) += bias (OC), broadcast over rows.
void CpuOps::add_bias(float* out, const float* bias, int N, int OC) {
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    float* row = out + static_cast<size_t>(n) * OC;
#pragma omp simd
    for (int o = 0; o < OC; o++) row[o] += bias[o];
  }
}

// dinp (N,C) = dout (N,OC) @ weight (OC,C); dweight (OC,C) += dout^T @ inp (N,C);
// dbias (OC) += sum over rows of dout.
void CpuOps::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                             const float* inp, const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                0.0f, dinp, C);
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  if (dbias != nullptr) {
    // Column sums: threads own disjoint blocks of columns, rows walk in order (deterministic).
    constexpr int kBlock = 64;
    int blocks = (OC + kBlock - 1) / kBlock;
#pragma omp parallel for
    for (int b = 0; b < blocks; b++) {
      int o0 = b * kBlock;
      int o1 = o0 + kBlock < OC ? o0 + kBlock : OC;
      float acc[kBlock] = {};
      for (int n = 0; n < N; n++) {
        const float* row = dout + static_cast<size_t>(n) * OC;
#pragma omp simd
        for (int o = o0; o < o1; o++) acc[o - o0] += row[o];
      }
      for (int o = o0; o < o1; o++) dbias[o] += acc[o - o0];
    }
  }
}

}  // namespace gpt2::cpu
