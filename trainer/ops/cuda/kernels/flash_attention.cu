// flash_attention.cu — causal flash attention, forward and backward, our own kernels (the
// algorithm of FlashAttention-2, written from the paper's description; the CPU reference is
// trainer/ops/cpu/flash_attention.cpp).
//
// Is: kernels and launch wrappers only. Q, K, V are read in place from qkv (B,T,3C) and dQ, dK, dV
// written in place into dqkv (B,T,3C): no head split, no (B,NH,T,T) buffer. Every kernel has one
// shape: a block owns `kOwnRows` consecutive rows of one (batch, head), one thread per row; the
// block's own rows (Q and dO, or K and V) sit in shared memory padded by one float per row, so each
// thread reads its own row without bank conflicts; the other side's rows stream through shared
// memory in tiles of `kTileRows`, which every thread reads at the same address (broadcast); the
// thread's accumulator (output row, dq, or dk and dv) stays in registers, in fp32.
//   forward:  per query row, online softmax over key tiles up to the diagonal: running max m and
//             sum l, accumulator rescaled by exp(m_old - m_new); out = acc / l; lse = m + log l.
//   backward: D = rowsum(dO * O) (one warp per row); then dK, dV by key blocks (each loops over the
//             query tiles at or below the diagonal) and dQ by query blocks (each loops over the key
//             tiles up to the diagonal), P recomputed as exp(s - lse) in both. Two kernels instead
//             of FlashAttention-2's atomic adds into dQ: deterministic, as the rest of this backend.
// Element type: float or __nv_bfloat16 in and out (converted on load and store); scores, softmax
// statistics and accumulators are fp32. Head sizes 32, 64, 128 (GPT-2 presets use 64); any T.
// Is not: a tensor-core kernel (scalar fp32 FMAs: the reference the GPU tests compare
// flash_attention_tc.cu with, and the kernels for fp32 activations and head sizes 32 and 128), nor
// the naive path (attention.cu + cuBLASLt).
#include <cuda_bf16.h>

#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/element_type.cuh"

namespace gpt2::cuda {
namespace {


// Rows a block owns and rows per streamed tile, per head size: the shared memory of every kernel
// stays under the 48 KiB a block gets without opting in (2 * own * (HS+1) + 2 * tile * HS floats).
template <int HS>
struct FlashShape {
  static constexpr int kOwnRows = HS <= 64 ? 64 : 32;
  static constexpr int kTileRows = HS <= 64 ? 16 : 8;
  static constexpr int kPad = HS + 1;  // padded row length of the own rows
};

// One (batch, head) of a (B,T,ld) tensor: element (t, d) of head h is base[t * ld + d].
template <class E>
struct HeadRows {
  E* base;
  int ld;
  __device__ E* row(int t) const { return base + static_cast<size_t>(t) * ld; }
};

// rows [r0, r0 + n) of src (a (T,HS) head view, row stride src.ld) -> dst (n, stride) floats in
// shared memory; rows at or after T are written as 0. All threads of the block take part.
template <int HS, class E>
__device__ void load_rows(float* dst, int stride, HeadRows<const E> src, int r0, int n, int T) {
  for (int i = threadIdx.x; i < n * HS; i += blockDim.x) {
    const int row = i / HS, d = i % HS;
    dst[row * stride + d] = r0 + row < T ? load_f32(src.row(r0 + row) + d) : 0.0f;
  }
}

// The head view of batch b whose columns start at column0 (h * HS, plus C or 2C for K or V).
template <class E>
__device__ HeadRows<const E> head_of(const E* tensor, int b, int T, int ld, int column0) {
  return {tensor + static_cast<size_t>(b) * T * ld + column0, ld};
}
template <class E>
__device__ HeadRows<E> head_of_mut(E* tensor, int b, int T, int ld, int column0) {
  return {tensor + static_cast<size_t>(b) * T * ld + column0, ld};
}

// grid (ceil(T / kOwnRows), B*NH), block kOwnRows threads: thread i owns query row r0 + i.
template <class E, int HS>
__global__ void __launch_bounds__(FlashShape<HS>::kOwnRows)
    flash_forward_kernel(E* out, float* lse, const E* qkv, int T, int C, int NH, float scale) {
  using S = FlashShape<HS>;
  __shared__ float q_own[S::kOwnRows * S::kPad];
  __shared__ float k_tile[S::kTileRows * HS];
  __shared__ float v_tile[S::kTileRows * HS];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int r0 = blockIdx.x * S::kOwnRows;
  const int r = r0 + threadIdx.x;
  const bool active = r < T;
  const auto q = head_of(qkv, b, T, 3 * C, h * HS);
  const auto k = head_of(qkv, b, T, 3 * C, C + h * HS);
  const auto v = head_of(qkv, b, T, 3 * C, 2 * C + h * HS);
  load_rows<HS>(q_own, S::kPad, q, r0, S::kOwnRows, T);
  const float* my_q = q_own + threadIdx.x * S::kPad;

  float acc[HS];
#pragma unroll
  for (int d = 0; d < HS; d++) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  // Keys after the block's last row are masked for every row of the block.
  const int key_end = min(r0 + S::kOwnRows, T);
  for (int c0 = 0; c0 < key_end; c0 += S::kTileRows) {
    __syncthreads();  // the previous tile is no longer read (and q_own is written, first time)
    load_rows<HS>(k_tile, HS, k, c0, S::kTileRows, T);
    load_rows<HS>(v_tile, HS, v, c0, S::kTileRows, T);
    __syncthreads();
    if (!active) continue;
    float s[S::kTileRows];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < S::kTileRows; j++) {
      float dot = 0.0f;
#pragma unroll
      for (int d = 0; d < HS; d++) dot += my_q[d] * k_tile[j * HS + d];
      s[j] = c0 + j <= r ? dot * scale : -INFINITY;  // causal mask (also masks keys >= T)
      tile_max = fmaxf(tile_max, s[j]);
    }
    if (tile_max == -INFINITY) continue;  // no visible key in this tile (only past the diagonal)
    const float m_new = fmaxf(m, tile_max);
    const float correction = expf(m - m_new);  // m = -inf the first time: 0
    l *= correction;
#pragma unroll
    for (int d = 0; d < HS; d++) acc[d] *= correction;
#pragma unroll
    for (int j = 0; j < S::kTileRows; j++) {
      const float p = expf(s[j] - m_new);  // exp(-inf) = 0 where masked
      l += p;
#pragma unroll
      for (int d = 0; d < HS; d++) acc[d] += p * v_tile[j * HS + d];
    }
    m = m_new;
  }
  if (!active) return;
  const float inv = 1.0f / l;
  E* o = head_of_mut(out, b, T, C, h * HS).row(r);
#pragma unroll
  for (int d = 0; d < HS; d++) store_f32(o + d, acc[d] * inv);
  lse[static_cast<size_t>(bh) * T + r] = m + logf(l);
}

// D (B*NH*T) = rowsum(dO * O) per head row; one warp per (b, h, t), grid-stride.
template <class E>
__global__ void flash_row_dot_kernel(float* dsum, const E* dout, const E* out, int B, int T, int C, int NH) {
  const long rows = static_cast<long>(B) * NH * T;
  const long warps = static_cast<long>(gridDim.x) * (blockDim.x / kWarp);
  const int lane = threadIdx.x % kWarp;
  const int hs = C / NH;
  for (long row = blockIdx.x * static_cast<long>(blockDim.x / kWarp) + threadIdx.x / kWarp; row < rows;
       row += warps) {
    const int t = static_cast<int>(row % T);
    const long bh = row / T;
    const int h = static_cast<int>(bh % NH);
    const long b = bh / NH;
    const size_t offset = (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * hs;
    float dot = 0.0f;
    for (int d = lane; d < hs; d += kWarp) dot += load_f32(dout + offset + d) * load_f32(out + offset + d);
    dot = warp_sum(dot);
    if (lane == 0) dsum[row] = dot;
  }
}

// dK, dV: grid (ceil(T / kOwnRows), B*NH), block kOwnRows threads: thread i owns key row c0 + i and
// loops over every query row at or after the block's first key.
template <class E, int HS>
__global__ void __launch_bounds__(FlashShape<HS>::kOwnRows)
    flash_backward_dkv_kernel(E* dqkv, const E* dout, const E* qkv, const float* lse, const float* dsum,
                              int T, int C, int NH, float scale) {
  using S = FlashShape<HS>;
  __shared__ float k_own[S::kOwnRows * S::kPad];
  __shared__ float v_own[S::kOwnRows * S::kPad];
  __shared__ float q_tile[S::kTileRows * HS];
  __shared__ float do_tile[S::kTileRows * HS];
  __shared__ float lse_tile[S::kTileRows];
  __shared__ float d_tile[S::kTileRows];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int c0 = blockIdx.x * S::kOwnRows;
  const int c = c0 + threadIdx.x;
  const bool active = c < T;
  const auto q = head_of(qkv, b, T, 3 * C, h * HS);
  const auto dy = head_of(dout, b, T, C, h * HS);
  load_rows<HS>(k_own, S::kPad, head_of(qkv, b, T, 3 * C, C + h * HS), c0, S::kOwnRows, T);
  load_rows<HS>(v_own, S::kPad, head_of(qkv, b, T, 3 * C, 2 * C + h * HS), c0, S::kOwnRows, T);
  const float* my_k = k_own + threadIdx.x * S::kPad;
  const float* my_v = v_own + threadIdx.x * S::kPad;
  const float* lse_head = lse + static_cast<size_t>(bh) * T;
  const float* d_head = dsum + static_cast<size_t>(bh) * T;

  float dk[HS], dv[HS];
#pragma unroll
  for (int d = 0; d < HS; d++) dk[d] = dv[d] = 0.0f;
  for (int r0 = c0; r0 < T; r0 += S::kTileRows) {
    __syncthreads();
    load_rows<HS>(q_tile, HS, q, r0, S::kTileRows, T);
    load_rows<HS>(do_tile, HS, dy, r0, S::kTileRows, T);
    if (threadIdx.x < S::kTileRows) {
      const int r = r0 + threadIdx.x;
      lse_tile[threadIdx.x] = r < T ? lse_head[r] : 0.0f;
      d_tile[threadIdx.x] = r < T ? d_head[r] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    for (int i = 0; i < S::kTileRows; i++) {
      const int r = r0 + i;
      if (r < c || r >= T) continue;  // masked (query before this key) or past the end
      const float* qi = q_tile + i * HS;
      const float* dyi = do_tile + i * HS;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < HS; d++) {
        s += qi[d] * my_k[d];
        dp += dyi[d] * my_v[d];
      }
      const float p = expf(s * scale - lse_tile[i]);
      const float ds = p * (dp - d_tile[i]) * scale;
#pragma unroll
      for (int d = 0; d < HS; d++) {
        dv[d] += p * dyi[d];
        dk[d] += ds * qi[d];
      }
    }
  }
  if (!active) return;
  E* dk_row = head_of_mut(dqkv, b, T, 3 * C, C + h * HS).row(c);
  E* dv_row = head_of_mut(dqkv, b, T, 3 * C, 2 * C + h * HS).row(c);
#pragma unroll
  for (int d = 0; d < HS; d++) {
    store_f32(dk_row + d, dk[d]);
    store_f32(dv_row + d, dv[d]);
  }
}

// dQ: grid (ceil(T / kOwnRows), B*NH), block kOwnRows threads: thread i owns query row r0 + i and
// loops over the key tiles up to the block's last row.
template <class E, int HS>
__global__ void __launch_bounds__(FlashShape<HS>::kOwnRows)
    flash_backward_dq_kernel(E* dqkv, const E* dout, const E* qkv, const float* lse, const float* dsum,
                             int T, int C, int NH, float scale) {
  using S = FlashShape<HS>;
  __shared__ float q_own[S::kOwnRows * S::kPad];
  __shared__ float do_own[S::kOwnRows * S::kPad];
  __shared__ float k_tile[S::kTileRows * HS];
  __shared__ float v_tile[S::kTileRows * HS];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int r0 = blockIdx.x * S::kOwnRows;
  const int r = r0 + threadIdx.x;
  const bool active = r < T;
  const auto k = head_of(qkv, b, T, 3 * C, C + h * HS);
  const auto v = head_of(qkv, b, T, 3 * C, 2 * C + h * HS);
  load_rows<HS>(q_own, S::kPad, head_of(qkv, b, T, 3 * C, h * HS), r0, S::kOwnRows, T);
  load_rows<HS>(do_own, S::kPad, head_of(dout, b, T, C, h * HS), r0, S::kOwnRows, T);
  const float* my_q = q_own + threadIdx.x * S::kPad;
  const float* my_dy = do_own + threadIdx.x * S::kPad;
  const float my_lse = active ? lse[static_cast<size_t>(bh) * T + r] : 0.0f;
  const float my_d = active ? dsum[static_cast<size_t>(bh) * T + r] : 0.0f;

  float dq[HS];
#pragma unroll
  for (int d = 0; d < HS; d++) dq[d] = 0.0f;
  const int key_end = min(r0 + S::kOwnRows, T);
  for (int c0 = 0; c0 < key_end; c0 += S::kTileRows) {
    __syncthreads();
    load_rows<HS>(k_tile, HS, k, c0, S::kTileRows, T);
    load_rows<HS>(v_tile, HS, v, c0, S::kTileRows, T);
    __syncthreads();
    if (!active) continue;
    for (int j = 0; j < S::kTileRows; j++) {
      if (c0 + j > r) break;  // causal: later keys of the tile are masked too
      const float* kj = k_tile + j * HS;
      const float* vj = v_tile + j * HS;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < HS; d++) {
        s += my_q[d] * kj[d];
        dp += my_dy[d] * vj[d];
      }
      const float ds = expf(s * scale - my_lse) * (dp - my_d) * scale;
#pragma unroll
      for (int d = 0; d < HS; d++) dq[d] += ds * kj[d];
    }
  }
  if (!active) return;
  E* dq_row = head_of_mut(dqkv, b, T, 3 * C, h * HS).row(r);
#pragma unroll
  for (int d = 0; d < HS; d++) store_f32(dq_row + d, dq[d]);
}

template <class E, int HS>
cudaError_t forward_for_head_size(E* out, float* lse, const E* qkv, int B, int T, int C, int NH,
                                  cudaStream_t stream) {
  using S = FlashShape<HS>;
  const dim3 grid((T + S::kOwnRows - 1) / S::kOwnRows, B * NH);
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  flash_forward_kernel<E, HS><<<grid, S::kOwnRows, 0, stream>>>(out, lse, qkv, T, C, NH, scale);
  return cudaGetLastError();
}

template <class E, int HS>
cudaError_t backward_for_head_size(E* dqkv, float* dsum, const E* dout, const E* qkv, const E* out,
                                   const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
  using S = FlashShape<HS>;
  const long rows = static_cast<long>(B) * NH * T;
  constexpr int kDotBlock = 256;
  flash_row_dot_kernel<E><<<grid_for(static_cast<size_t>(rows) * kWarp, kDotBlock), kDotBlock, 0, stream>>>(
      dsum, dout, out, B, T, C, NH);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const dim3 grid((T + S::kOwnRows - 1) / S::kOwnRows, B * NH);
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  flash_backward_dkv_kernel<E, HS><<<grid, S::kOwnRows, 0, stream>>>(dqkv, dout, qkv, lse, dsum, T, C, NH, scale);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  flash_backward_dq_kernel<E, HS><<<grid, S::kOwnRows, 0, stream>>>(dqkv, dout, qkv, lse, dsum, T, C, NH, scale);
  return cudaGetLastError();
}

template <class E>
cudaError_t forward_any(E* out, float* lse, const E* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
  if (B * NH > 65535) return cudaErrorInvalidConfiguration;  // grid.y limit
  switch (C / NH) {
    case 32: return forward_for_head_size<E, 32>(out, lse, qkv, B, T, C, NH, stream);
    case 64: return forward_for_head_size<E, 64>(out, lse, qkv, B, T, C, NH, stream);
    case 128: return forward_for_head_size<E, 128>(out, lse, qkv, B, T, C, NH, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <class E>
cudaError_t backward_any(E* dqkv, float* dsum, const E* dout, const E* qkv, const E* out, const float* lse,
                         int B, int T, int C, int NH, cudaStream_t stream) {
  if (B * NH > 65535) return cudaErrorInvalidConfiguration;
  switch (C / NH) {
    case 32: return backward_for_head_size<E, 32>(dqkv, dsum, dout, qkv, out, lse, B, T, C, NH, stream);
    case 64: return backward_for_head_size<E, 64>(dqkv, dsum, dout, qkv, out, lse, B, T, C, NH, stream);
    case 128: return backward_for_head_size<E, 128>(dqkv, dsum, dout, qkv, out, lse, B, T, C, NH, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_flash_attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C,
                                           int NH, cudaStream_t stream) {
  return forward_any(out, lse, qkv, B, T, C, NH, stream);
}
cudaError_t launch_flash_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B,
                                           int T, int C, int NH, cudaStream_t stream) {
  return forward_any(out, lse, qkv, B, T, C, NH, stream);
}
cudaError_t launch_flash_attention_row_dot(float* dsum, const __nv_bfloat16* dout, const __nv_bfloat16* out, int B,
                                           int T, int C, int NH, cudaStream_t stream) {
  constexpr int kDotBlock = 256;
  const size_t threads = static_cast<size_t>(B) * NH * T * kWarp;
  flash_row_dot_kernel<__nv_bfloat16><<<grid_for(threads, kDotBlock), kDotBlock, 0, stream>>>(dsum, dout, out, B, T,
                                                                                              C, NH);
  return cudaGetLastError();
}
cudaError_t launch_flash_attention_backward(float* dqkv, float* dsum, const float* dout, const float* qkv,
                                            const float* out, const float* lse, int B, int T, int C, int NH,
                                            cudaStream_t stream) {
  return backward_any(dqkv, dsum, dout, qkv, out, lse, B, T, C, NH, stream);
}
cudaError_t launch_flash_attention_backward(__nv_bfloat16* dqkv, float* dsum, const __nv_bfloat16* dout,
                                            const __nv_bfloat16* qkv, const __nv_bfloat16* out,
                                            const float* lse, int B, int T, int C, int NH,
                                            cudaStream_t stream) {
  return backward_any(dqkv, dsum, dout, qkv, out, lse, B, T, C, NH, stream);
}

}  // namespace gpt2::cuda
