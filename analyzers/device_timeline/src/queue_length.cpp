// queue_length.cpp — the launch queue of each stream over time, HTA's way (trace_counters.py): +1
// when a launch call begins, -1 when its op begins on the device, so the length is the ops launched
// and not yet started. An op whose recorded begin precedes its call's (host and device clocks
// disagree by a few µs in some traces; HTA tests for the negative lengths this gives) leaves the
// queue when its call begins. The maximum, the time spent at it, the time at or above CUDA's queue
// depth (where the CPU blocks in the launch call), the time-weighted mean, and a series small enough
// to chart.
#include <algorithm>
#include <map>

#include "analyses.h"

namespace rankscope::analyzers::device_timeline {
namespace {

struct Change {
  int64_t at;
  int delta;
};

std::vector<std::pair<double, int>> decimate(const std::vector<std::pair<int64_t, int>>& steps, int64_t first_ns,
                                             size_t points) {
  std::vector<std::pair<double, int>> out;
  auto ms = [&](int64_t at) { return double(at - first_ns) / 1e6; };
  if (steps.size() <= points || points < 2) {
    for (const auto& [at, q] : steps) out.emplace_back(ms(at), q);
    return out;
  }
  // Equal time buckets, each shown by the largest length it reached, so no peak is lost.
  const int64_t lo = steps.front().first, hi = steps.back().first;
  const double width = double(hi - lo) / double(points - 1);
  size_t i = 0;
  int carried = 0;  // the length at the start of the bucket
  for (size_t b = 0; b < points; ++b) {
    const double end = double(lo) + width * double(b + 1);
    int peak = carried;
    while (i < steps.size() && (double(steps[i].first) < end || b + 1 == points)) {
      peak = std::max(peak, steps[i].second);
      carried = steps[i].second;
      ++i;
    }
    out.emplace_back(ms(lo + int64_t(width * double(b))), peak);
  }
  return out;
}

}  // namespace

std::vector<StreamQueue> compute_queues(const RankTimeline& t, const KernelsOptions& options) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<Change>> changes;
  for (const Launch& l : t.launches) {
    auto& c = changes[{l.device, l.stream}];
    c.push_back({l.begin, +1});
    c.push_back({std::max(l.gpu_begin, l.begin), -1});
  }
  std::vector<StreamQueue> out;
  for (auto& [key, c] : changes) {
    std::sort(c.begin(), c.end(),
              [](const Change& a, const Change& b) { return a.at != b.at ? a.at < b.at : a.delta < b.delta; });
    StreamQueue q;
    q.device = key.first;
    q.stream = key.second;
    q.launches = int64_t(c.size() / 2);
    // The length after each distinct time.
    std::vector<std::pair<int64_t, int>> steps;
    int length = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      length += c[i].delta;
      if (i + 1 < c.size() && c[i + 1].at == c[i].at) continue;
      steps.emplace_back(c[i].at, length);
      q.max_length = std::max(q.max_length, length);
    }
    double weighted = 0;
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      const int64_t d = steps[i + 1].first - steps[i].first;
      weighted += double(d) * steps[i].second;
      if (steps[i].second == q.max_length) q.time_at_max_ns += d;
      if (steps[i].second >= options.cuda_queue_limit) q.time_at_limit_ns += d;
    }
    const int64_t span = steps.empty() ? 0 : steps.back().first - steps.front().first;
    q.mean_length = span > 0 ? weighted / double(span) : 0;
    q.series = decimate(steps, t.first_ns, options.queue_series_points);
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace rankscope::analyzers::device_timeline
