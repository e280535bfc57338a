// adamw.cpp — AdamW over a ParameterSet and the TP-aware global gradient norm.
#include "model/adamw.h"

#include <cmath>

namespace gpt2 {

AdamW::AdamW(ParameterSet& params, Ops& ops, const AdamWConfig& config)
    : params_(params), ops_(ops), config_(config) {
  m_ = static_cast<float*>(ops_.alloc(params_.total_numel() * sizeof(float)));
  v_ = static_cast<float*>(ops_.alloc(params_.total_numel() * sizeof(float)));
}

AdamW::~AdamW() {
  ops_.release(m_);
  ops_.release(v_);
}

void AdamW::step(float lr) {
  t_++;
  if (segments_.size() != params_.count()) {
    segments_.clear();
    for (const ParamInfo& info : params_.infos()) segments_.push_back({info.offset, info.numel, info.weight_decay});
  }
  ops_.adamw_update_segments(params_.params(), params_.grads(), m_, v_, segments_.data(), segments_.size(), lr,
                             config_.beta1, config_.beta2, config_.eps, config_.weight_decay, t_);
}

Result<float> global_grad_norm(const ParameterSet& params, Ops& ops, Communicator* tp_comm,
                               Communicator* ep_comm) {
  double sharded = 0.0, replicated = 0.0, expert = 0.0;
  for (size_t i = 0; i < params.count(); i++) {
    const ParamInfo& info = params.infos()[i];
    const double s = ops.sum_squares(params.grads() + info.offset, info.numel);
    (info.expert ? expert : info.is_sharded() ? sharded : replicated) += s;
  }
  if (params.ep().ep_size > 1) {
    if (ep_comm == nullptr) {
      return rankscope::invalid_argument("global_grad_norm under expert parallelism needs the EP communicator");
    }
    // Experts are replicated over TP (identical on every TP rank) and disjoint over EP.
    float buf = static_cast<float>(expert);
    RS_RETURN_IF_ERROR(ep_comm->all_reduce(&buf, 1, DataType::kFloat32, ReduceOp::kSum));
    expert = buf;
  }
  replicated += expert;
  if (params.tp().tp_size > 1) {
    if (tp_comm == nullptr) {
      return rankscope::invalid_argument("global_grad_norm under TP needs the TP communicator");
    }
    // Sharded squares sum over the TP group; replicated tensors are identical, counted once.
    float buf = static_cast<float>(sharded);  // fp32: every communicator backend supports it
    RS_RETURN_IF_ERROR(tp_comm->all_reduce(&buf, 1, DataType::kFloat32, ReduceOp::kSum));
    sharded = buf;
  }
  return static_cast<float>(std::sqrt(sharded + replicated));
}

float clip_grads_to_norm(ParameterSet& params, Ops& ops, float norm, float max_norm) {
  if (!(norm > max_norm) || max_norm <= 0.0f) return 1.0f;
  const float factor = max_norm / norm;
  ops.scale(params.grads(), factor, params.total_numel());
  return factor;
}

}  // namespace gpt2
