// fr_entry_groups.cpp — entries_by_group (fr_entry_groups.h).
#include "fr_entry_groups.h"

#include <unordered_map>

namespace rankscope::torch_fr {

std::vector<GroupEntries> entries_by_group(const FrDump& d) {
  std::vector<GroupEntries> out;
  std::unordered_map<std::string_view, size_t> index;
  size_t last = 0;  // consecutive entries are often on one group: checked before the hash
  for (const FrEntry& e : d.entries) {
    // Pooled names (fr_dump.h): one group's entries share one copy, so the pointer test mostly decides.
    if (out.empty() || (out[last].name.data() != e.group.data() && out[last].name != e.group)) {
      auto [it, fresh] = index.try_emplace(e.group, out.size());
      if (fresh) out.push_back({e.group, {}});
      last = it->second;
    }
    out[last].entries.push_back(&e);
  }
  return out;
}

const GroupEntries* find_group(const std::vector<GroupEntries>& by_group, std::string_view name) {
  for (const GroupEntries& g : by_group)
    if (g.name == name) return &g;
  return nullptr;
}

}  // namespace rankscope::torch_fr
