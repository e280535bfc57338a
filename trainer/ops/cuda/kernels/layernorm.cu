// layernorm.cu — LayerNorm forward and backward kernels over the last dimension (eps 1e-5, as
// GPT-2), and the residual add fused with the LayerNorm after it.
//
// Is: kernels and launch wrappers only, each templated on the activation element type (float or
// __nv_bfloat16: loaded to float, computed in float, stored rounded); weight, bias, mean, rstd,
// dweight and dbias are fp32 always. Forward, fused forward and the input gradient use one warp per
// row. The input gradient is ONE kernel that reads dout and inp once per pass and accumulates
// dinp += in place: that is the fused residual + LayerNorm backward (dinp is the residual stream's
// gradient, so no separate add runs). The parameter gradients (dweight, dbias) are reduced over rows
// in two fixed-order stages (per-chunk partials, then one thread per channel over the chunks), so
// they are bit-reproducible — no float atomics.
// Is not: a Welford or register-cached variant (rows are re-read from L1/L2 between the passes).
#include <cuda_bf16.h>

#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/element_type.cuh"

namespace gpt2::cuda {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kRowsPerChunk = 64;  // rows per partial in the parameter-gradient reduction


// The warp `lane` of one row: y (C) = (x - mean) * rstd * weight + bias, statistics in fp32 from the
// stored x; lane 0 writes *mean, *rstd. Both forwards call this on the row as stored, so the fused
// op gives the composed ops' bits (and recompute, which calls layernorm_forward, gives them again).
template <class T>
__device__ __forceinline__ void layernorm_row(T* y, float* mean, float* rstd, const T* x,
                                              const float* weight, const float* bias, int C, int lane) {
  float s = 0.0f;
  for (int i = lane; i < C; i += kWarp) s += to_f32(x[i]);
  const float m = warp_sum(s) / C;
  float v = 0.0f;
  for (int i = lane; i < C; i += kWarp) {
    const float d = to_f32(x[i]) - m;
    v += d * d;
  }
  const float r = rsqrtf(warp_sum(v) / C + kEps);
  for (int i = lane; i < C; i += kWarp) y[i] = from_f32<T>((to_f32(x[i]) - m) * r * weight[i] + bias[i]);
  if (lane == 0) {
    *mean = m;
    *rstd = r;
  }
}

// One warp per row of inp (N,C).
template <class T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp,
                                         const float* weight, const float* bias, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const size_t off = static_cast<size_t>(row) * C;
  layernorm_row(out + off, mean + row, rstd + row, inp + off, weight, bias, C, lane);
}

// One warp per row: residual (N,C) = a + b (a and b read once; residual may alias either, each lane
// reads and writes only its own elements), then the LayerNorm of the row as stored. Each lane
// re-reads only what it wrote itself, so no barrier is needed between the add and the statistics.
template <class T>
__global__ void residual_layernorm_forward_kernel(T* residual, T* out, float* mean, float* rstd, const T* a,
                                                  const T* b, const float* weight, const float* bias, int N,
                                                  int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const size_t off = static_cast<size_t>(row) * C;
  T* x = residual + off;
  for (int i = lane; i < C; i += kWarp) x[i] = from_f32<T>(to_f32(a[off + i]) + to_f32(b[off + i]));
  layernorm_row(out + off, mean + row, rstd + row, static_cast<const T*>(x), weight, bias, C, lane);
}

// One warp per row: dinp += (w*dy - mean(w*dy) - norm * mean(w*dy*norm)) * rstd.
template <class T>
__global__ void layernorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const float* weight,
                                      const float* mean, const float* rstd, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const T* x = inp + static_cast<size_t>(row) * C;
  const T* dy = dout + static_cast<size_t>(row) * C;
  T* dx = dinp + static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float a = 0.0f, b = 0.0f;
  for (int i = lane; i < C; i += kWarp) {
    const float dnorm = weight[i] * to_f32(dy[i]);
    a += dnorm;
    b += dnorm * (to_f32(x[i]) - m) * r;
  }
  const float dnorm_mean = warp_sum(a) / C;
  const float dnorm_norm_mean = warp_sum(b) / C;
  for (int i = lane; i < C; i += kWarp) {
    const float norm = (to_f32(x[i]) - m) * r;
    dx[i] = from_f32<T>(to_f32(dx[i]) + (weight[i] * to_f32(dy[i]) - dnorm_mean - norm * dnorm_norm_mean) * r);
  }
}

// grid (chunks, ceil(C/blockDim)): partial (chunk, 2, C) = [sum dy*norm | sum dy] over the chunk's rows.
template <class T>
__global__ void layernorm_param_partials_kernel(float* partial, const T* dout, const T* inp,
                                                const float* mean, const float* rstd, int N, int C) {
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.x * kRowsPerChunk;
  const int r1 = min(r0 + kRowsPerChunk, N);
  float dw = 0.0f, db = 0.0f;
  for (int r = r0; r < r1; r++) {
    const size_t idx = static_cast<size_t>(r) * C + c;
    const float dy = to_f32(dout[idx]);
    dw += (to_f32(inp[idx]) - mean[r]) * rstd[r] * dy;
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

constexpr int kRowBlock = 256;  // threads per block of the one-warp-per-row kernels
unsigned row_blocks(int N) { return (N + kRowBlock / kWarp - 1) / (kRowBlock / kWarp); }

template <class T>
cudaError_t layernorm_forward_t(T* out, float* mean, float* rstd, const T* inp, const float* weight,
                                const float* bias, int N, int C, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  layernorm_forward_kernel<T><<<row_blocks(N), kRowBlock, 0, stream>>>(out, mean, rstd, inp, weight, bias, N, C);
  return cudaGetLastError();
}

template <class T>
cudaError_t residual_layernorm_forward_t(T* residual, T* out, float* mean, float* rstd, const T* a, const T* b,
                                         const float* weight, const float* bias, int N, int C,
                                         cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  residual_layernorm_forward_kernel<T><<<row_blocks(N), kRowBlock, 0, stream>>>(residual, out, mean, rstd, a, b,
                                                                                 weight, bias, N, C);
  return cudaGetLastError();
}

template <class T>
cudaError_t layernorm_backward_t(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                                 const float* weight, const float* mean, const float* rstd, int N, int C,
                                 float* scratch, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  layernorm_dinp_kernel<T><<<row_blocks(N), kRowBlock, 0, stream>>>(dinp, dout, inp, weight, mean, rstd, N, C);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const int chunks = chunks_for(N);
  dim3 grid(chunks, (C + kRowBlock - 1) / kRowBlock);
  layernorm_param_partials_kernel<T><<<grid, kRowBlock, 0, stream>>>(scratch, dout, inp, mean, rstd, N, C);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  layernorm_param_reduce_kernel<<<(C + kRowBlock - 1) / kRowBlock, kRowBlock, 0, stream>>>(dweight, dbias,
                                                                                          scratch, chunks, C);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                     const float* weight, const float* bias, int N, int C,
                                     cudaStream_t stream) {
  return layernorm_forward_t(out, mean, rstd, inp, weight, bias, N, C, stream);
}
cudaError_t launch_layernorm_forward(__nv_bfloat16* out, float* mean, float* rstd, const __nv_bfloat16* inp,
                                     const float* weight, const float* bias, int N, int C,
                                     cudaStream_t stream) {
  return layernorm_forward_t(out, mean, rstd, inp, weight, bias, N, C, stream);
}

cudaError_t launch_residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd,
                                              const float* a, const float* b, const float* weight,
                                              const float* bias, int N, int C, cudaStream_t stream) {
  return residual_layernorm_forward_t(residual, out, mean, rstd, a, b, weight, bias, N, C, stream);
}
cudaError_t launch_residual_layernorm_forward(__nv_bfloat16* residual, __nv_bfloat16* out, float* mean,
                                              float* rstd, const __nv_bfloat16* a, const __nv_bfloat16* b,
                                              const float* weight, const float* bias, int N, int C,
                                              cudaStream_t stream) {
  return residual_layernorm_forward_t(residual, out, mean, rstd, a, b, weight, bias, N, C, stream);
}

size_t layernorm_backward_scratch_floats(int N, int C) {
  return static_cast<size_t>(chunks_for(N)) * 2 * C;
}

cudaError_t launch_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                      const float* inp, const float* weight, const float* mean,
                                      const float* rstd, int N, int C, float* scratch,
                                      cudaStream_t stream) {
  return layernorm_backward_t(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, stream);
}
cudaError_t launch_layernorm_backward(__nv_bfloat16* dinp, float* dweight, float* dbias, const __nv_bfloat16* dout,
                                      const __nv_bfloat16* inp, const float* weight, const float* mean,
                                      const float* rstd, int N, int C, float* scratch,
                                      cudaStream_t stream) {
  return layernorm_backward_t(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, stream);
}

}  // namespace gpt2::cuda
