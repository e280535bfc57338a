// process_groups.h — which ranks form which group, and the communicators of those groups.
//
// Is: the Megatron layout — tensor-parallel groups of consecutive ranks (tp{k} = ranks
// k*TP .. k*TP+TP-1), data-parallel groups strided by TP (dp{j} = ranks j, j+TP, j+2*TP, ...) — as
// pure arithmetic (GroupLayout, also written into run.json) and as communicators split from the
// world (ProcessGroups). Is not: a communicator implementation.
#pragma once

#include <memory>
#include <vector>

#include "communicator.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/format/status.h"

namespace gpt2 {

struct GroupLayout {
  int world_size = 1;
  int tp = 1;
  int dp = 1;

  // Fails with a hint when world_size is not a multiple of tp.
  static rankscope::Result<GroupLayout> make(int world_size, int tp);

  int tp_group(int rank) const { return rank / tp; }  // k of tp{k}
  int tp_rank(int rank) const { return rank % tp; }   // position inside tp{k}
  int dp_group(int rank) const { return rank % tp; }  // j of dp{j}
  int dp_rank(int rank) const { return rank / tp; }   // position inside dp{j}
  // world, tp0..tp{DP-1}, dp0..dp{TP-1}, each with its world ranks in communicator order.
  std::vector<rankscope::format::CommGroup> groups() const;
};

struct ProcessGroups {
  GroupLayout layout;
  int rank = 0;                          // world rank
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> tp;      // this rank's tp{k}
  std::unique_ptr<Communicator> dp;      // this rank's dp{j}
};

// Splits `world` into this rank's TP and DP communicators (collective over the world). The new
// communicators are made by world->split, so a ProbedCommunicator world yields probed groups.
rankscope::Result<ProcessGroups> make_process_groups(std::unique_ptr<Communicator> world, int tp);

}  // namespace gpt2
