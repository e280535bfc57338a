// moe_expert_blocks.h — which rows each GEMM launch of a layer's experts covers: the expert plan.
//
// Is: plain host arithmetic shared by every backend (the CPU oracle and the CUDA path run the same
// blocks), so it is unit-tested on the CPU. After the chunk sort (moe_dispatch.h) local expert j
// owns the contiguous rows [offset[j], offset[j] + rows[j]). The grouped loop gives one block per
// expert that received rows (an expert with none launches nothing: a zero-row GEMM is an error in
// cuBLASLt); the token loop, the incident's anti-pattern, gives one block per row.
// Is not: the GEMMs themselves (moe_expert_chain.h) or the exchange that decides the rows.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "model/config.h"

namespace gpt2::moe {

struct ExpertBlock {
  int expert = 0;         // local expert index
  size_t first_row = 0;   // in the grouped buffer ([local expert][src rank] order)
  size_t rows = 0;        // > 0
};

// (L+1) exclusive prefix sum of expert_rows: offsets[j] is expert j's first row, offsets[L] the total.
std::vector<size_t> expert_row_offsets(std::span<const size_t> expert_rows);

// The launches of one layer's expert chain for `loop`, in row order.
std::vector<ExpertBlock> expert_blocks(std::span<const size_t> expert_rows, ExpertLoop loop);

}  // namespace gpt2::moe
