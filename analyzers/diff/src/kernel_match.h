// kernel_match.h — the kernels of two runs matched by family and by the range they ran in
// (internal to rankscope diff).
//
// Why: a step that got slower is often one kernel: the same GEMM at a worse tile, more calls of an
// elementwise kernel, or a flash-attention kernel replaced by a naive GEMM pair. Names carry
// template arguments and parameter lists that change between builds and libraries ("void
// flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, ...>>(Params)"), so kernels are matched by
// family (the name without return type, template arguments and parameters); families that exist
// on one side only are matched by the range they ran in (block indices folded).
// Is: reading each run's TRACE_KERNELS (its capture window) into per-family times per traced
// step, and the comparison. Is not: the waterfall (run_diff.cpp), which it annotates.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/analyzers/diff/run_diff.h"
#include "rankscope/format/kernel_class.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers::diff_detail {

// "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)"
// -> "at::native::vectorized_elementwise_kernel"; "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)"
// -> "ncclDevKernel_AllReduce_Sum_f32_RING_LL"; memcpy/memset names stay as they are.
std::string kernel_family(std::string_view name);

struct KernelFamily {
  double ms = 0;     // summed over ranks and traced steps
  double calls = 0;
  format::KernelClass kind = format::KernelClass::kCompute;
  std::map<std::string, double> range_ms;  // by block-wildcarded range ("" outside every range)
};

struct KernelTable {
  double rank_steps = 0;  // traced steps summed over ranks: the divisor for "per step"
  std::map<std::string, KernelFamily> families;
};

// A run without a capture window gives an empty table (rank_steps 0), not an error.
Result<KernelTable> read_kernel_table(const std::filesystem::path& run_dir);

struct KernelComparison {
  bool available = false;  // both runs have kernel records
  std::vector<KernelDiff> changes;   // largest |new - base| first, at most `top`
  std::vector<KernelSwap> swaps;     // ranges where families left and others came
};

KernelComparison compare_kernels(const KernelTable& base, const KernelTable& now, size_t top = 10);

}  // namespace rankscope::analyzers::diff_detail
