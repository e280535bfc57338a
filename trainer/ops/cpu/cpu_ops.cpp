// cpu_ops.cpp — memory of the CPU backend (64-byte aligned host buffers) and make_cpu_ops().
// Is not: any op; those are one per file next to this one.
#include "ops/cpu/cpu_ops.h"

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "ops/cpu/cpu_ops_impl.h"

namespace gpt2 {
namespace cpu {

void* CpuOps::alloc(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  std::lock_guard<std::mutex> lock(allocations_mutex_);
  allocation_sizes_[p] = rounded;
  stats_.in_use += rounded;
  if (stats_.in_use > stats_.peak) stats_.peak = stats_.in_use;
  return p;
}
void CpuOps::release(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(allocations_mutex_);
    auto it = allocation_sizes_.find(ptr);
    if (it != allocation_sizes_.end()) {
      stats_.in_use -= it->second;
      allocation_sizes_.erase(it);
    }
  }
  std::free(ptr);
}
Ops::AllocationStats CpuOps::allocation_stats() const {
  std::lock_guard<std::mutex> lock(allocations_mutex_);
  return stats_;
}
void CpuOps::fill_zero(void* ptr, size_t bytes) { std::memset(ptr, 0, bytes); }
void CpuOps::copy_from_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuOps::copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuOps::copy(void* dst, const void* src, size_t bytes) { std::memmove(dst, src, bytes); }

}  // namespace cpu

std::unique_ptr<Ops> make_cpu_ops() {
  // One thread pool: OpenMP splits every GEMM into per-thread sgemm calls (matmul.cpp,
  // attention.cpp), so OpenBLAS's own pthreads would only oversubscribe the cores. This setting is
  // process-wide; nothing else in the trainer calls BLAS.
  openblas_set_num_threads(1);
  return std::make_unique<cpu::CpuOps>();
}

}  // namespace gpt2
