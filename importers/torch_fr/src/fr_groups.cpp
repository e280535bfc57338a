// fr_groups.cpp — the job's process groups (fr_groups.h).
#include "fr_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace rankscope::torch_fr {

JobGroups resolve_groups(const std::map<int, FrDump>& dumps, int world) {
  JobGroups out;
  for (const auto& [rank, d] : dumps)
    for (const auto& [name, g] : d.groups) out.by_name.emplace(name, g);

  // Groups the entries name, with what the entries say about them.
  struct Named {
    std::string desc;
    std::set<int64_t> pg_ids;
    std::set<int> seen_on;            // ranks whose dumps name it
    std::vector<int> unnamed_ranks;   // rule 1's answer, from some dump
  };
  std::map<std::string, Named> named;
  for (const auto& [rank, d] : dumps) {
    std::set<std::string> missing_here;
    for (const FrEntry& e : d.entries) {
      if (e.group.empty()) continue;
      Named& n = named[e.group];
      if (n.desc.empty()) n.desc = e.group_desc;
      if (e.pg_id >= 0) n.pg_ids.insert(e.pg_id);
      n.seen_on.insert(rank);
      if (!out.by_name.count(e.group)) missing_here.insert(e.group);
    }
    if (missing_here.size() == 1 && d.unnamed_group_ranks.size() == 1)
      named[*missing_here.begin()].unnamed_ranks = d.unnamed_group_ranks.front();
  }

  for (auto& [name, n] : named) {
    auto it = out.by_name.find(name);
    if (it != out.by_name.end()) {
      if (it->second.desc.empty() || it->second.desc == "undefined") it->second.desc = n.desc;
      continue;
    }
    FrGroup g;
    g.name = name;
    g.desc = n.desc;
    if (!n.unnamed_ranks.empty()) {
      g.ranks = n.unnamed_ranks;
    } else if (n.pg_ids.count(0)) {
      g.ranks.resize(size_t(std::max(world, 0)));
      std::iota(g.ranks.begin(), g.ranks.end(), 0);
    } else {
      g.ranks.assign(n.seen_on.begin(), n.seen_on.end());
      out.notes.push_back(fmt::format("group '{}' ({}): not in pg_config; members are the ranks whose dumps name it, so "
                                      "a member that never called it is not seen",
                                      name, n.desc));
    }
    out.by_name.emplace(name, std::move(g));
  }
  return out;
}

}  // namespace rankscope::torch_fr
