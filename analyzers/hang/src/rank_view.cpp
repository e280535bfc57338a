// rank_view.cpp — per-rank facts from a flight recorder snapshot.
#include "rank_view.h"

#include <algorithm>

namespace rankscope::analyzers::hang {

const std::string& RankView::innermost() const {
  static const std::string kNone;
  return stack.empty() ? kNone : stack.back();
}

const format::CommSnapshot* RankView::comm(const std::string& name) const {
  if (!snap) return nullptr;
  for (const auto& c : snap->comms)
    if (c.name == name) return &c;
  return nullptr;
}

bool RankView::inside(const std::string& comm, uint64_t seq) const {
  return std::any_of(open.begin(), open.end(), [&](const auto& o) { return o.first->name == comm && o.second->seq == seq; });
}

int64_t RankView::issued(const std::string& name) const {
  const auto* c = comm(name);
  return c ? int64_t(c->next_seq) : -1;
}

std::vector<RankView> build_rank_views(const format::RunDirectory& run, ProcessTable& processes) {
  std::vector<RankView> views(run.ranks.size());
  for (size_t i = 0; i < run.ranks.size(); ++i) {
    RankView& v = views[i];
    const auto& files = run.ranks[i];
    v.rank = files.rank;
    if (!files.flight) {
      v.missing_reason = files.flight_status.ok() ? "no flight recorder" : files.flight_status.message();
      continue;
    }
    const auto& s = *files.flight;
    v.snap = &s;
    v.offset_ns = s.live.clock_uncertainty_ns >= 0 ? s.live.clock_offset_ns : 0;
    v.finished = s.live.process_state == format::ProcessState::kFinished;
    v.aborted = s.live.process_state == format::ProcessState::kAborted;
    // A boot the table cannot speak for (locally: this machine's name booted another time; gathered:
    // a boot no node that answered has): pids mean nothing.
    v.liveness = processes.speaks_for_boot(s.host, s.boot_id) ? processes.liveness(s.host, s.pid) : Liveness::kUnknown;
    v.heartbeat_ns = v.aligned(s.live.heartbeat_ns);
    int64_t last = std::max(s.live.step_begin_ns, s.start_ns);
    if (const auto* main = s.main_thread()) {
      for (const auto& r : main->stack) {
        v.stack.emplace_back(r.name);
        v.innermost_begin_ns = v.aligned(r.begin_ns);
        last = std::max(last, r.begin_ns);
      }
    }
    for (const auto& c : s.comms) {
      for (const auto& rec : c.ring) {
        last = std::max({last, rec.enqueue_ns, rec.end_ns});
        const bool open = format::is_open(rec.state);
        if (open) v.open.emplace_back(&c, &rec);
      }
    }
    std::sort(v.open.begin(), v.open.end(), [](const auto& a, const auto& b) { return a.second->enqueue_ns < b.second->enqueue_ns; });
    if (!v.open.empty()) {
      v.pending_comm = v.open.front().first;
      v.pending = v.open.front().second;
    }
    v.last_activity_ns = v.aligned(last);
  }
  return views;
}

}  // namespace rankscope::analyzers::hang
