// gemm_plan.cpp — row-major to column-major GEMM mapping (see gemm_plan.h). No CUDA here.
#include "ops/cuda/gemm_plan.h"

#include <fmt/format.h>

namespace gpt2::cuda {

rankscope::Result<ColMajorGemm> plan_col_major(const RowMajorGemm& g) {
  if (g.M <= 0 || g.N <= 0 || g.K <= 0 || g.batch <= 0) {
    return rankscope::invalid_argument(fmt::format("GEMM with a non-positive size: {}", describe(g)));
  }
  // Row lengths of the matrices as stored (row-major).
  const int64_t a_row_len = g.trans_a ? g.M : g.K;
  const int64_t b_row_len = g.trans_b ? g.K : g.N;
  if (g.lda < a_row_len) {
    return rankscope::invalid_argument(fmt::format("GEMM lda {} < {} (row of A): {}", g.lda, a_row_len, describe(g)));
  }
  if (g.ldb < b_row_len) {
    return rankscope::invalid_argument(fmt::format("GEMM ldb {} < {} (row of B): {}", g.ldb, b_row_len, describe(g)));
  }
  if (g.ldc < g.N) {
    return rankscope::invalid_argument(fmt::format("GEMM ldc {} < N {}: {}", g.ldc, g.N, describe(g)));
  }
  ColMajorGemm c;
  c.m = g.N;
  c.n = g.M;
  c.k = g.K;
  c.trans_a = g.trans_b;
  c.trans_b = g.trans_a;
  // A' = row-major B: op(A') is (N,K); stored (N,K) when not transposed, else (K,N).
  c.a_rows = g.trans_b ? g.K : g.N;
  c.a_cols = g.trans_b ? g.N : g.K;
  c.lda = g.ldb;
  // B' = row-major A: op(B') is (K,M); stored (K,M) when not transposed, else (M,K).
  c.b_rows = g.trans_a ? g.M : g.K;
  c.b_cols = g.trans_a ? g.K : g.M;
  c.ldb = g.lda;
  c.c_rows = g.N;
  c.c_cols = g.M;
  c.ldc = g.ldc;
  c.batch = g.batch;
  c.stride_a = g.stride_b;
  c.stride_b = g.stride_a;
  c.stride_c = g.stride_c;
  return c;
}

RowMajorGemm gemm_shape(int M, int N, int K, bool trans_a, bool trans_b, int64_t lda, int64_t ldb,
                        int64_t ldc) {
  RowMajorGemm g;
  g.M = M;
  g.N = N;
  g.K = K;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  return g;
}

RowMajorGemm batched(RowMajorGemm g, int batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  g.batch = batch;
  g.stride_a = stride_a;
  g.stride_b = stride_b;
  g.stride_c = stride_c;
  return g;
}

int64_t stored_span(int64_t rows, int64_t cols, int64_t ld, int batch, int64_t stride) {
  if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

std::string describe(const RowMajorGemm& g) {
  return fmt::format("M={} N={} K={} {}{} ld={}/{}/{} batch={}", g.M, g.N, g.K, g.trans_a ? "A^T " : "A ",
                     g.trans_b ? "B^T" : "B", g.lda, g.ldb, g.ldc, g.batch);
}

}  // namespace gpt2::cuda
