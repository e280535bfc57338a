// rank_roles.h — which rank of one run does the work of which rank of the other (ranks
// matched "by rank, and by role where world sizes differ").
//
// Is: the rule and the labels. Two runs with the same world size and the same model-parallel groups
// in run.json (the kinds below; data-parallel, world and backend groups are named differently by
// different producers of one job) match rank by rank. Otherwise a rank's role is its place in each group of a model-parallel kind
// both runs have at the same size: tensor (`tp`), pipeline (`pp`), context (`cp`), expert (`ep`)
// groups, as gpt2-train and the synthetic runs name them (`tp0`, `ep1`: the kind is the name less
// its trailing digits; the place is the rank's index in the group's list, which is communicator-rank
// order, docs/FORMAT.md run.json). Data-parallel ranks do the same work on other data, so `dp` is
// never part of a role; nor is a kind whose group size changed (TP 1 -> 2: no rank of BASE does a
// tensor-parallel half). With no kind left every rank has one role, "every rank".
// Is not: a reader of PyTorch's process groups (imports name their groups otherwise; their ranks
// then match by rank when the world sizes agree, and as one role when they do not).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers::diff_detail {

struct RoleMatch {
  bool by_rank = true;                 // same world size and layout: rank r is rank r
  std::vector<std::string> kinds;      // the group kinds a role is made of ("tp"); empty by_rank or "every rank"
  std::string how;                     // one sentence: how ranks were matched and what was folded
  std::map<int, std::string> base_role, new_role;  // rank -> "tp rank 1" / "rank 5" / "every rank"
};

// `base`/`now` may be null (no readable run.json): ranks then match by rank when the world sizes
// agree, else all as one role.
RoleMatch match_roles(const format::RunMetadata* base, int base_world, const format::RunMetadata* now, int now_world);

// "tp" for "tp0", "ep" for "ep12", "world" for "world".
std::string group_kind_of(const std::string& group_name);

}  // namespace rankscope::analyzers::diff_detail
