// gather_wording.cpp — the headline and per-node findings of a gathered run.
#include "rankscope/analyzers/hang/gather_wording.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>
#include <string>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_list.h"

namespace rankscope::analyzers::hang {
namespace {

std::string decimal_bytes(uint64_t b) {
  if (b >= (10u << 20)) return fmt::format("{:.1f} MB", double(b) / 1e6);
  if (b >= 10'000) return fmt::format("{:.0f} kB", double(b) / 1e3);
  return fmt::format("{} bytes", b);
}

}  // namespace

std::string gather_headline(const format::GatherRecord& r) {
  const std::string how = r.launcher == "slurm" ? fmt::format(" of Slurm job {}", r.job_id) : std::string();
  return fmt::format("gathered: {} of {} nodes{} answered in {:.2f} s ({} moved)", r.answered(), r.nodes.size(), how,
                     r.seconds, decimal_bytes(r.stream_bytes));
}

// "n[00012-00043]": host names sorted, those that end in numbers of one width as ranges of
// consecutive ones under their common prefix (as Slurm writes node lists); any other name as it is.
std::string compress_hosts(const std::vector<std::string>& hosts) {
  struct Named {
    std::string prefix, digits;
    const std::string* whole;
  };
  std::vector<Named> named;
  for (const auto& h : hosts) {
    size_t cut = h.size();
    while (cut > 0 && std::isdigit(static_cast<unsigned char>(h[cut - 1]))) --cut;
    named.push_back({h.substr(0, cut), h.substr(cut), &h});
  }
  std::stable_sort(named.begin(), named.end(), [](const Named& a, const Named& b) {
    return std::tie(a.prefix, a.digits) < std::tie(b.prefix, b.digits);  // digits of one width sort as numbers
  });
  std::string out;
  for (size_t i = 0; i < named.size();) {
    size_t j = i + 1;
    if (named[i].digits.empty() || named[i].digits.size() > 18) {
      out += (out.empty() ? "" : ",") + *named[i].whole;
      i = j;
      continue;
    }
    while (j < named.size() && named[j].prefix == named[i].prefix && named[j].digits.size() == named[i].digits.size() &&
           !named[j].digits.empty())
      ++j;
    if (j - i == 1) {
      out += (out.empty() ? "" : ",") + *named[i].whole;
      i = j;
      continue;
    }
    std::string inner;
    for (size_t a = i; a < j;) {
      size_t b = a + 1;
      while (b < j && std::stoull(named[b].digits) == std::stoull(named[b - 1].digits) + 1) ++b;
      inner += (inner.empty() ? "" : ",") + named[a].digits + (b - a > 1 ? "-" + named[b - 1].digits : "");
      a = b;
    }
    out += (out.empty() ? "" : ",") + named[i].prefix + "[" + inner + "]";
    i = j;
  }
  return out;
}

std::vector<std::string> gather_findings(const format::GatherRecord& r) {
  std::vector<std::string> lines;
  std::vector<int> placed;
  // Nodes silent for the same reason are one finding (a switch that took 32 nodes is one problem).
  std::map<std::string, std::vector<const format::GatheredNode*>> by_reason;
  std::vector<std::string> order;
  for (const auto& n : r.nodes) {
    if (n.answered) continue;
    auto& group = by_reason[n.reason];
    if (group.empty()) order.push_back(n.reason);
    group.push_back(&n);
  }
  for (const auto& reason : order) {
    const auto& group = by_reason[reason];
    std::vector<int> missing, arrived;
    std::vector<std::string> hosts;
    for (const auto* n : group) {
      missing.insert(missing.end(), n->missing_ranks.begin(), n->missing_ranks.end());
      arrived.insert(arrived.end(), n->ranks.begin(), n->ranks.end());
      hosts.push_back(n->host);
    }
    std::sort(missing.begin(), missing.end());
    std::sort(arrived.begin(), arrived.end());
    placed.insert(placed.end(), missing.begin(), missing.end());
    if (group.size() == 1) {
      std::string ranks;
      if (!missing.empty()) ranks = fmt::format(": its ranks {} are unseen", compress_ranks(missing));
      else if (!arrived.empty()) ranks = fmt::format(" (ranks {} arrived before it failed)", compress_ranks(arrived));
      lines.push_back(fmt::format("node {} is unreachable ({}){}", group.front()->host, reason, ranks));
      continue;
    }
    std::string ranks;
    if (!missing.empty()) ranks += fmt::format(": their ranks {} are unseen", compress_ranks(missing));
    if (!arrived.empty()) ranks += fmt::format("{}ranks {} arrived before they failed", missing.empty() ? ": " : "; ", compress_ranks(arrived));
    lines.push_back(fmt::format("{} nodes are unreachable ({}), {}{}", group.size(), reason, compress_hosts(hosts), ranks));
  }
  std::sort(placed.begin(), placed.end());
  std::vector<int> unplaced;
  for (int rank : r.ranks_missing)
    if (!std::binary_search(placed.begin(), placed.end(), rank)) unplaced.push_back(rank);
  if (!unplaced.empty())
    lines.push_back(fmt::format("ranks {} of {} sent no flight recorder from any node", compress_ranks(unplaced), r.world_size));
  for (const auto& p : r.problems) lines.push_back("gather: " + p);
  return lines;
}

}  // namespace rankscope::analyzers::hang
