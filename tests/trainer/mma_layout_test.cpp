// mma_layout_test.cpp — the index mappings of the tensor-core attention kernels
// (trainer/ops/cuda/kernels/mma_layout.h), checked on the CPU with no GPU: a warp is emulated as 32
// lanes of registers, ldmatrix and mma.sync are emulated from nothing but the mapping functions,
// and what comes out is compared with plain loops.
//
// Checks: every fragment covers its tile exactly once; an emulated m16n8k16 MMA fed by the three
// emulated ldmatrix patterns out of swizzled tiles equals a plain matmul (S = Q K^T and O = P V);
// the C->A register reuse puts P where the A fragment expects it; the swizzle is a bijection and
// the ldmatrix and cp.async access patterns touch 32 distinct banks per phase (and the unswizzled
// layout does not: the check can fail); the tensor-core kernels emulated over those fragments
// (flash_attention_tc.cu's helpers mirrored one for one, its tile schedules and causal skipping),
// forward (online softmax) and backward (the dK/dV kernel's S^T = K Q^T, the dQ kernel), match the
// CPU attention for T in {64, 100, 128, 1024}.
// Tolerances: the MMA emulation sums bf16-exact products in fp32 in a different order than the
// plain loop: 1e-5 relative. The emulated forward rounds P to bf16 before P V as the kernel does
// (relative error <= 2^-9 per weight) and rounds the output to bf16 (half an ulp is 2^-9 below 1):
// |out - reference| <= 4e-3 with inputs in [-1, 1] (measured 2.6e-3); lse, all fp32: 1e-5 relative
// (measured 2e-7). Gradients (P^T, dS and dS^T rounded to bf16 as the kernels do, outputs rounded):
// max |tc - cpu| <= 1e-2 * max(1, max |cpu|) per gradient (measured: dv 6e-3 of 2.1, dq and dk
// 1.3e-3 of 0.4). Swapping two terms of the A-fragment mapping fails the MMA and forward tests.
// Is not: a test of the hardware (a GPU test does that: tests/gpu/cuda_flash_attention_test.cpp).
#include "ops/cuda/kernels/mma_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "ops/cpu/flash_attention.h"

namespace gpt2::cuda::mma {
namespace {

// Round a float to the nearest bf16 (ties to even), kept as a float: what __float2bfloat16_rn gives.
float round_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}

std::vector<float> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = round_bf16(u(rng));
  return v;
}

// A shared-memory tile of `rows` rows of kHeadSize bf16 (held as floats), stored swizzled.
struct SwizzledTile {
  explicit SwizzledTile(int rows) : elems(static_cast<size_t>(rows) * kHeadSize, NAN) {}
  void store(int row, int col, float v) { elems[swizzled_offset(row, col)] = v; }
  std::vector<float> elems;
};

// Registers of one warp after an ldmatrix .x4: [lane][register][half].
using X4Registers = std::array<std::array<std::array<float, 2>, 4>, kLanes>;
using AddressPattern = RowCol (*)(int lane);

// ldmatrix .x4 from `tile`: lane l's row address is pattern(l) + (row0, col0), swizzled; matrix j's
// row i is the 8 elements at the address lane 8j + i supplied.
X4Registers emulate_ldmatrix_x4(const SwizzledTile& tile, int row0, int col0, AddressPattern pattern, bool trans) {
  X4Registers regs{};
  for (int j = 0; j < 4; j++) {
    float matrix[8][8];
    for (int lane = 0; lane < kLanes; lane++) {
      if (ldmatrix_matrix_of_address_lane(lane) != j) continue;
      const RowCol at = pattern(lane);
      const int start = swizzled_offset(row0 + at.row, col0 + at.col);
      for (int c = 0; c < 8; c++) matrix[ldmatrix_row_of_address_lane(lane)][c] = tile.elems[start + c];
    }
    for (int lane = 0; lane < kLanes; lane++)
      for (int half = 0; half < 2; half++) {
        const RowCol got = ldmatrix_received(lane, half, trans);
        regs[lane][j][half] = matrix[got.row][got.col];
      }
  }
  return regs;
}

using AFragment = std::array<std::array<float, kAElems>, kLanes>;
using BFragment = std::array<std::array<float, kBElems>, kLanes>;
using CFragment = std::array<std::array<float, kCElems>, kLanes>;

AFragment a_from_x4(const X4Registers& regs) {
  AFragment a{};
  for (int lane = 0; lane < kLanes; lane++)
    for (int e = 0; e < kAElems; e++) a[lane][e] = regs[lane][e / 2][e % 2];
  return a;
}
// n-tile 0 from registers 0, 1; n-tile 1 from registers 2, 3.
BFragment b_from_x4(const X4Registers& regs, int n_tile) {
  BFragment b{};
  for (int lane = 0; lane < kLanes; lane++)
    for (int e = 0; e < kBElems; e++) b[lane][e] = regs[lane][2 * n_tile + e / 2][e % 2];
  return b;
}

// mma.m16n8k16: d = a b + c, on the warp's fragments, through the mapping functions only.
void emulate_mma(CFragment& c, const AFragment& a, const BFragment& b) {
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < kLanes; lane++) {
    for (int e = 0; e < kAElems; e++) {
      const RowCol p = a_fragment_element(lane, e);
      A[p.row][p.col] = a[lane][e];
    }
    for (int e = 0; e < kBElems; e++) {
      const RowCol p = b_fragment_element(lane, e);
      B[p.row][p.col] = b[lane][e];
    }
    for (int e = 0; e < kCElems; e++) {
      const RowCol p = c_fragment_element(lane, e);
      C[p.row][p.col] = c[lane][e];
    }
  }
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < 8; n++)
      for (int k = 0; k < 16; k++) C[m][n] += A[m][k] * B[k][n];
  for (int lane = 0; lane < kLanes; lane++)
    for (int e = 0; e < kCElems; e++) {
      const RowCol p = c_fragment_element(lane, e);
      c[lane][e] = C[p.row][p.col];
    }
}

// Every (row, col) of a rows x cols tile is held by exactly one (lane, element).
template <class Mapping>
void expect_covers_once(Mapping mapping, int elems, int rows, int cols) {
  std::set<std::pair<int, int>> seen;
  for (int lane = 0; lane < kLanes; lane++)
    for (int e = 0; e < elems; e++) {
      const RowCol p = mapping(lane, e);
      ASSERT_TRUE(p.row >= 0 && p.row < rows && p.col >= 0 && p.col < cols) << lane << "," << e;
      EXPECT_TRUE(seen.insert({p.row, p.col}).second) << "held twice: " << p.row << "," << p.col;
    }
  EXPECT_EQ(seen.size(), static_cast<size_t>(rows * cols));
}

TEST(MmaFragments, EachCoversItsTileExactlyOnce) {
  expect_covers_once(a_fragment_element, kAElems, 16, 16);
  expect_covers_once(b_fragment_element, kBElems, 16, 8);
  expect_covers_once(c_fragment_element, kCElems, 16, 8);
}

TEST(MmaFragments, AccumulatorsOfTwoNTilesAreTheAOperandOfTheNextProduct) {
  for (int lane = 0; lane < kLanes; lane++)
    for (int e = 0; e < kAElems; e++) {
      const CSource src = a_element_from_c(e);
      const RowCol want = a_fragment_element(lane, e);
      const RowCol got = c_fragment_element(lane, src.c_elem);
      EXPECT_EQ(got.row, want.row);
      EXPECT_EQ(got.col + 8 * src.c_tile, want.col) << "lane " << lane << " element " << e;
    }
}

// Q (16, 64) and K (16, 64) in swizzled tiles at row offset 16 (a second slice), V (16, 64).
TEST(MmaFragments, EmulatedLdmatrixAndMmaComputeQKTransposeAndPV) {
  const auto q = random_bf16(16 * 64, 1), k = random_bf16(16 * 64, 2), v = random_bf16(16 * 64, 3);
  SwizzledTile q_tile(32), k_tile(32), v_tile(32);
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 64; c++) {
      q_tile.store(16 + r, c, q[r * 64 + c]);
      k_tile.store(16 + r, c, k[r * 64 + c]);
      v_tile.store(16 + r, c, v[r * 64 + c]);
    }
  // S (16 x 16 keys) = Q K^T: 4 k-steps of 16 head columns, 2 n-tiles of 8 keys.
  CFragment s[2] = {};
  for (int kk = 0; kk < 4; kk++) {
    const AFragment a = a_from_x4(emulate_ldmatrix_x4(q_tile, 16, 16 * kk, ldmatrix_a_address, false));
    const X4Registers kb = emulate_ldmatrix_x4(k_tile, 16, 16 * kk, ldmatrix_b_rows_address, false);
    for (int nt = 0; nt < 2; nt++) emulate_mma(s[nt], a, b_from_x4(kb, nt));
  }
  for (int lane = 0; lane < kLanes; lane++)
    for (int nt = 0; nt < 2; nt++)
      for (int e = 0; e < kCElems; e++) {
        const RowCol p = c_fragment_element(lane, e);
        double want = 0;
        for (int d = 0; d < 64; d++) want += double(q[p.row * 64 + d]) * k[(8 * nt + p.col) * 64 + d];
        EXPECT_NEAR(s[nt][lane][e], want, 1e-5 * std::max(1.0, std::fabs(want)));
      }
  // O (16 x 64) = P V with P = bf16(S) taken straight from the accumulators.
  AFragment p{};
  for (int lane = 0; lane < kLanes; lane++)
    for (int e = 0; e < kAElems; e++) {
      const CSource src = a_element_from_c(e);
      p[lane][e] = round_bf16(s[src.c_tile][lane][src.c_elem]);
    }
  CFragment o[8] = {};
  for (int dd = 0; dd < 4; dd++) {  // 16 head columns = 2 n-tiles per ldmatrix
    const X4Registers vb = emulate_ldmatrix_x4(v_tile, 16, 16 * dd, ldmatrix_b_trans_address, true);
    for (int nt = 0; nt < 2; nt++) emulate_mma(o[2 * dd + nt], p, b_from_x4(vb, nt));
  }
  float p_full[16][16];  // P as the plain loop sees it: the same bf16 rounding of S
  for (int lane = 0; lane < kLanes; lane++)
    for (int nt = 0; nt < 2; nt++)
      for (int e = 0; e < kCElems; e++) {
        const RowCol at = c_fragment_element(lane, e);
        p_full[at.row][8 * nt + at.col] = round_bf16(s[nt][lane][e]);
      }
  for (int lane = 0; lane < kLanes; lane++)
    for (int nt = 0; nt < 8; nt++)
      for (int e = 0; e < kCElems; e++) {
        const RowCol at = c_fragment_element(lane, e);
        double want = 0;
        for (int key = 0; key < 16; key++) want += double(p_full[at.row][key]) * v[key * 64 + 8 * nt + at.col];
        EXPECT_NEAR(o[nt][lane][e], want, 1e-5 * std::max(1.0, std::fabs(want)));
      }
}

TEST(Swizzle, IsABijectionOnEveryTileRow) {
  constexpr int kRows = 128;
  std::vector<int> hits(kRows * kHeadSize, 0);
  for (int r = 0; r < kRows; r++)
    for (int c = 0; c < kHeadSize; c++) {
      const int at = swizzled_offset(r, c);
      ASSERT_TRUE(at >= r * kHeadSize && at < (r + 1) * kHeadSize) << r << "," << c;  // stays in its row
      hits[at]++;
    }
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), kRows * kHeadSize);
}

// Bank conflicts of one ldmatrix phase (the 8 rows of one 8x8 matrix, 16 bytes each): the 32 words
// must fall in 32 distinct banks.
using OffsetFn = int (*)(int row, int col);
int worst_ldmatrix_phase_ways(OffsetFn offset, AddressPattern pattern) {
  int worst = 0;
  for (int row0 = 0; row0 < 128; row0 += 16)
    for (int col0 = 0; col0 < kHeadSize; col0 += 16)
      for (int j = 0; j < 4; j++) {
        int per_bank[32] = {};
        for (int lane = 8 * j; lane < 8 * j + 8; lane++) {
          const RowCol at = pattern(lane);
          const int start = offset(row0 + at.row, col0 + at.col);
          for (int word = 0; word < 4; word++) per_bank[bank_of_offset(start + 2 * word)]++;
        }
        worst = std::max(worst, *std::max_element(per_bank, per_bank + 32));
      }
  return worst;
}
int plain_offset(int row, int col) { return row * kHeadSize + col; }

TEST(Swizzle, LdmatrixPhasesAreFreeOfBankConflicts) {
  for (AddressPattern pattern : {ldmatrix_a_address, ldmatrix_b_rows_address, ldmatrix_b_trans_address})
    EXPECT_EQ(worst_ldmatrix_phase_ways(swizzled_offset, pattern), 1);
  // The control: rows of 128 bytes unswizzled put all 8 rows of a phase in the same 4 banks.
  EXPECT_EQ(worst_ldmatrix_phase_ways(plain_offset, ldmatrix_a_address), 8);
}

TEST(Swizzle, CpAsyncRowsAreFreeOfBankConflicts) {
  // The kernels' copy: thread t of the block copies chunk t % 8 of row t / 8 (+ 16 rows per pass of
  // 128 threads); 8 consecutive threads form one 128-byte store phase.
  for (int first_thread = 0; first_thread < 128 * 8; first_thread += 8) {
    int per_bank[32] = {};
    for (int t = first_thread; t < first_thread + 8; t++) {
      const int start = swizzled_offset(t / kChunksPerRow, (t % kChunksPerRow) * kChunkElems);
      for (int word = 0; word < 4; word++) per_bank[bank_of_offset(start + 2 * word)]++;
    }
    EXPECT_EQ(*std::max_element(per_bank, per_bank + 32), 1) << "threads from " << first_thread;
  }
}

TEST(CausalSchedule, VisitsExactlyTheTilesWithAVisibleScore) {
  constexpr int kBlockQ = 128, kBlockK = 64;
  for (int T : {1, 64, 100, 128, 1000, 1024}) {
    for (int q0 = 0; q0 < T; q0 += kBlockQ) {
      const int tiles = key_tiles_visible(q0, kBlockQ, kBlockK, T);
      for (int kt = 0; kt * kBlockK < T; kt++) {
        bool any = false;
        for (int r = q0; r < std::min(q0 + kBlockQ, T); r++)
          for (int key = kt * kBlockK; key < (kt + 1) * kBlockK; key++) any = any || score_visible(r, key, T);
        EXPECT_EQ(kt < tiles, any) << "T " << T << " q0 " << q0 << " key tile " << kt;
      }
      for (int r0 = q0; r0 < q0 + kBlockQ; r0 += 16)
        for (int kt = 0; kt < tiles; kt++) {
          bool any = false, all = true;
          for (int r = r0; r < r0 + 16; r++)
            for (int key = kt * kBlockK; key < (kt + 1) * kBlockK; key++) {
              const bool visible = score_visible(r, key, 1 << 30) && key < T;
              any = any || visible;
              all = all && visible;
            }
          EXPECT_EQ(slice_sees_tile(r0, kt * kBlockK), any);
          if (!slice_needs_mask(r0, kt * kBlockK, kBlockK, T)) {
            EXPECT_TRUE(all) << "unmasked tile hides a score";
          }
        }
    }
    for (int k0 = 0; k0 < T; k0 += kBlockK) {  // backward: query tiles before the first one see nothing
      const int first = first_query_tile(k0, kBlockQ);
      for (int qt = 0; qt < first; qt++) EXPECT_LT((qt + 1) * kBlockQ - 1, k0);
      EXPECT_GE((first + 1) * kBlockQ - 1, k0);
    }
  }
}

// --- the tiled kernels, emulated over fragments with the kernels' schedules ---
constexpr int kBlockQ = 128;  // the forward's Q tile: 4 warps x 2 slices of 16 rows
constexpr int kTile = 64;     // K/V tiles; the backward's key blocks and query tiles
constexpr int kWarps = 4;
constexpr int kSlices = 2;

using Accumulator = std::array<CFragment, 8>;  // 16 rows x 64 columns: 8 n-tiles

// The device helper mma_a_times_rows_transposed: acc += A (16 x 64, 4 k-steps) B, B stored [n][k]
// as the 64 rows of `tile`.
void emulate_a_times_rows_transposed(Accumulator& acc, const std::array<AFragment, 4>& a, const SwizzledTile& tile) {
  for (int kk = 0; kk < 4; kk++)
    for (int np = 0; np < 4; np++) {
      const X4Registers b = emulate_ldmatrix_x4(tile, 16 * np, 16 * kk, ldmatrix_b_rows_address, false);
      for (int nt = 0; nt < 2; nt++) emulate_mma(acc[2 * np + nt], a[kk], b_from_x4(b, nt));
    }
}
// The device helper mma_p_times_rows: acc += bf16(P) (16 x 64, from accumulators) times `tile`
// (64 rows stored [k][n]), loaded with .trans.
void emulate_p_times_rows(Accumulator& acc, const Accumulator& p, const SwizzledTile& tile) {
  for (int kk = 0; kk < 4; kk++) {
    AFragment a{};
    for (int lane = 0; lane < kLanes; lane++)
      for (int e = 0; e < kAElems; e++) {
        const CSource src = a_element_from_c(e);
        a[lane][e] = round_bf16(p[2 * kk + src.c_tile][lane][src.c_elem]);
      }
    for (int dd = 0; dd < 4; dd++) {
      const X4Registers b = emulate_ldmatrix_x4(tile, 16 * kk, 16 * dd, ldmatrix_b_trans_address, true);
      for (int nt = 0; nt < 2; nt++) emulate_mma(acc[2 * dd + nt], a, b_from_x4(b, nt));
    }
  }
}
std::array<AFragment, 4> emulate_load_a_slice(const SwizzledTile& tile, int slice_row) {
  std::array<AFragment, 4> a;
  for (int kk = 0; kk < 4; kk++) a[kk] = a_from_x4(emulate_ldmatrix_x4(tile, slice_row, 16 * kk, ldmatrix_a_address, false));
  return a;
}

// One (batch, head) of a (B,T,ld) tensor: rows of kHeadSize starting at column0.
struct HeadRows {
  const std::vector<float>* data;
  int b, T, ld, column0;
  float at(int t, int d) const { return (*data)[(size_t(b) * T + t) * ld + column0 + d]; }
  SwizzledTile tile(int row0, int rows) const {  // rows at or after T are zeros, as cp.async fills them
    SwizzledTile out(rows);
    for (int r = 0; r < rows; r++)
      for (int d = 0; d < kHeadSize; d++) out.store(r, d, row0 + r < T ? at(row0 + r, d) : 0.0f);
    return out;
  }
};

struct Attention {
  std::vector<float> out, lse;
};

// The forward kernel, emulated; qkv (B,T,3C) bf16-exact, out (B,T,C), lse (B,NH,T).
Attention emulate_tc_forward(const std::vector<float>& qkv, int B, int T, int C, int NH) {
  Attention result{std::vector<float>(static_cast<size_t>(B) * T * C), std::vector<float>(size_t(B) * NH * T)};
  const float scale = 1.0f / std::sqrt(float(kHeadSize));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const HeadRows q{&qkv, b, T, 3 * C, h * kHeadSize}, k{&qkv, b, T, 3 * C, C + h * kHeadSize},
          v{&qkv, b, T, 3 * C, 2 * C + h * kHeadSize};
      for (int q0 = 0; q0 < T; q0 += kBlockQ) {
        const SwizzledTile q_tile = q.tile(q0, kBlockQ);
        for (int w = 0; w < kWarps; w++)
          for (int sl = 0; sl < kSlices; sl++) {
            const int slice_row = w * 32 + sl * 16;  // inside the Q tile
            const int r0 = q0 + slice_row;
            const auto qa = emulate_load_a_slice(q_tile, slice_row);
            Accumulator o{};
            float m[kLanes][2], l[kLanes][2];
            for (int lane = 0; lane < kLanes; lane++) m[lane][0] = m[lane][1] = -INFINITY, l[lane][0] = l[lane][1] = 0;
            const int tiles = key_tiles_visible(q0, kBlockQ, kTile, T);
            for (int kt = 0; kt < tiles; kt++) {
              const int k0 = kt * kTile;
              if (!slice_sees_tile(r0, k0)) continue;
              Accumulator s{};
              emulate_a_times_rows_transposed(s, qa, k.tile(k0, kTile));
              const bool mask = slice_needs_mask(r0, k0, kTile, T);
              // Row statistics: a row's 64 scores live in the 4 lanes of a quad (lane / 4 equal).
              float row_max[kLanes][2];
              for (int lane = 0; lane < kLanes; lane++)
                for (int half = 0; half < 2; half++) {
                  float mx = -INFINITY;
                  for (int nt = 0; nt < 8; nt++)
                    for (int e = 2 * half; e < 2 * half + 2; e++) {
                      const RowCol p = c_fragment_element(lane, e);
                      float& x = s[nt][lane][e];
                      x = (!mask || score_visible(r0 + p.row, k0 + 8 * nt + p.col, T)) ? x * scale : -INFINITY;
                      mx = std::max(mx, x);
                    }
                  row_max[lane][half] = mx;
                }
              for (int lane = 0; lane < kLanes; lane++)  // the two xor-shuffles over the quad
                for (int half = 0; half < 2; half++) {
                  float mx = -INFINITY;
                  for (int q4 = 0; q4 < 4; q4++) mx = std::max(mx, row_max[(lane & ~3) + q4][half]);
                  const float m_new = std::max(m[lane][half], mx);
                  // A row with nothing visible yet keeps m = -inf; its exponentials below are 0.
                  const float m_use = m_new == -INFINITY ? 0.0f : m_new;
                  const float correction = std::exp(m[lane][half] - m_use);
                  l[lane][half] *= correction;
                  for (int nt = 0; nt < 8; nt++)
                    for (int e = 2 * half; e < 2 * half + 2; e++) {
                      o[nt][lane][e] *= correction;
                      s[nt][lane][e] = std::exp(s[nt][lane][e] - m_use);
                      l[lane][half] += s[nt][lane][e];  // this lane's part; summed over the quad at the end
                    }
                  m[lane][half] = m_new;
                }
              emulate_p_times_rows(o, s, v.tile(k0, kTile));
            }
            for (int lane = 0; lane < kLanes; lane++)
              for (int half = 0; half < 2; half++) {
                float sum = 0;
                for (int q4 = 0; q4 < 4; q4++) sum += l[(lane & ~3) + q4][half];
                const int row = r0 + lane / 4 + 8 * half;
                if (row >= T) continue;
                for (int nt = 0; nt < 8; nt++)
                  for (int e = 2 * half; e < 2 * half + 2; e++) {
                    const int d = 8 * nt + c_fragment_element(lane, e).col;
                    result.out[(size_t(b) * T + row) * C + h * kHeadSize + d] = round_bf16(o[nt][lane][e] / sum);
                  }
                if (lane % 4 == 0) result.lse[(size_t(b) * NH + h) * T + row] = m[lane][half] + std::log(sum);
              }
          }
      }
    }
  return result;
}

// Writes a 16 x 64 accumulator slice (rows row0.., times scale, rounded to bf16) into dst (B,T,ld).
void store_emulated_slice(std::vector<float>& dst, const Accumulator& acc, int b, int row0, int T, int ld, int column0,
                          float scale) {
  for (int lane = 0; lane < kLanes; lane++)
    for (int nt = 0; nt < 8; nt++)
      for (int e = 0; e < kCElems; e++) {
        const RowCol at = c_fragment_element(lane, e);
        if (row0 + at.row >= T) continue;
        dst[(size_t(b) * T + row0 + at.row) * ld + column0 + 8 * nt + at.col] = round_bf16(acc[nt][lane][e] * scale);
      }
}

// The two backward kernels, emulated; dsum (B,NH,T) = D, lse from the forward; dqkv (B,T,3C) =.
std::vector<float> emulate_tc_backward(const std::vector<float>& qkv, const std::vector<float>& dout,
                                       const std::vector<float>& lse, const std::vector<float>& dsum, int B, int T,
                                       int C, int NH) {
  std::vector<float> dqkv(size_t(B) * T * 3 * C);
  const float scale = 1.0f / std::sqrt(float(kHeadSize));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const HeadRows q{&qkv, b, T, 3 * C, h * kHeadSize}, k{&qkv, b, T, 3 * C, C + h * kHeadSize},
          v{&qkv, b, T, 3 * C, 2 * C + h * kHeadSize}, dy{&dout, b, T, C, h * kHeadSize};
      auto row_lse = [&](int t) { return t < T ? lse[(size_t(b) * NH + h) * T + t] : 0.0f; };
      auto row_d = [&](int t) { return t < T ? dsum[(size_t(b) * NH + h) * T + t] : 0.0f; };
      // dK, dV: key blocks of 64, a warp 16 keys; S^T = K Q^T so that P^T and dS^T are A operands.
      for (int k0 = 0; k0 < T; k0 += kTile) {
        const SwizzledTile k_tile = k.tile(k0, kTile), v_tile = v.tile(k0, kTile);
        for (int w = 0; w < kWarps; w++) {
          const int kr0 = k0 + 16 * w;
          const auto ka = emulate_load_a_slice(k_tile, 16 * w), va = emulate_load_a_slice(v_tile, 16 * w);
          Accumulator dk{}, dv{};
          for (int qt = first_query_tile(k0, kTile); qt * kTile < T; qt++) {
            const int q0 = qt * kTile;
            const SwizzledTile q_tile = q.tile(q0, kTile), do_tile = dy.tile(q0, kTile);
            Accumulator pt{}, dpt{};
            emulate_a_times_rows_transposed(pt, ka, q_tile);
            emulate_a_times_rows_transposed(dpt, va, do_tile);
            const bool mask = kr0 + 15 > q0 || q0 + kTile > T;
            for (int lane = 0; lane < kLanes; lane++)
              for (int nt = 0; nt < 8; nt++)
                for (int e = 0; e < kCElems; e++) {
                  const RowCol at = c_fragment_element(lane, e);  // row: key, col: query
                  const int query = q0 + 8 * nt + at.col;
                  const bool keep = !mask || score_visible(query, kr0 + at.row, T);
                  const float p = keep ? std::exp(pt[nt][lane][e] * scale - row_lse(query)) : 0.0f;
                  pt[nt][lane][e] = p;
                  dpt[nt][lane][e] = p * (dpt[nt][lane][e] - row_d(query));
                }
            emulate_p_times_rows(dv, pt, do_tile);
            emulate_p_times_rows(dk, dpt, q_tile);
          }
          store_emulated_slice(dqkv, dk, b, kr0, T, 3 * C, C + h * kHeadSize, scale);
          store_emulated_slice(dqkv, dv, b, kr0, T, 3 * C, 2 * C + h * kHeadSize, 1.0f);
        }
      }
      // dQ: query blocks of 64, a warp 16 rows; S = Q K^T, dP = dO V^T, dQ += dS K.
      for (int q0 = 0; q0 < T; q0 += kTile) {
        const SwizzledTile q_tile = q.tile(q0, kTile), do_tile = dy.tile(q0, kTile);
        for (int w = 0; w < kWarps; w++) {
          const int r0 = q0 + 16 * w;
          const auto qa = emulate_load_a_slice(q_tile, 16 * w), da = emulate_load_a_slice(do_tile, 16 * w);
          Accumulator dq{};
          const int tiles = key_tiles_visible(q0, kTile, kTile, T);
          for (int kt = 0; kt < tiles; kt++) {
            const int k0 = kt * kTile;
            if (!slice_sees_tile(r0, k0)) continue;
            const SwizzledTile k_tile = k.tile(k0, kTile);
            Accumulator s{}, dp{};
            emulate_a_times_rows_transposed(s, qa, k_tile);
            emulate_a_times_rows_transposed(dp, da, v.tile(k0, kTile));
            const bool mask = slice_needs_mask(r0, k0, kTile, T);
            for (int lane = 0; lane < kLanes; lane++)
              for (int nt = 0; nt < 8; nt++)
                for (int e = 0; e < kCElems; e++) {
                  const RowCol at = c_fragment_element(lane, e);
                  const int row = r0 + at.row;
                  const bool keep = !mask || score_visible(row, k0 + 8 * nt + at.col, T);
                  const float p = keep ? std::exp(s[nt][lane][e] * scale - row_lse(row)) : 0.0f;
                  s[nt][lane][e] = p * (dp[nt][lane][e] - row_d(row));
                }
            emulate_p_times_rows(dq, s, k_tile);
          }
          store_emulated_slice(dqkv, dq, b, r0, T, 3 * C, h * kHeadSize, scale);
        }
      }
    }
  return dqkv;
}

// Per gradient (dq, dk, dv: the thirds of a row of 3C): the largest |got - want| and largest |want|.
struct GradientErrors {
  double diff[3] = {0, 0, 0};
  double largest[3] = {0, 0, 0};
};
GradientErrors gradient_errors(const std::vector<float>& got, const std::vector<float>& want, int C) {
  GradientErrors errors;
  for (size_t i = 0; i < want.size(); i++) {
    const int part = static_cast<int>(i % (3 * C)) / C;
    errors.diff[part] = std::max(errors.diff[part], std::fabs(double(got[i]) - want[i]));
    errors.largest[part] = std::max(errors.largest[part], std::fabs(double(want[i])));
  }
  return errors;
}

class EmulatedTensorCoreKernels : public ::testing::TestWithParam<int> {};

TEST_P(EmulatedTensorCoreKernels, ForwardMatchesTheCpuAttention) {
  const int T = GetParam(), B = T <= 128 ? 2 : 1, NH = 2, C = NH * kHeadSize;  // B 2: batch offsets too
  const auto qkv = random_bf16(size_t(B) * T * 3 * C, 10 + T);
  Attention want{std::vector<float>(size_t(B) * T * C), std::vector<float>(size_t(B) * NH * T)};
  cpu::flash_attention_forward(want.out.data(), want.lse.data(), qkv.data(), B, T, C, NH);
  const Attention got = emulate_tc_forward(qkv, B, T, C, NH);
  double worst_out = 0, worst_lse = 0;
  for (size_t i = 0; i < want.out.size(); i++) worst_out = std::max(worst_out, std::fabs(double(got.out[i]) - want.out[i]));
  for (size_t i = 0; i < want.lse.size(); i++)
    worst_lse = std::max(worst_lse, std::fabs(double(got.lse[i]) - want.lse[i]) / std::max(1.0f, std::fabs(want.lse[i])));
  std::printf("T %d: max |out - cpu| %.3g, max relative lse error %.3g\n", T, worst_out, worst_lse);
  EXPECT_LE(worst_out, 4e-3);
  EXPECT_LE(worst_lse, 1e-5);
}

TEST_P(EmulatedTensorCoreKernels, BackwardMatchesTheCpuAttention) {
  const int T = GetParam(), B = T <= 128 ? 2 : 1, NH = 2, C = NH * kHeadSize;  // B 2: batch offsets too
  const auto qkv = random_bf16(size_t(B) * T * 3 * C, 20 + T);
  const auto dout = random_bf16(size_t(B) * T * C, 30 + T);
  std::vector<float> out(size_t(B) * T * C), lse(size_t(B) * NH * T), dsum(size_t(B) * NH * T);
  std::vector<float> want(size_t(B) * T * 3 * C);
  cpu::flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  cpu::flash_attention_backward(want.data(), dsum.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
  const auto got = emulate_tc_backward(qkv, dout, lse, dsum, B, T, C, NH);
  const GradientErrors errors = gradient_errors(got, want, C);
  const char* names[3] = {"dq", "dk", "dv"};
  for (int part = 0; part < 3; part++) {
    std::printf("T %d %s: max |tc - cpu| %.3g (max |cpu| %.3g)\n", T, names[part], errors.diff[part],
                errors.largest[part]);
    EXPECT_LE(errors.diff[part], 1e-2 * std::max(1.0, errors.largest[part])) << names[part];
  }
}

INSTANTIATE_TEST_SUITE_P(SequenceLengths, EmulatedTensorCoreKernels, ::testing::Values(64, 100, 128, 1024));

}  // namespace
}  // namespace gpt2::cuda::mma
