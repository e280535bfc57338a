// rank_roles.cpp — ranks matched by rank or by role between two runs (rank_roles.h).
#include "rank_roles.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

namespace rankscope::analyzers::diff_detail {
namespace {

// Model-parallel kinds, in the order a role names them.
constexpr const char* kRoleKinds[] = {"tp", "cp", "ep", "pp"};

struct Layout {
  std::map<int, std::map<std::string, int>> place;  // rank -> kind -> index in its group of that kind
  std::map<std::string, int> size;                   // kind -> group size; -1 when its groups differ in size
};

Layout layout_of(const format::RunMetadata& m) {
  Layout l;
  for (const auto& g : m.groups) {
    const std::string kind = group_kind_of(g.name);
    bool role_kind = false;
    for (const char* k : kRoleKinds) role_kind = role_kind || kind == k;
    if (!role_kind) continue;
    const int n = static_cast<int>(g.ranks.size());
    auto [it, fresh] = l.size.emplace(kind, n);
    if (!fresh && it->second != n) it->second = -1;
    for (int i = 0; i < n; ++i) l.place[g.ranks[size_t(i)]][kind] = i;
  }
  return l;
}

// The same model-parallel groups (names and ranks) in both: data-parallel, world and backend
// groups are left out, as producers name those differently (a probe's "world", an import's
// "gloo:0") for the same job.
bool same_role_groups(const format::RunMetadata& a, const format::RunMetadata& b) {
  auto role_groups = [](const format::RunMetadata& m) {
    std::vector<std::pair<std::string, std::vector<int>>> out;
    for (const auto& g : m.groups) {
      const std::string kind = group_kind_of(g.name);
      for (const char* k : kRoleKinds)
        if (kind == k && g.ranks.size() > 1) out.emplace_back(g.name, g.ranks);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  return role_groups(a) == role_groups(b);
}

std::string role_label(const Layout& l, int rank, const std::vector<std::string>& kinds) {
  std::string out;
  const auto it = l.place.find(rank);
  for (const auto& k : kinds) {
    std::string place = "?";
    if (it != l.place.end())
      if (auto p = it->second.find(k); p != it->second.end()) place = std::to_string(p->second);
    out += fmt::format("{}{} rank {}", out.empty() ? "" : ", ", k, place);
  }
  return out.empty() ? "every rank" : out;
}

}  // namespace

std::string group_kind_of(const std::string& group_name) {
  size_t end = group_name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(group_name[end - 1]))) --end;
  return group_name.substr(0, end);
}

RoleMatch match_roles(const format::RunMetadata* base, int base_world, const format::RunMetadata* now, int now_world) {
  RoleMatch m;
  const bool layouts_known = base && now;
  m.by_rank = base_world == now_world && (!layouts_known || same_role_groups(*base, *now));
  if (m.by_rank) {
    m.how = layouts_known ? "ranks matched by rank (the same world size and model-parallel groups)"
                          : "ranks matched by rank (the same world size; a run.json with groups is missing)";
    for (int r = 0; r < base_world; ++r) m.base_role[r] = fmt::format("rank {}", r);
    for (int r = 0; r < now_world; ++r) m.new_role[r] = fmt::format("rank {}", r);
    return m;
  }
  const std::string why = base_world != now_world ? fmt::format("world sizes differ ({} -> {})", base_world, now_world)
                                                  : "the model-parallel groups differ";
  std::string folded;
  Layout lb, ln;
  if (layouts_known) {
    lb = layout_of(*base);
    ln = layout_of(*now);
    for (const char* k : kRoleKinds) {
      const int sb = lb.size.count(k) ? lb.size.at(k) : 1, sn = ln.size.count(k) ? ln.size.at(k) : 1;
      if (sb == sn && sb > 1) {
        m.kinds.push_back(k);
      } else if (sb != sn) {
        folded += fmt::format("; {} groups of {} -> {} ranks do different work, so {} place is not part of a role", k,
                              sb < 0 ? "mixed sizes" : std::to_string(sb), sn < 0 ? "mixed sizes" : std::to_string(sn), k);
      }
    }
  } else {
    folded = "; a run.json with groups is missing, so no role is known";
  }
  if (m.kinds.empty()) {
    m.how = fmt::format("{}: every rank taken as one role (data-parallel ranks averaged){}", why, folded);
  } else {
    std::string kinds;
    for (const auto& k : m.kinds) kinds += (kinds.empty() ? "" : ", ") + k;
    m.how = fmt::format("{}: ranks matched by their place in the {} groups (the same size in both runs); "
                        "data-parallel ranks averaged{}",
                        why, kinds, folded);
  }
  for (int r = 0; r < base_world; ++r) m.base_role[r] = role_label(lb, r, m.kinds);
  for (int r = 0; r < now_world; ++r) m.new_role[r] = role_label(ln, r, m.kinds);
  return m;
}

}  // namespace rankscope::analyzers::diff_detail
