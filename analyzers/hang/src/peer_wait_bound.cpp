// peer_wait_bound.cpp — "stuck" in seconds with no flags where the learned bounds have no history
// yet (start-up, the first steps): every other member already waits in a collective that one rank
// never issued, and that rank has shown no activity for longer than the job's own evidence allows.
//
// The bound is max(floor, factor x scale), and the scale is the longest normal duration the job
// itself has shown for what the idle rank should be doing:
//   - inside a step, with a step duration learned anywhere among the ranks involved: the largest
//     step statistic they published (p95, or the longest of the first steps; not the start-up
//     step's, which is init, not a step): in a healthy run no rank goes factor x a whole step
//     without opening a range while every peer waits for it;
//   - inside a step, with none learned yet (the first step): how far into the step the waiters got
//     before they waited (the same program does the same work to get there);
//   - at start-up (step 0, outside any `step` range): the waiters' whole start-up, from process
//     start to the wait, x1: a rank idle longer than its peer took for all of start-up is behind
//     by more than start-up skew (first touch, loading) explains.
// The factor is smaller than the probe's learned bounds' (3, not 10) because the evidence is
// twofold: every other member is blocked on this rank, and this rank has not opened a range, or
// touched a collective, for that long (a working rank opens ranges many times a step). The waiters
// must have waited `min_wait_s` (they are blocked, not passing through). Is not: the learned
// per-rank bounds (learned_bound_check.cpp) or the --stuck-after rules (classifier.cpp).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "analysis_parts.h"
#include "rankscope/format/clock.h"

namespace rankscope::analyzers::hang {
namespace {

// The step statistic a rank published, in ns, with its wording; 0 when it learned none from
// training steps (the start-up step alone is init: no scale for a training step).
std::pair<int64_t, std::string> step_statistic(const RankView& v) {
  if (!v.readable()) return {0, ""};
  const auto* b = v.snap->bound(format::BoundKind::kStep);
  if (!b || b->quantile_ns <= 0 || b->samples == 0) return {0, ""};
  return {b->quantile_ns, fmt::format("rank {}'s {}", v.rank, bound_basis(*b))};
}

struct Scale {
  int64_t ns = 0;
  double factor = 0;
  std::string basis;
};

// A member inside the collective, with its own record of it (times on its own clock).
struct Waiter {
  const RankView* view = nullptr;
  const format::CollectiveSnapshot* rec = nullptr;
};

Scale scale_for(const RankView& idle, const std::vector<Waiter>& waiters, double factor) {
  Scale s;
  const bool in_step = !idle.stack.empty() && idle.stack.front() == "step";
  if (in_step) {
    s.factor = factor;
    for (const Waiter& w : waiters)
      if (auto [ns, words] = step_statistic(*w.view); ns > s.ns) s = {ns, factor, words};
    if (auto [ns, words] = step_statistic(idle); ns > s.ns) s = {ns, factor, words};
    if (s.ns > 0) {
      s.basis = fmt::format("{} x{:g}", s.basis, factor);
      return s;
    }
    // No training step learned (the first step, or learning off): how far into the step the
    // waiters got before they waited.
    for (const Waiter& w : waiters) {
      const int64_t begin = w.view->snap->live.step_begin_ns;
      if (begin > 0 && format::sub_saturating(w.rec->enqueue_ns, begin) > s.ns) s = {format::sub_saturating(w.rec->enqueue_ns, begin), factor, ""};
    }
    if (s.ns <= 0) return {};
    s.basis = fmt::format("the waiters reached it {:.1f} ms into the step, x{:g}", double(s.ns) / 1e6, factor);
    return s;
  }
  if (idle.snap->live.step > 0) return {};  // between steps (checkpoint, validation): no evidence of scale
  // Start-up: the waiters' whole start-up, once.
  s.factor = 1;
  for (const Waiter& w : waiters) {
    const int64_t start = w.view->snap->start_ns;
    if (start > 0 && format::sub_saturating(w.rec->enqueue_ns, start) > s.ns) s.ns = format::sub_saturating(w.rec->enqueue_ns, start);
  }
  if (s.ns <= 0) return {};
  s.basis = fmt::format("the waiters' whole start-up took {:.2f} s", double(s.ns) / kNsPerSecond);
  return s;
}

}  // namespace

std::optional<Detection> find_idle_past_peer_wait(const std::vector<RankView>& views,
                                                  const GroupList& groups, int64_t reference_ns,
                                                  const PeerWaitPolicy& policy, bool* pending) {
  const double floor_s = policy.floor_s;
  if (pending) *pending = false;
  const WaitGraph g = build_wait_graph(views, groups);
  // Thousands of edges share a few (comm, seq): who waits there, and how long, is worked out once.
  struct Blocked {
    bool all_wait = true;          // every member that issued it is inside it
    std::vector<Waiter> waiters;
    int64_t waited_ns = -1;        // the shortest wait among them
  };
  std::map<std::pair<std::string, uint64_t>, Blocked> blocked_at;
  std::set<std::pair<int, const Blocked*>> judged;
  std::optional<Detection> best;
  double best_ratio = 0;
  for (const auto& e : g.edges) {
    if (e.absent < 0 || e.absent >= int(views.size())) continue;
    const RankView& idle = views[e.absent];
    if (!idle.readable() || idle.finished || idle.aborted || idle.dead || idle.waiting()) continue;
    auto [it, fresh] = blocked_at.try_emplace({e.comm, e.seq});
    Blocked& b = it->second;
    if (fresh) {
      const GroupView* group = find_group(groups, e.comm);
      b.all_wait = group != nullptr;
      for (int m : group ? group->ranks : std::vector<int>{}) {
        if (m < 0 || m >= int(views.size())) continue;
        const RankView& mv = views[m];
        if (mv.readable() && mv.issued(e.comm) <= int64_t(e.seq)) continue;  // absent, like the idle rank
        if (!mv.readable() || !mv.inside(e.comm, e.seq)) {
          b.all_wait = false;
          break;
        }
        const auto* rec = mv.comm(e.comm)->find(e.seq);
        if (!rec) continue;
        b.waiters.push_back({&mv, rec});
        const int64_t waited = format::sub_saturating(reference_ns, mv.aligned(rec->enqueue_ns));
        b.waited_ns = b.waited_ns < 0 ? waited : std::min(b.waited_ns, waited);
      }
    }
    if (!judged.insert({idle.rank, &b}).second) continue;  // this rank at this collective: judged already
    if (!b.all_wait || b.waiters.empty() || b.waited_ns < int64_t(policy.min_wait_s * kNsPerSecond)) continue;
    const std::vector<Waiter>& waiters = b.waiters;
    const int64_t waited_ns = b.waited_ns;
    const Scale s = scale_for(idle, waiters, policy.factor);
    if (s.ns <= 0) continue;
    const double bound_s = std::max(floor_s, s.factor * double(s.ns) / kNsPerSecond);
    const double idle_s = double(format::sub_saturating(reference_ns, idle.last_activity_ns)) / kNsPerSecond;
    if (idle_s < bound_s) {
      if (pending) *pending = true;
      continue;
    }
    const double ratio = idle_s / bound_s;
    if (best && ratio <= best_ratio) continue;
    best_ratio = ratio;
    Detection d;
    d.by = "peer_wait";
    d.rank = idle.rank;
    d.what = fmt::format("rank {} idle in {} at step {} while {} {} in {} #{} on {} for {:.1f} s", idle.rank,
                         idle.stack.empty() ? std::string("no range") : idle.stack.back(), idle.snap->live.step,
                         waiters.size() == 1 ? "its peer" : fmt::format("{} peers", waiters.size()),
                         waiters.size() == 1 ? "waits" : "wait", format::short_op_name(waiters.front().rec->op), e.seq, e.comm,
                         double(waited_ns) / kNsPerSecond);
    d.open_s = idle_s;
    d.bound_s = bound_s;
    d.quantile_s = double(s.ns) / kNsPerSecond;
    d.basis = fmt::format("{}, floor {:g} s", s.basis, floor_s);
    best = d;
  }
  return best;
}

}  // namespace rankscope::analyzers::hang
