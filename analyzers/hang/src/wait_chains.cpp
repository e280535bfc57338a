// wait_chains.cpp — per culprit, who waits on it and through what (diagnosis.h WaitChain).
//
// From the wait graph: the collectives the culprit never entered, each with the ranks inside it;
// then every rank that waits on one of those ranks in turn, through a missing rank or behind a
// device queue (wait_graph.cpp), followed back as far as it goes: in a pipeline, the stages before
// the blocked one wait on it through their sends and receives. Is not: the choice of culprits.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis_parts.h"

namespace rankscope::analyzers::hang {

std::vector<WaitChain> wait_chains(const WaitGraph& g, const std::vector<int>& culprits, const std::vector<RankView>& views) {
  // Who waits on whom, backwards: target -> (waiter, comm).
  std::unordered_map<int, std::vector<std::pair<int, const std::string*>>> waiters_of;
  for (const auto* list : {&g.edges, &g.behind})
    for (const auto& e : *list) waiters_of[e.absent].emplace_back(e.waiter, &e.comm);
  const std::set<int> culprit_set(culprits.begin(), culprits.end());
  std::vector<WaitChain> out;
  for (int c : culprits) {
    WaitChain chain;
    chain.culprit = c;
    // Per communicator, the first collective it never entered: the later ones wait behind it.
    std::map<std::string, uint64_t> first_seq;
    for (const auto& e : g.edges)
      if (e.absent == c) {
        auto [it, fresh] = first_seq.try_emplace(e.comm, e.seq);
        if (!fresh) it->second = std::min(it->second, e.seq);
      }
    std::map<std::pair<std::string, uint64_t>, std::vector<int>> at;
    for (const auto& e : g.edges)
      if (e.absent == c && first_seq[e.comm] == e.seq) at[{e.comm, e.seq}].push_back(e.waiter);
    std::set<int> reached;
    for (auto& [key, ranks] : at) {
      std::sort(ranks.begin(), ranks.end());
      ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
      WaitChain::At a;
      a.collective.comm = key.first;
      a.collective.seq = key.second;
      // The collective as the first waiter recorded it (op, size, call site).
      if (const auto* comm = views[ranks.front()].comm(key.first))
        if (const auto* rec = comm->find(key.second)) a.collective = collective_ref(key.first, *rec);
      a.waiters = ranks;
      reached.insert(ranks.begin(), ranks.end());
      chain.missing_from.push_back(std::move(a));
    }
    std::stable_sort(chain.missing_from.begin(), chain.missing_from.end(),
                     [](const WaitChain::At& a, const WaitChain::At& b) { return a.waiters.size() > b.waiters.size(); });
    // Back from the direct waiters, as far as the waits go.
    // (Waits behind the culprit's own device queue lead to it directly.)
    std::vector<int> frontier(reached.begin(), reached.end());
    frontier.push_back(c);
    std::set<std::string> via;
    std::set<int> behind;
    while (!frontier.empty()) {
      const int r = frontier.back();
      frontier.pop_back();
      auto it = waiters_of.find(r);
      if (it == waiters_of.end()) continue;
      for (const auto& [w, comm] : it->second) {
        if (culprit_set.count(w) || reached.count(w)) continue;
        reached.insert(w);
        behind.insert(w);
        via.insert(*comm);
        frontier.push_back(w);
      }
    }
    chain.behind.assign(behind.begin(), behind.end());
    chain.behind_via.assign(via.begin(), via.end());
    out.push_back(std::move(chain));
  }
  return out;
}

}  // namespace rankscope::analyzers::hang
