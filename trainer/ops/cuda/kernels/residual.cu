// residual.cu — element-wise kernels: the residual add, gradient accumulation and scaling.
// Is: kernels and launch wrappers only. Is not: fused with LayerNorm (a later optimisation).
#include "ops/cuda/kernels/device_util.cuh"

namespace gpt2::cuda {
namespace {

// out (n) = a + b
__global__ void residual_forward_kernel(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = a[i] + b[i];
  }
}

// acc (n) += x
__global__ void add_inplace_kernel(float* acc, const float* x, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    acc[i] += x[i];
  }
}

// x (n) *= s
__global__ void scale_kernel(float* x, float s, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    x[i] *= s;
  }
}

}  // namespace

cudaError_t launch_residual_forward(float* out, const float* a, const float* b, size_t n,
                                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  residual_forward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, a, b, n);
  return cudaGetLastError();
}

cudaError_t launch_add_inplace(float* acc, const float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  add_inplace_kernel<<<grid_for(n, 256), 256, 0, stream>>>(acc, x, n);
  return cudaGetLastError();
}

cudaError_t launch_scale(float* x, float s, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  scale_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, s, n);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
