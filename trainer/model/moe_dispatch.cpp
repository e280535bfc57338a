// moe_dispatch.cpp — counting sort, counts exchange, chunk-sort indices and row all_to_all_v.
#include "moe_dispatch.h"

#include <algorithm>
#include <numeric>
#include <string>

#include <fmt/format.h>

namespace gpt2::moe {

rankscope::Result<ExpertLayout> ExpertLayout::make(int num_experts, int ep_size, int ep_rank) {
  if (num_experts < 1 || ep_size < 1 || num_experts % ep_size != 0)
    return rankscope::invalid_argument(fmt::format(
        "--moe-experts {} cannot be sharded over --ep {} (hint: the expert count must be a "
        "multiple of the expert-parallel degree)", num_experts, ep_size));
  if (ep_rank < 0 || ep_rank >= ep_size)
    return rankscope::invalid_argument(
        fmt::format("expert-parallel rank {} is outside 0..{}", ep_rank, ep_size - 1));
  return ExpertLayout{num_experts, ep_size, ep_rank};
}

rankscope::Result<SlotOrder> sort_slots_by_expert(std::span<const int32_t> expert_of_slot,
                                                  int num_experts) {
  SlotOrder o;
  o.expert_counts.assign(static_cast<size_t>(num_experts), 0);
  for (size_t s = 0; s < expert_of_slot.size(); ++s) {
    const int32_t e = expert_of_slot[s];
    if (e < -1 || e >= num_experts)
      return rankscope::invalid_argument(fmt::format(
          "MoE slot {} routed to expert {}, outside -1..{}", s, e, num_experts - 1));
    if (e >= 0) ++o.expert_counts[static_cast<size_t>(e)];
  }
  // Exclusive prefix sum = first row of each expert; filling in slot order keeps the sort stable.
  std::vector<int64_t> next(o.expert_counts.size(), 0);
  std::exclusive_scan(o.expert_counts.begin(), o.expert_counts.end(), next.begin(), int64_t{0});
  const int64_t kept = std::accumulate(o.expert_counts.begin(), o.expert_counts.end(), int64_t{0});
  o.slot_of_row.assign(static_cast<size_t>(kept), -1);
  o.row_of_slot.assign(expert_of_slot.size(), -1);
  for (size_t s = 0; s < expert_of_slot.size(); ++s) {
    const int32_t e = expert_of_slot[s];
    if (e < 0) continue;
    const int64_t row = next[static_cast<size_t>(e)]++;
    o.slot_of_row[static_cast<size_t>(row)] = static_cast<int32_t>(s);
    o.row_of_slot[s] = static_cast<int32_t>(row);
  }
  return o;
}

size_t ExchangePlan::total_send() const {
  return std::accumulate(send_rows.begin(), send_rows.end(), size_t{0});
}

size_t ExchangePlan::total_recv() const {
  return std::accumulate(recv_rows.begin(), recv_rows.end(), size_t{0});
}

rankscope::Result<ExchangePlan> exchange_counts(Communicator* ep, const ExpertLayout& layout,
                                                std::span<const int64_t> expert_counts) {
  const int n = layout.ep_size, l = layout.local_experts();
  const std::string where = ep ? ep->name() : std::string("a group of one");
  if (ep ? (ep->size() != n || ep->rank() != layout.ep_rank) : n != 1)
    return rankscope::invalid_argument(fmt::format(
        "MoE exchange on {}: communicator is rank {} of {}, the expert layout says rank {} of {}",
        where, ep ? ep->rank() : 0, ep ? ep->size() : 1, layout.ep_rank, n));
  if (expert_counts.size() != static_cast<size_t>(layout.num_experts))
    return rankscope::invalid_argument(fmt::format("MoE exchange on {}: {} counts for {} experts",
                                                   where, expert_counts.size(), layout.num_experts));
  ExchangePlan p;
  p.recv_expert_counts.assign(static_cast<size_t>(n * l), 0);
  // Experts are sharded contiguously, so the global counts already are [dest rank][local expert]:
  // block p of L counts goes to EP rank p.
  if (ep)
    RS_RETURN_IF_ERROR(ep->all_to_all(expert_counts.data(), p.recv_expert_counts.data(),
                                      static_cast<size_t>(l), DataType::kInt64));
  else
    std::copy(expert_counts.begin(), expert_counts.end(), p.recv_expert_counts.begin());
  p.send_rows.assign(static_cast<size_t>(n), 0);
  p.recv_rows.assign(static_cast<size_t>(n), 0);
  p.expert_rows.assign(static_cast<size_t>(l), 0);
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < l; ++j) {
      const int64_t sent = expert_counts[static_cast<size_t>(r * l + j)];
      const int64_t got = p.recv_expert_counts[static_cast<size_t>(r * l + j)];
      if (got < 0)
        return rankscope::internal_error(fmt::format(
            "MoE exchange on {}: rank {} announced {} rows for local expert {}", where, r, got, j));
      p.send_rows[static_cast<size_t>(r)] += static_cast<size_t>(sent);
      p.recv_rows[static_cast<size_t>(r)] += static_cast<size_t>(got);
      p.expert_rows[static_cast<size_t>(j)] += static_cast<size_t>(got);
    }
  }
  // Chunk sort: received block (src, j) starts at recv_start, its grouped home at grouped_start.
  std::vector<size_t> grouped_start(static_cast<size_t>(n * l), 0);  // indexed [src][j]
  size_t at = 0;
  for (int j = 0; j < l; ++j)
    for (int r = 0; r < n; ++r) {
      grouped_start[static_cast<size_t>(r * l + j)] = at;
      at += static_cast<size_t>(p.recv_expert_counts[static_cast<size_t>(r * l + j)]);
    }
  p.grouped_of_received.assign(at, -1);
  size_t recv_at = 0;
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < l; ++j) {
      const auto count = static_cast<size_t>(p.recv_expert_counts[static_cast<size_t>(r * l + j)]);
      for (size_t i = 0; i < count; ++i)
        p.grouped_of_received[recv_at + i] =
            static_cast<int32_t>(grouped_start[static_cast<size_t>(r * l + j)] + i);
      recv_at += count;
    }
  return p;
}

Splits row_splits(std::span<const size_t> rows, size_t width) {
  Splits s;
  s.counts.resize(rows.size());
  s.displs.resize(rows.size());
  size_t at = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    s.counts[i] = rows[i] * width;
    s.displs[i] = at;
    at += s.counts[i];
  }
  return s;
}

Status exchange_rows(Communicator* ep, const ExchangePlan& plan, Direction dir, const float* in,
                     float* out, size_t width, Ops* ops) {
  const auto& send = dir == Direction::kDispatch ? plan.send_rows : plan.recv_rows;
  const auto& recv = dir == Direction::kDispatch ? plan.recv_rows : plan.send_rows;
  return exchange_rows_with_splits(ep, send, recv, in, out, width, ops);
}

Status exchange_rows_with_splits(Communicator* ep, std::span<const size_t> send_rows,
                                 std::span<const size_t> recv_rows, const float* in, float* out,
                                 size_t width, Ops* ops) {
  const Splits s = row_splits(send_rows, width), r = row_splits(recv_rows, width);
  if (!ep) {
    if (s.counts.size() != 1 || r.counts.size() != 1 || s.counts[0] != r.counts[0])
      return rankscope::invalid_argument("MoE exchange without a communicator needs one rank's equal splits");
    if (ops && s.counts[0] > 0) ops->copy(out, in, s.counts[0] * sizeof(float));
    else if (s.counts[0] > 0) std::copy(in, in + s.counts[0], out);
    return {};
  }
  return ep->all_to_all_v(in, s.counts, s.displs, out, r.counts, r.displs, DataType::kFloat32);
}

}  // namespace gpt2::moe
