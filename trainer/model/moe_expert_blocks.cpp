// moe_expert_blocks.cpp — row offsets per local expert and the GEMM blocks of each expert loop.
#include "moe_expert_blocks.h"

#include <numeric>

namespace gpt2::moe {

std::vector<size_t> expert_row_offsets(std::span<const size_t> expert_rows) {
  std::vector<size_t> offsets(expert_rows.size() + 1, 0);
  std::inclusive_scan(expert_rows.begin(), expert_rows.end(), offsets.begin() + 1);
  return offsets;
}

std::vector<ExpertBlock> expert_blocks(std::span<const size_t> expert_rows, ExpertLoop loop) {
  const std::vector<size_t> offsets = expert_row_offsets(expert_rows);
  std::vector<ExpertBlock> blocks;
  blocks.reserve(loop == ExpertLoop::kToken ? offsets.back() : expert_rows.size());
  for (size_t j = 0; j < expert_rows.size(); ++j) {
    if (expert_rows[j] == 0) continue;
    if (loop == ExpertLoop::kToken) {
      for (size_t row = offsets[j]; row < offsets[j + 1]; ++row) blocks.push_back({static_cast<int>(j), row, 1});
    } else {
      blocks.push_back({static_cast<int>(j), offsets[j], expert_rows[j]});
    }
  }
  return blocks;
}

}  // namespace gpt2::moe
