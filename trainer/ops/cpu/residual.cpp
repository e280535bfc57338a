// residual.cpp — element-wise adds: the residual connection and gradient accumulation.
#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

// out (n) = a + b
void CpuOps::residual_forward(ActPtr out_, ConstActPtr a_, ConstActPtr b_, size_t n) {
  float* out = out_.f32("cpu residual_forward");
  const float* a = a_.f32("cpu residual_forward");
  const float* b = b_.f32("cpu residual_forward");
#pragma omp parallel for simd
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// acc (n) += x
void CpuOps::add_inplace(ActPtr acc_, ConstActPtr x_, size_t n) {
  float* acc = acc_.f32("cpu add_inplace");
  const float* x = x_.f32("cpu add_inplace");
#pragma omp parallel for simd
  for (size_t i = 0; i < n; i++) acc[i] += x[i];
}

}  // namespace gpt2::cpu
