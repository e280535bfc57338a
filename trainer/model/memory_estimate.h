// memory_estimate.h — how much backend memory one training rank will allocate, known before the
// model is built, and the "does it fit" decision with the message that says what to change.
//
// Is: a pure function of GPT2::Options and the backend's own size answers (attention's saved and
// scratch floats, its workspace), mirroring what ParameterSet, AdamW, GPT2::create and MoeMlp
// allocate; and check_memory_fits(), which turns "needs X, Y free" into an out-of-memory Status
// naming --batch, --attention flash and --recompute. The trainer calls both before the first
// step; tests compare the estimate with what the CPU backend really allocated.
// Is not: a measurement (cuda_backend.h's cuda_ops_memory is), and not exact for MoE layers, whose
// scratch follows the rows the router sends (estimated here for balanced routing: N*K rows per EP
// rank; a hot expert needs more).
#pragma once

#include <cstddef>
#include <string>

#include "model/gpt2.h"
#include "model/ops.h"
#include "rankscope/format/status.h"

namespace gpt2 {

struct MemoryEstimate {
  size_t weights = 0;            // fp32 master weights (ParameterSet::params)
  size_t gradients = 0;          // fp32 gradients (ParameterSet::grads)
  size_t optimizer_state = 0;    // AdamW m and v, fp32
  size_t activations = 0;        // GPT2::create's buffers (GPT2::activation_bytes), incl. attention's
  size_t moe_scratch = 0;        // MoE layers' grow-only scratch after one step, balanced routing
  size_t backend_workspace = 0;  // the backend's scratch, incl. a bf16 weight mirror (Ops::workspace_bytes)
  size_t total() const {
    return weights + gradients + optimizer_state + activations + moe_scratch + backend_workspace;
  }
  // One line, e.g. "7.91 GiB: weights 0.46 GiB, gradients 0.46 GiB, AdamW 0.93 GiB, activations
  // 5.80 GiB (attention naive), backend workspace 0.26 GiB".
  std::string describe(AttentionKind attention) const;
};

// Sizes as the backend rounds them (CPU 64 bytes, CUDA 256), so the estimate and the allocator
// agree to the byte for dense models. Fails on options GPT2::create would refuse (bad B, T, TP).
Result<MemoryEstimate> estimate_training_memory(const GPT2::Options& options, const Ops& ops);

// Ok when `estimate` fits in `free_bytes` with `headroom_bytes` to spare (allocator fragmentation,
// NCCL's buffers). Otherwise kOutOfMemory: both numbers, the breakdown and what to change, in the
// order that saves the most for these options (--attention flash when naive keeps (B,NH,T,T)
// probabilities, --batch at the largest B that fits, --recompute 2).
Status check_memory_fits(const MemoryEstimate& estimate, const GPT2::Options& options, const Ops& ops,
                         size_t free_bytes, size_t headroom_bytes, const std::string& device);

}  // namespace gpt2
