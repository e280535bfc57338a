// bias.cu — the bias kernels the GEMMs need beside cuBLASLt: the row-parallel bias add and the
// deterministic bias gradient (column sums).
//
// Is: kernels and launch wrappers only. The forward bias of a GEMM is cuBLASLt's bias epilogue
// (cublaslt_gemm.cpp); this add is for the tensor-parallel case, where the model adds the bias once
// after the all-reduce. Column sums reduce in two fixed-order stages (no float atomics).
// Elements of out and dout are fp32 or bf16 (loaded to float); bias and dbias are fp32.
// Is not: a GEMM.
#include <cuda_bf16.h>

#include "ops/cuda/kernels/device_util.cuh"
#include "ops/cuda/kernels/element_type.cuh"

namespace gpt2::cuda {
namespace {

constexpr int kRowsPerChunk = 64;


// out (N,OC) += bias (OC); grid-stride over N*OC.
template <class T>
__global__ void add_bias_kernel(T* out, const float* bias, size_t total, int OC) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    store_f32(out + i, load_f32(out + i) + bias[i % OC]);
  }
}

// grid (chunks, ceil(OC/blockDim)): partial (chunk, OC) = sum of the chunk's rows of dout (N,OC).
template <class T>
__global__ void column_partials_kernel(float* partial, const T* dout, int N, int OC) {
  const int o = blockIdx.y * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  const int r0 = blockIdx.x * kRowsPerChunk;
  const int r1 = min(r0 + kRowsPerChunk, N);
  float acc = 0.0f;
  for (int r = r0; r < r1; r++) acc += load_f32(dout + static_cast<size_t>(r) * OC + o);
  partial[static_cast<size_t>(blockIdx.x) * OC + o] = acc;
}

// dbias (OC) += sum over chunks of partial (chunks, OC), in chunk order.
__global__ void column_reduce_kernel(float* dbias, const float* partial, int chunks, int OC) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  float acc = 0.0f;
  for (int k = 0; k < chunks; k++) acc += partial[static_cast<size_t>(k) * OC + o];
  dbias[o] += acc;
}

int chunks_for(int N) { return (N + kRowsPerChunk - 1) / kRowsPerChunk; }

template <class T>
cudaError_t add_bias(T* out, const float* bias, int N, int OC, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(N) * OC;
  if (total == 0) return cudaSuccess;
  add_bias_kernel<<<grid_for(total, 256), 256, 0, stream>>>(out, bias, total, OC);
  return cudaGetLastError();
}

template <class T>
cudaError_t column_sums_accumulate(float* dbias, const T* dout, int N, int OC, float* scratch, cudaStream_t stream) {
  if (N == 0 || OC == 0) return cudaSuccess;
  constexpr int kBlock = 256;
  const int chunks = chunks_for(N);
  dim3 grid(chunks, (OC + kBlock - 1) / kBlock);
  column_partials_kernel<<<grid, kBlock, 0, stream>>>(scratch, dout, N, OC);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  column_reduce_kernel<<<(OC + kBlock - 1) / kBlock, kBlock, 0, stream>>>(dbias, scratch, chunks, OC);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_add_bias(float* out, const float* bias, int N, int OC, cudaStream_t stream) {
  return add_bias(out, bias, N, OC, stream);
}
cudaError_t launch_add_bias(__nv_bfloat16* out, const float* bias, int N, int OC, cudaStream_t stream) {
  return add_bias(out, bias, N, OC, stream);
}

size_t column_sums_scratch_floats(int N, int OC) { return static_cast<size_t>(chunks_for(N)) * OC; }

cudaError_t launch_column_sums_accumulate(float* dbias, const float* dout, int N, int OC, float* scratch,
                                          cudaStream_t stream) {
  return column_sums_accumulate(dbias, dout, N, OC, scratch, stream);
}
cudaError_t launch_column_sums_accumulate(float* dbias, const __nv_bfloat16* dout, int N, int OC, float* scratch,
                                          cudaStream_t stream) {
  return column_sums_accumulate(dbias, dout, N, OC, scratch, stream);
}

}  // namespace gpt2::cuda
