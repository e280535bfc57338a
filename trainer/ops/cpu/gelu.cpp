// gelu.cpp — GELU with the tanh approximation (GPT-2's "gelu_new"), forward and backward.
// Is not: the exact erf GELU.
#include <cmath>

#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kCubic = 0.044715f;
}  // namespace

// out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void CpuOps::gelu_forward(ActPtr out_, ConstActPtr inp_, size_t n) {
  float* out = out_.f32("cpu gelu_forward");
  const float* inp = inp_.f32("cpu gelu_forward");
#pragma omp parallel for
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
}

// dinp (n) = dout * dGELU/dx (x = inp); dinp may alias dout (element-wise).
void CpuOps::gelu_backward(ActPtr dinp_, ConstActPtr inp_, ConstActPtr dout_, size_t n) {
  float* dinp = dinp_.f32("cpu gelu_backward");
  const float* inp = inp_.f32("cpu gelu_backward");
  const float* dout = dout_.f32("cpu gelu_backward");
#pragma omp parallel for
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    float th = std::tanh(u);
    float sech2 = 1.0f - th * th;
    float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    dinp[i] = grad * dout[i];
  }
}

}  // namespace gpt2::cpu
