// wait_graph.cpp — who waits for whom.
//
// A rank inside (comm, seq) waits for every member of comm that never issued seq (its issued count
// on comm is <= seq, or its recorder is missing). Ranks that are waited for but wait for nobody
// themselves are where the hang starts; waiters downstream (DP ranks waiting for a TP group that
// waits for one rank) are not blamed.
#include <algorithm>

#include "analysis_parts.h"

namespace rankscope::hang {

WaitGraph build_wait_graph(const std::vector<RankView>& views, const std::vector<GroupView>& groups) {
  WaitGraph g;
  for (const auto& w : views) {
    if (!w.waiting() || w.dead) continue;
    for (const auto& [comm_snap, rec] : w.open) {
      const std::string& comm = comm_snap->name;
      const uint64_t seq = rec->seq;
      const GroupView* group = find_group(groups, comm);
      bool anyone_absent = false;
      if (group) {
        for (int m : group->ranks) {
          if (m == w.rank || m < 0 || m >= int(views.size())) continue;
          const RankView& mv = views[m];
          const int64_t issued = mv.readable() ? mv.issued(comm) : -1;
          if (issued > int64_t(seq)) continue;  // it entered (or passed) this collective
          g.edges.push_back({w.rank, m, comm, seq});
          anyone_absent = true;
        }
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
