// report_text.cpp — the human report: verdict line, ranks grouped by state, evidence.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_list.h"
#include "rankscope/analyzers/hang/report.h"
#include "wording.h"

namespace rankscope::analyzers::hang {
namespace {

// What a rank is doing, without per-rank numbers, so identical states group together.
std::string state_key(const RankReport& r) {
  switch (r.state) {
    case RankState::kWaiting:
      return fmt::format("waiting in {} #{} on {} ({})", format::short_op_name(r.waiting->op), r.waiting->seq,
                         r.waiting->comm, r.waiting->range.empty() ? "no range" : r.waiting->range);
    case RankState::kRunning:
      // No "at step" for jobs without steps (the NCCL profiler plugin's: step -1).
      return (r.range.empty() ? std::string("between ranges") : "in " + r.range) +
             (r.step >= 0 ? fmt::format(" at step {}", r.step) : std::string());
    case RankState::kDead:
      return fmt::format("dead in {} at step {}", r.range.empty() ? "no range" : r.range, r.step);
    case RankState::kAborted: return fmt::format("aborted at step {}", r.step);
    case RankState::kFinished: return fmt::format("finished at step {}", r.step);
    case RankState::kMissing: return "missing: " + r.note;
    case RankState::kFrozen:
      return fmt::format("frozen ({}) in {} at step {}", os_run_state_name(r.os_state), r.range.empty() ? "no range" : r.range,
                         r.step);
  }
  return "?";
}

std::string group_suffix(const Diagnosis& d, const std::vector<const RankReport*>& g) {
  double waited = 0, idle = 0;
  for (const auto* r : g) {
    waited = std::max(waited, r->waited_s);
    idle = std::max(idle, r->idle_s);
  }
  switch (g.front()->state) {
    case RankState::kWaiting: return " " + how_long(d, waited, "since");
    case RankState::kRunning: return ", idle " + how_long(d, idle, "");
    case RankState::kDead: return g.size() == 1 ? fmt::format(" ({})", g.front()->note) : "";
    default: return "";
  }
}

void evidence(std::string& out, const Diagnosis& d, const RankReport& r) {
  out += fmt::format("  rank {} (pid {} on {}, process {}, state {}):\n", r.rank, r.pid, r.host.empty() ? "?" : r.host,
                     analyzers::liveness_name(r.alive), rank_state_name(r.state));
  if (r.state == RankState::kMissing) {
    out += fmt::format("    {}\n", r.note);
    return;
  }
  std::string stack;
  for (const auto& s : r.range_stack) stack += (stack.empty() ? "" : " > ") + s;
  out += fmt::format("    open ranges: {}\n", stack.empty() ? "(none)" : stack);
  if (r.waiting)
    out += fmt::format("    inside: {} called from {}, {}\n", collective_phrase(*r.waiting),
                       r.waiting->range.empty() ? "?" : r.waiting->range, how_long(d, r.waited_s, "for"));
  std::string last;
  for (const auto& lc : r.last_completed)
    last += fmt::format("{}{} #{} {} ({})", last.empty() ? "" : "; ", lc.comm, lc.seq, format::short_op_name(lc.op),
                        !d.times_are_lower_bounds ? human_seconds(lc.ago_s) + " ago"
                        : lc.ago_s >= 0.0005      ? "at least " + human_seconds(lc.ago_s) + " ago"
                                                  : "when, unknown");
  out += fmt::format("    last completed: {}\n", last.empty() ? "(none)" : last);
  // Dumps have no heartbeat of their own: only the idle time means something there.
  if (d.times_are_lower_bounds) out += "    idle " + how_long(d, r.idle_s, "") + "\n";
  else out += fmt::format("    heartbeat {} old, idle {}\n", human_seconds(r.heartbeat_age_s), human_seconds(r.idle_s));
  if (!r.note.empty()) out += fmt::format("    note: {}\n", r.note);
  if (!r.stacks_file.empty()) out += fmt::format("    stacks: {}\n", r.stacks_file);
  if (!r.stacks.empty()) {
    out += "    stacks:\n";
    size_t start = 0;
    int lines = 0;
    constexpr int kMaxLines = 40;  // the whole text is in the evidence file
    while (start < r.stacks.size()) {
      if (++lines > kMaxLines) {
        out += "      ... (see the stacks file for the rest)\n";
        break;
      }
      size_t end = r.stacks.find('\n', start);
      if (end == std::string::npos) end = r.stacks.size();
      out += "      " + r.stacks.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
}

// Ranks that left nothing to read, with one and the same note (a log claiming a world far larger than
// the ranks it shows): one block for the group, not one a rank (2^20 claimed ranks were 93 MB of text).
void missing_evidence(std::string& out, const Diagnosis& d, const std::vector<const RankReport*>& g) {
  std::vector<int> ranks;
  for (const auto* r : g) ranks.push_back(r->rank);
  out += fmt::format("  {} (state {}):\n    {}\n", who(d, ranks), rank_state_name(RankState::kMissing), g.front()->note);
}

}  // namespace

std::string render_text(const Diagnosis& d) {
  std::string out = d.headline + "\n";
  if (!d.explanation.empty()) out += "  " + d.explanation + "\n";
  if (d.detection && d.detection->by == "learned_bound") {
    const Detection& x = *d.detection;
    out += fmt::format("  Detected by rank {}'s learned bound: {} open {}, past {} ({}).\n", x.rank, x.what,
                       human_seconds(x.open_s), human_seconds(x.bound_s), x.basis);
  } else if (d.detection && d.detection->by == "peer_wait") {
    const Detection& x = *d.detection;
    out += fmt::format("  Detected from its peers: {}; idle {}, past {} ({}).\n", x.what, human_seconds(x.open_s),
                       human_seconds(x.bound_s), x.basis);
  }

  for (const auto& n : d.nodes)
    out += fmt::format("  Node {}: ranks {} of its {} ranks {} ({}).\n", n.host, compress_ranks(n.ranks), n.host_ranks.size(),
                       n.cause, rank_state_name(n.state));

  // Ranks grouped by identical state, culprits first, in rank order within a group.
  std::vector<std::pair<std::string, std::vector<const RankReport*>>> groups;
  std::unordered_map<std::string, size_t> group_of;  // key -> its place in `groups`
  // Culprits looked up in a sorted copy: a log or dump may name a world of 2^20 ranks, most of them
  // culprits (never joined), and a linear search per rank made the report quadratic (minutes).
  std::vector<int> culprits = d.culprit_ranks;
  std::sort(culprits.begin(), culprits.end());
  for (const auto& r : d.ranks) {
    const bool culprit = std::binary_search(culprits.begin(), culprits.end(), r.rank);
    std::string key = (culprit ? "0" : "1") + state_key(r);
    // By key through a map: a state may name its rank (a missing recorder's file name), so there may
    // be as many groups as ranks, and a search of the groups per rank was quadratic.
    const auto [at, fresh] = group_of.try_emplace(key, groups.size());
    if (fresh) groups.push_back({std::move(key), {&r}});
    else groups[at->second].second.push_back(&r);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first[0] < b.first[0]; });
  out += "\nranks:\n";
  for (const auto& [key, g] : groups) {
    std::vector<int> ranks;
    for (const auto* r : g) ranks.push_back(r->rank);
    const std::string label = fmt::format("{}:", who(d, ranks));
    out += fmt::format("  {:<14} {}{}{}\n", label, key.substr(1), group_suffix(d, g), key[0] == '0' ? "   <- culprit" : "");
  }

  // Evidence: every culprit, then one representative of every other group (1024 ranks stay short).
  out += "\nevidence:\n";
  for (const auto& [key, g] : groups) {
    if (key[0] != '0')
      evidence(out, d, *g.front());
    else if (g.size() > 1 && g.front()->state == RankState::kMissing)
      missing_evidence(out, d, g);
    else
      for (const auto* r : g) evidence(out, d, *r);
  }
  if (!d.problems.empty()) {
    out += "\nproblems:\n";
    for (const auto& p : d.problems) out += "  - " + p + "\n";
  }
  return out;
}

}  // namespace rankscope::analyzers::hang
