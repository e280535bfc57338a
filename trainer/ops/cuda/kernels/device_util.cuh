// device_util.cuh — device-side helpers shared by the kernels of this folder: warp and block
// reductions, grid sizing, and the branch-free vocabulary-shard ownership test.
// Is not: a launch wrapper; only .cu files include it.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>

#include "ops/cuda/kernels/launch.h"

namespace gpt2::cuda {

constexpr int kWarp = 32;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `shared` holds 32 values. The order of additions is fixed by the thread layout, so the
// result is the same on every run.
template <class T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  T r = lane < warps ? shared[lane] : T(0);
  return warp_sum(r);
}
__device__ inline float block_max(float v, float* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  float r = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(r);
}

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(size_t n, int block, unsigned cap = 65535u * 8u) {
  size_t g = (n + block - 1) / block;
  if (g == 0) g = 1;
  return g > cap ? cap : static_cast<unsigned>(g);
}

// Branch-free ownership of a global token id (mirrors the CPU oracle's shard_row): `owned` is 1
// when this shard holds the id; `row` is its local row, 0 when foreign so a load stays in bounds.
struct DeviceShardRow {
  int row;
  int owned;
};
__device__ __forceinline__ DeviceShardRow shard_row(int id, const ShardParams& s) {
  const int local = s.strided ? id / s.tp_size : id - s.tp_rank * s.local_rows;
  const int owned_strided = (id - local * s.tp_size) == s.tp_rank;
  const int owned_contig = static_cast<unsigned>(local) < static_cast<unsigned>(s.local_rows);
  const int owned = s.strided ? owned_strided : owned_contig;
  return {local * owned, owned};
}

}  // namespace gpt2::cuda
