// intervals.h — unions and intersections of [begin, end) time intervals (internal).
//
// Is: the one place the kernel analyses merge overlapping ops (HTA's merge_kernel_intervals) and
// intersect two unions. Is not: anything about kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace rankscope::analyzers::device_timeline {

using Interval = std::pair<int64_t, int64_t>;

// Sorts `v` and merges touching or overlapping intervals; returns the disjoint union, ascending.
inline std::vector<Interval> merge_intervals(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& x : v) {
    if (!out.empty() && x.first <= out.back().second)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

inline int64_t total_length(const std::vector<Interval>& disjoint) {
  int64_t sum = 0;
  for (const auto& [b, e] : disjoint) sum += e - b;
  return sum;
}

// Length of the intersection of two disjoint, ascending unions.
inline int64_t intersection_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t sum = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) sum += hi - lo;
    if (a[i].second < b[j].second)
      ++i;
    else
      ++j;
  }
  return sum;
}

}  // namespace rankscope::analyzers::device_timeline
