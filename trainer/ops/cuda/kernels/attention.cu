// attention.cu — the non-GEMM kernels of causal self-attention: head split/merge and the causal
// softmax forward and backward.
//
// Is: kernels and launch wrappers only. The attention of the CUDA backend is: split Q, K, V into
// (B,NH,T,hs) -> batched GEMM scores = Q K^T / sqrt(hs) into att (B,NH,T,T) -> causal softmax in
// place -> batched GEMM att @ V -> merge heads; backward mirrors it. The GEMMs are cuBLASLt calls
// made from host code (cuda_ops_attention.cpp). Masked entries (key > query) are written as exact
// zeros, as the CPU oracle does, so att matches it element for element.
// fp32: the heads, att and the GEMMs are fp32 (bf16 activations widen in the split). bf16 (the
// tensor-core naive path): heads, att and datt are bf16, the GEMMs bf16 on tensor cores with fp32
// accumulation, and the softmax takes raw scores and applies the 1/sqrt(hs) scale itself (fused
// scaled, masked softmax, fp32 inside). Element type E is float or __nv_bfloat16.
// Is not: flash attention (flash_attention.cu), which never forms att.
#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/element_type.cuh"

namespace gpt2::cuda {
namespace {

// Offset in a (B,T,ld) tensor, at column offset + h*hs + d, of element i of a (B,NH,T,hs) tensor.
__device__ __forceinline__ size_t token_major_offset(size_t i, int T, int NH, int hs, int ld, int offset) {
  const int d = static_cast<int>(i % hs);
  size_t r = i / hs;
  const int t = static_cast<int>(r % T);
  r /= T;
  const int h = static_cast<int>(r % NH);
  const size_t b = r / NH;
  return (b * T + t) * ld + offset + h * hs + d;
}

// heads (B,NH,T,hs) <- src (B,T,ld) at column offset + h*hs + d (to_heads), or the reverse.
template <class Dst, class Src>
__global__ void move_heads_kernel(Dst* dst, const Src* src, bool to_heads, int B, int T, int NH, int hs,
                                  int ld, int offset) {
  const size_t total = static_cast<size_t>(B) * NH * T * hs;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t j = token_major_offset(i, T, NH, hs, ld, offset);
    if (to_heads) {
      store_f32(dst + i, load_f32(src + j));
    } else {
      store_f32(dst + j, load_f32(src + i));
    }
  }
}

// One warp per row of att (rows, T); query position t = row % T sees keys 0..t. att holds scores
// (times `scale` here: 1 when the GEMM already scaled them) and becomes probabilities.
template <class E>
__global__ void causal_softmax_kernel(E* att, long rows, int T, float scale) {
  const long row = blockIdx.x * static_cast<long>(blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int t = static_cast<int>(row % T);
  E* a = att + row * T;
  float m = -INFINITY;
  for (int j = lane; j <= t; j += kWarp) m = fmaxf(m, load_f32(a + j) * scale);
  m = warp_max(m);
  float s = 0.0f;
  for (int j = lane; j <= t; j += kWarp) s += expf(load_f32(a + j) * scale - m);
  const float inv = 1.0f / warp_sum(s);
  for (int j = lane; j < T; j += kWarp) store_f32(a + j, j <= t ? expf(load_f32(a + j) * scale - m) * inv : 0.0f);
}

// One warp per row: datt = att * (datt - dot(att, datt)) on j <= t, 0 above.
template <class E>
__global__ void causal_softmax_backward_kernel(E* datt, const E* att, long rows, int T) {
  const long row = blockIdx.x * static_cast<long>(blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int t = static_cast<int>(row % T);
  const E* a = att + row * T;
  E* d = datt + row * T;
  float dot = 0.0f;
  for (int j = lane; j <= t; j += kWarp) dot += load_f32(a + j) * load_f32(d + j);
  dot = warp_sum(dot);
  for (int j = lane; j < T; j += kWarp) store_f32(d + j, j <= t ? load_f32(a + j) * (load_f32(d + j) - dot) : 0.0f);
}

constexpr int kBlock = 256;
constexpr int kRowsPerBlock = kBlock / kWarp;

}  // namespace

namespace {
template <class Dst, class Src>
cudaError_t move_heads(Dst* dst, const Src* src, bool to_heads, int B, int T, int NH, int hs, int ld, int offset,
                       cudaStream_t stream) {
  const size_t total = static_cast<size_t>(B) * NH * T * hs;
  if (total == 0) return cudaSuccess;
  move_heads_kernel<<<grid_for(total, kBlock), kBlock, 0, stream>>>(dst, src, to_heads, B, T, NH, hs, ld, offset);
  return cudaGetLastError();
}
}  // namespace

cudaError_t launch_split_heads(float* heads, const float* src, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream) {
  return move_heads(heads, src, true, B, T, NH, hs, ld, offset, stream);
}
cudaError_t launch_split_heads(float* heads, const __nv_bfloat16* src, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream) {
  return move_heads(heads, src, true, B, T, NH, hs, ld, offset, stream);
}
cudaError_t launch_merge_heads(float* dst, const float* heads, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream) {
  return move_heads(dst, heads, false, B, T, NH, hs, ld, offset, stream);
}
cudaError_t launch_merge_heads(__nv_bfloat16* dst, const float* heads, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream) {
  return move_heads(dst, heads, false, B, T, NH, hs, ld, offset, stream);
}

cudaError_t launch_split_heads(__nv_bfloat16* heads, const __nv_bfloat16* src, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream) {
  return move_heads(heads, src, true, B, T, NH, hs, ld, offset, stream);
}
cudaError_t launch_merge_heads(__nv_bfloat16* dst, const __nv_bfloat16* heads, int B, int T, int NH, int hs, int ld,
                               int offset, cudaStream_t stream) {
  return move_heads(dst, heads, false, B, T, NH, hs, ld, offset, stream);
}

namespace {
long softmax_blocks(long rows) { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }
}  // namespace

cudaError_t launch_causal_softmax(float* att, long rows, int T, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  causal_softmax_kernel<<<static_cast<unsigned>(softmax_blocks(rows)), kBlock, 0, stream>>>(att, rows, T, 1.0f);
  return cudaGetLastError();
}
cudaError_t launch_causal_softmax(__nv_bfloat16* att, long rows, int T, float scale, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  causal_softmax_kernel<<<static_cast<unsigned>(softmax_blocks(rows)), kBlock, 0, stream>>>(att, rows, T, scale);
  return cudaGetLastError();
}

cudaError_t launch_causal_softmax_backward(float* datt, const float* att, long rows, int T,
                                           cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  causal_softmax_backward_kernel<<<static_cast<unsigned>(softmax_blocks(rows)), kBlock, 0, stream>>>(datt, att, rows, T);
  return cudaGetLastError();
}
cudaError_t launch_causal_softmax_backward(__nv_bfloat16* datt, const __nv_bfloat16* att, long rows, int T,
                                           cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  causal_softmax_backward_kernel<<<static_cast<unsigned>(softmax_blocks(rows)), kBlock, 0, stream>>>(datt, att, rows, T);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
