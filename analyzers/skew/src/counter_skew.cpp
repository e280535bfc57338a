// counter_skew.cpp — how unevenly each counter (e.g. embed.local_tokens) falls across ranks.
//
// Imbalance is max over mean of the per-rank means, over all ranks and over each communicator
// group of run.json; the worst group is kept because uneven work shows inside the group that splits
// it (a TP group splits the vocabulary). Is not: the finding text (skew_findings.cpp).
#include <algorithm>
#include <map>
#include <tuple>

#include "skew_parts.h"

namespace rankscope::analyzers {
namespace {

struct Extremes {
  double mean = 0, max = 0, min = 0, imbalance = 0;
  int max_rank = -1, min_rank = -1;
  int n = 0;
};

Extremes extremes(const std::vector<std::pair<int, double>>& values) {
  Extremes e;
  double sum = 0;
  for (const auto& [rank, v] : values) {
    if (e.n == 0 || v > e.max) e.max = v, e.max_rank = rank;
    if (e.n == 0 || v < e.min) e.min = v, e.min_rank = rank;
    sum += v;
    ++e.n;
  }
  if (e.n > 0) e.mean = sum / e.n;
  e.imbalance = e.mean > 0 ? e.max / e.mean : 1.0;
  return e;
}

}  // namespace

void compute_counter_skew(const format::RunMetadata* meta, const SkewOptions& options, SkewReport& report) {
  std::map<std::string, std::vector<std::pair<int, double>>> by_counter;  // name -> (rank, mean)
  for (const RankSkew& rs : report.ranks) {
    for (const auto& [name, v] : rs.counters) by_counter[name].emplace_back(rs.rank, v);
  }
  for (auto& [name, values] : by_counter) {
    CounterSkew cs;
    cs.name = name;
    const Extremes all = extremes(values);
    cs.mean = all.mean, cs.max = all.max, cs.min = all.min, cs.imbalance = all.imbalance;
    cs.max_rank = all.max_rank, cs.min_rank = all.min_rank;

    std::map<int, double> value_of(values.begin(), values.end());
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    if (meta) {
      for (const auto& g : meta->groups) groups.emplace_back(g.name, g.ranks);
    }
    if (groups.empty()) {
      std::vector<int> ranks;
      for (const auto& [rank, v] : values) ranks.push_back(rank);
      groups.emplace_back("world", ranks);
    }
    // Imbalance per group; the finding names the smallest group that is (nearly) as uneven as the
    // worst one: uneven work shows inside the group that splits it (tp0), and world only repeats it.
    std::vector<CounterGroupImbalance> per_group;
    for (const auto& [group, ranks] : groups) {
      std::vector<std::pair<int, double>> in_group;
      for (int r : ranks) {
        if (auto it = value_of.find(r); it != value_of.end()) in_group.emplace_back(r, it->second);
      }
      if (in_group.size() < 2) continue;
      const Extremes e = extremes(in_group);
      per_group.push_back({group, e.imbalance, e.max_rank, e.min_rank, e.max, e.min, int(ranks.size())});
    }
    double worst = 0;
    for (const auto& g : per_group) worst = std::max(worst, g.imbalance);
    // Order of preference: smaller group, then not "world" (with TP 2 and DP 1, tp0 and world are
    // the same ranks; tp0 says why), then the larger imbalance.
    auto rank_key = [](const CounterGroupImbalance& g) { return std::make_tuple(g.size, g.group == "world", -g.imbalance); };
    for (const auto& g : per_group) {
      if (g.imbalance < 0.95 * worst) continue;
      if (!cs.worst_group || rank_key(g) < rank_key(*cs.worst_group)) cs.worst_group = g;
    }
    // How many groups of the same kind (tp0, tp1, ... share "tp") are past the threshold.
    if (cs.worst_group) {
      auto kind = [](const std::string& name) { return name.substr(0, name.find_first_of("0123456789")); };
      for (const auto& g : per_group) {
        if (kind(g.group) != kind(cs.worst_group->group)) continue;
        ++cs.groups_of_kind;
        if (g.imbalance >= options.counter_imbalance_threshold) ++cs.groups_over_threshold;
      }
    }
    report.counters.push_back(std::move(cs));
  }
}

}  // namespace rankscope::analyzers
