// cuda_event_completion.cpp — cudaEventRecord at creation, cudaEventQuery when polled.
#include "rankscope/probe/cuda_event_completion.h"

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace rankscope::probe {
namespace {

class CudaEventCompletion final : public CompletionSource {
 public:
  explicit CudaEventCompletion(cudaEvent_t event) : event_(event) {}
  ~CudaEventCompletion() override { cudaEventDestroy(event_); }

  bool poll_done() override {
    cudaError_t r = cudaEventQuery(event_);
    if (r == cudaErrorNotReady) return false;
    failed_ = r != cudaSuccess;  // a sticky CUDA error: the collective will never finish
    return true;
  }
  bool failed() const override { return failed_; }

 private:
  cudaEvent_t event_;
  bool failed_ = false;
};

}  // namespace

Result<std::unique_ptr<CompletionSource>> make_cuda_event_completion(CUstream_st* stream) {
  cudaEvent_t event = nullptr;
  cudaError_t r = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (r != cudaSuccess) return internal_error(fmt::format("cudaEventCreateWithFlags: {}", cudaGetErrorString(r)));
  r = cudaEventRecord(event, stream);
  if (r != cudaSuccess) {
    cudaEventDestroy(event);
    return internal_error(fmt::format("cudaEventRecord: {}", cudaGetErrorString(r)));
  }
  return std::unique_ptr<CompletionSource>(std::make_unique<CudaEventCompletion>(event));
}

}  // namespace rankscope::probe
