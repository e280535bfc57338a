// fr_entry_groups.h — one dump's entries sorted by group name in one pass. Private to the importer.
//
// Is: for each group the dump's entries name, its entries, oldest first, groups in the order the
// dump first names them. Every pass of the import that wants "this rank's entries on group G"
// reads this instead of looking each entry's name up in a map: a rank has ~2000 entries on ~13
// groups, and 1024 ranks made the per-entry std::map<std::string, ...> lookups a third of the
// import. Is not: a cache kept in FrDump (tests build dumps entry by entry): the import makes each
// rank's once, on its worker threads, and hands them to the passes (GroupedEntries); a pass given
// none makes its own from the dump as it is then.
#pragma once

#include <map>
#include <string_view>
#include <vector>

#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {

struct GroupEntries {
  std::string_view name;  // a view of the first entry's group name: valid while the dump is
  std::vector<const FrEntry*> entries;
};

std::vector<GroupEntries> entries_by_group(const FrDump& d);

// Each rank's entries_by_group, made once by the import (the entries' places do not change after
// parsing: the dump's vector is moved, not copied, into the import's map).
using GroupedEntries = std::map<int, std::vector<GroupEntries>>;

// `grouped`'s list for `rank` when it has one; else the dump's, made into `scratch`.
const std::vector<GroupEntries>& entries_by_group(const FrDump& d, int rank, const GroupedEntries* grouped,
                                                  std::vector<GroupEntries>& scratch);

// The group named `name` in `by_group`, or null.
const GroupEntries* find_group(const std::vector<GroupEntries>& by_group, std::string_view name);

}  // namespace rankscope::torch_fr
