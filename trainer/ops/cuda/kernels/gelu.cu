// gelu.cu — GELU with the tanh approximation (GPT-2's "gelu_new"), forward and backward kernels,
// fp32 or bf16 elements (loaded to float, computed in float, stored rounded to nearest).
// Is: kernels and launch wrappers only; also the fallback of the GEMM's GELU epilogues where
// cuBLASLt refuses one (cuda_ops_gemm.cpp). Is not: the exact erf GELU.
#include <cuda_bf16.h>

#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/element_type.cuh"

namespace gpt2::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;


// out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class T>
__global__ void gelu_forward_kernel(T* out, const T* inp, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = load_f32(inp + i);
    store_f32(out + i, 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x))));
  }
}

// dinp (n) = dout * d gelu / dx; element-wise, so dinp may alias dout.
template <class T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = load_f32(inp + i);
    const float th = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float grad =
        0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    store_f32(dinp + i, grad * load_f32(dout + i));
  }
}

template <class T>
cudaError_t gelu_forward(T* out, const T* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  gelu_forward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, inp, n);
  return cudaGetLastError();
}

template <class T>
cudaError_t gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  gelu_backward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dinp, inp, dout, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gelu_forward(float* out, const float* inp, size_t n, cudaStream_t stream) {
  return gelu_forward(out, inp, n, stream);
}
cudaError_t launch_gelu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, size_t n, cudaStream_t stream) {
  return gelu_forward(out, inp, n, stream);
}
cudaError_t launch_gelu_backward(float* dinp, const float* inp, const float* dout, size_t n,
                                 cudaStream_t stream) {
  return gelu_backward(dinp, inp, dout, n, stream);
}
cudaError_t launch_gelu_backward(__nv_bfloat16* dinp, const __nv_bfloat16* inp, const __nv_bfloat16* dout, size_t n,
                                 cudaStream_t stream) {
  return gelu_backward(dinp, inp, dout, n, stream);
}

}  // namespace gpt2::cuda
