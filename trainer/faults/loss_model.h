// loss_model.h — which chunks of a payload a lossy link drops: Bernoulli or Gilbert–Elliott.
//
// Is: a per-rank, seeded chunk-loss process. Bernoulli loses each chunk independently with
// probability p. Gilbert–Elliott is a two-state Markov chain (good/bad) stepped once per chunk,
// losing with loss_good or loss_bad in the current state: bursty loss as on a flaky link.
// Is not: the payload surgery (fault_injector.cpp zeroes the chunks this says are lost).
#pragma once

#include <cstdint>
#include <random>

#include "fault_spec.h"

namespace gpt2 {

class LossModelState {
 public:
  LossModelState(const FaultSpec& spec, int rank);
  // Steps the process by one chunk; true when that chunk is lost.
  bool next_chunk_lost();
  bool in_bad_state() const { return bad_; }

 private:
  bool draw(double p) { return p > 0 && uniform_(rng_) < p; }

  FaultSpec spec_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  bool bad_ = false;
};

}  // namespace gpt2
