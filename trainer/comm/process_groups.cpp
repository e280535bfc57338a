// process_groups.cpp — Megatron's group arithmetic and the splits that realise it.
#include "process_groups.h"

#include <fmt/format.h>

namespace gpt2 {

rankscope::Result<GroupLayout> GroupLayout::make(int world_size, int tp) {
  if (tp < 1)
    return rankscope::invalid_argument(fmt::format("--tp {} must be at least 1", tp));
  if (world_size < 1 || world_size % tp != 0)
    return rankscope::invalid_argument(fmt::format(
        "world size {} is not a multiple of --tp {} (hint: launch mpirun -np with a multiple of "
        "the tensor-parallel degree)", world_size, tp));
  GroupLayout l;
  l.world_size = world_size;
  l.tp = tp;
  l.dp = world_size / tp;
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
  return out;
}

rankscope::Result<ProcessGroups> make_process_groups(std::unique_ptr<Communicator> world, int tp) {
  RS_ASSIGN_OR_RETURN(GroupLayout layout, GroupLayout::make(world->size(), tp));
  ProcessGroups g;
  g.layout = layout;
  g.rank = world->rank();
  const int r = g.rank;
  g.tp = world->split(fmt::format("tp{}", layout.tp_group(r)), layout.tp_group(r), layout.tp_rank(r));
  g.dp = world->split(fmt::format("dp{}", layout.dp_group(r)), layout.dp_group(r), layout.dp_rank(r));
  if (!g.tp || !g.dp)
    return rankscope::internal_error("splitting the world into tensor- and data-parallel groups failed");
  g.world = std::move(world);
  return g;
}

}  // namespace gpt2
