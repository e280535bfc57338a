// wait_graph.cpp — who waits for whom.
//
// A rank inside (comm, seq) waits for every member of comm that never issued seq (its issued count
// on comm is <= seq, or its recorder is missing: a rank that wrote no dump is a stuck host). A
// member on a node a gather could not reach (ClassifyOptions::unreachable_ranks) is waited for only
// where no other member is missing: whether it entered is unknown, and its node is a finding of the
// gather's own (else each waiter of a data-parallel group would wait on each of them: 4 million
// edges at 131,072 ranks, and every unseen rank a culprit). Ranks that are waited for but wait for nobody
// missing themselves are where the hang starts: idle ranks, and ranks inside collectives that
// every member entered (a device that stopped, a collective stuck in the fabric). Waiters
// downstream (DP ranks waiting for a TP group that waits for one rank) are not blamed.
//
// A rank also waits, without anyone missing, behind a member whose device queue holds older work:
// the member entered the collective (a send's peer posted its recv), but its own oldest open
// collective is older, so its device reaches this one only after that one (NCCL work of every
// group waits on the compute stream it was issued from). These "behind" edges carry a pipeline
// stage's wait to the stage that blocks it, and a rank waiting behind another is not a culprit.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis_parts.h"

namespace rankscope::analyzers::hang {

namespace {

// The culprits: in the graph of both kinds of edges, the strongly connected parts nothing leaves
// (sinks), and in each, the ranks some rank waits on as missing. A rank waiting on nobody is a sink
// of its own. A cycle is a sink too: a stage that stopped posting is missing from its neighbour's
// send while its own open send waits behind that neighbour's older work; the missing one is the
// culprit, the one waited on only as "behind" is not. Ranks missing from each other's collectives
// (each waits on the other as missing) are no culprits: that is a desync, said as such.
std::vector<int> sink_culprits(const WaitGraph& g, size_t n) {
  std::vector<std::vector<int>> out(n), in(n);
  std::vector<uint8_t> missing(n, 0), present(n, 0);
  for (const auto* list : {&g.edges, &g.behind})
    for (const auto& e : *list) {
      if (!e.blocking) continue;
      out[size_t(e.waiter)].push_back(e.absent);
      in[size_t(e.absent)].push_back(e.waiter);
      present[size_t(e.waiter)] = present[size_t(e.absent)] = 1;
    }
  std::vector<uint8_t> misses(n, 0);  // waits on a missing rank itself
  for (const auto& e : g.edges)
    if (e.blocking) missing[size_t(e.absent)] = 1, misses[size_t(e.waiter)] = 1;
  // Kosaraju, iteratively: finishing order on `out`, then components on `in`.
  std::vector<int> order, comp(n, -1);
  std::vector<uint8_t> seen(n, 0);
  for (size_t root = 0; root < n; ++root) {
    if (!present[root] || seen[root]) continue;
    std::vector<std::pair<int, size_t>> stack = {{int(root), 0}};
    seen[root] = 1;
    while (!stack.empty()) {
      auto& [v, i] = stack.back();
      if (i < out[size_t(v)].size()) {
        const int w = out[size_t(v)][i++];
        if (!seen[size_t(w)]) {
          seen[size_t(w)] = 1;
          stack.emplace_back(w, 0);
        }
      } else {
        order.push_back(v);
        stack.pop_back();
      }
    }
  }
  int comps = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (comp[size_t(*it)] >= 0) continue;
    std::vector<int> stack = {*it};
    comp[size_t(*it)] = comps;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (int w : in[size_t(v)])
        if (comp[size_t(w)] < 0) comp[size_t(w)] = comps, stack.push_back(w);
    }
    ++comps;
  }
  std::vector<uint8_t> leaves(size_t(comps), 0);
  for (size_t v = 0; v < n; ++v)
    for (int w : out[v])
      if (comp[v] != comp[size_t(w)]) leaves[size_t(comp[v])] = 1;
  std::vector<int> culprits;
  for (size_t v = 0; v < n; ++v)
    if (present[v] && missing[v] && !misses[v] && !leaves[size_t(comp[v])]) culprits.push_back(int(v));
  return culprits;
}

}  // namespace

WaitGraph build_wait_graph(const std::vector<RankView>& views, const GroupList& groups) {
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
          std::vector<int> unseen;  // members on nodes a gather could not reach
          for (int m : group->ranks) {
            if (m < 0 || m >= int(views.size())) continue;
            const RankView& mv = views[m];
            if (!mv.readable() && mv.unreachable) {
              unseen.push_back(m);
              continue;
            }
            const int64_t issued = mv.readable() ? mv.issued(comm) : -1;
            if (issued <= int64_t(seq)) it->second.push_back(m);  // it never entered this collective
          }
          // Whether an unreachable member entered is unknown: it is waited for only where no other
          // member is missing (its node is a finding of the gather's own).
          if (it->second.empty()) it->second = std::move(unseen);
        }
      }
      bool anyone_absent = false;
      const bool blocking = rec == w.pending || !rec->host_returned;
      for (int m : it->second) {
        if (m == w.rank) continue;
        g.edges.push_back({w.rank, m, comm, seq, blocking});
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
  g.terminal = sink_culprits(g, views.size());
  std::sort(g.terminal.begin(), g.terminal.end());
  return g;
}

}  // namespace rankscope::analyzers::hang
