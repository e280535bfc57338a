// flash_attention.cpp — causal flash-style attention on the CPU (FlashAttention-2's algorithm,
// written from the paper's description): see flash_attention.h for what and why.
// Shapes per (batch, head): q, k, v, o, dq, dk, dv are (T,hs) views with row stride 3C (C for o and
// dO); lse and D are (T). Tiles: S, P, dP (Br,Bc), the output accumulator (Br,hs).
#include "ops/cpu/flash_attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace gpt2::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One (batch, head) of the inputs and outputs: row-major (T,hs) views with their row strides.
struct HeadView {
  const float* q;
  const float* k;
  const float* v;
  int ld_qkv;  // 3C
};

HeadView head_view(const float* qkv, int b, int h, int T, int C, int hs) {
  const float* q = qkv + static_cast<size_t>(b) * T * 3 * C + static_cast<size_t>(h) * hs;
  return {q, q + C, q + 2 * C, 3 * C};
}

// Keys of tile [c0, c0+nc) that query row r may see (causal: key index <= r).
inline int visible_keys(int r, int c0, int nc) { return std::clamp(r - c0 + 1, 0, nc); }

}  // namespace

void flash_attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH,
                             FlashTiles tiles) {
  const int hs = C / NH;
  const int Br = tiles.q_rows, Bc = tiles.kv_rows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> s(static_cast<size_t>(Br) * Bc);    // S, then P in place
    std::vector<float> acc(static_cast<size_t>(Br) * hs);  // unnormalised output rows
    std::vector<float> m(Br), l(Br);                        // running row max and row sum
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < B * NH; bh++) {
      const int b = bh / NH, h = bh % NH;
      const HeadView x = head_view(qkv, b, h, T, C, hs);
      float* o = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs;
      float* lse_head = lse + static_cast<size_t>(bh) * T;
      for (int r0 = 0; r0 < T; r0 += Br) {
        const int nr = std::min(Br, T - r0);
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(m.begin(), m.end(), kNegInf);
        std::fill(l.begin(), l.end(), 0.0f);
        const float* qi = x.q + static_cast<size_t>(r0) * x.ld_qkv;
        // Key tiles up to the last row of this query tile; later ones are fully masked.
        for (int c0 = 0; c0 < r0 + nr; c0 += Bc) {
          const int nc = std::min(Bc, r0 + nr - c0);
          // s (nr,nc) = scale * q_i (nr,hs) @ k_j (nc,hs)^T
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, scale, qi, x.ld_qkv,
                      x.k + static_cast<size_t>(c0) * x.ld_qkv, x.ld_qkv, 0.0f, s.data(), nc);
          for (int i = 0; i < nr; i++) {
            float* row = s.data() + static_cast<size_t>(i) * nc;
            const int nv = visible_keys(r0 + i, c0, nc);
            float tile_max = kNegInf;
            for (int j = 0; j < nv; j++) tile_max = std::max(tile_max, row[j]);
            const float m_new = std::max(m[i], tile_max);
            // Rows that see no key of this tile keep m = -inf only if they saw none before, which
            // cannot happen (key 0 is in the first tile); guard anyway so exp(-inf - -inf) never runs.
            const float correction = m[i] == kNegInf ? 0.0f : std::exp(m[i] - m_new);
            float row_sum = 0.0f;
            for (int j = 0; j < nv; j++) {
              row[j] = std::exp(row[j] - m_new);
              row_sum += row[j];
            }
            for (int j = nv; j < nc; j++) row[j] = 0.0f;
            l[i] = l[i] * correction + row_sum;
            m[i] = m_new;
            float* a = acc.data() + static_cast<size_t>(i) * hs;
            for (int d = 0; d < hs; d++) a[d] *= correction;
          }
          // acc (nr,hs) += p (nr,nc) @ v_j (nc,hs)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f, s.data(), nc,
                      x.v + static_cast<size_t>(c0) * x.ld_qkv, x.ld_qkv, 1.0f, acc.data(), hs);
        }
        for (int i = 0; i < nr; i++) {
          const float inv = 1.0f / l[i];
          const float* a = acc.data() + static_cast<size_t>(i) * hs;
          float* orow = o + static_cast<size_t>(r0 + i) * C;
          for (int d = 0; d < hs; d++) orow[d] = a[d] * inv;
          lse_head[r0 + i] = m[i] + std::log(l[i]);
        }
      }
    }
  }
}

void flash_attention_backward(float* dqkv, float* dsum, const float* dout, const float* qkv,
                              const float* out, const float* lse, int B, int T, int C, int NH,
                              FlashTiles tiles) {
  const int hs = C / NH;
  const int Br = tiles.q_rows, Bc = tiles.kv_rows;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> p(static_cast<size_t>(Br) * Bc);   // P, then dS in place
    std::vector<float> dp(static_cast<size_t>(Br) * Bc);  // dP = dO V^T
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < B * NH; bh++) {
      const int b = bh / NH, h = bh % NH;
      const HeadView x = head_view(qkv, b, h, T, C, hs);
      const size_t head_offset = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs;
      const float* dy = dout + head_offset;
      const float* o = out + head_offset;
      const float* lse_head = lse + static_cast<size_t>(bh) * T;
      float* d_head = dsum + static_cast<size_t>(bh) * T;
      float* dq = dqkv + static_cast<size_t>(b) * T * C3 + static_cast<size_t>(h) * hs;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      // D (T) = rowsum(dO * O); dq, dk, dv start at 0 and are accumulated tile by tile.
      for (int r = 0; r < T; r++) {
        const float* dyr = dy + static_cast<size_t>(r) * C;
        const float* orow = o + static_cast<size_t>(r) * C;
        float dot = 0.0f;
        for (int d = 0; d < hs; d++) dot += dyr[d] * orow[d];
        d_head[r] = dot;
        for (float* g : {dq, dk, dv}) std::fill_n(g + static_cast<size_t>(r) * C3, hs, 0.0f);
      }
      for (int c0 = 0; c0 < T; c0 += Bc) {
        const int nc = std::min(Bc, T - c0);
        const float* kj = x.k + static_cast<size_t>(c0) * C3;
        const float* vj = x.v + static_cast<size_t>(c0) * C3;
        float* dkj = dk + static_cast<size_t>(c0) * C3;
        float* dvj = dv + static_cast<size_t>(c0) * C3;
        // Query tiles that can see a key of this tile: the one holding row c0 and all later ones.
        for (int r0 = c0 / Br * Br; r0 < T; r0 += Br) {
          const int nr = std::min(Br, T - r0);
          const float* qi = x.q + static_cast<size_t>(r0) * C3;
          const float* dyi = dy + static_cast<size_t>(r0) * C;
          float* dqi = dq + static_cast<size_t>(r0) * C3;
          // p (nr,nc) = scale * q_i @ k_j^T, then exp(s - lse) where visible, 0 where masked
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, scale, qi, C3, kj, C3,
                      0.0f, p.data(), nc);
          for (int i = 0; i < nr; i++) {
            float* row = p.data() + static_cast<size_t>(i) * nc;
            const int nv = visible_keys(r0 + i, c0, nc);
            const float row_lse = lse_head[r0 + i];
            for (int j = 0; j < nv; j++) row[j] = std::exp(row[j] - row_lse);
            for (int j = nv; j < nc; j++) row[j] = 0.0f;
          }
          // dv_j (nc,hs) += p^T (nc,nr) @ dO_i (nr,hs);  dp (nr,nc) = dO_i @ v_j^T
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, p.data(), nc, dyi, C,
                      1.0f, dvj, C3);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, 1.0f, dyi, C, vj, C3, 0.0f,
                      dp.data(), nc);
          // ds = p * (dp - D) (in p); masked entries stay 0 because p is 0 there.
          for (int i = 0; i < nr; i++) {
            float* row = p.data() + static_cast<size_t>(i) * nc;
            const float* dprow = dp.data() + static_cast<size_t>(i) * nc;
            const float d_row = d_head[r0 + i];
            for (int j = 0; j < nc; j++) row[j] *= dprow[j] - d_row;
          }
          // dq_i (nr,hs) += scale * ds @ k_j;  dk_j (nc,hs) += scale * ds^T @ q_i
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, scale, p.data(), nc, kj,
                      C3, 1.0f, dqi, C3);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, scale, p.data(), nc, qi, C3,
                      1.0f, dkj, C3);
        }
      }
    }
  }
}

}  // namespace gpt2::cpu
