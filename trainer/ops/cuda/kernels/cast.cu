// cast.cu — fp32 -> bf16 conversion of GEMM operands: both operands in the bf16 precision mode,
// the fp32 master weights when the activations are bf16.
// Is: a kernel and its launch wrapper (round to nearest even, as __float2bfloat16_rn).
// Is not: where bf16 activations come from (the ops write them directly).
#include <cuda_bf16.h>

#include "ops/cuda/kernels/device_util.cuh"

namespace gpt2::cuda {
namespace {

// out (n) = bf16(in (n))
__global__ void cast_to_bf16_kernel(__nv_bfloat16* out, const float* in, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16_rn(in[i]);
  }
}

}  // namespace

cudaError_t launch_cast_to_bf16(__nv_bfloat16* out, const float* in, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  cast_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, in, n);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
