// gemm_plan_test.cpp — the row-major to column-major GEMM mapping of the CUDA backend, checked on the
// CPU: a naive column-major GEMM executed from the ColMajorGemm plan (as cuBLASLt would read it) must
// equal the naive row-major definition, for every transpose combination, padded leading dimensions
// and batches. Needs no GPU (no label): the mapping is plain arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/cuda/gemm_plan.h"

namespace gpt2::cuda {
namespace {

// Element (r, c) of a column-major matrix with leading dimension ld, op-transposed when `trans`.
float col_major_op(const float* m, int64_t ld, bool trans, int64_t r, int64_t c) {
  return trans ? m[r * ld + c] : m[c * ld + r];
}

// D (m,n) = alpha op(A') op(B') + beta D in column-major, as the plan describes it.
void run_col_major(const ColMajorGemm& p, const float* a, const float* b, float* c, float alpha, float beta) {
  for (int bi = 0; bi < p.batch; bi++) {
    const float* ab = a + bi * p.stride_a;
    const float* bb = b + bi * p.stride_b;
    float* cb = c + bi * p.stride_c;
    for (int i = 0; i < p.m; i++) {
      for (int j = 0; j < p.n; j++) {
        double acc = 0;
        for (int k = 0; k < p.k; k++) {
          acc += static_cast<double>(col_major_op(ab, p.lda, p.trans_a, i, k)) *
                 col_major_op(bb, p.ldb, p.trans_b, k, j);
        }
        float& out = cb[j * p.ldc + i];
        out = static_cast<float>(alpha * acc + beta * out);
      }
    }
  }
}

// The definition: C (M,N) = alpha op(A) op(B) + beta C, row-major.
void run_row_major(const RowMajorGemm& g, const float* a, const float* b, float* c, float alpha, float beta) {
  for (int bi = 0; bi < g.batch; bi++) {
    for (int i = 0; i < g.M; i++) {
      for (int j = 0; j < g.N; j++) {
        double acc = 0;
        for (int k = 0; k < g.K; k++) {
          const float av = g.trans_a ? a[bi * g.stride_a + k * g.lda + i] : a[bi * g.stride_a + i * g.lda + k];
          const float bv = g.trans_b ? b[bi * g.stride_b + j * g.ldb + k] : b[bi * g.stride_b + k * g.ldb + j];
          acc += static_cast<double>(av) * bv;
        }
        float& out = c[bi * g.stride_c + i * g.ldc + j];
        out = static_cast<float>(alpha * acc + beta * out);
      }
    }
  }
}

std::vector<float> randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(GemmPlan, ColumnMajorExecutionOfThePlanEqualsTheRowMajorDefinition) {
  const int M = 5, N = 7, K = 3, batch = 2;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (int pad : {0, 2}) {
        SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb << " pad=" << pad);
        RowMajorGemm g = gemm_shape(M, N, K, ta, tb, (ta ? M : K) + pad, (tb ? K : N) + pad, N + pad);
        const int64_t a_rows = ta ? K : M, b_rows = tb ? N : K;
        g = batched(g, batch, a_rows * g.lda + 1, b_rows * g.ldb + 3, M * g.ldc + 2);
        auto plan = plan_col_major(g);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        const auto a = randoms(static_cast<size_t>(batch * g.stride_a), 1);
        const auto b = randoms(static_cast<size_t>(batch * g.stride_b), 2);
        auto c_row = randoms(static_cast<size_t>(batch * g.stride_c), 3);
        auto c_col = c_row;
        run_row_major(g, a.data(), b.data(), c_row.data(), 0.5f, 1.0f);
        // cuBLASLt's A' is the caller's B, B' the caller's A.
        run_col_major(*plan, b.data(), a.data(), c_col.data(), 0.5f, 1.0f);
        for (size_t i = 0; i < c_row.size(); i++) ASSERT_FLOAT_EQ(c_col[i], c_row[i]) << i;
        // The stored shapes cuBLASLt is told must fit their leading dimensions.
        EXPECT_GE(plan->lda, plan->a_rows);
        EXPECT_GE(plan->ldb, plan->b_rows);
        EXPECT_GE(plan->ldc, plan->c_rows);
        EXPECT_EQ(plan->a_rows * plan->a_cols, static_cast<int64_t>(K) * N);
        EXPECT_EQ(plan->b_rows * plan->b_cols, static_cast<int64_t>(K) * M);
      }
    }
  }
}

TEST(GemmPlan, RejectsBadShapesWithTheFieldNamed) {
  auto zero = plan_col_major(gemm_shape(0, 4, 4, false, false, 4, 4, 4));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("non-positive"), std::string::npos);
  auto lda = plan_col_major(gemm_shape(4, 4, 8, false, false, 7, 4, 4));
  ASSERT_FALSE(lda.ok());
  EXPECT_NE(lda.status().message().find("lda 7"), std::string::npos) << lda.status().message();
  auto ldb = plan_col_major(gemm_shape(4, 6, 8, false, true, 8, 6, 6));  // B stored (6,8): row of 8
  ASSERT_FALSE(ldb.ok());
  EXPECT_NE(ldb.status().message().find("ldb 6"), std::string::npos) << ldb.status().message();
  auto ldc = plan_col_major(gemm_shape(4, 6, 8, false, false, 8, 6, 5));
  ASSERT_FALSE(ldc.ok());
}

TEST(GemmPlan, StoredSpanCoversEveryBatchMember) {
  EXPECT_EQ(stored_span(3, 4, 4, 1, 0), 12);
  EXPECT_EQ(stored_span(3, 4, 6, 1, 0), 2 * 6 + 4);
  EXPECT_EQ(stored_span(3, 4, 4, 3, 100), 200 + 12);
  EXPECT_EQ(stored_span(0, 4, 4, 3, 100), 0);
}

}  // namespace
}  // namespace gpt2::cuda
