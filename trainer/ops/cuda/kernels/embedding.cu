// embedding.cu — kernels of the vocab-parallel token embedding (lookup, backward) and the position add.
//
// Is: kernels and their launch wrappers only (design rule 4). The shard masks are computed per token
// on the GPU (shard_row: arithmetic, no branch), the owned-token count with integer atomics (exact
// in any order). The backward is deterministic: no float atomics. Tokens are stably radix-sorted by
// local row (CUB), and the block at the head of each run of equal rows sums that run's dout rows in
// token order before one += into dwte. Foreign tokens sort to a sentinel key and are skipped.
// Is not: the all-reduce over the TP group (the model does it) or the position embedding's sharding.
#include <cub/device/device_radix_sort.cuh>

#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/element_type.cuh"

namespace gpt2::cuda {
namespace {

// grid: N blocks (one token each); threads stride over C.
template <class Act>
__global__ void embedding_lookup_kernel(Act* out, int* owned_count, const int* ids,
                                        const float* wte_local, int C, ShardParams shard) {
  const int n = blockIdx.x;
  const DeviceShardRow sr = shard_row(ids[n], shard);
  const float f = static_cast<float>(sr.owned);
  const float* w = wte_local + static_cast<size_t>(sr.row) * C;
  Act* o = out + static_cast<size_t>(n) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) store_f32(o + c, f * w[c]);
  if (threadIdx.x == 0 && sr.owned) atomicAdd(owned_count, 1);
}

// out (B,T,C) += wpe (maxT,C)[t]; grid-stride over B*T*C.
template <class Act>
__global__ void add_position_kernel(Act* out, const float* wpe, size_t total, int T, int C) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t bt = i / C;
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(bt % T);
    store_f32(out + i, load_f32(out + i) + wpe[static_cast<size_t>(t) * C + c]);
  }
}

// dwpe (t,c) += sum_b dout (b,t,c), b in order; one thread per (t,c).
template <class Act>
__global__ void position_backward_kernel(float* dwpe, const Act* dout, int B, int T, int C) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t TC = static_cast<size_t>(T) * C;
  if (i >= TC) return;
  float acc = 0.0f;
  for (int b = 0; b < B; b++) acc += load_f32(dout + b * TC + i);
  dwpe[i] += acc;
}

// keys (N) = local row when owned else Vl (sorts last, skipped); vals (N) = token index.
__global__ void sort_keys_kernel(int* keys, int* vals, const int* ids, int N, ShardParams shard) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const DeviceShardRow sr = shard_row(ids[n], shard);
  keys[n] = sr.owned ? sr.row : shard.local_rows;
  vals[n] = n;
}

// grid: N blocks, one per sorted position; only the head of each run of equal keys works.
// dwte (key, c) += sum over the run of dout (vals[j], c), j in sorted (= token) order.
template <class Act>
__global__ void row_runs_accumulate_kernel(float* dwte_local, const Act* dout, const int* keys,
                                           const int* vals, int N, int C, int sentinel) {
  const int i = blockIdx.x;
  const int key = keys[i];
  if (key == sentinel || (i > 0 && keys[i - 1] == key)) return;
  float* w = dwte_local + static_cast<size_t>(key) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = i; j < N && keys[j] == key; j++) acc += load_f32(dout + static_cast<size_t>(vals[j]) * C + c);
    w[c] += acc;
  }
}

int key_bits(int local_rows) {  // keys are in [0, local_rows]
  int bits = 1;
  while ((1LL << bits) <= local_rows) bits++;
  return bits;
}

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

}  // namespace

namespace {
template <class Act>
cudaError_t embedding_lookup(Act* out, int* owned_count, const int* ids, const float* wte_local,
                                    int N, int C, ShardParams shard, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(owned_count, 0, sizeof(int), stream);
  if (e != cudaSuccess) return e;
  if (N == 0) return cudaSuccess;
  embedding_lookup_kernel<<<N, 256, 0, stream>>>(out, owned_count, ids, wte_local, C, shard);
  return cudaGetLastError();
}

template <class Act>
cudaError_t add_position(Act* out, const float* wpe, int B, int T, int C, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(B) * T * C;
  if (total == 0) return cudaSuccess;
  add_position_kernel<<<grid_for(total, 256), 256, 0, stream>>>(out, wpe, total, T, C);
  return cudaGetLastError();
}
}  // namespace

size_t embedding_backward_scratch_bytes(int N, int local_rows) {
  size_t cub_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, static_cast<const int*>(nullptr),
                                  static_cast<int*>(nullptr), static_cast<const int*>(nullptr),
                                  static_cast<int*>(nullptr), N, 0, key_bits(local_rows));
  return 4 * align256(sizeof(int) * static_cast<size_t>(N)) + align256(cub_bytes);
}

namespace {
template <class Act>
cudaError_t embedding_backward(float* dwte_local, float* dwpe, const Act* dout, const int* ids, int B, int T,
                               int C, ShardParams shard, void* scratch, size_t scratch_bytes,
                               cudaStream_t stream) {
  const int N = B * T;
  if (N == 0) return cudaSuccess;
  const size_t TC = static_cast<size_t>(T) * C;
  position_backward_kernel<<<grid_for(TC, 256), 256, 0, stream>>>(dwpe, dout, B, T, C);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;

  const size_t slot = align256(sizeof(int) * static_cast<size_t>(N));
  if (scratch_bytes < embedding_backward_scratch_bytes(N, shard.local_rows)) return cudaErrorInvalidValue;
  char* base = static_cast<char*>(scratch);
  int* keys_in = reinterpret_cast<int*>(base);
  int* keys_out = reinterpret_cast<int*>(base + slot);
  int* vals_in = reinterpret_cast<int*>(base + 2 * slot);
  int* vals_out = reinterpret_cast<int*>(base + 3 * slot);
  void* cub_temp = base + 4 * slot;
  size_t cub_bytes = scratch_bytes - 4 * slot;

  sort_keys_kernel<<<(N + 255) / 256, 256, 0, stream>>>(keys_in, vals_in, ids, N, shard);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // Radix sort is stable: equal rows keep token order, which fixes the order of the additions.
  e = cub::DeviceRadixSort::SortPairs(cub_temp, cub_bytes, keys_in, keys_out, vals_in, vals_out, N, 0,
                                      key_bits(shard.local_rows), stream);
  if (e != cudaSuccess) return e;
  const int threads = C < 256 ? ((C + 31) / 32) * 32 : 256;
  row_runs_accumulate_kernel<<<N, threads, 0, stream>>>(dwte_local, dout, keys_out, vals_out, N, C,
                                                        shard.local_rows);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_embedding_lookup(float* out, int* owned_count, const int* ids, const float* wte_local, int N,
                                    int C, ShardParams shard, cudaStream_t stream) {
  return embedding_lookup(out, owned_count, ids, wte_local, N, C, shard, stream);
}
cudaError_t launch_embedding_lookup(__nv_bfloat16* out, int* owned_count, const int* ids, const float* wte_local,
                                    int N, int C, ShardParams shard, cudaStream_t stream) {
  return embedding_lookup(out, owned_count, ids, wte_local, N, C, shard, stream);
}
cudaError_t launch_add_position(float* out, const float* wpe, int B, int T, int C, cudaStream_t stream) {
  return add_position(out, wpe, B, T, C, stream);
}
cudaError_t launch_add_position(__nv_bfloat16* out, const float* wpe, int B, int T, int C, cudaStream_t stream) {
  return add_position(out, wpe, B, T, C, stream);
}
cudaError_t launch_embedding_backward(float* dwte_local, float* dwpe, const float* dout, const int* ids, int B,
                                      int T, int C, ShardParams shard, void* scratch, size_t scratch_bytes,
                                      cudaStream_t stream) {
  return embedding_backward(dwte_local, dwpe, dout, ids, B, T, C, shard, scratch, scratch_bytes, stream);
}
cudaError_t launch_embedding_backward(float* dwte_local, float* dwpe, const __nv_bfloat16* dout, const int* ids,
                                      int B, int T, int C, ShardParams shard, void* scratch,
                                      size_t scratch_bytes, cudaStream_t stream) {
  return embedding_backward(dwte_local, dwpe, dout, ids, B, T, C, shard, scratch, scratch_bytes, stream);
}

}  // namespace gpt2::cuda
