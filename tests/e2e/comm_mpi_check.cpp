// comm_mpi_check.cpp — run under mpirun by comm_mpi_test: every collective of the MPI communicator
// (through the probe decorator, on world and on Megatron-split groups) against values computed by
// hand. Exits 0 when all agree, 1 with a message naming the first that does not.
#include <cstdio>
#include <numeric>
#include <vector>

#include "comm/mpi_runtime.h"
#include "comm/probed_communicator.h"
#include "comm/process_groups.h"
#include "rankscope/format/bfloat16.h"

namespace {

int failures = 0;

void check(bool ok, const char* what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: %s: wrong result\n", rank, what);
    ++failures;
  }
}

void check_status(const rankscope::Status& s, const char* what, int rank) {
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, s.to_string().c_str());
    ++failures;
  }
}

void exercise(gpt2::Communicator& c, int world_rank) {
  using gpt2::DataType;
  using gpt2::ReduceOp;
  const int n = c.size(), r = c.rank();
  std::vector<float> v = {float(r), float(r + 1)};
  check_status(c.all_reduce(v.data(), 2, DataType::kFloat32, ReduceOp::kSum), "all_reduce sum", world_rank);
  check(v[0] == n * (n - 1) / 2.0f && v[1] == n * (n + 1) / 2.0f, "all_reduce sum", world_rank);
  // bf16: sums of small integers and their max are exact in bf16, so these compare exactly too.
  std::vector<uint16_t> h = {rankscope::format::float_to_bf16(float(r)), rankscope::format::float_to_bf16(-2.0f * float(r))};
  check_status(c.all_reduce(h.data(), 2, DataType::kBFloat16, ReduceOp::kSum), "all_reduce bf16 sum", world_rank);
  check(rankscope::format::bf16_to_float(h[0]) == n * (n - 1) / 2.0f && rankscope::format::bf16_to_float(h[1]) == -float(n * (n - 1)),
        "all_reduce bf16 sum", world_rank);
  uint16_t hm = rankscope::format::float_to_bf16(float(r) - 0.5f);
  check_status(c.all_reduce(&hm, 1, DataType::kBFloat16, ReduceOp::kMax), "all_reduce bf16 max", world_rank);
  check(rankscope::format::bf16_to_float(hm) == float(n - 1) - 0.5f, "all_reduce bf16 max", world_rank);
  float m = float(r * 10);
  check_status(c.all_reduce(&m, 1, DataType::kFloat32, ReduceOp::kMax), "all_reduce max", world_rank);
  check(m == float((n - 1) * 10), "all_reduce max", world_rank);

  std::vector<int32_t> mine = {r, -r}, all(2 * n);
  check_status(c.all_gather(mine.data(), all.data(), 2, DataType::kInt32), "all_gather", world_rank);
  for (int i = 0; i < n; ++i) check(all[2 * i] == i && all[2 * i + 1] == -i, "all_gather", world_rank);

  std::vector<float> rs_in(n), rs_out(1);
  std::iota(rs_in.begin(), rs_in.end(), 0.0f);  // every rank sends 0..n-1: block i sums to n*i
  check_status(c.reduce_scatter(rs_in.data(), rs_out.data(), 1, DataType::kFloat32), "reduce_scatter", world_rank);
  check(rs_out[0] == float(n * r), "reduce_scatter", world_rank);

  int64_t b = r == n - 1 ? 42 : 0;
  check_status(c.broadcast(&b, 1, DataType::kInt64, n - 1), "broadcast", world_rank);
  check(b == 42, "broadcast", world_rank);

  std::vector<int32_t> a2a_in(n), a2a_out(n);
  for (int i = 0; i < n; ++i) a2a_in[i] = 100 * r + i;  // block i goes to rank i
  check_status(c.all_to_all(a2a_in.data(), a2a_out.data(), 1, DataType::kInt32), "all_to_all", world_rank);
  for (int i = 0; i < n; ++i) check(a2a_out[i] == 100 * i + r, "all_to_all", world_rank);

  // all_to_all_v: rank r sends i+1 copies of r to rank i.
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t stotal = 0, rtotal = 0;
  for (int i = 0; i < n; ++i) {
    sc[i] = size_t(i + 1);
    sd[i] = stotal;
    stotal += sc[i];
    rc[i] = size_t(r + 1);
    rd[i] = rtotal;
    rtotal += rc[i];
  }
  std::vector<int32_t> vin(stotal, r), vout(rtotal, -1);
  check_status(c.all_to_all_v(vin.data(), sc, sd, vout.data(), rc, rd, DataType::kInt32), "all_to_all_v", world_rank);
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < rc[i]; ++k) check(vout[rd[i] + k] == i, "all_to_all_v", world_rank);

  check_status(c.barrier(), "barrier", world_rank);
}

}  // namespace

int main(int argc, char** argv) {
  auto rt = gpt2::MpiRuntime::init(&argc, &argv);
  if (!rt.ok()) {
    std::fprintf(stderr, "%s\n", rt.status().to_string().c_str());
    return 1;
  }
  const int rank = (*rt)->world_rank();
  {
    auto world = std::make_unique<gpt2::ProbedCommunicator>((*rt)->world(), nullptr, nullptr);
    exercise(*world, rank);
    auto groups = gpt2::make_process_groups(std::move(world), 2, 2);
    if (!groups.ok()) {
      std::fprintf(stderr, "%s\n", groups.status().to_string().c_str());
      return 1;
    }
    // Megatron: tp{k} = consecutive ranks, dp{j} = ranks j, j+TP, ...
    check(groups->tp->name() == "tp" + std::to_string(rank / 2) && groups->tp->rank() == rank % 2, "tp group", rank);
    check(groups->dp->name() == "dp" + std::to_string(rank % 2) && groups->dp->rank() == rank / 2, "dp group", rank);
    // EP 2 over DP 2 (4 ranks): ep{tp_rank} = dp{tp_rank}; every edp group is a single rank.
    const bool has_ep = groups->ep && groups->edp;
    check(has_ep, "ep groups", rank);
    if (has_ep) {
      check(groups->ep->name() == "ep" + std::to_string(rank % 2) && groups->ep->rank() == rank / 2 &&
                groups->ep->size() == groups->dp->size(), "ep group", rank);
      check(groups->edp->name() == "edp" + std::to_string((rank / 2 % 2) * 2 + rank % 2) &&
                groups->edp->size() == groups->dp->size() / 2, "edp group", rank);
      exercise(*groups->ep, rank);
      exercise(*groups->edp, rank);
    }
    exercise(*groups->tp, rank);
    exercise(*groups->dp, rank);
    exercise(*groups->world, rank);
    // Clock exchange: every non-root pings rank 0 once.
    auto clock = (*rt)->clock_exchange();
    if (rank == 0) {
      for (int p = 1; p < (*rt)->world_size(); ++p) clock->serve(p);
    } else {
      check(clock->ping_root(1) > 0, "clock ping", rank);
    }
    clock->barrier();
  }
  if (failures == 0 && rank == 0) std::printf("all collectives agree on %d ranks\n", (*rt)->world_size());
  return failures == 0 ? 0 : 1;
}
