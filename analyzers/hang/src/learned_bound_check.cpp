// learned_bound_check.cpp — "stuck" in seconds with no flags: a rank's open collective or step has
// run past the bound its own probe learned (the BoundSlots of its flight recorder), measured at the
// snapshot's reference time on rank 0's clock.
#include <fmt/format.h>

#include "analysis_parts.h"
#include "rankscope/format/clock.h"

namespace rankscope::analyzers::hang {
namespace {

void consider(std::optional<Detection>& best, double& best_ratio, int rank, std::string what, int64_t open_ns,
              const format::BoundSnapshot& b) {
  if (!b.armed() || open_ns <= b.bound_ns) return;
  const double ratio = double(open_ns) / double(b.bound_ns);
  if (best && ratio <= best_ratio) return;
  best_ratio = ratio;
  best = Detection{"learned_bound", rank, std::move(what), double(open_ns) / kNsPerSecond, double(b.bound_ns) / kNsPerSecond,
                   double(b.quantile_ns) / kNsPerSecond, b.samples, bound_basis(b)};
}

}  // namespace

std::string bound_basis(const format::BoundSnapshot& b) {
  if (b.quantile_permille == 1000 && b.samples == 0)
    return fmt::format("first step {:.1f} ms (start-up included)", double(b.quantile_ns) / 1e6);
  if (b.quantile_permille == 1000)
    return fmt::format("longest {:.1f} ms of {} {}", double(b.quantile_ns) / 1e6, b.samples,
                       b.kind == format::BoundKind::kStep ? (b.samples == 1 ? "step" : "steps")
                                                          : (b.samples == 1 ? "call" : "calls"));
  return fmt::format("p{:g} {:.1f} ms of {} {}", b.quantile_permille / 10.0, double(b.quantile_ns) / 1e6, b.samples,
                     b.kind == format::BoundKind::kStep ? "steps" : "calls");
}

std::optional<Detection> find_past_learned_bound(const std::vector<RankView>& views, int64_t reference_ns) {
  std::optional<Detection> best;
  double best_ratio = 0;
  for (const auto& v : views) {
    if (!v.readable() || v.finished || v.aborted || v.snap->bounds.empty()) continue;
    for (const auto& [comm, rec] : v.open) {
      const auto* b = v.snap->bound(format::BoundKind::kCollective, comm->name, rec->range);
      if (!b) continue;
      consider(best, best_ratio, v.rank,
               fmt::format("{} #{} on {} from {}", format::short_op_name(rec->op), rec->seq, comm->name,
                           rec->range.empty() ? "no range" : rec->range),
               format::sub_saturating(reference_ns, v.aligned(rec->enqueue_ns)), *b);
    }
    const auto& live = v.snap->live;
    if (!v.stack.empty() && v.stack.front() == "step" && live.step_begin_ns > 0)
      if (const auto* b = v.snap->bound(format::BoundKind::kStep))
        consider(best, best_ratio, v.rank, fmt::format("step {}", live.step), format::sub_saturating(reference_ns, v.aligned(live.step_begin_ns)), *b);
  }
  return best;
}

}  // namespace rankscope::analyzers::hang
