// flop_model.cpp — see flop_model.h.
#include "rankscope/analyzers/scaling/flop_model.h"

namespace rankscope::analyzers {

std::optional<GptShape> gpt_shape_from_json(const nlohmann::json& model) {
  if (!model.is_object()) return std::nullopt;
  auto number = [&](std::initializer_list<const char*> keys) -> std::optional<double> {
    for (const char* k : keys) {
      if (model.contains(k) && model[k].is_number()) return model[k].get<double>();
    }
    return std::nullopt;
  };
  const auto layers = number({"layers", "num_layers", "n_layer"});
  const auto channels = number({"channels", "n_embd", "d_model"});
  const auto vocab = number({"padded_vocab_size", "vocab_size", "vocab"});
  if (!layers || !channels || !vocab || *layers <= 0 || *channels <= 0) return std::nullopt;
  return GptShape{*layers, *channels, *vocab};
}

double attention_flop_share(const GptShape& s, double T) {
  const double C = s.channels;
  const double attn = 8 * C * C + 2 * T * C;  // per token per layer: projections + causal scores/AV
  const double mlp = 16 * C * C;
  const double total = s.layers * (attn + mlp) + 2 * C * s.vocab;
  return total > 0 ? s.layers * attn / total : 0.0;
}

}  // namespace rankscope::analyzers
