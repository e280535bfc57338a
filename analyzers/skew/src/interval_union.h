// interval_union.h — the length of a union of time intervals (internal to the skew analyzer).
//
// Why: a time class (time in collectives, a range's GPU time, waiting) is the time during which
// something of that class runs, never the sum of the durations: two Gloo all-reduces on two
// threads at the same time take the step's time once, not twice. Is: one pure function
// over [begin, end) pairs. Is not: the class sweep of kernels (device_timeline.h), which splits
// one union into classes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace rankscope::analyzers {

using Interval = std::pair<int64_t, int64_t>;  // [begin, end), ns

// Length of the union of `intervals` clipped to [lo, hi). Reorders `intervals`; empty and reversed
// intervals take no time.
inline int64_t union_length(std::vector<Interval>& intervals, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
  std::sort(intervals.begin(), intervals.end());
  int64_t total = 0, run_begin = 0, run_end = 0;
  bool open = false;
  for (const auto& [raw_begin, raw_end] : intervals) {
    const int64_t b = std::max(raw_begin, lo), e = std::min(raw_end, hi);
    if (e <= b) continue;
    if (open && b <= run_end) {
      run_end = std::max(run_end, e);
      continue;
    }
    if (open) total += run_end - run_begin;
    run_begin = b;
    run_end = e;
    open = true;
  }
  if (open) total += run_end - run_begin;
  return total;
}

}  // namespace rankscope::analyzers
