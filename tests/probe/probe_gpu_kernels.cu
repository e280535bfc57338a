// probe_gpu_kernels.cu — kernels for the probe's GPU test and their launch wrappers, nothing else.
#include <cuda_runtime.h>

namespace rankscope::probe::testing {

// Busy-waits about `cycles` GPU clock cycles, so a "collective" stays in flight for a while.
__global__ void rankscope_test_spin_kernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

cudaError_t launch_spin_kernel(cudaStream_t stream, long long cycles) {
  rankscope_test_spin_kernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

// The spin kernel's host-side handle, for launches through the driver API (cudaGetFuncBySymbol).
const void* spin_kernel_symbol() { return reinterpret_cast<const void*>(&rankscope_test_spin_kernel); }

}  // namespace rankscope::probe::testing
