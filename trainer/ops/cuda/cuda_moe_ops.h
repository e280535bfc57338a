// cuda_moe_ops.h — CudaMoeOps: the CUDA implementation of gpt2::MoeOps (declarations only).
//
// Is: one method per op that launches the kernels of kernels/moe.cu on the stream of the CudaOps it
// is made from, so MoE ops are ordered with the dense ops of the same step. Buffers (index vectors
// included) are device memory from that CudaOps.
// Is not: public (CUDA headers; the trainer makes one through cuda_moe_backend.h). Each op is
// checked against the CPU oracle by tests/gpu/cuda_moe_test.cpp (label gpu).
#pragma once

#include <cuda_runtime_api.h>

#include "model/moe_ops.h"

namespace gpt2::cuda {

class CudaMoeOps final : public MoeOps {
 public:
  explicit CudaMoeOps(cudaStream_t stream) : stream_(stream) {}

  void router_forward(float* probs, int32_t* expert, float* gate, const float* logits,
                      const float* logit_bias, int N, int E, int K) override;
  void router_backward(float* dlogits, const float* probs, const int32_t* expert, const float* gate,
                       const float* dgate, const float* aux_dprob, int N, int E, int K) override;
  void probs_column_sum(float* prob_sum, const float* probs, int N, int E) override;
  void gather_rows(float* out, const float* in, const int32_t* src_row, int R, int C) override;
  void scatter_rows(float* out, const float* in, const int32_t* dst_row, int R, int C) override;
  void slot_rows_backward(float* dinp, const float* drows, const int32_t* row_of_slot, int N, int K,
                          int C) override;
  void combine_forward(float* out, const float* rows, const float* gate, const int32_t* row_of_slot,
                       int N, int K, int C) override;
  void combine_backward(float* drows, float* dgate, const float* dout, const float* rows,
                        const float* gate, const int32_t* row_of_slot, int N, int K, int C) override;

 private:
  cudaStream_t stream_;
};

}  // namespace gpt2::cuda
