// step_timeline.cpp — loading and indexing the per-step timelines of step_timeline.h.
#include "step_timeline.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::analyzers::critical_path_detail {
namespace {

// One rank's stream, kept whole until it is cut into steps (kernels may be delivered in the record
// of the step after the one they ran in, so they are placed by time, not by record).
class RankReader : public format::EventStreamVisitor {
 public:
  RankReader(const CriticalPathOptions& options, const format::KernelClassifier& classifier) : options_(options), classifier_(classifier) {}

  void on_name(uint32_t id, format::NameKind kind, std::string_view name) override {
    if (names_.size() <= id) names_.resize(size_t(id) + 1), kinds_.resize(size_t(id) + 1);
    names_[id] = std::string(name);
    kinds_[id] = kind;
  }
  void on_clock(const format::ClockRecord& clock) override { offset_ = clock.offset_ns; }
  void on_step(const format::StepRecord& s) override {
    if (s.step < options_.first_step || s.step > options_.last_step) return;
    RankStep rs;
    rs.present = true;
    rs.begin_ns = s.begin_ns + offset_;
    rs.end_ns = s.end_ns + offset_;
    for (const format::CollectiveEvent& c : s.collectives) {
      TimelineCollective tc;
      tc.comm = name(c.comm_id);
      tc.seq = c.seq;
      tc.op = std::string(format::short_op_name(format::CollectiveOp(c.op)));
      tc.range = name(c.range_id);
      tc.enqueue_ns = c.enqueue_ns + offset_;
      tc.start_ns = (c.start_ns ? c.start_ns : c.enqueue_ns) + offset_;
      tc.end_ns = c.end_ns ? c.end_ns + offset_ : 0;
      rs.collectives.push_back(std::move(tc));
    }
    steps_.emplace_back(s.step, std::move(rs));
  }
  void on_trace_ranges(int64_t, std::span<const format::TraceRange> ranges) override {
    for (const format::TraceRange& r : ranges) {
      ranges_.push_back({r.tid, TimelineRange{name(r.name_id), r.begin_ns + offset_, r.end_ns + offset_, r.depth}});
      if (r.depth == 0) top_time_[r.tid] += r.end_ns - r.begin_ns;
    }
  }
  void on_trace_kernels(int64_t, std::span<const format::TraceKernel> kernels) override {
    for (const format::TraceKernel& k : kernels) {
      TimelineKernel tk;
      tk.name = name(k.name_id);
      tk.range = k.range_id ? name(k.range_id) : std::string();
      tk.stream = k.stream;
      tk.begin_ns = k.begin_ns + offset_;
      tk.end_ns = k.end_ns + offset_;
      tk.kind = kind_of(k.name_id);
      kernels_.push_back(std::move(tk));
    }
  }
  void on_trace_launches(int64_t, std::span<const format::TraceLaunch> launches) override {
    for (const format::TraceLaunch& l : launches)
      launch_end_[{l.stream, l.gpu_begin_ns + offset_}] = l.launch_end_ns + offset_;
  }

  // Cuts what was read into the steps; `out[step]` gets this rank's RankStep.
  void place(int rank, std::map<int64_t, std::vector<RankStep>>& out, size_t world) {
    uint32_t main_tid = 0;
    int64_t most = -1;
    for (auto [tid, ns] : top_time_)
      if (ns > most) most = ns, main_tid = tid;
    std::vector<TimelineRange> ranges;
    for (auto& [tid, r] : ranges_)
      if (tid == main_tid) ranges.push_back(std::move(r));
    auto by_begin = [](const auto& a, const auto& b) { return a.begin_ns < b.begin_ns; };
    std::sort(ranges.begin(), ranges.end(), by_begin);
    for (TimelineKernel& k : kernels_) {
      auto it = launch_end_.find({k.stream, k.begin_ns});
      if (it != launch_end_.end()) k.launch_end_ns = it->second;
    }
    std::sort(kernels_.begin(), kernels_.end(), by_begin);
    for (auto& step_and_rank_step : steps_) {
      // Named, not a structured binding: clang before 16 cannot capture a binding in the lambda below.
      RankStep& rs = step_and_rank_step.second;
      rs.rank = rank;
      // Everything that overlaps the step's window (a kernel still running from the step before counts).
      auto overlapping = [&](const auto& list, auto& into) {
        auto hi = std::lower_bound(list.begin(), list.end(), rs.end_ns, [](const auto& x, int64_t t) { return x.begin_ns < t; });
        for (auto it = list.begin(); it != hi; ++it)
          if (it->end_ns > rs.begin_ns) into.push_back(*it);
      };
      overlapping(ranges, rs.ranges);
      overlapping(kernels_, rs.kernels);
      std::vector<RankStep>& ranks = out[step_and_rank_step.first];
      if (ranks.size() < world) ranks.resize(world);
      ranks[size_t(rank)] = std::move(rs);
    }
  }

 private:
  std::string name(uint32_t id) const { return id < names_.size() ? names_[id] : std::string(); }
  format::KernelClass kind_of(uint32_t id) {
    auto it = class_.find(id);
    if (it == class_.end()) it = class_.emplace(id, classifier_.classify(name(id)).kind).first;
    return it->second;
  }

  const CriticalPathOptions& options_;
  const format::KernelClassifier& classifier_;
  int64_t offset_ = 0;
  std::vector<std::string> names_;
  std::vector<format::NameKind> kinds_;
  std::unordered_map<uint32_t, format::KernelClass> class_;
  std::vector<std::pair<int64_t, RankStep>> steps_;
  std::vector<std::pair<uint32_t, TimelineRange>> ranges_;
  std::map<uint32_t, int64_t> top_time_;
  std::vector<TimelineKernel> kernels_;
  std::map<std::pair<uint32_t, int64_t>, int64_t> launch_end_;
};

}  // namespace

void StepTimelines::finalize(int64_t touch_ns) {
  members.clear();
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankStep& rs = ranks[r];
    rs.rank = int(r);
    auto by_begin = [](const auto& a, const auto& b) { return a.begin_ns < b.begin_ns; };
    std::sort(rs.ranges.begin(), rs.ranges.end(), by_begin);
    std::sort(rs.kernels.begin(), rs.kernels.end(), by_begin);
    std::sort(rs.collectives.begin(), rs.collectives.end(), [](const auto& a, const auto& b) { return a.enqueue_ns < b.enqueue_ns; });
    // A communication kernel carries the collective whose device start it is (the importers and
    // the probe set a GPU collective's start_ns to its kernel's begin).
    for (TimelineKernel& k : rs.kernels) {
      if (k.kind != format::KernelClass::kCommunication) continue;
      int best = -1;
      int64_t best_gap = touch_ns + 1;
      for (size_t i = 0; i < rs.collectives.size(); ++i) {
        const int64_t gap = std::llabs(rs.collectives[i].start_ns - k.begin_ns);
        if (gap < best_gap) best_gap = gap, best = int(i);
      }
      if (best >= 0) {
        k.collective = best;
        rs.collectives[size_t(best)].on_device = true;
      }
    }
    for (size_t i = 0; i < rs.collectives.size(); ++i)
      members[{rs.collectives[i].comm, rs.collectives[i].seq}].emplace_back(int(r), int(i));
  }
}

Result<std::vector<StepTimelines>> load_step_timelines(const format::RunDirectory& run, const CriticalPathOptions& options,
                                                       const format::KernelClassifier& classifier,
                                                       std::vector<std::string>& problems) {
  const size_t world = size_t(std::max(run.world_size, 0));
  std::map<int64_t, std::vector<RankStep>> by_step;
  for (const format::RankFiles& files : run.ranks) {
    if (files.rank < 0 || size_t(files.rank) >= world) continue;
    if (!files.has_events()) continue;  // one line for all absent ranks, below
    RankReader reader(options, classifier);
    auto scanned = format::scan_rank_events(files, reader);
    if (!scanned.ok()) {
      problems.push_back(fmt::format("rank {}: {}", files.rank, scanned.status().user_text()));
      continue;
    }
    reader.place(files.rank, by_step, world);
  }
  std::vector<StepTimelines> steps;
  for (auto& [step, ranks] : by_step) {
    StepTimelines st;
    st.step = step;
    st.ranks = std::move(ranks);
    st.ranks.resize(world);
    st.finalize(options.touch_ns);
    steps.push_back(std::move(st));
  }
  return steps;
}

}  // namespace rankscope::analyzers::critical_path_detail
