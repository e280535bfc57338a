// node_wording.cpp — the headline of a node problem: "HANG: node n4: ranks 12-15 all stopped
// (SIGSTOP or SIGTSTP) ...", said once for the node instead of once per rank.
//
// Is: sentences over a decided Diagnosis whose node finding covers every culprit. Is not: the rule
// that finds node problems (node_findings.cpp).
#include <algorithm>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_list.h"
#include "wording.h"

namespace rankscope::analyzers::hang {
namespace {

// "at step 3 in forward/block0/attn" of the first culprit.
std::string place_of(const RankReport& r) {
  const std::string at = r.step >= 0 ? fmt::format(" at step {}", r.step) : "";
  if (r.range.empty() || r.range == "step") return r.step >= 0 ? fmt::format(" at the start of step {}", r.step) : "";
  return fmt::format(" in {}{}", r.range, at);
}

}  // namespace

bool word_node(Diagnosis& d, const WordingFacts& f) {
  if (d.nodes.size() != 1) return false;
  const NodeFinding& n = d.nodes.front();
  const bool covers = std::all_of(d.culprit_ranks.begin(), d.culprit_ranks.end(), [&](int r) {
    return std::find(n.ranks.begin(), n.ranks.end(), r) != n.ranks.end();
  });
  if (!covers || d.culprit_ranks.empty()) return false;
  const RankReport& first = d.ranks[size_t(d.culprit_ranks.front())];
  const std::string old_explanation = d.explanation;  // the per-kind one: kept where it speaks of them all
  const std::string verdict = d.headline.substr(0, d.headline.find(':'));
  const bool whole = n.ranks.size() == n.host_ranks.size();
  const std::string subject = whole ? fmt::format("ranks {} all", compress_ranks(n.ranks))
                                    : fmt::format("ranks {} of its {} ranks ({})", compress_ranks(n.ranks),
                                                  n.host_ranks.size(), compress_ranks(n.host_ranks));
  std::string detail;
  switch (n.state) {
    case RankState::kFrozen:
      detail = fmt::format(": no thread runs; their heartbeats stopped {} ago{}", human_seconds(first.heartbeat_age_s),
                           place_of(first));
      break;
    case RankState::kDead:
    case RankState::kAborted:
      detail = fmt::format(", {} ago{}", human_seconds(first.heartbeat_age_s), place_of(first));
      break;
    default: break;
  }
  std::string blocked;
  if (d.collective)
    blocked = n.state == RankState::kWaiting && d.kind == Kind::kGpuBehindHost
                  ? fmt::format("; their GPUs never started {}", collective_phrase(*d.collective))
                  : fmt::format("; they never entered {}", collective_phrase(*d.collective));
  // The waiters on other hosts: the node's own ranks are its problem, not its witnesses.
  std::vector<int> waiters;
  for (int w : f.waiters)
    if (host_of(d, w) != n.host) waiters.push_back(w);
  std::string waiting;
  if (!waiters.empty() && d.collective) {
    double waited = 0;
    for (int w : waiters) waited = std::max(waited, d.ranks[size_t(w)].waited_s);
    waiting = fmt::format(" {} {} {} in that {} {}.", waiters.size() == 1 ? "Rank" : "Ranks", ranks_on_hosts(d, waiters),
                          waiters.size() == 1 ? "waits" : "wait", format::short_op_name(d.collective->op),
                          how_long(d, waited, "since"));
  }
  d.headline = fmt::format("{}: node {}: {} {}{}{}.{}", verdict, n.host, subject, n.cause, detail, blocked, waiting);
  std::string advice;
  if (n.state == RankState::kFrozen && n.os_state == OsRunState::kStopped)
    advice = " The kernel reports every thread of them stopped by a signal (T): something sent SIGSTOP or SIGTSTP to the "
             "node's processes (job control, a checkpoint tool, a person); `kill -CONT` resumes them.";
  else if (n.state == RankState::kFrozen)
    advice = fmt::format(" No thread of them can run ({}).", os_run_state_name(n.os_state));
  else if (n.state == RankState::kDead && n.alive == Liveness::kGone)
    advice = " Their processes are gone: look at the node's kernel log (the OOM killer), the launcher's log, or a reboot.";
  else if (n.state == RankState::kDead)
    advice = " Their heartbeats stopped together; whether they died or froze is not known from here.";
  d.explanation = fmt::format("{} of the {} ranks of {} are {} at once while ranks on other hosts wait on them: look at "
                              "the node (a signal or job-control action sent to its processes, its OOM killer, its "
                              "power, network or file system), not at {} separate ranks.",
                              n.ranks.size(), n.host_ranks.size(), n.host, n.cause, n.ranks.size()) +
                  advice;
  if (n.state == RankState::kRunning || n.state == RankState::kWaiting) d.explanation += " " + old_explanation;
  else d.explanation += downstream_sentence(d, f);
  return true;
}

}  // namespace rankscope::analyzers::hang
