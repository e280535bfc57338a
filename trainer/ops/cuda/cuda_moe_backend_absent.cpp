// cuda_moe_backend_absent.cpp — make_cuda_moe_ops() of a build without CUDA: says so.
#include "ops/cuda/cuda_moe_backend.h"

namespace gpt2 {

rankscope::Result<std::unique_ptr<MoeOps>> make_cuda_moe_ops(Ops&) {
  return rankscope::unsupported("CUDA MoE ops: built without CUDA (nvcc was not found at configure time)");
}

}  // namespace gpt2
