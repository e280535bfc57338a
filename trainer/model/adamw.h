// adamw.h — AdamW over a ParameterSet, and the global gradient norm / clipping helpers.
//
// Is: AdamW (Loshchilov & Hutter) with bias correction and decoupled weight decay applied to 2-D
// weights only (ParamInfo::weight_decay); first and second moments per local (TP-sliced) element,
// exposed so the trainer can checkpoint them per rank. Gradient clipping by global L2 norm: under
// TP the sharded parameters' squares are summed over the TP group (one all-reduce) and the
// replicated ones counted once.
// Is not: the LR schedule (the trainer passes lr each step) or DP gradient averaging (DDP does
// that before the optimizer, so every DP rank computes the same norm).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "model/ops.h"
#include "model/parameters.h"

namespace gpt2 {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;  // llm.c's and PyTorch's default
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

class AdamW {
 public:
  // `params` and `ops` must outlive the optimizer. Moments start at zero.
  AdamW(ParameterSet& params, Ops& ops, const AdamWConfig& config);
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // One update of every parameter from its current gradient, at learning rate lr.
  void step(float lr);
  int64_t step_count() const { return t_; }
  void set_step_count(int64_t t) { t_ = t; }  // when restoring a checkpoint
  const AdamWConfig& config() const { return config_; }

  // Moments in backend memory, total_numel() floats each, same layout as params().
  float* m() { return m_; }
  float* v() { return v_; }

 private:
  ParameterSet& params_;
  Ops& ops_;
  AdamWConfig config_;
  float* m_ = nullptr;
  float* v_ = nullptr;
  int64_t t_ = 0;
  std::vector<Ops::AdamWSegment> segments_;  // one per parameter tensor, built at the first step
};

// Global L2 norm of all gradients of the model (every TP rank gets the same value). tp_comm may be
// null when tp_size == 1. Collective on tp_comm. With expert parallelism (ep_size > 1) each EP
// rank holds different experts: their squares are summed over `ep_comm` (collective on it too), so
// every rank of the job clips by the same norm.
Result<float> global_grad_norm(const ParameterSet& params, Ops& ops, Communicator* tp_comm,
                               Communicator* ep_comm = nullptr);
// Scales all gradients by max_norm / norm when norm > max_norm; returns the factor applied (1 if none).
float clip_grads_to_norm(ParameterSet& params, Ops& ops, float norm, float max_norm);

}  // namespace gpt2
