// weight_init.h — GPT-2's initial weights, generated per full (TP=1) tensor from one seed.
//
// Is: a deterministic generator: every parameter has its own stream (seed, parameter index), so a
// tensor's values do not depend on the TP size, on Vp or on the order ranks ask for them; the model
// generates each full tensor and keeps its slice. Values: weights N(0, 0.02), c_proj weights
// N(0, 0.02/sqrt(2L)) (GPT-2's scaled residual init), LayerNorm weights 1, biases 0, wte rows of
// padding ids (>= V) 0.
// Is not: bit-compatible with PyTorch's or llm.c's initialisation (use --init-from to match those).
#pragma once

#include <cstdint>
#include <span>

#include "model/config.h"
#include "model/parameters.h"

namespace gpt2 {

// full (numel of info.full_shape) = initial values of parameter `param_index` for `config`.
void init_full_param(std::span<float> full, const ParamInfo& info, int param_index,
                     const ModelConfig& config, uint64_t seed);

}  // namespace gpt2
