// fr_groups.cpp — the job's process groups (fr_groups.h).
#include "fr_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "fr_entry_groups.h"

namespace rankscope::torch_fr {

JobGroups resolve_groups(const std::map<int, FrDump>& dumps, int world, const GroupedEntries* grouped) {
  JobGroups out;
  for (const auto& [rank, d] : dumps)
    for (const auto& [name, g] : d.groups) out.by_name.try_emplace(name, g);  // (emplace would copy every one)

  // Groups the entries name, with what the entries say about them.
  struct Named {
    std::string desc;
    std::set<int64_t> pg_ids;
    std::set<int> seen_on;            // ranks whose dumps name it
    std::vector<int> unnamed_ranks;   // rule 1's answer, from some dump
  };
  std::map<std::string, Named> named;
  std::vector<GroupEntries> scratch;
  for (const auto& [rank, d] : dumps) {
    std::set<std::string> missing_here;
    for (const GroupEntries& group : entries_by_group(d, rank, grouped, scratch)) {
      if (group.name.empty()) continue;
      const std::string name(group.name);
      Named& n = named[name];
      int64_t last_pg_id = -1;  // a group has one pg_id on a rank: the set is touched once
      for (const FrEntry* e : group.entries) {
        if (n.desc.empty()) n.desc = e->group_desc;
        if (e->pg_id >= 0 && e->pg_id != last_pg_id) n.pg_ids.insert(last_pg_id = e->pg_id);
      }
      n.seen_on.insert(rank);
      if (!out.by_name.count(name)) missing_here.insert(name);
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
      std::vector<int> all(size_t(std::max(world, 0)));
      std::iota(all.begin(), all.end(), 0);
      g.ranks = std::move(all);
    } else {
      g.ranks = std::vector<int>(n.seen_on.begin(), n.seen_on.end());
      out.members_guessed.insert(name);
    }
    out.by_name.emplace(name, std::move(g));
  }
  if (!out.members_guessed.empty()) {
    std::string some;
    size_t shown = 0;
    for (const auto& name : out.members_guessed)
      if (shown++ < 3) some += fmt::format("{}'{}' ({})", some.empty() ? "" : ", ", name, out.by_name.at(name).desc);
    out.notes.push_back(fmt::format("{} {} not in pg_config ({}{}; Gloo's dumps name none): members are the ranks "
                                    "whose dumps name each, so a member that never called one is not seen",
                                    out.members_guessed.size(), out.members_guessed.size() == 1 ? "group is" : "groups are",
                                    some, out.members_guessed.size() > 3 ? ", ..." : ""));
  }
  complete_from_siblings(out, dumps, world);
  return out;
}

void complete_from_siblings(JobGroups& groups, const std::map<int, FrDump>& dumps, int world) {
  // Ranks with no dump, and which group already holds each.
  std::set<int> no_dump;
  for (int r = 0; r < world; ++r)
    if (!dumps.count(r)) no_dump.insert(r);
  if (no_dump.empty()) return;
  std::map<std::string, size_t> sibling_size;  // desc -> the largest group of that desc
  for (const auto& [name, g] : groups.by_name)
    if (!g.desc.empty()) sibling_size[g.desc] = std::max(sibling_size[g.desc], g.ranks.size());
  for (const auto& name : groups.members_guessed) {
    FrGroup& g = groups.by_name.at(name);
    const size_t want = sibling_size[g.desc];
    if (g.desc.empty() || g.ranks.empty() || g.ranks.size() >= want) continue;
    std::set<int> held;
    for (const auto& [other, og] : groups.by_name)
      if (other != name && og.desc == g.desc) held.insert(og.ranks.begin(), og.ranks.end());
    // The stride the members already show (1 for a contiguous tensor group, TP for a data group).
    // One member shows no stride: a contiguous run is tried (tensor groups).
    int stride = g.ranks.size() == 1 ? 1 : 0;
    for (size_t i = 1; i < g.ranks.size(); ++i) stride = std::gcd(stride, g.ranks[i] - g.ranks[i - 1]);
    // The places inside the run the members span first (a hole), then past its ends.
    auto fitting = [&](int lo, int hi) {
      std::vector<int> fits;
      for (int r : no_dump)
        if (!held.count(r) && stride > 0 && (r - g.ranks.front()) % stride == 0 && r >= lo && r <= hi) fits.push_back(r);
      return fits;
    };
    const int reach = int(want - g.ranks.size()) * stride;
    std::vector<int> fits = fitting(g.ranks.front(), g.ranks.back());
    if (fits.size() != want - g.ranks.size()) fits = fitting(g.ranks.front() - reach, g.ranks.back() + reach);
    if (fits.size() != want - g.ranks.size()) continue;  // not exactly the missing places: leave it
    std::vector<int> members = g.ranks;
    members.insert(members.end(), fits.begin(), fits.end());
    std::sort(members.begin(), members.end());
    g.ranks = std::move(members);
    const bool one = fits.size() == 1;
    groups.notes.push_back(fmt::format("group '{}' ({}): {} {} {} no dump and {} taken as {}: the largest group of that "
                                       "desc has {} members, and {} its missing places",
                                       name, g.desc, one ? "rank" : "ranks", compact_ranks(fits), one ? "has" : "have",
                                       one ? "is" : "are",
                                       one ? "a member" : "members", want, one ? "it fills" : "they fill"));
  }
}

}  // namespace rankscope::torch_fr

namespace rankscope::torch_fr {
namespace {

// Megatron-LM's group descs (megatron/core/parallel_state.py, initialize_model_parallel's
// group_desc arguments) shortened to the role a reader knows them by.
std::string role_of(const std::string& desc) {
  static const std::map<std::string, std::string> kRoles = {
      {"DATA_PARALLEL_GROUP", "data"},
      {"DATA_PARALLEL_GROUP_WITH_CP", "data+context"},
      {"INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", "partial data+context"},
      {"CONTEXT_PARALLEL_GROUP", "context"},
      {"MODEL_PARALLEL_GROUP", "model"},
      {"TENSOR_MODEL_PARALLEL_GROUP", "tensor"},
      {"PIPELINE_MODEL_PARALLEL_GROUP", "pipeline"},
      {"EMBEDDING_GROUP", "embedding"},
      {"POSITION_EMBEDDING_GROUP", "position embedding"},
      {"TENSOR_AND_DATA_PARALLEL_GROUP", "tensor+data"},
      {"TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", "tensor+data+context"},
      {"TENSOR_AND_CONTEXT_PARALLEL_GROUP", "tensor+context"},
      {"HIERARCHICAL_CONTEXT_PARALLEL_GROUP", "hierarchical context"},
      {"EXPERT_MODEL_PARALLEL_GROUP", "expert"},
      {"EXPERT_TENSOR_PARALLEL_GROUP", "expert-tensor"},
      {"EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", "expert-tensor+expert"},
      {"EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", "expert-tensor+expert+pipeline"},
      {"EXPERT_DATA_PARALLEL_GROUP", "expert-data"},
      {"INTRA_EXPERT_DATA_PARALLEL_GROUP", "intra expert-data"},
      {"INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP", "inter expert-data"},
      {"INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", "distributed-optimizer"},
      {"default_pg", "default"},
  };
  if (auto it = kRoles.find(desc); it != kRoles.end()) return it->second;
  return desc.empty() || desc == "undefined" ? "process" : desc;
}

}  // namespace

std::string compact_ranks(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  if (ranks.size() > 3) {
    const int stride = ranks[1] - ranks[0];
    bool even = stride > 1;
    for (size_t i = 1; i < ranks.size() && even; ++i) even = ranks[i] - ranks[i - 1] == stride;
    if (even) return fmt::format("{},{},...,{}", ranks[0], ranks[1], ranks.back());
  }
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string group_short_name(const FrGroup& g, bool desc_is_unique) {
  if (desc_is_unique && !g.desc.empty() && g.desc != "undefined") return g.desc;
  return fmt::format("{} group {}", role_of(g.desc), g.name);
}

std::string group_comm_name(const FrGroup& g, bool desc_is_unique) {
  if (desc_is_unique && !g.desc.empty() && g.desc != "undefined") return g.desc;
  return fmt::format("{} ({} {})", group_short_name(g, false), g.ranks.size() == 1 ? "rank" : "ranks", compact_ranks(g.ranks));
}

}  // namespace rankscope::torch_fr
