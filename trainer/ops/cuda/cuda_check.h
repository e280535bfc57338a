// cuda_check.h — CUDA and cuBLASLt return codes as rankscope::Status, with a breadcrumb.
//
// Is: NCCL's check-macro idea for this backend: RS_CUDA_CHECK(cudaMalloc(...)) returns from the
// enclosing Status/Result function with "cudaMalloc(...): out of memory (cudaErrorMemoryAllocation)
// (at cuda_ops.cpp:52)". Is not: public — it includes CUDA headers and is seen only by the
// gpt2_ops_cuda target's .cpp files.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "rankscope/format/status.h"

namespace gpt2::cuda {

// Ok for cudaSuccess; otherwise kInternal naming the call, the error string and the error name
// (kOutOfMemory for cudaErrorMemoryAllocation and CUBLAS_STATUS_ALLOC_FAILED: a setting to change,
// not a bug, and gpt2-train exits 2 for it).
rankscope::Status cuda_status(cudaError_t error, const char* what);
rankscope::Status cublas_status(cublasStatus_t status, const char* what);

}  // namespace gpt2::cuda

#define RS_CUDA_CHECK(expr) RS_RETURN_IF_ERROR(::gpt2::cuda::cuda_status((expr), #expr))
#define RS_CUBLAS_CHECK(expr) RS_RETURN_IF_ERROR(::gpt2::cuda::cublas_status((expr), #expr))
