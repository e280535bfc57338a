// crossentropy.cu — vocab-parallel softmax cross-entropy kernels over this rank's logit columns.
//
// Is: kernels and launch wrappers only, for logits in fp32 or bf16 (loaded to float, all math and
// every reduction in fp32, dlogits stored rounded once). Two paths over the same (N,Vl) logits:
//   unfused (kept for other code and tests): logits_row_max -> all-reduce(max) -> softmax_stats ->
//     one all-reduce(sum) of [sum of exp | target logit] -> crossentropy_losses; backward:
//     crossentropy_backward_inplace.
//   fused (the model's): crossentropy_partials (one read of each row: this shard's max and
//     sum of exp by online softmax, and the target logit) -> one all_gather of those (3N) partials
//     -> crossentropy_combine -> crossentropy_loss_backward_inplace (one read and one write of each
//     row: the losses and, in place, dlogits = (softmax - onehot) * dloss).
// The probabilities are never stored apart from the logits they replace. One block per row for the
// row passes; padded columns (global id >= V) are a suffix of every shard and never enter max or
// sum. Deterministic: fixed-order block reductions, no atomics.
// Is not: the collectives (the model does them through its Communicator).
#include <cuda_bf16.h>

#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/element_type.cuh"

namespace gpt2::cuda {
namespace {

constexpr int kBlock = 512;


// row_max (N) = max over logits (N,Vl) real columns.
template <class E>
__global__ void logits_row_max_kernel(float* row_max, const E* logits, ShardParams shard) {
  __shared__ float shared[32];
  const E* l = logits + static_cast<size_t>(blockIdx.x) * shard.local_rows;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < shard.real_cols; j += blockDim.x) m = fmaxf(m, load_f32(l + j));
  m = block_max(m, shared);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

// stats (2N) = [sum_j exp(l_j - max) | owned(target) * l_target]
template <class E>
__global__ void softmax_stats_kernel(float* stats, const E* logits, const float* row_max,
                                     const int* targets, int N, ShardParams shard) {
  __shared__ float shared[32];
  const int n = blockIdx.x;
  const E* l = logits + static_cast<size_t>(n) * shard.local_rows;
  const float m = row_max[n];
  float s = 0.0f;
  for (int j = threadIdx.x; j < shard.real_cols; j += blockDim.x) s += expf(load_f32(l + j) - m);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) {
    const DeviceShardRow sr = shard_row(targets[n], shard);
    stats[n] = s;
    stats[N + n] = sr.owned ? load_f32(l + sr.row) : 0.0f;  // a select: 0 * NaN is NaN
  }
}

// partials (3N) = [m | s | t]: each thread keeps a running (max, sum of exp against it) over its
// columns (online softmax: the sum is rescaled when the max rises), then the block merges the
// threads' pairs against the block max in a fixed order. A thread with no column has (-inf, 0),
// which adds nothing (its exp(-inf - M) is never taken: s == 0 is skipped).
template <class E>
__global__ void crossentropy_partials_kernel(float* partials, const E* logits, const int* targets, int N,
                                             ShardParams shard) {
  __shared__ float shared[32];
  const int n = blockIdx.x;
  const E* l = logits + static_cast<size_t>(n) * shard.local_rows;
  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x; j < shard.real_cols; j += blockDim.x) {
    const float x = load_f32(l + j);
    if (x > m) {
      s = s * expf(m - x) + 1.0f;  // expf(-inf) = 0 on the first column
      m = x;
    } else {
      s += expf(x - m);
    }
  }
  const float block_m = block_max(m, shared);
  const float scaled = s > 0.0f ? s * expf(m - block_m) : 0.0f;
  const float block_s = block_sum(scaled, shared);
  if (threadIdx.x == 0) {
    const DeviceShardRow sr = shard_row(targets[n], shard);
    partials[n] = block_m;
    partials[N + n] = block_s;
    partials[2 * N + n] = sr.owned ? load_f32(l + sr.row) : 0.0f;  // a select: 0 * NaN is NaN
  }
}

// gathered (tp, 3N) -> row_max (N) = max_r m_r, stats (2N) = [sum_r s_r exp(m_r - M) | sum_r t_r].
// One thread per row, ranks in rank order: the formula of model/crossentropy_combine.h.
__global__ void crossentropy_combine_kernel(float* row_max, float* stats, const float* gathered, int tp_size,
                                            int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const size_t stride = 3 * static_cast<size_t>(N);
  float M = -INFINITY;
  for (int r = 0; r < tp_size; r++) M = fmaxf(M, gathered[r * stride + n]);
  double S = 0.0;  // one thread per row: double costs nothing here and rounds S once
  float target = 0.0f;
  for (int r = 0; r < tp_size; r++) {
    const float* p = gathered + r * stride;
    if (p[N + n] > 0.0f) S += p[N + n] * exp(static_cast<double>(p[n]) - M);
    target += p[2 * N + n];
  }
  row_max[n] = M;
  stats[n] = static_cast<float>(S);
  stats[N + n] = target;
}

// losses (N) = log(sum) + max - target_logit
__global__ void crossentropy_losses_kernel(float* losses, const float* stats, const float* row_max, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) losses[n] = logf(stats[n]) + row_max[n] - stats[N + n];
}

// logits (N,Vl) <- (exp(l - max) / sum - onehot) * dloss, columns >= real_cols <- 0; and, when
// `losses` is not null, losses[n] = log(sum) + max - target logit. Each element is read once and
// written once (the one-hot term is folded into the target's own write: one rounding in bf16).
template <class E>
__global__ void crossentropy_backward_kernel(float* losses, E* logits, const float* row_max, const float* stats,
                                             const int* targets, float dloss, int N, ShardParams shard) {
  const int n = blockIdx.x;
  E* l = logits + static_cast<size_t>(n) * shard.local_rows;
  const float m = row_max[n];
  const float inv = 1.0f / stats[n];
  const DeviceShardRow sr = shard_row(targets[n], shard);
  const int target_col = sr.owned ? sr.row : -1;
  if (losses != nullptr && threadIdx.x == 0) losses[n] = logf(stats[n]) + m - stats[N + n];
  for (int j = threadIdx.x; j < shard.local_rows; j += blockDim.x) {
    float v = 0.0f;
    if (j < shard.real_cols) {
      v = expf(load_f32(l + j) - m) * inv * dloss;
      if (j == target_col) v -= dloss;
    }
    store_f32(l + j, v);
  }
}

template <class E>
cudaError_t row_max_impl(float* row_max, const E* logits, int N, ShardParams shard, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  logits_row_max_kernel<E><<<N, kBlock, 0, stream>>>(row_max, logits, shard);
  return cudaGetLastError();
}

template <class E>
cudaError_t softmax_stats_impl(float* stats, const E* logits, const float* row_max, const int* targets, int N,
                               ShardParams shard, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  softmax_stats_kernel<E><<<N, kBlock, 0, stream>>>(stats, logits, row_max, targets, N, shard);
  return cudaGetLastError();
}

template <class E>
cudaError_t partials_impl(float* partials, const E* logits, const int* targets, int N, ShardParams shard,
                          cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  crossentropy_partials_kernel<E><<<N, kBlock, 0, stream>>>(partials, logits, targets, N, shard);
  return cudaGetLastError();
}

template <class E>
cudaError_t backward_impl(float* losses, E* logits, const float* row_max, const float* stats, const int* targets,
                          float dloss, int N, ShardParams shard, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  crossentropy_backward_kernel<E><<<N, kBlock, 0, stream>>>(losses, logits, row_max, stats, targets, dloss, N,
                                                            shard);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_logits_row_max(float* row_max, const float* logits, int N, ShardParams shard,
                                  cudaStream_t stream) {
  return row_max_impl(row_max, logits, N, shard, stream);
}
cudaError_t launch_logits_row_max(float* row_max, const __nv_bfloat16* logits, int N, ShardParams shard,
                                  cudaStream_t stream) {
  return row_max_impl(row_max, logits, N, shard, stream);
}

cudaError_t launch_softmax_stats(float* stats, const float* logits, const float* row_max,
                                 const int* targets, int N, ShardParams shard, cudaStream_t stream) {
  return softmax_stats_impl(stats, logits, row_max, targets, N, shard, stream);
}
cudaError_t launch_softmax_stats(float* stats, const __nv_bfloat16* logits, const float* row_max,
                                 const int* targets, int N, ShardParams shard, cudaStream_t stream) {
  return softmax_stats_impl(stats, logits, row_max, targets, N, shard, stream);
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
  return backward_impl(nullptr, logits, row_max, stats, targets, dloss, N, shard, stream);
}
cudaError_t launch_crossentropy_backward_inplace(__nv_bfloat16* logits, const float* row_max, const float* stats,
                                                 const int* targets, float dloss, int N,
                                                 ShardParams shard, cudaStream_t stream) {
  return backward_impl(nullptr, logits, row_max, stats, targets, dloss, N, shard, stream);
}

cudaError_t launch_crossentropy_partials(float* partials, const float* logits, const int* targets, int N,
                                         ShardParams shard, cudaStream_t stream) {
  return partials_impl(partials, logits, targets, N, shard, stream);
}
cudaError_t launch_crossentropy_partials(float* partials, const __nv_bfloat16* logits, const int* targets,
                                         int N, ShardParams shard, cudaStream_t stream) {
  return partials_impl(partials, logits, targets, N, shard, stream);
}

cudaError_t launch_crossentropy_combine(float* row_max, float* stats, const float* gathered, int tp_size, int N,
                                        cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  crossentropy_combine_kernel<<<(N + 255) / 256, 256, 0, stream>>>(row_max, stats, gathered, tp_size, N);
  return cudaGetLastError();
}

cudaError_t launch_crossentropy_loss_backward_inplace(float* losses, float* logits, const float* row_max,
                                                      const float* stats, const int* targets, float dloss,
                                                      int N, ShardParams shard, cudaStream_t stream) {
  return backward_impl(losses, logits, row_max, stats, targets, dloss, N, shard, stream);
}
cudaError_t launch_crossentropy_loss_backward_inplace(float* losses, __nv_bfloat16* logits, const float* row_max,
                                                      const float* stats, const int* targets, float dloss,
                                                      int N, ShardParams shard, cudaStream_t stream) {
  return backward_impl(losses, logits, row_max, stats, targets, dloss, N, shard, stream);
}

}  // namespace gpt2::cuda
