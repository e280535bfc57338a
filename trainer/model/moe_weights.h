// moe_weights.h — the tensors of one MoE MLP layer on this rank, as pointers: the router and each
// local expert's GPT-2 MLP weights (weights when const, gradients when not).
// Is: a view over parameters the model owns (gpt2.cpp), shared by the layer (moe_mlp.h) and the
// expert GEMM chain (moe_expert_chain.h). Is not: storage or initialisation.
#pragma once

#include <vector>

namespace gpt2 {

template <class F>
struct MoeTensors {
  F* router = nullptr;                                   // (E,C)
  std::vector<F*> fc_w, fc_b, proj_w, proj_b;            // per local expert: (4C,C) (4C) (C,4C) (C)
};
using MoeWeights = MoeTensors<const float>;
using MoeGrads = MoeTensors<float>;

}  // namespace gpt2
