// idle_breakdown.cpp — GPU idle time by cause, HTA's way (breakdown_analysis.py,
// _analyze_idle_time_for_stream), per stream, and the same rule applied to the device as a whole.
//
// A gap is the time between an op's begin and the end of the op before it (per stream: the previous
// op of that stream; per device: the union of every stream's ops). Its cause comes from the op that
// ends it: host wait when that op's launch call began after the gap began (the GPU had nothing
// queued: the CPU was late); else kernel wait when the gap is shorter than the threshold (back-to-back
// launch overhead); else other (an event wait, another stream, or no launch record to tell). A gap
// spanning two traced steps that are not consecutive is not idle time we saw, so it is skipped.
#include <algorithm>
#include <map>

#include "analyses.h"

namespace rankscope::analyzers::device_timeline {
namespace {

void book(IdleByCause& idle, const RankTimeline& t, const Op& next, int64_t gap_begin, const KernelsOptions& options) {
  const int64_t gap = next.begin - gap_begin;
  if (gap <= 0) return;
  ++idle.gaps;
  const bool launched_late = next.launch >= 0 && t.launches[size_t(next.launch)].begin > gap_begin;
  if (launched_late)
    idle.host_wait_ns += gap;
  else if (gap < options.kernel_wait_threshold_ns)
    idle.kernel_wait_ns += gap;
  else
    idle.other_ns += gap;
}

}  // namespace

IdleResult compute_idle(const RankTimeline& t, const KernelsOptions& options) {
  IdleResult r;
  // Per stream (ops are sorted by begin, so each stream's ops are too).
  std::map<std::pair<uint32_t, uint32_t>, std::pair<StreamIdle, const Op*>> streams;
  for (const Op& o : t.ops) {
    auto [it, fresh] = streams.try_emplace({o.device, o.stream});
    auto& [s, prev] = it->second;
    if (fresh) s.device = o.device, s.stream = o.stream;
    if (prev && t.adjacent(prev->step, o.step)) book(s.idle, t, o, prev->end, options);
    if (!prev || o.end >= prev->end) prev = &o;
  }
  for (auto& [key, v] : streams) r.streams.push_back(v.first);

  // Per device: walk the ops in begin order keeping the end of the busy union so far. Where several
  // ops begin at the gap's end, the gap is host wait only when all of them were launched late.
  std::map<uint32_t, std::pair<int64_t, int64_t>> busy_until;  // device -> (end of union, its step)
  std::map<uint32_t, int64_t> window_begin;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    auto it = busy_until.find(o.device);
    if (it == busy_until.end()) {
      busy_until[o.device] = {o.end, o.step};
      window_begin[o.device] = o.begin;
      continue;
    }
    auto& [until, until_step] = it->second;
    if (o.begin > until) {
      if (t.adjacent(until_step, o.step)) {
        // The op that ends the gap: among those beginning now, the one launched earliest.
        const Op* next = &o;
        for (size_t j = i + 1; j < t.ops.size() && t.ops[j].begin == o.begin; ++j) {
          const Op& c = t.ops[j];
          if (c.device != o.device) continue;
          const int64_t lc = c.launch >= 0 ? t.launches[size_t(c.launch)].begin : INT64_MIN;
          const int64_t ln = next->launch >= 0 ? t.launches[size_t(next->launch)].begin : INT64_MIN;
          if (lc < ln) next = &c;
        }
        book(r.device, t, *next, until, options);
      } else {
        r.span_ns += until - window_begin[o.device];  // close the window before the untraced steps
        window_begin[o.device] = o.begin;
      }
    }
    if (o.end > until) until = o.end, until_step = o.step;
  }
  for (const auto& [device, v] : busy_until) r.span_ns += v.first - window_begin[device];
  const int64_t idle = r.device.total_ns();
  r.host_bound = r.span_ns > 0 && double(r.device.host_wait_ns) >= options.host_bound_share * double(r.span_ns) &&
                 r.device.host_wait_ns >= r.device.kernel_wait_ns && r.device.host_wait_ns >= r.device.other_ns &&
                 idle > 0;
  if (!t.traced_steps.empty())
    r.host_wait_ms_per_step = double(r.device.host_wait_ns) / 1e6 / double(t.traced_steps.size());
  return r;
}

}  // namespace rankscope::analyzers::device_timeline
