// gelu.cu — GELU with the tanh approximation (GPT-2's "gelu_new"), forward and backward kernels.
// Is: kernels and launch wrappers only. Is not: the exact erf GELU, nor fused into the GEMM epilogue.
#include "ops/cuda/kernels/device_util.cuh"

namespace gpt2::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
__global__ void gelu_forward_kernel(float* out, const float* inp, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
}

// dinp (n) = dout * d gelu / dx; element-wise, so dinp may alias dout.
__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = inp[i];
    const float th = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float grad =
        0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    dinp[i] = grad * dout[i];
  }
}

}  // namespace

cudaError_t launch_gelu_forward(float* out, const float* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  gelu_forward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, inp, n);
  return cudaGetLastError();
}

cudaError_t launch_gelu_backward(float* dinp, const float* inp, const float* dout, size_t n,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  gelu_backward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dinp, inp, dout, n);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
