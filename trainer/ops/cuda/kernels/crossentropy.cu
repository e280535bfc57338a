// crossentropy.cu — vocab-parallel softmax cross-entropy kernels over this rank's logit columns.
//
// Is: kernels and launch wrappers only. The model runs logits_row_max -> all-reduce(max) ->
// softmax_stats -> one all-reduce(sum) of [sum of exp | target logit] -> crossentropy_losses.
// The backward is fused: each logit is replaced in place by its gradient (softmax - onehot) * dloss,
// so the probabilities are never materialised in a buffer of their own. One block per row; padded
// columns (global id >= V) are a suffix of every shard and never enter max or sum.
// Is not: the all-reduces (the model does them through its Communicator).
#include "ops/cuda/kernels/device_util.cuh"

namespace gpt2::cuda {
namespace {

constexpr int kBlock = 512;

// row_max (N) = max over logits (N,Vl) real columns.
__global__ void logits_row_max_kernel(float* row_max, const float* logits, ShardParams shard) {
  __shared__ float shared[32];
  const float* l = logits + static_cast<size_t>(blockIdx.x) * shard.local_rows;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < shard.real_cols; j += blockDim.x) m = fmaxf(m, l[j]);
  m = block_max(m, shared);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

// stats (2N) = [sum_j exp(l_j - max) | owned(target) * l_target]
__global__ void softmax_stats_kernel(float* stats, const float* logits, const float* row_max,
                                     const int* targets, int N, ShardParams shard) {
  __shared__ float shared[32];
  const int n = blockIdx.x;
  const float* l = logits + static_cast<size_t>(n) * shard.local_rows;
  const float m = row_max[n];
  float s = 0.0f;
  for (int j = threadIdx.x; j < shard.real_cols; j += blockDim.x) s += expf(l[j] - m);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) {
    const DeviceShardRow sr = shard_row(targets[n], shard);
    stats[n] = s;
    stats[N + n] = static_cast<float>(sr.owned) * l[sr.row];
  }
}

// losses (N) = log(sum) + max - target_logit
__global__ void crossentropy_losses_kernel(float* losses, const float* stats, const float* row_max, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) losses[n] = logf(stats[n]) + row_max[n] - stats[N + n];
}

// logits (N,Vl) <- (exp(l - max) / sum - onehot) * dloss; columns >= real_cols <- 0.
__global__ void crossentropy_backward_kernel(float* logits, const float* row_max, const float* stats,
                                             const int* targets, float dloss, ShardParams shard) {
  const int n = blockIdx.x;
  float* l = logits + static_cast<size_t>(n) * shard.local_rows;
  const float m = row_max[n];
  const float inv = 1.0f / stats[n];
  for (int j = threadIdx.x; j < shard.local_rows; j += blockDim.x) {
    l[j] = j < shard.real_cols ? expf(l[j] - m) * inv * dloss : 0.0f;
  }
  __syncthreads();  // the one-hot term lands after every thread wrote its columns
  if (threadIdx.x == 0) {
    const DeviceShardRow sr = shard_row(targets[n], shard);
    l[sr.row] -= static_cast<float>(sr.owned) * dloss;
  }
}

}  // namespace

cudaError_t launch_logits_row_max(float* row_max, const float* logits, int N, ShardParams shard,
                                  cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  logits_row_max_kernel<<<N, kBlock, 0, stream>>>(row_max, logits, shard);
  return cudaGetLastError();
}

cudaError_t launch_softmax_stats(float* stats, const float* logits, const float* row_max,
                                 const int* targets, int N, ShardParams shard, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  softmax_stats_kernel<<<N, kBlock, 0, stream>>>(stats, logits, row_max, targets, N, shard);
  return cudaGetLastError();
}

cudaError_t launch_crossentropy_losses(float* losses, const float* stats, const float* row_max, int N,
                                       cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  crossentropy_losses_kernel<<<(N + 255) / 256, 256, 0, stream>>>(losses, stats, row_max, N);
  return cudaGetLastError();
}

cudaError_t launch_crossentropy_backward_inplace(float* logits, const float* row_max, const float* stats,
                                                 const int* targets, float dloss, int N,
                                                 ShardParams shard, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  crossentropy_backward_kernel<<<N, kBlock, 0, stream>>>(logits, row_max, stats, targets, dloss, shard);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
