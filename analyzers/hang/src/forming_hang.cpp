// forming_hang.cpp — a hang that is still forming: one rank has stopped making progress and a peer
// already waits for it, while other ranks still drain work that does not need it yet.
//
// "No progress anywhere for stuck_after_s" misses this: the ranks that still drain keep the job's
// freshest activity recent. So a rank idle for at least stuck_after_s that some peer waits for
// (inside a collective the rank never issued) is a culprit now. Is not: the verdict's wording.
#include <algorithm>

#include "analysis_parts.h"

namespace rankscope::analyzers::hang {

std::vector<int> forming_hang_culprits(const std::vector<RankView>& views, const GroupList& groups,
                                       int64_t reference_ns, double idle_after_s) {
  const WaitGraph g = build_wait_graph(views, groups);
  std::vector<int> out;
  for (const auto& e : g.edges) {
    if (e.absent < 0 || e.absent >= int(views.size())) continue;
    const RankView& a = views[e.absent];
    if (!a.readable() || a.finished || a.waiting()) continue;  // waiting itself: downstream, not the source
    const double idle_s = double(format::sub_saturating(reference_ns, a.last_activity_ns)) / 1e9;
    if (idle_s >= idle_after_s) out.push_back(e.absent);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace rankscope::analyzers::hang
