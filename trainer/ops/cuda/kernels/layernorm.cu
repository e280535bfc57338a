// layernorm.cu — LayerNorm forward and backward kernels over the last dimension (eps 1e-5, as GPT-2).
//
// Is: kernels and launch wrappers only. Forward and the input gradient use one warp per row. The
// parameter gradients (dweight, dbias) are reduced over rows in two fixed-order stages (per-chunk
// partials, then one thread per channel over the chunks), so they are bit-reproducible — no float
// atomics. Is not: fused with the residual add (the model calls residual_forward separately).
#include "ops/cuda/kernels/device_util.cuh"

namespace gpt2::cuda {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kRowsPerChunk = 64;  // rows per partial in the parameter-gradient reduction

// One warp per row of inp (N,C).
__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* x = inp + static_cast<size_t>(row) * C;
  float s = 0.0f;
  for (int i = lane; i < C; i += kWarp) s += x[i];
  const float m = warp_sum(s) / C;
  float v = 0.0f;
  for (int i = lane; i < C; i += kWarp) {
    const float d = x[i] - m;
    v += d * d;
  }
  const float r = rsqrtf(warp_sum(v) / C + kEps);
  float* y = out + static_cast<size_t>(row) * C;
  for (int i = lane; i < C; i += kWarp) y[i] = (x[i] - m) * r * weight[i] + bias[i];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// One warp per row: dinp += (w*dy - mean(w*dy) - norm * mean(w*dy*norm)) * rstd.
__global__ void layernorm_dinp_kernel(float* dinp, const float* dout, const float* inp,
                                      const float* weight, const float* mean, const float* rstd,
                                      int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* x = inp + static_cast<size_t>(row) * C;
  const float* dy = dout + static_cast<size_t>(row) * C;
  float* dx = dinp + static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float a = 0.0f, b = 0.0f;
  for (int i = lane; i < C; i += kWarp) {
    const float dnorm = weight[i] * dy[i];
    a += dnorm;
    b += dnorm * (x[i] - m) * r;
  }
  const float dnorm_mean = warp_sum(a) / C;
  const float dnorm_norm_mean = warp_sum(b) / C;
  for (int i = lane; i < C; i += kWarp) {
    const float norm = (x[i] - m) * r;
    dx[i] += (weight[i] * dy[i] - dnorm_mean - norm * dnorm_norm_mean) * r;
  }
}

// grid (chunks, ceil(C/blockDim)): partial (chunk, 2, C) = [sum dy*norm | sum dy] over the chunk's rows.
__global__ void layernorm_param_partials_kernel(float* partial, const float* dout, const float* inp,
                                                const float* mean, const float* rstd, int N, int C) {
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.x * kRowsPerChunk;
  const int r1 = min(r0 + kRowsPerChunk, N);
  float dw = 0.0f, db = 0.0f;
  for (int r = r0; r < r1; r++) {
    const size_t idx = static_cast<size_t>(r) * C + c;
    const float dy = dout[idx];
    dw += (inp[idx] - mean[r]) * rstd[r] * dy;
    db += dy;
  }
  float* p = partial + static_cast<size_t>(blockIdx.x) * 2 * C;
  p[c] = dw;
  p[C + c] = db;
}

// One thread per channel: dweight (C) += sum of the chunks' partials, in chunk order; same for dbias.
__global__ void layernorm_param_reduce_kernel(float* dweight, float* dbias, const float* partial,
                                              int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int k = 0; k < chunks; k++) {
    dw += partial[static_cast<size_t>(k) * 2 * C + c];
    db += partial[static_cast<size_t>(k) * 2 * C + C + c];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

int chunks_for(int N) { return (N + kRowsPerChunk - 1) / kRowsPerChunk; }

}  // namespace

cudaError_t launch_layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                     const float* weight, const float* bias, int N, int C,
                                     cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  constexpr int kBlock = 256;
  const int rows_per_block = kBlock / kWarp;
  layernorm_forward_kernel<<<(N + rows_per_block - 1) / rows_per_block, kBlock, 0, stream>>>(
      out, mean, rstd, inp, weight, bias, N, C);
  return cudaGetLastError();
}

size_t layernorm_backward_scratch_floats(int N, int C) {
  return static_cast<size_t>(chunks_for(N)) * 2 * C;
}

cudaError_t launch_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                      const float* inp, const float* weight, const float* mean,
                                      const float* rstd, int N, int C, float* scratch,
                                      cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  constexpr int kBlock = 256;
  const int rows_per_block = kBlock / kWarp;
  layernorm_dinp_kernel<<<(N + rows_per_block - 1) / rows_per_block, kBlock, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const int chunks = chunks_for(N);
  dim3 grid(chunks, (C + kBlock - 1) / kBlock);
  layernorm_param_partials_kernel<<<grid, kBlock, 0, stream>>>(scratch, dout, inp, mean, rstd, N, C);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  layernorm_param_reduce_kernel<<<(C + kBlock - 1) / kBlock, kBlock, 0, stream>>>(dweight, dbias, scratch,
                                                                                  chunks, C);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
