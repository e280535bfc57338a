// reduce.cu — whole-buffer sums in double (gradient norm, mean loss), deterministic.
//
// Is: kernels and the launch wrapper. A fixed grid of kPartials blocks accumulates in double over a
// grid-stride loop, then one block adds the partials in order: the same bits on every run, whatever
// the scheduling. Is not: a general reduction library.
#include "ops/cuda/kernels/device_util.cuh"

namespace gpt2::cuda {
namespace {

constexpr int kPartials = 256;
constexpr int kBlock = 256;

// partial (kPartials) = per-block sums of x (or x^2).
__global__ void sum_partials_kernel(double* partial, const float* x, size_t n, bool squares) {
  __shared__ double shared[32];
  double acc = 0.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    acc += squares ? v * v : v;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// *out = sum of partial (kPartials); one block of kPartials threads.
__global__ void sum_final_kernel(double* out, const double* partial) {
  __shared__ double shared[32];
  const double total = block_sum(partial[threadIdx.x], shared);
  if (threadIdx.x == 0) *out = total;
}

}  // namespace

size_t reduce_scratch_doubles() { return kPartials; }

cudaError_t launch_sum(double* out, const float* x, size_t n, bool squares, double* scratch,
                       cudaStream_t stream) {
  sum_partials_kernel<<<kPartials, kBlock, 0, stream>>>(scratch, x, n, squares);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  sum_final_kernel<<<1, kPartials, 0, stream>>>(out, scratch);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
