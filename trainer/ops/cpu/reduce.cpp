// reduce.cpp — whole-buffer reductions and scaling (gradient norm, clipping, mean loss).
#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

double CpuOps::sum_squares(const float* x, size_t n) {
  double total = 0.0;
#pragma omp parallel for reduction(+ : total)
  for (size_t i = 0; i < n; i++) total += static_cast<double>(x[i]) * x[i];
  return total;
}

double CpuOps::sum(const float* x, size_t n) {
  double total = 0.0;
#pragma omp parallel for reduction(+ : total)
  for (size_t i = 0; i < n; i++) total += x[i];
  return total;
}

void CpuOps::scale(float* x, float s, size_t n) {
#pragma omp parallel for simd
  for (size_t i = 0; i < n; i++) x[i] *= s;
}

}  // namespace gpt2::cpu
