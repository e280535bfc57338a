// stats.cpp — see stats.h.
#include "rankscope/analyzers/skew/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rankscope::analyzers {

double percentile_inplace(std::span<double> values, double p) {
  if (values.empty()) return 0.0;
  p = std::clamp(p, 0.0, 100.0);
  // Position on [0, n-1]; interpolate between the two order statistics around it.
  const double pos = p / 100.0 * double(values.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  std::nth_element(values.begin(), values.begin() + lo, values.end());
  const double lo_value = values[lo];
  if (hi == lo) return lo_value;
  // After nth_element everything past `lo` is >= values[lo]; the next order statistic is their min.
  const double hi_value = *std::min_element(values.begin() + lo + 1, values.end());
  return lo_value + (hi_value - lo_value) * (pos - double(lo));
}

double percentile(std::vector<double> values, double p) { return percentile_inplace(values, p); }

double mean(std::span<const double> values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
}

}  // namespace rankscope::analyzers
