// node_findings.cpp — several ranks of one node in trouble together: a node problem, not N culprits.
//
// Is: the rule that turns the culprits of a decided diagnosis into node findings: on a
// run over more than one host, the culprits of one host together with that host's other ranks in
// the same state — frozen alike, dead alike, or lagging alike while others wait for them — make a
// node finding when they are at least two and more than half of the host's ranks, and some other
// host is not in that state. Is not: the wording (node_wording.cpp) nor the per-rank reasoning.
#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "analysis_parts.h"

namespace rankscope::analyzers::hang {
namespace {

// Ranks are "in the same state" when this agrees: the state, and for frozen ranks what the kernel
// says, for dead ranks whether the process was seen gone.
using StateKey = std::tuple<RankState, OsRunState, Liveness>;

StateKey key_of(const RankReport& r) {
  return {r.state, r.state == RankState::kFrozen ? r.os_state : OsRunState::kUnknown,
          r.state == RankState::kDead ? r.alive : Liveness::kUnknown};
}

// Frozen, dead and aborted ranks are in trouble by their state alone; a running or waiting rank
// only when others wait for it (else it may simply be busy, as in a hang still forming).
bool troubled_alone(RankState s) {
  return s == RankState::kFrozen || s == RankState::kDead || s == RankState::kAborted;
}

std::string cause_of(const Diagnosis& d, const NodeFinding& n) {
  switch (n.state) {
    case RankState::kFrozen:
      switch (n.os_state) {
        case OsRunState::kStopped: return "stopped (SIGSTOP or SIGTSTP)";
        case OsRunState::kTraced: return "held by a tracer";
        case OsRunState::kUninterruptible: return "in uninterruptible sleep (D)";
        default: return fmt::format("frozen ({})", os_run_state_name(n.os_state));
      }
    case RankState::kDead:
      return n.alive == Liveness::kGone ? "gone (their processes exited or were killed)" : "silent (heartbeats stopped)";
    case RankState::kAborted: return "aborted";
    default: break;
  }
  // Lagging together: where they are, when it is one place.
  std::string range;
  for (int r : n.ranks) {
    const RankReport* rr = &d.ranks[size_t(r)];
    if (rr->rank != r) continue;
    if (range.empty()) range = rr->range.empty() ? "-" : rr->range;
    else if (range != (rr->range.empty() ? "-" : rr->range)) return "behind the ranks that wait for them";
  }
  return range.empty() || range == "-" ? "behind the ranks that wait for them" : "stuck in " + range;
}

}  // namespace

std::vector<NodeFinding> find_node_problems(const Diagnosis& d, const std::vector<int>& waited_for) {
  std::vector<NodeFinding> out;
  if (d.hosts < 2 || d.culprit_ranks.empty()) return out;
  // d.ranks is indexed by rank (fill_ranks); anything else is not a report this rule understands.
  for (size_t i = 0; i < d.ranks.size(); ++i)
    if (d.ranks[i].rank != int(i)) return out;
  std::vector<char> culprit(d.ranks.size(), 0), waited(d.ranks.size(), 0);
  for (int r : d.culprit_ranks)
    if (r >= 0 && size_t(r) < culprit.size()) culprit[size_t(r)] = 1;
  for (int r : waited_for)
    if (r >= 0 && size_t(r) < waited.size()) waited[size_t(r)] = 1;

  std::map<std::string, std::vector<int>> ranks_of_host;
  for (const auto& r : d.ranks)
    if (!r.host.empty()) ranks_of_host[r.host].push_back(r.rank);

  std::vector<std::string> culprit_hosts;
  for (int r : d.culprit_ranks)
    if (r >= 0 && size_t(r) < d.ranks.size() && !d.ranks[size_t(r)].host.empty()) culprit_hosts.push_back(d.ranks[size_t(r)].host);
  std::sort(culprit_hosts.begin(), culprit_hosts.end());
  culprit_hosts.erase(std::unique(culprit_hosts.begin(), culprit_hosts.end()), culprit_hosts.end());

  for (const std::string& host : culprit_hosts) {
    const std::vector<int>& on_host = ranks_of_host[host];
    // Each state a culprit of this host is in, with the host's ranks in that state.
    std::map<StateKey, std::vector<int>> by_state;
    for (int r : on_host)
      if (culprit[size_t(r)]) by_state[key_of(d.ranks[size_t(r)])];
    for (auto& [key, members] : by_state)
      for (int r : on_host) {
        const RankReport& rr = d.ranks[size_t(r)];
        if (key_of(rr) != key) continue;
        if (culprit[size_t(r)] || troubled_alone(rr.state) || waited[size_t(r)]) members.push_back(r);
      }
    const auto best = std::max_element(by_state.begin(), by_state.end(),
                                       [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    if (best == by_state.end() || best->second.size() < 2 || best->second.size() * 2 <= on_host.size()) continue;
    NodeFinding n;
    n.host = host;
    n.ranks = best->second;
    n.host_ranks = on_host;
    std::tie(n.state, n.os_state, n.alive) = best->first;
    n.cause = cause_of(d, n);
    out.push_back(std::move(n));
  }
  // Every host in trouble is not a node's problem: nobody on a healthy node waits on it.
  if (out.size() >= ranks_of_host.size()) out.clear();
  return out;
}

}  // namespace rankscope::analyzers::hang
