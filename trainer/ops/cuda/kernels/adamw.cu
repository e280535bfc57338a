// adamw.cu — the AdamW update kernel (as torch.optim.AdamW, decoupled weight decay).
// Is: the kernels (one tensor; every tensor of a flat buffer, by chunks) and their launch wrappers. Is not: parameter grouping (the model decides which slices
// decay) nor bf16 master-weight handling (the interface is fp32 master weights already).
#include "ops/cuda/kernels/device_util.cuh"

namespace gpt2::cuda {
namespace {

// Element i: p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p), m and v updated in place.
__device__ __forceinline__ void adamw_element(float* params, const float* grads, float* m, float* v, size_t i,
                                              float lr, float beta1, float beta2, float eps, float wd, float bc1,
                                              float bc2) {
  const float g = grads[i];
  const float mi = beta1 * m[i] + (1.0f - beta1) * g;
  const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  params[i] -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * params[i]);
}

// params, grads, m, v (n), one tensor.
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                             float beta1, float beta2, float eps, float weight_decay, float bc1,
                             float bc2) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    adamw_element(params, grads, m, v, i, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
  }
}

// One block per chunk (a slice of one tensor): the whole parameter set in one launch.
__global__ void adamw_chunks_kernel(float* params, const float* grads, float* m, float* v, const AdamWChunk* chunks,
                                    float lr, float beta1, float beta2, float eps, float weight_decay, float bc1,
                                    float bc2) {
  const AdamWChunk c = chunks[blockIdx.x];
  const float wd = c.decay ? weight_decay : 0.0f;
  for (uint32_t j = threadIdx.x; j < c.count; j += blockDim.x) {
    adamw_element(params, grads, m, v, c.begin + j, lr, beta1, beta2, eps, wd, bc1, bc2);
  }
}

}  // namespace

cudaError_t launch_adamw_chunks(float* params, const float* grads, float* m, float* v, const AdamWChunk* chunks,
                                size_t n_chunks, float lr, float beta1, float beta2, float eps, float weight_decay,
                                float bc1, float bc2, cudaStream_t stream) {
  if (n_chunks == 0) return cudaSuccess;
  adamw_chunks_kernel<<<static_cast<unsigned>(n_chunks), 256, 0, stream>>>(params, grads, m, v, chunks, lr, beta1,
                                                                           beta2, eps, weight_decay, bc1, bc2);
  return cudaGetLastError();
}

cudaError_t launch_adamw(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  adamw_kernel<<<grid_for(n, 256), 256, 0, stream>>>(params, grads, m, v, n, lr, beta1, beta2, eps,
                                                     weight_decay, bc1, bc2);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
