// fr_p2p.h — send/recv entries paired across ranks. Private to the importer.
//
// Is: one pair communicator per (group, lower rank, higher rank), and on each side the number every
// send or recv has on it, so that a send and the recv it meets carry the same number. NCCL matches
// point-to-point calls between two ranks of one communicator in the order each side posts them. A
// dump holds a window (the last entries, or only the active ones), so that order is known only
// through the counter PyTorch stamps: p2p_seq_id, which counts every send/recv of the process group
// on that rank (ProcessGroupNCCL::pointToPoint bumps seqP2P_). It numbers the pair's calls alike on
// both sides when each side's send/recv on that group go only to the other: a two-member group, or
// Megatron's pipeline with two stages, whose one direction runs on the default group
// (megatron/core/pipeline_parallel/p2p_communication.py, _p2p_ops: even_recv_odd_send_group =
// WORLD when the pipeline has two stages). Such a pair is "aligned": a call's number is its
// p2p_seq_id, and a side's pg_status row (p2p-numbered, fr_pg_status.h) says how far it got even
// with no entry left. Otherwise (a stage of a longer pipeline talks to both neighbours on one
// group) the pair's open calls are numbered 1, 2, ... on each side in posting order: the first open
// send meets the first open recv, and a side with none open never posted it.
// Is not: the records themselves (fr_import.cpp builds them).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fr_entry_groups.h"
#include "fr_pg_status.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {

struct PairSide {
  std::vector<std::pair<const FrEntry*, uint64_t>> calls;  // (entry, its number on the pair), oldest first
  uint64_t next_seq = 0;         // numbers issued: every call numbered below it was posted
  uint64_t completed_count = 0;  // every call numbered below it completed
};

struct PairComm {
  std::string group;  // group name
  int lo = -1, hi = -1;  // global ranks
  bool aligned = false;
  int src = -1;       // not aligned: the direction, src sends to the other (-1 when aligned: both directions)
  std::map<int, PairSide> sides;  // by global rank: lo and hi (a side with nothing posted is present too)
};

// Every pair some dump names, with both sides filled.
std::vector<PairComm> pair_p2p(const std::map<int, FrDump>& dumps, const std::map<std::string, FrGroup>& groups,
                               const std::map<int, std::map<std::string, GroupProgress>>& progress,
                               const GroupedEntries* grouped = nullptr);  // as resolve_groups' (fr_groups.h)

}  // namespace rankscope::torch_fr
