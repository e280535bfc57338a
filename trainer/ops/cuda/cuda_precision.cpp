// cuda_precision.cpp — parsing and naming of the --precision flag (fp32 | bf16). No CUDA here: this
// file is part of gpt2_ops_cuda_probe in every build.
#include <string>

#include "ops/cuda/cuda_backend.h"

namespace gpt2 {

rankscope::Result<CudaPrecision> parse_cuda_precision(std::string_view text) {
  if (text == "fp32") return CudaPrecision::kFp32;
  if (text == "bf16") return CudaPrecision::kBf16;
  return rankscope::invalid_argument("unknown precision '" + std::string(text) +
                                     "'; hint: use fp32 (exact GEMMs, for comparisons) or bf16");
}

std::string_view cuda_precision_name(CudaPrecision precision) {
  return precision == CudaPrecision::kBf16 ? "bf16" : "fp32";
}

}  // namespace gpt2
