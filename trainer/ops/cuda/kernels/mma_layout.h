// mma_layout.h — the index mappings of the tensor-core attention kernels (flash_attention_tc.cu),
// usable from host and device so that every one of them is tested on the CPU
// (tests/trainer/mma_layout_test.cpp) before a GPU ever runs them.
//
// Is: pure integer functions, `__host__ __device__` under nvcc and plain constexpr C++ elsewhere:
//   - which (row, col) of a tile each lane holds in the fragments of PTX `mma.sync.aligned.m16n8k16`
//     with bf16 inputs and fp32 accumulators (A 16x16 row-major, B 16x8 "col", C/D 16x8);
//   - what `ldmatrix.sync.aligned.m8n8.x4.shared.b16` does: which row address each lane supplies and
//     which two elements of which 8x8 matrix each lane receives (with and without `.trans`);
//   - the three x4 patterns the kernels use (A operand, B operand stored [n][k], B operand stored
//     [k][n] with .trans) as the (row, col) of the tile a lane points at;
//   - the XOR swizzle of a shared-memory tile of rows of 64 bf16 (128 bytes = 8 chunks of 16 bytes):
//     chunk c of row r is stored at chunk c ^ (r % 8), so the 8 row addresses of one ldmatrix phase
//     and the 8 chunks of one cp.async row fall in 8 distinct 16-byte bank groups;
//   - how two C fragments (an S tile's n-tiles 2j and 2j+1) become one A fragment (P for P @ V);
//   - the causal tile schedule both the kernels and the CPU emulation follow.
// The PTX ISA's "Matrix Fragments for mma.m16n8k16" and "ldmatrix" sections are the source of the
// fragment facts; groupID = lane / 4, threadID_in_group = lane % 4.
// Is not: device code that issues instructions (flash_attention_tc.cu does), nor a general layout
// library: head size 64 and bf16 only.
#pragma once

#if defined(__CUDACC__)
#define RS_MMA_HD __host__ __device__ __forceinline__
#else
#define RS_MMA_HD inline
#endif

namespace gpt2::cuda::mma {

constexpr int kLanes = 32;
constexpr int kHeadSize = 64;       // the one head size the tensor-core kernels serve
constexpr int kChunkElems = 8;      // 16 bytes of bf16: one cp.async, one ldmatrix row
constexpr int kChunksPerRow = kHeadSize / kChunkElems;  // 8

struct RowCol {
  int row;
  int col;
};

// --- mma.m16n8k16 fragments (bf16 A and B, fp32 C and D) ---
// A: 16x16 (row = m, col = k); 8 bf16 a lane, in 4 .b32 registers: element e sits in register e / 2,
// low half when e is even.
constexpr int kAElems = 8;
RS_MMA_HD RowCol a_fragment_element(int lane, int e) {
  return {lane / 4 + 8 * ((e >> 1) & 1), (lane % 4) * 2 + (e & 1) + 8 * (e >> 2)};
}
// B: 16x8 (row = k, col = n); 4 bf16 a lane in 2 registers.
constexpr int kBElems = 4;
RS_MMA_HD RowCol b_fragment_element(int lane, int e) {
  return {(lane % 4) * 2 + (e & 1) + 8 * (e >> 1), lane / 4};
}
// C and D: 16x8 (row = m, col = n); 4 floats a lane.
constexpr int kCElems = 4;
RS_MMA_HD RowCol c_fragment_element(int lane, int e) {
  return {lane / 4 + 8 * (e >> 1), (lane % 4) * 2 + (e & 1)};
}
// Element e of the A fragment of P (16x16, k = keys 16j..16j+15) is element `c_elem` of the C
// fragment of n-tile 2j + `c_tile` of S: the accumulators of S @ (K^T) are P's A operand as they are.
struct CSource {
  int c_tile;  // 0 or 1: n-tile 2j or 2j + 1
  int c_elem;  // 0..3
};
RS_MMA_HD CSource a_element_from_c(int e) { return {e >> 2, e & 3}; }

// --- ldmatrix .x4 (four 8x8 matrices of b16) ---
// Lane l supplies the address of row l % 8 of matrix l / 8.
RS_MMA_HD int ldmatrix_matrix_of_address_lane(int lane) { return lane / 8; }
RS_MMA_HD int ldmatrix_row_of_address_lane(int lane) { return lane % 8; }
// Lane l receives, in destination register j (matrix j), two consecutive b16 values; `half` 0 is the
// low half. Without .trans: row l / 4, columns 2 (l % 4) + half. With .trans the matrix is read
// transposed: row 2 (l % 4) + half, column l / 4.
RS_MMA_HD RowCol ldmatrix_received(int lane, int half, bool trans) {
  return trans ? RowCol{(lane % 4) * 2 + half, lane / 4} : RowCol{lane / 4, (lane % 4) * 2 + half};
}

// The three x4 patterns, as the (row, col) of the stored tile that lane `lane` points at, relative
// to the 16x16 region being loaded. Each yields registers r0..r3 as described.
// A operand (16x16, stored [m][k]): matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15),
// (m 8-15, k 8-15) -> A registers 0..3 in order.
RS_MMA_HD RowCol ldmatrix_a_address(int lane) { return {lane % 16, (lane / 16) * 8}; }
// B operand stored [n][k] (K rows for S = Q K^T): matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
// (n 8-15, k 0-7), (n 8-15, k 8-15) -> r0, r1 = B of n-tile 0; r2, r3 = B of n-tile 1.
RS_MMA_HD RowCol ldmatrix_b_rows_address(int lane) { return {lane % 8 + 8 * (lane / 16), 8 * ((lane / 8) % 2)}; }
// B operand stored [k][n] (V rows for O = P V), loaded with .trans: matrices (k 0-7, n 0-7),
// (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15) -> r0, r1 = B of n-tile 0; r2, r3 = n-tile 1.
RS_MMA_HD RowCol ldmatrix_b_trans_address(int lane) { return {lane % 8 + 8 * ((lane / 8) % 2), 8 * (lane / 16)}; }

// --- the swizzled shared-memory tile: rows of kHeadSize bf16 ---
// Element index (in bf16 units from the tile's start) of logical (row, col). col's chunk is XORed
// with row % 8; the element's place inside its 16-byte chunk is kept, so a 16-byte cp.async or
// ldmatrix row stays contiguous.
RS_MMA_HD int swizzled_offset(int row, int col) {
  const int chunk = col / kChunkElems;
  return row * kHeadSize + ((chunk ^ (row % kChunksPerRow)) * kChunkElems) + col % kChunkElems;
}
// The 4-byte shared-memory bank of a bf16 element offset (32 banks of 4 bytes).
RS_MMA_HD int bank_of_offset(int elem_offset) { return (elem_offset * 2 / 4) % 32; }

// --- the causal tile schedule (query tile q0.., key tile k0..; T rows in all) ---
// Key tiles a query tile of `block_q` rows starting at q0 visits: every tile that starts at or
// before its last row (and before T).
RS_MMA_HD int key_tiles_visible(int q0, int block_q, int block_k, int T) {
  const int last_row = (q0 + block_q < T ? q0 + block_q : T) - 1;
  return last_row / block_k + 1;
}
// A 16-row slice starting at row r0 has some visible key in the tile starting at k0.
RS_MMA_HD bool slice_sees_tile(int r0, int k0) { return k0 <= r0 + 15; }
// The tile needs the element-wise mask for this slice: some key is after some row, or past T.
RS_MMA_HD bool slice_needs_mask(int r0, int k0, int block_k, int T) {
  return k0 + block_k - 1 > r0 || k0 + block_k > T;
}
// The first query tile a key tile starting at k0 is visible from (backward's loop over queries).
RS_MMA_HD int first_query_tile(int k0, int block_q) { return k0 / block_q; }
// Score (row, key) is kept: causal and inside the sequence.
RS_MMA_HD bool score_visible(int row, int key, int T) { return key <= row && key < T && row < T; }

}  // namespace gpt2::cuda::mma
