// weight_init.cpp — splitmix64 streams and Box-Muller normals for GPT-2's initialisation.
#include "model/weight_init.h"

#include <cmath>
#include <string_view>

namespace gpt2 {

namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so log() below is finite.
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t state_;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

void init_full_param(std::span<float> full, const ParamInfo& info, int param_index,
                     const ModelConfig& config, uint64_t seed) {
  const std::string_view name = info.name;
  if (info.full_shape.size() == 1) {
    // LayerNorm weights are 1, every bias and LayerNorm bias 0.
    const float value = (ends_with(name, "ln_1.weight") || ends_with(name, "ln_2.weight") ||
                         name == "ln_f.weight") ? 1.0f : 0.0f;
    for (float& x : full) x = value;
    return;
  }
  double std_dev = 0.02;
  if (ends_with(name, "c_proj.weight")) std_dev = 0.02 / std::sqrt(2.0 * config.num_layers);
  SplitMix64 rng(seed * 0x100000001B3ull + static_cast<uint64_t>(param_index) + 1);
  size_t limit = full.size();
  if (param_index == kParamWte) {
    limit = static_cast<size_t>(config.vocab_size) * config.channels;  // padding rows stay 0
    if (limit > full.size()) limit = full.size();
  }
  for (size_t i = 0; i < limit; i += 2) {
    // Box-Muller: two normals per pair of uniforms.
    const double r = std::sqrt(-2.0 * std::log(rng.uniform()));
    const double theta = 2.0 * M_PI * rng.uniform();
    full[i] = static_cast<float>(std_dev * r * std::cos(theta));
    if (i + 1 < limit) full[i + 1] = static_cast<float>(std_dev * r * std::sin(theta));
  }
  for (size_t i = limit; i < full.size(); i++) full[i] = 0.0f;
}

}  // namespace gpt2
