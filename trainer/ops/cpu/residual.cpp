// residual.cpp — element-wise adds: the residual connection and gradient accumulation.
#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

// out (n) = a + b
void CpuOps::residual_forward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for simd
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// acc (n) += x
void CpuOps::add_inplace(float* acc, const float* x, size_t n) {
#pragma omp parallel for simd
  for (size_t i = 0; i < n; i++) acc[i] += x[i];
}

}  // namespace gpt2::cpu
