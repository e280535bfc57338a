// moe_expert_chain.cpp — the experts' c_fc(+GELU) and c_proj GEMMs block by block, and backward.
#include "moe_expert_chain.h"

namespace gpt2::moe {

void expert_chain_forward(Ops& ops, std::span<const ExpertBlock> blocks, const MoeWeights& w,
                          const ExpertActivations& acts, int C) {
  const size_t H = 4 * static_cast<size_t>(C);
  for (const ExpertBlock& b : blocks) {
    const auto j = static_cast<size_t>(b.expert);
    ops.matmul_gelu_forward(acts.gelu + b.first_row * H, acts.pre + b.first_row * H, acts.x + b.first_row * C,
                            w.fc_w[j], w.fc_b[j], static_cast<int>(b.rows), C, static_cast<int>(H));
  }
  for (const ExpertBlock& b : blocks) {
    const auto j = static_cast<size_t>(b.expert);
    ops.matmul_forward(acts.y + b.first_row * C, acts.gelu + b.first_row * H, w.proj_w[j], w.proj_b[j],
                       static_cast<int>(b.rows), static_cast<int>(H), C);
  }
}

void expert_chain_backward(Ops& ops, std::span<const ExpertBlock> blocks, const MoeWeights& w, MoeGrads& g,
                           const ExpertActivations& acts, const float* dy, float* dh, float* dx, int C) {
  const size_t H = 4 * static_cast<size_t>(C);
  for (const ExpertBlock& b : blocks) {
    const auto j = static_cast<size_t>(b.expert);
    ops.matmul_backward_dgelu(dh + b.first_row * H, g.proj_w[j], g.proj_b[j], dy + b.first_row * C,
                              acts.gelu + b.first_row * H, w.proj_w[j], acts.pre + b.first_row * H,
                              static_cast<int>(b.rows), static_cast<int>(H), C);
  }
  for (const ExpertBlock& b : blocks) {
    const auto j = static_cast<size_t>(b.expert);
    ops.matmul_backward(dx + b.first_row * C, g.fc_w[j], g.fc_b[j], dh + b.first_row * H,
                        acts.x + b.first_row * C, w.fc_w[j], static_cast<int>(b.rows), C, static_cast<int>(H));
  }
}

}  // namespace gpt2::moe
