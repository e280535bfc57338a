// moe_param_view.h — the flat parameter layout the MoE tests use for one layer, and views of it.
// Is: router (E,C), then per expert fc_w (4C,C), fc_b (4C), proj_w (C,4C), proj_b (C), contiguous;
// shared by the CPU layer tests (moe_mlp_test.cpp) and the GPU ones (tests/gpu/cuda_moe_test.cpp).
// Is not: the model's own layout (model/parameters.h), which the tests need not follow.
#pragma once

#include <cstddef>

#include "model/moe_weights.h"

namespace gpt2::testing {

inline size_t moe_expert_floats(int C) { return size_t(4 * C) * C + 4 * C + size_t(C) * 4 * C + C; }
inline size_t moe_layer_floats(int E, int C) { return size_t(E) * C + size_t(E) * moe_expert_floats(C); }

// The tensors of experts [first, first + count) of a layer of E experts at `base` (F: float or
// const float, P: the pointer's element type).
template <class F, class P>
MoeTensors<F> moe_view(P* base, int E, int C, int first, int count) {
  const size_t H = 4 * size_t(C);
  MoeTensors<F> t;
  t.router = base;
  for (int e = first; e < first + count; e++) {
    P* x = base + size_t(E) * C + size_t(e) * moe_expert_floats(C);
    t.fc_w.push_back(x);
    t.fc_b.push_back(x + H * C);
    t.proj_w.push_back(x + H * C + H);
    t.proj_b.push_back(x + H * C + H + size_t(C) * H);
  }
  return t;
}

}  // namespace gpt2::testing
