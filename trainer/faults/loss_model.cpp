// loss_model.cpp — Bernoulli and Gilbert–Elliott chunk loss.
#include "loss_model.h"

namespace gpt2 {

LossModelState::LossModelState(const FaultSpec& spec, int rank)
    : spec_(spec), rng_(spec.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(rank) + 1) {}

bool LossModelState::next_chunk_lost() {
  if (spec_.loss_model == LossModel::kBernoulli) return draw(spec_.p);
  // Loss is drawn in the current state, then the chain moves for the next chunk.
  const bool lost = draw(bad_ ? spec_.loss_bad : spec_.loss_good);
  bad_ = bad_ ? !draw(spec_.p_bg) : draw(spec_.p_gb);
  return lost;
}

}  // namespace gpt2
