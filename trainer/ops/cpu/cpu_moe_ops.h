// cpu_moe_ops.h — the CPU backend of gpt2::MoeOps (fp32, OpenMP over rows; the numerical oracle).
//
// Is: the factory and the class declaration; the ops live in moe_router.cpp (softmax, top-k,
// gates and their backward) and moe_rows.cpp (gathers, scatters, combine). Buffers are host memory,
// so the host-side index vectors of model/moe_dispatch.h are used directly.
// Is not: the dense Ops (cpu_ops.h).
#pragma once

#include <memory>

#include "model/moe_ops.h"

namespace gpt2 {

namespace cpu {

class CpuMoeOps final : public MoeOps {
 public:
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
};

}  // namespace cpu

inline std::unique_ptr<MoeOps> make_cpu_moe_ops() { return std::make_unique<cpu::CpuMoeOps>(); }

}  // namespace gpt2
