// adamw.cpp — one AdamW update of a contiguous parameter slice (as torch.optim.AdamW).
// Is not: the parameter grouping (the model decides which slices get weight decay).
#include <cmath>

#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

// params, grads, m, v (n). Step t is 1-based. p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p).
void CpuOps::adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                          float lr, float beta1, float beta2, float eps, float weight_decay,
                          int64_t t) {
  const float bc1 = 1.0f - static_cast<float>(std::pow(beta1, static_cast<double>(t)));
  const float bc2 = 1.0f - static_cast<float>(std::pow(beta2, static_cast<double>(t)));
#pragma omp parallel for simd
  for (size_t i = 0; i < n; i++) {
    float g = grads[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1;
    float vhat = vi / bc2;
    params[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * params[i]);
  }
}

}  // namespace gpt2::cpu
