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
// they are bit-reproducible — no float atomics. The backward is one fused kernel per chunk of rows
// (input gradient and per-chunk parameter partials, 16-byte loads where aligned) plus the reduce.
// Is not: a Welford or register-cached variant (rows are re-read from L1/L2 between the passes).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

// V consecutive elements of one row: one 16-byte load or store when V > 1 (the caller checked
// alignment and C % V == 0), else one element.
template <class T, int V>
__device__ __forceinline__ void load_vec(T (&v)[V], const T* p) {
  if constexpr (V == 1) {
    v[0] = p[0];
  } else {
    static_assert(sizeof(T) * V == 16, "a vector is 16 bytes");
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    memcpy(v, &raw, sizeof(raw));
  }
}
template <class T, int V>
__device__ __forceinline__ void store_vec(T* p, const T (&v)[V]) {
  if constexpr (V == 1) {
    p[0] = v[0];
  } else {
    uint4 raw;
    memcpy(&raw, v, sizeof(raw));
    *reinterpret_cast<uint4*>(p) = raw;
  }
}

// The whole LayerNorm backward of a chunk of kRowsPerChunk rows in one block (one kernel
// instead of dinp + partials, each row's dout and inp read twice from L2 instead of four times):
// each warp takes rows r0+warp, r0+warp+warps, ...; per row it forms the two row sums, accumulates
// dweight/dbias for its lane's channels in its own shared-memory slice (no atomics: each lane owns
// channels (lane + 32k)*V .. +V-1), then adds the input gradient into dinp. At the end the block
// sums its warps' slices in warp order into partial (chunk, 2, C) = [sum dy*norm | sum dy], which
// layernorm_param_reduce_kernel adds in chunk order: bit-reproducible like the kernels above.
template <class T, int V>
__global__ void layernorm_backward_fused_kernel(T* dinp, float* partial, const T* dout, const T* inp,
                                                const float* weight, const float* mean, const float* rstd,
                                                int N, int C) {
  extern __shared__ float warp_sums[];  // (warps, 2, C)
  const int warps = blockDim.x / kWarp, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  for (int i = threadIdx.x; i < warps * 2 * C; i += blockDim.x) warp_sums[i] = 0.0f;
  __syncthreads();
  float* dw_sum = warp_sums + static_cast<size_t>(warp) * 2 * C;
  float* db_sum = dw_sum + C;
  const int r0 = blockIdx.x * kRowsPerChunk;
  const int r1 = min(r0 + kRowsPerChunk, N);
  for (int row = r0 + warp; row < r1; row += warps) {
    const size_t at = static_cast<size_t>(row) * C;
    const float m = mean[row], r = rstd[row];
    float a = 0.0f, b = 0.0f;
    for (int c0 = lane * V; c0 < C; c0 += kWarp * V) {
      T x[V], dy[V];
      load_vec<T, V>(x, inp + at + c0);
      load_vec<T, V>(dy, dout + at + c0);
#pragma unroll
      for (int k = 0; k < V; k++) {
        const float d = to_f32(dy[k]), norm = (to_f32(x[k]) - m) * r, dnorm = weight[c0 + k] * d;
        a += dnorm;
        b += dnorm * norm;
        dw_sum[c0 + k] += d * norm;
        db_sum[c0 + k] += d;
      }
    }
    const float dnorm_mean = warp_sum(a) / C, dnorm_norm_mean = warp_sum(b) / C;
    for (int c0 = lane * V; c0 < C; c0 += kWarp * V) {
      T x[V], dy[V], dx[V];
      load_vec<T, V>(x, inp + at + c0);
      load_vec<T, V>(dy, dout + at + c0);
      load_vec<T, V>(dx, dinp + at + c0);
#pragma unroll
      for (int k = 0; k < V; k++) {
        const float norm = (to_f32(x[k]) - m) * r;
        dx[k] = from_f32<T>(to_f32(dx[k]) +
                            (weight[c0 + k] * to_f32(dy[k]) - dnorm_mean - norm * dnorm_norm_mean) * r);
      }
      store_vec<T, V>(dinp + at + c0, dx);
    }
  }
  __syncthreads();
  float* p = partial + static_cast<size_t>(blockIdx.x) * 2 * C;
  for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < warps; w++) sum += warp_sums[static_cast<size_t>(w) * 2 * C + i];
    p[i] = sum;
  }
}

int chunks_for(int N) { return (N + kRowsPerChunk - 1) / kRowsPerChunk; }

constexpr int kRowBlock = 256;  // threads per block of the one-warp-per-row kernels
constexpr size_t kFusedBackwardWarps = 4;  // warps per block of layernorm_backward_fused_kernel
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
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
  const int chunks = chunks_for(N);
  // As many warps per block as their (2, C) shared-memory slices allow within the default 48 KiB.
  const size_t slice_bytes = 2 * static_cast<size_t>(C) * sizeof(float);
  const int warps = static_cast<int>(std::min<size_t>(kFusedBackwardWarps, (48u << 10) / slice_bytes));
  cudaError_t e = cudaSuccess;
  if (warps >= 1) {
    constexpr int kVec = 16 / sizeof(T);
    const bool vectors = C % kVec == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp);
    const size_t smem = warps * slice_bytes;
    if (vectors) {
      layernorm_backward_fused_kernel<T, kVec><<<chunks, warps * kWarp, smem, stream>>>(dinp, scratch, dout, inp,
                                                                                      weight, mean, rstd, N, C);
    } else {
      layernorm_backward_fused_kernel<T, 1><<<chunks, warps * kWarp, smem, stream>>>(dinp, scratch, dout, inp,
                                                                                   weight, mean, rstd, N, C);
    }
  } else {
    // Rows too wide for one warp's slice (C > 6144): the separate input- and parameter-gradient kernels.
    layernorm_dinp_kernel<T><<<row_blocks(N), kRowBlock, 0, stream>>>(dinp, dout, inp, weight, mean, rstd, N, C);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    dim3 grid(chunks, (C + kRowBlock - 1) / kRowBlock);
    layernorm_param_partials_kernel<T><<<grid, kRowBlock, 0, stream>>>(scratch, dout, inp, mean, rstd, N, C);
  }
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
