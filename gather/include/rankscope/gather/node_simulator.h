// node_simulator.h — what every node of a job too large for this machine would send the head.
//
// Is: the answers of a simulated gather (NodeAnswer, gather.h), byte for byte what `rankscope
// snapshot` would stream from each node of a hung job: a snapshot stream holding the node's
// manifest (its processes, alive and runnable) and its ranks' summaries (format/rank_summary.h),
// run.json from the first node; nothing from the nodes behind a dead switch. The job: `nodes`
// nodes of `ranks_per_node` ranks, each node one tensor-parallel group tp{node}, data-parallel
// groups dp{local rank} across the nodes (Megatron's layout), stuck in step `step` for `stuck_s`:
// one rank (the culprit) in its forward compute, its node's other ranks waiting for it in a tp
// all-reduce, every other rank waiting in the step's gradient all-reduce on dp; one slow node that
// reached that all-reduce seconds after the others (not a culprit: it arrived); a dead switch whose
// `dead_switch_nodes` nodes never answer. With it the head's decoding, merging and verdict are
// measured alone at 16,384 nodes and 131,072 ranks (bench/gather/gather_head_bench.cpp) and
// tested at small sizes. Is not: a model of the nodes' own cost (their snapshot), nor of the wire.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/gather/gather.h"

namespace rankscope::gather {

struct SimulatedJob {
  int nodes = 16384;
  int ranks_per_node = 8;
  int layers = 4;                              // transformer blocks: two tp all-reduces each, forward and backward
  int64_t step = 1000;                         // the step the job hangs in
  double stuck_s = 60;                         // how long the waiters have waited when the nodes are asked
  int culprit = -1;                            // -1: rank 3 of the middle node
  int slow_node = -1;                          // -1: the node a quarter of the way; -2: none
  double slow_node_late_s = 4;                 // how much later the slow node reached the gradient all-reduce
  int dead_switch_first = -1;                  // -1: the first node three quarters of the way (a multiple of 32)
  int dead_switch_nodes = 32;                  // 0: none
  int64_t now_ns = 1'796'000'000'000'000'000;  // the moment the nodes are asked (rank 0's clock)
};

struct SimulatedGather {
  std::vector<NodeAnswer> answers;  // one per node, in node order; the dead switch's are empty
  int world_size = 0;
  int culprit = -1;
  int slow_node = -1;
  std::vector<std::string> dead_hosts;
  std::vector<int> dead_ranks;
  uint64_t stream_bytes = 0;  // all answers together
};

// The name of node k: n00000, n00001, ...
std::string simulated_host(int node);

// Fails for a job that cannot be laid out (no node, a culprit or a switch outside the job).
Result<SimulatedGather> simulate_gather(const SimulatedJob& job);

}  // namespace rankscope::gather
