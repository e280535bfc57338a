// moe_dispatch_test.cpp — the MoE token exchange (trainer/model/moe_dispatch.h) on 1, 2 and 4
// expert-parallel ranks in one process (thread_group_comm.h).
//
// Checks: the counting sort is stable and skips dropped slots; counts and row splits agree across
// ranks; after dispatch every local expert's contiguous segment holds exactly the rows routed to
// it (rows carry their origin rank, slot and expert); a combine of the expert outputs brings every
// row back to the slot it came from.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "model/moe_dispatch.h"
#include "thread_group_comm.h"

namespace {

using gpt2::moe::Direction;
using gpt2::moe::ExchangePlan;
using gpt2::moe::ExpertLayout;

TEST(MoeDispatch, CountingSortIsStableAndSkipsDroppedSlots) {
  // 4 tokens x top-2 = 8 slots over 3 experts; slot 5 was dropped by capacity.
  std::vector<int32_t> expert_of_slot = {2, 0, 1, 2, 0, -1, 2, 1};
  auto o = gpt2::moe::sort_slots_by_expert(expert_of_slot, 3);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->expert_counts, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(o->slot_of_row, (std::vector<int32_t>{1, 4, 2, 7, 0, 3, 6}));
  EXPECT_EQ(o->row_of_slot, (std::vector<int32_t>{4, 0, 2, 5, 1, -1, 6, 3}));
  std::vector<int32_t> bad = {0, 3};
  auto b = gpt2::moe::sort_slots_by_expert(bad, 3);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("outside -1..2"), std::string::npos);
}

TEST(MoeDispatch, LayoutNeedsExpertsAMultipleOfEp) {
  auto l = ExpertLayout::make(8, 4, 3);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->local_experts(), 2);
  EXPECT_EQ(l->first_local_expert(), 6);
  EXPECT_EQ(l->owner(5), 2);
  auto bad = ExpertLayout::make(6, 4, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("multiple of the expert-parallel degree"), std::string::npos);
}

// One rank's routing, deterministic but uneven across ranks and experts (some counts are zero).
std::vector<int32_t> routing(int rank, int slots, int experts) {
  std::vector<int32_t> e(static_cast<size_t>(slots));
  for (int s = 0; s < slots; ++s) {
    const int h = (s * 7 + rank * 3 + (s * s) % 5) % (experts + 1);
    e[static_cast<size_t>(s)] = h == experts ? -1 : (rank == 1 && h == 0 ? 1 : h);  // rank 1 never uses expert 0
  }
  return e;
}

constexpr size_t kWidth = 3;  // row = {origin rank, slot, expert}

void run_exchange(int ep_size, int experts, int slots) {
  auto group = std::make_shared<gpt2::testing::ThreadGroup>(ep_size);
  std::vector<std::string> errors(static_cast<size_t>(ep_size));
  std::vector<int64_t> routed_to_rank(static_cast<size_t>(ep_size), 0);
  std::vector<int64_t> received(static_cast<size_t>(ep_size), 0);
  std::mutex tally;
  auto body = [&](int rank) {
    auto fail = [&](const std::string& what) { errors[static_cast<size_t>(rank)] = what; };
    gpt2::testing::ThreadGroupComm comm(group, rank, "ep0");
    auto layout = ExpertLayout::make(experts, ep_size, rank);
    if (!layout.ok()) return fail(layout.status().to_string());
    const auto expert_of_slot = routing(rank, slots, experts);
    auto order = gpt2::moe::sort_slots_by_expert(expert_of_slot, experts);
    if (!order.ok()) return fail(order.status().to_string());
    auto plan = gpt2::moe::exchange_counts(&comm, *layout, order->expert_counts);
    if (!plan.ok()) return fail(plan.status().to_string());
    // Rows in expert order, each saying where it came from.
    std::vector<float> sorted(order->slot_of_row.size() * kWidth);
    for (size_t j = 0; j < order->slot_of_row.size(); ++j) {
      const int32_t s = order->slot_of_row[j];
      sorted[j * kWidth + 0] = float(rank);
      sorted[j * kWidth + 1] = float(s);
      sorted[j * kWidth + 2] = float(expert_of_slot[static_cast<size_t>(s)]);
    }
    std::vector<float> got(plan->total_recv() * kWidth, -7.0f);
    auto st = gpt2::moe::exchange_rows(&comm, *plan, Direction::kDispatch, sorted.data(), got.data(), kWidth);
    if (!st.ok()) return fail(st.to_string());
    received[static_cast<size_t>(rank)] = static_cast<int64_t>(plan->total_recv());
    // Chunk sort: each local expert's segment holds only its rows, sources in rank order.
    std::vector<float> grouped(got.size(), -9.0f);
    for (size_t i = 0; i < plan->grouped_of_received.size(); ++i)
      for (size_t c = 0; c < kWidth; ++c)
        grouped[size_t(plan->grouped_of_received[i]) * kWidth + c] = got[i * kWidth + c];
    size_t at = 0;
    for (int j = 0; j < layout->local_experts(); ++j) {
      float last_src = -1.0f;
      for (size_t i = 0; i < plan->expert_rows[size_t(j)]; ++i, ++at) {
        if (grouped[at * kWidth + 2] != float(layout->first_local_expert() + j))
          return fail("a row of another expert in local expert " + std::to_string(j) + "'s segment");
        if (grouped[at * kWidth + 0] < last_src) return fail("sources out of rank order in a segment");
        last_src = grouped[at * kWidth + 0];
      }
    }
    if (at != grouped.size() / kWidth) return fail("segments do not cover the received rows");
    // "Expert": identity. Un-sort to [src][local expert] and combine back.
    std::vector<float> unsorted(got.size());
    for (size_t i = 0; i < plan->grouped_of_received.size(); ++i)
      for (size_t c = 0; c < kWidth; ++c)
        unsorted[i * kWidth + c] = grouped[size_t(plan->grouped_of_received[i]) * kWidth + c];
    std::vector<float> back(sorted.size(), -5.0f);
    st = gpt2::moe::exchange_rows(&comm, *plan, Direction::kCombine, unsorted.data(), back.data(), kWidth);
    if (!st.ok()) return fail(st.to_string());
    if (back != sorted) return fail("combine did not return every row to its slot");
    std::lock_guard<std::mutex> lock(tally);
    for (int p = 0; p < ep_size; ++p) routed_to_rank[size_t(p)] += int64_t(plan->send_rows[size_t(p)]);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < ep_size; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
  for (int r = 0; r < ep_size; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
  // What each rank received is what all ranks routed to its experts.
  EXPECT_EQ(received, routed_to_rank);
}

TEST(MoeDispatch, OneRankKeepsEveryRowLocal) { run_exchange(1, 4, 40); }
TEST(MoeDispatch, TwoRanksTwoExpertsEach) { run_exchange(2, 4, 64); }
TEST(MoeDispatch, FourRanksTwoExpertsEachWithEmptySplits) { run_exchange(4, 8, 37); }

TEST(MoeDispatch, ReceiverExpectingOtherCountsFails) {
  // Rank 1 expects one row more from rank 0 than rank 0 sends: the exchange must not succeed
  // quietly on the receiver.
  auto group = std::make_shared<gpt2::testing::ThreadGroup>(2);
  std::vector<bool> ok(2);
  auto body = [&](int rank) {
    gpt2::testing::ThreadGroupComm comm(group, rank, "ep0");
    ExchangePlan p;
    p.send_rows = {1, 1};
    p.recv_rows = {rank == 1 ? 2u : 1u, 1};
    std::vector<float> in(2 * kWidth, 1.0f), out(3 * kWidth);
    ok[size_t(rank)] = gpt2::moe::exchange_rows(&comm, p, Direction::kDispatch, in.data(), out.data(), kWidth).ok();
  };
  std::thread a(body, 0), b(body, 1);
  a.join();
  b.join();
  EXPECT_TRUE(ok[0]);
  EXPECT_FALSE(ok[1]);
}

}  // namespace
