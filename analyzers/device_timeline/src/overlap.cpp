// overlap.cpp — compute/communication overlap, HTA's way (communication_analysis.py): the
// communication kernels' intervals merged, the compute kernels' merged, and the share of the first
// union that the second covers. Memory operations are neither. Times are kept in ns (HTA rounds a
// sub-microsecond trace's begins up and ends down to whole microseconds first).
#include "analyses.h"
#include "intervals.h"

namespace rankscope::analyzers::device_timeline {

OverlapResult compute_overlap(const RankTimeline& t) {
  std::vector<Interval> comm, comp;
  for (const Op& o : t.ops) {
    if (o.kind == format::KernelClass::kCommunication)
      comm.emplace_back(o.begin, o.end);
    else if (o.kind == format::KernelClass::kCompute)
      comp.emplace_back(o.begin, o.end);
  }
  const std::vector<Interval> comm_union = merge_intervals(std::move(comm));
  const std::vector<Interval> comp_union = merge_intervals(std::move(comp));
  OverlapResult r;
  r.communication_ns = total_length(comm_union);
  r.compute_ns = total_length(comp_union);
  r.overlap_ns = intersection_length(comm_union, comp_union);
  if (r.communication_ns > 0) r.ratio = double(r.overlap_ns) / double(r.communication_ns);
  if (!t.traced_steps.empty())
    r.exposed_ms_per_step = double(r.communication_ns - r.overlap_ns) / 1e6 / double(t.traced_steps.size());
  return r;
}

}  // namespace rankscope::analyzers::device_timeline
