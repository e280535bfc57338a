// moe.cu — the MoE MLP's element loops on the GPU (the CUDA side of model/moe_ops.h): router
// softmax/top-k/gates and backward, row gathers/scatters, slot backward, gate-weighted combine.
// Is: kernels and launch wrappers only, one thread block per row, fp32 like the CPU oracle.
// Is not: the index arithmetic (host, model/moe_dispatch.h) or the expert GEMMs (cuBLASLt).
#include "ops/cuda/kernels/device_util.cuh"
#include "ops/moe_router_row.h"

namespace gpt2::cuda {
namespace {

// One thread per token row: E and K are small (tens), so the serial per-row math of
// moe_router_row.h is cheap and is exactly the CPU oracle's.
__global__ void router_forward_kernel(float* probs, int32_t* expert, float* gate, const float* logits,
                                      const float* bias, int N, int E, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  moe_row::router_forward(probs + static_cast<size_t>(n) * E, expert + static_cast<size_t>(n) * K,
                          gate + static_cast<size_t>(n) * K, logits + static_cast<size_t>(n) * E, bias, E, K);
}

__global__ void router_backward_kernel(float* dlogits, const float* probs, const int32_t* expert,
                                       const float* gate, const float* dgate, const float* aux_dprob,
                                       int N, int E, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  moe_row::router_backward(dlogits + static_cast<size_t>(n) * E, probs + static_cast<size_t>(n) * E,
                           expert + static_cast<size_t>(n) * K, gate + static_cast<size_t>(n) * K,
                           dgate + static_cast<size_t>(n) * K, aux_dprob, E, K);
}

// One thread per expert column, rows summed in order (deterministic, like the CPU).
__global__ void probs_column_sum_kernel(float* prob_sum, const float* probs, int N, int E) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  float s = 0.0f;
  for (int n = 0; n < N; n++) s += probs[static_cast<size_t>(n) * E + e];
  prob_sum[e] = s;
}

// Row copies: block i moves one row of C floats.
__global__ void gather_rows_kernel(float* out, const float* in, const int32_t* src_row, int C) {
  const float* s = in + static_cast<size_t>(src_row[blockIdx.x]) * C;
  float* d = out + static_cast<size_t>(blockIdx.x) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) d[c] = s[c];
}

__global__ void scatter_rows_kernel(float* out, const float* in, const int32_t* dst_row, int C) {
  const float* s = in + static_cast<size_t>(blockIdx.x) * C;
  float* d = out + static_cast<size_t>(dst_row[blockIdx.x]) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) d[c] = s[c];
}

// Block n owns token n: no two blocks write one output row.
__global__ void slot_rows_backward_kernel(float* dinp, const float* drows, const int32_t* row_of_slot,
                                          int K, int C) {
  const int n = blockIdx.x;
  float* d = dinp + static_cast<size_t>(n) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = d[c];
    for (int k = 0; k < K; k++) {
      const int32_t row = row_of_slot[static_cast<size_t>(n) * K + k];
      if (row >= 0) acc += drows[static_cast<size_t>(row) * C + c];
    }
    d[c] = acc;
  }
}

__global__ void combine_forward_kernel(float* out, const float* rows, const float* gate,
                                       const int32_t* row_of_slot, int K, int C) {
  const int n = blockIdx.x;
  float* o = out + static_cast<size_t>(n) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
      const int32_t row = row_of_slot[static_cast<size_t>(n) * K + k];
      if (row >= 0) acc += gate[static_cast<size_t>(n) * K + k] * rows[static_cast<size_t>(row) * C + c];
    }
    o[c] = acc;
  }
}

// Block n: drows of its kept slots, and dgate by a block reduction of dout[n] . rows[row].
__global__ void combine_backward_kernel(float* drows, float* dgate, const float* dout, const float* rows,
                                        const float* gate, const int32_t* row_of_slot, int K, int C) {
  __shared__ float partial[256];
  const int n = blockIdx.x;
  const float* d = dout + static_cast<size_t>(n) * C;
  for (int k = 0; k < K; k++) {
    const size_t slot = static_cast<size_t>(n) * K + k;
    const int32_t row = row_of_slot[slot];
    if (row < 0) {
      if (threadIdx.x == 0) dgate[slot] = 0.0f;
      continue;
    }
    const float g = gate[slot];
    const float* r = rows + static_cast<size_t>(row) * C;
    float* dr = drows + static_cast<size_t>(row) * C;
    float dot = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      dr[c] = g * d[c];
      dot += d[c] * r[c];
    }
    partial[threadIdx.x] = dot;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) dgate[slot] = partial[0];
    __syncthreads();
  }
}

constexpr int kRowThreads = 256;  // combine_backward's reduction assumes a power of two <= 256

}  // namespace

cudaError_t launch_moe_router_forward(float* probs, int32_t* expert, float* gate, const float* logits,
                                      const float* logit_bias, int N, int E, int K, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  router_forward_kernel<<<(N + 127) / 128, 128, 0, stream>>>(probs, expert, gate, logits, logit_bias, N, E, K);
  return cudaGetLastError();
}

cudaError_t launch_moe_router_backward(float* dlogits, const float* probs, const int32_t* expert,
                                       const float* gate, const float* dgate, const float* aux_dprob, int N,
                                       int E, int K, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  router_backward_kernel<<<(N + 127) / 128, 128, 0, stream>>>(dlogits, probs, expert, gate, dgate, aux_dprob,
                                                               N, E, K);
  return cudaGetLastError();
}

cudaError_t launch_moe_probs_column_sum(float* prob_sum, const float* probs, int N, int E, cudaStream_t stream) {
  if (E == 0) return cudaSuccess;
  probs_column_sum_kernel<<<(E + 63) / 64, 64, 0, stream>>>(prob_sum, probs, N, E);
  return cudaGetLastError();
}

cudaError_t launch_moe_gather_rows(float* out, const float* in, const int32_t* src_row, int R, int C,
                                   cudaStream_t stream) {
  if (R == 0) return cudaSuccess;
  gather_rows_kernel<<<R, kRowThreads, 0, stream>>>(out, in, src_row, C);
  return cudaGetLastError();
}

cudaError_t launch_moe_scatter_rows(float* out, const float* in, const int32_t* dst_row, int R, int C,
                                    cudaStream_t stream) {
  if (R == 0) return cudaSuccess;
  scatter_rows_kernel<<<R, kRowThreads, 0, stream>>>(out, in, dst_row, C);
  return cudaGetLastError();
}

cudaError_t launch_moe_slot_rows_backward(float* dinp, const float* drows, const int32_t* row_of_slot, int N,
                                          int K, int C, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  slot_rows_backward_kernel<<<N, kRowThreads, 0, stream>>>(dinp, drows, row_of_slot, K, C);
  return cudaGetLastError();
}

cudaError_t launch_moe_combine_forward(float* out, const float* rows, const float* gate,
                                       const int32_t* row_of_slot, int N, int K, int C, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  combine_forward_kernel<<<N, kRowThreads, 0, stream>>>(out, rows, gate, row_of_slot, K, C);
  return cudaGetLastError();
}

cudaError_t launch_moe_combine_backward(float* drows, float* dgate, const float* dout, const float* rows,
                                        const float* gate, const int32_t* row_of_slot, int N, int K, int C,
                                        cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  combine_backward_kernel<<<N, kRowThreads, 0, stream>>>(drows, dgate, dout, rows, gate, row_of_slot, K, C);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
