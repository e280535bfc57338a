// flash_attention_tc.cu — causal flash attention on tensor cores, forward and backward, for bf16
// activations and head size 64 (GPT-2's): the algorithm of FlashAttention-2, written from the paper
// and the PTX ISA, with every index mapping taken from mma_layout.h (tested on the CPU by
// tests/trainer/mma_layout_test.cpp).
//
// Is: kernels and launch wrappers only. Q, K, V are read in place from qkv (B,T,3C), dQ, dK, dV are
// written in place into dqkv (B,T,3C), O into out (B,T,C); lse (B,NH,T) in natural-log units as the
// scalar kernels (flash_attention.cu) write it, so either backward reads either forward's lse.
// Building blocks: 16-byte `cp.async` (zero-filled past T) into shared tiles of rows of 64 bf16,
// XOR-swizzled by 16-byte chunk; `ldmatrix.x4` (`.trans` for an operand stored [k][n]);
// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`. Every block has 4 warps (128 threads).
//   forward:  a block owns a 128-row Q tile (each warp two 16-row slices, Q kept in registers);
//             64-row K/V tiles stream through a double buffer up to the diagonal; S, P, the running
//             max m and sum l stay in registers (a row's 64 scores live in the 4 lanes of a quad);
//             P is rounded to bf16 and reused as the A operand of P V straight from the accumulators;
//             O accumulates in fp32 and is written once. Scores are kept in log2 units (exp2f).
//   backward: D = rowsum(dO * O) first (flash_attention.cu's row-dot kernel); then
//             dK, dV: a block owns 64 keys (a warp 16, K and V in registers) and loops over the
//                     64-row query tiles at or after the diagonal, computing S^T = K Q^T and
//                     dP^T = V dO^T so that P^T and dS^T are A operands as they are:
//                     dV += P^T dO, dK += dS^T Q;
//             dQ:     a block owns 64 queries (a warp 16) and loops over the key tiles up to the
//                     diagonal: S = Q K^T, dP = dO V^T, dQ += dS K.
//             Two kernels instead of fp32 atomics into dQ: deterministic, as the rest of this backend.
// Causal: key tiles past a query tile's last row are never loaded; a warp skips the math of tiles
// its 16 rows cannot see; the element mask runs only on tiles that cross the diagonal or T.
// Is not: a kernel for fp32 activations or other head sizes (flash_attention.cu serves those and is
// the reference the GPU tests compare with), nor tuned for Hopper's wgmma/TMA.
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/mma_layout.h"

namespace gpt2::cuda {
namespace {

using namespace mma;  // the layout functions: one vocabulary between the kernels and their CPU test

constexpr int kThreads = 128;  // 4 warps
constexpr int kWarps = kThreads / kLanes;
constexpr int kTileRows = 64;                      // K/V tiles, backward tiles
constexpr int kForwardSlices = 2;                  // 16-row slices per warp in the forward
constexpr int kForwardRows = kWarps * kForwardSlices * 16;  // 128: the forward's Q tile
constexpr int kTileElems = kTileRows * kHeadSize;  // one 64-row tile of bf16
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// --- PTX wrappers (sm_80 and later; CMAKE_CUDA_ARCHITECTURES is 90) ---
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared, asynchronous; src_bytes 0 writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
// d (16x8 fp32) += a (16x16 bf16) b (16x8 bf16)
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats -> one register of two bf16, `low` in the low half (the even fragment element).
__device__ __forceinline__ uint32_t pack_bf16(float low, float high) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// --- shared tiles ---
// Rows [row0, row0 + rows) of a head view (row stride ld elements) into a swizzled tile; rows at or
// after T are zero-filled. Thread t copies chunk t % 8 of row t / 8 (+16 rows a pass): the pattern
// mma_layout_test checks for bank conflicts. Needs 16-byte aligned rows (the host checks).
template <int kRows>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* tile, const __nv_bfloat16* head, int ld, int row0,
                                                int T) {
  const uint32_t base = shared_address(tile);
#pragma unroll
  for (int i = threadIdx.x; i < kRows * kChunksPerRow; i += kThreads) {
    const int r = i / kChunksPerRow, chunk = i % kChunksPerRow;
    const int row = row0 + r;
    const bool inside = row < T;
    const __nv_bfloat16* src = head + static_cast<size_t>(inside ? row : 0) * ld + chunk * kChunkElems;
    cp_async_16(base + 2 * swizzled_offset(r, chunk * kChunkElems), src, inside ? 16 : 0);
  }
}
// The shared address lane `lane` gives ldmatrix for the 16x16 region at (row0, col0) of `tile`.
__device__ __forceinline__ uint32_t ldmatrix_address(const __nv_bfloat16* tile, RowCol at, int row0, int col0) {
  return shared_address(tile) + 2 * swizzled_offset(row0 + at.row, col0 + at.col);
}
// A fragments of a 16-row slice (all 64 head columns: 4 k-steps) of a tile.
__device__ __forceinline__ void load_a_slice(uint32_t (&a)[4][4], const __nv_bfloat16* tile, int slice_row, int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; kk++) ldmatrix_x4(a[kk], ldmatrix_address(tile, ldmatrix_a_address(lane), slice_row, 16 * kk));
}
// acc (16 x 64: 8 n-tiles) += A (16 x 64, 4 k-steps) B where B is stored [n][k] in `tile` (64 rows).
__device__ __forceinline__ void mma_a_times_rows_transposed(float (&acc)[8][4], const uint32_t (&a)[4][4],
                                                            const __nv_bfloat16* tile, int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; kk++)
#pragma unroll
    for (int np = 0; np < 4; np++) {
      uint32_t b[4];
      ldmatrix_x4(b, ldmatrix_address(tile, ldmatrix_b_rows_address(lane), 16 * np, 16 * kk));
      mma_16816(acc[2 * np], a[kk], b[0], b[1]);
      mma_16816(acc[2 * np + 1], a[kk], b[2], b[3]);
    }
}
// acc (16 x 64 head columns) += P (16 x 64, fp32 accumulators of 8 n-tiles, rounded to bf16 here)
// times the tile (64 rows [k][n]), loaded with .trans.
__device__ __forceinline__ void mma_p_times_rows(float (&acc)[8][4], const float (&p)[8][4],
                                                 const __nv_bfloat16* tile, int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    uint32_t a[4];
#pragma unroll
    for (int reg = 0; reg < 4; reg++) {
      const CSource lo = a_element_from_c(2 * reg), hi = a_element_from_c(2 * reg + 1);
      a[reg] = pack_bf16(p[2 * kk + lo.c_tile][lo.c_elem], p[2 * kk + hi.c_tile][hi.c_elem]);
    }
#pragma unroll
    for (int dd = 0; dd < 4; dd++) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, ldmatrix_address(tile, ldmatrix_b_trans_address(lane), 16 * kk, 16 * dd));
      mma_16816(acc[2 * dd], a, b[0], b[1]);
      mma_16816(acc[2 * dd + 1], a, b[2], b[3]);
    }
  }
}
__device__ __forceinline__ void zero(float (&acc)[8][4]) {
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[nt][e] = 0.0f;
}
// Row (t, head h) of a (B,T,ld) tensor whose head columns start at column0.
__device__ __forceinline__ size_t row_offset(int b, int t, int T, int ld, int column0) {
  return (static_cast<size_t>(b) * T + t) * ld + column0;
}
// Stores a 16 x 64 accumulator slice (rows row0.., times `scale`) as bf16 pairs; rows >= T skipped.
__device__ __forceinline__ void store_slice(__nv_bfloat16* dst, int b, int row0, int T, int ld, int column0,
                                            const float (&acc)[8][4], const float (&row_scale)[2], int lane) {
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int row = row0 + c_fragment_element(lane, 2 * half).row;
    if (row >= T) continue;
    __nv_bfloat16* out = dst + row_offset(b, row, T, ld, column0);
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
      const int col = 8 * nt + c_fragment_element(lane, 2 * half).col;
      *reinterpret_cast<uint32_t*>(out + col) =
          pack_bf16(acc[nt][2 * half] * row_scale[half], acc[nt][2 * half + 1] * row_scale[half]);
    }
  }
}
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Starts copying K/V tile kt + 1 (if any) into the other buffer, waits for tile kt (buffer kt & 1)
// and ends with the barrier after which every thread may read it. The other buffer was last read
// before the previous iteration's closing barrier.
__device__ __forceinline__ void next_kv_tile(__nv_bfloat16 (&k_tiles)[2][kTileElems],
                                             __nv_bfloat16 (&v_tiles)[2][kTileElems], const __nv_bfloat16* k_head,
                                             const __nv_bfloat16* v_head, int ld, int kt, int tiles, int T) {
  if (kt + 1 < tiles) {
    const int other = (kt & 1) ^ 1;
    load_tile_async<kTileRows>(k_tiles[other], k_head, ld, (kt + 1) * kTileRows, T);
    load_tile_async<kTileRows>(v_tiles[other], v_head, ld, (kt + 1) * kTileRows, T);
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
}

// --- forward ---
// grid (ceil(T / 128), B*NH), 128 threads. Query tiles run last-first: they have the most keys.
__global__ void __launch_bounds__(kThreads)
    flash_tc_forward_kernel(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int T, int C, int NH) {
  __shared__ alignas(128) __nv_bfloat16 q_tile[kForwardRows * kHeadSize];
  __shared__ alignas(128) __nv_bfloat16 k_tiles[2][kTileElems];
  __shared__ alignas(128) __nv_bfloat16 v_tiles[2][kTileElems];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kForwardRows;
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int ld = 3 * C;
  const __nv_bfloat16* q_head = qkv + row_offset(b, 0, T, ld, h * kHeadSize);
  const __nv_bfloat16* k_head = q_head + C;
  const __nv_bfloat16* v_head = q_head + 2 * C;
  const float score_scale = rsqrtf(static_cast<float>(kHeadSize)) * kLog2e;  // log2 units

  load_tile_async<kForwardRows>(q_tile, q_head, ld, q0, T);
  load_tile_async<kTileRows>(k_tiles[0], k_head, ld, 0, T);
  load_tile_async<kTileRows>(v_tiles[0], v_head, ld, 0, T);
  cp_async_commit();

  uint32_t q_frag[kForwardSlices][4][4];
  float o[kForwardSlices][8][4];
  float m[kForwardSlices][2], l[kForwardSlices][2];  // rows lane/4 and lane/4 + 8 of each slice
#pragma unroll
  for (int sl = 0; sl < kForwardSlices; sl++) {
    zero(o[sl]);
    m[sl][0] = m[sl][1] = -INFINITY;
    l[sl][0] = l[sl][1] = 0.0f;
  }
  const int tiles = key_tiles_visible(q0, kForwardRows, kTileRows, T);
  for (int kt = 0; kt < tiles; kt++) {
    const int buf = kt & 1;
    next_kv_tile(k_tiles, v_tiles, k_head, v_head, ld, kt, tiles, T);
    if (kt == 0) {
#pragma unroll
      for (int sl = 0; sl < kForwardSlices; sl++) load_a_slice(q_frag[sl], q_tile, warp * 32 + sl * 16, lane);
    }
    const int k0 = kt * kTileRows;
#pragma unroll
    for (int sl = 0; sl < kForwardSlices; sl++) {
      const int r0 = q0 + warp * 32 + sl * 16;
      if (!slice_sees_tile(r0, k0)) continue;  // warp-uniform
      float s[8][4];
      zero(s);
      mma_a_times_rows_transposed(s, q_frag[sl], k_tiles[buf], lane);
      const bool mask = slice_needs_mask(r0, k0, kTileRows, T);
#pragma unroll
      for (int half = 0; half < 2; half++) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
          for (int e = 2 * half; e < 2 * half + 2; e++) {
            const RowCol at = c_fragment_element(lane, e);
            const bool keep = !mask || score_visible(r0 + at.row, k0 + 8 * nt + at.col, T);
            s[nt][e] = keep ? s[nt][e] * score_scale : -INFINITY;
            tile_max = fmaxf(tile_max, s[nt][e]);
          }
        const float m_new = fmaxf(m[sl][half], quad_max(tile_max));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row past T sees nothing
        const float correction = exp2f(m[sl][half] - m_use);
        l[sl][half] *= correction;
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
          for (int e = 2 * half; e < 2 * half + 2; e++) {
            o[sl][nt][e] *= correction;
            s[nt][e] = exp2f(s[nt][e] - m_use);
            l[sl][half] += s[nt][e];  // this lane's share; the quad's shares are summed at the end
          }
        m[sl][half] = m_new;
      }
      mma_p_times_rows(o[sl], s, v_tiles[buf], lane);
    }
    __syncthreads();
  }
  float* lse_head = lse + static_cast<size_t>(bh) * T;
#pragma unroll
  for (int sl = 0; sl < kForwardSlices; sl++) {
    const int r0 = q0 + warp * 32 + sl * 16;
    float inv[2];
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const float sum = quad_sum(l[sl][half]);
      inv[half] = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int row = r0 + c_fragment_element(lane, 2 * half).row;
      if (lane % 4 == 0 && row < T) lse_head[row] = (m[sl][half] + log2f(sum)) * kLn2;
    }
    store_slice(out, b, r0, T, C, h * kHeadSize, o[sl], inv, lane);
  }
}

// --- backward: dK and dV ---
// grid (ceil(T / 64), B*NH), 128 threads; block x owns keys [64x, 64x + 64), warp w 16 of them.
__global__ void __launch_bounds__(kThreads)
    flash_tc_backward_dkv_kernel(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                                 const float* lse, const float* dsum, int T, int C, int NH) {
  __shared__ alignas(128) __nv_bfloat16 q_tiles[2][kTileElems];
  __shared__ alignas(128) __nv_bfloat16 do_tiles[2][kTileElems];
  __shared__ float lse_tiles[2][kTileRows];  // in log2 units
  __shared__ float d_tiles[2][kTileRows];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int k0 = blockIdx.x * kTileRows;
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int kr0 = k0 + warp * 16;  // this warp's first key
  const int ld = 3 * C;
  const __nv_bfloat16* q_head = qkv + row_offset(b, 0, T, ld, h * kHeadSize);
  const __nv_bfloat16* do_head = dout + row_offset(b, 0, T, C, h * kHeadSize);
  const float* lse_head = lse + static_cast<size_t>(bh) * T;
  const float* d_head = dsum + static_cast<size_t>(bh) * T;
  const float score_scale = rsqrtf(static_cast<float>(kHeadSize)) * kLog2e;
  const int first_tile = first_query_tile(k0, kTileRows);
  const int last_tile = (T - 1) / kTileRows;

  // K and V pass through buffer 1 into registers; the first query tile goes to buffer 0.
  load_tile_async<kTileRows>(q_tiles[1], q_head + C, ld, k0, T);
  load_tile_async<kTileRows>(do_tiles[1], q_head + 2 * C, ld, k0, T);
  load_tile_async<kTileRows>(q_tiles[0], q_head, ld, first_tile * kTileRows, T);
  load_tile_async<kTileRows>(do_tiles[0], do_head, C, first_tile * kTileRows, T);
  cp_async_commit();
  if (threadIdx.x < kTileRows) {
    const int row = first_tile * kTileRows + threadIdx.x;
    lse_tiles[0][threadIdx.x] = row < T ? lse_head[row] * kLog2e : 0.0f;
    d_tiles[0][threadIdx.x] = row < T ? d_head[row] : 0.0f;
  }
  cp_async_wait<0>();
  __syncthreads();
  uint32_t k_frag[4][4], v_frag[4][4];
  load_a_slice(k_frag, q_tiles[1], warp * 16, lane);
  load_a_slice(v_frag, do_tiles[1], warp * 16, lane);
  __syncthreads();  // buffer 1 is free for the prefetch below

  float dk[8][4], dv[8][4];
  zero(dk);
  zero(dv);
  for (int qt = first_tile; qt <= last_tile; qt++) {
    const int buf = (qt - first_tile) & 1;
    if (qt < last_tile) {
      const int next = (qt + 1) * kTileRows;
      load_tile_async<kTileRows>(q_tiles[buf ^ 1], q_head, ld, next, T);
      load_tile_async<kTileRows>(do_tiles[buf ^ 1], do_head, C, next, T);
      cp_async_commit();
      if (threadIdx.x < kTileRows) {
        const int row = next + threadIdx.x;
        lse_tiles[buf ^ 1][threadIdx.x] = row < T ? lse_head[row] * kLog2e : 0.0f;
        d_tiles[buf ^ 1][threadIdx.x] = row < T ? d_head[row] : 0.0f;
      }
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int q0 = qt * kTileRows;
    // S^T (16 keys x 64 queries) = K Q^T and dP^T = V dO^T.
    float pt[8][4], dpt[8][4];
    zero(pt);
    zero(dpt);
    mma_a_times_rows_transposed(pt, k_frag, q_tiles[buf], lane);
    mma_a_times_rows_transposed(dpt, v_frag, do_tiles[buf], lane);
    const bool mask = kr0 + 15 > q0 || q0 + kTileRows > T;  // some key after some query, or past T
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const RowCol at = c_fragment_element(lane, e);  // row: key, col: query
        const int query_in_tile = 8 * nt + at.col;
        const bool keep = !mask || score_visible(q0 + query_in_tile, kr0 + at.row, T);
        const float p = keep ? exp2f(pt[nt][e] * score_scale - lse_tiles[buf][query_in_tile]) : 0.0f;
        pt[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - d_tiles[buf][query_in_tile]);  // dS^T, before the 1/sqrt(hs)
      }
    mma_p_times_rows(dv, pt, do_tiles[buf], lane);  // dV += P^T dO
    mma_p_times_rows(dk, dpt, q_tiles[buf], lane);  // dK += dS^T Q
    __syncthreads();
  }
  const float dk_scale[2] = {rsqrtf(static_cast<float>(kHeadSize)), rsqrtf(static_cast<float>(kHeadSize))};
  const float one[2] = {1.0f, 1.0f};
  store_slice(dqkv, b, kr0, T, ld, C + h * kHeadSize, dk, dk_scale, lane);
  store_slice(dqkv, b, kr0, T, ld, 2 * C + h * kHeadSize, dv, one, lane);
}

// --- backward: dQ ---
// grid (ceil(T / 64), B*NH), 128 threads; block x owns queries [64x, 64x + 64), warp w 16 of them.
// Query tiles run last-first: they have the most keys.
__global__ void __launch_bounds__(kThreads)
    flash_tc_backward_dq_kernel(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                                const float* lse, const float* dsum, int T, int C, int NH) {
  __shared__ alignas(128) __nv_bfloat16 q_tile[kTileElems];
  __shared__ alignas(128) __nv_bfloat16 do_tile[kTileElems];
  __shared__ alignas(128) __nv_bfloat16 k_tiles[2][kTileElems];
  __shared__ alignas(128) __nv_bfloat16 v_tiles[2][kTileElems];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTileRows;
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int r0 = q0 + warp * 16;
  const int ld = 3 * C;
  const __nv_bfloat16* q_head = qkv + row_offset(b, 0, T, ld, h * kHeadSize);
  const __nv_bfloat16* k_head = q_head + C;
  const __nv_bfloat16* v_head = q_head + 2 * C;
  const float score_scale = rsqrtf(static_cast<float>(kHeadSize)) * kLog2e;

  load_tile_async<kTileRows>(q_tile, q_head, ld, q0, T);
  load_tile_async<kTileRows>(do_tile, dout + row_offset(b, 0, T, C, h * kHeadSize), C, q0, T);
  load_tile_async<kTileRows>(k_tiles[0], k_head, ld, 0, T);
  load_tile_async<kTileRows>(v_tiles[0], v_head, ld, 0, T);
  cp_async_commit();
  float row_lse[2], row_d[2];  // rows lane/4 and lane/4 + 8 of the warp's slice
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int row = r0 + c_fragment_element(lane, 2 * half).row;
    row_lse[half] = row < T ? lse[static_cast<size_t>(bh) * T + row] * kLog2e : 0.0f;
    row_d[half] = row < T ? dsum[static_cast<size_t>(bh) * T + row] : 0.0f;
  }
  uint32_t q_frag[4][4], do_frag[4][4];
  float dq[8][4];
  zero(dq);
  const int tiles = key_tiles_visible(q0, kTileRows, kTileRows, T);
  for (int kt = 0; kt < tiles; kt++) {
    const int buf = kt & 1;
    next_kv_tile(k_tiles, v_tiles, k_head, v_head, ld, kt, tiles, T);
    if (kt == 0) {
      load_a_slice(q_frag, q_tile, warp * 16, lane);
      load_a_slice(do_frag, do_tile, warp * 16, lane);
    }
    const int k0 = kt * kTileRows;
    if (slice_sees_tile(r0, k0)) {  // warp-uniform
      float s[8][4], dp[8][4];
      zero(s);
      zero(dp);
      mma_a_times_rows_transposed(s, q_frag, k_tiles[buf], lane);   // S = Q K^T
      mma_a_times_rows_transposed(dp, do_frag, v_tiles[buf], lane);  // dP = dO V^T
      const bool mask = slice_needs_mask(r0, k0, kTileRows, T);
#pragma unroll
      for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const RowCol at = c_fragment_element(lane, e);
          const int half = e / 2;
          const bool keep = !mask || score_visible(r0 + at.row, k0 + 8 * nt + at.col, T);
          const float p = keep ? exp2f(s[nt][e] * score_scale - row_lse[half]) : 0.0f;
          s[nt][e] = p * (dp[nt][e] - row_d[half]);  // dS, before the 1/sqrt(hs)
        }
      mma_p_times_rows(dq, s, k_tiles[buf], lane);  // dQ += dS K
    }
    __syncthreads();
  }
  const float dq_scale[2] = {rsqrtf(static_cast<float>(kHeadSize)), rsqrtf(static_cast<float>(kHeadSize))};
  store_slice(dqkv, b, r0, T, ld, h * kHeadSize, dq, dq_scale, lane);
}

// One block of 128 threads: q (16,64), k and v (64,64) bf16 row-major -> s (16,64) = q k^T and
// o (16,64) = bf16(s) v, fp32, through the very helpers the attention kernels use (swizzled tiles,
// the three ldmatrix patterns, mma.sync, the accumulator-to-A reuse). Warp 0 computes; the GPU test
// compares with plain loops, so a wrong fragment fact shows here before it hides in attention.
__global__ void __launch_bounds__(kThreads)
    flash_tc_layout_probe_kernel(float* s_out, float* o_out, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                 const __nv_bfloat16* v) {
  __shared__ alignas(128) __nv_bfloat16 q_tile[kTileElems];
  __shared__ alignas(128) __nv_bfloat16 k_tile[kTileElems];
  __shared__ alignas(128) __nv_bfloat16 v_tile[kTileElems];
  load_tile_async<kTileRows>(q_tile, q, kHeadSize, 0, 16);  // rows 16.. zero-filled
  load_tile_async<kTileRows>(k_tile, k, kHeadSize, 0, kTileRows);
  load_tile_async<kTileRows>(v_tile, v, kHeadSize, 0, kTileRows);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  if (threadIdx.x >= kLanes) return;
  const int lane = threadIdx.x;
  uint32_t q_frag[4][4];
  load_a_slice(q_frag, q_tile, 0, lane);
  float s[8][4], o[8][4];
  zero(s);
  zero(o);
  mma_a_times_rows_transposed(s, q_frag, k_tile, lane);
  mma_p_times_rows(o, s, v_tile, lane);
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const RowCol at = c_fragment_element(lane, e);
      s_out[at.row * kHeadSize + 8 * nt + at.col] = s[nt][e];
      o_out[at.row * kHeadSize + 8 * nt + at.col] = o[nt][e];
    }
}

unsigned tiles_of(int T, int rows) { return static_cast<unsigned>((T + rows - 1) / rows); }

}  // namespace

cudaError_t launch_flash_attention_tc_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T,
                                              int C, int NH, cudaStream_t stream) {
  if (C != NH * kHeadSize || B * NH > 65535 || T < 1) return cudaErrorInvalidValue;
  const dim3 grid(tiles_of(T, kForwardRows), B * NH);
  flash_tc_forward_kernel<<<grid, kThreads, 0, stream>>>(out, lse, qkv, T, C, NH);
  return cudaGetLastError();
}

cudaError_t launch_flash_attention_tc_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout,
                                               const __nv_bfloat16* qkv, const float* lse, const float* dsum,
                                               int B, int T, int C, int NH, cudaStream_t stream) {
  if (C != NH * kHeadSize || B * NH > 65535 || T < 1) return cudaErrorInvalidValue;
  const dim3 grid(tiles_of(T, kTileRows), B * NH);
  flash_tc_backward_dkv_kernel<<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse, dsum, T, C, NH);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  flash_tc_backward_dq_kernel<<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse, dsum, T, C, NH);
  return cudaGetLastError();
}

cudaError_t launch_flash_attention_tc_layout_probe(float* s, float* o, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                   const __nv_bfloat16* v, cudaStream_t stream) {
  flash_tc_layout_probe_kernel<<<1, kThreads, 0, stream>>>(s, o, q, k, v);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
