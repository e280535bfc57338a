// moe_dispatch.h — the token exchange of one MoE layer over an expert-parallel group.
//
// Is: the host-side bookkeeping of dropless-or-capacity MoE dispatch as Megatron's all-to-all
// dispatcher and torchtitan do it: (1) a stable counting sort of the routed (token, k) slots by
// expert; (2) an all_to_all of the per-expert counts over ep{k}, from which every rank derives its
// send and receive row splits; (3) the chunk sort that turns the received layout
// [src rank][local expert] into [local expert][src rank], so each local expert owns one contiguous
// segment (one GEMM chain per expert); (4) the all_to_all_v of rows in the dispatch direction and,
// with the splits swapped, in the combine direction.
// Is not: the row movement inside a rank (gathering rows into sorted order, the chunk sort itself,
// the gate-weighted scatter-add): those are element loops and live in an Ops backend, driven by the
// index vectors computed here. Not the router either (softmax, top-k, capacity): it only sees
// which expert each slot went to.
//
// Invariant the exchange relies on (and hangdoctor's a2a_count_mismatch checks after the fact):
// send_rows_i[j] == recv_rows_j[i] for every pair of EP ranks i, j.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "model/ops.h"
#include "rankscope/format/status.h"

namespace gpt2::moe {

// Which experts live where: experts are sharded contiguously, rank r of ep{k} holds experts
// [r*L, (r+1)*L) with L = num_experts / ep_size.
struct ExpertLayout {
  int num_experts = 1;
  int ep_size = 1;
  int ep_rank = 0;

  static rankscope::Result<ExpertLayout> make(int num_experts, int ep_size, int ep_rank);
  int local_experts() const { return num_experts / ep_size; }
  int first_local_expert() const { return ep_rank * local_experts(); }
  int owner(int expert) const { return expert / local_experts(); }  // EP rank holding `expert`
};

// The routed slots of this rank in expert order. A slot is one (token, k) pair, index t*K + k.
struct SlotOrder {
  std::vector<int32_t> slot_of_row;    // (R) row j of the sorted buffer holds slot slot_of_row[j]
  std::vector<int32_t> row_of_slot;    // (T*K) inverse; -1 for a dropped slot
  std::vector<int64_t> expert_counts;  // (E) kept slots per global expert; sum = R
};

// Stable counting sort of the slots by expert (ties keep slot order, so the result is
// deterministic). expert_of_slot[s] is in [0, E) or -1 for a slot dropped by capacity.
rankscope::Result<SlotOrder> sort_slots_by_expert(std::span<const int32_t> expert_of_slot,
                                                  int num_experts);

// Everything about one layer's exchange that follows from the counts.
struct ExchangePlan {
  std::vector<size_t> send_rows;             // (N) rows this rank sends to each EP rank
  std::vector<size_t> recv_rows;             // (N) rows it receives from each EP rank
  std::vector<int64_t> recv_expert_counts;   // (N*L) [src rank][local expert]
  std::vector<size_t> expert_rows;           // (L) rows of each local expert after the chunk sort
  // (sum recv_rows) received row i (layout [src][local expert]) goes to grouped row
  // grouped_of_received[i] (layout [local expert][src]).
  std::vector<int32_t> grouped_of_received;
  size_t total_send() const;
  size_t total_recv() const;
};

// The counts all_to_all over `ep` (op kAllToAll): each rank sends its L counts for each peer's
// experts and gets back, per source rank, the counts for its own experts. Collective over ep.
// ep may be null when layout.ep_size is 1 (no exchange: every row stays local).
rankscope::Result<ExchangePlan> exchange_counts(Communicator* ep, const ExpertLayout& layout,
                                                std::span<const int64_t> expert_counts);

enum class Direction {
  kDispatch,  // sorted rows -> [src][local expert] on the expert's rank
  kCombine,   // [src][local expert] expert outputs -> back to the rank the token came from
};

// The all_to_all_v of rows of `width` floats. kDispatch: `in` holds total_send() rows in expert
// order, `out` receives total_recv() rows. kCombine: the splits swapped. Collective over ep; with
// a null ep (EP 1) a copy.
// ops (may be null: host memory) copies the rows when there is no communicator.
Status exchange_rows(Communicator* ep, const ExchangePlan& plan, Direction dir, const float* in,
                     float* out, size_t width, Ops* ops = nullptr);

// The same with explicit row splits (send_rows to each peer, recv_rows from each): exchange_rows
// passes the plan's; the a2a-miscount fault passes wrong receive counts (moe_mlp.cpp).
Status exchange_rows_with_splits(Communicator* ep, std::span<const size_t> send_rows,
                                 std::span<const size_t> recv_rows, const float* in, float* out,
                                 size_t width, Ops* ops = nullptr);

// Element counts and displacements of one side of an all_to_all_v of rows of `width` elements.
struct Splits {
  std::vector<size_t> counts;
  std::vector<size_t> displs;
};
Splits row_splits(std::span<const size_t> rows, size_t width);

}  // namespace gpt2::moe
