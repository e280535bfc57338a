// moe_mlp.cpp — forward and backward of one MoE MLP layer as Ops/MoeOps calls, the exchange over
// ep{k} and the probe ranges forward|backward/<prefix>/moe/router|dispatch|experts|combine.
#include "moe_mlp.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "model/moe_expert_chain.h"

namespace gpt2 {

using rankscope::probe::ScopedRange;

namespace {

// Backend scratch slots (one grow-only buffer each). Saved ones live from forward to backward.
enum Slot : size_t {
  kLogits, kProbs, kExpert, kGate, kRowOfSlot, kTokenOfRow, kGroupedOfReceived, kSorted, kRecv,
  kXGrouped, kPre, kGelu, kYGrouped, kYRecv, kYSorted, kAuxDprob, kProbSum,
  kDRows, kDGate, kDRecv, kDGrouped, kDH, kDXGrouped, kDXRecv, kDSorted, kDInpRouter, kSlotCount
};
enum Phase { kRouter, kDispatch, kExperts, kCombine };
constexpr const char* kPhaseNames[4] = {"router", "dispatch", "experts", "combine"};

}  // namespace

MoeMlp::MoeMlp(MoeLayerConfig config, moe::ExpertLayout layout, Ops& ops, MoeOps& moe_ops,
               Communicator* ep, int N, int C, std::string range_prefix)
    : cfg_(config), layout_(layout), ops_(ops), mops_(moe_ops), ep_(ep), N_(N), C_(C),
      buffers_(kSlotCount, {nullptr, 0}) {
  for (int p = 0; p < 4; p++) {
    fwd_[p] = fmt::format("forward/{}/moe/{}", range_prefix, kPhaseNames[p]);
    bwd_[p] = fmt::format("backward/{}/moe/{}", range_prefix, kPhaseNames[p]);
  }
}

MoeMlp::~MoeMlp() {
  for (auto& [ptr, bytes] : buffers_)
    if (ptr) ops_.release(ptr);
}

float* MoeMlp::buffer(size_t index, size_t floats) {
  const size_t bytes = std::max<size_t>(floats, 16) * sizeof(float);
  auto& [ptr, have] = buffers_[index];
  if (have < bytes) {
    if (ptr) ops_.release(ptr);
    ptr = ops_.alloc(bytes);
    have = bytes;
  }
  return static_cast<float*>(ptr);
}

rankscope::Result<MoeStats> MoeMlp::forward(float* out, const float* inp, const MoeWeights& w,
                                            const float* logit_bias, rankscope::probe::Probe* probe) {
  const int N = N_, C = C_, E = cfg_.experts, K = cfg_.top_k;
  const size_t slots = static_cast<size_t>(N) * K;
  MoeStats stats;
  stats.routed.assign(static_cast<size_t>(E), 0);
  float* probs = buffer(kProbs, size_t(N) * E);
  float* gate = buffer(kGate, slots);
  auto* expert = reinterpret_cast<int32_t*>(buffer(kExpert, slots));
  {
    ScopedRange r(probe, fwd_[kRouter]);
    float* logits = buffer(kLogits, size_t(N) * E);
    ops_.matmul_forward(logits, inp, w.router, nullptr, N, C, E);
    mops_.router_forward(probs, expert, gate, logits, logit_bias, N, E, K);
    expert_host_.resize(slots);
    ops_.copy_to_host(expert_host_.data(), expert, slots * sizeof(int32_t));
    for (int32_t e : expert_host_) ++stats.routed[static_cast<size_t>(e)];
    if (cfg_.capacity_factor > 0.0f) {
      const auto cap = static_cast<int64_t>(
          std::ceil(double(slots) / double(E) * double(cfg_.capacity_factor)));
      std::vector<int64_t> kept(static_cast<size_t>(E), 0);
      for (int32_t& e : expert_host_) {
        if (kept[static_cast<size_t>(e)] < cap) {
          ++kept[static_cast<size_t>(e)];
        } else {
          e = -1;
          ++stats.dropped;
        }
      }
    }
    aux_dprob_host_.assign(static_cast<size_t>(E), 0.0f);
    if (cfg_.aux_loss_coef > 0.0f) {
      float* prob_sum = buffer(kProbSum, size_t(E));
      mops_.probs_column_sum(prob_sum, probs, N, E);
      std::vector<float> p_sum(static_cast<size_t>(E));
      ops_.copy_to_host(p_sum.data(), prob_sum, sizeof(float) * size_t(E));
      double aux = 0.0;
      for (int e = 0; e < E; e++) {
        const double f = double(stats.routed[size_t(e)]) / double(slots);
        aux += f * double(p_sum[size_t(e)]) / double(N);
        aux_dprob_host_[size_t(e)] = static_cast<float>(cfg_.aux_loss_coef * E * f / N);
      }
      stats.aux_loss = static_cast<float>(cfg_.aux_loss_coef * E * aux);
    }
  }
  {
    ScopedRange r(probe, fwd_[kDispatch]);
    RS_ASSIGN_OR_RETURN(order_, moe::sort_slots_by_expert(expert_host_, E));
    const int R = static_cast<int>(order_.slot_of_row.size());
    std::vector<int32_t> token_of_row(order_.slot_of_row.size());
    for (size_t j = 0; j < token_of_row.size(); j++) token_of_row[j] = order_.slot_of_row[j] / K;
    auto* tor = reinterpret_cast<int32_t*>(buffer(kTokenOfRow, token_of_row.size()));
    auto* ros = reinterpret_cast<int32_t*>(buffer(kRowOfSlot, slots));
    ops_.copy_from_host(tor, token_of_row.data(), token_of_row.size() * sizeof(int32_t));
    ops_.copy_from_host(ros, order_.row_of_slot.data(), slots * sizeof(int32_t));
    float* sorted = buffer(kSorted, size_t(R) * C);
    mops_.gather_rows(sorted, inp, tor, R, C);
    RS_ASSIGN_OR_RETURN(plan_, moe::exchange_counts(ep_, layout_, order_.expert_counts));
    blocks_ = moe::expert_blocks(plan_.expert_rows, cfg_.loop);
    const size_t rr = plan_.total_recv();
    stats.received = static_cast<int64_t>(rr);
    float* recv = buffer(kRecv, rr * C);
    RS_RETURN_IF_ERROR(moe::exchange_rows(ep_, plan_, moe::Direction::kDispatch, sorted, recv, size_t(C), &ops_));
    auto* gor = reinterpret_cast<int32_t*>(buffer(kGroupedOfReceived, rr));
    ops_.copy_from_host(gor, plan_.grouped_of_received.data(), rr * sizeof(int32_t));
    mops_.scatter_rows(buffer(kXGrouped, rr * C), recv, gor, static_cast<int>(rr), C);
  }
  {
    ScopedRange r(probe, fwd_[kExperts]);
    experts_forward(w);
  }
  {
    ScopedRange r(probe, fwd_[kCombine]);
    const size_t rr = plan_.total_recv(), R = order_.slot_of_row.size();
    float* yrecv = buffer(kYRecv, rr * C);
    mops_.gather_rows(yrecv, buffer(kYGrouped, rr * C), reinterpret_cast<int32_t*>(buffer(kGroupedOfReceived, rr)),
                      static_cast<int>(rr), C);
    const auto extra = static_cast<size_t>(std::max<int64_t>(miscount_peer_ >= 0 ? miscount_delta_ : 0, 0));
    float* ysorted = buffer(kYSorted, (R + extra) * C);
    RS_RETURN_IF_ERROR(combine_exchange(yrecv, ysorted));
    mops_.combine_forward(out, ysorted, gate, reinterpret_cast<int32_t*>(buffer(kRowOfSlot, slots)), N, K, C);
  }
  return stats;
}

// The combine all_to_all_v: the dispatch's splits swapped, or, under the a2a-miscount fault, with
// one peer's receive count off by delta rows.
Status MoeMlp::combine_exchange(const float* yrecv, float* ysorted) {
  const int peer = miscount_peer_;
  const int64_t delta = miscount_delta_;
  miscount_peer_ = -1;
  if (peer < 0 || ep_ == nullptr)
    return moe::exchange_rows(ep_, plan_, moe::Direction::kCombine, yrecv, ysorted, size_t(C_), &ops_);
  std::vector<size_t> expect = plan_.send_rows;
  const size_t sent = expect[static_cast<size_t>(peer)];
  expect[static_cast<size_t>(peer)] = static_cast<size_t>(std::max<int64_t>(int64_t(sent) + delta, 0));
  Status s = moe::exchange_rows_with_splits(ep_, plan_.recv_rows, expect, yrecv, ysorted, size_t(C_), &ops_);
  const std::string what = fmt::format(
      "{}: combine all_to_all_v on {}: this rank expected {} rows back from EP rank {} but sent it {} "
      "in the dispatch (a2a-miscount fault, delta {})", fwd_[kCombine], ep_->name(),
      expect[static_cast<size_t>(peer)], peer, sent, delta);
  if (!s.ok()) return rankscope::Status(s.code(), fmt::format("{}: {}", what, s.message()));
  return rankscope::corrupt(fmt::format("{}; the exchange completed short, the rows after it are misplaced", what));
}

void MoeMlp::experts_forward(const MoeWeights& w) {
  const size_t rr = plan_.total_recv(), H = 4 * size_t(C_);
  const moe::ExpertActivations acts{buffer(kXGrouped, rr * C_), buffer(kPre, rr * H), buffer(kGelu, rr * H),
                                    buffer(kYGrouped, rr * C_)};
  moe::expert_chain_forward(ops_, blocks_, w, acts, C_);
}

void MoeMlp::experts_backward(const MoeWeights& w, MoeGrads& g) {
  const size_t rr = plan_.total_recv(), H = 4 * size_t(C_);
  const moe::ExpertActivations acts{buffer(kXGrouped, rr * C_), buffer(kPre, rr * H), buffer(kGelu, rr * H),
                                    buffer(kYGrouped, rr * C_)};
  moe::expert_chain_backward(ops_, blocks_, w, g, acts, buffer(kDGrouped, rr * C_), buffer(kDH, rr * H),
                             buffer(kDXGrouped, rr * C_), C_);
}

Status MoeMlp::backward(float* dinp, const float* dout, const float* inp, const MoeWeights& w, MoeGrads& g,
                        float loss_scale, rankscope::probe::Probe* probe) {
  const int N = N_, C = C_, E = cfg_.experts, K = cfg_.top_k;
  const size_t slots = static_cast<size_t>(N) * K, rr = plan_.total_recv(), R = order_.slot_of_row.size();
  auto* ros = reinterpret_cast<int32_t*>(buffer(kRowOfSlot, slots));
  auto* gor = reinterpret_cast<int32_t*>(buffer(kGroupedOfReceived, rr));
  float* gate = buffer(kGate, slots);
  float* dgate = buffer(kDGate, slots);
  {
    ScopedRange r(probe, bwd_[kCombine]);
    float* drows = buffer(kDRows, R * C);
    mops_.combine_backward(drows, dgate, dout, buffer(kYSorted, R * C), gate, ros, N, K, C);
    float* drecv = buffer(kDRecv, rr * C);
    // The combine's gradient travels the dispatch direction back to the experts' ranks.
    RS_RETURN_IF_ERROR(moe::exchange_rows(ep_, plan_, moe::Direction::kDispatch, drows, drecv, size_t(C), &ops_));
    mops_.scatter_rows(buffer(kDGrouped, rr * C), drecv, gor, static_cast<int>(rr), C);
  }
  {
    ScopedRange r(probe, bwd_[kExperts]);
    experts_backward(w, g);
  }
  {
    ScopedRange r(probe, bwd_[kDispatch]);
    float* dxrecv = buffer(kDXRecv, rr * C);
    mops_.gather_rows(dxrecv, buffer(kDXGrouped, rr * C), gor, static_cast<int>(rr), C);
    float* dsorted = buffer(kDSorted, R * C);
    RS_RETURN_IF_ERROR(moe::exchange_rows(ep_, plan_, moe::Direction::kCombine, dxrecv, dsorted, size_t(C), &ops_));
    mops_.slot_rows_backward(dinp, dsorted, ros, N, K, C);
  }
  {
    ScopedRange r(probe, bwd_[kRouter]);
    float* aux = nullptr;
    if (cfg_.aux_loss_coef > 0.0f) {
      std::vector<float> scaled(aux_dprob_host_);
      for (float& v : scaled) v *= loss_scale;
      aux = buffer(kAuxDprob, size_t(E));
      ops_.copy_from_host(aux, scaled.data(), sizeof(float) * size_t(E));
    }
    float* dlogits = buffer(kLogits, size_t(N) * E);
    mops_.router_backward(dlogits, buffer(kProbs, size_t(N) * E), reinterpret_cast<int32_t*>(buffer(kExpert, slots)),
                          gate, dgate, aux, N, E, K);
    float* dinp_router = buffer(kDInpRouter, size_t(N) * C);
    ops_.matmul_backward(dinp_router, g.router, nullptr, dlogits, inp, w.router, N, C, E);
    ops_.add_inplace(dinp, dinp_router, size_t(N) * C);
  }
  return {};
}

}  // namespace gpt2
