// residual.cu — element-wise kernels: the residual add, gradient accumulation and scaling.
// Is: kernels and launch wrappers only. The residual add and the accumulate take float or
// __nv_bfloat16 activations (loaded to float, added in float, stored rounded); scale works on fp32
// gradients only. Is not: the residual add fused with LayerNorm (layernorm.cu), which the model uses
// for every residual of the forward; these remain for the other callers (MoE, tests, other backends).
#include <cuda_bf16.h>

#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/element_type.cuh"

namespace gpt2::cuda {
namespace {


// out (n) = a + b
template <class T>
__global__ void residual_forward_kernel(T* out, const T* a, const T* b, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    store_f32(out + i, to_f32(a[i]) + to_f32(b[i]));
  }
}

// acc (n) += x
template <class T>
__global__ void add_inplace_kernel(T* acc, const T* x, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    store_f32(acc + i, to_f32(acc[i]) + to_f32(x[i]));
  }
}

// x (n) *= s
__global__ void scale_kernel(float* x, float s, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    x[i] *= s;
  }
}

template <class T>
cudaError_t residual_forward_t(T* out, const T* a, const T* b, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  residual_forward_kernel<T><<<grid_for(n, 256), 256, 0, stream>>>(out, a, b, n);
  return cudaGetLastError();
}

template <class T>
cudaError_t add_inplace_t(T* acc, const T* x, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  add_inplace_kernel<T><<<grid_for(n, 256), 256, 0, stream>>>(acc, x, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_residual_forward(float* out, const float* a, const float* b, size_t n,
                                    cudaStream_t stream) {
  return residual_forward_t(out, a, b, n, stream);
}
cudaError_t launch_residual_forward(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b,
                                    size_t n, cudaStream_t stream) {
  return residual_forward_t(out, a, b, n, stream);
}

cudaError_t launch_add_inplace(float* acc, const float* x, size_t n, cudaStream_t stream) {
  return add_inplace_t(acc, x, n, stream);
}
cudaError_t launch_add_inplace(__nv_bfloat16* acc, const __nv_bfloat16* x, size_t n, cudaStream_t stream) {
  return add_inplace_t(acc, x, n, stream);
}

cudaError_t launch_scale(float* x, float s, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  scale_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, s, n);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
