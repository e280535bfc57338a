// matmul.cpp — GEMM ops of the CPU backend: every product is an OpenBLAS cblas_sgemm.
//
// Threads: one pool only. OpenBLAS runs single-threaded (cpu_ops.cpp sets it) and OpenMP splits
// each GEMM into row blocks, one sgemm per thread. Two pools (OpenBLAS's pthreads plus OpenMP's
// spinning workers) fight over the cores, which costs much on a small or shared machine.
// Is not: attention's per-head products (attention.cpp), which parallelise over (batch, head).
#include <cblas.h>
#include <omp.h>

#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

namespace {

// [begin, end) of block `i` of `parts` over `n` items.
inline void block_range(int n, int parts, int i, int* begin, int* end) {
  const int base = n / parts, extra = n % parts;
  *begin = i * base + (i < extra ? i : extra);
  *end = *begin + base + (i < extra ? 1 : 0);
}

}  // namespace

// out (N,OC) = inp (N,C) @ weight (OC,C)^T (+ bias (OC))
void CpuOps::matmul_forward(ActPtr out_, ConstActPtr inp_, const float* weight, const float* bias,
                            int N, int C, int OC) {
  float* out = out_.f32("cpu matmul_forward");
  const float* inp = inp_.f32("cpu matmul_forward");
  // Split rows of the output when there are enough of them, else its columns.
  const bool split_rows = N >= 64;
#pragma omp parallel
  {
    const int parts = omp_get_num_threads(), me = omp_get_thread_num();
    int b, e;
    block_range(split_rows ? N : OC, parts, me, &b, &e);
    if (e > b) {
      if (split_rows) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, e - b, OC, C, 1.0f,
                    inp + static_cast<size_t>(b) * C, C, weight, C, 0.0f,
                    out + static_cast<size_t>(b) * OC, OC);
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, e - b, C, 1.0f, inp, C,
                    weight + static_cast<size_t>(b) * C, C, 0.0f, out + b, OC);
      }
      if (bias != nullptr) {
        const int r0 = split_rows ? b : 0, r1 = split_rows ? e : N;
        const int c0 = split_rows ? 0 : b, c1 = split_rows ? OC : e;
        for (int n = r0; n < r1; n++) {
          float* row = out + static_cast<size_t>(n) * OC;
#pragma omp simd
          for (int o = c0; o < c1; o++) row[o] += bias[o];
        }
      }
    }
  }
}

// out (N,OC) += bias (OC), broadcast over rows.
void CpuOps::add_bias(ActPtr out_, const float* bias, int N, int OC) {
  float* out = out_.f32("cpu add_bias");
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    float* row = out + static_cast<size_t>(n) * OC;
#pragma omp simd
    for (int o = 0; o < OC; o++) row[o] += bias[o];
  }
}

// dinp (N,C) = dout (N,OC) @ weight (OC,C); dweight (OC,C) += dout^T @ inp (N,C);
// dbias (OC) += sum over rows of dout.
void CpuOps::matmul_backward(ActPtr dinp_, float* dweight, float* dbias, ConstActPtr dout_,
                             ConstActPtr inp_, const float* weight, int N, int C, int OC) {
  float* dinp = dinp_.f32("cpu matmul_backward");
  const float* dout = dout_.f32("cpu matmul_backward");
  const float* inp = inp_.f32("cpu matmul_backward");
#pragma omp parallel
  {
    const int parts = omp_get_num_threads(), me = omp_get_thread_num();
    int b, e;
    if (dinp != nullptr) {
      // dinp rows [b, e)
      block_range(N, parts, me, &b, &e);
      if (e > b) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, e - b, C, OC, 1.0f,
                    dout + static_cast<size_t>(b) * OC, OC, weight, C, 0.0f,
                    dinp + static_cast<size_t>(b) * C, C);
      }
    }
    // dweight rows (output features) [b, e): dout[:, b:e]^T @ inp; dbias over the same features,
    // summing rows in order (deterministic).
    block_range(OC, parts, me, &b, &e);
    if (e > b) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e - b, C, N, 1.0f, dout + b, OC, inp, C,
                  1.0f, dweight + static_cast<size_t>(b) * C, C);
      if (dbias != nullptr) {
        for (int n = 0; n < N; n++) {
          const float* row = dout + static_cast<size_t>(n) * OC;
#pragma omp simd
          for (int o = b; o < e; o++) dbias[o] += row[o];
        }
      }
    }
  }
}

}  // namespace gpt2::cpu
