// kernel_breakdown.cpp — GPU time by kind (compute, communication, memory) and the top kernels of
// each kind, HTA's get_gpu_kernel_breakdown per rank: per kernel name its count, summed duration,
// shortest and longest; the top `top_kernels` by sum, the rest summed as others. HTA also cuts the
// list where the cumulative sum passes a quantile (duration_ratio); we keep the count rule alone.
#include <algorithm>
#include <unordered_map>

#include "analyses.h"
#include "intervals.h"

namespace rankscope::analyzers::device_timeline {

std::vector<KindBreakdown> compute_breakdown(const RankTimeline& t, const KernelsOptions& options) {
  constexpr format::KernelClass kKinds[] = {format::KernelClass::kCompute, format::KernelClass::kCommunication,
                                            format::KernelClass::kMemory};
  std::vector<KindBreakdown> out;
  for (format::KernelClass kind : kKinds) {
    KindBreakdown b;
    b.kind = kind;
    std::unordered_map<uint32_t, KernelStat> by_name;
    std::vector<Interval> spans;
    for (const Op& o : t.ops) {
      if (o.kind != kind) continue;
      const int64_t d = o.end - o.begin;
      ++b.count;
      b.total_ns += d;
      spans.emplace_back(o.begin, o.end);
      auto [it, fresh] = by_name.try_emplace(o.name);
      KernelStat& s = it->second;
      if (fresh) s.min_ns = d, s.max_ns = d;
      ++s.count;
      s.total_ns += d;
      s.min_ns = std::min(s.min_ns, d);
      s.max_ns = std::max(s.max_ns, d);
    }
    b.busy_ns = total_length(merge_intervals(std::move(spans)));
    std::vector<std::pair<uint32_t, KernelStat*>> ranked;
    for (auto& [name, s] : by_name) ranked.emplace_back(name, &s);
    std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b2) {
      if (a.second->total_ns != b2.second->total_ns) return a.second->total_ns > b2.second->total_ns;
      return t.names[a.first] < t.names[b2.first];
    });
    int64_t shown = 0;
    for (size_t i = 0; i < ranked.size() && i < options.top_kernels; ++i) {
      KernelStat s = *ranked[i].second;
      s.name = t.names[ranked[i].first];
      s.rule = t.rules[ranked[i].first];
      shown += s.total_ns;
      b.top.push_back(std::move(s));
    }
    b.others_ns = b.total_ns - shown;
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace rankscope::analyzers::device_timeline
