// cuda_ops_crossentropy.cpp — CudaOps' vocab-parallel cross-entropy: the unfused ops and the fused
// classifier (ops.h), each a launch of kernels/crossentropy.cu on the logits' element type.
// Is not: a kernel, nor the collectives between the ops (the model's Communicator).
#include <cuda_bf16.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

namespace gpt2::cuda {
void CudaOps::logits_row_max(float* row_max, ConstActPtr logits, int N, const VocabShardMap& shard) {
  const ShardParams sp = shard_params(shard);
  RS_CUDA_OP_MUST((logits.type() == ActType::kBF16) ? launch_logits_row_max(row_max, act_bf16(logits), N, sp, stream_)
                                  : launch_logits_row_max(row_max, act_f32(logits), N, sp, stream_));
}
void CudaOps::softmax_stats(float* stats, ConstActPtr logits, const float* row_max, const int* targets,
                            int N, const VocabShardMap& shard) {
  const ShardParams sp = shard_params(shard);
  RS_CUDA_OP_MUST((logits.type() == ActType::kBF16)
                      ? launch_softmax_stats(stats, act_bf16(logits), row_max, targets, N, sp, stream_)
                      : launch_softmax_stats(stats, act_f32(logits), row_max, targets, N, sp, stream_));
}
void CudaOps::crossentropy_losses(float* losses, const float* stats, const float* row_max, int N) {
  RS_CUDA_OP_MUST(launch_crossentropy_losses(losses, stats, row_max, N, stream_));
}
void CudaOps::crossentropy_backward_inplace(ActPtr logits, const float* row_max, const float* stats,
                                            const int* targets, float dloss, int N,
                                            const VocabShardMap& shard) {
  const ShardParams sp = shard_params(shard);
  RS_CUDA_OP_MUST((logits.type() == ActType::kBF16) ? launch_crossentropy_backward_inplace(act_bf16(logits), row_max, stats, targets,
                                                                         dloss, N, sp, stream_)
                                  : launch_crossentropy_backward_inplace(act_f32(logits), row_max, stats, targets,
                                                                         dloss, N, sp, stream_));
}

void CudaOps::crossentropy_partials(float* partials, ConstActPtr logits, const int* targets, int N,
                                    const VocabShardMap& shard) {
  const ShardParams sp = shard_params(shard);
  RS_CUDA_OP_MUST((logits.type() == ActType::kBF16)
                      ? launch_crossentropy_partials(partials, act_bf16(logits), targets, N, sp, stream_)
                      : launch_crossentropy_partials(partials, act_f32(logits), targets, N, sp, stream_));
}
void CudaOps::crossentropy_combine(float* row_max, float* stats, const float* gathered, int tp_size, int N) {
  RS_CUDA_OP_MUST(launch_crossentropy_combine(row_max, stats, gathered, tp_size, N, stream_));
}
void CudaOps::crossentropy_loss_backward_inplace(float* losses, ActPtr logits, const float* row_max,
                                                 const float* stats, const int* targets, float dloss, int N,
                                                 const VocabShardMap& shard) {
  const ShardParams sp = shard_params(shard);
  RS_CUDA_OP_MUST((logits.type() == ActType::kBF16)
                      ? launch_crossentropy_loss_backward_inplace(losses, act_bf16(logits), row_max, stats,
                                                                  targets, dloss, N, sp, stream_)
                      : launch_crossentropy_loss_backward_inplace(losses, act_f32(logits), row_max, stats,
                                                                  targets, dloss, N, sp, stream_));
}

}  // namespace gpt2::cuda
