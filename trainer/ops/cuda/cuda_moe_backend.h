// cuda_moe_backend.h — the CUDA backend of gpt2::MoeOps as the rest of the trainer sees it: a
// factory. Includes no CUDA header, so CPU-only code (trainer/train, tests) may include it.
//
// Is: make_cuda_moe_ops(ops): the MoE element loops (kernels/moe.cu) on the stream of a CudaOps from
// make_cuda_ops(), so MoE and dense ops of one step are ordered on one stream. Exists in every build
// (cuda_moe_backend_absent.cpp says "built without CUDA"), like cuda_backend.h.
// Is not: the expert GEMMs (ordinary Ops calls, model/moe_expert_chain.h) or the exchange.
#pragma once

#include <memory>

#include "model/moe_ops.h"
#include "model/ops.h"
#include "rankscope/format/status.h"

namespace gpt2 {

// kInvalidArgument when `ops` is not the CUDA backend; kUnsupported in a build without CUDA.
// `ops` must outlive the result.
rankscope::Result<std::unique_ptr<MoeOps>> make_cuda_moe_ops(Ops& ops);

}  // namespace gpt2
