// gemm_plan.h — how a row-major GEMM of the model becomes the column-major GEMM cuBLASLt runs.
//
// Is: plain C++ arithmetic (no CUDA header), so the mapping — the classic source of transposed
// results — is unit-tested on any machine (tests/gpu/gemm_plan_test.cpp, which runs without a GPU).
// Row-major C (M,N) = op(A) (M,K) @ op(B) (K,N) is column-major C^T (N,M) = op(B)^T @ op(A)^T, and
// a row-major matrix with leading dimension ld IS its transpose in column-major with the same ld:
// so cuBLASLt gets m=N, n=M, the operands swapped and the transpose flags unchanged.
// Is not: the cuBLASLt calls (cublaslt_gemm.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "rankscope/format/status.h"

namespace gpt2::cuda {

// C (M,N) = alpha * op(A) (M,K) @ op(B) (K,N) + beta * C, row-major, `batch` times with element
// strides between the members. lda/ldb/ldc are the row strides of the matrices as stored.
struct RowMajorGemm {
  int M = 0, N = 0, K = 0;
  bool trans_a = false;  // A is stored (K,M) and used transposed
  bool trans_b = false;  // B is stored (N,K) and used transposed
  int64_t lda = 0, ldb = 0, ldc = 0;
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// A RowMajorGemm in one expression: gemm_shape(M, N, K, trans_a, trans_b, lda, ldb, ldc).
RowMajorGemm gemm_shape(int M, int N, int K, bool trans_a, bool trans_b, int64_t lda, int64_t ldb,
                        int64_t ldc);
// The same, batched over `batch` members with element strides.
RowMajorGemm batched(RowMajorGemm g, int batch, int64_t stride_a, int64_t stride_b, int64_t stride_c);

// The same GEMM in cuBLAS terms: D (m,n) = op(A') (m,k) op(B') (k,n); A' is the row-major B and B'
// the row-major A. Stored shapes are column-major (rows, cols) with leading dimension ld >= rows.
struct ColMajorGemm {
  int m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t a_rows = 0, a_cols = 0, lda = 0;  // A' (the caller's B)
  int64_t b_rows = 0, b_cols = 0, ldb = 0;  // B' (the caller's A)
  int64_t c_rows = 0, c_cols = 0, ldc = 0;
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Fails (kInvalidArgument, naming the field) on a non-positive size or batch, or a leading dimension
// smaller than the stored matrix's row length.
rankscope::Result<ColMajorGemm> plan_col_major(const RowMajorGemm& g);

// Elements a row-major operand spans from its first element, over all batch members: what a cast
// to bf16 must convert. rows x cols is the matrix as stored.
int64_t stored_span(int64_t rows, int64_t cols, int64_t ld, int batch, int64_t stride);

std::string describe(const RowMajorGemm& g);  // "M=64 N=768 K=768 A^T B ld=768/768/768 batch=1"

}  // namespace gpt2::cuda
