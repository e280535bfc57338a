// moe_rows.cpp — CPU row movement of the MoE MLP: gathers and scatters of the token permutation
// and the gate-weighted combine, forward and backward. Is not: the index arithmetic (host-side,
// model/moe_dispatch.h) nor the expert GEMMs.
#include <cstring>

#include "ops/cpu/cpu_moe_ops.h"

namespace gpt2::cpu {

// out (R,C) = in[src_row[i]]
void CpuMoeOps::gather_rows(float* out, const float* in, const int32_t* src_row, int R, int C) {
#pragma omp parallel for
  for (int i = 0; i < R; i++)
    std::memcpy(out + static_cast<size_t>(i) * C, in + static_cast<size_t>(src_row[i]) * C,
                sizeof(float) * static_cast<size_t>(C));
}

// out[dst_row[i]] (R,C) = in row i
void CpuMoeOps::scatter_rows(float* out, const float* in, const int32_t* dst_row, int R, int C) {
#pragma omp parallel for
  for (int i = 0; i < R; i++)
    std::memcpy(out + static_cast<size_t>(dst_row[i]) * C, in + static_cast<size_t>(i) * C,
                sizeof(float) * static_cast<size_t>(C));
}

// dinp (N,C) += sum_k drows[row_of_slot[n*K+k]]
void CpuMoeOps::slot_rows_backward(float* dinp, const float* drows, const int32_t* row_of_slot,
                                   int N, int K, int C) {
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    float* d = dinp + static_cast<size_t>(n) * C;
    for (int k = 0; k < K; k++) {
      const int32_t row = row_of_slot[static_cast<size_t>(n) * K + k];
      if (row < 0) continue;
      const float* src = drows + static_cast<size_t>(row) * C;
      for (int c = 0; c < C; c++) d[c] += src[c];
    }
  }
}

// out (N,C) = sum_k gate[n,k] * rows[row_of_slot[n*K+k]]
void CpuMoeOps::combine_forward(float* out, const float* rows, const float* gate,
                                const int32_t* row_of_slot, int N, int K, int C) {
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    float* o = out + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; c++) o[c] = 0.0f;
    for (int k = 0; k < K; k++) {
      const int32_t row = row_of_slot[static_cast<size_t>(n) * K + k];
      if (row < 0) continue;
      const float g = gate[static_cast<size_t>(n) * K + k];
      const float* r = rows + static_cast<size_t>(row) * C;
      for (int c = 0; c < C; c++) o[c] += g * r[c];
    }
  }
}

// drows[row] (R,C) = gate * dout[n]; dgate (N,K) = dout[n] . rows[row]
void CpuMoeOps::combine_backward(float* drows, float* dgate, const float* dout, const float* rows,
                                 const float* gate, const int32_t* row_of_slot, int N, int K,
                                 int C) {
#pragma omp parallel for
  for (int n = 0; n < N; n++) {
    const float* d = dout + static_cast<size_t>(n) * C;
    for (int k = 0; k < K; k++) {
      const size_t slot = static_cast<size_t>(n) * K + k;
      const int32_t row = row_of_slot[slot];
      if (row < 0) {
        dgate[slot] = 0.0f;
        continue;
      }
      const float g = gate[slot];
      const float* r = rows + static_cast<size_t>(row) * C;
      float* dr = drows + static_cast<size_t>(row) * C;
      float dot = 0.0f;
      for (int c = 0; c < C; c++) {
        dr[c] = g * d[c];
        dot += d[c] * r[c];
      }
      dgate[slot] = dot;
    }
  }
}

}  // namespace gpt2::cpu
