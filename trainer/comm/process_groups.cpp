// process_groups.cpp — Megatron's group arithmetic and the splits that realise it.
#include "process_groups.h"

#include <fmt/format.h>

namespace gpt2 {

rankscope::Result<GroupLayout> GroupLayout::make(int world_size, int tp, int ep) {
  if (tp < 1)
    return rankscope::invalid_argument(fmt::format("--tp {} must be at least 1", tp));
  if (world_size < 1 || world_size % tp != 0)
    return rankscope::invalid_argument(fmt::format(
        "world size {} is not a multiple of --tp {} (hint: launch mpirun -np with a multiple of "
        "the tensor-parallel degree)", world_size, tp));
  if (ep < 1 || (world_size / tp) % ep != 0)
    return rankscope::invalid_argument(fmt::format(
        "--ep {} does not divide the data-parallel degree {} (world size {} / --tp {}); expert "
        "parallelism is carved out of the data-parallel ranks (hint: choose --ep among the divisors "
        "of {})", ep, world_size / tp, world_size, tp, world_size / tp));
  GroupLayout l;
  l.world_size = world_size;
  l.tp = tp;
  l.dp = world_size / tp;
  l.ep = ep;
  l.edp = l.dp / ep;
  return l;
}

std::vector<rankscope::format::CommGroup> GroupLayout::groups() const {
  std::vector<rankscope::format::CommGroup> out;
  rankscope::format::CommGroup world{"world", {}};
  for (int r = 0; r < world_size; ++r) world.ranks.push_back(r);
  out.push_back(std::move(world));
  for (int k = 0; k < dp; ++k) {
    rankscope::format::CommGroup g{fmt::format("tp{}", k), {}};
    for (int i = 0; i < tp; ++i) g.ranks.push_back(k * tp + i);
    out.push_back(std::move(g));
  }
  for (int j = 0; j < tp; ++j) {
    rankscope::format::CommGroup g{fmt::format("dp{}", j), {}};
    for (int i = 0; i < dp; ++i) g.ranks.push_back(j + i * tp);
    out.push_back(std::move(g));
  }
  if (ep == 1) return out;
  // Walk the ranks in world order: a group's members come out in their communicator order
  // (ep_rank and edp_rank both grow with the world rank inside one group).
  std::vector<rankscope::format::CommGroup> eps(static_cast<size_t>(world_size / ep));
  std::vector<rankscope::format::CommGroup> edps(static_cast<size_t>(tp * ep));
  for (int r = 0; r < world_size; ++r) {
    eps[static_cast<size_t>(ep_group(r))].ranks.push_back(r);
    edps[static_cast<size_t>(edp_group(r))].ranks.push_back(r);
  }
  for (size_t k = 0; k < eps.size(); ++k) eps[k].name = fmt::format("ep{}", k);
  for (size_t m = 0; m < edps.size(); ++m) edps[m].name = fmt::format("edp{}", m);
  for (auto& g : eps) out.push_back(std::move(g));
  for (auto& g : edps) out.push_back(std::move(g));
  return out;
}

rankscope::Result<ProcessGroups> make_process_groups(std::unique_ptr<Communicator> world, int tp,
                                                     int ep) {
  RS_ASSIGN_OR_RETURN(GroupLayout layout, GroupLayout::make(world->size(), tp, ep));
  ProcessGroups g;
  g.layout = layout;
  g.rank = world->rank();
  const int r = g.rank;
  g.tp = world->split(fmt::format("tp{}", layout.tp_group(r)), layout.tp_group(r), layout.tp_rank(r));
  g.dp = world->split(fmt::format("dp{}", layout.dp_group(r)), layout.dp_group(r), layout.dp_rank(r));
  if (!g.tp || !g.dp)
    return rankscope::internal_error("splitting the world into tensor- and data-parallel groups failed");
  if (layout.ep > 1) {
    g.ep = world->split(fmt::format("ep{}", layout.ep_group(r)), layout.ep_group(r), layout.ep_rank(r));
    g.edp = world->split(fmt::format("edp{}", layout.edp_group(r)), layout.edp_group(r),
                         layout.edp_rank(r));
    if (!g.ep || !g.edp)
      return rankscope::internal_error("splitting the world into expert-parallel groups failed");
  }
  g.world = std::move(world);
  return g;
}

}  // namespace gpt2
