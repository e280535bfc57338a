// straggler_class.cpp — why a slow rank is slow, in one of four classes:
//   - uniform_slowdown: most of its ranges are slower than its peers' by a similar factor. The
//     cause is the rank's host or device (a shared or throttled core, a slow node), not the code;
//   - range_specific: one range or a few carry the excess (today's finding: name them);
//   - communication: its compute matches its peers' but its transfer time inside collectives is up
//     (its link, its NIC, its PCIe);
//   - outside_ranges: nothing in its ranges or collectives explains it: data loading, the host.
// Is not: deciding whether a rank is slow (skew_findings.cpp) nor the wording of the rest.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/analyzers/skew/stats.h"
#include "skew_parts.h"

namespace rankscope::analyzers {
namespace {

constexpr double kMinPeerMs = 0.5;      // ranges cheaper than this are noise in a ratio
constexpr double kSlowerRatio = 1.25;   // a range counts as slower past this
constexpr double kMostRanges = 0.6;     // "most ranges"
constexpr double kSimilarSpread = 1.6;  // p75/p25 of the ratios: "by a similar factor"

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

}  // namespace

SlowdownShape classify_slowdown(const SkewReport& report, int rank, const std::vector<int>& peers, bool own_cause) {
  SlowdownShape s;
  std::vector<double> ratios;
  const auto& mine = report.ranks[size_t(rank)].range_compute_ms;
  for (const auto& [range, ms] : mine) {
    if (range == "step") continue;
    std::vector<double> theirs;
    for (int p : peers)
      if (auto it = report.ranks[size_t(p)].range_compute_ms.find(range); it != report.ranks[size_t(p)].range_compute_ms.end())
        theirs.push_back(it->second);
    const double peer = median(std::move(theirs));
    if (peer < kMinPeerMs) continue;
    const double r = ms / peer;
    ratios.push_back(r);
    if (r >= kSlowerRatio) s.slower_ranges.push_back(range);
  }
  s.ranges_compared = int(ratios.size());
  s.factor = median(ratios);
  s.factor_p25 = quantile(ratios, 0.25);
  s.factor_p75 = quantile(ratios, 0.75);
  const bool most = s.ranges_compared >= 3 && double(s.slower_ranges.size()) >= kMostRanges * s.ranges_compared;
  const bool similar = s.factor_p25 > 0 && s.factor_p75 / s.factor_p25 <= kSimilarSpread;
  if (most && similar && s.factor >= kSlowerRatio) {
    s.cls = "uniform_slowdown";
    s.text = fmt::format(
        "; class uniform slowdown: {} of its {} ranges are slower, by {:.2f}x (middle half {:.2f}x-{:.2f}x), so the "
        "cause is the rank's host or device (a shared or throttled core, a slow node), not the code",
        s.slower_ranges.size(), s.ranges_compared, s.factor, s.factor_p25, s.factor_p75);
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
