// fr_groups.h — the process groups of a whole job, from every rank's dump. Private to the importer.
//
// Is: the union of the named pg_config entries, and members for a group that the entries name but
// pg_config does not. Gloo records a group's ranks in its constructor, before the group has its name
// and desc (ProcessGroupGloo: record_pg_ranks right after setGroupUid(options->group_name), which is
// empty for the default group; the desc is set later), so PyTorch 2.11 writes pg_config {'': {name:
// '', desc: '', ranks: ...}} while the entries say ('0', 'default_pg'). Such a group takes, in order:
//   1. the ranks of the dump's one unnamed pg_config entry, when that dump's entries name exactly one
//      group missing from pg_config (several unnamed groups share the key '' and overwrite it);
//   2. for pg_id 0 (the default group; PyTorch gives it every rank), ranks 0..world-1;
//   3. else the ranks whose dumps name it, with a note that members may be missing.
// A desc missing from pg_config is taken from the entries. Is not: the communicator names.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "fr_entry_groups.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {

struct JobGroups {
  std::map<std::string, FrGroup> by_name;
  std::vector<std::string> notes;  // rule 3 was used: members may be missing
  std::set<std::string> members_guessed;  // groups whose members came from rule 3
};

// `world`: ranks 0..world-1 exist (from file names and every known group).
// `grouped`: each rank's entries by group, when the caller has them (fr_entry_groups.h).
JobGroups resolve_groups(const std::map<int, FrDump>& dumps, int world, const GroupedEntries* grouped = nullptr);

// Rule 3 cannot see a member whose dump is missing (a rank that died or held the GIL): Gloo's dumps
// name no group in pg_config, so the expert group of a stage whose ranks 9 and 14 left no dump would
// lose them. Megatron makes every group of one desc the same size, each in an arithmetic run of
// ranks (contiguous tensor groups, strided data and pipeline groups). A group of guessed members
// smaller than the largest of its desc takes the dump-less ranks no sibling holds that lie on its
// stride, when they are exactly as many as its missing places; otherwise it is left as it is.
// Called by resolve_groups.
void complete_from_siblings(JobGroups& groups, const std::map<int, FrDump>& dumps, int world);

}  // namespace rankscope::torch_fr

namespace rankscope::torch_fr {

// The communicator name a report uses for a group. A desc no other group of the job has is the
// name itself ("default_pg", "tp0"). A desc many groups share (Megatron gives every tensor-parallel
// group the desc TENSOR_MODEL_PARALLEL_GROUP, and the same kind of group has a different name on
// ranks of different stages) names the kind, the group's name and its members: "pipeline group 46
// (ranks 1,5,9,13)"; Megatron's descs are shortened to their role ("tensor", "expert", ...).
// `desc_is_unique`: no other group of the job has this desc.
std::string group_comm_name(const FrGroup& g, bool desc_is_unique);
// The same without the members, for the pair communicators of send/recv: "pipeline group 46".
std::string group_short_name(const FrGroup& g, bool desc_is_unique);
// "1,5,9,13", "0-7", "0,8,...,1016" (a stride of more than 3 members).
std::string compact_ranks(const std::vector<int>& ranks);

}  // namespace rankscope::torch_fr
