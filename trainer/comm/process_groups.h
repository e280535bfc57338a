// process_groups.h — which ranks form which group, and the communicators of those groups.
//
// Is: the Megatron layout — tensor-parallel groups of consecutive ranks (tp{k} = ranks
// k*TP .. k*TP+TP-1), data-parallel groups strided by TP (dp{j} = ranks j, j+TP, j+2*TP, ...) — as
// pure arithmetic (GroupLayout, also written into run.json) and as communicators split from the
// world (ProcessGroups). Expert parallelism is carved out of the data-parallel ranks as Megatron
// does: within dp{j}, EP consecutive DP positions form an expert-parallel group ep{k} (they hold
// different experts and exchange tokens), and the DP positions that hold the same experts (stride
// EP) form an expert-data-parallel group edp{m} that reduces expert gradients.
// Is not: a communicator implementation.
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
  int ep = 1;   // expert-parallel degree, divides dp
  int edp = 1;  // expert-data-parallel degree, dp / ep

  // Fails with a hint when world_size is not a multiple of tp, or dp not a multiple of ep.
  static rankscope::Result<GroupLayout> make(int world_size, int tp, int ep = 1);

  int tp_group(int rank) const { return rank / tp; }  // k of tp{k}
  int tp_rank(int rank) const { return rank % tp; }   // position inside tp{k}
  int dp_group(int rank) const { return rank % tp; }  // j of dp{j}
  int dp_rank(int rank) const { return rank / tp; }   // position inside dp{j}
  // ep{k}: k = (dp_rank / ep) * tp + tp_rank; EP groups are numbered 0 .. world/ep - 1.
  int ep_group(int rank) const { return dp_rank(rank) / ep * tp + tp_rank(rank); }
  int ep_rank(int rank) const { return dp_rank(rank) % ep; }  // position inside ep{k}
  // edp{m}: m = (dp_rank % ep) * tp + tp_rank; numbered 0 .. tp*ep - 1.
  int edp_group(int rank) const { return ep_rank(rank) * tp + tp_rank(rank); }
  int edp_rank(int rank) const { return dp_rank(rank) / ep; }  // position inside edp{m}
  // world, tp0..tp{DP-1}, dp0..dp{TP-1}, and when ep > 1 ep0..ep{W/EP-1}, edp0..edp{TP*EP-1}, each
  // with its world ranks in communicator order.
  std::vector<rankscope::format::CommGroup> groups() const;
};

struct ProcessGroups {
  GroupLayout layout;
  int rank = 0;                          // world rank
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> tp;      // this rank's tp{k}
  std::unique_ptr<Communicator> dp;      // this rank's dp{j}
  std::unique_ptr<Communicator> ep;      // this rank's ep{k}; null when layout.ep == 1
  std::unique_ptr<Communicator> edp;     // this rank's edp{m}; null when layout.ep == 1
};

// Splits `world` into this rank's TP and DP (and, for ep > 1, EP and EDP) communicators
// (collective over the world). The new communicators are made by world->split, so a
// ProbedCommunicator world yields probed groups.
rankscope::Result<ProcessGroups> make_process_groups(std::unique_ptr<Communicator> world, int tp,
                                                     int ep = 1);

}  // namespace gpt2
