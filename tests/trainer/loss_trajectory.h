// loss_trajectory.h — test support: the losses of a few AdamW steps of a GPT2 on a fixed rotation of
// batches, so two backends or two activation types can be compared step by step.
// Is: deterministic inputs (four batches of token ids in rotation: the loss falls on data the model
// has seen, so a comparison is not between two flat lines). Is not: a trainer (no DDP, no clipping).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "model/adamw.h"
#include "model/gpt2.h"

namespace gpt2::testing {

struct LossTrajectory {
  std::string error;  // empty when every step ran
  std::vector<float> losses;
};

inline LossTrajectory loss_trajectory(Ops& ops, const GPT2::Options& o, int steps, uint64_t seed = 11) {
  LossTrajectory t;
  auto model = GPT2::create(o, ops, nullptr);
  if (!model.ok()) return {model.status().to_string(), {}};
  if (Status s = (*model)->init_weights(seed); !s.ok()) return {s.to_string(), {}};
  AdamW opt((*model)->params(), ops, AdamWConfig{0.9f, 0.95f, 1e-8f, 0.1f});
  const size_t N = static_cast<size_t>(o.batch) * o.seq_len;
  std::vector<int> in(N), tg(N);
  for (int step = 0; step < steps; step++) {
    std::mt19937 rng(1000 + step % 4);
    std::uniform_int_distribution<int> id(0, o.config.vocab_size - 1);
    for (size_t i = 0; i < N; i++) in[i] = id(rng), tg[i] = id(rng);
    (*model)->params().zero_grads();
    auto stats = (*model)->forward(in.data(), tg.data(), nullptr, /*backward_loss_scale=*/1.0f);
    if (!stats.ok()) return {stats.status().to_string(), t.losses};
    t.losses.push_back(stats->loss);
    if (Status s = (*model)->backward(1.0f, {}, nullptr); !s.ok()) return {s.to_string(), t.losses};
    opt.step(3e-4f);
  }
  return t;
}

}  // namespace gpt2::testing
