// straggler_class.cpp — why a slow rank is slow, in one of four classes:
//   - uniform_slowdown: most of its ranges (by time) are slower than its peers', the excess spread
//     over them rather than carried by one kind of work. The cause is the rank's host or device (a shared or
//     throttled core, a slow node), not the code;
//   - range_specific: one range or a few carry the excess (today's finding: name them);
//   - communication: its compute matches its peers' but its transfer time inside collectives is up
//     (its link, its NIC, its PCIe);
//   - outside_ranges: nothing in its ranges or collectives explains it: data loading, the host.
// Is not: deciding whether a rank is slow (skew_findings.cpp) nor the wording of the rest.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/analyzers/skew/stats.h"
#include "skew_parts.h"

namespace rankscope::analyzers {
namespace {

constexpr double kMinPeerMs = 0.5;       // ranges cheaper than this are noise in a ratio
constexpr double kSlowerRatio = 1.25;    // a range counts as slower past this
constexpr double kMostTime = 0.5;        // "most ranges", by the time they take
constexpr double kSpreadExcess = 0.5;    // no one kind of work carries more than this share of the excess
constexpr double kKindShareOverTime = 1.5;  // ... unless it is as large a share of the time

struct Weighted {
  double ratio, weight;
};

// q-quantile of the ratios, each counted by its weight.
double weighted_quantile(std::vector<Weighted> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end(), [](const Weighted& a, const Weighted& b) { return a.ratio < b.ratio; });
  double total = 0;
  for (const auto& w : v) total += w.weight;
  double seen = 0;
  for (const auto& w : v) {
    seen += w.weight;
    if (seen >= q * total) return w.ratio;
  }
  return v.back().ratio;
}

// A range none of whose children was recorded: parents would count their children's time twice.
bool is_leaf(const std::map<std::string, double>& ranges, const std::string& name) {
  auto it = ranges.upper_bound(name);
  return it == ranges.end() || it->first.compare(0, name.size() + 1, name + "/") != 0;
}

}  // namespace

// Ranges are compared at their leaves and weighted by the time they take. On a core shared by time
// slices, a range shorter than the scheduler's slice often runs whole inside one and looks
// unaffected while longer ones take twice as long: per-range ratios are bimodal (seen with a busy
// process beside a rank: GEMMs of 1-3 ms at 1.0x, GELU and softmax of 4-20 ms at 2.0x). What marks a
// uniform slowdown is that most of the rank's time is slower and that no single range carries the
// excess; what marks a range-specific one is that one range does.
SlowdownShape classify_slowdown(const SkewReport& report, int rank, const std::vector<int>& peers, bool own_cause) {
  SlowdownShape s;
  std::vector<Weighted> ratios;
  double mine_total = 0, peer_total = 0, slower_time = 0, excess_total = 0;
  // By kind of work, a leaf's last name (every block's `experts`, forward's and backward's): one
  // kind slower in every block is one cause, however many ranges it spans.
  std::map<std::string, Weighted> by_kind;  // (excess, peer time)
  const auto& mine = report.ranks[size_t(rank)].range_compute_ms;
  for (const auto& [range, ms] : mine) {
    if (range == "step" || !is_leaf(mine, range)) continue;
    ++s.ranges_total;
    std::vector<double> theirs;
    for (int p : peers)
      if (auto it = report.ranks[size_t(p)].range_compute_ms.find(range); it != report.ranks[size_t(p)].range_compute_ms.end())
        theirs.push_back(it->second);
    const double peer = median(std::move(theirs));
    if (peer < kMinPeerMs) continue;
    const double r = ms / peer;
    ratios.push_back({r, peer});
    mine_total += ms;
    peer_total += peer;
    if (r >= kSlowerRatio) s.slower_ranges.push_back(range), slower_time += peer;
    const double excess = std::max(0.0, ms - peer);
    excess_total += excess;
    Weighted& kind = by_kind[range.substr(range.rfind('/') + 1)];
    kind.ratio += excess;
    kind.weight += peer;
  }
  s.ranges_compared = int(ratios.size());
  s.factor = peer_total > 0 ? mine_total / peer_total : 1.0;
  s.factor_p25 = weighted_quantile(ratios, 0.25);
  s.factor_p75 = weighted_quantile(ratios, 0.75);
  const double slower_share = peer_total > 0 ? slower_time / peer_total : 0.0;
  const bool most = s.ranges_compared >= 3 && s.slower_ranges.size() >= 3 && slower_share >= kMostTime;
  // Spread: no kind of work carries most of the excess beyond its share of the time (on a slow host
  // the longest kind is slowed most in milliseconds, and that is still uniform).
  bool spread = excess_total > 0;
  for (const auto& [name, kind] : by_kind) {
    const double excess_share = kind.ratio / excess_total, time_share = peer_total > 0 ? kind.weight / peer_total : 0.0;
    if (excess_share > kSpreadExcess && excess_share > kKindShareOverTime * time_share) spread = false;
  }
  if (most && spread && s.factor >= kSlowerRatio) {
    s.cls = "uniform_slowdown";
    // Ranges too short at its peers to give a ratio are left out, and said to be.
    const std::string of = s.ranges_total > s.ranges_compared
                               ? fmt::format("the {} ranges long enough to compare (of its {})", s.ranges_compared, s.ranges_total)
                               : fmt::format("its {} ranges", s.ranges_compared);
    s.text = fmt::format(
        "; class uniform slowdown: {} of {}, {:.0f}% of its time, are slower, by {:.2f}x overall (middle "
        "half {:.2f}x-{:.2f}x), so the cause is the rank's host or device (a shared or throttled core, a slow node), "
        "not the code",
        s.slower_ranges.size(), of, 100 * slower_share, s.factor, s.factor_p25, s.factor_p75);
    return s;
  }
  if (own_cause) {
    s.cls = "range_specific";
    return s;
  }
  std::vector<double> peer_transfer;
  for (int p : peers) peer_transfer.push_back(report.ranks[size_t(p)].collective_transfer_ms);
  const double theirs = median(std::move(peer_transfer));
  const double transfer = report.ranks[size_t(rank)].collective_transfer_ms;
  if (transfer > 1.5 * theirs && transfer - theirs >= kMinPeerMs) {
    s.cls = "communication";
    s.text = fmt::format("; class communication: its compute matches its peers' but its transfer time inside "
                         "collectives is {:.1f} ms per step vs {:.1f} ms: suspect its link, NIC or PCIe",
                         transfer, theirs);
    return s;
  }
  s.cls = "outside_ranges";
  return s;
}

}  // namespace rankscope::analyzers
