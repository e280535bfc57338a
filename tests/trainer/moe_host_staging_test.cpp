// moe_host_staging_test.cpp — one MoE layer's exchange (moe_dispatch.h) as ranks sharing one GPU run
// it: HostStagingCommunicator over a host group (here 4 threads; MPI in the trainer), the rows in
// "device" memory (a fake arena the staging predicate calls device memory).
//
// Also the displacement math of a row all_to_all_v (moe::row_splits) with empty peers.
// Checks: the host collective never sees an arena pointer; the per-peer counts it is given (what
// the probe, standing where CountsSeen stands, records) are the plan's row splits times the row
// width; rows arrive in the same places as in the unstaged exchange; the staged bytes are exactly
// the rows sent and received; the combine returns every row to where it came from.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "comm/host_staging_communicator.h"
#include "model/moe_dispatch.h"
#include "ops/cpu/cpu_ops.h"
#include "thread_group_comm.h"

namespace {

using gpt2::moe::Direction;

// Forwards to a host communicator and keeps what each all_to_all_v was asked to move, and whether
// any buffer it was handed lies in the device arena.
class CountsSeen final : public gpt2::Communicator {
 public:
  CountsSeen(std::unique_ptr<gpt2::Communicator> inner, std::function<bool(const void*)> on_device)
      : inner_(std::move(inner)), on_device_(std::move(on_device)) {}
  const std::string& name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  gpt2::Status all_reduce(void* b, size_t n, gpt2::DataType t, gpt2::ReduceOp op) override {
    return inner_->all_reduce(b, n, t, op);
  }
  gpt2::Status all_gather(const void* s, void* r, size_t n, gpt2::DataType t) override {
    return inner_->all_gather(s, r, n, t);
  }
  gpt2::Status reduce_scatter(const void* s, void* r, size_t n, gpt2::DataType t) override {
    return inner_->reduce_scatter(s, r, n, t);
  }
  gpt2::Status broadcast(void* b, size_t n, gpt2::DataType t, int root) override {
    return inner_->broadcast(b, n, t, root);
  }
  gpt2::Status all_to_all(const void* s, void* r, size_t n, gpt2::DataType t) override {
    saw_device |= on_device_(s) || on_device_(r);
    return inner_->all_to_all(s, r, n, t);
  }
  gpt2::Status all_to_all_v(const void* s, std::span<const size_t> sc, std::span<const size_t> sd, void* r,
                            std::span<const size_t> rc, std::span<const size_t> rd, gpt2::DataType t) override {
    saw_device |= on_device_(s) || on_device_(r);
    send_counts.emplace_back(sc.begin(), sc.end());
    recv_counts.emplace_back(rc.begin(), rc.end());
    return inner_->all_to_all_v(s, sc, sd, r, rc, rd, t);
  }
  gpt2::Status barrier() override { return inner_->barrier(); }
  std::unique_ptr<gpt2::Communicator> split(const std::string&, int, int) override { return nullptr; }

  bool saw_device = false;
  std::vector<std::vector<size_t>> send_counts, recv_counts;

 private:
  std::unique_ptr<gpt2::Communicator> inner_;
  std::function<bool(const void*)> on_device_;
};

constexpr size_t kWidth = 3;  // row = {origin rank, slot, expert}

// Uneven routing with a hot expert (3) and an expert nobody uses (6).
int32_t expert_for(int rank, int slot, int experts) {
  const int h = (slot * 5 + rank * 3 + (slot * slot) % 7) % (experts + 3);
  const int e = h >= experts ? 3 : h;
  return e == 6 ? 7 : e;
}

TEST(MoeRowSplits, ElementCountsAndDisplacementsOfRowsWithEmptyPeers) {
  const std::vector<size_t> rows = {3, 0, 5, 0};
  const auto s = gpt2::moe::row_splits(rows, kWidth);
  EXPECT_EQ(s.counts, (std::vector<size_t>{9, 0, 15, 0}));
  EXPECT_EQ(s.displs, (std::vector<size_t>{0, 9, 9, 24})) << "an empty peer's block starts where the next one does";
}

TEST(MoeHostStaging, FourRanksSharingOneDeviceExchangeRowsThroughHostMemory) {
  constexpr int kRanks = 4, kExperts = 8, kSlots = 53;
  auto group = std::make_shared<gpt2::testing::ThreadGroup>(kRanks);
  std::vector<std::string> errors(kRanks);
  auto body = [&](int rank) {
    auto fail = [&](const std::string& what) { errors[size_t(rank)] = what; };
    auto ops = gpt2::make_cpu_ops();
    std::vector<float> arena(4096, -1.0f);  // this rank's "GPU memory"
    auto on_device = [&](const void* p) {
      auto* f = static_cast<const float*>(p);
      return f >= arena.data() && f < arena.data() + arena.size();
    };
    auto seen_owner = std::make_unique<CountsSeen>(
        std::make_unique<gpt2::testing::ThreadGroupComm>(group, rank, "ep0"), on_device);
    CountsSeen* seen = seen_owner.get();
    gpt2::HostStagingCommunicator staging(std::move(seen_owner), *ops, on_device);
    auto layout = gpt2::moe::ExpertLayout::make(kExperts, kRanks, rank);
    std::vector<int32_t> expert_of_slot(kSlots);
    for (int s = 0; s < kSlots; ++s) expert_of_slot[size_t(s)] = expert_for(rank, s, kExperts);
    auto order = gpt2::moe::sort_slots_by_expert(expert_of_slot, kExperts);
    if (!layout.ok() || !order.ok()) return fail("setup");
    auto plan = gpt2::moe::exchange_counts(&staging, *layout, order->expert_counts);
    if (!plan.ok()) return fail(plan.status().to_string());
    const size_t sent = plan->total_send(), got_rows = plan->total_recv();
    if ((sent + got_rows) * kWidth > arena.size() / 2) return fail("arena too small");
    float* sorted = arena.data();
    float* recv = arena.data() + arena.size() / 2;
    for (size_t j = 0; j < sent; ++j) {
      const int32_t s = order->slot_of_row[j];
      sorted[j * kWidth + 0] = float(rank);
      sorted[j * kWidth + 1] = float(s);
      sorted[j * kWidth + 2] = float(expert_of_slot[size_t(s)]);
    }
    auto st = gpt2::moe::exchange_rows(&staging, *plan, Direction::kDispatch, sorted, recv, kWidth, ops.get());
    if (!st.ok()) return fail(st.to_string());
    if (seen->saw_device) return fail("the host collective was handed device memory");
    if (staging.staged_bytes() != (sent + got_rows) * kWidth * sizeof(float))
      return fail("staged " + std::to_string(staging.staged_bytes()) + " bytes, not the rows moved");
    if (seen->send_counts.size() != 1) return fail("expected one all_to_all_v");
    for (int p = 0; p < kRanks; ++p) {
      if (seen->send_counts[0][size_t(p)] != plan->send_rows[size_t(p)] * kWidth ||
          seen->recv_counts[0][size_t(p)] != plan->recv_rows[size_t(p)] * kWidth)
        return fail("per-peer counts differ from the plan's splits for peer " + std::to_string(p));
    }
    // Every received row is for one of this rank's experts and its source blocks are in rank order.
    size_t at = 0;
    for (int src = 0; src < kRanks; ++src)
      for (size_t i = 0; i < plan->recv_rows[size_t(src)]; ++i, ++at) {
        if (recv[at * kWidth + 0] != float(src)) return fail("a row from the wrong source rank");
        if (layout->owner(int(recv[at * kWidth + 2])) != rank) return fail("a row for another rank's expert");
      }
    // Combine with the identity as the expert: every row comes back to its sorted position.
    std::vector<float> before(sorted, sorted + sent * kWidth);
    std::fill(sorted, sorted + sent * kWidth, -3.0f);
    st = gpt2::moe::exchange_rows(&staging, *plan, Direction::kCombine, recv, sorted, kWidth, ops.get());
    if (!st.ok()) return fail(st.to_string());
    if (!std::equal(before.begin(), before.end(), sorted)) return fail("combine did not return every row");
    if (seen->recv_counts.size() != 2 || seen->recv_counts[1] != seen->send_counts[0])
      return fail("the combine's receive counts are not the dispatch's send counts");
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

}  // namespace
