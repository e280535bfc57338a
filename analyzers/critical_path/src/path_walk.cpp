// path_walk.cpp — the backward walk of path_walk.h.
#include "path_walk.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace rankscope::analyzers::critical_path_detail {
namespace {

using Kind = PathSegment::Kind;
constexpr int kMaxMoves = 1'000'000;  // a bound on one step's walk, whatever the data

std::string collective_name(const TimelineCollective& c) { return fmt::format("{} {} #{}", c.op, c.comm, c.seq); }

class Walker {
 public:
  Walker(const StepTimelines& step, const CriticalPathOptions& options) : st_(step), touch_(options.touch_ns) {}

  StepPath run() {
    StepPath path;
    path.step = st_.step;
    int rank = -1;
    for (const RankStep& rs : st_.ranks) {
      if (!rs.present) continue;
      path.step_ns = std::max(path.step_ns, rs.end_ns - rs.begin_ns);
      if (rank < 0 || rs.end_ns > st_.ranks[size_t(rank)].end_ns) rank = rs.rank;
    }
    if (rank < 0) return path;
    path.end_rank = rank;
    const int64_t start = st_.ranks[size_t(rank)].end_ns;
    int64_t t = start;
    bool on_device = false;
    for (int moves = 0; moves < kMaxMoves; ++moves) {
      const RankStep& rs = st_.ranks[size_t(rank)];
      if (t <= rs.begin_ns) break;
      const Move m = on_device ? device_move(rs, t) : host_move(rs, t);
      if (m.rank != rank) ++path.hops;
      const bool stuck = m.t == t && m.rank == rank && m.on_device == on_device;  // no progress: stop
      rank = m.rank;
      t = m.t;
      on_device = m.on_device;
      if (m.done || stuck) break;
    }
    path.covered_ns = start - std::max(t, st_.ranks[size_t(rank)].begin_ns);
    std::reverse(segments_.begin(), segments_.end());
    path.segments = std::move(segments_);
    return path;
  }

 private:
  struct Move {
    int rank;
    int64_t t;
    bool on_device;
    bool done = false;
  };

  // Segments arrive latest first; a stretch that continues the previous one (same rank, kind and
  // name, touching) is merged into it.
  void add(int rank, Kind kind, int64_t begin, int64_t end, const std::string& name, const std::string& range) {
    if (end <= begin) return;
    if (!segments_.empty()) {
      PathSegment& later = segments_.back();
      if (later.rank == rank && later.kind == kind && later.name == name && later.begin_ns >= begin && later.begin_ns <= end) {
        later.begin_ns = begin;
        return;
      }
    }
    segments_.push_back(PathSegment{rank, kind, begin, end, name, range});
  }

  // The member of collective `c` of `rank` that reached it last: by start on the device, by
  // enqueue on the host. Returns (rank, its time); the rank itself when it was last or alone.
  std::pair<int, int64_t> last_member(int rank, const TimelineCollective& c, bool device) const {
    auto key = std::make_pair(c.comm, c.seq);
    int last = rank;
    int64_t at = device ? c.start_ns : c.enqueue_ns;
    auto it = st_.members.find(key);
    if (it == st_.members.end()) return {last, at};
    for (auto [r, i] : it->second) {
      const TimelineCollective& m = st_.ranks[size_t(r)].collectives[size_t(i)];
      const int64_t mt = device && m.on_device ? m.start_ns : m.enqueue_ns;
      if (mt > at) at = mt, last = r;
    }
    return {last, at};
  }

  Move host_move(const RankStep& rs, int64_t t) {
    // In a collective the host blocks in (no kernel carries it)?
    const TimelineCollective* in = nullptr;
    for (const TimelineCollective& c : rs.collectives) {
      if (c.on_device || c.end_ns <= 0 || c.enqueue_ns >= t || t > c.end_ns + touch_) continue;
      if (!in || c.enqueue_ns > in->enqueue_ns) in = &c;
    }
    if (in) {
      const int64_t seg_end = std::min(t, in->end_ns);
      auto [last, at] = last_member(rs.rank, *in, /*device=*/false);
      at = std::min(at, seg_end);
      if (last != rs.rank && at > in->enqueue_ns) {
        add(rs.rank, Kind::kCollective, at, seg_end, collective_name(*in), in->range);
        return {last, at, false};
      }
      add(rs.rank, Kind::kCollective, in->enqueue_ns, seg_end, collective_name(*in), in->range);
      return {rs.rank, in->enqueue_ns, false};
    }
    // The host returning as one of its kernels ends: it waited for the GPU.
    for (const TimelineKernel& k : rs.kernels) {
      if (k.begin_ns < t && k.end_ns <= t && k.end_ns >= t - touch_) return {rs.rank, t, true};
    }
    // Host work back to the last host collective's end, or the step's start.
    int64_t from = rs.begin_ns;
    for (const TimelineCollective& c : rs.collectives) {
      if (!c.on_device && c.end_ns > 0 && c.end_ns < t) from = std::max(from, c.end_ns);
    }
    name_host_time(rs, from, t);
    return {rs.rank, from, false, from <= rs.begin_ns};
  }

  // Host time [from, to) named by the innermost range open at each moment; added latest first.
  void name_host_time(const RankStep& rs, int64_t from, int64_t to) {
    std::vector<int64_t> cuts = {from, to};
    std::vector<const TimelineRange*> open;
    for (const TimelineRange& r : rs.ranges) {
      if (r.begin_ns >= to) break;  // sorted by begin
      if (r.end_ns <= from) continue;
      open.push_back(&r);
      if (r.begin_ns > from) cuts.push_back(r.begin_ns);
      if (r.end_ns < to) cuts.push_back(r.end_ns);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    static const std::string kNoRange = "(no range)";
    for (size_t i = cuts.size() - 1; i > 0; --i) {
      const int64_t b = cuts[i - 1], e = cuts[i];
      const TimelineRange* inner = nullptr;
      for (const TimelineRange* r : open) {
        if (r->begin_ns <= b && r->end_ns >= e && (!inner || r->depth > inner->depth || (r->depth == inner->depth && r->begin_ns > inner->begin_ns)))
          inner = r;
      }
      add(rs.rank, Kind::kHost, b, e, inner ? inner->name : kNoRange, inner ? inner->name : std::string());
    }
  }

  Move device_move(const RankStep& rs, int64_t t) {
    const TimelineKernel* best = nullptr;
    for (const TimelineKernel& k : rs.kernels) {
      if (k.begin_ns >= t) break;  // sorted by begin
      const int64_t e = std::min(k.end_ns, t);
      if (!best || e > std::min(best->end_ns, t) || (e == std::min(best->end_ns, t) && k.begin_ns > best->begin_ns)) best = &k;
    }
    if (!best || std::min(best->end_ns, t) < t - touch_) return {rs.rank, t, false};  // the GPU was idle: the host held it
    const TimelineKernel& k = *best;
    const int64_t end = std::min(k.end_ns, t);
    if (k.collective >= 0) {
      const TimelineCollective& c = rs.collectives[size_t(k.collective)];
      auto [last, at] = last_member(rs.rank, c, /*device=*/true);
      at = std::min(at, end);
      if (last != rs.rank && at > k.begin_ns) {
        add(rs.rank, Kind::kCollective, at, end, collective_name(c), c.range);
        const RankStep& other = st_.ranks[size_t(last)];
        for (const TimelineKernel& ok : other.kernels) {
          if (ok.collective >= 0 && other.collectives[size_t(ok.collective)].comm == c.comm &&
              other.collectives[size_t(ok.collective)].seq == c.seq)
            return what_held(other, ok);
        }
        return {last, at, false};  // its collective had no kernel there: the host reached it late
      }
      add(rs.rank, Kind::kCollective, k.begin_ns, end, collective_name(c), c.range);
    } else {
      add(rs.rank, Kind::kKernel, k.begin_ns, end, k.name, k.range);
    }
    return what_held(rs, k);
  }

  // What kept kernel `k` from starting earlier: its launch, the kernel before it, or the host.
  Move what_held(const RankStep& rs, const TimelineKernel& k) {
    const int64_t b = k.begin_ns;
    int64_t before = std::numeric_limits<int64_t>::min();
    for (const TimelineKernel& o : rs.kernels) {
      if (o.begin_ns >= b) break;
      if (&o != &k && o.end_ns <= b) before = std::max(before, o.end_ns);
    }
    if (k.launch_end_ns > 0 && k.launch_end_ns > before) {
      add(rs.rank, Kind::kLaunchDelay, std::min(k.launch_end_ns, b), b, k.name, k.range);
      return {rs.rank, std::min(k.launch_end_ns, b), false};
    }
    if (before >= b - touch_) return {rs.rank, b, true};
    return {rs.rank, b, false};
  }

  const StepTimelines& st_;
  const int64_t touch_;
  std::vector<PathSegment> segments_;  // latest first while walking
};

}  // namespace

StepPath walk_step(const StepTimelines& step, const CriticalPathOptions& options) { return Walker(step, options).run(); }

}  // namespace rankscope::analyzers::critical_path_detail
