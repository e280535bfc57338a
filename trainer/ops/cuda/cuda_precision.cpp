// cuda_precision.cpp — parsing and naming of the --precision flag (fp32 | bf16), and which
// attention kinds and head sizes the CUDA kernels cover. No CUDA here: this file is part of
// gpt2_ops_cuda_probe in every build, so the trainer can refuse a flag before it needs a device.
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

rankscope::Status check_cuda_attention(AttentionKind kind, int head_size) {
  if (kind == AttentionKind::kNaive || head_size == 32 || head_size == 64 || head_size == 128) return {};
  return rankscope::unsupported("--attention flash on cuda has kernels for head sizes 32, 64 and 128, not " +
                                std::to_string(head_size) + "; hint: --attention naive, or change --heads");
}

}  // namespace gpt2
