// wait_graph.cpp — who waits for whom.
//
// A rank inside (comm, seq) waits for every member of comm that never issued seq (its issued count
// on comm is <= seq, or its recorder is missing). Ranks that are waited for but wait for nobody
// themselves are where the hang starts; waiters downstream (DP ranks waiting for a TP group that
// waits for one rank) are not blamed.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis_parts.h"

namespace rankscope::hang {

WaitGraph build_wait_graph(const std::vector<RankView>& views, const std::vector<GroupView>& groups) {
  WaitGraph g;
  // Thousands of waiters share a few (comm, seq): who never issued it is worked out once for each
  // (at 16K ranks a DP group has thousands of members).
  std::map<std::pair<std::string, uint64_t>, std::vector<int>> absent_at;
  std::unordered_map<std::string, const GroupView*> group_of;
  for (const auto& w : views) {
    if (!w.waiting() || w.dead) continue;
    for (const auto& [comm_snap, rec] : w.open) {
      const std::string& comm = comm_snap->name;
      const uint64_t seq = rec->seq;
      auto [it, fresh] = absent_at.try_emplace({comm, seq});
      if (fresh) {
        auto [git, new_comm] = group_of.try_emplace(comm, nullptr);
        if (new_comm) git->second = find_group(groups, comm);
        if (const GroupView* group = git->second) {
          for (int m : group->ranks) {
            if (m < 0 || m >= int(views.size())) continue;
            const RankView& mv = views[m];
            const int64_t issued = mv.readable() ? mv.issued(comm) : -1;
            if (issued <= int64_t(seq)) it->second.push_back(m);  // it never entered this collective
          }
        }
      }
      bool anyone_absent = false;
      for (int m : it->second) {
        if (m == w.rank) continue;
        g.edges.push_back({w.rank, m, comm, seq});
        anyone_absent = true;
      }
      if (!anyone_absent) g.all_entered.push_back({w.rank, -1, comm, seq});
    }
  }
  for (const auto& e : g.edges) {
    const RankView& a = views[e.absent];
    const bool waits_itself = a.readable() && a.waiting() && !a.dead;
    if (!waits_itself && std::find(g.terminal.begin(), g.terminal.end(), e.absent) == g.terminal.end())
      g.terminal.push_back(e.absent);
  }
  std::sort(g.terminal.begin(), g.terminal.end());
  return g;
}

}  // namespace rankscope::hang
