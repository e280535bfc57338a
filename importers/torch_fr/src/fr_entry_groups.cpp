// fr_entry_groups.cpp — entries_by_group (fr_entry_groups.h).
#include "fr_entry_groups.h"

#include <algorithm>
#include <unordered_map>

namespace rankscope::torch_fr {

std::vector<GroupEntries> entries_by_group(const FrDump& d) {
  std::vector<GroupEntries> out;
  std::unordered_map<std::string_view, size_t> index;
  // Pooled names (fr_dump.h): one group's entries share one copy, so a pointer test mostly decides.
  // Consecutive entries are often on one group: the last one is tested first; then the first
  // groups' pointers (a rank has ~13, and its entries interleave them: the hash of the name was
  // most of this function's time); the hash only for a name seen at another place or past those.
  constexpr size_t kScanned = 32;
  auto same_place = [](std::string_view a, std::string_view b) { return a.data() == b.data() && a.size() == b.size(); };
  size_t last = 0;
  for (const FrEntry& e : d.entries) {
    if (out.empty() || !same_place(out[last].name, e.group)) {
      size_t at = 0;
      const size_t scanned = std::min(out.size(), kScanned);
      while (at < scanned && !same_place(out[at].name, e.group)) ++at;
      if (at == scanned) {
        auto [it, fresh] = index.try_emplace(e.group, out.size());
        if (fresh) out.push_back({e.group, {}});
        at = it->second;
      }
      last = at;
    }
    out[last].entries.push_back(&e);
  }
  return out;
}

const std::vector<GroupEntries>& entries_by_group(const FrDump& d, int rank, const GroupedEntries* grouped,
                                                  std::vector<GroupEntries>& scratch) {
  if (grouped)
    if (auto it = grouped->find(rank); it != grouped->end()) return it->second;
  scratch = entries_by_group(d);
  return scratch;
}

const GroupEntries* find_group(const std::vector<GroupEntries>& by_group, std::string_view name) {
  for (const GroupEntries& g : by_group)
    if (g.name == name) return &g;
  return nullptr;
}

}  // namespace rankscope::torch_fr
