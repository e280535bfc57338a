// wait_graph.cpp — who waits for whom.
//
// A rank inside (comm, seq) waits for every member of comm that never issued seq (its issued count
// on comm is <= seq, or its recorder is missing). Ranks that are waited for but wait for nobody
// missing themselves are where the hang starts: idle ranks, and ranks inside collectives that
// every member entered (a device that stopped, a collective stuck in the fabric). Waiters
// downstream (DP ranks waiting for a TP group that waits for one rank) are not blamed.
//
// A rank also waits, without anyone missing, behind a member whose device queue holds older work:
// the member entered the collective (a send's peer posted its recv), but its own oldest open
// collective is older, so its device reaches this one only after that one (NCCL work of every
// group waits on the compute stream it was issued from). These "behind" edges carry a pipeline
// stage's wait to the stage that blocks it; they never make a culprit.
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
  auto group_for = [&](const std::string& comm) {
    auto [git, new_comm] = group_of.try_emplace(comm, nullptr);
    if (new_comm) git->second = find_group(groups, comm);
    return git->second;
  };
  for (const auto& w : views) {
    if (!w.waiting() || w.dead) continue;
    for (const auto& [comm_snap, rec] : w.open) {
      const std::string& comm = comm_snap->name;
      const uint64_t seq = rec->seq;
      auto [it, fresh] = absent_at.try_emplace({comm, seq});
      if (fresh) {
        if (const GroupView* group = group_for(comm)) {
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
  // Behind: the waiter's oldest open collective, entered by a member whose own oldest is older.
  // Worked out once per (comm, seq), as the absent members are.
  std::map<std::pair<std::string, uint64_t>, std::vector<int>> behind_at;
  for (const auto& w : views) {
    if (!w.waiting() || w.dead) continue;
    const std::string& comm = w.pending_comm->name;
    const uint64_t seq = w.pending->seq;
    auto [it, fresh] = behind_at.try_emplace({comm, seq});
    if (fresh) {
      if (const GroupView* group = group_for(comm)) {
        for (int m : group->ranks) {
          if (m < 0 || m >= int(views.size())) continue;
          const RankView& mv = views[m];
          if (!mv.readable() || !mv.waiting() || mv.dead) continue;
          if (mv.pending_comm->name == comm && mv.pending->seq == seq) continue;  // its oldest too
          if (mv.issued(comm) <= int64_t(seq) || !mv.inside(comm, seq)) continue;  // absent, or finished there
          it->second.push_back(m);
        }
      }
    }
    for (int m : it->second)
      if (m != w.rank) g.behind.push_back({w.rank, m, comm, seq});
  }
  std::vector<uint8_t> waits_on_absent(views.size(), 0);
  for (const auto& e : g.edges)
    if (e.waiter >= 0 && e.waiter < int(views.size())) waits_on_absent[e.waiter] = 1;
  for (const auto& e : g.edges) {
    if (waits_on_absent[e.absent]) continue;
    if (std::find(g.terminal.begin(), g.terminal.end(), e.absent) == g.terminal.end()) g.terminal.push_back(e.absent);
  }
  std::sort(g.terminal.begin(), g.terminal.end());
  return g;
}

}  // namespace rankscope::hang
