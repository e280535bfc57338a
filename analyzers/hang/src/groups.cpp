// groups.cpp — which ranks form which communicator, innermost first.
#include <algorithm>
#include <unordered_map>

#include "analysis_parts.h"

namespace rankscope::analyzers::hang {
namespace {

int role_order(const std::string& name) {
  if (name.rfind("tp", 0) == 0) return 0;
  if (name.rfind("dp", 0) == 0) return 1;
  if (name == "world") return 3;
  return 2;
}

}  // namespace

GroupList build_groups(const format::RunDirectory& run, const std::vector<RankView>& views) {
  GroupList groups;
  // Group name -> index in `groups`, and whether run.json lists it: at 16K ranks there are
  // thousands of groups, and every rank names three.
  std::unordered_map<std::string, std::pair<size_t, bool>> index;
  if (run.metadata)
    for (const auto& g : run.metadata->groups)
      if (index.try_emplace(g.name, groups.size(), true).second) groups.push_back({g.name, g.ranks});
  // Communicators only the recorders know (run.json missing, or a program that did not list them).
  for (const auto& v : views) {
    if (!v.readable()) continue;
    for (const auto& c : v.snap->comms) {
      auto [it, fresh] = index.try_emplace(c.name, groups.size(), false);
      if (fresh) groups.push_back({c.name, {}});
      if (it->second.second) continue;  // run.json is authoritative (it also lists ranks whose recorder is missing)
      std::vector<int>& ranks = groups[it->second.first].ranks;
      // Views come in rank order: a rank already listed is the last one (no quadratic search).
      if (ranks.empty() || ranks.back() != v.rank) ranks.push_back(v.rank);
    }
  }
  std::stable_sort(groups.begin(), groups.end(), [](const GroupView& a, const GroupView& b) {
    // TP nests inside DP whatever the sizes; unknown communicators sort by size between them.
    if (role_order(a.name) != role_order(b.name)) return role_order(a.name) < role_order(b.name);
    return a.ranks.size() < b.ranks.size();
  });
  for (size_t i = 0; i < groups.size(); ++i) groups.index.emplace(groups[i].name, i);
  return groups;
}

const GroupView* find_group(const GroupList& groups, const std::string& name) {
  const auto it = groups.index.find(name);
  return it == groups.index.end() ? nullptr : &groups[it->second];
}

int innermost_rank(const GroupList& groups, const std::string& name) {
  const auto it = groups.index.find(name);
  return it == groups.index.end() ? int(groups.size()) : int(it->second);
}

CollectiveRef collective_ref(const std::string& comm, const format::CollectiveSnapshot& rec) {
  return {comm, rec.seq, rec.op, rec.dtype, rec.count, rec.bytes, std::string(rec.range)};
}

}  // namespace rankscope::analyzers::hang
