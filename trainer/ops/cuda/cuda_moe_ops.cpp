// cuda_moe_ops.cpp — CudaMoeOps: each MoeOps call is one launch of kernels/moe.cu on the stream.
#include "ops/cuda/cuda_moe_ops.h"

#include "ops/cuda/cuda_ops.h"

namespace gpt2::cuda {

void CudaMoeOps::router_forward(float* probs, int32_t* expert, float* gate, const float* logits,
                                const float* logit_bias, int N, int E, int K) {
  RS_CUDA_OP_MUST(launch_moe_router_forward(probs, expert, gate, logits, logit_bias, N, E, K, stream_));
}
void CudaMoeOps::router_backward(float* dlogits, const float* probs, const int32_t* expert, const float* gate,
                                 const float* dgate, const float* aux_dprob, int N, int E, int K) {
  RS_CUDA_OP_MUST(launch_moe_router_backward(dlogits, probs, expert, gate, dgate, aux_dprob, N, E, K, stream_));
}
void CudaMoeOps::probs_column_sum(float* prob_sum, const float* probs, int N, int E) {
  RS_CUDA_OP_MUST(launch_moe_probs_column_sum(prob_sum, probs, N, E, stream_));
}
void CudaMoeOps::gather_rows(float* out, const float* in, const int32_t* src_row, int R, int C) {
  RS_CUDA_OP_MUST(launch_moe_gather_rows(out, in, src_row, R, C, stream_));
}
void CudaMoeOps::scatter_rows(float* out, const float* in, const int32_t* dst_row, int R, int C) {
  RS_CUDA_OP_MUST(launch_moe_scatter_rows(out, in, dst_row, R, C, stream_));
}
void CudaMoeOps::slot_rows_backward(float* dinp, const float* drows, const int32_t* row_of_slot, int N, int K,
                                    int C) {
  RS_CUDA_OP_MUST(launch_moe_slot_rows_backward(dinp, drows, row_of_slot, N, K, C, stream_));
}
void CudaMoeOps::combine_forward(float* out, const float* rows, const float* gate, const int32_t* row_of_slot,
                                 int N, int K, int C) {
  RS_CUDA_OP_MUST(launch_moe_combine_forward(out, rows, gate, row_of_slot, N, K, C, stream_));
}
void CudaMoeOps::combine_backward(float* drows, float* dgate, const float* dout, const float* rows,
                                  const float* gate, const int32_t* row_of_slot, int N, int K, int C) {
  RS_CUDA_OP_MUST(launch_moe_combine_backward(drows, dgate, dout, rows, gate, row_of_slot, N, K, C, stream_));
}

}  // namespace gpt2::cuda
