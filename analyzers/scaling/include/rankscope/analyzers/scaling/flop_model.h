// flop_model.h — what share of a GPT-2 step the attention ranges should take, by FLOP count.
//
// Is: forward FLOPs per token of one transformer block split into its attention range (QKV and
// output projections 8C^2, causal QK^T and AV 2TC on average) and its MLP range (16C^2), plus the
// LM head (2CV). Backward costs about twice forward for every part, so the shares hold for a whole
// step. Is not: a time model; memory traffic and kernel efficiency are ignored.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

namespace rankscope::analyzers {

struct GptShape {
  double layers = 0, channels = 0, vocab = 0;
};

// From run.json's model object ({"layers":..,"channels":..,"vocab_size"|"padded_vocab_size":..});
// nullopt when a field is missing.
std::optional<GptShape> gpt_shape_from_json(const nlohmann::json& model);

// Share of the forward FLOPs spent in forward/block*/attn at sequence length T, in [0, 1].
double attention_flop_share(const GptShape& shape, double T);

}  // namespace rankscope::analyzers
