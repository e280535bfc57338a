// spin.cu — a kernel that occupies the stream for a given number of GPU clock cycles.
// Is: the device side of the `gpt2-train --inject gpu-stall` fault, which reproduces "a hang in a
// kernel": the host goes on enqueueing while the GPU falls behind. Is not: a sleep on the host.
#include "ops/cuda/kernels/device_util.cuh"

namespace gpt2::cuda {
namespace {

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

cudaError_t launch_spin(long long cycles, cudaStream_t stream) {
  if (cycles <= 0) return cudaSuccess;
  spin_kernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

}  // namespace gpt2::cuda
