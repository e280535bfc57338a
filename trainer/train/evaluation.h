// evaluation.h — validation loss and text sampling with the training model.
//
// Is: validation (--val-every): the mean loss of the first N val micro-batches of each DP rank,
// averaged over the DP group — forward only, no gradients; sampling (--sample): autoregressive
// top-k generation from "<|endoftext|>" (or id 0 when the vocabulary is not GPT-2's), seeded. Under
// TP every rank of the group runs the same forward; each step's logit row is all-gathered over
// the TP group and every TP rank draws the same token from the same seed.
// Is not: a serving path (the model keeps its training (B,T) shape; generation re-runs the window).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "data/data_loader.h"
#include "model/gpt2.h"

namespace gpt2 {

// Collective over the model's TP group and `dp`. loader is rewound to its start first.
rankscope::Result<float> validation_loss(GPT2& model, DataLoader& loader, int batches, Communicator& dp);

struct SampleOptions {
  int tokens = 0;
  int top_k = 40;
  uint64_t seed = 0;
  int start_token = 0;
};
// Collective over the model's TP group (tp may be null at TP=1). Returns the generated ids.
rankscope::Result<std::vector<int>> sample_tokens(GPT2& model, Ops& ops, Communicator* tp,
                                                  const SampleOptions& options);

}  // namespace gpt2
