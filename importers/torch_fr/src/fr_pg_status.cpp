// fr_pg_status.cpp — pg_status rows named and read (fr_pg_status.h).
#include "fr_pg_status.h"

#include <charconv>
#include <optional>
#include <vector>

#include "fr_entry_groups.h"

namespace rankscope::torch_fr {
namespace {

// The creation index a group name encodes (torch's group counter), or nullopt for other names
// (hashed names from use_local_synchronization, split_group's, user-given ones).
std::optional<int64_t> creation_index(const std::string& name) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
  if (ec != std::errc() || p != name.data() + name.size() || name.empty()) return std::nullopt;
  return v;
}

}  // namespace

void resolve_pg_status(FrDump& d) {
  d.status.clear();
  // Fixed points: ids the entries name.
  std::map<int64_t, std::string> named = d.pg_id_names;
  // Names this rank's pg_config holds, by creation index; all of them must be numbers.
  std::map<int64_t, std::string> by_index;
  bool numeric = true;
  for (const auto& [name, g] : d.groups) {
    if (auto i = creation_index(name)) by_index.emplace(*i, name);
    else numeric = false;
  }
  if (numeric && !by_index.empty()) {
    std::map<std::string, int64_t> index_of;
    for (const auto& [i, name] : by_index) index_of[name] = i;
    // The fixed points must themselves be in creation order, else the rule does not hold here.
    bool ordered = true;
    int64_t last = -1;
    for (const auto& [id, name] : named) {
      auto it = index_of.find(name);
      if (it == index_of.end()) continue;  // a group pg_config does not list (Gloo's unnamed one)
      if (it->second <= last) ordered = false;
      last = it->second;
    }
    if (ordered) {
      // Walk the gaps between fixed points: ids in (lo_id, hi_id), names in (lo_index, hi_index).
      std::vector<std::pair<int64_t, int64_t>> fixed = {{INT64_MIN, INT64_MIN}};  // (pg_id, creation index)
      for (const auto& [id, name] : named)
        if (auto it = index_of.find(name); it != index_of.end()) fixed.emplace_back(id, it->second);
      fixed.emplace_back(INT64_MAX, INT64_MAX);
      for (size_t k = 0; k + 1 < fixed.size(); ++k) {
        std::vector<int64_t> ids;
        std::vector<std::string> names;
        for (const auto& [id, st] : d.status_by_pg_id)
          if (id > fixed[k].first && id < fixed[k + 1].first && !named.count(id)) ids.push_back(id);
        for (const auto& [i, name] : by_index)
          if (i > fixed[k].second && i < fixed[k + 1].second) names.push_back(name);
        if (ids.size() != names.size()) continue;  // not one group per row here: leave them unnamed
        for (size_t j = 0; j < ids.size(); ++j) named[ids[j]] = names[j];
      }
    }
  }
  for (const auto& [id, st] : d.status_by_pg_id)
    if (auto it = named.find(id); it != named.end()) d.status[it->second] = st;
}

std::map<int, std::map<std::string, GroupProgress>> group_progress(const std::map<int, FrDump>& dumps,
                                                                   const GroupedEntries* grouped) {
  std::map<int, std::map<std::string, GroupProgress>> out;
  // group -> numbering agreed by the members that show it (kUnknown: none yet; a disagreement
  // leaves it unknown for good).
  std::map<std::string, std::pair<SeqNumbering, bool>> agreed;
  std::vector<GroupEntries> scratch;
  for (const auto& [rank, d] : dumps) {
    const std::vector<GroupEntries>& by_group = entries_by_group(d, rank, grouped, scratch);  // oldest first
    for (const auto& [group, st] : d.status) {
      GroupProgress p;
      p.status = st;
      // Completed past enqueued: the two counters come from works of different kinds (a send/recv
      // completed last, a collective was enqueued last), so the completed one is in the other
      // numbering and says nothing here.
      if (p.status.last_completed > p.status.last_enqueued) p.status.last_completed = -1;
      if (const GroupEntries* mine = find_group(by_group, group)) {
        const FrEntry& e = *mine->entries.back();
        if (e.is_p2p && e.p2p_seq == st.last_enqueued) p.numbering = SeqNumbering::kP2P;
        else if (!e.is_p2p && e.collective_seq == st.last_enqueued) p.numbering = SeqNumbering::kCollective;
        if (p.numbering != SeqNumbering::kUnknown) {
          auto [a, fresh] = agreed.try_emplace(group, p.numbering, true);
          if (!fresh && a->second.first != p.numbering) a->second.second = false;
        }
      }
      out[rank][group] = p;
    }
  }
  for (auto& [rank, groups] : out)
    for (auto& [group, p] : groups) {
      if (p.numbering != SeqNumbering::kUnknown) continue;
      if (auto a = agreed.find(group); a != agreed.end() && a->second.second) p.numbering = a->second.first;
    }
  return out;
}

}  // namespace rankscope::torch_fr
