// cuda_check.cpp — error codes to Status (see cuda_check.h).
#include "ops/cuda/cuda_check.h"

#include <fmt/format.h>

namespace gpt2::cuda {

rankscope::Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return rankscope::Status::ok_status();
  if (error == cudaErrorMemoryAllocation)
    return rankscope::out_of_memory(fmt::format("{}: {} ({})", what, cudaGetErrorString(error), cudaGetErrorName(error)));
  return rankscope::internal_error(
      fmt::format("{}: {} ({})", what, cudaGetErrorString(error), cudaGetErrorName(error)));
}

rankscope::Status cublas_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return rankscope::Status::ok_status();
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    return rankscope::out_of_memory(
        fmt::format("{}: {} ({})", what, cublasLtGetStatusString(status), cublasLtGetStatusName(status)));
  return rankscope::internal_error(
      fmt::format("{}: {} ({})", what, cublasLtGetStatusString(status), cublasLtGetStatusName(status)));
}

}  // namespace gpt2::cuda
