// cuda_moe_backend.cpp — make_cuda_moe_ops() of a build with CUDA (see cuda_moe_backend.h).
#include "ops/cuda/cuda_moe_backend.h"

#include <fmt/format.h>

#include "ops/cuda/cuda_moe_ops.h"
#include "ops/cuda/cuda_ops.h"

namespace gpt2 {

rankscope::Result<std::unique_ptr<MoeOps>> make_cuda_moe_ops(Ops& ops) {
  auto* c = dynamic_cast<cuda::CudaOps*>(&ops);
  if (c == nullptr)
    return rankscope::invalid_argument(
        fmt::format("make_cuda_moe_ops: the ops are the {} backend, not cuda (hint: make them with make_cuda_ops)",
                    ops.name()));
  return std::unique_ptr<MoeOps>(std::make_unique<cuda::CudaMoeOps>(c->stream()));
}

}  // namespace gpt2
