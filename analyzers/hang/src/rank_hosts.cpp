// rank_hosts.cpp — see rank_hosts.h.
//
// Is: the host lookup of a decided Diagnosis and the rank lists of the wording. With one host (or
// none known) a list reads as before, without a host: a local run's sentences do not change. Is
// not: any decision about which ranks to name (classifier.cpp, node_findings.cpp).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_hosts.h"
#include "rankscope/analyzers/hang/rank_list.h"
#include "wording.h"

namespace rankscope::analyzers::hang {
namespace {

// Beyond this many hosts a list names how many hosts, not which: 16K ranks stay one line.
constexpr size_t kMaxHostsNamed = 4;

}  // namespace

const std::string& host_of(const Diagnosis& d, int rank) {
  static const std::string kUnknown;
  // d.ranks is one report per rank in rank order (Classifier::fill_ranks); search only if not.
  if (rank >= 0 && size_t(rank) < d.ranks.size() && d.ranks[size_t(rank)].rank == rank) return d.ranks[size_t(rank)].host;
  for (const auto& r : d.ranks)
    if (r.rank == rank) return r.host;
  return kUnknown;
}

std::string ranks_on_hosts(const Diagnosis& d, const std::vector<int>& ranks) {
  if (d.hosts < 2) return compress_ranks(ranks);
  // Hosts in the order of their lowest rank, so "0-3 (n1), 4-7 (n2)" reads in rank order.
  std::map<std::string, std::vector<int>> by_host;
  for (int r : ranks) by_host[host_of(d, r)].push_back(r);
  if (by_host.size() > kMaxHostsNamed) return fmt::format("{} on {} hosts", compress_ranks(ranks), by_host.size());
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [host, rs] : by_host) order.emplace_back(*std::min_element(rs.begin(), rs.end()), host);
  std::sort(order.begin(), order.end());
  auto host_name = [](const std::string& h) { return h.empty() ? std::string("an unknown host") : h; };
  if (order.size() == 1) return fmt::format("{} on {}", compress_ranks(ranks), host_name(order.front().second));
  std::string out;  // "0-3 (n1), 4-7 (n2)"
  for (const auto& [first, host] : order)
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", compress_ranks(by_host[host]), host_name(host));
  return out;
}

std::string who(const Diagnosis& d, const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", ranks_on_hosts(d, ranks));
}

int count_hosts(const std::vector<RankReport>& ranks) {
  std::vector<std::string_view> hosts;
  for (const auto& r : ranks)
    if (!r.host.empty()) hosts.push_back(r.host);
  std::sort(hosts.begin(), hosts.end());
  return int(std::unique(hosts.begin(), hosts.end()) - hosts.begin());
}

}  // namespace rankscope::analyzers::hang
